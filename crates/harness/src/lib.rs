//! leasehold as a child process, the one way its tests, the chaos harness (`crates/chaos`) and
//! the benchmarks (`examples/bench`) start it: the command line of a `leasehold run` replica
//! with an environment clean of the caller's leasehold variables, its timing as flags, the wait
//! until it answers, and the started process with what callers read of it. The servers, proxies,
//! ports and guarded processes it runs on are the generic test kit's (`testbed`); this crate is
//! what knows leasehold.
//!
//! # Layout
//!
//! - [`command`]: `leasehold run` for a replica ([`RunCommand`]), the timing as its flags
//!   ([`timing_flags`]).
//! - [`startup`]: waiting until a started replica answers `/healthz`, or has exited.
//! - [`replica`]: a started replica ([`Replica`]): its process, its endpoints, its JSON logs.

pub mod command;
pub mod replica;
pub mod startup;

pub use command::{RunCommand, leasehold_command, timing_flags};
pub use replica::Replica;
pub use startup::{NotStarted, wait_healthy};
