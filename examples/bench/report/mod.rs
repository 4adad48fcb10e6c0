//! The report: every figure of the run as Markdown, and the plot that goes with it.

mod cost;
mod flood;
mod latency;
mod machine;
mod plot;
mod primitives;
mod summary;

use std::fmt::Write;
use std::time::{Duration, SystemTime};

use leasehold::elector::Timing;
use leasehold::elector::decide::FollowerStrategy;

use crate::Plan;
use crate::failover;
use crate::footprint::{BinarySize, ReplicaFootprint};
use crate::handoff;
use crate::load;
use crate::machine::{Machine, Versions};
use crate::pause;
use crate::physical::Physical;
use crate::primitives::{OPS, PrimitiveRun, SENTINEL_DIRECT, SENTINEL_THROUGH};
use crate::stats::{Summary, cells, count, count_above, human, ms, ratio, ratio_d};
use crate::svg::{Panel, Series, cdf_plot};
use cost::{footprint_section, load_section};
use flood::flood_section;
use latency::{failover_section, handoff_section, pause_section};
use machine::machine;
pub use plot::plot;
use primitives::{limits_section, physical_section, primitives_section};
use summary::summary;

/// Everything one run measured.
pub struct Results {
    pub date: SystemTime,
    pub machine: Machine,
    pub versions: Versions,
    pub physical: Physical,
    pub primitives: Vec<PrimitiveRun>,
    pub handoff_notified: Vec<handoff::Sample>,
    pub handoff_polling: Vec<handoff::Sample>,
    pub handoff_processes: Vec<handoff::ProcessSample>,
    /// The same with a command tree to stop ([`handoff::EXEC_COMMAND`]).
    pub handoff_exec: Vec<handoff::ProcessSample>,
    pub failover: Vec<failover::Sample>,
    pub pause: Vec<pause::Sample>,
    /// Exec-mode leaders frozen past their deadline.
    pub exec_pause: Vec<crate::exec_pause::Sample>,
    pub load: Vec<load::Row>,
    pub footprint: Vec<ReplicaFootprint>,
    pub binary: Option<BinarySize>,
    /// The image's size, or why it was not measured.
    pub image: std::result::Result<crate::footprint::ImageSize, String>,
    /// The other lock libraries, beside leasehold in both modes.
    pub peers: crate::peers::Outcome,
    /// A leader's HTTP port under a flood; `None` with `--flood false`.
    pub flood: Option<crate::flood::Flood>,
    pub measured_for: Duration,
    pub build_seconds: Option<f64>,
}

impl Results {
    pub fn new(machine: Machine, versions: Versions) -> Self {
        Self {
            date: SystemTime::now(),
            machine,
            versions,
            physical: Physical {
                tcp_echo: None,
                redis_ping: None,
                benchmark: Vec::new(),
            },
            primitives: Vec::new(),
            handoff_notified: Vec::new(),
            handoff_polling: Vec::new(),
            handoff_processes: Vec::new(),
            handoff_exec: Vec::new(),
            failover: Vec::new(),
            pause: Vec::new(),
            exec_pause: Vec::new(),
            load: Vec::new(),
            footprint: Vec::new(),
            binary: None,
            image: Err("not measured".to_owned()),
            peers: crate::peers::Outcome::NotRun,
            flood: None,
            measured_for: Duration::ZERO,
            build_seconds: None,
        }
    }

    fn handoff(&self, strategy: FollowerStrategy) -> Vec<Duration> {
        let samples = match strategy {
            FollowerStrategy::Notified => &self.handoff_notified,
            FollowerStrategy::Polling => &self.handoff_polling,
        };
        samples.iter().map(|s| s.from_release).collect()
    }

    fn handoff_from_shutdown(&self, strategy: FollowerStrategy) -> Vec<Duration> {
        let samples = match strategy {
            FollowerStrategy::Notified => &self.handoff_notified,
            FollowerStrategy::Polling => &self.handoff_polling,
        };
        samples.iter().map(|s| s.from_shutdown).collect()
    }

    fn failover(&self, strategy: FollowerStrategy, after_kill: bool) -> Vec<Duration> {
        self.failover
            .iter()
            .filter(|s| s.strategy == strategy)
            .map(|s| {
                if after_kill {
                    s.after_kill
                } else {
                    s.past_expiry
                }
            })
            .collect()
    }

    fn primitive(&self, implementation: &str, clients: usize) -> Option<&PrimitiveRun> {
        self.primitives
            .iter()
            .find(|p| p.implementation == implementation && p.clients == clients)
    }

    fn load_row(&self, strategy: FollowerStrategy, contenders: usize) -> Option<&load::Row> {
        self.load
            .iter()
            .find(|r| r.config.strategy == strategy && r.config.contenders == contenders)
    }
}

const LEASEHOLD: FollowerStrategy = FollowerStrategy::Notified;
const POLLING: FollowerStrategy = FollowerStrategy::Polling;
const FIFTY_MS: Duration = Duration::from_millis(50);
/// The most commands an idle follower may send per lease duration, everything counted.
const IDLE_GOAL: f64 = 1.1;

fn timing_words(t: &Timing) -> String {
    format!(
        "lease duration {}, renew deadline {}, retry period {}",
        human(t.lease_duration),
        human(t.renew_deadline),
        human(t.retry_period)
    )
}

fn p(s: &Option<Summary>, pick: fn(&Summary) -> Duration) -> Option<Duration> {
    s.as_ref().map(pick)
}

fn opt_ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "–".to_owned(), ms)
}

fn opt_ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => ratio_d(a, b),
        _ => "–".to_owned(),
    }
}

fn met(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**not met**" }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The Markdown report. `svg` is the plot's path relative to the report (for the link),
/// `svg_written` the path it was written to (for the text).
pub fn markdown(r: &Results, plan: &Plan, svg: &str, svg_written: &str) -> String {
    let mut s = String::new();
    let w = &mut s;
    let date = humantime::format_rfc3339_seconds(r.date);
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "<!-- Written by `scripts/bench.sh` (the harness is examples/bench/); change the harness, not this file. -->\n"
    );
    if plan.quick {
        let _ = writeln!(
            w,
            "> **Quick run**: tiny timings and a handful of samples, to check the harness. These figures mean nothing.\n"
        );
    }
    let total = r.build_seconds.map_or_else(
        || {
            format!(
                "The measurements took {:.0} s.",
                r.measured_for.as_secs_f64()
            )
        },
        |b| {
            format!(
                "This run took {:.1} min: {:.0} s to build, {:.0} s to measure.",
                (b + r.measured_for.as_secs_f64()) / 60.0,
                b,
                r.measured_for.as_secs_f64()
            )
        },
    );
    let _ = writeln!(
        w,
        "Measured {date} at commit `{}`. **To reproduce**, run `scripts/bench.sh` from the repository root \
         (Debian; it installs `redis-server` and `redis-tools` when they are missing, builds the release \
         binary and the harness, and rewrites this file and `{svg_written}` from a new run). {total} Every \
         redis-server it uses is its own, on a free loopback port; all traffic stays on 127.0.0.1.\n",
        r.versions.commit
    );
    let _ = writeln!(
        w,
        "Each comparison is a ratio of two figures taken in the same run on the same machine: absolute \
         times on a shared machine drift from run to run, ratios much less. Latencies are min / p50 / \
         p99 / max over n samples (nearest rank: with fewer than 100 samples, p99 is the maximum).\n"
    );
    summary(w, r, plan);
    machine(w, r, plan);
    handoff_section(w, r, plan, svg);
    failover_section(w, r, plan);
    pause_section(w, r, plan);
    load_section(w, r, plan);
    footprint_section(w, r, plan);
    primitives_section(w, r, plan);
    crate::peers::section(w, &r.peers, plan);
    physical_section(w, r);
    flood_section(w, r, plan);
    limits_section(w, r, plan);
    s
}
