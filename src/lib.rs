//! leasehold: leader election for the replicas of a Kubernetes Deployment, on one Redis lease.
//!
//! The holder of the lease is the leader: it runs the leader's work and renews the lease with a
//! watchdog. The moment it can no longer prove that it still holds the lease, it steps down:
//! its work is cancelled, its `check()` refuses, and it says why. The safety argument (one atomic
//! acquire, compare-and-set renew and release, a validity deadline on the boot-time clock, a
//! synchronous check before each side effect, fencing tokens that never go backwards, a cooldown after Redis lost its
//! data) is in docs/DESIGN.md; the code follows it point by point.
//!
//! # Layout
//!
//! The lease and the election loop are the `leasehold-core` crate, re-exported here as
//! [`clock`], [`lease`] and [`elector`]: the boot-time clock, the Redis primitives with their
//! scripts, targets and Sentinel majority, and the elector with its pure decisions. This crate
//! is the product around it, and reaches the loop only through its two seams (the term hooks
//! out, the standing in; see the core's own map):
//!
//! - `cli` (the binary's, not API): flags, environment and config file, validated into
//!   settings; the one error type and its exit codes (2 for every refusal).
//! - `cmd` (the binary's, not API): the subcommands `run` and `status` (and `guard`, which is
//!   [`guard::check`]): naming the lease (`cmd/lease.rs`), starting the parts; a contender is
//!   wired once (`cmd/contender.rs`) for `run` and for `lock` (a one-shot lock for Jobs and
//!   CronJobs); `step-down` asks for a handover on demand; `remove-keys` removes an
//!   uninstalled lease's keys. [`shutdown`] turns signals into the root cancellation. [`main`]
//!   parses, starts the logs and calls `cmd`; `main.rs` calls it.
//! - [`http`]: `/healthz`, `/readyz`, `/leader`, `/metrics`; [`metrics`] and [`telemetry`]
//!   (logs) behind them. [`leader_view`]: the JSON of `/leader`; [`sse`]: the same as
//!   server-sent events ([`accept`] reads what a request's `Accept` asks for, for both);
//!   [`status_file`]: the state in a file, with an absolute deadline
//!   instead of `is_leader` (a file outlives its writer). Both are fed by the watchers of
//!   [`board`]: what a replica shows, the elector's status (heard as a term hook) and what the
//!   gates add, with the history of its changes.
//! - The gates, outside the core, each named in [`gates`]: [`eviction`] (Redis's eviction
//!   policy, as [`eviction_policy`] reads it), [`candidacy`] (the candidate check; its flags in `cli/candidacy.rs`) and
//!   [`clock_gate`] (Redis's clock runs too far off for a useful term). [`clock_watch`] keeps
//!   what the clocks showed (Redis's rate for `/leader`, this host's boot clock against its
//!   oscillator).
//! - [`exec`]: the singleton command's supervisor: its process tree in `/proc`, the child
//!   subreaper that reaps its orphans, and the stop sequence bounded on the boot clock.
//! - [`guard`]: the guard file, the term's token and boot-clock deadline published for the
//!   command (and sidecars) to check without leasehold running; `leasehold guard` reads it.
//! - [`owned_file`]: one live leasehold per guard or status file (a `flock` beside it).
//!   [`open_files`]: the open-files limit `run` raises, and gives the command back.
//! - [`secret_file`]: the rule for a file that holds a secret, and the Redis password file the
//!   lease asks again when Redis refuses the password.
//! - [`k8s`]: Deployment discovery, the leader label, the Lease mirror, events, the RBAC list,
//!   and `reconcile_while_leading` for reconcilers of your own.
//! - [`fence`]: fencing the resources the leader writes to (Kubernetes objects; PostgreSQL and
//!   Redis behind the `fence-postgres` and `fence-redis` features), as docs/FENCING.md shows.
//!
//! # Features
//!
//! - `cli` (default): the binary; turns on `kubernetes` and `http`, and brings clap, the
//!   config file's YAML and tracing-subscriber.
//! - `kubernetes`: [`k8s`] and `fence::k8s` (kube, k8s-openapi).
//! - `http`: [`http`] and [`sse`] (axum); turns on `metrics`.
//! - `metrics`: [`metrics`] (prometheus-client).
//! - `fence-postgres`, `fence-redis`: the fencing helpers of [`fence`].
//!
//! Without default features the crate is the lease, the elector and what runs beside it (the
//! guard, the singleton command's supervisor, the status file): tokio, redis and their kin.
//!
//! # Example
//!
//! The core's example (`leasehold_core`, its crate docs) reads the same through these
//! re-exports: `leasehold::elector::Elector`, `leasehold::lease::RedisLease`; and
//! `examples/contender.rs` is a whole program.

pub use leasehold_core::{clock, elector, lease};

/// `eprintln!` for the words the commands say on stderr, which cannot panic: with stderr gone
/// (a closed pipe, a full disk) the words are dropped, and the exit code still says it all.
/// What they quote (a refused value, a path, a foreign value from Redis) is [`printable`], and
/// a line of more than [`SAID_AT_MOST`] characters (only an echoed input makes one) keeps its
/// head and its tail, where a refusal's rule is. Defined before the modules, so that each of
/// them has it in scope.
macro_rules! say {
    ($($words:tt)*) => {{
        use std::io::Write as _;
        let words = $crate::said(&format!($($words)*));
        let _ = writeln!(std::io::stderr(), "{words}");
    }};
}

/// The most characters of one line said on stderr.
pub const SAID_AT_MOST: usize = 4096;

/// A line as `say!` writes it.
pub fn said(words: &str) -> String {
    let n = words.chars().count();
    let at = |nth| {
        words
            .char_indices()
            .nth(nth)
            .map_or(words.len(), |(at, _)| at)
    };
    if n <= SAID_AT_MOST {
        return printable(words);
    }
    let (head, tail) = (
        &words[..at(SAID_AT_MOST / 2)],
        &words[at(n - SAID_AT_MOST / 4)..],
    );
    let left_out = n - SAID_AT_MOST / 2 - SAID_AT_MOST / 4;
    printable(&format!("{head}… ({left_out} characters left out) …{tail}"))
}

/// `value` with each control character (a line break, an escape) written as its escape: what
/// leasehold did not write is shown to an operator, never acted on by the terminal.
pub fn printable(value: &str) -> String {
    let char = |c: char| match c.is_control() {
        true => c.escape_default().to_string(),
        false => c.to_string(),
    };
    value.chars().map(char).collect()
}

#[cfg(any(feature = "http", feature = "metrics"))]
pub mod accept;
pub mod board;
pub mod candidacy;
pub mod clock_gate;
pub mod clock_watch;
pub mod eviction;
pub mod eviction_policy;
pub mod exec;
pub mod fence;
pub mod gates;
pub mod guard;
pub mod heartbeat;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "kubernetes")]
pub mod k8s;
pub mod leader_view;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod notices;
pub mod open_files;
pub mod owned_file;
pub mod secret_file;
pub mod shutdown;
#[cfg(feature = "http")]
pub mod sse;
pub mod status_file;
#[cfg(feature = "cli")]
pub mod telemetry;

// The binary's command line and commands: public so that the tests call their parts (parse a
// command line, run a command in-process), hidden from the docs and not API: they change with
// the binary. `main` below is all the binary calls.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cmd;

/// The `leasehold` binary: parses the command line of this process (with its environment and
/// any config file), starts the logs and runs the command; returns the exit code. The binary's
/// `main` is this call.
#[cfg(feature = "cli")]
pub fn main() -> std::process::ExitCode {
    let invocation = match cli::from_process() {
        Ok(invocation) => invocation,
        Err(e) => return e.report(),
    };
    if let Some(log) = invocation.log()
        && let Err(e) = telemetry::start(log)
    {
        return cli::CliError::from(e).report();
    }
    let result = cmd::execute(invocation);
    // The log's last lines before the error's, which is printed at once.
    telemetry::flush();
    result.unwrap_or_else(|e| e.report())
}
