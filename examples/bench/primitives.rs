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

/// Both implementations with `clients` concurrent clients, in `rounds` rounds of `amount`
/// each. Returns leasehold's run, then rslock's.
pub async fn compare(
    url: &str,
    clients: usize,
    amount: Amount,
    rounds: usize,
) -> Result<[PrimitiveRun; 2]> {
    let (ours, theirs) = alternate(
        Side::Leasehold(url),
        Side::Rslock(url),
        clients,
        amount,
        rounds,
    )
    .await?;
    Ok([
        ours.finish("leasehold", clients),
        theirs.finish("rslock", clients),
    ])
}

/// The implementation name of leasehold's primitives against a Sentinel set's master, directly.
pub const SENTINEL_DIRECT: &str = "leasehold, the master directly";
/// The implementation name of leasehold's primitives through the set's three Sentinels.
pub const SENTINEL_THROUGH: &str = "leasehold, through 3 Sentinels";

/// What the Sentinel majority costs: leasehold's primitives with one client against a master
/// with one replica, directly (`direct`, a master no Sentinel watches: one that Sentinels watch
/// is refused by its own address) and a Sentinel set's master through its Sentinels
/// (`through`, where each acquire and renewal asks every Sentinel beside the script), in
/// `rounds` rounds.
/// Returns the direct run, then the one through the Sentinels.
pub async fn sentinel_cost(
    direct: &str,
    through: &str,
    amount: Amount,
    rounds: usize,
) -> Result<[PrimitiveRun; 2]> {
    let (plain, majority) = alternate(
        Side::Leasehold(direct),
        Side::Leasehold(through),
        1,
        amount,
        rounds,
    )
    .await?;
    Ok([
        plain.finish(SENTINEL_DIRECT, 1),
        majority.finish(SENTINEL_THROUGH, 1),
    ])
}

/// One side of a comparison: an implementation and the URL it runs on.
#[derive(Clone, Copy)]
enum Side<'a> {
    Leasehold(&'a str),
    Rslock(&'a str),
}

impl Side<'_> {
    async fn run(self, clients: usize, amount: Amount) -> Result<Raw> {
        match self {
            Side::Leasehold(url) => leasehold(url, clients, amount).await,
            Side::Rslock(url) => rslock(url, clients, amount).await,
        }
    }
}

/// `a` and `b` with `clients` clients each, in `rounds` rounds of `amount`; the order flips
/// every round, so that the drift of a shared machine hits both alike.
async fn alternate(
    a: Side<'_>,
    b: Side<'_>,
    clients: usize,
    amount: Amount,
    rounds: usize,
) -> Result<(Raw, Raw)> {
    let (mut first, mut second) = (Raw::default(), Raw::default());
    for round in 0..rounds {
        if round % 2 == 0 {
            first.add(a.run(clients, amount).await?);
            second.add(b.run(clients, amount).await?);
        } else {
            second.add(b.run(clients, amount).await?);
            first.add(a.run(clients, amount).await?);
        }
    }
    Ok((first, second))
}

/// Latencies per operation, whole cycles and the time they took, of one or more rounds.
#[derive(Default)]
struct Raw {
    lat: [Vec<Duration>; 3],
    cycles: usize,
    elapsed: Duration,
}

impl Raw {
    fn add(&mut self, other: Raw) {
        for (into, from) in self.lat.iter_mut().zip(other.lat) {
            into.extend(from);
        }
        self.cycles += other.cycles;
        self.elapsed += other.elapsed;
    }

    fn finish(self, implementation: &'static str, clients: usize) -> PrimitiveRun {
        PrimitiveRun {
            implementation,
            clients,
            ops: [
                Summary::of(&self.lat[0]),
                Summary::of(&self.lat[1]),
                Summary::of(&self.lat[2]),
            ],
            cycles_per_s: self.cycles as f64 / self.elapsed.as_secs_f64().max(1e-9),
        }
    }
}

/// leasehold's primitives with `clients` concurrent clients.
async fn leasehold(url: &str, clients: usize, amount: Amount) -> Result<Raw> {
    let barrier = Arc::new(Barrier::new(clients));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let lease = lease(
            url,
            &format!("bench/primitive-{clients}-{i}"),
            &format!("p{i}"),
        )?;
        tasks.push(tokio::spawn(run_client(
            barrier.clone(),
            amount,
            async move || {
                let t = Instant::now();
                let token = match lease.acquire(TTL, TIMEOUT).await.context("acquire")? {
                    Acquired::Leader(grant) => grant.token,
                    other => bail!("acquire on a free key did not lead: {other:?}"),
                };
                let t1 = Instant::now();
                match lease.renew(token, TTL, TIMEOUT).await.context("renew")? {
                    Renewed::Held(_) => {}
                    other => bail!("renew of a held lease: {other:?}"),
                }
                let t2 = Instant::now();
                match lease.release(token, TIMEOUT).await.context("release")? {
                    Released::Released => {}
                    other => bail!("release of a held lease: {other:?}"),
                }
                let t3 = Instant::now();
                Ok([t1 - t, t2 - t1, t3 - t2])
            },
        )));
    }
    collect("leasehold", tasks).await
}

/// rslock's lock / extend / unlock with `clients` concurrent clients (one `LockManager` each,
/// no retries: every key is free).
async fn rslock(url: &str, clients: usize, amount: Amount) -> Result<Raw> {
    let barrier = Arc::new(Barrier::new(clients));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let client = redis::Client::open(url).context("redis URL for rslock")?;
        let mut manager = LockManager::from_clients(vec![client]);
        manager.set_retry(1, Duration::from_millis(1));
        let resource = format!("bench:rslock:{clients}:{i}");
        tasks.push(tokio::spawn(run_client(
            barrier.clone(),
            amount,
            async move || {
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
                Ok([t1 - t, t2 - t1, t3 - t2])
            },
        )));
    }
    collect("rslock", tasks).await
}

/// One client: `WARMUP_CYCLES` cycles unmeasured, then, once every client is warm, the cycles of
/// `amount`; `cycle` runs one cycle and returns the latencies of its three operations.
async fn run_client(
    barrier: Arc<Barrier>,
    amount: Amount,
    mut cycle: impl AsyncFnMut() -> Result<[Duration; 3]>,
) -> ClientResult {
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
        let took = cycle().await?;
        done += 1;
        if measuring {
            cycles += 1;
            for (into, took) in lat.iter_mut().zip(took) {
                into.push(took);
            }
        }
    }
    Ok((lat, cycles, started.elapsed()))
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
    tasks: Vec<tokio::task::JoinHandle<ClientResult>>,
) -> Result<Raw> {
    let mut raw = Raw::default();
    for task in tasks {
        let (lat, n, elapsed) = task
            .await
            .with_context(|| format!("{implementation} client task"))??;
        for (into, from) in raw.lat.iter_mut().zip(lat) {
            into.extend(from);
        }
        raw.cycles += n;
        raw.elapsed = raw.elapsed.max(elapsed);
    }
    Ok(raw)
}
