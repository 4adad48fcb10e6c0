//! leasehold's own test support: electors in-process and as child processes, the `leasehold`
//! binary as a replica, the guarded singleton command and its judge, the chart through helm,
//! the rollout model, the chart's alert rules and the docs' tables. The servers, processes,
//! proxy and waits they run on are the `testbed` crate's; a replica's command line and the wait
//! until it answers, the `harness` crate's (shared with the chaos harness and the benchmarks).
//! Each test binary uses a part of it.
#![allow(dead_code)]

pub mod chart_settings;
pub mod contenders;
pub mod guarded_command;
pub mod helm;
pub mod markdown;
pub mod prometheus;
pub mod replica;
pub mod rollout;
pub mod timings;
