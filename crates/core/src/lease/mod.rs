//! The Redis lease primitives: acquire, renew, release, observe and the release channel.
//!
//! No loops and no policy live here: each call is one round trip (plus a dial when needed),
//! bounded by the timeout its caller gives, and answers with an outcome or a typed error. The
//! safety rules are in the scripts (`scripts.rs`; docs/DESIGN.md, "How it works").

mod cluster;
mod connection;
mod error;
mod handover;
mod inspect;
mod kept;
mod keys;
mod options;
mod outcome;
mod pubsub;
// Public only to the model (`test-internals`), which counts the Sentinels' answers with it.
#[cfg(feature = "test-internals")]
#[doc(hidden)]
pub mod quorum;
#[cfg(not(feature = "test-internals"))]
mod quorum;
mod remove;
mod reply;
mod roster;
mod scripts;
mod sentinels;
mod target;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use redis::Value;
use redis::aio::MultiplexedConnection;

use crate::clock::SharedClock;
use crate::locked::locked;
use connection::{Connection, Dialled, Live, Sent};
pub use error::{LeaseError, Remedies, Retry, redact_url};
pub use handover::{HandoverRequested, Reservation};
pub use inspect::info_field;
pub use keys::{
    DEFAULT_KEY_PREFIX, FencingToken, LeaseKeys, LeaseName, NameError, OwnerId, identity_of,
    split_term,
};
pub use options::{LeaseOptions, PasswordSource, Secret, WaitReplicas, minimal_acl_rule};
pub use outcome::{
    Acquired, CooldownState, Grant, Holder, NotedRate, Observation, PreviousTerm, Protocol,
    Reading, Released, Renewal, Renewed,
};
pub use pubsub::{DATA_LOSS_NOTICE, HANDOVER_NUDGE, Heard, Release, ReleaseSubscription};
pub use remove::{InForce, Removal};
use reply::{int, millis, parse_acquire, parse_observe, parse_renew, protocol};
pub use scripts::PROTOCOL;
use scripts::{ACQUIRE_SCRIPT, OBSERVE_SCRIPT, RELEASE_SCRIPT, RENEW_SCRIPT};
// The scripts' text and the commands they call, for the model's mirror of them and the
// benchmark's count of commands (`test-internals`).
#[cfg(feature = "test-internals")]
#[doc(hidden)]
pub use scripts::{calls as script_calls, source as script_source};
pub use sentinels::check_sentinels;
pub use target::{RedisTarget, TlsFiles};

/// One lease in Redis, seen by one owner.
pub struct RedisLease {
    conn: Connection,
    keys: LeaseKeys,
    name: LeaseName,
    owner: OwnerId,
    cooldown_on_data_loss: bool,
    wait_replicas: Option<WaitReplicas>,
    subscriptions: std::sync::atomic::AtomicUsize,
    /// The longest lease duration Redis said a term runs, in ms (see [`RedisLease::longest_seen`]).
    longest_seen: std::sync::atomic::AtomicU64,
    /// Redis's `TIME` as the last acquire's reply carried it (see [`RedisLease::last_reading`]).
    last_reading: std::sync::Mutex<Option<Reading>>,
    /// The refusal of a Redis that fails over where that is unsafe (an acquire's or a
    /// renewal's), once seen.
    fails_over: std::sync::OnceLock<LeaseError>,
    /// A bound of Redis's clock rate for the next renewal to note in `:clock`.
    rate_note: std::sync::Mutex<Option<String>>,
    clock: SharedClock,
}

impl fmt::Debug for RedisLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLease")
            .field("lease", &self.keys.lease)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl RedisLease {
    /// Prepares the lease `name` for `owner` on the Redis at `redis_url` (`redis://`,
    /// `rediss://`, `unix://`, `redis+sentinel://`, `redis+cluster://`). Nothing connects
    /// yet: the first call dials, so a Redis that is down at start-up delays leadership
    /// instead of failing the process.
    pub fn new(
        redis_url: &str,
        name: LeaseName,
        owner: OwnerId,
        options: LeaseOptions,
    ) -> Result<Self, LeaseError> {
        Self::on(
            &RedisTarget::parse(redis_url, &options)?,
            name,
            owner,
            options,
        )
    }

    /// Prepares the lease `name` for `owner` on a target parsed before (with the credentials
    /// and TLS of the options it was parsed with; the rest of `options` is this lease's).
    /// Nothing connects yet, as with [`RedisLease::new`].
    pub fn on(
        target: &RedisTarget,
        name: LeaseName,
        owner: OwnerId,
        options: LeaseOptions,
    ) -> Result<Self, LeaseError> {
        let keys = LeaseKeys::new(&options.key_prefix, &name).map_err(|e| LeaseError::BadUrl {
            url: target.redacted_url().to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            conn: Connection::new(target, keys.lease.clone()),
            keys,
            name,
            owner,
            cooldown_on_data_loss: options.cooldown_on_data_loss,
            wait_replicas: options.wait_replicas,
            subscriptions: std::sync::atomic::AtomicUsize::new(0),
            longest_seen: std::sync::atomic::AtomicU64::new(0),
            last_reading: std::sync::Mutex::new(None),
            rate_note: std::sync::Mutex::new(None),
            fails_over: std::sync::OnceLock::new(),
            clock: options.clock,
        })
    }

    fn fail(&self, op: &'static str) -> impl Fn(redis::RedisError) -> LeaseError + '_ {
        move |e| self.conn.refusal(op, &e)
    }

    /// The release script on `conn`: compare-and-DEL of `term`'s value, then announce.
    async fn run_release(
        &self,
        op: &'static str,
        conn: &mut MultiplexedConnection,
        term: Term,
        reserve: Option<&Reservation>,
    ) -> Result<Value, LeaseError> {
        let (value, mode) = match term {
            Term::Of(token) => (self.owner.term(token), "term"),
            Term::Any => (self.owner.as_str().to_owned(), "any"),
        };
        RELEASE_SCRIPT
            .key(&self.keys.lease)
            .key(&self.keys.state)
            .key(&self.keys.handover)
            .key(&self.keys.reserved)
            .arg(value)
            .arg(&self.keys.channel)
            .arg(mode)
            .arg(reserve.map_or("", |r| r.identity.as_str()))
            .arg(reserve.map_or(1, |r| millis(r.duration)))
            .invoke_async(conn)
            .await
            .map_err(self.fail(op))
    }

    /// With `WAIT` configured: how many replicas acknowledged the writes so far on `conn`;
    /// an error when fewer than wanted did.
    async fn await_replicas(
        &self,
        op: &'static str,
        conn: &mut MultiplexedConnection,
    ) -> Result<(), LeaseError> {
        let Some(wait) = self.wait_replicas else {
            return Ok(());
        };
        let cmd = redis::cmd("WAIT")
            .arg(wait.replicas)
            .arg(millis(wait.timeout))
            .clone();
        let reply = cmd.query_async(conn).await.map_err(self.fail(op))?;
        let acked = int(&reply).ok_or_else(|| protocol(op, &reply))?;
        if acked < i64::from(wait.replicas) {
            return Err(LeaseError::TooFewReplicas {
                op,
                acked: acked.max(0) as u32,
                wanted: wait.replicas,
            });
        }
        Ok(())
    }

    /// The lease's name.
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// The lease's keys and channel.
    pub fn keys(&self) -> &LeaseKeys {
        &self.keys
    }

    /// Our owner id.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The clock `sent_at` instants are read from.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Whether an acquire that finds Redis lost its data starts the cooldown
    /// ([`LeaseOptions::cooldown_on_data_loss`]).
    pub fn cools_down_on_data_loss(&self) -> bool {
        self.cooldown_on_data_loss
    }

    /// Tries to take the lease for `ttl`.
    pub async fn acquire(&self, ttl: Duration, timeout: Duration) -> Result<Acquired, LeaseError> {
        self.acquire_observing(ttl, timeout, None, None).await
    }

    /// Tries to take the lease for `ttl`, as a follower that still observes `holder`, whose term
    /// the script then keeps (docs/DESIGN.md, "Followers keep what they saw"). `probe`: a number
    /// the script publishes first on this owner's probe channel, so that the try proves the
    /// subscription (see [`ReleaseSubscription`]).
    pub async fn acquire_observing(
        &self,
        ttl: Duration,
        timeout: Duration,
        holder: Option<&Holder>,
        probe: Option<u64>,
    ) -> Result<Acquired, LeaseError> {
        const OP: &str = "acquire";
        let observed = holder.map(Holder::term_value).unwrap_or_default();
        let observed = observed.as_str();
        let (probe_channel, probe) = match probe {
            Some(n) => (self.keys.probe_channel(&self.owner), n.to_string()),
            None => (String::new(), String::new()),
        };
        let (probe_channel, probe) = (probe_channel.as_str(), probe.as_str());
        // Refused once, for good (`refused_for_good`).
        if let Some(refused) = self.fails_over.get() {
            return Err(refused.clone());
        }
        let cover = millis(ttl.max(self.longest_seen()));
        let sent_at = self.clock.now();
        let lead = self.clock.wall_lead();
        let tried = self
            .call(OP, timeout, |mut live| async move {
                let mut conn = live.conn.clone();
                let script = async {
                    ACQUIRE_SCRIPT
                        .key(&self.keys.lease)
                        .key(&self.keys.fence)
                        .key(&self.keys.state)
                        .key(&self.keys.reserved)
                        .key(&self.keys.longest)
                        .key(&self.keys.protocol)
                        .key(&self.keys.handover)
                        .arg(self.owner.as_str())
                        .arg(millis(ttl))
                        .arg(if self.cooldown_on_data_loss { "1" } else { "0" })
                        .arg(observed)
                        .arg(self.owner.identity())
                        .arg(cover)
                        .arg(&self.keys.channel)
                        .arg(probe_channel)
                        .arg(probe)
                        .arg(PROTOCOL)
                        .arg(env!("CARGO_PKG_VERSION"))
                        .arg(if self.conn.is_single() { "1" } else { "0" })
                        .invoke_async::<Value>(&mut conn)
                        .await
                };
                let (reply, confirmed) = tokio::join!(script, self.conn.confirm_master(OP, &live));
                let reply = reply.map_err(self.fail(OP))?;
                let (acquired, redis_us, longest) =
                    parse_acquire(&reply, (sent_at, lead)).ok_or_else(|| protocol(OP, &reply))?;
                *locked(&self.last_reading) = Some(Reading {
                    sent: sent_at,
                    received: self.clock.now(),
                    redis_us,
                });
                self.longest_seen.fetch_max(
                    u64::try_from(longest.as_millis()).unwrap_or(u64::MAX),
                    std::sync::atomic::Ordering::Relaxed,
                );
                let Acquired::Leader(grant) = &acquired else {
                    return confirmed.map(|()| acquired);
                };
                // A term won on a node that is no longer the master Sentinel names, or that the
                // replicas may not have, does not count: give it back there, best effort, by its
                // own term value.
                let counts = match confirmed {
                    Ok(()) => self.await_replicas(OP, &mut live.conn).await,
                    replaced => replaced,
                };
                if counts.is_err() {
                    let _ = self
                        .run_release(OP, &mut live.conn, Term::Of(grant.token), None)
                        .await;
                }
                counts.map(|()| acquired)
            })
            .await;
        tried.inspect_err(|e| self.refused_for_good(e))
    }

    /// Keeps a refusal of a Redis that fails over ([`LeaseError::FailsOver`]) for every later
    /// acquire, as the acquire's own: the Sentinels' links to a master cut off from them close
    /// within minutes, and a count of none would then let a try in on the deposed master.
    fn refused_for_good(&self, err: &LeaseError) {
        if let LeaseError::FailsOver { detail, .. } = err {
            let (op, detail) = ("acquire", detail.clone());
            let _ = self.fails_over.set(LeaseError::FailsOver { op, detail });
        }
    }

    /// Extends the term with `token` by `ttl` if the lease is still in that term.
    pub async fn renew(
        &self,
        token: FencingToken,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Renewed, LeaseError> {
        const OP: &str = "renew";
        let sent_at = self.clock.now();
        let term = self.owner.term(token);
        let note = locked(&self.rate_note).take().unwrap_or_default();
        let (term, note) = (term.as_str(), note.as_str());
        let reply: Value = self
            .call(OP, timeout, |mut live| async move {
                let mut conn = live.conn.clone();
                let script = async {
                    RENEW_SCRIPT
                        .key(&self.keys.lease)
                        .key(&self.keys.state)
                        .key(&self.keys.handover)
                        .key(&self.keys.longest)
                        .key(&self.keys.clock)
                        .arg(term)
                        .arg(millis(ttl))
                        .arg(&self.keys.channel)
                        .arg(note)
                        .arg(if self.conn.is_single() { "1" } else { "0" })
                        .invoke_async::<Value>(&mut conn)
                        .await
                };
                let (reply, confirmed) = tokio::join!(script, self.conn.confirm_master(OP, &live));
                let reply = reply.map_err(self.fail(OP))?;
                confirmed?;
                if !matches!(
                    parse_renew(&reply, sent_at, true),
                    Some(Renewed::NotHeld { .. }) | None
                ) {
                    self.await_replicas(OP, &mut live.conn).await?;
                }
                Ok(reply)
            })
            .await
            .inspect_err(|e| self.refused_for_good(e))?;
        parse_renew(&reply, sent_at, !self.conn.is_cluster()).ok_or_else(|| protocol(OP, &reply))
    }

    /// Ends the term with `token` if the lease is still in it, and tells the followers on the
    /// channel. A release that lands late (after a timeout) cannot touch a later term.
    pub async fn release(
        &self,
        token: FencingToken,
        timeout: Duration,
    ) -> Result<Released, LeaseError> {
        self.release_term(Term::Of(token), None, timeout).await
    }

    /// Ends whatever term of this owner id the lease is in. Only for when no later term can
    /// follow (the process stops): an acquire whose answer never came leaves no token to name.
    pub async fn release_any_term(&self, timeout: Duration) -> Result<Released, LeaseError> {
        self.release_term(Term::Any, None, timeout).await
    }

    async fn release_term(
        &self,
        term: Term,
        reserve: Option<&Reservation>,
        timeout: Duration,
    ) -> Result<Released, LeaseError> {
        const OP: &str = "release";
        let reply: Value = self
            .call(OP, timeout, |mut live| async move {
                self.run_release(OP, &mut live.conn, term, reserve).await
            })
            .await?;
        match int(&reply) {
            Some(1) => Ok(Released::Released),
            Some(0) => Ok(Released::NotHeld),
            _ => Err(protocol(OP, &reply)),
        }
    }

    /// Reads the holder, the last token and the cooldown, changing nothing.
    pub async fn observe(&self, timeout: Duration) -> Result<Observation, LeaseError> {
        const OP: &str = "observe";
        let reply: Value = self
            .call(OP, timeout, |mut live| async move {
                OBSERVE_SCRIPT
                    .key(&self.keys.lease)
                    .key(&self.keys.fence)
                    .key(&self.keys.state)
                    .key(&self.keys.reserved)
                    .key(&self.keys.protocol)
                    .key(&self.keys.clock)
                    .invoke_async(&mut live.conn)
                    .await
                    .map_err(self.fail(OP))
            })
            .await?;
        parse_observe(&reply).ok_or_else(|| protocol(OP, &reply))
    }

    /// Runs one command within `timeout` (dialling included), and throws the connection away
    /// when the error says it can no longer be trusted, or when no answer was read (the timeout
    /// ran out, or the caller gave up on the call). A kept connection that turns out dead
    /// (Redis restarted since the last call), or on a node that is a replica now (a failover
    /// behind one address), gets one more try on a fresh one, inside the same timeout: every
    /// script is safe to repeat for its owner, and a replica wrote nothing.
    async fn call<'a, T, F, Fut>(
        &'a self,
        op: &'static str,
        timeout: Duration,
        command: F,
    ) -> Result<T, LeaseError>
    where
        F: Fn(Live) -> Fut,
        Fut: Future<Output = Result<T, LeaseError>> + 'a,
    {
        let connected = std::sync::atomic::AtomicBool::new(false);
        // The Sentinels' round is decided a little before the call ends (`DECIDE_BY`), and no
        // second try starts after that: its error would hide the first's.
        let decide_by = tokio::time::Instant::now() + timeout.mul_f64(0.95);
        let attempt = async {
            loop {
                let (live, dialled) = self.conn.get(op).await?;
                connected.store(true, std::sync::atomic::Ordering::Relaxed);
                let sent = Sent(&self.conn, Some(live.clone()));
                let mut result = command(live.clone()).await;
                if let Err(LeaseError::WrongType { keys, found, .. }) = &mut result {
                    *keys = self.keys.written().into_iter().map(str::to_owned).collect();
                    *found = self.wrong_types(live.clone()).await;
                }
                sent.answered();
                if let Err(e) = &result
                    && e.spoils_connection()
                {
                    self.conn.discard(&live);
                    if dialled == Dialled::Earlier
                        && tokio::time::Instant::now() < decide_by
                        && matches!(
                            e,
                            LeaseError::Connection { .. } | LeaseError::ReadOnly { .. }
                        )
                    {
                        continue;
                    }
                }
                return result;
            }
        };
        let attempt = sentinels::DECIDE_BY.scope(decide_by, attempt);
        let result = match tokio::time::timeout(timeout, attempt).await {
            Ok(result) => result,
            // The attempt dropped its connection, if it had one (`Sent`).
            Err(_) => Err(LeaseError::Timeout { op, after: timeout }),
        };
        self.conn.explain(result, connected.into_inner())
    }
}

/// Which term a release names.
#[derive(Debug, Clone, Copy)]
enum Term {
    /// The term with this token.
    Of(FencingToken),
    /// Any term of our owner id.
    Any,
}

#[cfg(test)]
mod tests;
