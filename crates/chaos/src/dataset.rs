//! What a run collected: the run's settings, the nemesis's journal, every replica process's
//! log events and every write the resource saw. Saved as `raw/collected.json` (with
//! `--keep-logs`, or when a run fails), so that `chaos check` can check and report on a run
//! again without running it.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::system::PgCollected;
use leasehold::elector::Timing;

use crate::config::RunConfig;
use crate::nemesis::Journal;
use crate::replica::Incarnation;
use crate::resource::Write;
use crate::time::Micros;

/// The settings a report needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    /// The seed.
    pub seed: u64,
    /// Faults planned.
    pub faults: usize,
    /// Replicas.
    pub replicas: usize,
    /// Lease duration, ms.
    pub lease_duration_ms: u64,
    /// Renew deadline, ms.
    pub renew_deadline_ms: u64,
    /// Retry period, ms.
    pub retry_period_ms: u64,
    /// The children's write interval, ms.
    pub write_interval_ms: u64,
    /// Whether the resource fenced.
    pub fencing: bool,
    /// The command that made the run.
    pub command_line: String,
    /// `leasehold --version`.
    pub leasehold_version: String,
    /// The Redis deployment: `single`, `sentinel` or `cluster` (empty in older runs: single).
    #[serde(default)]
    pub topology: String,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RunInfo {
    /// From the run's configuration.
    pub fn new(config: &RunConfig, leasehold_version: String) -> Self {
        Self {
            seed: config.seed,
            faults: config.faults,
            replicas: config.replicas,
            lease_duration_ms: ms(config.timing.lease_duration),
            renew_deadline_ms: ms(config.timing.renew_deadline),
            retry_period_ms: ms(config.timing.retry_period),
            write_interval_ms: ms(config.write_interval),
            fencing: config.fencing,
            command_line: config.command_line.clone(),
            leasehold_version,
            topology: format!("{:?}", config.topology).to_lowercase(),
        }
    }

    /// The election timing.
    pub fn timing(&self) -> Timing {
        Timing {
            lease_duration: Duration::from_millis(self.lease_duration_ms),
            renew_deadline: Duration::from_millis(self.renew_deadline_ms),
            retry_period: Duration::from_millis(self.retry_period_ms),
            ..Timing::default()
        }
    }
}

/// Everything collected.
#[derive(Debug, Serialize, Deserialize)]
pub struct Dataset {
    /// The settings.
    pub info: RunInfo,
    /// When the cluster started.
    pub started: Micros,
    /// When everything had stopped.
    pub ended: Micros,
    /// What the nemesis did.
    pub journal: Journal,
    /// Every leasehold process, by replica.
    pub replicas: Vec<Vec<Incarnation>>,
    /// Every write, in arrival order.
    pub writes: Vec<Write>,
    /// redis-server processes started.
    pub redis_starts: u32,
    /// The error that cut the run short, if any.
    pub error: Option<String>,
    /// PostgreSQL's tables, when the run had it.
    #[serde(default)]
    pub pg: Option<PgCollected>,
}

impl Dataset {
    /// Saves it as JSON.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        serde_json::to_writer(std::io::BufWriter::new(file), self)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Loads one saved by [`save`](Self::save).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        serde_json::from_reader(std::io::BufReader::new(file))
            .with_context(|| format!("{} is not a saved run", path.display()))
    }
}
