//! A model of the lease protocol, explored exhaustively by `stateright` for small
//! configurations: Redis applying the mirrored scripts atomically, replicas deciding with the
//! elector's own pure decisions, a network that delays, reorders, loses and delivers late,
//! clocks that drift within the drift margin, pauses (a replica simply takes no step), Redis
//! faults, and Sentinel failovers that leave the old master writable. docs/MODEL.md explains
//! it.
//!
//! `LEASEHOLD_MODEL_FULL=1` checks the longer configuration (3 replicas, every fault), `=3`,
//! `=3f` and `=3h` smaller three-replica ones; `LEASEHOLD_MODEL_WITH=horizon=6,max_delayed=2`
//! changes fields of the chosen one. Those runs search depth-first and report each minute; run
//! them in a release build (docs/MODEL.md).
//!
//! `lua_mirror` holds the model's mirror of the scripts against the real scripts on a real
//! redis-server, so that the mirror the model checks is the one the scripts behave as.

mod config;
mod connection;
mod delivery;
mod follower;
mod leader;
mod link;
mod lua_mirror;
mod mirror;
mod notices;
mod progress;
mod properties;
mod redis;
mod replica;
mod sentinels;
mod symmetry;
mod system;
mod system_rename;
mod trace;
mod values;

use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model};

use config::Config;
use link::Health;
use mirror::Semantics;
use progress::Progress;
use properties::{HEALTHY_LEADS, REFUSED_ENDED, UNKNOWN_WON};
use sentinels::SentinelWord;
use system::{State, System};

const ONE_GUARD: &str = "at most one replica's guard passes";
const SAFETY: [&str; 3] = [
    ONE_GUARD,
    "tokens of successive terms increase",
    "no message of one term changes another term",
];

/// How the checker walks the states.
#[derive(Clone, Copy)]
enum Search {
    /// Breadth-first on one thread when a counterexample is sought, so that it is a shortest
    /// one; it keeps every state of the frontier whole.
    BreadthFirst,
    /// Depth-first on both cores: it keeps only a fingerprint of each state seen and the path
    /// being walked, so the flagged three-replica configurations fit in memory. Its
    /// counterexample is some path, not a shortest one.
    DepthFirst,
}

/// Explores every state of `config` breadth-first (or until `finish` holds) and prints how
/// many there were.
fn explore(label: &str, config: Config, finish: HasDiscoveries) -> Box<dyn Checker<System>> {
    search(label, config, finish, Search::BreadthFirst)
}

fn search(
    label: &str,
    config: Config,
    finish: HasDiscoveries,
    search: Search,
) -> Box<dyn Checker<System>> {
    for id in 0..config.replicas {
        let timings = config.timings(id);
        assert!(
            timings.timing().validate().is_ok(),
            "the model's timing {timings:?} must pass the binary's own validation"
        );
    }
    let started = Instant::now();
    // One thread keeps the search strictly breadth-first, so a counterexample is a shortest
    // one; exhaustive runs may use both cores.
    let threads = match (&finish, search) {
        (HasDiscoveries::All, _) | (_, Search::DepthFirst) => {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
        }
        _ => 1,
    };
    let builder = System::new(config)
        .checker()
        .threads(threads)
        .finish_when(finish);
    let order = match search {
        Search::BreadthFirst => "breadth-first",
        Search::DepthFirst => "depth-first",
    };
    // The depth-first runs are the flagged, long ones: they say how far they are each minute.
    let checker: Box<dyn Checker<System>> = match search {
        Search::BreadthFirst => Box::new(builder.spawn_bfs().join()),
        Search::DepthFirst => Box::new(builder.spawn_dfs().join_and_report(&mut Progress::new(
            format!("{label} ({order})"),
            Duration::from_secs(60),
        ))),
    };
    println!(
        "{label} ({order}): {} states explored ({} unique), depth {}, in {:.1?}, {} resident",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed(),
        progress::resident().unwrap_or_else(|| "?".into()),
    );
    checker
}

/// The configuration to check: `LEASEHOLD_MODEL_FULL=1` for the full one, `=3` for the
/// CI configuration's faults with three replicas, `=3f` for three replicas with more faults,
/// `=3s` for a Sentinel failover among three replicas, `=3h` for a handover among three
/// replicas, else the CI configuration.
fn chosen() -> (&'static str, Config) {
    match std::env::var("LEASEHOLD_MODEL_FULL").as_deref() {
        Ok("1") => ("full configuration", Config::full()),
        Ok("3") => ("three replicas", Config::three_replicas()),
        Ok("3f") => (
            "three replicas, more faults",
            Config::three_replicas_more_faults(),
        ),
        Ok("3s") => (
            "a Sentinel failover among three replicas",
            Config::sentinel_among_three(),
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
    let (label, config) = chosen();
    let config = match std::env::var("LEASEHOLD_MODEL_WITH") {
        Ok(overrides) => config.with(&overrides).unwrap_or_else(|e| panic!("{e}")),
        Err(_) => config,
    };
    // The flagged configurations are too big to keep a breadth-first frontier in memory; CI's
    // stays breadth-first, so that a counterexample there is a shortest one.
    let flagged = ["LEASEHOLD_MODEL_FULL", "LEASEHOLD_MODEL_WITH"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    let order = if flagged {
        Search::DepthFirst
    } else {
        Search::BreadthFirst
    };
    holds_everywhere_and_reaches_its_faults(label, config, order);
}

/// Explores every state of `config`, fails on any safety counterexample, and requires the runs
/// its faults promise (else the configuration would be too small to show anything): a second
/// term; a term after a restart lost the data, so the horizon reaches past the cooldown; a
/// completed handover; a term on the node a Sentinel failover promoted. Prints one run of each.
fn holds_everywhere_and_reaches_its_faults(label: &str, config: Config, order: Search) {
    let checker = search(label, config, HasDiscoveries::All, order);
    for property in SAFETY {
        if let Some(trace) = trace::counterexample(&*checker, property) {
            panic!("{label}: {property}: counterexample\n{trace}");
        }
    }
    // The model states which runs a configuration's faults promise (`System::properties`).
    let promised = checker.model().properties();
    let promised = promised
        .iter()
        .filter(|p| p.expectation == Expectation::Sometimes);
    for property in promised {
        let Some(trace) = trace::counterexample(&*checker, property.name) else {
            panic!("{label}: {}", missing(property.name));
        };
        println!("{label}: {}:\n{trace}", property.name);
    }
}

/// What it means that no run reached `property`.
fn missing(property: &str) -> String {
    let why = match property {
        "a replica leads a second term" => "no run reached a second term",
        "a replica leads after Redis lost its data" => {
            "no run led again after Redis lost its data: the horizon ends inside the cooldown"
        }
        "a handover completes" => {
            "no run completed a handover; the handover steps cannot be reached"
        }
        "a replica leads on the promoted node" => {
            "no run led on the promoted node; the failover changes nothing"
        }
        "an observe finds a term its replica never led" => {
            "no acquire's outcome was unknown and then resolved; the give-back cannot be reached"
        }
        "Redis loses its data while a longer term than another replica's is valid" => {
            "no run lost the data during a longer term; the mixed lease durations change nothing"
        }
        _ => "no run reached it",
    };
    format!("{why} (\"{property}\")")
}

#[test]
fn a_handover_moves_leadership_and_never_lets_two_guards_pass() {
    holds_everywhere_and_reaches_its_faults(
        "handover configuration",
        Config::handover(),
        Search::BreadthFirst,
    );
}

#[test]
fn a_replica_leads_once_faults_stop_under_fair_scheduling() {
    let checker = explore(
        "liveness configuration",
        Config::liveness(),
        HasDiscoveries::All,
    );
    if let Some(trace) = trace::counterexample(&*checker, "a replica leads once faults stop") {
        panic!("no leader after the faults stopped:\n{trace}");
    }
    if let Some(trace) = trace::counterexample(&*checker, ONE_GUARD) {
        panic!("two guards passed:\n{trace}");
    }
}

/// The negative controls: a pre-fix protocol, the configuration that breaks it, and the
/// shortest trace to two guards passing at once, which must show `step` (the fault or message
/// the defect needs).
fn counterexample_for(label: &str, config: Config, step: &str, what: &str) {
    let checker = explore(
        label,
        config,
        HasDiscoveries::AnyOf([ONE_GUARD].into_iter().collect()),
    );
    let trace = trace::counterexample(&*checker, ONE_GUARD);
    let Some(trace) = trace else {
        panic!("{label}: the checker found no counterexample; the model cannot see the defect");
    };
    println!("{label}: shortest counterexample\n{trace}");
    assert!(trace.contains(step), "the trace shows {what}:\n{trace}");
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
    counterexample_for("pre-fix late release", config, "release of", "the release");
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
    counterexample_for("no state record", config, "Evict", "the eviction");
}

#[test]
fn a_sentinel_failover_beside_a_writable_old_master_never_lets_two_guards_pass() {
    holds_everywhere_and_reaches_its_faults(
        "Sentinel configuration",
        Config::sentinel(),
        Search::BreadthFirst,
    );
}

/// The pre-fix Sentinel words, in a configuration just big enough for their counterexample:
/// one term each, no message delayed across a tick.
fn sentinel_control(word: SentinelWord) -> Config {
    Config {
        sentinel_word: word,
        max_terms: 1,
        max_delayed: 0,
        ..Config::sentinel()
    }
}

#[test]
fn one_sentinels_word_after_a_failover_lets_two_guards_pass() {
    let config = sentinel_control(SentinelWord::FirstListed);
    counterexample_for(
        "pre-fix one Sentinel's word",
        config,
        "Sentinel failover",
        "the failover",
    );
}

#[test]
fn a_connection_kept_from_before_a_failover_without_confirmation_lets_two_guards_pass() {
    let config = sentinel_control(SentinelWord::Unconfirmed);
    counterexample_for(
        "pre-fix no confirmation",
        config,
        "Sentinel failover",
        "the failover",
    );
}

/// Contenders of different lease durations (docs/MODEL.md, "Mixed lease durations"): a request
/// sent before its replica learnt the longer duration finds the loss and starts the shorter
/// cooldown; the acquire script holds every later acquire to the loss instant plus what that
/// caller knows, also after the shorter cooldown ended, so the notice's corrections count.
#[test]
fn contenders_of_different_lease_durations_never_let_two_guards_pass() {
    holds_everywhere_and_reaches_its_faults(
        "mixed configuration",
        Config::mixed(),
        Search::BreadthFirst,
    );
}

/// A Redis clock faster than the drift margin covers (issue 34): one replica's clock stands
/// still for two ticks in four, so Redis counts five seconds where it counts three. No data
/// loss and no eviction, so that only the clocks can part two terms.
fn fast_redis_clock(measured_rate: bool) -> Config {
    Config {
        evictions: 0,
        restarts_losing_data: 0,
        max_lag: 2,
        lag_every: 2,
        max_delayed: 1,
        measured_rate,
        ..Config::ci()
    }
}

#[test]
fn a_redis_clock_faster_than_the_margin_never_lets_two_guards_pass_with_the_validity_it_measured() {
    let checker = explore(
        "fast Redis clock, measured",
        fast_redis_clock(true),
        HasDiscoveries::All,
    );
    for property in SAFETY {
        if let Some(trace) = trace::counterexample(&*checker, property) {
            panic!("fast Redis clock, measured: {property}: counterexample\n{trace}");
        }
    }
}

#[test]
fn a_redis_clock_faster_than_the_margin_lets_two_guards_pass_with_the_configured_drift_alone() {
    counterexample_for(
        "fast Redis clock, configured drift alone",
        fast_redis_clock(false),
        "runs slow and misses it",
        "a replica clock falling behind Redis's",
    );
}

#[test]
fn a_cooldown_of_the_finders_own_lease_duration_lets_two_guards_pass() {
    let config = Config {
        sem: Semantics {
            before_longest: true,
            ..Semantics::default()
        },
        ..Config::mixed()
    };
    counterexample_for(
        "pre-fix cooldown of the finder's own lease duration",
        config,
        "Restart { keep_data: false }",
        "the data loss",
    );
}

/// The residual the design accepts: Redis lost everything, `:longest` too, the only holder of
/// the longer lease duration is frozen, and the replica that finds the loss never saw a term of
/// it. It cools down for its own duration and leads while the frozen term is still valid.
/// Without `Config::loss_after_following` the model finds exactly that, and nothing shorter.
#[test]
fn a_replica_that_never_saw_a_longer_term_cannot_cool_down_for_it() {
    let label = "mixed configuration, data lost before the short replica followed";
    let config = Config {
        loss_after_following: false,
        ..Config::mixed()
    };
    let checker = explore(
        label,
        config,
        HasDiscoveries::AnyOf([ONE_GUARD].into_iter().collect()),
    );
    let path = checker
        .discovery(ONE_GUARD)
        .unwrap_or_else(|| panic!("{label}: the residual is not in the model"));
    let trace = trace::counterexample(&*checker, ONE_GUARD).unwrap_or_default();
    println!("{label}: shortest counterexample\n{trace}");
    // Both guards pass; the one of the shorter lease duration never knew the longer one.
    let last = path.last_state();
    let passing: Vec<_> = last
        .replicas
        .iter()
        .filter(|r| r.check_passes(last.time))
        .collect();
    let longest = passing.iter().map(|r| r.timings.ttl_ms()).max();
    assert!(
        passing
            .iter()
            .any(|r| Some(r.knows_ms()) < longest && r.longest_seen == 0),
        "the shortest counterexample is not the residual:\n{trace}"
    );
    assert!(
        trace.contains("Restart { keep_data: false }"),
        "the trace shows the data loss:\n{trace}"
    );
}

/// Gray failures (docs/DESIGN.md): beside a replica whose replies come later than its
/// attempt's bound for ever and one whose renewals are refused for ever, a healthy replica
/// leads within two lease durations and keeps leading to the horizon, on every fair run.
#[test]
fn a_healthy_replica_leads_and_keeps_leading_beside_a_late_and_a_refused_one() {
    let label = "gray configuration";
    let checker = explore(label, Config::gray(), HasDiscoveries::All);
    if let Some(trace) = trace::counterexample(&*checker, HEALTHY_LEADS) {
        panic!("{label}: no healthy replica kept the lease:\n{trace}");
    }
    if let Some(trace) = trace::counterexample(&*checker, ONE_GUARD) {
        panic!("{label}: two guards passed:\n{trace}");
    }
    // Not vacuous: the sick replicas did take the lease.
    for property in [UNKNOWN_WON, REFUSED_ENDED] {
        let Some(trace) = trace::counterexample(&*checker, property) else {
            panic!("{label}: {}", missing(property));
        };
        println!("{label}: {property}:\n{trace}");
    }
}

/// The elector before the fix: after an unanswered acquire the late replica acquires again
/// after the retry period, and the script replaces its own running term with a new one under a
/// fresh TTL, so the lease never runs out and no healthy replica leads.
#[test]
fn acquiring_again_after_an_unanswered_acquire_locks_the_healthy_replicas_out() {
    let label = "pre-fix acquire again after an unanswered acquire";
    let config = Config {
        acquire_again_when_unknown: true,
        ..Config::gray()
    };
    let checker = explore(
        label,
        config,
        HasDiscoveries::AnyOf([HEALTHY_LEADS].into_iter().collect()),
    );
    let path = checker
        .discovery(HEALTHY_LEADS)
        .unwrap_or_else(|| panic!("{label}: no lock-out found; the model cannot see the defect"));
    let trace = trace::counterexample(&*checker, HEALTHY_LEADS).unwrap_or_default();
    println!("{label}: shortest counterexample\n{trace}");
    // The late replica's term, live, replaced by another of its own in one step.
    let late_term = |s: &State| {
        let term = s.redis.live_term(s.time)?;
        (s.replicas[usize::from(term.owner)].health == Health::Late).then_some(term)
    };
    let states = path.into_states();
    let replaced = states.windows(2).any(|w| {
        w[0].time == w[1].time
            && late_term(&w[0])
                .zip(late_term(&w[1]))
                .is_some_and(|(a, b)| a.token != b.token)
    });
    assert!(
        replaced,
        "the trace shows the script replacing the late replica's running term:\n{trace}"
    );
}
