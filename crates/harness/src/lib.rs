//! leasehold's own test layer, on top of the generic test kit (`testbed`, which knows nothing of
//! leasehold): the one way its tests, the chaos harness (`crates/chaos`) and the benchmarks
//! (`examples/bench`) start leasehold as a child process, and what the tests share beside it
//! (electors in this process, timing presets, the chart through the real helm, the docs'
//! tables). The servers, proxies, ports and guarded processes it runs on are testbed's.
//!
//! # Layout
//!
//! - [`target`]: the repository, the `leasehold` binary and the examples that cargo built.
//! - [`command`]: `leasehold run` for a replica ([`RunCommand`]), the timing as its flags
//!   ([`timing_flags`]).
//! - [`startup`]: waiting until a started replica answers `/healthz`, or has exited.
//! - [`replica`]: a started replica ([`Replica`]): its process, its endpoints, its metrics, its
//!   JSON logs, its exit; the process tests' timing flags.
//! - [`timings`]: named timing presets for electors; [`contenders`]: electors in this process
//!   with shared action logs, and the `contender` example as a child process; [`clock`]: a
//!   clock for them that jumps (a suspend, a pause the boot clock did not count).
//! - [`guarded_command`]: a singleton command that asks `leasehold guard` before each write, and
//!   the judge of its writes.
//! - [`helm`]: the real helm and the offline checkers; [`chart_settings`]: the chart's container
//!   as the binary reads it; [`rollout`]: the Deployment controller's rollout arithmetic;
//!   [`prometheus`]: the chart's alert rules and dashboard.
//! - [`markdown`]: the docs' tables as data.

pub mod chart_settings;
pub mod clock;
pub mod command;
pub mod contenders;
pub mod guarded_command;
pub mod helm;
pub mod markdown;
pub mod prometheus;
pub mod replica;
pub mod rollout;
pub mod startup;
pub mod target;
pub mod timings;

pub use command::{RunCommand, leasehold_command, timing_flags};
pub use replica::Replica;
pub use startup::{NotStarted, wait_healthy};
pub use target::{example, leasehold_bin, repo};
