//! The status file against a writer that died or froze: a real `leasehold run --status-file`
//! leader SIGKILLed or SIGSTOPped while another replica takes over. Read as a sidecar reads it
//! (parse the JSON, compare its deadline with the boot clock), the file must not say that the
//! dead or frozen replica leads once its term's deadline has passed.

use std::path::Path;
use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use harness::{RunCommand, leasehold_bin};
use leasehold::clock::BootInstant;
use nix::sys::signal::Signal;
use testbed::RedisServer;
use testbed::wait::wait_for;

const WAIT: Duration = Duration::from_secs(20);
/// The lease duration of [`FAST`]: no term outlives its last renewal by more.
const TTL: Duration = Duration::from_millis(1500);
/// How fast a Redis clock runs that NTP slews beyond the drift margin.
const RATE: f64 = 1.10;

fn with_status_file(path: &Path) -> Vec<String> {
    let mut args: Vec<String> = FAST.iter().map(|s| s.to_string()).collect();
    args.extend(["--status-file".into(), path.display().to_string()]);
    args
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("read the status file");
    serde_json::from_str(&text).expect("the status file is JSON")
}

/// Whether a reader of the file concludes that its writer leads at `now`: by the file's rule
/// (`leader_until_boot_ns` after the boot clock), or by a bare claim that a reader would take
/// at its word (`is_leader: true`, `role: "leader"`).
fn reader_concludes_leading(json: &serde_json::Value, now: BootInstant) -> bool {
    let by_deadline = json["leader_until_boot_ns"]
        .as_u64()
        .is_some_and(|until| now.as_nanos() < until);
    by_deadline || json["is_leader"] == true || json["role"] == "leader"
}

/// A leads with a status file, B follows; `fault` hits A; once B leads and A's term is over by
/// any measure (one TTL after the fault), A's file must not say that A leads.
fn after(fault: Signal) {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let lease = unique_lease("status-file-writer");
    let (file_a, file_b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let (args_a, args_b) = (with_status_file(&file_a), with_status_file(&file_b));
    let args_a: Vec<&str> = args_a.iter().map(String::as_str).collect();
    let args_b: Vec<&str> = args_b.iter().map(String::as_str).collect();
    let a = Replica::spawn(&redis.url(), &lease, "a", &args_a, &[]);
    wait_for("a leads", WAIT, || a.is_ready().then_some(()));
    wait_for("a's file says a leads", WAIT, || {
        reader_concludes_leading(&read_json(&file_a), BootInstant::now()).then_some(())
    });
    let b = Replica::spawn(&redis.url(), &lease, "b", &args_b, &[]);
    wait_for("b follows a", WAIT, || {
        (b.leader()["leader"] == "a").then_some(())
    });

    a.signal(fault);
    let hit = BootInstant::now();
    wait_for("b leads", WAIT, || b.is_ready().then_some(()));
    wait_for("a's term to be over by any measure", WAIT, || {
        (BootInstant::now() > hit.saturating_add(TTL)).then_some(())
    });
    let json = read_json(&file_a);
    let now = BootInstant::now();
    assert!(
        !reader_concludes_leading(&json, now),
        "{:?} after a {fault}, with b leading, a's status file still says a leads: {json}",
        now.saturating_duration_since(hit)
    );
    if fault == Signal::SIGSTOP {
        a.signal(Signal::SIGCONT);
    }
}

#[test]
fn a_killed_leaders_status_file_does_not_say_it_leads_after_its_deadline() {
    after(Signal::SIGKILL);
}

#[test]
fn a_frozen_leaders_status_file_does_not_say_it_leads_after_its_deadline() {
    after(Signal::SIGSTOP);
}

#[test]
fn a_second_leasehold_given_the_same_status_file_is_refused_naming_the_first() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("leader.json");
    let lease = unique_lease("shared-status-file");
    let args = with_status_file(&file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &[]);
    wait_for("a leads", WAIT, || a.is_ready().then_some(()));
    let b = RunCommand::new(leasehold_bin())
        .redis_url(&redis.url())
        .lease(&lease)
        .args(&args);
    Replica::start(b, "b", &[]).assert_refused_for_a_file_of("--status-file", &file, a.pid());
}

/// A renewal that measures Redis's clock fast ends the term sooner than the one before it: the
/// file's deadline moves back with it. A 60 s lease on a Redis 10 % fast begins valid for about
/// 59.4 s (the configured drift) and its renewals, 250 ms apart, for about 54.5 s, which the
/// grant's deadline outlasts for its first 4.9 s: a few renewals in, the file must not say that
/// the writer leads for longer than Redis keeps the lease.
#[test]
fn the_files_deadline_moves_back_when_a_renewal_ends_the_term_sooner() {
    let redis = RedisServer::builder().clock_rate(RATE).start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.json");
    let path = file.display().to_string();
    let timing = [
        "--lease-duration",
        "60s",
        "--renew-deadline",
        "40s",
        "--retry-period",
        "250ms",
        "--no-data-loss-cooldown",
        "--status-file",
        &path,
    ];
    let lease = unique_lease("status-file-back");
    let a = Replica::spawn(&redis.url(), &lease, "a", &timing, &[]);
    a.wait_events("renewed", 3, WAIT);
    // As a reader reads it: how long the file says its writer leads, against how long Redis,
    // on its fast clock, keeps the lease (the two answers a moment apart, 1 ms for rounding).
    let asked = Instant::now();
    let until = read_json(&file)["leader_until_boot_ns"].as_u64();
    let left_ms = until.map_or(0, |u| {
        u.saturating_sub(BootInstant::now().as_nanos()) / 1_000_000
    });
    let pttl: i64 = redis.cmd(&["PTTL", &format!("leasehold:{{{lease}}}")]);
    let kept_ms = pttl as f64 / RATE;
    let asking_ms = asked.elapsed().as_secs_f64() * 1_000.0 + 1.0;
    assert!(
        left_ms as f64 <= kept_ms + asking_ms,
        "the file says {left_ms} ms more, Redis keeps the lease {kept_ms:.0} ms"
    );
}
