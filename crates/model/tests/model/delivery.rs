//! A message's arrival: a script run on the Redis node the request went to (the replies, the
//! release announcements, the checks the properties read), or a reply reaching the replica
//! that waits for it, or dropped when nobody waits for it any more.

use crate::config::Config;
use crate::link::{Health, Request};
use crate::mirror::AcquireReply;
use crate::redis::{Applied, touched_another_term};
use crate::replica::{Renewal, Role};
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
                let timings = self.replicas[usize::from(from)].timings;
                let health = self.replicas[usize::from(from)].health;
                if health == Health::Refused && matches!(request, Request::Renew { .. }) {
                    // Refused before the script runs: nothing is written.
                    self.send(Msg::Renewed {
                        to: from,
                        sent_at,
                        confirmed,
                        reply: Renewal::Refused,
                    });
                    return;
                }
                let Some(redis) = self.node_mut(node) else {
                    return;
                };
                // Keys whose TTL ran out are gone before the script runs: an expiry is no
                // write of this message's.
                redis.expire(time);
                let before = redis.data;
                let applied = redis.apply(config, time, from, timings, request);
                let after = redis.data;
                let to = from;
                // A late replica's replies arrive after its attempt gave up on them: they leave
                // the network at once (nobody awaits them), so they are not sent. What the
                // script did stands, announcements and notices included.
                let late = health == Health::Late;
                match applied {
                    Applied::Acquire(acquisition) => {
                        let reply = acquisition.reply;
                        // With one node every grant is ordered after the earlier ones, taken
                        // or not; with two writable nodes only the grants that make a term
                        // must be, and those are counted as the replica takes them.
                        if let AcquireReply::Acquired { token } = reply
                            && config.sentinel_failovers == 0
                        {
                            self.granted(token);
                        }
                        if matches!(reply, AcquireReply::Acquired { .. })
                            && config.loss_after_following
                        {
                            let ttl = timings.ttl_ms();
                            self.longest_granted_ms = self.longest_granted_ms.max(ttl);
                        }
                        // A claim no longer than the replica's own lease duration changes nothing
                        // it knows (`Replica::knows_ms`): the model carries it as 0.
                        let longest_ms = Some(acquisition.longest_ms)
                            .filter(|ms| *ms > timings.ttl_ms())
                            .unwrap_or(0);
                        if !late {
                            self.send(Msg::Acquired {
                                to,
                                sent_at,
                                confirmed,
                                reply,
                                longest_ms,
                            });
                        }
                        // The notice reaches every replica connected to that node as the
                        // script runs, the finder too (it is subscribed like the others).
                        if acquisition.data_loss.is_some() {
                            for replica in &mut self.replicas {
                                if replica.link.node == node {
                                    let now = replica.now(self.time);
                                    replica.told_data_loss(now);
                                }
                            }
                        }
                    }
                    Applied::Renew(reply) => {
                        if let Request::Renew { term } = request {
                            self.stale_write |= touched_another_term(&before, &after, term);
                        }
                        if !late {
                            self.send(Msg::Renewed {
                                to,
                                sent_at,
                                confirmed,
                                reply: Renewal::Ran(reply),
                            });
                        }
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
                    Applied::Observe(holder) => {
                        if !late {
                            self.send(Msg::Observed {
                                to,
                                sent_at,
                                confirmed,
                                holder,
                            });
                        }
                    }
                }
            }
            Msg::Acquired {
                to,
                sent_at,
                confirmed,
                reply,
                longest_ms,
            } => {
                if !self.awaited(&msg) {
                    return;
                }
                // The client remembers the longest claim before it looks at the node's
                // confirmation (`RedisLease::acquire_observing`).
                let held_ms = match reply {
                    AcquireReply::Held { term, pttl_ms, .. } if pttl_ms >= 0 => {
                        self.replicas[usize::from(term.owner)].timings.ttl_ms()
                    }
                    _ => 0,
                };
                let replica = &mut self.replicas[usize::from(to)];
                // The same call sent anew on another connection carries the same arguments.
                let again = Request::Acquire {
                    observed: replica.observed.map(|(term, _)| term),
                    cover_ms: replica.knows_ms(),
                };
                replica.longest_seen = replica.longest_seen.max(longest_ms);
                if config.loss_after_following {
                    replica.followed_ms = replica.followed_ms.max(held_ms);
                }
                if !confirmed {
                    self.resend(config, to, sent_at, again);
                    return;
                }
                if let AcquireReply::Acquired { token } = reply
                    && config.sentinel_failovers > 0
                {
                    self.granted(token);
                }
                let replica = &mut self.replicas[to as usize];
                let now = replica.now(self.time);
                let rate = config.rate(replica.timings);
                replica.acquired(now, Some(reply), config.acquire_again_when_unknown, rate);
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
                let rate = config.rate(self.replicas[n].timings);
                if let Err(reason) = self.replicas[n].renewed(now, Some(reply), rate) {
                    self.step_down(config, n, reason);
                }
            }
            Msg::Observed {
                to,
                sent_at,
                confirmed,
                holder,
            } => {
                if !self.awaited(&msg) {
                    return;
                }
                if !confirmed {
                    self.resend(config, to, sent_at, Request::Observe);
                    return;
                }
                let now = self.replicas[usize::from(to)].now(self.time);
                if let Some(release) = self.replicas[usize::from(to)].observed(now, Some(holder)) {
                    self.request(config, to, now, release);
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
                let timeout = replica.timing().acquire_timeout();
                matches!(replica.role, Role::Acquiring { sent_at: s, .. } if s == sent_at)
                    && replica.now(self.time) < sent_at.saturating_add(timeout)
            }
            Msg::Renewed { to, sent_at, .. } => {
                let replica = &self.replicas[usize::from(to)];
                let now = replica.now(self.time);
                matches!(replica.role, Role::Leader(lead)
                    if lead.renewing.is_some_and(|(s, timeout)| s == sent_at && now < s.saturating_add(timeout)))
            }
            Msg::Observed { to, sent_at, .. } => {
                let replica = &self.replicas[usize::from(to)];
                let timeout = replica.timing().call_timeout();
                matches!(replica.role, Role::Observing { sent_at: s } if s == sent_at)
                    && replica.now(self.time) < sent_at.saturating_add(timeout)
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
