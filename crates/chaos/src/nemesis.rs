//! The nemesis: injects the schedule's faults one after another into the running system, and
//! writes down what it did and when (the journal), for the checker and the timeline. Before
//! each fault it waits until a replica leads, then for the fault's quiet time.

use std::io;
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub use crate::journal::{FaultRecord, Impairment, Journal, Span};
use crate::params::ForeignKey;
use crate::schedule::{FaultKind, FaultSpec, Scheduled, Target};
use crate::system::System;
use crate::time::{self, Micros};
use leasehold::elector::Timing;
use testbed::proxy::Fault;

/// Runs the schedule.
pub struct Nemesis<'a> {
    pub(crate) system: &'a mut System,
    pub(crate) timing: Timing,
    pub(crate) journal: Journal,
}

/// Sleeps `ms` milliseconds.
pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

impl<'a> Nemesis<'a> {
    /// A nemesis for `system`.
    pub fn new(system: &'a mut System, timing: Timing) -> Self {
        Self {
            system,
            timing,
            journal: Journal::default(),
        }
    }

    /// Injects every fault, in order; `progress` is told after each. Returns the journal, and
    /// the error that cut the schedule short, if one did.
    pub fn run(
        mut self,
        schedule: &[Scheduled],
        progress: impl FnMut(&FaultRecord),
    ) -> (Journal, Option<String>) {
        let outcome = self.run_schedule(schedule, progress);
        self.journal.end = time::now();
        (self.journal, outcome.err().map(|e| format!("{e:#}")))
    }

    fn run_schedule(
        &mut self,
        schedule: &[Scheduled],
        mut progress: impl FnMut(&FaultRecord),
    ) -> anyhow::Result<()> {
        let wait = FaultKind::RedisRestartLost.bound(&self.timing) + Duration::from_secs(10);
        for planned in schedule {
            // Settled: a leader whose lease was proven after the last fault ended.
            let since = self.journal.faults.last().map_or(Micros::MIN, |f| f.clear);
            if self.system.wait_for_leader(since, wait).is_none() {
                self.journal.notes.push(format!(
                    "no replica led within {wait:?} before fault #{}",
                    planned.index
                ));
            }
            sleep_ms(planned.quiet_ms);
            // A fault aimed at the leader waits for one if leadership moved meanwhile.
            if targets_leader(&planned.fault) && self.system.leader().is_none() {
                let _ = self.system.wait_for_leader(Micros::MIN, wait);
            }
            let record = self
                .inject(planned)
                .with_context(|| format!("fault #{} {:?}", planned.index, planned.fault))?;
            if self.journal.faults.is_empty() {
                self.journal.first_fault = record.inject;
            }
            progress(&record);
            self.journal.faults.push(record);
        }
        // Let the last fault's failover finish before the end of the record.
        let since = self.journal.faults.last().map_or(Micros::MIN, |f| f.clear);
        if self.system.wait_for_leader(since, wait).is_none() {
            self.journal
                .notes
                .push("no replica led after the last fault".to_owned());
        }
        sleep_ms(500);
        Ok(())
    }

    /// The replica `target` names, which `record` now targets (noting whether it led); `None`,
    /// and the fault skipped for `why`, when `target` is the leader and there is none.
    pub(crate) fn aim(&self, record: &mut FaultRecord, target: Target, why: &str) -> Option<usize> {
        let (Some(i), leader) = self.resolve(target) else {
            record.skipped = Some(why.to_owned());
            return None;
        };
        record.target = Some(i);
        record.target_led = leader.is_some_and(|(l, _)| l == i);
        Some(i)
    }

    pub(crate) fn resolve(&self, target: Target) -> (Option<usize>, Option<(usize, u64)>) {
        let leader = self.system.leader();
        let index = match target {
            Target::Leader => leader.map(|(i, _)| i),
            Target::Replica(i) => Some(i % self.system.replicas.len()),
        };
        (index, leader)
    }

    /// A follower, which `record` targets: `target`'s replica unless it leads, then the next
    /// one.
    pub(crate) fn aim_at_follower(&self, record: &mut FaultRecord, target: Target) -> usize {
        let n = self.system.replicas.len();
        let j = match self.resolve(target) {
            (None, _) => 0,
            (Some(i), Some((l, _))) if l == i => (i + 1) % n,
            (Some(i), _) => i,
        };
        record.target = Some(j);
        j
    }

    fn inject(&mut self, planned: &Scheduled) -> anyhow::Result<FaultRecord> {
        let leader_before = self.system.leader();
        let mut record = FaultRecord {
            index: planned.index,
            spec: planned.fault.clone(),
            target: None,
            target_led: false,
            leader_before,
            inject: time::now(),
            clear: time::now(),
            skipped: None,
            detail: None,
            said: None,
        };
        match planned.fault {
            FaultSpec::PauseReplica { target, pause_ms } => {
                let Some(i) = self.aim(&mut record, target, "no leader to pause") else {
                    return Ok(record);
                };
                let replica = &mut self.system.replicas[i];
                let (_, from) = replica.pause(true)?;
                record.inject = from;
                sleep_ms(pause_ms);
                let (_, to) = replica.pause(false)?;
                record.clear = to;
                self.span(Some(i), from, to, Impairment::Paused);
            }
            FaultSpec::PauseChild { pause_ms } => {
                let Some(i) = self.aim(&mut record, Target::Leader, "no leader") else {
                    return Ok(record);
                };
                let Some(pid) = self.child_of(i) else {
                    return Ok(skip(record, "the leader's command was not found"));
                };
                let pid = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
                kill(pid, Signal::SIGSTOP).context("cannot SIGSTOP the leader's command")?;
                let from = time::now();
                record.inject = from;
                sleep_ms(pause_ms);
                // It may have been killed meanwhile (its leasehold stepped down): ESRCH.
                let _ = kill(pid, Signal::SIGCONT);
                let to = time::now();
                record.clear = to;
                self.span(Some(i), from, to, Impairment::CommandPaused);
            }
            FaultSpec::KillReplica { target, down_ms } => {
                let Some(i) = self.aim(&mut record, target, "no leader to kill") else {
                    return Ok(record);
                };
                let replica = &mut self.system.replicas[i];
                let (incarnation, at) = replica.kill()?;
                record.inject = at;
                sleep_ms(down_ms);
                replica.start()?;
                record.clear = time::now();
                self.journal.downs.push(Span {
                    replica: Some(i),
                    incarnation,
                    from: at,
                    to: record.clear,
                    what: Impairment::Killed,
                });
            }
            FaultSpec::RollingRestart { gap_ms } => {
                let grace = self.timing.lease_duration + Duration::from_secs(5);
                record.inject = time::now();
                for i in 0..self.system.replicas.len() {
                    let replica = &mut self.system.replicas[i];
                    if !replica.is_running() {
                        continue;
                    }
                    let (incarnation, at, exited) = replica.terminate(grace)?;
                    if !exited {
                        self.journal.notes.push(format!(
                            "fault #{}: r{i} did not exit within {grace:?} of SIGTERM",
                            planned.index
                        ));
                    }
                    replica.start()?;
                    let back = time::now();
                    self.journal.downs.push(Span {
                        replica: Some(i),
                        incarnation,
                        from: at,
                        to: back,
                        what: Impairment::Terminated,
                    });
                    sleep_ms(gap_ms);
                }
                record.clear = time::now();
            }
            FaultSpec::RedisRestartKept { down_ms } | FaultSpec::RedisRestartLost { down_ms } => {
                let keep = matches!(planned.fault, FaultSpec::RedisRestartKept { .. });
                (record.inject, record.clear) = self.restart_redis(keep, down_ms)?;
            }
            FaultSpec::LinkDelay {
                target,
                delay_ms,
                hold_ms,
            } => {
                let link = Fault::Delay(Duration::from_millis(delay_ms));
                self.link_fault(&mut record, target, link, hold_ms, Impairment::LinkDelay)?;
            }
            FaultSpec::LinkDrop { target, hold_ms } => {
                self.link_fault(
                    &mut record,
                    target,
                    Fault::Drop,
                    hold_ms,
                    Impairment::LinkDrop,
                )?;
            }
            FaultSpec::LinkBlackhole { target, hold_ms } => {
                self.link_fault(
                    &mut record,
                    target,
                    Fault::Blackhole,
                    hold_ms,
                    Impairment::LinkBlackhole,
                )?;
            }
            FaultSpec::RedisPause { pause_ms } => {
                self.hold_on_redis(
                    &mut record,
                    pause_ms,
                    Impairment::RedisPaused,
                    |system| system.redis.try_signal(Signal::SIGSTOP),
                    |system| system.redis.try_signal(Signal::SIGCONT),
                )?;
            }
            FaultSpec::Eviction {
                policy,
                flood_keys,
                hold_ms,
            } => self.eviction(&mut record, policy.redis_name(), flood_keys, hold_ms)?,
            FaultSpec::Vanish {
                how,
                follower,
                wakes,
                down_ms,
            } => self.vanish(&mut record, how, follower, wakes, down_ms)?,
            FaultSpec::LateDelivery {
                delay_ms,
                hold_ms,
                one_connection,
            } => self.late_delivery(&mut record, delay_ms, hold_ms, one_connection)?,
            FaultSpec::Daemonize { hold_ms, end } => {
                self.helper(&mut record, "FORK", 'd', hold_ms, end)?;
            }
            FaultSpec::IgnoreSigterm { hold_ms, end } => {
                self.helper(&mut record, "STUBBORN", 's', hold_ms, end)?;
            }
            FaultSpec::CpuStarve {
                target,
                quota_pct,
                hold_ms,
            } => self.starve(&mut record, target, quota_pct, hold_ms)?,
            FaultSpec::FailingWork { hold_ms } => self.failing_work(&mut record, hold_ms),
            FaultSpec::DeadSubscription {
                follower,
                hold_ms,
                release_after_ms,
            } => self.dead_subscription(&mut record, follower, hold_ms, release_after_ms)?,
            FaultSpec::MixedDurations {
                short,
                first,
                loss,
                after_ms,
                down_ms,
            } => {
                self.mixed_durations(&mut record, (short, first), loss, after_ms, down_ms)?;
            }
            FaultSpec::ForeignLease { hold_ms } => {
                self.foreign_key(&mut record, ForeignKey::Lease, hold_ms)?;
            }
            FaultSpec::ForeignReservation { hold_ms } => {
                self.foreign_key(&mut record, ForeignKey::Reservation, hold_ms)?;
            }
            FaultSpec::GraySlowRequests { .. }
            | FaultSpec::GraySlowReplies { .. }
            | FaultSpec::GrayResetReplies { .. }
            | FaultSpec::GrayNoPermission { .. }
            | FaultSpec::GrayStarved { .. } => self.inject_gray(&planned.fault, &mut record)?,
            FaultSpec::SentinelFailover { .. }
            | FaultSpec::MuteSentinel { .. }
            | FaultSpec::ClusterFailover { .. }
            | FaultSpec::SlotMigration { .. } => {
                self.inject_topology(planned, &mut record)?;
            }
            FaultSpec::SlowRedis { delay_ms, hold_ms } => {
                let slow = Fault::Delay(Duration::from_millis(delay_ms));
                self.hold_on_redis(
                    &mut record,
                    hold_ms,
                    Impairment::RedisSlow,
                    |system| {
                        system.set_all_links(slow);
                        Ok(())
                    },
                    |system| {
                        system.set_all_links(Fault::Pass);
                        Ok(())
                    },
                )?;
            }
        }
        Ok(record)
    }

    /// Journals an impairment of `replica` (or of everyone, or of Redis itself) from `from` to
    /// `to`, in the journal's list for its kind.
    pub(crate) fn span(
        &mut self,
        replica: Option<usize>,
        from: Micros,
        to: Micros,
        what: Impairment,
    ) {
        let incarnation = replica.map_or(0, |i| self.system.replicas[i].incarnation());
        let span = Span {
            replica,
            incarnation,
            from,
            to,
            what,
        };
        match what {
            Impairment::Paused => self.journal.pauses.push(span),
            Impairment::CommandPaused => self.journal.child_pauses.push(span),
            Impairment::RedisDownKept
            | Impairment::RedisDownLost
            | Impairment::RedisPaused
            | Impairment::RedisSlow
            | Impairment::Failover => self.journal.redis.push(span),
            Impairment::Starved => self.journal.starved.push(span),
            Impairment::LateLink
            | Impairment::SlowRequests
            | Impairment::SlowReplies
            | Impairment::ResetReplies => self.journal.links.push(span),
            _ => self.journal.other.push(span),
        }
    }

    /// SIGKILLs Redis and starts it again `down_ms` later, with its data or from an empty
    /// directory; journals the time it was down, and returns it.
    pub(crate) fn restart_redis(
        &mut self,
        keep: bool,
        down_ms: u64,
    ) -> anyhow::Result<(Micros, Micros)> {
        self.system.redis.kill();
        let from = time::now();
        sleep_ms(down_ms);
        if keep {
            self.system.redis.try_restart()?;
        } else {
            self.system.redis.try_restart_empty()?;
        }
        let to = time::now();
        let what = if keep {
            Impairment::RedisDownKept
        } else {
            Impairment::RedisDownLost
        };
        self.span(None, from, to, what);
        Ok((from, to))
    }

    /// Puts a fault on Redis with `inject`, holds it `hold_ms`, and takes it off with `clear`;
    /// the fault's record and the journal get the time between, as `what`.
    fn hold_on_redis(
        &mut self,
        record: &mut FaultRecord,
        hold_ms: u64,
        what: Impairment,
        inject: impl FnOnce(&System) -> io::Result<()>,
        clear: impl FnOnce(&System) -> io::Result<()>,
    ) -> anyhow::Result<()> {
        inject(self.system)?;
        let from = time::now();
        record.inject = from;
        sleep_ms(hold_ms);
        clear(self.system)?;
        let to = time::now();
        record.clear = to;
        self.span(None, from, to, what);
        Ok(())
    }

    pub(crate) fn link_fault(
        &mut self,
        record: &mut FaultRecord,
        target: Target,
        link: Fault,
        hold_ms: u64,
        what: Impairment,
    ) -> anyhow::Result<()> {
        let Some(i) = self.aim(record, target, "no leader") else {
            return Ok(());
        };
        let replica = &self.system.replicas[i];
        replica.proxy.set(link);
        let from = time::now();
        record.inject = from;
        sleep_ms(hold_ms);
        replica.proxy.set(Fault::Pass);
        let to = time::now();
        record.clear = to;
        self.journal.links.push(Span {
            replica: Some(i),
            incarnation: replica.incarnation(),
            from,
            to,
            what,
        });
        Ok(())
    }

    /// The leader's command, waiting a moment for it to start.
    pub(crate) fn child_of(&self, replica: usize) -> Option<u32> {
        for _ in 0..200 {
            if let Some(pid) = self.system.replicas[replica].child_pid() {
                return Some(pid);
            }
            sleep_ms(5);
        }
        None
    }
}

/// Whether the fault is aimed at whoever leads.
fn targets_leader(fault: &FaultSpec) -> bool {
    match fault {
        FaultSpec::PauseChild { .. }
        | FaultSpec::LateDelivery { .. }
        | FaultSpec::Daemonize { .. }
        | FaultSpec::IgnoreSigterm { .. }
        | FaultSpec::ForeignLease { .. }
        | FaultSpec::ForeignReservation { .. } => true,
        FaultSpec::CpuStarve { target, .. }
        | FaultSpec::GraySlowRequests { target, .. }
        | FaultSpec::GraySlowReplies { target, .. }
        | FaultSpec::GrayResetReplies { target, .. }
        | FaultSpec::GrayNoPermission { target, .. }
        | FaultSpec::GrayStarved { target, .. } => *target == Target::Leader,
        FaultSpec::PauseReplica { target, .. }
        | FaultSpec::KillReplica { target, .. }
        | FaultSpec::LinkDelay { target, .. }
        | FaultSpec::LinkDrop { target, .. }
        | FaultSpec::LinkBlackhole { target, .. } => *target == Target::Leader,
        _ => false,
    }
}

pub(crate) fn skip(mut record: FaultRecord, why: &str) -> FaultRecord {
    record.skipped = Some(why.to_owned());
    record
}
