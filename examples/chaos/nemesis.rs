//! The nemesis: injects the schedule's faults one after another into the running cluster, and
//! writes down what it did and when (the journal), for the checker and the timeline. Before
//! each fault it waits until a replica leads, then for the fault's quiet time.

use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::config::Timing;
use crate::proxy::Link;
use crate::schedule::{FaultKind, FaultSpec, Scheduled, Target};
use crate::time::{self, Micros};

/// A fault as it happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultRecord {
    /// Its place in the schedule.
    pub index: usize,
    /// What was planned.
    pub spec: FaultSpec,
    /// The replica it hit, if it hit one.
    pub target: Option<usize>,
    /// Whether that replica led when it was hit.
    pub target_led: bool,
    /// The leader (replica, token) just before the injection.
    pub leader_before: Option<(usize, u64)>,
    /// When it was injected.
    pub inject: Micros,
    /// When it was lifted (the process continued or was back, Redis was back, the link
    /// passed again).
    pub clear: Micros,
    /// Whether it was skipped (nothing to hit), and why.
    pub skipped: Option<String>,
    /// What the fault did, in words (keys evicted, the helper's pid, how CPU was starved).
    #[serde(default)]
    pub detail: Option<String>,
}

impl FaultRecord {
    /// Its kind.
    pub fn kind(&self) -> FaultKind {
        self.spec.kind()
    }
}

/// What impaired something for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Impairment {
    /// A replica's leasehold SIGSTOPped.
    Paused,
    /// A leader's command SIGSTOPped.
    CommandPaused,
    /// A replica SIGKILLed, until started again.
    Killed,
    /// A replica SIGTERMed, until started again.
    Terminated,
    /// Redis killed, until started again with its data.
    RedisDownKept,
    /// Redis killed, until started again from an empty directory.
    RedisDownLost,
    /// Redis SIGSTOPped.
    RedisPaused,
    /// Every link delayed.
    RedisSlow,
    /// One link delayed.
    LinkDelay,
    /// One link reset.
    LinkDrop,
    /// One link blackholed.
    LinkBlackhole,
    /// Redis under a small maxmemory with an evicting policy.
    Evicting,
    /// The lease deleted or flushed (an instant).
    Vanished,
    /// One link (or one connection) delayed past the call timeout.
    LateLink,
    /// A replica's leasehold held to a CPU quota (or crowded by busy loops).
    Starved,
    /// Every command told to exit at once.
    FailingWork,
    /// A follower's pub/sub connection blackholed.
    DeadSubscription,
}

impl Impairment {
    /// In a few words.
    pub fn label(self) -> &'static str {
        match self {
            Impairment::Paused => "leasehold paused (SIGSTOP)",
            Impairment::CommandPaused => "command paused (SIGSTOP)",
            Impairment::Killed => "killed (SIGKILL)",
            Impairment::Terminated => "terminated (SIGTERM)",
            Impairment::RedisDownKept => "redis down, data kept",
            Impairment::RedisDownLost => "redis down, data gone",
            Impairment::RedisPaused => "redis paused (SIGSTOP)",
            Impairment::RedisSlow => "every link delayed",
            Impairment::LinkDelay => "link delayed",
            Impairment::LinkDrop => "link dropped (reset)",
            Impairment::LinkBlackhole => "link blackholed",
            Impairment::Evicting => "redis evicting",
            Impairment::Vanished => "lease deleted or flushed",
            Impairment::LateLink => "link delayed past the call timeout",
            Impairment::Starved => "leasehold starved of CPU",
            Impairment::FailingWork => "commands exit at once",
            Impairment::DeadSubscription => "subscription blackholed",
        }
    }
}

/// A stretch of time something was impaired.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Span {
    /// The replica, or `None` for Redis or every link.
    pub replica: Option<usize>,
    /// Which process of the replica.
    pub incarnation: usize,
    /// Start.
    pub from: Micros,
    /// End.
    pub to: Micros,
    /// What it was, in a word.
    pub what: Impairment,
}

/// Everything the nemesis did.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Journal {
    /// The faults.
    pub faults: Vec<FaultRecord>,
    /// A replica's leasehold stopped (SIGSTOP to SIGCONT).
    pub pauses: Vec<Span>,
    /// A leader's command stopped.
    pub child_pauses: Vec<Span>,
    /// A replica's process gone (SIGKILL or SIGTERM until it was started again).
    pub downs: Vec<Span>,
    /// Redis down, paused or slow (`replica` is `None`).
    pub redis: Vec<Span>,
    /// A link fault on one replica (or on every one: `replica` is `None`).
    pub links: Vec<Span>,
    /// A replica's leasehold starved of CPU.
    #[serde(default)]
    pub starved: Vec<Span>,
    /// The second generation's other faults: eviction, vanish, failing work (`replica` is
    /// `None`), a dead subscription (the follower's).
    #[serde(default)]
    pub other: Vec<Span>,
    /// When the first fault was injected.
    pub first_fault: Micros,
    /// When the schedule ended (before the final shutdown).
    pub end: Micros,
    /// Things that did not go to plan (no leader before a fault, a target missing).
    pub notes: Vec<String>,
}

/// Runs the schedule.
pub struct Nemesis<'a> {
    pub(crate) cluster: &'a mut Cluster,
    pub(crate) timing: Timing,
    pub(crate) journal: Journal,
}

/// Sleeps `ms` milliseconds.
pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

impl<'a> Nemesis<'a> {
    /// A nemesis for `cluster`.
    pub fn new(cluster: &'a mut Cluster, timing: Timing) -> Self {
        Self {
            cluster,
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
            if self.cluster.wait_for_leader(since, wait).is_none() {
                self.journal.notes.push(format!(
                    "no replica led within {wait:?} before fault #{}",
                    planned.index
                ));
            }
            sleep_ms(planned.quiet_ms);
            // A fault aimed at the leader waits for one if leadership moved meanwhile.
            if targets_leader(&planned.fault) && self.cluster.leader().is_none() {
                let _ = self.cluster.wait_for_leader(Micros::MIN, wait);
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
        if self.cluster.wait_for_leader(since, wait).is_none() {
            self.journal
                .notes
                .push("no replica led after the last fault".to_owned());
        }
        sleep_ms(500);
        Ok(())
    }

    pub(crate) fn resolve(&self, target: Target) -> (Option<usize>, Option<(usize, u64)>) {
        let leader = self.cluster.leader();
        let index = match target {
            Target::Leader => leader.map(|(i, _)| i),
            Target::Replica(i) => Some(i % self.cluster.replicas.len()),
        };
        (index, leader)
    }

    fn inject(&mut self, planned: &Scheduled) -> anyhow::Result<FaultRecord> {
        let leader_before = self.cluster.leader();
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
        };
        match planned.fault {
            FaultSpec::PauseReplica { target, pause_ms } => {
                let (Some(i), leader) = self.resolve(target) else {
                    return Ok(skip(record, "no leader to pause"));
                };
                record.target = Some(i);
                record.target_led = leader.is_some_and(|(l, _)| l == i);
                let replica = &mut self.cluster.replicas[i];
                let (incarnation, from) = replica.pause(true)?;
                record.inject = from;
                sleep_ms(pause_ms);
                let (_, to) = replica.pause(false)?;
                record.clear = to;
                self.journal.pauses.push(Span {
                    replica: Some(i),
                    incarnation,
                    from,
                    to,
                    what: Impairment::Paused,
                });
            }
            FaultSpec::PauseChild { pause_ms } => {
                let Some((i, _)) = self.cluster.leader() else {
                    return Ok(skip(record, "no leader"));
                };
                record.target = Some(i);
                record.target_led = true;
                let Some(pid) = self.child_of(i) else {
                    return Ok(skip(record, "the leader's command was not found"));
                };
                let incarnation = self.cluster.replicas[i].incarnation();
                let pid = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
                kill(pid, Signal::SIGSTOP).context("cannot SIGSTOP the leader's command")?;
                let from = time::now();
                record.inject = from;
                sleep_ms(pause_ms);
                // It may have been killed meanwhile (its leasehold stepped down): ESRCH.
                let _ = kill(pid, Signal::SIGCONT);
                let to = time::now();
                record.clear = to;
                self.journal.child_pauses.push(Span {
                    replica: Some(i),
                    incarnation,
                    from,
                    to,
                    what: Impairment::CommandPaused,
                });
            }
            FaultSpec::KillReplica { target, down_ms } => {
                let (Some(i), leader) = self.resolve(target) else {
                    return Ok(skip(record, "no leader to kill"));
                };
                record.target = Some(i);
                record.target_led = leader.is_some_and(|(l, _)| l == i);
                let replica = &mut self.cluster.replicas[i];
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
                for i in 0..self.cluster.replicas.len() {
                    let replica = &mut self.cluster.replicas[i];
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
                self.cluster.redis.kill();
                let from = time::now();
                record.inject = from;
                sleep_ms(down_ms);
                self.cluster.redis.restart(keep)?;
                let to = time::now();
                record.clear = to;
                self.journal.redis.push(Span {
                    replica: None,
                    incarnation: 0,
                    from,
                    to,
                    what: if keep {
                        Impairment::RedisDownKept
                    } else {
                        Impairment::RedisDownLost
                    },
                });
            }
            FaultSpec::LinkDelay {
                target,
                delay_ms,
                hold_ms,
            } => {
                let link = Link::Delay(Duration::from_millis(delay_ms));
                self.link_fault(&mut record, target, link, hold_ms, Impairment::LinkDelay)?;
            }
            FaultSpec::LinkDrop { target, hold_ms } => {
                self.link_fault(
                    &mut record,
                    target,
                    Link::Drop,
                    hold_ms,
                    Impairment::LinkDrop,
                )?;
            }
            FaultSpec::LinkBlackhole { target, hold_ms } => {
                self.link_fault(
                    &mut record,
                    target,
                    Link::Blackhole,
                    hold_ms,
                    Impairment::LinkBlackhole,
                )?;
            }
            FaultSpec::RedisPause { pause_ms } => {
                self.cluster.redis.signal(Signal::SIGSTOP)?;
                let from = time::now();
                record.inject = from;
                sleep_ms(pause_ms);
                self.cluster.redis.signal(Signal::SIGCONT)?;
                let to = time::now();
                record.clear = to;
                self.journal.redis.push(Span {
                    replica: None,
                    incarnation: 0,
                    from,
                    to,
                    what: Impairment::RedisPaused,
                });
            }
            FaultSpec::Eviction { .. }
            | FaultSpec::Vanish { .. }
            | FaultSpec::LateDelivery { .. }
            | FaultSpec::Daemonize { .. }
            | FaultSpec::IgnoreSigterm { .. }
            | FaultSpec::CpuStarve { .. }
            | FaultSpec::FailingWork { .. }
            | FaultSpec::DeadSubscription { .. } => {
                self.inject_second(planned, &mut record)?;
            }
            FaultSpec::SlowRedis { delay_ms, hold_ms } => {
                self.cluster
                    .set_all_links(Link::Delay(Duration::from_millis(delay_ms)));
                let from = time::now();
                record.inject = from;
                sleep_ms(hold_ms);
                self.cluster.set_all_links(Link::Pass);
                let to = time::now();
                record.clear = to;
                self.journal.redis.push(Span {
                    replica: None,
                    incarnation: 0,
                    from,
                    to,
                    what: Impairment::RedisSlow,
                });
            }
        }
        Ok(record)
    }

    pub(crate) fn link_fault(
        &mut self,
        record: &mut FaultRecord,
        target: Target,
        link: Link,
        hold_ms: u64,
        what: Impairment,
    ) -> anyhow::Result<()> {
        let (Some(i), leader) = self.resolve(target) else {
            record.skipped = Some("no leader".to_owned());
            return Ok(());
        };
        record.target = Some(i);
        record.target_led = leader.is_some_and(|(l, _)| l == i);
        let replica = &self.cluster.replicas[i];
        replica.proxy.set(link);
        let from = time::now();
        record.inject = from;
        sleep_ms(hold_ms);
        replica.proxy.set(Link::Pass);
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
            if let Some(pid) = self.cluster.replicas[replica].child_pid() {
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
        | FaultSpec::IgnoreSigterm { .. } => true,
        FaultSpec::CpuStarve { target, .. } => *target == Target::Leader,
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
