//! Faults in which Redis loses the lease's records: eviction under a small `maxmemory` and an
//! evicting policy, and the lease vanishing (`DEL`, `FLUSHDB`, `FLUSHALL`) just as a follower
//! starts or wakes.

use anyhow::Context;

use crate::nemesis::{FaultRecord, Impairment, Nemesis, Span, sleep_ms};
use crate::redis_cli::RedisCli;
use crate::schedule::{Target, VanishHow};
use crate::time;

/// The database the eviction flood goes to (the lease lives in 0).
const FLOOD_DB: u32 = 1;
/// Keys per EVAL of the flood.
const FLOOD_BATCH: u32 = 500;

impl Nemesis<'_> {
    pub(crate) fn eviction(
        &mut self,
        record: &mut FaultRecord,
        policy: &str,
        flood_keys: u32,
        hold_ms: u64,
    ) -> anyhow::Result<()> {
        let redis = &self.system.redis;
        let used = info_number(&redis.cli(0, &["INFO", "memory"])?, "used_memory")?;
        let evicted_before = info_number(&redis.cli(0, &["INFO", "stats"])?, "evicted_keys")?;
        let limit = used + 2 * 1024 * 1024;
        record.inject = time::now();
        redis.cli(0, &["CONFIG", "SET", "maxmemory-policy", policy])?;
        redis.cli(0, &["CONFIG", "SET", "maxmemory", &limit.to_string()])?;
        let script = "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do \
                      redis.call('SET', 'chaos:flood:' .. i, string.rep('x', 1024), 'EX', 3600 + i) end \
                      return 1";
        let mut refused = 0;
        let mut from = 0;
        while from < flood_keys {
            let to = (from + FLOOD_BATCH).min(flood_keys) - 1;
            if redis
                .cli(
                    FLOOD_DB,
                    &["EVAL", script, "0", &from.to_string(), &to.to_string()],
                )
                .is_err()
            {
                refused += 1;
            }
            from = to + 1;
        }
        sleep_ms(hold_ms);
        let restored = (|| {
            redis.cli(FLOOD_DB, &["FLUSHDB"])?;
            redis.cli(0, &["CONFIG", "SET", "maxmemory", "0"])?;
            redis.cli(0, &["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        })();
        record.clear = time::now();
        let evicted = info_number(&redis.cli(0, &["INFO", "stats"])?, "evicted_keys")?;
        restored.context("cannot take the eviction settings back")?;
        record.detail = Some(format!(
            "{policy}, maxmemory {limit} (used {used}), {flood_keys} keys, {} evicted, {refused} batches refused",
            evicted.saturating_sub(evicted_before)
        ));
        self.span(None, record.inject, record.clear, Impairment::Evicting);
        Ok(())
    }

    pub(crate) fn vanish(
        &mut self,
        record: &mut FaultRecord,
        how: VanishHow,
        follower: Target,
        wakes: bool,
        down_ms: u64,
    ) -> anyhow::Result<()> {
        let j = self.aim_at_follower(record, follower);
        let key = self.system.lease_key.clone();
        let args: Vec<&str> = match how {
            VanishHow::Del => vec!["DEL", &key],
            VanishHow::Flushdb => vec!["FLUSHDB"],
            VanishHow::Flushall => vec!["FLUSHALL"],
        };
        let replica = &mut self.system.replicas[j];
        let incarnation = replica.incarnation();
        let (down_from, what) = if wakes {
            (replica.pause(true)?.1, Impairment::Paused)
        } else {
            (replica.kill()?.1, Impairment::Killed)
        };
        sleep_ms(down_ms);
        record.inject = time::now();
        let reply = self.system.redis.cli(0, &args);
        let replica = &mut self.system.replicas[j];
        if wakes {
            replica.pause(false)?;
        } else {
            replica.start()?;
        }
        record.clear = time::now();
        let reply = reply?;
        record.detail = Some(format!(
            "{} ({reply}) as r{j} {}",
            args.join(" "),
            if wakes { "woke" } else { "started" }
        ));
        let span = Span {
            replica: Some(j),
            incarnation,
            from: down_from,
            to: record.clear,
            what,
        };
        if wakes {
            self.journal.pauses.push(span);
        } else {
            self.journal.downs.push(span);
        }
        self.span(None, record.inject, record.inject, Impairment::Vanished);
        Ok(())
    }
}

/// A number from `INFO`'s `name:value` lines.
fn info_number(info: &str, name: &str) -> anyhow::Result<u64> {
    leasehold::lease::info_field(info, name)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("INFO has no number {name}"))
}
