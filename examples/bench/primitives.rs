//! Primitive cost: leasehold's acquire / renew / release against rslock's lock / extend / unlock,
//! on the same redis-server with the same number of concurrent clients. Each client has its own
//! connection and its own key, and runs whole cycles (take, extend, give back), so that every
//! call succeeds and measures the work of a holder, not of a lost race.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use leasehold::lease::{Acquired, Released, Renewed};
use rslock::LockManager;
use tokio::sync::Barrier;

use crate::electors::lease;
use crate::stats::Summary;

/// The three operations of a cycle.
pub const OPS: [(&str, &str); 3] = [
    ("acquire", "lock"),
    ("renew", "extend"),
    ("release", "unlock"),
];

/// The latencies of one implementation at one concurrency.
#[derive(Debug, Clone)]
pub struct PrimitiveRun {
    pub implementation: &'static str,
    pub clients: usize,
    /// Per operation, in the order of [`OPS`].
    pub ops: [Option<Summary>; 3],
    /// Whole cycles per second, all clients together.
    pub cycles_per_s: f64,
}

/// How long each client runs: a number of cycles, or a fixed time.
#[derive(Debug, Clone, Copy)]
pub enum Amount {
    Cycles(usize),
    Time(Duration),
}

const TTL: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(5);
const WARMUP_CYCLES: usize = 50;

/// leasehold's primitives with `clients` concurrent clients.
pub async fn leasehold(url: &str, clients: usize, amount: Amount) -> Result<PrimitiveRun> {
    let barrier = Arc::new(Barrier::new(clients));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let lease = lease(
            url,
            &format!("bench/primitive-{clients}-{i}"),
            &format!("p{i}"),
        )?;
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat: [Vec<Duration>; 3] = Default::default();
            let mut measuring = false;
            let mut started = Instant::now();
            let mut cycles = 0usize;
            let mut done = 0usize;
            loop {
                if !measuring && done == WARMUP_CYCLES {
                    barrier.wait().await;
                    measuring = true;
                    started = Instant::now();
                }
                if measuring && amount_done(amount, cycles, started) {
                    break;
                }
                let t = Instant::now();
                match lease.acquire(TTL, TIMEOUT).await.context("acquire")? {
                    Acquired::Leader(_) => {}
                    other => bail!("acquire on a free key did not lead: {other:?}"),
                }
                let t1 = Instant::now();
                match lease.renew(TTL, TIMEOUT).await.context("renew")? {
                    Renewed::Held { .. } => {}
                    other => bail!("renew of a held lease: {other:?}"),
                }
                let t2 = Instant::now();
                match lease.release(TIMEOUT).await.context("release")? {
                    Released::Released => {}
                    other => bail!("release of a held lease: {other:?}"),
                }
                let t3 = Instant::now();
                done += 1;
                if measuring {
                    cycles += 1;
                    lat[0].push(t1 - t);
                    lat[1].push(t2 - t1);
                    lat[2].push(t3 - t2);
                }
            }
            Ok::<_, anyhow::Error>((lat, cycles, started.elapsed()))
        }));
    }
    collect("leasehold", clients, tasks).await
}

/// rslock's lock / extend / unlock with `clients` concurrent clients (one `LockManager` each,
/// no retries: every key is free).
pub async fn rslock(url: &str, clients: usize, amount: Amount) -> Result<PrimitiveRun> {
    let barrier = Arc::new(Barrier::new(clients));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let client = redis::Client::open(url).context("redis URL for rslock")?;
        let mut manager = LockManager::from_clients(vec![client]);
        manager.set_retry(1, Duration::from_millis(1));
        let resource = format!("bench:rslock:{clients}:{i}");
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat: [Vec<Duration>; 3] = Default::default();
            let mut measuring = false;
            let mut started = Instant::now();
            let mut cycles = 0usize;
            let mut done = 0usize;
            loop {
                if !measuring && done == WARMUP_CYCLES {
                    barrier.wait().await;
                    measuring = true;
                    started = Instant::now();
                }
                if measuring && amount_done(amount, cycles, started) {
                    break;
                }
                let t = Instant::now();
                let lock = manager
                    .lock(resource.as_bytes(), TTL)
                    .await
                    .context("rslock lock on a free key")?;
                let t1 = Instant::now();
                let lock = manager
                    .extend(&lock, TTL)
                    .await
                    .context("rslock extend of a held lock")?;
                let t2 = Instant::now();
                manager.unlock(&lock).await;
                let t3 = Instant::now();
                done += 1;
                if measuring {
                    cycles += 1;
                    lat[0].push(t1 - t);
                    lat[1].push(t2 - t1);
                    lat[2].push(t3 - t2);
                }
            }
            Ok::<_, anyhow::Error>((lat, cycles, started.elapsed()))
        }));
    }
    collect("rslock", clients, tasks).await
}

fn amount_done(amount: Amount, cycles: usize, started: Instant) -> bool {
    match amount {
        Amount::Cycles(n) => cycles >= n,
        Amount::Time(d) => started.elapsed() >= d,
    }
}

type ClientResult = Result<([Vec<Duration>; 3], usize, Duration)>;

async fn collect(
    implementation: &'static str,
    clients: usize,
    tasks: Vec<tokio::task::JoinHandle<ClientResult>>,
) -> Result<PrimitiveRun> {
    let mut all: [Vec<Duration>; 3] = Default::default();
    let mut cycles = 0usize;
    let mut longest = Duration::ZERO;
    for task in tasks {
        let (lat, n, elapsed) = task
            .await
            .with_context(|| format!("{implementation} client task"))??;
        for (into, from) in all.iter_mut().zip(lat) {
            into.extend(from);
        }
        cycles += n;
        longest = longest.max(elapsed);
    }
    Ok(PrimitiveRun {
        implementation,
        clients,
        ops: [
            Summary::of(&all[0]),
            Summary::of(&all[1]),
            Summary::of(&all[2]),
        ],
        cycles_per_s: cycles as f64 / longest.as_secs_f64().max(1e-9),
    })
}
