//! Asking the Sentinels which node is the master: every Sentinel at once, and an answer counts
//! only when a majority of them names the same master ([`Tally`]). Why a majority is needed and
//! enough: docs/DESIGN.md, "Sentinel".
//!
//! Each ask runs as a task of its own, bounded by [`SENTINEL_TIMEOUT`]. One still under way when
//! a majority answered goes on to its bound (a frozen Sentinel's kept connection is dropped by
//! its own timeout); one under way when the caller gives up on the round is cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use redis::Client;
use redis::aio::MultiplexedConnection;
use tokio::task::JoinSet;
use tracing::warn;

use super::quorum::{Addr, Tally, Verdict};
use super::roster::{self, Member};
use super::target::{
    Access, RedisTarget, SENTINEL_TIMEOUT, SentinelTarget, Target, connect_node, node_at,
};
use super::{LeaseError, info_field};
use crate::locked::locked;

/// Why an ask of a Sentinel failed, and whether and how the Sentinel refused leasehold.
type Failed = (String, Option<Refusal>);

/// A Sentinel's refusal, which lasts until someone fixes it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Of the Sentinel password.
    Credentials,
    /// Of a command its ACL does not allow.
    Permission,
}

tokio::task_local! {
    /// When a round of asks must be decided, set by a call a little before its own timeout:
    /// Sentinels that have not answered by then are said as such, not as a Redis that is slow.
    pub(crate) static DECIDE_BY: tokio::time::Instant;
}

fn failed(e: redis::RedisError) -> Failed {
    let refusal = match e.code() {
        _ if super::error::refuses_credentials(&e) => Some(Refusal::Credentials),
        Some("NOPERM") => Some(Refusal::Permission),
        _ => None,
    };
    (e.to_string(), refusal)
}

/// The Sentinels of one target, and the connections kept to them.
pub(crate) struct Sentinels {
    target: SentinelTarget,
    /// Credentials and TLS for the Sentinels themselves (the nodes' are the caller's).
    access: Access,
    /// Who the Sentinels are, as last resolved.
    roster: Mutex<Roster>,
    /// A resolution is under way in the background.
    resolving: AtomicBool,
    /// The unsafe count was said (once).
    warned: AtomicBool,
    /// Connections to the Sentinels, kept between asks, each with the id of the Sentinel that
    /// answered it (`SENTINEL MYID`).
    conns: Mutex<HashMap<Member, (MultiplexedConnection, Arc<str>)>>,
}

/// The Sentinels as last resolved.
#[derive(Default)]
struct Roster {
    members: Arc<[Member]>,
    /// The most Sentinels ever resolved at once: the majority is counted from it, so that a
    /// resolution that finds fewer (a pod away) cannot lower the bar.
    counted: usize,
    /// An ask failed since the last resolution: resolve again before the next round.
    stale: bool,
    /// A resolution found a count the rule accepts: a later one that breaks it is no
    /// misconfiguration (docs/REFERENCE.md, "How many Sentinels").
    kept_the_rule: bool,
}

/// A master a majority of the Sentinels named, which said so on `conn`.
pub(crate) struct Master {
    pub(crate) client: Client,
    pub(crate) conn: MultiplexedConnection,
    pub(crate) addr: Addr,
}

impl Sentinels {
    /// The Sentinels of `target`, asked with the Sentinel password and TLS of `nodes`.
    pub(crate) fn new(target: SentinelTarget, nodes: &Access) -> Self {
        let access = Access {
            password: nodes.sentinel_password.clone(),
            tls: nodes.tls.clone(),
            ..Access::default()
        };
        Self {
            target,
            access,
            roster: Mutex::new(Roster::default()),
            resolving: AtomicBool::new(false),
            warned: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
        }
    }

    /// The master's name, as the Sentinels know it.
    pub(crate) fn master(&self) -> &str {
        &self.target.master
    }

    /// The master a majority of the Sentinels names, once the node there says it is the
    /// master (a promotion may still be under way), reached with `access`. `refused` makes a
    /// node's error the lease's (a refused password, read anew).
    pub(crate) async fn find_master(
        self: &Arc<Self>,
        op: &'static str,
        access: &Access,
        refused: impl Fn(&redis::RedisError) -> LeaseError,
    ) -> Result<Master, LeaseError> {
        let addr = self.majority_named(op).await?;
        self.master_at(op, addr, access, refused).await
    }

    /// Asks every Sentinel at once and returns the address a majority of them names, as soon
    /// as one does; fails as soon as none can (see [`Tally`]).
    pub(crate) async fn majority_named(
        self: &Arc<Self>,
        op: &'static str,
    ) -> Result<Addr, LeaseError> {
        let (members, count) = self.members(op).await?;
        let mut tally = Tally::new(count);
        // Counted before but not among the addresses the names resolve to now: silent.
        for _ in members.len()..count {
            tally.failed("a Sentinel counted before is not among the addresses now".to_owned());
        }
        let mut asking = JoinSet::new();
        for member in members.iter().cloned() {
            let sentinels = Arc::clone(self);
            asking.spawn(async move {
                let answer = sentinels.named_master(&member).await;
                (member, answer)
            });
        }
        // Asks still under way when this returns go on to their own bound: detached.
        let mut refused = Vec::new();
        // One Sentinel at two addresses (a Service's beside its pod's) counts once: by its id.
        let mut counted: HashMap<Arc<str>, Member> = HashMap::new();
        // Outside a call, each ask's own bound ends the round.
        let by = DECIDE_BY.try_with(|by| *by);
        let by = by.unwrap_or_else(|_| tokio::time::Instant::now() + SENTINEL_TIMEOUT * 2);
        let verdict = loop {
            match tally.verdict() {
                Verdict::Open => {}
                decided => break decided,
            }
            let joined = match tokio::time::timeout_at(by, asking.join_next()).await {
                Ok(Some(joined)) => joined,
                Ok(None) => break Verdict::NoMajority,
                Err(_) => {
                    tally.failed(format!("{} did not answer in time", asking.len()));
                    break Verdict::NoMajority;
                }
            };
            match joined {
                Ok((member, Ok((addr, id)))) => match counted.get(&id) {
                    Some(first) => tally.failed(format!(
                        "sentinel {member} is the Sentinel at {first} again, counted once"
                    )),
                    None => {
                        counted.insert(id, member);
                        tally.named(addr);
                    }
                },
                Ok((member, Err((e, refusal)))) => {
                    refused.extend(refusal);
                    tally.failed(format!("sentinel {member}: {e}"));
                }
                Err(e) => tally.failed(format!("an ask of a Sentinel ended: {e}")),
            }
        };
        asking.detach_all();
        let Verdict::Named(addr) = verdict else {
            let detail = format!(
                "no majority ({} of {}) of the Sentinels names master `{}`: {}",
                tally.majority(),
                count,
                self.target.master,
                tally.describe()
            );
            // A refusal that keeps any majority out lasts until someone fixes the password or
            // the ACL; one beside a Sentinel that is down is an outage a term may outlive.
            let of = |kind| refused.iter().filter(|r| **r == kind).count();
            let (credentials, commands) = (of(Refusal::Credentials), of(Refusal::Permission));
            return Err(if tally.refused_a_majority(credentials) {
                LeaseError::Authentication {
                    op,
                    detail: format!(
                        "{credentials} Sentinels refused the Sentinel password; {detail}"
                    ),
                }
            } else if tally.refused_a_majority(credentials + commands) {
                LeaseError::NoPermission {
                    op,
                    detail: format!(
                        "{commands} Sentinels refused a command: their ACL must allow `sentinel|get-master-addr-by-name` and `sentinel|myid`; {detail}"
                    ),
                }
            } else {
                LeaseError::Connection { op, detail }
            });
        };
        Ok(addr)
    }

    /// The Sentinels to ask and the number the majority is counted from. Resolves their names
    /// first when they never were; starts a resolution in the background when an ask failed
    /// since the last one (this round asks those known). Refuses an unsafe count unless the
    /// options accept it.
    async fn members(
        self: &Arc<Self>,
        op: &'static str,
    ) -> Result<(Arc<[Member]>, usize), LeaseError> {
        let (known, stale) = {
            let roster = locked(&self.roster);
            (!roster.members.is_empty(), roster.stale)
        };
        if !known {
            // In a task of its own: should this call's timeout end first (a slow resolver), the
            // resolution still lands for the next call instead of starting over.
            let sentinels = Arc::clone(self);
            tokio::spawn(async move { sentinels.resolve().await })
                .await
                .map_err(|e| format!("resolving the Sentinels ended: {e}"))
                .and_then(|resolved| resolved)
                .map_err(|detail| LeaseError::Connection { op, detail })?;
        } else if stale && !self.resolving.swap(true, Ordering::AcqRel) {
            let sentinels = Arc::clone(self);
            tokio::spawn(async move {
                // A failed resolution keeps the Sentinels known, and the next round tries again.
                let _ = sentinels.resolve().await;
                sentinels.resolving.store(false, Ordering::Release);
            });
        }
        let (members, count, kept_the_rule) = {
            let roster = locked(&self.roster);
            (
                Arc::clone(&roster.members),
                roster.counted,
                roster.kept_the_rule,
            )
        };
        if !kept_the_rule && let Some(weakness) = roster::weakness(count) {
            if !self.target.unsafe_count_allowed {
                // Resolve again before the next call: the names may stand for more by then.
                locked(&self.roster).stale = true;
                return Err(LeaseError::BadUrl {
                    url: self.target.url.clone(),
                    reason: roster::refusal(count, &members).unwrap_or(weakness),
                });
            }
            if !self.warned.swap(true, Ordering::AcqRel) {
                warn!(
                    redis = %self.target.url,
                    sentinels = count,
                    addresses = %roster::list(&members),
                    detail = %weakness,
                    "an unsafe number of Sentinels is accepted"
                );
            }
        }
        Ok((members, count))
    }

    /// Resolves the URL's hosts into the Sentinels, and drops the connections to any that is
    /// no longer among them.
    async fn resolve(&self) -> Result<(), String> {
        let members: Arc<[Member]> = roster::resolve(&self.target.sentinels, self.target.tls)
            .await?
            .into();
        {
            let mut roster = locked(&self.roster);
            roster.counted = roster.counted.max(members.len());
            roster.kept_the_rule |= roster::weakness(members.len()).is_none();
            roster.members = Arc::clone(&members);
            roster.stale = false;
        }
        locked(&self.conns).retain(|member, _| members.contains(member));
        Ok(())
    }

    /// A connection to Sentinel `member` and the id of the Sentinel it reaches, kept from an
    /// earlier ask; or one dialled now, without its id yet.
    async fn conn(
        &self,
        member: &Member,
    ) -> Result<(MultiplexedConnection, Option<Arc<str>>), Failed> {
        if let Some((conn, id)) = locked(&self.conns).get(member) {
            return Ok((conn.clone(), Some(Arc::clone(id))));
        }
        let (host, tls) = (member.host(), self.target.tls);
        let client = node_at(&host, member.addr.port(), 0, tls, &self.access)
            .map_err(|e| (e.to_string(), None))?;
        Ok((connect_node(&client).await.map_err(failed)?, None))
    }

    /// Keeps a connection to Sentinel `member` that answered `SENTINEL MYID` with `id`.
    fn keep(&self, member: &Member, conn: MultiplexedConnection, id: String) -> Arc<str> {
        let kept = (conn, Arc::<str>::from(id));
        let mut conns = locked(&self.conns);
        if let Some((first, _)) = conns
            .iter()
            .find(|(m, (_, i))| *i == kept.1 && *m != member)
        {
            warn!(sentinel = %member, same_as = %first, id = %kept.1, "two of the Sentinels' addresses answer with one SENTINEL MYID; they count once in the majority");
        }
        conns.insert(member.clone(), kept.clone());
        kept.1
    }

    /// The master's address as Sentinel `member` names it, and that Sentinel's id, within
    /// [`SENTINEL_TIMEOUT`]. A connection that failed or timed out is not kept, and the names
    /// are resolved again before the next round (the Sentinel may have moved).
    async fn named_master(&self, member: &Member) -> Result<(Addr, Arc<str>), Failed> {
        let ask = async {
            let (conn, id) = self.conn(member).await?;
            let mut asking = conn.clone();
            let mut named = redis::cmd("SENTINEL");
            named
                .arg("get-master-addr-by-name")
                .arg(&self.target.master);
            let addr = named.query_async::<Option<Addr>>(&mut asking);
            // A new connection's id is asked beside its first ask: one round trip for both.
            let (addr, id) = match id {
                Some(id) => (addr.await, id),
                None => {
                    let (mut myid, mut naming) = (redis::cmd("SENTINEL"), conn.clone());
                    myid.arg("MYID");
                    let (addr, myid) = tokio::join!(addr, myid.query_async(&mut naming));
                    (addr, self.keep(member, conn, myid.map_err(failed)?))
                }
            };
            let addr = addr.map_err(failed)?.ok_or_else(|| {
                (
                    format!("does not know master `{}`", self.target.master),
                    None,
                )
            })?;
            Ok((addr, id))
        };
        let answer = tokio::time::timeout(SENTINEL_TIMEOUT, ask)
            .await
            .map_err(|_| (format!("no answer within {SENTINEL_TIMEOUT:?}"), None))
            .and_then(|answer| answer);
        if answer.is_err() {
            locked(&self.conns).remove(member);
            locked(&self.roster).stale = true;
        }
        answer
    }

    /// A connection to the master at `addr`, once it says it is one; bounded by the caller's
    /// call alone, with no shorter bound of the client's own (a slow link may still hold a
    /// lease).
    async fn master_at(
        &self,
        op: &'static str,
        addr: Addr,
        access: &Access,
        refused: impl Fn(&redis::RedisError) -> LeaseError,
    ) -> Result<Master, LeaseError> {
        let (host, port) = &addr;
        let at_master = |detail: &dyn std::fmt::Display| LeaseError::Connection {
            op,
            detail: format!("master {host}:{port}: {detail}"),
        };
        // A connection's failure names the master; a refusal is said as Redis's.
        let failed = |e: redis::RedisError| match refused(&e) {
            LeaseError::Connection { detail, .. } => at_master(&detail),
            other => other,
        };
        let client = node_at(host, port, self.target.db, self.target.tls, access)
            .map_err(|e| at_master(&e))?;
        let mut conn = connect_node(&client).await.map_err(failed)?;
        // `INFO replication`, not `ROLE`: leasehold's ACL rule allows the one, not the other.
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .map_err(failed)?;
        if info_field(&info, "role") != Some("master") {
            return Err(at_master(&"not a master (yet)"));
        }
        Ok(Master { client, conn, addr })
    }
}

/// For a `redis+sentinel://` URL: resolves its hosts now (each within a bound, off the
/// runtime's threads) and refuses, as a bad URL, a host that does not resolve and a count of
/// Sentinels that is not odd and three or more, unless `options` accept that count. The rule
/// every lease on the URL keeps while it runs, checked at start. Other URLs: nothing to check.
pub async fn check_sentinels(target: &RedisTarget) -> Result<(), LeaseError> {
    let Target::Sentinel(target) = &target.target else {
        return Ok(());
    };
    let bad = |reason: String| LeaseError::BadUrl {
        url: target.url.clone(),
        reason,
    };
    let members = roster::resolve(&target.sentinels, target.tls)
        .await
        .map_err(|e| {
            bad(format!(
                "{e}; the Sentinels are counted at start, from the addresses the hosts resolve to"
            ))
        })?;
    match roster::refusal(members.len(), &members) {
        Some(refusal) if !target.unsafe_count_allowed => Err(bad(refusal)),
        _ => Ok(()),
    }
}
