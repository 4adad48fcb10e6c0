//! The chaos harness's short run, as part of the suite: a fixed seed with one round of the
//! schedule (one fault of every kind, the newer generations' included) against five real
//! leasehold processes, a real redis-server and a real PostgreSQL as the second fenced
//! resource, checked by the harness's independent checker.
//! Fails on any safety violation, when a replica did not say that a key without TTL it did not
//! write blocks the lease, and when the negative control (the same schedule with fencing off at
//! both resources) is not reported as violating on each. The two runs go side by side.
//!
//! The harness is the `chaos` crate (crates/chaos, see docs/CHAOS.md), linked into this test,
//! so the run needs no build of its own. Leaders run this test binary again as
//! their command, in the role `serves_as_the_leaders_command_when_started_by_leasehold`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chaos::config::{self, RESOURCE_ENV, RunConfig};
use chaos::schedule::FaultKind;
use chaos::{run, workload};
use leasehold::elector::Timing;

const SEED: u64 = 7;
const FAULTS: usize = FaultKind::SINGLE.len();
/// This test's name as the test binary lists it, under its module.
const ROLE: &str = "short_chaos::serves_as_the_leaders_command_when_started_by_leasehold";

fn config(name: &str, fencing: bool) -> RunConfig {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("chaos")
        .join(name);
    let me = std::env::current_exe().expect("this test's own path");
    RunConfig {
        seed: SEED,
        faults: FAULTS,
        replicas: 5,
        timing: Timing {
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_millis(900),
            retry_period: Duration::from_millis(250),
            ..Timing::default()
        },
        write_interval: Duration::from_millis(20),
        fencing,
        out: out.clone(),
        leasehold: PathBuf::from(harness::leasehold_bin()),
        child_command: vec![
            me.into_os_string(),
            "--exact".into(),
            ROLE.into(),
            "--nocapture".into(),
        ],
        keep_logs: false,
        dry_run: false,
        kinds: Vec::new(),
        postgres: true,
        topology: config::Topology::Single,
        // The gray faults last several lease durations each: the long run and `--gray only`
        // draw them, the suite's one round does not.
        gray: config::Gray::Off,
        leasehold_args: Vec::new(),
        command_line: format!(
            "cargo test --test safety short_chaos (seed {SEED}, {FAULTS} faults, fencing {})",
            if fencing { "on" } else { "off" }
        ),
    }
}

fn outcome(config: &RunConfig) -> (serde_json::Value, String) {
    let text = std::fs::read_to_string(config.out.join("summary.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", config.out.display()));
    let report = std::fs::read_to_string(config.out.join("report.md")).unwrap_or_default();
    (
        serde_json::from_str(&text).expect("summary.json is JSON"),
        report,
    )
}

#[test]
fn a_short_chaos_run_finds_no_violation_and_its_negative_control_is_caught() {
    let fenced = config("short-fenced", true);
    let control = config("short-control", false);
    // Each run starts and owns its processes on its own thread, for as long as it lasts.
    let runs = [fenced.clone(), control.clone()].map(|c| std::thread::spawn(move || run::run(&c)));
    let [fenced_pass, control_pass] = runs.map(|r| {
        r.join()
            .expect("a harness run panicked")
            .unwrap_or_else(|e| panic!("the harness could not run: {e:#}"))
    });

    let (summary, report) = outcome(&fenced);
    assert!(
        fenced_pass && summary["safety_violations"] == 0,
        "the short run must pass with no safety violation:\n{report}"
    );
    assert_eq!(
        summary["faults_injected"].as_u64(),
        Some(FAULTS as u64),
        "every fault must run:\n{report}"
    );
    for kind in FaultKind::SINGLE {
        let name = serde_json::to_value(kind).expect("a kind's name");
        let name = name.as_str().expect("a kind's name is a string");
        assert!(
            summary["faults_by_kind"][name].as_u64() >= Some(1),
            "no {name} fault ran:\n{report}"
        );
    }
    for name in ["foreign-lease", "foreign-reservation"] {
        let said = &summary["said_by_kind"][name];
        assert!(
            said[1].as_u64() > Some(0) && said[0] == said[1],
            "every replica must say that a key without TTL blocks the lease ({name}: {said}):\n{report}"
        );
    }
    let helpers = &summary["more"]["helper_writes"][0];
    assert!(
        helpers.as_u64() > Some(0),
        "the daemonizing and SIGTERM-ignoring commands' helpers must have written:\n{report}"
    );
    assert!(
        summary["counterfactual_stale"].as_u64() > Some(0),
        "the schedule must give a paused leader's command the chance to write stale data:\n{report}"
    );

    let (control_summary, control_report) = outcome(&control);
    assert!(
        control_summary["violations_by_check"]["stale-write-accepted"].as_u64() > Some(0),
        "with fencing off the checker must report stale writes accepted:\n{control_report}"
    );
    assert!(
        summary["more"]["pg_committed"].as_u64() > Some(0),
        "the leaders' commands must have written to PostgreSQL:\n{report}"
    );
    assert!(
        control_summary["violations_by_check"]["pg-stale-write-accepted"].as_u64() > Some(0),
        "with fencing off PostgreSQL must have committed stale writes, and the checker seen them:\n{control_report}"
    );
    assert!(
        control_pass,
        "the negative control's verdict must be a pass (violations seen):\n{control_report}"
    );
}

/// Not a test of its own: the leaders' command in the runs above. leasehold starts this binary
/// with `--exact` and this name, with the fenced resource in the environment; the command then
/// writes until leasehold stops it. Started any other way, it returns at once.
#[test]
fn serves_as_the_leaders_command_when_started_by_leasehold() {
    if std::env::var_os(RESOURCE_ENV).is_none() {
        return;
    }
    let settings = workload::Settings::from_env().expect("the harness's settings");
    if let Err(e) = workload::run(&settings) {
        panic!("the leader's command cannot run: {e:#}");
    }
}
