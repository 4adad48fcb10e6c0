//! leasehold as a child process, the one way its tests, the chaos harness (`crates/chaos`) and
//! the benchmarks (`examples/bench`) start it: the command line of a `leasehold run` replica
//! with an environment clean of the caller's leasehold variables, its timing as flags, and the
//! wait until it answers. The servers, proxies, ports and guarded processes it runs on are the
//! generic test kit's (`testbed`); this crate is what knows leasehold.
//!
//! # Layout
//!
//! - [`command`]: `leasehold run` for a replica ([`RunCommand`]), the timing as its flags
//!   ([`timing_flags`]).
//! - [`startup`]: waiting until a started replica answers `/healthz`, or has exited.

pub mod command;
pub mod startup;

pub use command::{RunCommand, leasehold_command, timing_flags};
pub use startup::{NotStarted, wait_healthy};
