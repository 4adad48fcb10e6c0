//! Pause step-down: a leader process is frozen (SIGSTOP) past its validity deadline while an
//! in-process follower takes the lease over, then resumed (SIGCONT).
//!
//! The leader is this harness re-run in `pause-child` mode: an elector whose work acts every
//! millisecond, each action right after `Leadership::check()` said yes. The child counts the
//! actions, the actions whose instant was at or past the validity deadline, and the refusals;
//! when its term ends it prints the boot-clock instant, which the parent compares with the
//! instant it sent SIGCONT (both read `CLOCK_BOOTTIME`, one clock for the whole machine).

use std::convert::Infallible;
use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use leasehold::clock::BootInstant;
use leasehold::elector::decide::FollowerStrategy;
use leasehold::elector::{Elector, Leadership, Timing};
use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::electors::{Event, Member, lease, next_event, since};
use testbed::Guarded;

use crate::procs::{spawn_self, wait_line};

/// One paused leader.
#[derive(Debug, Clone)]
pub struct Sample {
    /// How long the process was frozen.
    pub frozen: Duration,
    /// From SIGCONT to the end of the term (the guard refuses and the work is cancelled).
    pub resume_to_step_down: Duration,
    /// From SIGCONT to the first refusal of the guard, when the work asked before the
    /// watchdog stepped down.
    pub resume_to_refusal: Option<Duration>,
    /// The step-down reason the child saw.
    pub reason: String,
    /// Actions performed through the guard during the term.
    pub actions: u64,
    /// Of those, actions at or after the validity deadline (must be 0).
    pub late_actions: u64,
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The child: leads `lease` and acts every millisecond through the guard; prints `leader` when
/// its term starts and one `term …` line when it ends, then keeps contending until killed.
pub async fn child(url: &str, lease_name: &str, timing: Timing) -> Result<()> {
    let lease = lease(url, lease_name, "paused")?;
    let elector = Elector::new(lease, timing).context("pause timing")?;
    let work = |leadership: Leadership| async move {
        say("leader");
        let (mut actions, mut late) = (0u64, 0u64);
        let mut refused_at: Option<BootInstant> = None;
        loop {
            tokio::select! {
                biased;
                _ = leadership.lost() => break,
                _ = tokio::time::sleep(Duration::from_millis(1)) => {}
            }
            match leadership.check() {
                Ok(_token) => {
                    // The action itself: note when it happened, against the deadline.
                    let at = BootInstant::now();
                    actions += 1;
                    if at >= leadership.valid_until() {
                        late += 1;
                    }
                }
                Err(_) => {
                    refused_at.get_or_insert_with(BootInstant::now);
                    leadership.lost().await;
                    break;
                }
            }
        }
        let ended = BootInstant::now();
        let reason = leadership
            .step_down_reason()
            .map_or("unknown", |r| r.as_label());
        say(&format!(
            "term ended_ns={} refused_ns={} reason={reason} actions={actions} late_actions={late}",
            ended.since_boot().as_nanos(),
            refused_at.map_or(0, |t| t.since_boot().as_nanos()),
        ));
        Ok::<(), Infallible>(())
    };
    elector.run(CancellationToken::new(), work).await;
    Ok(())
}

/// The `term …` line, parsed.
struct Term {
    ended: BootInstant,
    refused: Option<BootInstant>,
    reason: String,
    actions: u64,
    late_actions: u64,
}

fn parse_term(line: &str) -> Option<Term> {
    let rest = line.strip_prefix("term ")?;
    let field = |name: &str| {
        rest.split(' ')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    };
    let instant = |ns: u64| BootInstant::from_since_boot(Duration::from_nanos(ns));
    let refused: u64 = field("refused_ns")?.parse().ok()?;
    Some(Term {
        ended: instant(field("ended_ns")?.parse().ok()?),
        refused: (refused > 0).then(|| instant(refused)),
        reason: field("reason")?.to_owned(),
        actions: field("actions")?.parse().ok()?,
        late_actions: field("late_actions")?.parse().ok()?,
    })
}

/// One wave of frozen leaders: `count` of them, frozen together for the lease duration plus
/// `extra`, then resumed one by one `stagger` apart, so that no two resume at the same moment.
#[derive(Debug, Clone, Copy)]
pub struct Wave {
    /// Which wave of the run; it names the leases.
    pub number: usize,
    pub count: usize,
    pub extra: Duration,
    pub stagger: Duration,
}

impl Wave {
    /// SIGSTOPs every process, noting when each stopped, then waits until their leases are past
    /// due (the lease duration plus `extra`).
    pub async fn freeze(&self, timing: Timing, processes: &[&Guarded]) -> Result<Vec<BootInstant>> {
        let mut stopped = Vec::new();
        for process in processes {
            process.signal(Signal::SIGSTOP)?;
            stopped.push(BootInstant::now());
        }
        tokio::time::sleep(timing.lease_duration + self.extra).await;
        Ok(stopped)
    }

    /// SIGCONTs every process, `stagger` apart; returns when each was resumed.
    pub async fn resume(&self, processes: &[&Guarded]) -> Result<Vec<BootInstant>> {
        let mut resumed = Vec::new();
        for process in processes {
            resumed.push(BootInstant::now());
            process.signal(Signal::SIGCONT)?;
            tokio::time::sleep(self.stagger).await;
        }
        Ok(resumed)
    }
}

/// One wave of paused leaders, each on its own lease with an in-process follower.
pub async fn wave(url: &str, timing: Timing, wave: Wave) -> Result<Vec<Sample>> {
    let wait = Duration::from_secs(15);
    let mut children: Vec<(String, Guarded)> = Vec::new();
    for i in 0..wave.count {
        let lease = format!("bench/pause-{}-{i}", wave.number);
        let args = vec![
            "pause-child".to_owned(),
            url.to_owned(),
            lease.clone(),
            timing.lease_duration.as_millis().to_string(),
            timing.renew_deadline.as_millis().to_string(),
            timing.retry_period.as_millis().to_string(),
        ];
        children.push((lease, spawn_self(&args)?));
    }
    for (lease, child) in &children {
        wait_line(
            &child.stdout,
            0,
            &format!("the paused child of {lease} to lead"),
            wait,
            |l| (l == "leader").then_some(()),
        )
        .await?;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut followers = Vec::new();
    for (i, (lease, _)) in children.iter().enumerate() {
        let identity = format!("pause-{}-{i}-follower", wave.number);
        let mut f = Member::spawn(
            url,
            lease,
            &identity,
            timing,
            FollowerStrategy::Notified,
            tx.clone(),
        )?;
        f.await_following(None, true, wait).await?;
        followers.push(f);
    }
    // Let the leaders act and renew a few times.
    tokio::time::sleep(timing.retry_period * 2).await;

    let processes: Vec<&Guarded> = children.iter().map(|(_, child)| child).collect();
    let stopped = wave.freeze(timing, &processes).await?;
    let resumed = wave.resume(&processes).await?;
    let mut samples = Vec::new();
    for (i, (lease, child)) in children.iter().enumerate() {
        let term = wait_line(
            &child.stdout,
            0,
            &format!("the paused child of {lease} to step down"),
            wait,
            parse_term,
        )
        .await?;
        samples.push(Sample {
            frozen: since(resumed[i], stopped[i]),
            resume_to_step_down: since(term.ended, resumed[i]),
            resume_to_refusal: term.refused.map(|r| since(r, resumed[i])),
            reason: term.reason,
            actions: term.actions,
            late_actions: term.late_actions,
        });
    }
    // Every follower took over while its leader was frozen.
    let mut took_over = 0;
    while took_over < followers.len() {
        next_event(&mut rx, "the followers to take over", wait, |e| {
            matches!(e, Event::Led { .. }).then_some(())
        })
        .await?;
        took_over += 1;
    }
    if samples.len() != wave.count {
        bail!(
            "pause wave {}: {} samples of {}",
            wave.number,
            samples.len(),
            wave.count
        );
    }
    for f in followers {
        f.finish(wait).await?;
    }
    Ok(samples)
}
