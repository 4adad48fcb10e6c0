//! A message's arrival: a script run on the Redis node the request went to (the replies, the
//! release announcements, the checks the properties read), or a reply reaching the replica
//! that waits for it, or dropped when nobody waits for it any more.

use crate::config::Config;
use crate::mirror::AcquireReply;
use crate::redis::{Applied, touched_another_term};
use crate::replica::{Request, Role};
use crate::system::{Msg, State};

impl State {
    /// A term with `token` was granted: it must be higher than every one before.
    fn granted(&mut self, token: u64) {
        self.token_regressed |= token <= self.max_token;
        self.max_token = self.max_token.max(token);
    }

    /// Replicas whose guard would pass at this instant.
    pub fn passing(&self) -> Vec<u8> {
        self.replicas
            .iter()
            .filter(|r| r.check_passes(self.time))
            .map(|r| r.id)
            .collect()
    }

    pub fn deliver(&mut self, config: &Config, msg: Msg) {
        match msg {
            Msg::ToRedis {
                from,
                sent_at,
                node,
                confirmed,
                request,
            } => {
                let time = self.time;
                let Some(redis) = self.node_mut(node) else {
                    return;
                };
                // Keys whose TTL ran out are gone before the script runs: an expiry is no
                // write of this message's.
                redis.expire(time);
                let before = redis.data;
                let applied = redis.apply(config.sem, time, from, request);
                let after = redis.data;
                let to = from;
                match applied {
                    Applied::Acquire(reply) => {
                        // With one node every grant is ordered after the earlier ones, taken
                        // or not; with two writable nodes only the grants that make a term
                        // must be, and those are counted as the replica takes them.
                        if let AcquireReply::Acquired { token } = reply
                            && config.sentinel_failovers == 0
                        {
                            self.granted(token);
                        }
                        self.send(Msg::Acquired {
                            to,
                            sent_at,
                            confirmed,
                            reply,
                        });
                    }
                    Applied::Renew(reply) => {
                        if let Request::Renew { term } = request {
                            self.stale_write |= touched_another_term(&before, &after, term);
                        }
                        self.send(Msg::Renewed {
                            to,
                            sent_at,
                            confirmed,
                            reply,
                        });
                    }
                    Applied::Release(released) => {
                        if let Request::Release { term, .. } = request {
                            self.stale_write |= touched_another_term(&before, &after, term);
                        }
                        // Pub/sub pushes the announcement to the followers as the release
                        // runs (the model spares the network these messages: a follower that
                        // hears late just wakes at the holder's TTL, as one that never hears).
                        // Only those connected to that node hear it.
                        if let Some(term) = released {
                            for to in (0..config.replicas).filter(|to| *to != from) {
                                let replica = &mut self.replicas[usize::from(to)];
                                if replica.link.node != node {
                                    continue;
                                }
                                let now = replica.now(self.time);
                                replica.release_announced(now, term);
                            }
                        }
                    }
                }
            }
            Msg::Acquired {
                to,
                sent_at,
                confirmed,
                reply,
            } => {
                if !self.awaited(&msg) {
                    return;
                }
                if !confirmed {
                    let observed = self.replicas[usize::from(to)].observed;
                    let observed = observed.map(|(term, _)| term);
                    self.resend(config, to, sent_at, Request::Acquire { observed });
                    return;
                }
                if let AcquireReply::Acquired { token } = reply
                    && config.sentinel_failovers > 0
                {
                    self.granted(token);
                }
                let replica = &mut self.replicas[to as usize];
                let now = replica.now(self.time);
                replica.acquired(now, Some(reply));
                if matches!(replica.role, Role::Leader(_))
                    && self.handed_over_by.is_some_and(|by| by != to)
                {
                    self.handover_completed = true;
                    self.handed_over_by = None;
                }
            }
            Msg::Renewed {
                to,
                sent_at,
                confirmed,
                reply,
            } => {
                if !self.awaited(&msg) {
                    return;
                }
                let n = to as usize;
                if !confirmed {
                    if let Role::Leader(lead) = self.replicas[n].role {
                        self.resend(config, to, sent_at, Request::Renew { term: lead.term });
                    }
                    return;
                }
                let now = self.replicas[n].now(self.time);
                if let Err(reason) = self.replicas[n].renewed(now, Some(reply)) {
                    self.step_down(config, n, reason);
                }
            }
        }
    }

    /// Whether the replica a reply goes to still waits for it: the attempt it answers is the
    /// one in progress and has not timed out. A reply that is not awaited is dropped on
    /// arrival, and never will be again (clocks only move on, and a new attempt starts at a
    /// later instant than the one that timed out).
    fn awaited(&self, msg: &Msg) -> bool {
        match *msg {
            Msg::ToRedis { .. } => true,
            Msg::Acquired { to, sent_at, .. } => {
                let replica = &self.replicas[usize::from(to)];
                let timeout = crate::config::timing().acquire_timeout();
                replica.role == (Role::Acquiring { sent_at })
                    && replica.now(self.time) < sent_at.saturating_add(timeout)
            }
            Msg::Renewed { to, sent_at, .. } => {
                let replica = &self.replicas[usize::from(to)];
                let now = replica.now(self.time);
                matches!(replica.role, Role::Leader(lead)
                    if lead.renewing.is_some_and(|(s, timeout)| s == sent_at && now < s.saturating_add(timeout)))
            }
        }
    }

    /// Drops the replies nobody waits for any more: delivering one changes nothing, so the
    /// network need not keep it (nor count it against the messages that may stay in flight).
    pub fn drop_unawaited(&mut self) {
        let net = std::mem::take(&mut self.net);
        self.net = net.into_iter().filter(|m| self.awaited(m)).collect();
    }
}
