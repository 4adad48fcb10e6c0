//! Redis's eviction policy, a gate outside the core: read at start, at once when this replica
//! becomes leader, and then again every few lease durations (`watch.rs`), so that a Redis whose
//! `maxmemory` policy may evict the lease is said out loud (a log event, a metric, a field in
//! what the replica shows), and, with [`EvictionMode::Refuse`], keeps this replica out of the
//! election ([`EVICTION`]). Why and how often: docs/DESIGN.md, "Eviction".

mod watch;

pub use crate::board::{Eviction, EvictionRefusal, Shown};
use crate::elector::Role;
use crate::eviction_policy::EvictionPolicy;
pub use crate::gates::EVICTION;
pub use watch::EvictionWatch;

/// What to do when Redis may evict the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum EvictionMode {
    /// Say so (log event, metric, status) and take part as usual.
    #[default]
    #[cfg_attr(feature = "cli", value(help = "Say so, and take part"))]
    Warn,
    /// Say so, and stay out of the election (a leader steps down) until Redis no longer may
    /// evict. Readiness in member mode says why.
    #[cfg_attr(feature = "cli", value(help = "Say so, and stay out of the election"))]
    Refuse,
}

/// Why an `allkeys-*` policy without the data-loss cooldown is refused, with the policy, its
/// limit and the flag (docs/DESIGN.md, "Eviction").
fn unsafe_words(read: &EvictionPolicy) -> String {
    format!(
        "redis evicts keys without a TTL (maxmemory-policy {}, maxmemory {} bytes), which takes the lease's state record, and --no-data-loss-cooldown turns off the cooldown that covers that: two replicas could lead. Turn the cooldown on, or give leases a redis with maxmemory-policy noeviction or volatile-*",
        read.policy, read.maxmemory
    )
}

/// Resolves, with the refusal's words, once the replica shown on `shown` has found that Redis
/// evicts keys without a TTL while the data-loss cooldown is off: a configuration known to make
/// two leaders, which the binary refuses (exit 2) instead of running without a leader. Never
/// resolves otherwise; the replica itself already stays out of the election by then, and a
/// leader has stepped down for the gate (so that its step-down says why, not `shutdown`).
pub async fn refused_as_unsafe(shown: &mut tokio::sync::watch::Receiver<Shown>) -> String {
    let seen = shown
        .wait_for(|s| {
            s.eviction_refusal == Some(EvictionRefusal::Unsafe)
                && !matches!(s.status.role, Role::Leader { .. })
        })
        .await;
    match seen.as_deref().map(|s| &s.eviction) {
        Ok(Eviction::Read(read)) => unsafe_words(read),
        // The board's sender is gone first: nothing to refuse.
        _ => std::future::pending().await,
    }
}

/// Whether this replica stays out of the election for what was read of the eviction policy, and
/// why: an `allkeys-*` policy without the data-loss cooldown always (known to make two leaders);
/// else only with [`EvictionMode::Refuse`], when Redis is known to be able to evict or its
/// policy was never readable (a refused `INFO memory`): `refuse` holds until Redis says it won't.
fn refusal(mode: EvictionMode, eviction: &Eviction, cooldown: bool) -> Option<EvictionRefusal> {
    let unknown = matches!(eviction, Eviction::Unreadable { .. });
    match eviction {
        Eviction::Read(read) if read.may_evict_record() && !cooldown => {
            Some(EvictionRefusal::Unsafe)
        }
        _ if mode == EvictionMode::Refuse && (eviction.may_evict() || unknown) => {
            Some(EvictionRefusal::Asked)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn read(maxmemory: u64, policy: &str) -> Eviction {
        Eviction::Read(EvictionPolicy {
            maxmemory,
            policy: policy.to_owned(),
        })
    }

    #[test]
    fn refuse_mode_with_an_evicting_redis_or_allkeys_without_the_cooldown_stays_out() {
        use EvictionMode::*;
        use EvictionRefusal::*;
        let unreadable = Eviction::Unreadable {
            reason: "NOPERM".into(),
        };
        let evicting = read(1 << 30, "allkeys-lru");
        // (mode, what was read, cooldown on) -> stays out, and why
        let cases = [
            (
                Refuse,
                evicting.clone(),
                true,
                Some(Asked),
                "a limit and an evicting policy",
            ),
            (
                Refuse,
                read(1 << 30, "volatile-ttl"),
                true,
                Some(Asked),
                "volatile policies take the lease key too",
            ),
            (
                Refuse,
                read(0, "allkeys-lru"),
                true,
                None,
                "no limit, no eviction",
            ),
            (
                Refuse,
                read(1 << 30, "noeviction"),
                true,
                None,
                "a limit that never evicts",
            ),
            (
                Refuse,
                unreadable.clone(),
                true,
                Some(Asked),
                "never readable: refuse holds until Redis says",
            ),
            (
                Refuse,
                Eviction::NotRead,
                true,
                None,
                "not read yet: take part",
            ),
            (Warn, evicting.clone(), true, None, "warn mode only says so"),
            (
                Warn,
                unreadable.clone(),
                true,
                None,
                "and stays in whatever was read",
            ),
            (
                Warn,
                evicting.clone(),
                false,
                Some(Unsafe),
                "allkeys without the cooldown is refused in any mode",
            ),
            (
                Refuse,
                evicting,
                false,
                Some(Unsafe),
                "and named for what it is",
            ),
            (
                Warn,
                read(1 << 30, "volatile-lru"),
                false,
                None,
                "volatile policies keep the record",
            ),
            (
                Warn,
                read(0, "allkeys-random"),
                false,
                None,
                "no limit, no eviction",
            ),
            (Warn, unreadable, false, None, "unknown: take part"),
        ];
        for (mode, eviction, cooldown, want, why) in cases {
            assert_eq!(refusal(mode, &eviction, cooldown), want, "{why}");
        }
    }
}
