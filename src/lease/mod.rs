//! The Redis lease primitives: acquire, renew, release, observe and the release channel.
//!
//! No loops and no policy live here: each call is one round trip (plus a dial when needed),
//! bounded by the timeout its caller gives, and answers with an outcome or a typed error.
//! The safety rules are in the scripts (`scripts.rs`): compare-and-set on the owner id, a
//! fencing counter floored at the server's clock, and a cooldown after Redis lost its data.

mod connection;
mod error;
mod keys;
mod pubsub;
mod scripts;
mod target;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use redis::Value;

use crate::clock::{BootClock, BootInstant, SharedClock};
use connection::{Conn, Connection, Live};
pub use error::{LeaseError, Retry, redact_url};
pub use keys::{
    DEFAULT_KEY_PREFIX, FencingToken, LeaseKeys, LeaseName, NameError, OwnerId, identity_of,
    split_term,
};
pub use pubsub::{Release, ReleaseSubscription};
use scripts::{ACQUIRE_SCRIPT, OBSERVE_SCRIPT, RELEASE_SCRIPT, RENEW_SCRIPT};
pub use target::TlsFiles;
use target::{Access, Target};

use std::sync::Arc;

/// The Redis ACL rule for leasehold's user, with keys and channels under `key_prefix`: exactly
/// the commands leasehold sends (`EVALSHA`, `SCRIPT LOAD` after `NOSCRIPT`, `SUBSCRIBE` and
/// `PING` for the release channel, `INFO memory` for the eviction policy) and those its scripts
/// run (`INFO server` and `INFO replication` name the Redis process and dataset in the state
/// record; `PUBSUB NUMSUB` sizes the release herd). `WAIT` is added
/// when `--redis-wait-replicas` is used. Append `>password` (or `#sha256`) to set the password:
/// `ACL SETUSER leasehold <rule> >secret`.
pub fn minimal_acl_rule(key_prefix: &str, with_wait: bool) -> String {
    let wait = if with_wait { " +wait" } else { "" };
    format!(
        "on resetkeys ~{key_prefix}* resetchannels &{key_prefix}* -@all +evalsha +script|load +info|server +info|replication +info|memory +subscribe +ping +pubsub|numsub +get +set +pexpire +pttl +del +incr +time +publish{wait}"
    )
}

/// A secret string (a password): shown as `***` by `Debug` and `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; call only where it is handed to Redis.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Optional settings of a [`RedisLease`].
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// Prefix of every key (default [`DEFAULT_KEY_PREFIX`]).
    pub key_prefix: String,
    /// After Redis lost its data (or on a brand-new Redis), refuse every acquire for one lease
    /// duration, so that an old leader still inside its validity window cannot overlap a new
    /// one. Turn off only for a Redis whose persistence cannot lose an acknowledged write and
    /// that never fails over (`appendfsync always`, no replicas).
    pub cooldown_on_data_loss: bool,
    /// ACL user name (overrides one in the URL).
    pub username: Option<String>,
    /// Password (overrides one in the URL). Read it from a file; never pass it on a command line.
    pub password: Option<Secret>,
    /// TLS material for `rediss://` targets (CA bundle, client certificate and key).
    pub tls: Option<TlsFiles>,
    /// Password of the Sentinels, for `redis+sentinel://` targets whose Sentinels require one.
    pub sentinel_password: Option<Secret>,
    /// Wait for replicas to acknowledge each acquire and renew (`WAIT`): a term or renewal
    /// counts only once enough replicas have the write.
    pub wait_replicas: Option<WaitReplicas>,
    /// The clock for `t0` instants; the boot clock unless a test injects another.
    pub clock: SharedClock,
}

/// How many replicas must acknowledge a lease write, and how long to wait for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitReplicas {
    /// Replicas that must acknowledge.
    pub replicas: u32,
    /// How long `WAIT` may block.
    pub timeout: Duration,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        Self {
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            cooldown_on_data_loss: true,
            username: None,
            password: None,
            tls: None,
            sentinel_password: None,
            wait_replicas: None,
            clock: Arc::new(BootClock),
        }
    }
}

/// The lease was won: leadership starts now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The new fencing token, higher than every token of this lease before it.
    pub token: FencingToken,
    /// The instant just before the acquire was sent (the TTL cannot have started earlier).
    pub sent_at: BootInstant,
    /// The TTL that was set.
    pub ttl: Duration,
}

/// Who holds the lease, as seen by a follower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The holder's owner id (`<identity>-<uuid>`).
    pub owner: String,
    /// Time left on the lease's TTL as Redis reported it; `None` when the key has no TTL
    /// (written by something other than leasehold).
    pub remaining: Option<Duration>,
    /// The holder's fencing token, when known.
    pub token: Option<FencingToken>,
    /// The lease key is gone before its time (evicted, deleted) and the state record still
    /// names this term: nobody may take it before `remaining` has passed.
    pub vanished: bool,
}

impl Holder {
    /// The identity part of the owner id (the pod name).
    pub fn identity(&self) -> &str {
        identity_of(&self.owner)
    }

    /// The value the lease holds in this holder's term (`<owner id>#<token>`, or the owner
    /// alone for a value written by something else).
    pub fn term_value(&self) -> String {
        match self.token {
            Some(token) => format!("{}#{token}", self.owner),
            None => self.owner.clone(),
        }
    }
}

/// The outcome of an acquire. Losing the race is an outcome, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// We are the leader.
    Leader(Grant),
    /// Someone else holds it.
    HeldBy(Holder),
    /// Redis lost its data (or is new): nobody may acquire for `remaining`.
    CoolingDown {
        /// Time left in the cooldown, on Redis's clock.
        remaining: Duration,
        /// Whether this very call found the loss and started the cooldown.
        started: bool,
    },
}

/// The outcome of a renew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewed {
    /// Still ours; the TTL restarted no earlier than `sent_at`.
    Held {
        /// The instant just before the renew was sent.
        sent_at: BootInstant,
        /// The lease key had vanished before its time (evicted, deleted) while the state
        /// record still named our term; the renewal put it back.
        repaired: bool,
    },
    /// The lease holds another owner id or is gone.
    NotHeld,
}

/// The outcome of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// It was ours; it is deleted and followers were told.
    Released,
    /// It was not ours (any more); nothing was changed.
    NotHeld,
}

/// Redis's memory limit and eviction policy, from `INFO memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionPolicy {
    /// `maxmemory` in bytes; 0 for no limit.
    pub maxmemory: u64,
    /// `maxmemory_policy` as Redis names it (`noeviction`, `volatile-lru`, `allkeys-lru`, …).
    pub policy: String,
}

impl EvictionPolicy {
    /// Whether Redis may evict the lease under memory pressure: a limit is set and the policy
    /// evicts. Every evicting policy can take the lease key (it has a TTL); `allkeys-*` can take
    /// the state record too.
    pub fn may_evict(&self) -> bool {
        self.maxmemory > 0 && self.policy != "noeviction"
    }

    /// Reads the two fields from the text of `INFO memory`.
    pub fn parse(info: &str) -> Option<Self> {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
        };
        Some(Self {
            maxmemory: field("maxmemory")?.parse().ok()?,
            policy: field("maxmemory_policy")?.to_owned(),
        })
    }
}

/// The state of the data-loss cooldown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CooldownState {
    /// No cooldown is running.
    Idle,
    /// A cooldown is running with this much left.
    Running(Duration),
    /// The marker is missing or from another Redis process: the next acquire starts one.
    Pending,
}

/// A read-only look at the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The holder, if any.
    pub holder: Option<Holder>,
    /// The last fencing token handed out.
    pub token: Option<FencingToken>,
    /// The data-loss cooldown.
    pub cooldown: CooldownState,
}

/// One lease in Redis, seen by one owner.
pub struct RedisLease {
    conn: Connection,
    keys: LeaseKeys,
    name: LeaseName,
    owner: OwnerId,
    cooldown_on_data_loss: bool,
    wait_replicas: Option<WaitReplicas>,
    subscriptions: std::sync::atomic::AtomicUsize,
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
        let (target, access) = parse_target(redis_url, &options)?;
        let keys = LeaseKeys::new(&options.key_prefix, &name).map_err(|e| LeaseError::BadUrl {
            url: redact_url(redis_url),
            reason: e.to_string(),
        })?;
        Ok(Self {
            conn: Connection::new(target, access, keys.lease.clone()),
            keys,
            name,
            owner,
            cooldown_on_data_loss: options.cooldown_on_data_loss,
            wait_replicas: options.wait_replicas,
            subscriptions: std::sync::atomic::AtomicUsize::new(0),
            clock: options.clock,
        })
    }

    /// Maps a client error of primitive `op` to ours.
    fn fail(&self, op: &'static str) -> impl Fn(redis::RedisError) -> LeaseError + '_ {
        move |e| LeaseError::from_redis(op, &self.keys.lease, &e)
    }

    /// The release script on `conn`: compare-and-DEL of `term`'s value, then announce.
    async fn run_release(
        &self,
        op: &'static str,
        conn: &mut Conn,
        term: Term,
    ) -> Result<Value, LeaseError> {
        let (value, mode) = match term {
            Term::Of(token) => (self.owner.term(token), "term"),
            Term::Any => (self.owner.as_str().to_owned(), "any"),
        };
        RELEASE_SCRIPT
            .key(&self.keys.lease)
            .key(&self.keys.state)
            .arg(value)
            .arg(&self.keys.channel)
            .arg(mode)
            .invoke_async(conn)
            .await
            .map_err(self.fail(op))
    }

    /// With `WAIT` configured: how many replicas acknowledged the writes so far on `conn`;
    /// an error when fewer than wanted did.
    async fn await_replicas(
        &self,
        op: &'static str,
        conn: &mut connection::Conn,
    ) -> Result<(), LeaseError> {
        let Some(wait) = self.wait_replicas else {
            return Ok(());
        };
        let cmd = redis::cmd("WAIT")
            .arg(wait.replicas)
            .arg(millis(wait.timeout))
            .clone();
        let reply = conn
            .on_node_of(&self.keys.lease, cmd)
            .await
            .map_err(self.fail(op))?;
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

    /// Tries to take the lease for `ttl`.
    pub async fn acquire(&self, ttl: Duration, timeout: Duration) -> Result<Acquired, LeaseError> {
        self.acquire_observing(ttl, timeout, None).await
    }

    /// Tries to take the lease for `ttl`, as a follower that still observes `holder`: a holder
    /// it saw whose TTL has not run out by its own clock, and whose release it has not heard.
    /// Should the lease key and its record be gone, or the record's expiry have passed early (a
    /// forward step of the Redis host's clock), that holder's term is not taken.
    pub async fn acquire_observing(
        &self,
        ttl: Duration,
        timeout: Duration,
        holder: Option<&Holder>,
    ) -> Result<Acquired, LeaseError> {
        const OP: &str = "acquire";
        let observed = holder.map(Holder::term_value).unwrap_or_default();
        let observed = observed.as_str();
        let sent_at = self.clock.now();
        self.call(OP, timeout, |mut live| async move {
            let reply: Value = ACQUIRE_SCRIPT
                .key(&self.keys.lease)
                .key(&self.keys.fence)
                .key(&self.keys.state)
                .arg(self.owner.as_str())
                .arg(millis(ttl))
                .arg(if self.cooldown_on_data_loss { "1" } else { "0" })
                .arg(observed)
                .invoke_async(&mut live.conn)
                .await
                .map_err(self.fail(OP))?;
            let acquired =
                parse_acquire(&reply, sent_at, ttl).ok_or_else(|| protocol(OP, &reply))?;
            if let Acquired::Leader(grant) = acquired
                && let Err(too_few) = self.await_replicas(OP, &mut live.conn).await
            {
                // A term that the replicas may not have: give it back, best effort. Its own
                // term value: should this release land late, it cannot touch a later term.
                let _ = self
                    .run_release(OP, &mut live.conn, Term::Of(grant.token))
                    .await;
                return Err(too_few);
            }
            Ok(acquired)
        })
        .await
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
        let reply: Value = self
            .call(OP, timeout, |mut live| {
                let term = term.clone();
                async move {
                    let reply: Value = RENEW_SCRIPT
                        .key(&self.keys.lease)
                        .key(&self.keys.state)
                        .arg(term)
                        .arg(millis(ttl))
                        .invoke_async(&mut live.conn)
                        .await
                        .map_err(self.fail(OP))?;
                    if matches!(int(&reply), Some(1 | 2)) {
                        self.await_replicas(OP, &mut live.conn).await?;
                    }
                    Ok(reply)
                }
            })
            .await?;
        match int(&reply) {
            Some(1) => Ok(Renewed::Held {
                sent_at,
                repaired: false,
            }),
            Some(2) => Ok(Renewed::Held {
                sent_at,
                repaired: true,
            }),
            Some(0) => Ok(Renewed::NotHeld),
            _ => Err(protocol(OP, &reply)),
        }
    }

    /// Ends the term with `token` if the lease is still in it, and tells the followers on the
    /// channel. A release that lands late (after a timeout) cannot touch a later term.
    pub async fn release(
        &self,
        token: FencingToken,
        timeout: Duration,
    ) -> Result<Released, LeaseError> {
        self.release_term(Term::Of(token), timeout).await
    }

    /// Ends whatever term of this owner id the lease is in. Only for when no later term can
    /// follow (the process stops): an acquire whose answer never came leaves no token to name.
    pub async fn release_any_term(&self, timeout: Duration) -> Result<Released, LeaseError> {
        self.release_term(Term::Any, timeout).await
    }

    async fn release_term(&self, term: Term, timeout: Duration) -> Result<Released, LeaseError> {
        const OP: &str = "release";
        let reply: Value = self
            .call(OP, timeout, |mut live| async move {
                self.run_release(OP, &mut live.conn, term).await
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
                    .invoke_async(&mut live.conn)
                    .await
                    .map_err(self.fail(OP))
            })
            .await?;
        parse_observe(&reply).ok_or_else(|| protocol(OP, &reply))
    }

    /// Reads Redis's memory limit and eviction policy (`INFO memory`) on the node that holds
    /// the lease.
    pub async fn eviction_policy(&self, timeout: Duration) -> Result<EvictionPolicy, LeaseError> {
        const OP: &str = "info";
        let reply = self
            .call(OP, timeout, |mut live| async move {
                live.conn
                    .on_node_of(&self.keys.lease, redis::cmd("INFO").arg("memory").clone())
                    .await
                    .map_err(self.fail(OP))
            })
            .await?;
        text(&reply)
            .as_deref()
            .and_then(EvictionPolicy::parse)
            .ok_or_else(|| protocol(OP, &reply))
    }

    /// Runs one command within `timeout` (dialling included), and throws the connection away
    /// when the error says it can no longer be trusted. A kept connection that turns out dead
    /// (Redis restarted since the last call) gets one more try on a fresh one, inside the same
    /// timeout: every script is safe to repeat for its owner.
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
        let attempt = async {
            loop {
                let (live, fresh) = self.conn.get(op).await?;
                let result = command(live.clone()).await;
                match &result {
                    Err(e) if e.spoils_connection() => {
                        self.conn.discard(&live);
                        if !fresh.0 && matches!(e, LeaseError::Connection { .. }) {
                            continue;
                        }
                    }
                    _ => {}
                }
                return result;
            }
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(result) => result,
            Err(_) => {
                self.conn.discard_current();
                Err(LeaseError::Timeout { op, after: timeout })
            }
        }
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

/// Parses where the lease lives, with the access settings of `options`.
fn parse_target(redis_url: &str, options: &LeaseOptions) -> Result<(Target, Access), LeaseError> {
    let access = Access {
        username: options.username.clone(),
        password: options.password.clone(),
        tls: options.tls.clone(),
        sentinel_password: options.sentinel_password.clone(),
    };
    Ok((Target::parse(redis_url, &access)?, access))
}

/// Checks, without connecting, that `redis_url` and the TLS material of `options` make a
/// target: the checks [`RedisLease::new`] makes, for configuration to refuse bad input early.
pub fn check_target(redis_url: &str, options: &LeaseOptions) -> Result<(), LeaseError> {
    parse_target(redis_url, options).map(|_| ())
}

/// Milliseconds for Redis, at least 1 (a zero PX is an error there).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn protocol(op: &'static str, reply: &Value) -> LeaseError {
    LeaseError::Protocol {
        op,
        detail: format!("{reply:?}"),
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => text(v)?.parse().ok(),
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

fn token(v: &Value) -> Option<FencingToken> {
    int(v).and_then(|i| u64::try_from(i).ok()).map(FencingToken)
}

/// Maps a PTTL reply: `-1` no TTL, `-2` no key.
fn remaining(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

fn parse_acquire(reply: &Value, sent_at: BootInstant, ttl: Duration) -> Option<Acquired> {
    let Value::Array(items) = reply else {
        return None;
    };
    match (text(items.first()?)?.as_str(), &items[1..]) {
        ("ACQUIRED", [t]) => Some(Acquired::Leader(Grant {
            token: token(t)?,
            sent_at,
            ttl,
        })),
        ("HELD", [value, pttl, source]) => {
            Some(Acquired::HeldBy(holder(&text(value)?, int(pttl)?, source)?))
        }
        ("COOLDOWN", [ms, started]) => Some(Acquired::CoolingDown {
            remaining: Duration::from_millis(u64::try_from(int(ms)?).ok()?),
            started: int(started)? == 1,
        }),
        _ => None,
    }
}

/// The holder named by a lease value (from the key or the state record, as `source` says).
fn holder(value: &str, pttl: i64, source: &Value) -> Option<Holder> {
    let (owner, token) = split_term(value);
    Some(Holder {
        owner: owner.to_owned(),
        remaining: remaining(pttl),
        token,
        vanished: match text(source)?.as_str() {
            "KEY" => false,
            "RECORD" => true,
            _ => return None,
        },
    })
}

fn parse_observe(reply: &Value) -> Option<Observation> {
    let Value::Array(items) = reply else {
        return None;
    };
    let [value, pttl, fence, cooldown, source] = items.as_slice() else {
        return None;
    };
    let token = token(fence);
    let holder = match value {
        Value::Nil => None,
        v => Some(holder(&text(v)?, int(pttl)?, source)?),
    };
    let cooldown = match int(cooldown)? {
        -1 => CooldownState::Pending,
        0 => CooldownState::Idle,
        ms => CooldownState::Running(Duration::from_millis(u64::try_from(ms).ok()?)),
    };
    Some(Observation {
        holder,
        token,
        cooldown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn acquire_replies_map_to_outcomes() {
        let at = BootInstant::default();
        let ttl = Duration::from_secs(15);
        let cases = [
            (
                Value::Array(vec![bulk("ACQUIRED"), Value::Int(7)]),
                Some(Acquired::Leader(Grant {
                    token: FencingToken(7),
                    sent_at: at,
                    ttl,
                })),
            ),
            (
                Value::Array(vec![
                    bulk("HELD"),
                    bulk("b-1#6"),
                    Value::Int(900),
                    bulk("KEY"),
                ]),
                Some(Acquired::HeldBy(Holder {
                    owner: "b-1".into(),
                    remaining: Some(Duration::from_millis(900)),
                    token: Some(FencingToken(6)),
                    vanished: false,
                })),
            ),
            (
                Value::Array(vec![bulk("HELD"), bulk("x"), Value::Int(-1), bulk("KEY")]),
                Some(Acquired::HeldBy(Holder {
                    owner: "x".into(),
                    remaining: None,
                    token: None,
                    vanished: false,
                })),
            ),
            (
                Value::Array(vec![
                    bulk("HELD"),
                    bulk("b-1#8"),
                    Value::Int(400),
                    bulk("RECORD"),
                ]),
                Some(Acquired::HeldBy(Holder {
                    owner: "b-1".into(),
                    remaining: Some(Duration::from_millis(400)),
                    token: Some(FencingToken(8)),
                    vanished: true,
                })),
            ),
            (
                Value::Array(vec![bulk("HELD"), bulk("x"), Value::Int(1), bulk("WHO")]),
                None,
            ),
            (
                Value::Array(vec![bulk("COOLDOWN"), Value::Int(15000), Value::Int(1)]),
                Some(Acquired::CoolingDown {
                    remaining: Duration::from_secs(15),
                    started: true,
                }),
            ),
            (Value::Array(vec![bulk("ACQUIRED"), Value::Int(-3)]), None),
            (Value::Array(vec![bulk("WHAT")]), None),
            (Value::Array(vec![]), None),
            (Value::Int(1), None),
        ];
        for (reply, want) in cases {
            assert_eq!(parse_acquire(&reply, at, ttl), want, "{reply:?}");
        }
    }

    #[test]
    fn observe_replies_map_to_observations() {
        let empty = Value::Array(vec![
            Value::Nil,
            Value::Int(-2),
            Value::Nil,
            Value::Int(-1),
            bulk("KEY"),
        ]);
        assert_eq!(
            parse_observe(&empty),
            Some(Observation {
                holder: None,
                token: None,
                cooldown: CooldownState::Pending
            })
        );
        let held = Value::Array(vec![
            bulk("a-1#41"),
            Value::Int(1200),
            bulk("42"),
            Value::Int(0),
            bulk("KEY"),
        ]);
        let seen = parse_observe(&held).unwrap();
        let holder = seen.holder.unwrap();
        assert_eq!(holder.remaining, Some(Duration::from_millis(1200)));
        assert_eq!(
            (holder.owner.as_str(), holder.token),
            ("a-1", Some(FencingToken(41)))
        );
        assert_eq!(seen.token, Some(FencingToken(42)));
        assert_eq!(seen.cooldown, CooldownState::Idle);
        assert_eq!(parse_observe(&Value::Array(vec![Value::Nil])), None);
    }

    #[test]
    fn eviction_policies_are_read_from_info_memory() {
        let info = |max: &str, policy: &str| {
            format!(
                "# Memory\r\nused_memory:1000\r\nmaxmemory:{max}\r\nmaxmemory_human:3M\r\nmaxmemory_policy:{policy}\r\n"
            )
        };
        let cases = [
            ("0", "noeviction", false),
            ("0", "allkeys-lru", false),
            ("3145728", "noeviction", false),
            ("3145728", "volatile-lru", true),
            ("3145728", "volatile-ttl", true),
            ("3145728", "allkeys-random", true),
        ];
        for (max, policy, evicts) in cases {
            let p = EvictionPolicy::parse(&info(max, policy)).unwrap();
            assert_eq!(p.policy, policy);
            assert_eq!(p.may_evict(), evicts, "{max} {policy}");
        }
        assert_eq!(EvictionPolicy::parse("# Memory\r\nused_memory:1\r\n"), None);
        assert_eq!(
            EvictionPolicy::parse("maxmemory:x\r\nmaxmemory_policy:y\r\n"),
            None
        );
    }

    #[test]
    fn durations_become_at_least_one_millisecond() {
        assert_eq!(millis(Duration::from_micros(10)), 1);
        assert_eq!(millis(Duration::from_secs(15)), 15_000);
    }

    #[test]
    fn a_bad_url_is_refused_without_showing_its_password() {
        let name = LeaseName::new("ns/app").unwrap();
        let owner = OwnerId::generate("pod").unwrap();
        let err = RedisLease::new("http://:hunter2@host", name, owner, LeaseOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("bad Redis URL `http://:***@host`"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
    }
}
