//! The overlap a fast Redis clock made (issue 34's hostile run): a singleton command that asks
//! `leasehold guard` before every write, its leasehold frozen while the command runs on, and a
//! successor whose command writes to the same resource. Redis expires the lease on its own clock,
//! here 5 % and 10 % fast (libfaketime); the old term's guard must close before the successor's
//! first write, in the resource's own order of appends; and so must that of a leader cut off from
//! Redis whose renew deadline sits near the TTL.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use harness::contenders::unique_lease;
use harness::guarded_command::{Entry, Kind, Resource, env, script};
use harness::leasehold_bin;
use harness::replica::{Replica, TWO_SECOND_TERM};
use nix::sys::signal::Signal;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// TTL 2 s, renew deadline 1.4 s, retry 400 ms, no data-loss cooldown.
const TIMING: [&str; 7] = TWO_SECOND_TERM;

const LEASE: Duration = Duration::from_secs(2);

/// The guard's `--valid-for`: covers the check-to-append gap of the command's loop only.
const MARGIN: &str = "10ms";

fn guarded(redis: &RedisServer, lease: &str, name: &str, guard: &Path, out: &Resource) -> Replica {
    guarded_with(&redis.url(), &TIMING, lease, name, guard, out)
}

/// A replica on `url` with `timing`, whose command asks the guard before each write to `out`.
fn guarded_with(
    url: &str,
    timing: &[&str],
    lease: &str,
    name: &str,
    guard: &Path,
    out: &Resource,
) -> Replica {
    let mut args = timing.to_vec();
    let guard = guard.display().to_string();
    args.extend(["--guard-file", &guard]);
    let env = env(&out.path, leasehold_bin(), MARGIN);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Replica::spawn_with_env(
        url,
        lease,
        name,
        &args,
        &["bash", "-c", &script(false)],
        &env,
    )
}

fn frozen_leader_on_a_fast_redis_clock(rate: f64) {
    let redis = RedisServer::builder().clock_rate(rate).start();
    let lease = unique_lease("clock-overlap");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = Resource::new();
    let leader = guarded(&redis, &lease, "leader", &dir.path().join("a"), &out);
    wait_for("the leader's command to write", 5 * LEASE, || {
        out.starts().first().copied()
    });
    let follower = guarded(&redis, &lease, "follower", &dir.path().join("b"), &out);
    // Three lease durations of renewals: the rate's window is full.
    leader.wait_events("renewed", 15, 5 * LEASE);
    let old = out.starts()[0].0;
    // Only leasehold freezes; its command runs on and asks the guard, as under a real freeze.
    leader.signal(Signal::SIGSTOP);
    let new = wait_for("the successor's command to write", 5 * LEASE, || {
        out.entries()
            .iter()
            .find(|e| e.kind == Kind::Write && e.token != old)
            .map(|e| e.token)
    });
    // Long enough for any late write of the old term to land: its guard's deadline is at most
    // a lease duration after its last renewal.
    wait_for("the old command to be refused", LEASE, || {
        out.entries()
            .iter()
            .any(|e| e.kind == Kind::Refused && e.token == old)
            .then_some(())
    });
    let entries = out.entries();
    leader.signal(Signal::SIGCONT);
    let late = writes_after_a_later_term(&entries);
    assert_eq!(
        late,
        0,
        "at rate {rate}, {late} writes of term {old} landed after term {new}'s first: {}\n{}",
        std::fs::read_to_string(&out.path).unwrap_or_default(),
        follower.log_text()
    );
}

#[test]
fn a_frozen_leaders_command_never_writes_after_its_successor_on_a_redis_clock_5_percent_fast() {
    frozen_leader_on_a_fast_redis_clock(1.05);
}

#[test]
fn a_frozen_leaders_command_never_writes_after_its_successor_on_a_redis_clock_10_percent_fast() {
    frozen_leader_on_a_fast_redis_clock(1.10);
}

/// Writes appended after a write of a later term: what two overlapping terms leave behind.
fn writes_after_a_later_term(entries: &[Entry]) -> usize {
    let mut latest = 0;
    let mut late = 0;
    for e in entries.iter().filter(|e| e.kind == Kind::Write) {
        if e.token.0 < latest {
            late += 1;
        }
        latest = latest.max(e.token.0);
    }
    late
}

/// TTL 2 s and a renew deadline near it, 1.9 s: a leader cut off from a Redis 10 % fast would
/// hold on until 1.9 s, past the 1.818 s Redis keeps the lease.
const NEAR_TTL: [&str; 7] = [
    "--lease-duration",
    "2s",
    "--renew-deadline",
    "1900ms",
    "--retry-period",
    "400ms",
    "--no-data-loss-cooldown",
];

/// The measured rate leaves no useful term there (the validity, 1,816 ms, falls below the renew
/// deadline): a term ends with `clock_rate` as soon as two replies bound the rate; a replica
/// then cut off from Redis begins its next terms with the validity it measured; and however
/// terms come and go, no write of a term follows a later term's.
#[test]
fn a_renew_deadline_past_what_a_fast_redis_clock_keeps_ends_the_term_and_no_terms_overlap() {
    let redis = RedisServer::builder().clock_rate(1.10).start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    let lease = unique_lease("clock-cut");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = Resource::new();
    let leader = guarded_with(
        &proxy.url(),
        &NEAR_TTL,
        &lease,
        "leader",
        &dir.path().join("a"),
        &out,
    );
    let _follower = guarded_with(
        &redis.url(),
        &NEAR_TTL,
        &lease,
        "follower",
        &dir.path().join("b"),
        &out,
    );
    let stepped = leader.wait_events("stepped down", 1, 5 * LEASE);
    assert_eq!(stepped[0]["reason"], "clock_rate", "{stepped:?}");
    // Its next term begins with the validity its first one measured (at most what Redis, 10 %
    // fast, keeps of a 2 s lease), not the renew deadline's; cut off from Redis in that term,
    // it holds on no longer than that.
    let began = leader.wait_events("became leader", 2, 10 * LEASE);
    let valid_for = began[1]["valid_for_ms"]
        .as_u64()
        .expect("the term's validity");
    assert!(
        valid_for <= 1_818,
        "the second term began valid for {valid_for} ms"
    );
    proxy.set(Fault::Blackhole);
    wait_for("more terms", 10 * LEASE, || {
        (out.starts().len() >= 3).then_some(())
    });
    let entries = out.entries();
    let late = writes_after_a_later_term(&entries);
    assert_eq!(
        late,
        0,
        "{late} writes landed after a later term's: {}",
        std::fs::read_to_string(&out.path).unwrap_or_default()
    );
}
