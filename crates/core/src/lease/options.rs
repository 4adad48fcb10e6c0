//! What a lease is given: the ACL rule its Redis user needs, secrets, and the optional settings.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Remedies;
use super::keys::DEFAULT_KEY_PREFIX;
use super::target::TlsFiles;
use crate::clock::{BootClock, SharedClock};

/// The Redis ACL rule for leasehold's user, with keys and channels under `key_prefix`: exactly
/// the commands leasehold and its scripts send, and `WAIT` when `with_wait` (docs/REFERENCE.md,
/// "ACL user with least privilege"). Append `>password` (or `#sha256`) to set the password.
/// A prefix's glob characters are escaped: the rule's patterns are globs.
pub fn minimal_acl_rule(key_prefix: &str, with_wait: bool) -> String {
    let wait = if with_wait { " +wait" } else { "" };
    let mut escaped = String::with_capacity(key_prefix.len());
    for c in key_prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    format!(
        "on resetkeys ~{escaped}* resetchannels &{escaped}* -@all +select +evalsha +script|load +info|server +info|replication +info|memory +subscribe +ping +pubsub|numsub +get +set +pexpire +pttl +type +del +incr +time +publish{wait}"
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

/// Where the password comes from when it may change while the lease runs (a mounted Secret's
/// file, which Kubernetes updates in place): asked again only when Redis refuses the password,
/// so that a rotation needs no restart.
pub trait PasswordSource: fmt::Debug + Send + Sync {
    /// After Redis refused `in_use`: the password the source holds now, when it is another.
    fn changed(&self, in_use: Option<&Secret>) -> Option<Secret>;
}

/// Optional settings of a [`RedisLease`](super::RedisLease).
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// Prefix of every key (default [`DEFAULT_KEY_PREFIX`]).
    pub key_prefix: String,
    /// Cool down one lease duration after Redis lost its data (docs/DESIGN.md, "Data loss").
    /// Off only for a Redis that cannot lose an acknowledged write and never fails over.
    pub cooldown_on_data_loss: bool,
    /// ACL user name (overrides one in the URL).
    pub username: Option<String>,
    /// Password (overrides one in the URL). Read it from a file; never pass it on a command line.
    pub password: Option<Secret>,
    /// Where `password` came from (the first dial uses `password`): asked for another when
    /// Redis refuses the one in use, and dialled with when it has one.
    pub password_source: Option<Arc<dyn PasswordSource>>,
    /// What a refused password or an untrusted certificate says of the caller's side.
    pub remedies: Remedies,
    /// TLS material for `rediss://` targets (CA bundle, client certificate and key).
    pub tls: Option<TlsFiles>,
    /// Password of the Sentinels, for `redis+sentinel://` targets whose Sentinels require one.
    pub sentinel_password: Option<Secret>,
    /// Accept a `redis+sentinel://` target whose hosts resolve to fewer than three Sentinels or
    /// an even number, said once at warn level (docs/REFERENCE.md, "How many Sentinels").
    pub allow_unsafe_sentinel_count: bool,
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
            password_source: None,
            remedies: Remedies::default(),
            tls: None,
            sentinel_password: None,
            allow_unsafe_sentinel_count: false,
            wait_replicas: None,
            clock: Arc::new(BootClock),
        }
    }
}
