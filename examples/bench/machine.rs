//! The machine and the versions the report was measured with.

use std::path::Path;
use std::process::Command;

/// What the report says about where it ran.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub os: String,
    pub load_before: String,
    pub load_after: String,
    /// Other compilers running when the benchmark started (a noisy machine).
    pub busy_before: Vec<String>,
    /// CPU time over the run as shares of the whole machine: this harness with the children it
    /// reaped, and every other process.
    pub cpu_share_self: f64,
    pub cpu_share_others: f64,
}

/// CPU counters at one moment: the machine's busy and total time (from /proc/stat) and this
/// process's own time plus that of its reaped children (from /proc/self/stat), in clock ticks.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTicks {
    busy: u64,
    total: u64,
    own: u64,
}

impl CpuTicks {
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let fields: Vec<u64> = stat
            .lines()
            .find_map(|l| l.strip_prefix("cpu "))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|v| v.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let total: u64 = fields.iter().take(8).sum();
        let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
        // This process's utime and stime, and those of its reaped children.
        let own = testbed::process_tree::own_stat()
            .map_or(0, |p| p.utime + p.stime + p.cutime + p.cstime);
        Self {
            busy: total.saturating_sub(idle),
            total,
            own,
        }
    }

    /// Shares of the machine's CPU from `self` to `later`: (this harness, everyone else).
    pub fn shares_until(&self, later: &CpuTicks) -> (f64, f64) {
        let total = later.total.saturating_sub(self.total).max(1) as f64;
        let busy = later.busy.saturating_sub(self.busy);
        let own = later.own.saturating_sub(self.own);
        (own as f64 / total, busy.saturating_sub(own) as f64 / total)
    }
}

/// Versions of everything measured.
#[derive(Debug, Clone, Default)]
pub struct Versions {
    pub leasehold: String,
    pub commit: String,
    pub rustc: String,
    pub redis_server: String,
    pub redis_benchmark: String,
    /// Crate versions from Cargo.lock: rslock, redis, tokio.
    pub crates: Vec<(String, String)>,
}

fn first_line(cmd: impl AsRef<Path>, args: &[&str]) -> String {
    let cmd = cmd.as_ref();
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("unknown ({} not found)", cmd.display()))
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// Names of compiler processes running now (cargo, rustc, cc, ld).
pub fn busy_processes() -> Vec<String> {
    let mut busy = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return busy;
    };
    for entry in dir.flatten() {
        if let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) {
            let comm = comm.trim();
            if ["cargo", "rustc", "cc1", "cc1plus", "ld", "clippy-driver"].contains(&comm) {
                busy.push(comm.to_owned());
            }
        }
    }
    busy.sort();
    busy
}

pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let os = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: mem_kib / 1024.0 / 1024.0,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into()),
        os,
        load_before: load_average(),
        load_after: String::new(),
        busy_before: busy_processes(),
        cpu_share_self: 0.0,
        cpu_share_others: 0.0,
    }
}

/// The versions measured: `bin`'s build (which its `--version` names) and, when another, the
/// bench's own, which the in-process parts run; the repository only for Cargo.lock.
pub fn versions(repo: &Path, bin: &Path) -> Versions {
    let lock = std::fs::read_to_string(repo.join("Cargo.lock")).unwrap_or_default();
    let crates = ["rslock", "redis", "tokio"]
        .iter()
        .map(|name| ((*name).to_owned(), locked_version(&lock, name)))
        .collect();
    let shown = first_line(bin, &["--version"]);
    let of_bin = shown
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or("unknown");
    let own = env!("LEASEHOLD_COMMIT");
    let commit = if of_bin == own {
        own.to_owned()
    } else {
        format!("{of_bin}` (the in-process parts: `{own}`)")
    };
    Versions {
        leasehold: env!("CARGO_PKG_VERSION").to_owned(),
        commit,
        rustc: first_line("rustc", &["--version"]),
        redis_server: first_line("redis-server", &["--version"]),
        redis_benchmark: first_line("redis-benchmark", &["--version"]),
        crates,
    }
}

/// The versions of `name` in Cargo.lock, joined when there are several.
fn locked_version(lock: &str, name: &str) -> String {
    let want = format!("name = \"{name}\"");
    let mut found = Vec::new();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == want
            && let Some(v) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
        {
            found.push(v.trim_matches('"').to_owned());
        }
    }
    if found.is_empty() {
        "unknown".into()
    } else {
        found.join(", ")
    }
}
