//! Redis's memory limit and eviction policy, read from `INFO memory` on the lease's node: what the
//! eviction gate judges and the status board shows.

use std::time::Duration;

use crate::lease::{LeaseError, RedisLease, info_field};

/// Redis's memory limit and eviction policy, from `INFO memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionPolicy {
    /// `maxmemory` in bytes; 0 for no limit.
    pub maxmemory: u64,
    /// `maxmemory_policy` as Redis names it (`noeviction`, `volatile-lru`, `allkeys-lru`, …).
    pub policy: String,
}

impl EvictionPolicy {
    /// Whether Redis may evict the lease's state record too (it has no TTL): a limit is set and
    /// the policy is one of the `allkeys-*` ones. Then only the data-loss cooldown protects a
    /// term whose record was evicted.
    pub fn may_evict_record(&self) -> bool {
        self.maxmemory > 0 && self.policy.starts_with("allkeys-")
    }

    /// Whether Redis may evict the lease under memory pressure: a limit is set and the policy
    /// evicts. Every evicting policy can take the lease key (it has a TTL); `allkeys-*` can take
    /// the state record too.
    pub fn may_evict(&self) -> bool {
        self.maxmemory > 0 && self.policy != "noeviction"
    }

    /// Reads the two fields from the text of `INFO memory`.
    pub fn parse(info: &str) -> Option<Self> {
        let field = |name| info_field(info, name);
        Some(Self {
            maxmemory: field("maxmemory")?.parse().ok()?,
            policy: field("maxmemory_policy")?.to_owned(),
        })
    }

    /// Reads the policy of the Redis that holds `lease`.
    pub async fn read(lease: &RedisLease, timeout: Duration) -> Result<Self, LeaseError> {
        let info = lease.info("memory", timeout).await?;
        Self::parse(&info).ok_or_else(|| LeaseError::Protocol {
            op: "info",
            detail: format!("{info:?}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
