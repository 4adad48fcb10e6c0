//! Footprint: resident memory and CPU of idle `leasehold run` replicas (a leader and a
//! follower, HTTP and metrics on, scraped like Prometheus would), read from /proc, and the size
//! of the binary.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use leasehold::elector::Timing;
use tokio_util::sync::CancellationToken;

use testbed::http::http_get;

use crate::procs::{self, Events, Replica};
use testbed::RedisServer;

/// One process at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcStat {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub threads: u64,
    /// CPU time of the live threads (schedstat, nanoseconds).
    pub cpu: Duration,
    /// utime + stime of the whole process, dead threads included (clock ticks of 10 ms).
    pub cpu_ticks: Duration,
    pub at: Option<Instant>,
}

/// One replica over the window.
#[derive(Debug, Clone)]
pub struct ReplicaFootprint {
    pub role: &'static str,
    pub start: ProcStat,
    pub end: ProcStat,
}

impl ReplicaFootprint {
    /// CPU time over the window as a share of one core.
    pub fn cpu_share(&self) -> f64 {
        let wall = match (self.start.at, self.end.at) {
            (Some(a), Some(b)) => (b - a).as_secs_f64(),
            _ => return 0.0,
        };
        self.end.cpu.saturating_sub(self.start.cpu).as_secs_f64() / wall.max(1e-9)
    }

    pub fn cpu_used(&self) -> Duration {
        self.end.cpu.saturating_sub(self.start.cpu)
    }

    /// The same from utime + stime, in 10 ms ticks (a cross-check that counts exited threads).
    pub fn cpu_used_ticks(&self) -> Duration {
        self.end.cpu_ticks.saturating_sub(self.start.cpu_ticks)
    }
}

/// The binary's size on disk, and stripped when `strip` is available.
#[derive(Debug, Clone, Copy)]
pub struct BinarySize {
    pub bytes: u64,
    pub stripped: Option<u64>,
}

/// The image's size: the Dockerfile's final stage (`FROM scratch`) built by buildah from the
/// static binary, as tests/ship/image.rs builds and runs it.
#[derive(Debug, Clone, Copy)]
pub struct ImageSize {
    pub bytes: u64,
    pub binary_bytes: u64,
}

/// Builds the image in a storage of its own (the static release build takes minutes the first
/// time) and measures it; why not, when it cannot be built.
pub fn image_size() -> std::result::Result<ImageSize, String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo.join("target"), |d| repo.join(d));
    let built = testbed::image::build(
        repo,
        Path::new(env!("CARGO")),
        &target,
        "localhost/leasehold-bench:latest",
    )
    .map_err(|e| e.to_string())?;
    let bytes = built.engine.image_size().map_err(|e| e.to_string())?;
    let binary_bytes = std::fs::metadata(&built.binary.path)
        .map_err(|e| e.to_string())?
        .len();
    Ok(ImageSize {
        bytes,
        binary_bytes,
    })
}

pub fn binary_size(bin: &Path) -> Result<BinarySize> {
    let bytes = std::fs::metadata(bin)
        .with_context(|| format!("size of {}", bin.display()))?
        .len();
    let dir = tempfile::tempdir().context("temp dir for the stripped copy")?;
    let out = dir.path().join("leasehold-stripped");
    let stripped = Command::new("strip")
        .arg("-o")
        .arg(&out)
        .arg(bin)
        .status()
        .ok()
        .filter(|s| s.success())
        .and_then(|_| std::fs::metadata(&out).ok())
        .map(|m| m.len());
    Ok(BinarySize { bytes, stripped })
}

/// A leader and a follower replica on their own redis-server, with a scraper.
pub struct Replicas {
    _redis: RedisServer,
    leader: Replica,
    follower: Replica,
    scraper: CancellationToken,
}

impl Replicas {
    pub async fn start(bin: &Path, timing: Timing, scrape_every: Duration) -> Result<Self> {
        let redis = tokio::task::block_in_place(|| RedisServer::builder().try_start())
            .context("start a redis-server for the footprint")?;
        let url = redis.url();
        let lease = "bench/footprint";
        let wait = Duration::from_secs(15);
        let leader = procs::start(bin, &url, lease, "footprint-a", &timing, &[]).await?;
        leader.wait_event(0, "became leader", None, wait).await?;
        let follower = procs::start(bin, &url, lease, "footprint-b", &timing, &[]).await?;
        follower
            .wait_event(0, "following leader", None, wait)
            .await?;
        let scraper = CancellationToken::new();
        let stop = scraper.clone();
        let addrs = [leader.http, follower.http];
        tokio::spawn(async move {
            loop {
                for addr in addrs {
                    let _ = tokio::task::spawn_blocking(move || {
                        http_get(addr, "/metrics");
                        http_get(addr, "/readyz");
                    })
                    .await;
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(scrape_every) => {}
                }
            }
        });
        Ok(Self {
            _redis: redis,
            leader,
            follower,
            scraper,
        })
    }

    pub fn read(&self) -> Result<[ProcStat; 2]> {
        Ok([
            read_proc(self.leader.process.pid().as_raw())?,
            read_proc(self.follower.process.pid().as_raw())?,
        ])
    }

    pub fn finish(self, start: [ProcStat; 2], end: [ProcStat; 2]) -> Vec<ReplicaFootprint> {
        self.scraper.cancel();
        vec![
            ReplicaFootprint {
                role: "leader",
                start: start[0],
                end: end[0],
            },
            ReplicaFootprint {
                role: "follower",
                start: start[1],
                end: end[1],
            },
        ]
    }
}

/// Reads VmRSS, VmHWM and Threads from /proc/PID/status and the CPU time of every thread from
/// /proc/PID/task/*/schedstat (nanoseconds, finer than the clock ticks of /proc/PID/stat).
pub fn read_proc(pid: i32) -> Result<ProcStat> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let mut cpu_ns: u64 = 0;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("list /proc/{pid}/task"))?;
    for task in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat"))
            && let Some(ns) = s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        {
            cpu_ns += ns;
        }
    }
    let stat =
        testbed::process_tree::stat(pid).with_context(|| format!("read /proc/{pid}/stat"))?;
    let ticks = stat.utime + stat.stime;
    Ok(ProcStat {
        cpu_ticks: Duration::from_millis(ticks * 10),
        rss_kib: kib("VmRSS:"),
        hwm_kib: kib("VmHWM:"),
        threads: kib("Threads:"),
        cpu: Duration::from_nanos(cpu_ns),
        at: Some(Instant::now()),
    })
}
