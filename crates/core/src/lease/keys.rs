//! Names on the Redis side: the lease name, its keys and channel, owner ids and fencing tokens.

use std::fmt;

use uuid::Uuid;

/// The default prefix of every key leasehold writes.
pub const DEFAULT_KEY_PREFIX: &str = "leasehold:";

/// Why a lease name, key prefix or identity was refused. `what` says which value ("lease
/// name", "key prefix" or "identity"); lengths are in bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The value is empty.
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    /// The value is longer than the limit.
    #[error("{what} `{value}` is {len} bytes long; the limit is {max}")]
    TooLong {
        what: &'static str,
        value: String,
        len: usize,
        max: usize,
    },
    /// The operating system gave no random bytes for the owner id's UUID.
    #[error(
        "cannot make an owner id: the system gave no random bytes ({reason}); is /dev/urandom there?"
    )]
    NoRandomness { reason: String },
    /// The value holds a character that is not allowed.
    #[error("{what} `{value}` contains {found:?}; {rule}")]
    BadCharacter {
        what: &'static str,
        value: String,
        found: char,
        rule: &'static str,
    },
}

const BRACES_RULE: &str = "braces, whitespace and control characters are not allowed: the lease name is the Redis Cluster hash tag of every key, and a key prefix or an identity is one word of the keys and values leasehold writes";

fn check(what: &'static str, value: &str, max: usize, allow_empty: bool) -> Result<(), NameError> {
    if value.is_empty() && !allow_empty {
        return Err(NameError::Empty { what });
    }
    if value.len() > max {
        return Err(NameError::TooLong {
            what,
            value: value.to_owned(),
            len: value.len(),
            max,
        });
    }
    if let Some(found) = value
        .chars()
        .find(|c| matches!(c, '{' | '}') || c.is_whitespace() || c.is_control())
    {
        return Err(NameError::BadCharacter {
            what,
            value: value.to_owned(),
            found,
            rule: BRACES_RULE,
        });
    }
    Ok(())
}

/// The name of a lease, by convention `<namespace>/<deployment>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseName(String);

impl LeaseName {
    /// Longest accepted name: a namespace (63) + `/` + a Deployment name (253).
    pub const MAX_LEN: usize = 317;

    /// Validates `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
        let name = name.into();
        check("lease name", &name, Self::MAX_LEN, false)?;
        Ok(Self(name))
    }

    /// The lease of Deployment `deployment` in `namespace`.
    pub fn for_deployment(namespace: &str, deployment: &str) -> Result<Self, NameError> {
        Self::new(format!("{namespace}/{deployment}"))
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LeaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The Redis keys and the channel of one lease: `<prefix>{<name>}` and that with a suffix, so
/// that one script can touch them all in one Cluster slot. What each holds and when it expires:
/// docs/DEPLOY.md, "Uninstalling"; the state record's format: `scripts/record.lua`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseKeys {
    /// The lease itself: value the holder's term value, with a TTL.
    pub lease: String,
    /// `:fence`, the fencing counter.
    pub fence: String,
    /// `:state`, the lease's state record.
    pub state: String,
    /// The pub/sub channel on which a release is announced (and a handover request nudged).
    pub channel: String,
    /// `:handover`, a handover request: `<term value> <identity or ->`.
    pub handover: String,
    /// `:reserved`, a handover's reservation: the identity that alone may acquire.
    pub reserved: String,
    /// `:longest`, the longest lease duration of recent terms, and the last data loss found.
    pub longest: String,
    /// `:protocol`: `<version> <release>`, the [`PROTOCOL`](super::PROTOCOL) of the keys.
    pub protocol: String,
    /// `:clock`, the leader's measure of Redis's rate: `<term value> <low> <high> <time_us>`.
    pub clock: String,
}

impl LeaseKeys {
    /// Every key that leasehold writes for the lease (not the channel), in a fixed order.
    pub fn written(&self) -> Vec<&str> {
        vec![
            &self.lease,
            &self.fence,
            &self.state,
            &self.handover,
            &self.reserved,
            &self.longest,
            &self.protocol,
            &self.clock,
        ]
    }

    /// The channel on which `owner`'s own tries publish a probe, heard on its own subscription:
    /// `<prefix>{<name>}:probe:<owner id>`. It starts with the lease, so an ACL rule that lets
    /// the channel through (`&<prefix>*`) lets this one through too.
    pub fn probe_channel(&self, owner: &OwnerId) -> String {
        format!("{}:probe:{owner}", self.lease)
    }

    /// Longest accepted key prefix.
    pub const MAX_PREFIX_LEN: usize = 128;

    /// Checks that `prefix` can start the keys of a lease (not too long, no braces, whitespace
    /// or control characters; empty is allowed).
    pub fn check_prefix(prefix: &str) -> Result<(), NameError> {
        check("key prefix", prefix, Self::MAX_PREFIX_LEN, true)
    }

    /// Builds the keys of `name` under `prefix` (use [`DEFAULT_KEY_PREFIX`] unless you share a
    /// Redis between installations that must not see each other).
    pub fn new(prefix: &str, name: &LeaseName) -> Result<Self, NameError> {
        Self::check_prefix(prefix)?;
        let lease = format!("{prefix}{{{name}}}");
        Ok(Self {
            fence: format!("{lease}:fence"),
            state: format!("{lease}:state"),
            channel: format!("{lease}:released"),
            handover: format!("{lease}:handover"),
            reserved: format!("{lease}:reserved"),
            longest: format!("{lease}:longest"),
            protocol: format!("{lease}:protocol"),
            clock: format!("{lease}:clock"),
            lease,
        })
    }
}

/// The value a holder writes into the lease: `<identity>-<uuid v4>`, new at every process start,
/// so that two processes with the same identity (a pod restarted in place) never mistake each
/// other's lease for their own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerId(String);

impl OwnerId {
    /// Longest accepted identity (a pod name is at most 253 bytes).
    pub const MAX_IDENTITY_LEN: usize = 253;

    /// Checks that `identity` can start an owner id (not empty, not too long, no braces,
    /// whitespace or control characters).
    pub fn check_identity(identity: &str) -> Result<(), NameError> {
        check("identity", identity, Self::MAX_IDENTITY_LEN, false)
    }

    /// A fresh owner id for `identity`. Fails (instead of panicking) when the OS has no
    /// randomness to give, as in a container without `/dev/urandom`.
    pub fn generate(identity: &str) -> Result<Self, NameError> {
        use rand::TryRngCore;
        Self::check_identity(identity)?;
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng
            .try_fill_bytes(&mut bytes)
            .map_err(|e| NameError::NoRandomness {
                reason: e.to_string(),
            })?;
        let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
        Ok(Self(format!("{identity}-{uuid}")))
    }

    /// The owner id as stored in Redis.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The identity part.
    pub fn identity(&self) -> &str {
        identity_of(&self.0)
    }

    /// The value the lease holds during this owner's term with `token`: `<owner id>#<token>`.
    /// It names one term, not only the process, so that a renewal or release sent in one term
    /// and landing late cannot touch a later term of the same process.
    pub fn term(&self, token: FencingToken) -> String {
        format!("{}#{token}", self.0)
    }
}

/// Splits a lease value into the owner id and the term's token: `<owner id>#<token>`, or the
/// whole value and no token when it is not of that form (a key written by something else, also
/// `cron-lock#12`: an owner id ends in a UUID).
pub fn split_term(value: &str) -> (&str, Option<FencingToken>) {
    match value.rsplit_once('#') {
        Some((owner, digits))
            if identity_of(owner) != owner
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            match digits.parse() {
                Ok(token) => (owner, Some(FencingToken(token))),
                Err(_) => (value, None),
            }
        }
        _ => (value, None),
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity part of an owner id read from Redis: everything before the trailing
/// `-<uuid>`, or the whole value when it does not end in one (a key written by something else).
pub fn identity_of(owner: &str) -> &str {
    const UUID_LEN: usize = 36;
    if owner.len() > UUID_LEN + 1 && owner.is_char_boundary(owner.len() - UUID_LEN - 1) {
        let (head, tail) = owner.split_at(owner.len() - UUID_LEN - 1);
        if tail.starts_with('-') && Uuid::parse_str(&tail[1..]).is_ok() {
            return head;
        }
    }
    owner
}

/// A number that grows with every new leadership of a lease, also across Redis data loss.
/// Pass it with every write to a resource that can refuse stale tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub u64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_lease_name_as_hash_tag() {
        let name = LeaseName::for_deployment("prod", "billing").unwrap();
        let keys = LeaseKeys::new(DEFAULT_KEY_PREFIX, &name).unwrap();
        assert_eq!(keys.lease, "leasehold:{prod/billing}");
        assert_eq!(keys.fence, "leasehold:{prod/billing}:fence");
        assert_eq!(keys.state, "leasehold:{prod/billing}:state");
        assert_eq!(keys.channel, "leasehold:{prod/billing}:released");
        assert_eq!(keys.handover, "leasehold:{prod/billing}:handover");
        assert_eq!(keys.reserved, "leasehold:{prod/billing}:reserved");
        let owner = OwnerId("pod-a-1b4e".to_owned());
        assert_eq!(
            keys.probe_channel(&owner),
            "leasehold:{prod/billing}:probe:pod-a-1b4e"
        );
    }

    #[test]
    fn names_that_would_break_the_hash_tag_are_refused() {
        let cases = [
            ("", "must not be empty"),
            ("a{b", "contains '{'"),
            ("a}b", "contains '}'"),
            ("a b", "contains ' '"),
            ("a\nb", "contains '\\n'"),
        ];
        for (name, expected) in cases {
            let err = LeaseName::new(name).unwrap_err().to_string();
            assert!(err.contains(expected), "{name:?}: {err}");
        }
        let long = "x".repeat(LeaseName::MAX_LEN + 1);
        assert!(
            LeaseName::new(long)
                .unwrap_err()
                .to_string()
                .contains("limit is 317")
        );
    }

    #[test]
    fn owner_ids_are_unique_and_keep_the_identity() {
        let a = OwnerId::generate("pod-a").unwrap();
        let b = OwnerId::generate("pod-a").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.identity(), "pod-a");
        assert!(OwnerId::generate("").is_err());
    }

    #[test]
    fn term_values_name_the_owner_and_the_token() {
        let owner = OwnerId::generate("pod-a").unwrap();
        let term = owner.term(FencingToken(1_796_000_000_000_001));
        assert_eq!(
            split_term(&term),
            (owner.as_str(), Some(FencingToken(1_796_000_000_000_001)))
        );
        let cases = [
            ("somebody-else", ("somebody-else", None)),
            ("a#", ("a#", None)),
            ("#12", ("#12", None)),
            ("a#1x", ("a#1x", None)),
            ("cron-lock#12", ("cron-lock#12", None)),
            (
                "a#99999999999999999999999",
                ("a#99999999999999999999999", None),
            ),
        ];
        for (value, want) in cases {
            assert_eq!(split_term(value), want, "{value}");
        }
    }

    #[test]
    fn identity_of_foreign_values_is_the_whole_value() {
        let cases = [
            ("pod-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e", "pod-a"),
            ("web-7d4f-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e", "web-7d4f"),
            ("somebody-else", "somebody-else"),
            (
                "-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e",
                "-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e",
            ),
            (
                "ünïcödé-value-that-is-long-enough-to-split-xx",
                "ünïcödé-value-that-is-long-enough-to-split-xx",
            ),
        ];
        for (owner, identity) in cases {
            assert_eq!(identity_of(owner), identity, "{owner}");
        }
    }
}
