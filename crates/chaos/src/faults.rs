//! The nemesis's second generation of faults: eviction under a small `maxmemory`, the lease
//! vanishing (`DEL`, `FLUSHDB`, `FLUSHALL`) as a follower starts or wakes, late delivery on the
//! leader's link, a command that leaves a daemon or a SIGTERM-proof worker behind, CPU
//! starvation of one leasehold, work that fails at once, and a follower's dead subscription.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::nemesis::{FaultRecord, Impairment, Nemesis, Span, sleep_ms};
use testbed::proxy::Fault;

use crate::redis_cli::RedisCli;
use crate::schedule::{FaultSpec, Scheduled, Target, TermEnd, VanishHow};
use crate::starve::{CPU_CGROUP, crowd, quota, release_quota, uncrowd};
use crate::time::{self, Micros};

/// The database the eviction flood goes to (the lease lives in 0).
const FLOOD_DB: u32 = 1;
/// Keys per EVAL of the flood.
const FLOOD_BATCH: u32 = 500;

impl Nemesis<'_> {
    /// Injects one fault of the second generation.
    pub fn inject_second(
        &mut self,
        planned: &Scheduled,
        record: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        match planned.fault {
            FaultSpec::Eviction {
                policy,
                flood_keys,
                hold_ms,
            } => self.eviction(record, policy.redis_name(), flood_keys, hold_ms),
            FaultSpec::Vanish {
                how,
                follower,
                wakes,
                down_ms,
            } => self.vanish(record, how, follower, wakes, down_ms),
            FaultSpec::LateDelivery {
                delay_ms,
                hold_ms,
                one_connection,
            } => self.late_delivery(record, delay_ms, hold_ms, one_connection),
            FaultSpec::Daemonize { hold_ms, end } => self.helper(record, "FORK", 'd', hold_ms, end),
            FaultSpec::IgnoreSigterm { hold_ms, end } => {
                self.helper(record, "STUBBORN", 's', hold_ms, end)
            }
            FaultSpec::CpuStarve {
                target,
                quota_pct,
                hold_ms,
            } => self.starve(record, target, quota_pct, hold_ms),
            FaultSpec::FailingWork { hold_ms } => {
                self.failing_work(record, hold_ms);
                Ok(())
            }
            FaultSpec::DeadSubscription {
                follower,
                hold_ms,
                release_after_ms,
            } => self.dead_subscription(record, follower, hold_ms, release_after_ms),
            _ => bail!("not a fault of the second generation: {:?}", planned.fault),
        }
    }

    pub(crate) fn span(
        &mut self,
        replica: Option<usize>,
        from: Micros,
        to: Micros,
        what: Impairment,
    ) {
        let incarnation = replica.map_or(0, |i| self.cluster.replicas[i].incarnation());
        let span = Span {
            replica,
            incarnation,
            from,
            to,
            what,
        };
        match what {
            Impairment::Starved => self.journal.starved.push(span),
            Impairment::LateLink => self.journal.links.push(span),
            _ => self.journal.other.push(span),
        }
    }

    fn eviction(
        &mut self,
        record: &mut FaultRecord,
        policy: &str,
        flood_keys: u32,
        hold_ms: u64,
    ) -> anyhow::Result<()> {
        let redis = &self.cluster.redis;
        let used = info_field(&redis.cli(0, &["INFO", "memory"])?, "used_memory")?;
        let evicted_before = info_field(&redis.cli(0, &["INFO", "stats"])?, "evicted_keys")?;
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
        let evicted = info_field(&redis.cli(0, &["INFO", "stats"])?, "evicted_keys")?;
        restored.context("cannot take the eviction settings back")?;
        record.detail = Some(format!(
            "{policy}, maxmemory {limit} (used {used}), {flood_keys} keys, {} evicted, {refused} batches refused",
            evicted.saturating_sub(evicted_before)
        ));
        self.span(None, record.inject, record.clear, Impairment::Evicting);
        Ok(())
    }

    /// A follower of the cluster: `target`'s replica unless it leads, then the next one.
    fn follower(&self, target: Target) -> usize {
        let n = self.cluster.replicas.len();
        let (Some(i), leader) = self.resolve(target) else {
            return 0;
        };
        match leader {
            Some((l, _)) if l == i => (i + 1) % n,
            _ => i,
        }
    }

    fn vanish(
        &mut self,
        record: &mut FaultRecord,
        how: VanishHow,
        follower: Target,
        wakes: bool,
        down_ms: u64,
    ) -> anyhow::Result<()> {
        let j = self.follower(follower);
        record.target = Some(j);
        let key = self.cluster.lease_key.clone();
        let args: Vec<&str> = match how {
            VanishHow::Del => vec!["DEL", &key],
            VanishHow::Flushdb => vec!["FLUSHDB"],
            VanishHow::Flushall => vec!["FLUSHALL"],
        };
        let replica = &mut self.cluster.replicas[j];
        let incarnation = replica.incarnation();
        let (down_from, what) = if wakes {
            (replica.pause(true)?.1, Impairment::Paused)
        } else {
            (replica.kill()?.1, Impairment::Killed)
        };
        sleep_ms(down_ms);
        record.inject = time::now();
        let reply = self.cluster.redis.cli(0, &args);
        let replica = &mut self.cluster.replicas[j];
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

    fn late_delivery(
        &mut self,
        record: &mut FaultRecord,
        delay_ms: u64,
        hold_ms: u64,
        one_connection: bool,
    ) -> anyhow::Result<()> {
        let (Some(i), leader) = self.resolve(Target::Leader) else {
            record.skipped = Some("no leader".to_owned());
            return Ok(());
        };
        record.target = Some(i);
        record.target_led = leader.is_some();
        let link = Fault::Delay(Duration::from_millis(delay_ms));
        let one = if one_connection {
            let subscribed: Vec<u16> = self
                .cluster
                .redis
                .clients()?
                .into_iter()
                .filter(|(_, sub)| *sub)
                .map(|(p, _)| p)
                .collect();
            let ports = self.cluster.replicas[i].proxy.upstream_ports();
            ports.into_iter().find(|p| !subscribed.contains(p))
        } else {
            None
        };
        let proxy = &self.cluster.replicas[i].proxy;
        match one {
            Some(port) => proxy.set_one(port, link),
            None => proxy.set(link),
        }
        record.inject = time::now();
        sleep_ms(hold_ms);
        let proxy = &self.cluster.replicas[i].proxy;
        match one {
            Some(port) => proxy.clear_one(port),
            None => proxy.set(Fault::Pass),
        }
        record.clear = time::now();
        record.detail = Some(match one {
            Some(port) => format!("{delay_ms} ms on the command connection (port {port})"),
            None => format!("{delay_ms} ms on every connection"),
        });
        self.span(Some(i), record.inject, record.clear, Impairment::LateLink);
        Ok(())
    }

    /// Orders the leader's command to start a helper (`FORK`: a daemon, `STUBBORN`: a worker
    /// that ignores SIGTERM), lets it write, then ends the term.
    fn helper(
        &mut self,
        record: &mut FaultRecord,
        order: &'static str,
        role: char,
        hold_ms: u64,
        end: TermEnd,
    ) -> anyhow::Result<()> {
        let Some((i, _)) = self.cluster.leader() else {
            record.skipped = Some("no leader".to_owned());
            return Ok(());
        };
        record.target = Some(i);
        record.target_led = true;
        let identity = self.cluster.replicas[i].identity.clone();
        record.inject = time::now();
        self.cluster.resource.order(&identity, order);
        let wait = Instant::now() + Duration::from_secs(3);
        let mut helper = None;
        while helper.is_none() && Instant::now() < wait {
            helper = self.cluster.resource.latest(&identity, role, record.inject);
            sleep_ms(5);
        }
        self.cluster.resource.withdraw(&identity);
        let Some(helper) = helper else {
            record.skipped = Some(format!("no helper of r{i}'s command wrote within 3 s"));
            return Ok(());
        };
        sleep_ms(hold_ms);
        let end = self.end_term(i, end)?;
        record.clear = time::now();
        record.detail = Some(format!(
            "helper pid {} (token {}), term ended by {end:?}",
            helper.pid, helper.token
        ));
        Ok(())
    }

    /// Ends replica `i`'s term: SIGTERM and a start, or a dropped link past its renew
    /// deadline.
    fn end_term(&mut self, i: usize, end: TermEnd) -> anyhow::Result<TermEnd> {
        // Without the proxy in its path (a Sentinel or Cluster topology), SIGTERM it is.
        let end = match self.cluster.topo {
            crate::topology::Topo::Single => end,
            _ => TermEnd::Terminate,
        };
        match end {
            TermEnd::Terminate => self.terminate_and_start(i).map(|()| end),
            TermEnd::LinkDrop => {
                let hold = self.timing.renew_deadline + 2 * self.timing.retry_period;
                let proxy = &self.cluster.replicas[i].proxy;
                proxy.set(Fault::Drop);
                let from = time::now();
                std::thread::sleep(hold + Duration::from_millis(300));
                self.cluster.replicas[i].proxy.set(Fault::Pass);
                let to = time::now();
                let incarnation = self.cluster.replicas[i].incarnation();
                self.journal.links.push(Span {
                    replica: Some(i),
                    incarnation,
                    from,
                    to,
                    what: Impairment::LinkDrop,
                });
                Ok(end)
            }
        }
    }

    pub(crate) fn terminate_and_start(&mut self, i: usize) -> anyhow::Result<()> {
        let grace = self.timing.lease_duration + Duration::from_secs(5);
        let replica = &mut self.cluster.replicas[i];
        let (incarnation, at, exited) = replica.terminate(grace)?;
        if !exited {
            self.journal
                .notes
                .push(format!("r{i} did not exit within {grace:?} of SIGTERM"));
        }
        self.cluster.replicas[i].start()?;
        self.journal.downs.push(Span {
            replica: Some(i),
            incarnation,
            from: at,
            to: time::now(),
            what: Impairment::Terminated,
        });
        Ok(())
    }

    fn starve(
        &mut self,
        record: &mut FaultRecord,
        target: Target,
        quota_pct: u64,
        hold_ms: u64,
    ) -> anyhow::Result<()> {
        let (Some(i), leader) = self.resolve(target) else {
            record.skipped = Some("no leader to starve".to_owned());
            return Ok(());
        };
        record.target = Some(i);
        record.target_led = leader.is_some_and(|(l, _)| l == i);
        let pid = self.cluster.replicas[i]
            .pid()
            .context("the replica to starve is not running")?;
        let group = PathBuf::from(CPU_CGROUP).join(format!("chaos-{}-{i}", std::process::id()));
        record.inject = time::now();
        let how = match quota(&group, pid, quota_pct) {
            Ok(()) => {
                sleep_ms(hold_ms);
                release_quota(&group);
                format!("cgroup v1 cpu quota {quota_pct} % of a core")
            }
            Err(e) => {
                release_quota(&group);
                let loops = crowd(pid)?;
                sleep_ms(hold_ms);
                drop(loops);
                uncrowd(pid);
                format!("busy loops pinned beside it on CPU 0 (no cgroup quota: {e:#})")
            }
        };
        record.clear = time::now();
        record.detail = Some(how);
        self.span(Some(i), record.inject, record.clear, Impairment::Starved);
        Ok(())
    }

    fn failing_work(&mut self, record: &mut FaultRecord, hold_ms: u64) {
        record.inject = time::now();
        let until = record.inject + i64::try_from(hold_ms).unwrap_or(0) * time::MS;
        self.cluster.resource.fail_until(Some(until));
        while time::now() < until {
            self.cluster.restart_exited();
            sleep_ms(10);
        }
        self.cluster.resource.fail_until(None);
        self.cluster.restart_exited();
        record.clear = time::now();
        self.span(None, record.inject, record.clear, Impairment::FailingWork);
    }

    fn dead_subscription(
        &mut self,
        record: &mut FaultRecord,
        follower: Target,
        hold_ms: u64,
        release_after_ms: u64,
    ) -> anyhow::Result<()> {
        let j = self.follower(follower);
        record.target = Some(j);
        let subscribed: Vec<u16> = self
            .cluster
            .redis
            .clients()?
            .into_iter()
            .filter(|(_, sub)| *sub)
            .map(|(p, _)| p)
            .collect();
        let Some(port) = self.cluster.replicas[j]
            .proxy
            .upstream_ports()
            .into_iter()
            .find(|p| subscribed.contains(p))
        else {
            record.skipped = Some(format!("r{j} has no subscribed connection"));
            return Ok(());
        };
        self.cluster.replicas[j]
            .proxy
            .set_one(port, Fault::Blackhole);
        record.inject = time::now();
        sleep_ms(release_after_ms);
        let leader = self.cluster.leader();
        if let Some((l, _)) = leader
            && l != j
        {
            self.terminate_and_start(l)?;
        }
        let left = hold_ms.saturating_sub(release_after_ms);
        sleep_ms(left);
        self.cluster.replicas[j].proxy.clear_one(port);
        record.clear = time::now();
        record.detail = Some(format!(
            "r{j}'s subscription (port {port}) blackholed; leader {} SIGTERMed after {release_after_ms} ms",
            leader.map_or("none".to_owned(), |(l, _)| format!("r{l}"))
        ));
        self.span(
            Some(j),
            record.inject,
            record.clear,
            Impairment::DeadSubscription,
        );
        Ok(())
    }
}

/// A number from `INFO`'s `name:value` lines.
fn info_field(info: &str, name: &str) -> anyhow::Result<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("INFO has no number {name}"))
}
