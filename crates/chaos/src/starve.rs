//! CPU starvation of one replica's leasehold, a fault: a cgroup v1 CPU quota where
//! `/sys/fs/cgroup/cpu` allows one (root, the controller mounted), otherwise busy loops pinned
//! with `taskset` to the CPU the process is pinned to.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::nemesis::{FaultRecord, Impairment, Nemesis, sleep_ms};
use crate::schedule::Target;
use crate::time;
use testbed::Guarded;

/// The cgroup v1 CPU controller's root.
pub const CPU_CGROUP: &str = "/sys/fs/cgroup/cpu";

/// Puts `pid` (all its threads) into a CPU cgroup of its own with `pct` % of a core.
pub fn quota(group: &Path, pid: i32, pct: u64) -> anyhow::Result<()> {
    std::fs::create_dir_all(group).with_context(|| format!("cannot create {}", group.display()))?;
    let write = |file: &str, value: String| {
        std::fs::write(group.join(file), value)
            .with_context(|| format!("cannot write {}/{file}", group.display()))
    };
    write("cpu.cfs_period_us", "100000".into())?;
    write("cpu.cfs_quota_us", (pct * 1000).to_string())?;
    write("cgroup.procs", pid.to_string())
}

/// Moves every process of `group` back to the root and removes it.
pub fn release_quota(group: &Path) {
    let procs = std::fs::read_to_string(group.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines() {
        let _ = std::fs::write(Path::new(CPU_CGROUP).join("cgroup.procs"), pid);
    }
    let _ = std::fs::remove_dir(group);
}

/// Pins `pid` to CPU 0 and starts busy loops pinned there beside it.
pub fn crowd(pid: i32) -> anyhow::Result<Vec<Guarded>> {
    let pinned = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", "0", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .context("cannot run taskset")?;
    if !pinned.success() {
        bail!("taskset could not pin pid {pid}");
    }
    (0..4)
        .map(|_| {
            let mut busy = std::process::Command::new("taskset");
            busy.args(["-c", "0", "sh", "-c", "while :; do :; done"]);
            Guarded::spawn(busy, "a busy loop").context("cannot start a busy loop")
        })
        .collect()
}

/// Lets `pid` run on every CPU again.
pub fn uncrowd(pid: i32) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _ = std::process::Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            &format!("0-{}", cpus - 1),
            &pid.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .status();
}

/// A process held short of CPU, until [`Starving::end`].
pub enum Starving {
    /// In a CPU cgroup of its own with a quota.
    Quota(PathBuf),
    /// Pinned to CPU 0 beside busy loops.
    Crowded(i32, Vec<Guarded>),
}

impl Starving {
    /// Starves replica `i`'s leasehold (process `pid`) to `pct` % of a core: a cgroup quota, or
    /// busy loops where no cgroup can be made. Also says how, in words.
    pub fn begin(i: usize, pid: i32, pct: u64) -> anyhow::Result<(Self, String)> {
        let group = PathBuf::from(CPU_CGROUP).join(format!("chaos-{}-{i}", std::process::id()));
        match quota(&group, pid, pct) {
            Ok(()) => Ok((
                Starving::Quota(group),
                format!("cgroup v1 cpu quota {pct} % of a core"),
            )),
            Err(e) => {
                release_quota(&group);
                Ok((
                    Starving::Crowded(pid, crowd(pid)?),
                    format!("busy loops pinned beside it on CPU 0 (no cgroup quota: {e:#})"),
                ))
            }
        }
    }

    /// Gives the process its CPU back.
    pub fn end(self) {
        match self {
            Starving::Quota(group) => release_quota(&group),
            Starving::Crowded(pid, loops) => {
                drop(loops);
                uncrowd(pid);
            }
        }
    }
}

impl Nemesis<'_> {
    pub(crate) fn starve(
        &mut self,
        record: &mut FaultRecord,
        target: Target,
        quota_pct: u64,
        hold_ms: u64,
    ) -> anyhow::Result<()> {
        let Some(i) = self.aim(record, target, "no leader to starve") else {
            return Ok(());
        };
        let pid = self.system.replicas[i]
            .pid()
            .context("the replica to starve is not running")?;
        record.inject = time::now();
        let (starving, how) = Starving::begin(i, pid, quota_pct)?;
        sleep_ms(hold_ms);
        starving.end();
        record.clear = time::now();
        record.detail = Some(how);
        self.span(Some(i), record.inject, record.clear, Impairment::Starved);
        Ok(())
    }
}
