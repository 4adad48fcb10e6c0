//! Crash failover: a `leasehold run` leader is SIGKILLed; an in-process follower (leasehold's
//! own, or the polling baseline) takes over once the lease has expired in Redis.
//!
//! The expiry is computed from a `PTTL` read right after the kill: the key expires `PTTL` ms
//! after Redis answered. The instant taken is the one just *before* the `PTTL` was sent, the
//! earliest the expiry can be, so the figure errs against leasehold by up to one round trip
//! plus Redis's millisecond rounding.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use leasehold::clock::BootInstant;
use leasehold::elector::Timing;
use leasehold::elector::decide::FollowerStrategy;
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use crate::electors::{Event, Member, next_event, since};
use crate::procs::{self, Events};

/// One crash failover.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub strategy: FollowerStrategy,
    /// From the lease's expiry in Redis to the follower's `Leadership`.
    pub past_expiry: Duration,
    /// From SIGKILL to the follower's `Leadership`.
    pub after_kill: Duration,
}

/// One wave: a leader process and a follower per strategy in `strategies`, each pair on its
/// own lease; all leaders are killed together.
pub async fn wave(
    bin: &Path,
    url: &str,
    timing: Timing,
    wave: usize,
    strategies: &[FollowerStrategy],
) -> Result<Vec<Sample>> {
    let wait = Duration::from_secs(15);
    let mut leaders = Vec::new();
    for (i, _) in strategies.iter().enumerate() {
        let lease = format!("bench/crash-{wave}-{i}");
        let identity = format!("crash-{wave}-{i}");
        leaders.push((
            lease.clone(),
            procs::start(bin, url, &lease, &identity, &timing, &[]).await?,
        ));
    }
    for (_, leader) in &leaders {
        leader.wait_event(0, "became leader", None, wait).await?;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut followers = Vec::new();
    for ((lease, _), strategy) in leaders.iter().zip(strategies) {
        let identity = format!("{}-follower", lease.replace('/', "-"));
        followers.push(Member::spawn(
            url,
            lease,
            &identity,
            timing,
            *strategy,
            tx.clone(),
        )?);
    }
    for (f, strategy) in followers.iter_mut().zip(strategies) {
        f.await_following(None, *strategy == FollowerStrategy::Notified, wait)
            .await?;
    }
    // Let the followers settle into their steady wait (TTL wake-ups or polls).
    tokio::time::sleep(timing.retry_period * 3).await;

    let client = redis::Client::open(url).context("redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connect to read PTTL")?;
    let mut expiry = HashMap::new();
    for ((lease, leader), f) in leaders.iter().zip(&followers) {
        leader.process.signal(Signal::SIGKILL)?;
        let killed = BootInstant::now();
        let sent = BootInstant::now();
        let pttl: i64 = redis::cmd("PTTL")
            .arg(format!("leasehold:{{{lease}}}"))
            .query_async(&mut conn)
            .await
            .context("PTTL of a killed leader's lease")?;
        if pttl < 0 {
            bail!("the lease {lease} had no TTL right after its leader was killed ({pttl})");
        }
        let expires = sent.saturating_add(Duration::from_millis(pttl as u64));
        expiry.insert(f.owner.clone(), (killed, expires));
    }
    let mut samples = Vec::new();
    let within = timing.lease_duration + timing.retry_period * 3 + Duration::from_secs(5);
    while samples.len() < strategies.len() {
        let (owner, led) = next_event(&mut rx, "a follower to take over", within, |e| match e {
            Event::Led { owner, at } => Some((owner.clone(), *at)),
            _ => None,
        })
        .await
        .with_context(|| format!("crash wave {wave}"))?;
        let Some(i) = followers.iter().position(|f| f.owner == owner) else {
            continue;
        };
        let Some((killed, expires)) = expiry.remove(&owner) else {
            continue;
        };
        samples.push(Sample {
            strategy: strategies[i],
            past_expiry: since(led, expires),
            after_kill: since(led, killed),
        });
    }
    for mut leader in leaders.into_iter().map(|(_, r)| r) {
        procs::wait_exit(&mut leader.process, wait).await?;
    }
    for f in followers {
        f.finish(wait).await?;
    }
    Ok(samples)
}
