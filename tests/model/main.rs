//! A model of the lease protocol, explored exhaustively by `stateright` for small
//! configurations: Redis applying the mirrored scripts atomically, replicas deciding with the
//! elector's own pure decisions, a network that delays, reorders, loses and delivers late,
//! clocks that drift within the drift margin, pauses (a replica simply takes no step), and
//! Redis faults. docs/MODEL.md explains it.
//!
//! `LEASEHOLD_MODEL_FULL=1` checks the longer configuration (3 replicas, every fault).

mod config;
// Observe and the string forms of terms serve the `lua_mirror` target.
#[allow(dead_code)]
mod mirror;
mod redis;
mod replica;
mod symmetry;
mod system;
mod system_rename;
mod trace;
// The texts' parsers serve the `lua_mirror` target.
#[allow(dead_code)]
mod values;

use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model};

use config::Config;
use mirror::Semantics;
use system::System;

const ONE_GUARD: &str = "at most one replica's guard passes";
const SAFETY: [&str; 3] = [
    ONE_GUARD,
    "tokens of successive terms increase",
    "no message of one term changes another term",
];

/// Explores every state of `config` breadth-first (or until `finish` holds) and prints how
/// many there were.
fn explore(label: &str, config: Config, finish: HasDiscoveries) -> impl Checker<System> {
    assert!(
        config::timing().validate().is_ok(),
        "the model's timing must pass the binary's own validation"
    );
    let started = Instant::now();
    // One thread keeps the search strictly breadth-first, so a counterexample is a shortest
    // one; exhaustive runs may use both cores.
    let threads = match finish {
        HasDiscoveries::All => std::thread::available_parallelism().map_or(1, |n| n.get().min(2)),
        _ => 1,
    };
    let checker = System::new(config)
        .checker()
        .threads(threads)
        .finish_when(finish)
        .spawn_bfs()
        .join();
    println!(
        "{label}: {} states explored ({} unique), depth {}, in {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}

/// The configuration to check: `LEASEHOLD_MODEL_FULL=1` for the full one, `=3` for the
/// CI configuration's faults with three replicas, `=3f` for three replicas with more faults,
/// `=3h` for a handover among three replicas, else the CI configuration.
fn chosen() -> (&'static str, Config) {
    match std::env::var("LEASEHOLD_MODEL_FULL").as_deref() {
        Ok("1") => ("full configuration", Config::full()),
        Ok("3") => ("three replicas", Config::three_replicas()),
        Ok("3f") => (
            "three replicas, more faults",
            Config::three_replicas_more_faults(),
        ),
        Ok("3h") => (
            "a handover among three replicas",
            Config::handover_among_three(),
        ),
        _ => ("CI configuration", Config::ci()),
    }
}

#[test]
fn no_two_guards_pass_at_once_in_any_reachable_state() {
    let (label, mut config) = chosen();
    if let Some(h) = std::env::var("MODEL_HORIZON")
        .ok()
        .and_then(|h| h.parse().ok())
    {
        config.horizon = h;
    }
    let config_handovers = config.handovers;
    let checker = explore(label, config, HasDiscoveries::All);
    for property in SAFETY {
        if let Some(trace) = trace::counterexample(&checker, property) {
            panic!("{property}: counterexample\n{trace}");
        }
    }
    // Not vacuous: the faults and delays still let a replica lead again.
    assert!(
        checker.discovery("a replica leads a second term").is_some(),
        "no run reached a second term: the configuration is too small to show anything"
    );
    if config_handovers > 0 {
        handover_completes(label, &checker);
    }
}

/// A handover can move leadership: the request, the step-down, the reservation and the
/// successor's acquire all happen in some run (the shortest is printed).
fn handover_completes(label: &str, checker: &impl Checker<System>) {
    let Some(trace) = trace::counterexample(checker, "a handover completes") else {
        panic!("{label}: no run completed a handover; the handover steps cannot be reached");
    };
    println!("{label}: a shortest completed handover\n{trace}");
}

#[test]
fn a_handover_moves_leadership_and_never_lets_two_guards_pass() {
    let checker = explore(
        "handover configuration",
        Config::handover(),
        HasDiscoveries::All,
    );
    for property in SAFETY {
        if let Some(trace) = trace::counterexample(&checker, property) {
            panic!("{property}: counterexample\n{trace}");
        }
    }
    handover_completes("handover configuration", &checker);
}

#[test]
fn a_replica_leads_once_faults_stop_under_fair_scheduling() {
    let checker = explore(
        "liveness configuration",
        Config::liveness(),
        HasDiscoveries::All,
    );
    if let Some(trace) = trace::counterexample(&checker, "a replica leads once faults stop") {
        panic!("no leader after the faults stopped:\n{trace}");
    }
    if let Some(trace) = trace::counterexample(&checker, ONE_GUARD) {
        panic!("two guards passed:\n{trace}");
    }
}

/// The negative controls: a pre-fix protocol, the configuration that breaks it, and the
/// shortest trace to two guards passing at once.
fn counterexample_for(label: &str, config: Config) -> String {
    let checker = explore(
        label,
        config,
        HasDiscoveries::AnyOf([ONE_GUARD].into_iter().collect()),
    );
    let trace = trace::counterexample(&checker, ONE_GUARD);
    let Some(trace) = trace else {
        panic!("{label}: the checker found no counterexample; the model cannot see the defect");
    };
    println!("{label}: shortest counterexample\n{trace}");
    trace
}

#[test]
fn a_late_release_compared_per_process_lets_two_guards_pass() {
    let config = Config {
        evictions: 0,
        restarts_losing_data: 0,
        max_lag: 0,
        horizon: 6,
        work_failures: true,
        sem: Semantics {
            compare_owner_only: true,
            ..Semantics::default()
        },
        ..Config::ci()
    };
    let trace = counterexample_for("pre-fix late release", config);
    assert!(
        trace.contains("release of"),
        "the trace shows the release:\n{trace}"
    );
}

#[test]
fn an_eviction_without_the_record_lets_two_guards_pass() {
    let config = Config {
        restarts_losing_data: 0,
        max_lag: 0,
        horizon: 6,
        sem: Semantics {
            record_without_term: true,
            ..Semantics::default()
        },
        ..Config::ci()
    };
    let trace = counterexample_for("no state record", config);
    assert!(
        trace.contains("Evict"),
        "the trace shows the eviction:\n{trace}"
    );
}
