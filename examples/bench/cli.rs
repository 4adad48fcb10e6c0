//! The harness's command line: where the report goes, how much to measure, and the internal
//! modes in which it runs itself as a child process.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "leasehold's benchmarks; writes the report and its plot")]
pub struct Cli {
    #[command(subcommand)]
    pub mode: Option<Mode>,
    /// Where to write the report.
    #[arg(long, default_value = "docs/BENCHMARKS.md")]
    pub out: PathBuf,
    /// Where to write the plot; the report links it relative to --out.
    #[arg(long, default_value = "docs/bench/latency.svg")]
    pub svg: PathBuf,
    /// The `leasehold` binary [default: next to this harness's directory, target/<profile>/leasehold].
    #[arg(long)]
    pub leasehold_bin: Option<PathBuf>,
    /// A tiny run with short timings and few samples, to check the harness and the report's
    /// shape (the figures mean nothing).
    #[arg(long)]
    pub quick: bool,
    /// Seconds the build before this run took, stated in the report.
    #[arg(long)]
    pub build_seconds: Option<f64>,
    /// Measure the peers (other lock libraries, installed from PyPI and npm) [default: true,
    /// false with --quick].
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub peers: Option<bool>,
    /// Build the static image and measure its size (minutes from cold) [default: true, false
    /// with --quick]. `--image false` for a run that compares the hot paths before and after
    /// a change.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub image: Option<bool>,
    /// Flood a leader's HTTP port with hostile connections (about 15 s; fewer connections and
    /// a shorter hold with --quick) [default: true]. `--flood false` for a run that compares
    /// the hot paths before and after a change.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub flood: Option<bool>,
}

#[derive(Subcommand)]
pub enum Mode {
    /// Internal: a leader that acts every millisecond through its guard (see pause.rs).
    PauseChild {
        url: String,
        lease: String,
        lease_ms: u64,
        renew_ms: u64,
        retry_ms: u64,
    },
    /// Internal: leasehold's library contender of the peer rounds (see peers/child.rs).
    PeerLibrary {
        url: String,
        name: String,
        ttl_ms: u64,
        identity: String,
        resource: PathBuf,
    },
    /// Internal: the exec-mode command of the peer rounds (see peers/child.rs).
    PeerWriter { identity: String, resource: PathBuf },
    /// Only graceful handoffs, by group size, printed as a table (no report): for comparing
    /// how a release wakes its followers.
    Herd {
        /// Group sizes, the leader included.
        #[arg(long, value_delimiter = ',', default_value = "3,200")]
        contenders: Vec<usize>,
        /// Handoffs per group.
        #[arg(long, default_value_t = 40)]
        rounds: usize,
    },
}
