//! leasehold's benchmarks: graceful handoff, crash failover, pause step-down, Redis load,
//! footprint and primitive cost, each side by side with its alternative (the polling baseline,
//! rslock, redis-benchmark and the loopback round trip) in one run, against redis-servers this
//! harness starts on free ports. It writes the report (Markdown) and its plot (SVG).
//!
//! ```text
//! cargo build --release --bin leasehold --example bench
//! target/release/examples/bench [--out docs/BENCHMARKS.md] [--quick] [--peers[=false]] [--image[=false]] [--flood[=false]]
//! ```
//!
//! `scripts/bench.sh` does both and times them. Layout:
//!
//! - `physical.rs`: loopback round trips and redis-benchmark (the limit of this machine)
//! - `primitives.rs`: acquire / renew / release against rslock's lock / extend / unlock
//! - `handoff.rs`: graceful handoff, in-process and between `leasehold run` processes
//! - `herd.rs`: the `herd` mode, handoffs by group size only (no report)
//! - `failover.rs`: SIGKILLed leader processes, measured from the lease's expiry
//! - `pause.rs`: SIGSTOPped leaders past their deadline (and the child mode they run in)
//! - `exec_pause.rs`: SIGSTOPped `leasehold run -- sh` leaders: resume → the command gone
//! - `load.rs`: Redis commands per contender from `INFO commandstats`, and per transition
//! - `footprint.rs`: RSS and CPU of idle replicas from /proc, binary size
//! - `flood.rs`: a leader's memory, open files and probes under thousands of hostile connections
//! - `peers/`: redis-py, python-redis-lock, pottery and node-redlock beside leasehold in both
//!   modes, installed pinned into a scratch folder (the full run only, or `--peers`)
//! - `electors.rs`, `procs.rs`: in-process electors and child-process guards
//! - `cli.rs`: the command line, and the internal modes the harness runs itself in
//! - `plan.rs`: how much of everything the full and the quick run measure
//! - `stats.rs`, `svg.rs`, `report.rs`, `machine.rs`: summaries, the plot, the report

mod cli;
mod electors;
mod exec_pause;
mod failover;
mod flood;
mod footprint;
mod handoff;
mod herd;
mod load;
mod machine;
mod pause;
mod peers;
mod physical;
mod plan;
mod primitives;
mod procs;
mod report;
mod stats;
mod svg;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use leasehold::elector::Timing;
use leasehold::elector::decide::FollowerStrategy;

use crate::cli::{Cli, Mode};
pub use crate::plan::Plan;
use crate::plan::ms;
use crate::primitives::Amount;
use crate::report::Results;
use testbed::RedisServer;
use testbed::sentinel::SentinelSet;

/// Progress on stderr, with the time since the start.
fn progress(started: Instant, what: &str) {
    eprintln!("[bench {:>6.1}s] {what}", started.elapsed().as_secs_f64());
}

async fn start_redis() -> Result<RedisServer> {
    // On this worker thread, not a blocking-pool one: the server dies with the thread that
    // started it (its parent-death signal), and idle blocking-pool threads exit.
    tokio::task::block_in_place(|| RedisServer::builder().try_start())
        .context("start a redis-server (apt-get install redis-server)")
}

/// The `leasehold` binary beside this harness: target/<profile>/examples/bench → target/<profile>/leasehold.
fn default_bin() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("find the harness's own executable")?;
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .context("the harness is not in target/<profile>/examples")?;
    Ok(profile.join("leasehold"))
}

async fn run(cli: Cli) -> Result<()> {
    let started = Instant::now();
    let mut plan = if cli.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    plan.peers = cli.peers.unwrap_or(plan.peers);
    let image = cli.image.unwrap_or(!plan.quick);
    let bin = match cli.leasehold_bin.clone() {
        Some(b) => b,
        None => default_bin()?,
    };
    if !bin.is_file() {
        bail!(
            "no leasehold binary at {} (build it: cargo build --release --bin leasehold)",
            bin.display()
        );
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut results = Results::new(machine::machine(), machine::versions(repo, &bin));
    let cpu_at_start = machine::CpuTicks::now();
    if !results.machine.busy_before.is_empty() {
        progress(
            started,
            &format!(
                "warning: compilers are running ({}); the figures will be noisy",
                results.machine.busy_before.join(", ")
            ),
        );
    }

    progress(
        started,
        "physical limits: loopback round trips and redis-benchmark",
    );
    {
        let redis = start_redis().await?;
        let rounds = plan.echo_rounds;
        results.physical.tcp_echo = Some(
            tokio::task::spawn_blocking(move || physical::tcp_echo(rounds))
                .await
                .context("echo task")??,
        );
        results.physical.redis_ping =
            Some(physical::redis_ping(&redis.url(), plan.ping_rounds).await?);
        results.physical.benchmark = physical::redis_benchmark(
            redis.port(),
            &redis.url(),
            &plan.bench_clients,
            &plan.bench_requests,
        )
        .await?;
    }

    progress(
        started,
        "primitives: leasehold and rslock, 1 client and many",
    );
    {
        let redis = start_redis().await?;
        let url = redis.url();
        let rounds = plan.prim_rounds;
        let one = Amount::Cycles(plan.prim_cycles_one / rounds);
        let many = Amount::Time(plan.prim_time_many / rounds as u32);
        let n = plan.prim_clients_many;
        results
            .primitives
            .extend(primitives::compare(&url, 1, one, rounds).await?);
        results
            .primitives
            .extend(primitives::compare(&url, n, many, rounds).await?);
    }

    progress(
        started,
        "primitives: leasehold directly and through 3 Sentinels",
    );
    {
        // Directly: a master of the same shape that no Sentinel watches (one that Sentinels
        // watch refuses a term asked by its own address).
        let (set, plain, _replica) = tokio::task::spawn_blocking(|| {
            let plain = RedisServer::start();
            let port = plain.port().to_string();
            let replica = RedisServer::builder()
                .args(["--replicaof", "127.0.0.1", &port])
                .start();
            (SentinelSet::start(), plain, replica)
        })
        .await
        .context("starting two masters with a replica each, and three Sentinels for one")?;
        let rounds = plan.prim_rounds;
        let one = Amount::Cycles(plan.prim_cycles_one / rounds);
        results
            .primitives
            .extend(primitives::sentinel_cost(&plain.url(), &set.url(), one, rounds).await?);
    }

    let redis = start_redis().await?;
    let url = redis.url();
    progress(started, "graceful handoff in-process: leasehold");
    results.handoff_notified = handoff::in_process(
        &url,
        "bench/handoff",
        plan.timing,
        FollowerStrategy::Notified,
        plan.handoff_followers,
        plan.handoff_rounds,
        false,
    )
    .await?;

    progress(started, "graceful handoff in-process: polling baseline");
    let groups = (0..plan.polling_groups).map(|g| {
        let url = url.clone();
        let timing = plan.timing;
        let (followers, rounds) = (plan.handoff_followers, plan.polling_rounds);
        async move {
            let lease = format!("bench/handoff-polling-{g}");
            handoff::in_process(
                &url,
                &lease,
                timing,
                FollowerStrategy::Polling,
                followers,
                rounds,
                true,
            )
            .await
        }
    });
    for samples in futures_util::future::try_join_all(groups).await? {
        results.handoff_polling.extend(samples);
    }

    progress(
        started,
        "graceful handoff end to end: leasehold run processes",
    );
    results.handoff_processes = handoff::processes(
        &bin,
        &url,
        "bench/handoff-e2e",
        plan.timing,
        plan.e2e_rounds,
        &[],
    )
    .await?;
    progress(
        started,
        "graceful handoff end to end: leasehold run -- sh (exec mode)",
    );
    results.handoff_exec = handoff::processes(
        &bin,
        &url,
        "bench/handoff-exec",
        plan.timing,
        plan.e2e_rounds,
        &handoff::EXEC_COMMAND,
    )
    .await?;

    progress(started, "crash failover: SIGKILLed leader processes");
    let mut strategies = Vec::new();
    for _ in 0..plan.crash_per_strategy {
        strategies.push(FollowerStrategy::Notified);
        strategies.push(FollowerStrategy::Polling);
    }
    for w in 0..plan.crash_waves {
        results
            .failover
            .extend(failover::wave(&bin, &url, plan.timing, w, &strategies).await?);
    }

    progress(started, "pause step-down: SIGSTOPped leader processes");
    for w in 0..plan.pause_waves {
        results
            .pause
            .extend(pause::wave(&url, plan.timing, plan.pause_wave(w)).await?);
    }
    progress(
        started,
        "pause in exec mode: SIGSTOPped leasehold run -- sh leaders",
    );
    for w in 0..plan.pause_waves {
        results
            .exec_pause
            .extend(exec_pause::wave(&bin, &url, plan.timing, plan.pause_wave(w)).await?);
    }
    drop(redis);

    if plan.peers {
        progress(
            started,
            "peers: installing them, then handoff, crash and pause rounds, and idle cost",
        );
    }
    results.peers = peers::measure(&plan, &bin).await;
    if let peers::Outcome::Unavailable(why) | peers::Outcome::Failed(why) = &results.peers {
        progress(started, &format!("peers not measured: {why}"));
    }

    progress(
        started,
        "footprint replicas and Redis load: starting contenders",
    );
    results.binary = Some(footprint::binary_size(&bin)?);
    results.image = if plan.quick {
        Err("not measured in a quick run".to_owned())
    } else if !image {
        Err("not measured in this run (`--image false`)".to_owned())
    } else {
        progress(started, "image: the static build and buildah");
        footprint::image_size()
    };
    let replicas = footprint::Replicas::start(&bin, plan.load_timing, plan.scrape_every).await?;
    let mut configs = Vec::new();
    for strategy in [FollowerStrategy::Notified, FollowerStrategy::Polling] {
        for &contenders in &plan.load_sizes {
            configs.push(load::Config {
                strategy,
                contenders,
            });
        }
    }
    let mut groups = futures_util::future::try_join_all(
        configs.iter().map(|c| load::prepare(*c, plan.load_timing)),
    )
    .await?;
    progress(
        started,
        &format!("Redis load: idle window of {:?}", plan.load_window),
    );
    let mut before = Vec::new();
    for g in groups.iter_mut() {
        before.push(g.snapshot().await?);
    }
    let footprint_start = replicas.read()?;
    tokio::time::sleep(plan.load_window).await;
    let footprint_end = replicas.read()?;
    let mut rows = Vec::new();
    for (g, b) in groups.iter_mut().zip(&before) {
        let after = g.snapshot().await?;
        rows.push(g.row(b, &after));
    }
    results.footprint = replicas.finish(footprint_start, footprint_end);
    progress(
        started,
        "Redis load: one graceful transition per configuration",
    );
    for (g, row) in groups.iter_mut().zip(rows.iter_mut()) {
        if g.config.contenders >= 2 {
            row.transition = Some(
                g.transition(row.total_per_s(), plan.transition_settle)
                    .await?,
            );
        }
    }
    results.load = rows;
    for g in groups {
        g.finish().await?;
    }

    if cli.flood.unwrap_or(true) {
        progress(
            started,
            "HTTP flood: one leader, connections it must not serve",
        );
        results.flood = Some(flood::measure(&bin, &plan).await?);
    }

    results.machine.load_after = machine::load_average();
    (
        results.machine.cpu_share_self,
        results.machine.cpu_share_others,
    ) = cpu_at_start.shares_until(&machine::CpuTicks::now());
    results.measured_for = started.elapsed();
    results.build_seconds = cli.build_seconds;
    let svg_rel = relative_to(&cli.svg, cli.out.parent().unwrap_or(Path::new(".")));
    let markdown = report::markdown(&results, &plan, &svg_rel, &cli.svg.to_string_lossy());
    let plot = report::plot(&results, &plan);
    for (path, text) in [(&cli.out, &markdown), (&cli.svg, &plot)] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        }
        std::fs::write(path, text).with_context(|| format!("write {}", path.display()))?;
    }
    progress(
        started,
        &format!("wrote {} and {}", cli.out.display(), cli.svg.display()),
    );
    Ok(())
}

/// `path` relative to `base` when it lies under it (the report links the plot this way).
fn relative_to(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().context("start the tokio runtime")?;
    if let Some(Mode::PauseChild {
        url,
        lease,
        lease_ms,
        renew_ms,
        retry_ms,
    }) = &cli.mode
    {
        let timing = Timing {
            lease_duration: ms(*lease_ms),
            renew_deadline: ms(*renew_ms),
            retry_period: ms(*retry_ms),
            ..Timing::default()
        };
        return runtime.block_on(pause::child(url, lease, timing));
    }
    match &cli.mode {
        Some(Mode::PeerLibrary {
            url,
            name,
            ttl_ms,
            identity,
            resource,
        }) => {
            return runtime.block_on(peers::library(url, name, ms(*ttl_ms), identity, resource));
        }
        Some(Mode::PeerWriter { identity, resource }) => {
            return runtime.block_on(peers::writer(identity, resource));
        }
        _ => {}
    }
    if let Some(Mode::Herd { contenders, rounds }) = &cli.mode {
        return runtime.block_on(herd::run(contenders, *rounds, Plan::full().timing));
    }
    // On SIGINT or SIGTERM the run future is dropped, and with it every guard: the electors
    // shut down, and the child processes and redis-servers are killed.
    let outcome = runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("install the SIGTERM handler")?;
        tokio::select! {
            r = run(cli) => r,
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
            _ = term.recv() => bail!("terminated"),
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    outcome
}
