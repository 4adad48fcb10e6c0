//! Mixed lease durations across a data loss: some replicas restarted with half the run's
//! timing (a rolling change of `--lease-duration` half done), the lease handed to a replica of
//! the run's timing (`leasehold step-down --to`), and Redis made to lose its data just after
//! that term began. A short replica tries twice as often, so it is the likely finder of the loss
//! while a long one leads; the cooldown it starts must cover the longest lease duration, or
//! the checker finds two leaders at once. Then every replica gets the run's timing back.

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;

use crate::events::Event;
use crate::nemesis::{FaultRecord, Impairment, Nemesis, sleep_ms};
use crate::params::{DataLoss, halved};
use crate::redis_cli::RedisCli;
use crate::schedule::FaultKind;
use crate::time::{self, Micros};
use harness::leasehold_command;
use testbed::Guarded;
use testbed::wait::first_instant;

impl Nemesis<'_> {
    /// The fault: `short` replicas from `first` on get half the timing, then the data loss.
    pub(crate) fn mixed_durations(
        &mut self,
        record: &mut FaultRecord,
        (short, first): (usize, usize),
        loss: DataLoss,
        after_ms: u64,
        down_ms: u64,
    ) -> anyhow::Result<()> {
        let n = self.system.replicas.len();
        // Two at least keep the run's timing: one may lead, another takes the lease over.
        let chosen: Vec<usize> = (0..short.clamp(1, n.saturating_sub(2).max(1)))
            .map(|k| (first + k) % n)
            .collect();
        let base = self.timing;
        let half = halved(&base);
        let wait = FaultKind::MixedDurations.bound(&base) + Duration::from_secs(5);
        record.inject = time::now();
        record.target = chosen.first().copied();
        record.target_led = record
            .leader_before
            .is_some_and(|(l, _)| chosen.contains(&l));
        for &j in &chosen {
            self.system.replicas[j].set_timing(half);
            self.terminate_and_start(j)?;
        }
        let mut words = vec![format!(
            "{} at {}/{}/{} ms",
            names(&chosen),
            half.lease_duration.as_millis(),
            half.renew_deadline.as_millis(),
            half.retry_period.as_millis()
        )];
        let leader = self.system.wait_for_leader(Micros::MIN, wait);
        let to = (0..n)
            .map(|k| (first + k) % n)
            .find(|i| !chosen.contains(i) && leader.is_none_or(|(l, _)| l != *i));
        if let Some(to) = to {
            let handed = self.hand_to(to, wait);
            words.push(format!("step-down --to r{to}: {handed}"));
        }
        sleep_ms(after_ms);
        let leading = self.system.leader();
        let from = match loss {
            DataLoss::Flushall => {
                let at = time::now();
                self.system.redis.cli(0, &["FLUSHALL"])?;
                record.clear = time::now();
                self.span(None, at, record.clear, Impairment::Vanished);
                at
            }
            DataLoss::RestartEmpty => {
                let (at, back) = self.restart_redis(false, down_ms)?;
                record.clear = back;
                at
            }
        };
        words.push(format!(
            "{} {after_ms} ms later, while {} led",
            match loss {
                DataLoss::Flushall => "FLUSHALL".to_owned(),
                DataLoss::RestartEmpty => format!("redis restarted empty ({down_ms} ms down)"),
            },
            leading.map_or("nobody".to_owned(), |(l, _)| format!(
                "r{l} ({} ms)",
                self.system.replicas[l].timing().lease_duration.as_millis()
            ))
        ));
        // The leader of the moment may still be inside its validity window (so the recovery
        // is often 0): the time until a lease proven after the loss says what the cooldown cost.
        let back = self.system.wait_for_leader(record.clear, wait);
        let after = (time::now() - record.clear) / time::MS;
        words.push(self.finders(from, base.lease_duration));
        words.push(back.map_or(format!("no leader within {wait:?}"), |(l, _)| {
            format!("r{l} led {after} ms after it")
        }));
        for &j in &chosen {
            self.system.replicas[j].set_timing(base);
            self.terminate_and_start(j)?;
        }
        words.push("the run's timing back".to_owned());
        record.detail = Some(words.join("; "));
        Ok(())
    }

    /// Hands the lease to replica `to` with leasehold's own operator command, and waits
    /// (bounded) until it leads; says how it went.
    fn hand_to(&mut self, to: usize, wait: Duration) -> String {
        let identity = self.system.replicas[to].identity.clone();
        let mut cmd = leasehold_command(&self.system.leasehold);
        cmd.args(["step-down", "--redis-url", &self.system.redis.url()])
            .args(["--lease-name", &self.system.lease, "--to", &identity])
            .args(["--wait", "5s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let code = Guarded::spawn_unread(cmd, "leasehold step-down")
            .context("cannot run leasehold step-down")
            .and_then(|mut p| {
                p.wait_exit(Duration::from_secs(8))
                    .context("cannot wait for leasehold step-down")
            });
        let led = first_instant(wait, || self.system.leader().is_some_and(|(l, _)| l == to));
        format!(
            "{}, {}",
            match code {
                Ok(Some(code)) => format!("exit {code}"),
                Ok(None) => "no exit within 8 s".to_owned(),
                Err(e) => format!("{e:#}"),
            },
            if led.is_some() {
                "it led"
            } else {
                "it did not lead"
            }
        )
    }

    /// Which replicas found the data loss (they log the cooldown they start), with their lease
    /// duration and the cooldown's length; a cooldown shorter than `longest` goes to the notes.
    fn finders(&mut self, since: Micros, longest: Duration) -> String {
        let mut found = Vec::new();
        for r in &self.system.replicas {
            for e in r.events_since(since) {
                if let Event::CoolingDown { cooldown_ms } = e.event {
                    let own = r.timing().lease_duration.as_millis();
                    found.push(format!(
                        "{} ({own} ms) found the loss, cooldown {cooldown_ms} ms",
                        r.identity
                    ));
                    if u128::from(cooldown_ms) < longest.as_millis() {
                        self.journal.notes.push(format!(
                            "{}: a cooldown of {cooldown_ms} ms after a data loss, shorter than the longest lease duration ({} ms)",
                            r.identity,
                            longest.as_millis()
                        ));
                    }
                }
            }
        }
        if found.is_empty() {
            "nobody logged the loss".to_owned()
        } else {
            found.join(", ")
        }
    }
}

fn names(replicas: &[usize]) -> String {
    let names: Vec<String> = replicas.iter().map(|i| format!("r{i}")).collect();
    names.join(", ")
}
