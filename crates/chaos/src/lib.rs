//! The chaos harness for leasehold: a real `redis-server`, N replicas of the real `leasehold`
//! binary in exec mode, a fenced resource their commands write to, a nemesis on a seeded
//! schedule, and a checker that reads only the logs, the resource and the nemesis's journal.
//! See docs/CHAOS.md.
//!
//! Its program is leasehold's `chaos` example (`examples/chaos/main.rs`); `tests/safety/short_chaos.rs` runs
//! the short run as part of the suite. By hand:
//!
//! ```text
//! cargo build --bin leasehold --example chaos
//! target/debug/examples/chaos run --seed 7 --faults 27               # short run, ~85 s
//! target/debug/examples/chaos run --seed 7 --resource-fencing off    # negative control
//! target/debug/examples/chaos run --seed 5 --faults 10 --gray only   # the gray faults alone
//! target/debug/examples/chaos run --seed 1 --long --out docs/chaos   # 1,512 faults
//! ```
//!
//! Redis, the fault proxy between each replica and Redis, PostgreSQL and the guarded child
//! processes come from the test kit (`testbed`); the `leasehold run` command line of a replica
//! and the wait for it to answer, from the layer the tests and benchmarks share (`harness`).
//!
//! Layout:
//!
//! ```text
//! config.rs     the command line and the run's settings
//! kinds.rs      the faults, declared once with their parameters; the sets each topology
//!               draws, recovery bounds
//! schedule.rs   the seeded schedule
//! params.rs     the faults' parameters that are more than a number
//! system.rs     the system under test (Redis, the resource, the proxies, the replicas),
//!               started and stopped together
//! redis_cli.rs  the nemesis's commands to Redis and the Sentinels, through redis-cli
//! events.rs     leasehold's log lines as the events the checker reads
//! replica.rs    one leasehold replica: its processes, started and stopped
//! livelog.rs    a replica's log: raw on disk, its events, the live view of leadership
//! resource.rs   the fenced resource the leaders' commands write to
//! workload.rs   the leader's work: the command leasehold runs (`chaos child`)
//! nemesis.rs    injects the schedule and keeps the journal
//! journal.rs    what the nemesis did: faults and impairments
//! lease_loss.rs Redis loses the lease's records: eviction, the lease vanishing
//! delivery.rs   late delivery on the leader's link, a follower's dead subscription
//! work_faults.rs  the leader's work: a daemon or a SIGTERM-proof worker left behind,
//!               work that fails at once; ending a term
//! starve.rs     CPU starvation of one replica: a cgroup quota, or pinned busy loops
//! gray.rs       gray faults: one replica partly sick for several lease durations
//! mixed.rs      mixed lease durations across a data loss
//! foreign.rs    a lease key or reservation without TTL that leasehold did not write
//! topology.rs   the Sentinel set and the Redis Cluster of the topology runs
//! topofaults.rs their faults: failovers, a mute Sentinel, a live slot migration
//! pg.rs         a row of PostgreSQL's tables, the second fenced resource
//! pgwrite.rs    the command's fenced PostgreSQL transaction, and reading the tables back
//! history.rs    validity windows from the logs
//! intervals.rs  interval sets, and which intervals overlap
//! checker.rs    the safety checks
//! termcheck.rs  the checks by the replicas' own logs, of late writes, and of PostgreSQL
//! failover.rs   failover times, bounds, availability
//! report.rs     report.md and summary.json
//! report_terms.rs  report.md's section on the terms by the logs, late writes, churn, the
//!               keys leasehold did not write, and PostgreSQL
//! report_gray.rs  report.md's section on leaderless time and churn, with the gray faults'
//!               bounds
//! timeline.rs   timeline.svg
//! time.rs       wall-clock microseconds, log timestamps
//! dataset.rs    what a run collected, saved for `chaos check`
//! run.rs        one run from start to report, or a saved run's report
//! ```

pub mod checker;
pub mod config;
pub mod dataset;
pub mod delivery;
pub mod events;
pub mod failover;
pub mod foreign;
pub mod gray;
pub mod history;
pub mod intervals;
pub mod journal;
pub mod kinds;
pub mod lease_loss;
pub mod livelog;
pub mod mixed;
pub mod nemesis;
pub mod params;
pub mod pg;
pub mod pgwrite;
pub mod redis_cli;
pub mod replica;
pub mod report;
pub mod report_gray;
pub mod report_terms;
pub mod resource;
pub mod run;
pub mod schedule;
pub mod starve;
pub mod system;
pub mod termcheck;
pub mod time;
pub mod timeline;
pub mod topofaults;
pub mod topology;
pub mod work_faults;
pub mod workload;
