//! The peers users would pick instead of leasehold, measured in the same run as leasehold
//! itself: redis-py's `Lock`, python-redis-lock, pottery's `Redlock` and node-redlock, beside
//! leasehold as a library and in exec mode, each with three contenders on one shared Redis,
//! round by round, and idle on a Redis of its own.
//!
//! - `install.rs`: the pinned packages, installed into a scratch folder
//! - `python_lock.py`, `redlock.cjs`, `child.rs`: the contenders, one line protocol
//! - `contender.rs`: a contender process, whatever it runs
//! - `rounds.rs`: graceful handoff, crash failover and pause, per kind
//! - `idle.rs`: round trips of an idle holder and two waiters
//! - `report.rs`: the table

mod child;
mod contender;
mod idle;
mod install;
mod report;
mod rounds;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use leasehold::elector::Timing;

pub use child::{library, writer};
pub use report::section;

use crate::Plan;
use contender::Env;
use idle::Idle;
use install::Installed;
use rounds::{Group, Handoff, Pause};

/// What contends for a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// leasehold's elector in the contender's own process.
    Library,
    /// `leasehold run -- cmd`: the command is the work.
    Exec,
    RedisPy,
    PythonRedisLock,
    Pottery,
    Redlock,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Library,
        Kind::Exec,
        Kind::RedisPy,
        Kind::PythonRedisLock,
        Kind::Pottery,
        Kind::Redlock,
    ];

    /// Short, for names of locks and files.
    fn slug(self) -> &'static str {
        match self {
            Kind::Library => "library",
            Kind::Exec => "exec",
            Kind::RedisPy => "redis-py",
            Kind::PythonRedisLock => "python-redis-lock",
            Kind::Pottery => "pottery",
            Kind::Redlock => "redlock",
        }
    }

    /// The `LIBRARY` argument of `python_lock.py`.
    fn library(self) -> &'static str {
        self.slug()
    }

    pub fn label(self) -> String {
        let pin = |name: &str| {
            install::PYTHON
                .iter()
                .chain(install::NODE.iter())
                .find(|(n, _)| *n == name)
                .map_or("?", |(_, v)| *v)
        };
        match self {
            Kind::Library => "leasehold, library (in-process elector)".to_owned(),
            Kind::Exec => "leasehold, exec mode (`leasehold run -- cmd`)".to_owned(),
            Kind::RedisPy => format!("redis-py {} `Lock` + watchdog thread", pin("redis")),
            Kind::PythonRedisLock => format!(
                "python-redis-lock {} (`auto_renewal`)",
                pin("python-redis-lock")
            ),
            Kind::Pottery => format!("pottery {} `Redlock` + watchdog thread", pin("pottery")),
            Kind::Redlock => format!("node-redlock {} `using()`", pin("redlock")),
        }
    }

    /// The Redis key a lock named `name` lives in.
    fn key(self, name: &str) -> String {
        match self {
            Kind::Library => format!("leasehold:{{{name}}}"),
            // `leasehold run` names its lease within its namespace, `default` outside Kubernetes.
            Kind::Exec => format!("leasehold:{{default/{name}}}"),
            Kind::RedisPy | Kind::Redlock => name.to_owned(),
            Kind::PythonRedisLock => format!("lock:{name}"),
            Kind::Pottery => format!("redlock:{name}"),
        }
    }
}

/// The wall clock since the epoch: the one clock every driver can read at a fine grain.
pub fn wall_now() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// leasehold's timing for a lease of `ttl`, in the proportions of its defaults (15 s / 10 s /
/// 2 s).
pub fn timing_for(ttl: Duration) -> Timing {
    Timing {
        lease_duration: ttl,
        renew_deadline: ttl * 2 / 3,
        retry_period: ttl * 2 / 15,
        ..Timing::default()
    }
}

/// One kind's figures.
pub struct Run {
    pub kind: Kind,
    pub handoffs: Vec<Handoff>,
    /// Crash failovers: the key's expiry → the successor's `acquired`.
    pub failovers: Vec<Duration>,
    pub pauses: Vec<Pause>,
    pub idle: Option<Idle>,
}

/// Everything the peers' part measured.
pub struct Peers {
    pub runs: Vec<Run>,
    pub installed: Installed,
    pub ttl: Duration,
    pub observe: Duration,
}

/// The peers' part of a run.
pub enum Outcome {
    /// Not asked for (the quick run).
    NotRun,
    /// The packages could not be installed (no network?).
    Unavailable(String),
    /// A measurement failed.
    Failed(String),
    Measured(Peers),
}

/// The scratch folder: beside the harness's own target directory (target/bench-peers).
fn scratch() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("find the harness's own executable")?;
    let target = exe
        .ancestors()
        .nth(3)
        .context("the harness is not in target/<profile>/examples")?;
    Ok(target.join("bench-peers"))
}

/// Installs the peers and measures every kind; never fails the whole run.
pub async fn measure(plan: &Plan, bin: &Path) -> Outcome {
    if !plan.peers {
        return Outcome::NotRun;
    }
    let dir = match scratch() {
        Ok(d) => d,
        Err(e) => return Outcome::Unavailable(format!("{e:#}")),
    };
    let packages = dir.join("packages");
    let installed = match tokio::task::spawn_blocking(move || install::install(&packages)).await {
        Ok(Ok(i)) => i,
        Ok(Err(e)) => return Outcome::Unavailable(format!("{e:#}")),
        Err(e) => return Outcome::Unavailable(e.to_string()),
    };
    let env = match std::env::current_exe() {
        Ok(harness) => Env {
            peers: installed.clone(),
            bin: bin.to_owned(),
            harness,
            drivers: Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench/peers"),
            ttl: plan.peer_ttl,
        },
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    match all(plan, &env, &dir.join("resources")).await {
        Ok(runs) => Outcome::Measured(Peers {
            runs,
            installed,
            ttl: plan.peer_ttl,
            observe: observe(plan),
        }),
        Err(e) => Outcome::Failed(format!("{e:#}")),
    }
}

/// How long a resumed holder is watched.
fn observe(plan: &Plan) -> Duration {
    plan.peer_ttl / 2
}

/// The kinds in the order of round `round`: each goes first in turn.
fn order(round: usize) -> impl Iterator<Item = usize> {
    (0..Kind::ALL.len()).map(move |i| (i + round) % Kind::ALL.len())
}

async fn all(plan: &Plan, env: &Env, dir: &Path) -> Result<Vec<Run>> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut runs: Vec<Run> = Kind::ALL
        .iter()
        .map(|&kind| Run {
            kind,
            handoffs: Vec::new(),
            failovers: Vec::new(),
            pauses: Vec::new(),
            idle: None,
        })
        .collect();
    {
        let redis = crate::start_redis().await?;
        let url = redis.url();
        let mut conn = redis::Client::open(url.as_str())
            .context("redis URL")?
            .get_multiplexed_async_connection()
            .await
            .context("connect to read PTTL")?;
        let mut groups = Vec::new();
        for kind in Kind::ALL {
            groups.push(Group::start(env, kind, &url, "shared", dir).await?);
        }
        for round in 0..plan.peer_handoffs {
            for k in order(round) {
                runs[k].handoffs.push(groups[k].handoff(env).await?);
            }
        }
        let stagger = plan.peer_ttl / 20;
        for round in 0..plan.peer_crashes {
            let mut expiries = Vec::new();
            for k in order(round) {
                expiries.push((k, groups[k].crash(env, &mut conn).await?));
                tokio::time::sleep(stagger).await;
            }
            let mut next = Vec::new();
            for (k, expiry) in expiries {
                let (i, past) = groups[k].after_crash(env, expiry).await?;
                runs[k].failovers.push(past);
                next.push((k, i));
            }
            for (k, i) in next {
                groups[k].promote(env, i).await?;
            }
        }
        for round in 0..plan.peer_pauses {
            let mut frozen = Vec::new();
            for k in order(round) {
                let from = groups[k].freeze(env).await?;
                frozen.push((k, from, tokio::time::Instant::now()));
                tokio::time::sleep(stagger).await;
            }
            let mut resumed = Vec::new();
            for (k, from, at) in frozen {
                tokio::time::sleep_until(at + plan.peer_ttl * 2).await;
                resumed.push((k, from, groups[k].resume()?));
            }
            tokio::time::sleep(observe(plan)).await;
            let mut next = Vec::new();
            for (k, from, at) in resumed {
                let (i, pause) = groups[k].after_pause(env, from, at).await?;
                runs[k].pauses.push(pause);
                next.push((k, i));
            }
            for (k, i) in next {
                groups[k].promote(env, i).await?;
            }
        }
    }
    // Idle: every kind on a Redis of its own, watched over the same window.
    let mut idle = Vec::new();
    for kind in Kind::ALL {
        let redis = crate::start_redis().await?;
        let group = Group::start(env, kind, &redis.url(), "idle", dir).await?;
        idle.push((redis, group));
    }
    for (_, group) in &idle {
        group.ready(plan.peer_ttl * 3).await?;
    }
    tokio::time::sleep(plan.peer_ttl).await;
    let counts = futures_util::future::try_join_all(
        idle.iter()
            .map(|(redis, _)| idle::watch(redis.addr(), plan.peer_idle_window)),
    )
    .await?;
    for (run, count) in runs.iter_mut().zip(counts) {
        run.idle = Some(count);
    }
    Ok(runs)
}
