//! Graceful handoff: a leader shuts down (steps down, releases) and a follower takes over.
//!
//! In-process, every instant is read from the same boot clock: the old leader's work ends (the
//! elector sends the release right after) and the successor's work is handed its `Leadership`.
//! End to end, a `leasehold run` leader gets SIGTERM and a `leasehold run` follower logs
//! `became leader`; both instants are wall-clock times on this machine.

use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use leasehold::clock::BootInstant;
use leasehold::elector::Timing;
use leasehold::elector::decide::FollowerStrategy;
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use crate::electors::{Event, Member, led_by_other, next_event, since};
use crate::procs::{self, Events};

/// One in-process handoff.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// From the old leader's work ending (the release is sent next) to the successor's
    /// `Leadership`.
    pub from_release: Duration,
    /// From the shutdown request to the successor's `Leadership`.
    pub from_shutdown: Duration,
}

/// Runs `rounds` handoffs in one lease with `followers` standing by. With `random_phase`, each
/// shutdown waits a random part of the polling cycle first, so that polling followers are
/// caught at a random point of their cycle, as a real rollout would.
pub async fn in_process(
    url: &str,
    lease: &str,
    timing: Timing,
    strategy: FollowerStrategy,
    followers: usize,
    rounds: usize,
    random_phase: bool,
) -> Result<Vec<Sample>> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let subscribed = strategy == FollowerStrategy::Notified;
    let mut next_id = 0usize;
    let mut spawn = |tx: &mpsc::UnboundedSender<Event>| {
        next_id += 1;
        Member::spawn(
            url,
            lease,
            &format!("h{next_id}"),
            timing,
            strategy,
            tx.clone(),
        )
    };
    let settle = timing.lease_duration * 2 + Duration::from_secs(5);
    let mut leader = spawn(&tx)?;
    let first = leader.owner.clone();
    next_event(&mut rx, "the first leader", settle, |e| match e {
        Event::Led { owner, .. } if *owner == first => Some(()),
        _ => None,
    })
    .await?;
    let mut standby: Vec<Member> = Vec::new();
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        while standby.len() < followers {
            standby.push(spawn(&tx)?);
        }
        for f in standby.iter_mut() {
            // Polling followers learn the new leader only at their next poll; any leader will do.
            let want = subscribed.then_some(leader.owner.as_str());
            f.await_following(want, subscribed, settle).await?;
        }
        if random_phase {
            let cycle = timing.retry_period.mul_f64(2.2);
            tokio::time::sleep(cycle.mul_f64(rand::random::<f64>())).await;
        }
        while rx.try_recv().is_ok() {}
        let old = leader.owner.clone();
        let asked = BootInstant::now();
        leader.stop();
        let within = timing.lease_duration + timing.retry_period * 3 + Duration::from_secs(5);
        let mut ended = None;
        let mut led = None;
        while ended.is_none() || led.is_none() {
            let event = next_event(&mut rx, "the handoff", within, |e| Some(e.clone()))
                .await
                .with_context(|| format!("round {round} of {lease}"))?;
            match event {
                Event::Ended { owner, at } if owner == old => ended = Some(at),
                ref e => {
                    if let Some((owner, at)) = led_by_other(&old)(e) {
                        led = Some((owner, at));
                    }
                }
            }
        }
        let (Some(ended), Some((new_owner, led_at))) = (ended, led) else {
            bail!("round {round}: the handoff was not observed");
        };
        samples.push(Sample {
            from_release: since(led_at, ended),
            from_shutdown: since(led_at, asked),
        });
        leader.finish(Duration::from_secs(10)).await?;
        let Some(pos) = standby.iter().position(|m| m.owner == new_owner) else {
            bail!("round {round}: the new leader {new_owner} is not one of the followers");
        };
        leader = standby.swap_remove(pos);
    }
    Ok(samples)
}

/// One end-to-end handoff between `leasehold run` processes.
#[derive(Debug, Clone, Copy)]
pub struct ProcessSample {
    /// From SIGTERM to the old process until the successor logs `became leader`.
    pub from_sigterm: Duration,
    /// From the old process's `stepped down` (it releases right after) to the successor's
    /// `became leader`.
    pub from_step_down: Duration,
}

/// The command of the exec-mode handoff: a shell that starts a worker and waits for it, so that
/// the handoff stops a tree of two processes, as a real command is.
pub const EXEC_COMMAND: [&str; 3] = ["sh", "-c", "sleep 1000 & wait"];

/// `rounds` handoffs: each round starts a new follower, waits until it follows the leader with
/// its release channel subscribed, then sends SIGTERM to the leader. With a `command`, every
/// replica runs it while leading (exec mode), so that the old leader stops its command's tree
/// before it releases.
pub async fn processes(
    bin: &Path,
    url: &str,
    lease: &str,
    timing: Timing,
    rounds: usize,
    command: &[&str],
) -> Result<Vec<ProcessSample>> {
    let wait = Duration::from_secs(10);
    let mut leader = procs::start(bin, url, lease, "e2e-0", &timing, command).await?;
    leader.wait_event(0, "became leader", None, wait).await?;
    let mut samples = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let successor =
            procs::start(bin, url, lease, &format!("e2e-{round}"), &timing, command).await?;
        successor
            .wait_event(
                0,
                "following leader",
                Some(("leader", &leader.identity)),
                wait,
            )
            .await?;
        let deadline = std::time::Instant::now() + wait;
        while !successor
            .leader_view()
            .is_some_and(|v| v["redis"]["subscribed"] == true)
        {
            if std::time::Instant::now() >= deadline {
                bail!(
                    "{} never subscribed to the release channel",
                    successor.identity
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let from = leader.log_len();
        let sent = SystemTime::now();
        leader.process.signal(Signal::SIGTERM)?;
        let led = successor.wait_event(0, "became leader", None, wait).await?;
        let code = procs::wait_exit(&mut leader.process, wait).await?;
        if code != 0 {
            bail!("{} exited with code {code} after SIGTERM", leader.identity);
        }
        let stepped_down = leader.wait_event(from, "stepped down", None, wait).await?;
        samples.push(ProcessSample {
            from_sigterm: led.duration_since(sent).unwrap_or_default(),
            from_step_down: led.duration_since(stepped_down).unwrap_or_default(),
        });
        leader = successor;
    }
    Ok(samples)
}
