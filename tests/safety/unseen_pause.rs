//! A pause the boot clock did not count (docs/DESIGN.md, "Pauses the boot clock did not count"):
//! a VM frozen by its hypervisor, migrated or restored resumes with its boot clock where it
//! stopped, and only its wall clock, once corrected, shows the time that passed. A real
//! `leasehold run` whose wall clock jumps 5 s while its boot clock does not (libfaketime with
//! the monotonic clocks left alone, the offset read from a file at every call), beside a Redis
//! whose clock jumps with it and a follower that sees none of it; and the guard asked after such a
//! freeze.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use harness::clock::ShiftedClock;
use harness::command::timing_flags;
use harness::contenders::{Contender, idle, lease_on_clock, unique_lease, until_stepped_down};
use harness::replica::{Replica, TWO_SECOND_TERM, run_to_end};
use harness::timings::{FIFTEEN_SECOND_TERM, THIRTY_SECOND_TERM};
use leasehold::clock::{BootInstant, WallLead};
use leasehold::elector::{Leadership, Role, StepDownReason};
use leasehold::guard::{GuardRecord, read_guard_file};
use nix::sys::signal::Signal;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::{FAKETIME, RedisServer};
use testbed::wait::{eventually, until, wait_for};

/// TTL 2 s, renew deadline 1.4 s, retry 400 ms, no data-loss cooldown.
const TIMING: [&str; 7] = TWO_SECOND_TERM;

const LEASE: Duration = Duration::from_secs(2);

/// The clocks of a host that freezes unseen: an offset file that libfaketime re-reads at every
/// call, for a Redis ([`RedisBuilder::clock_file`](testbed::redis_server::RedisBuilder)) and for
/// leasehold processes whose monotonic clocks it leaves alone.
struct FrozenHost {
    dir: tempfile::TempDir,
    offset: std::path::PathBuf,
    offset_path: String,
}

impl FrozenHost {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let offset = dir.path().join("offset");
        std::fs::write(&offset, "+0 x1.0").expect("write the clock's offset");
        let offset_path = offset.to_str().expect("a UTF-8 path").to_owned();
        Self {
            dir,
            offset,
            offset_path,
        }
    }

    /// The environment of a process on this host.
    fn env(&self) -> [(&str, &str); 4] {
        [
            ("LD_PRELOAD", FAKETIME),
            ("FAKETIME_TIMESTAMP_FILE", &self.offset_path),
            ("FAKETIME_NO_CACHE", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ]
    }

    /// `secs` seconds (since the host started) pass for the world, none of them for the boot
    /// clock.
    fn jump(&self, secs: u32) {
        std::fs::write(&self.offset, format!("+{secs} x1.0")).expect("jump the clocks");
    }
}

#[test]
fn a_freeze_the_boot_clock_did_not_count_ends_the_term_as_a_pause_before_anyone_else_leads() {
    let host = FrozenHost::new();
    let redis = RedisServer::builder().clock_file(&host.offset).start();
    let lease = unique_lease("unseen-pause");
    let frozen_host = host.env();
    let leader =
        Replica::spawn_with_env(&redis.url(), &lease, "leader", &TIMING, &[], &frozen_host);
    wait_for("the leader to lead", 5 * LEASE, || {
        leader.is_ready().then_some(())
    });
    let follower = Replica::spawn(&redis.url(), &lease, "follower", &TIMING, &[]);
    wait_for("the follower to follow", 5 * LEASE, || {
        (follower.leader()["leader"] == "leader").then_some(())
    });
    leader.wait_events("renewed", 3, 5 * LEASE);

    // 5 s pass for the world and for Redis, none of them for the leader's boot clock.
    host.jump(5);
    let stepped = wait_for("the leader to step down", LEASE, || {
        // The follower first: should it lead before the leader's step-down is written, this
        // order sees it.
        let follower_led = !follower.events("became leader").is_empty();
        let stepped = leader.events("stepped down");
        assert!(
            !(follower_led && stepped.is_empty()),
            "the follower led while the leader still held its term:\n{}",
            leader.log_text()
        );
        stepped.into_iter().next()
    });
    assert_eq!(stepped["reason"], "pause", "{stepped}");
    let said = leader.wait_events(
        "the wall clock jumped ahead of the boot clock: time passed that this host did not count (a VM frozen, migrated or restored); the term counts it",
        1,
        LEASE,
    );
    let unseen_ms = said[0]["unseen_ms"].as_u64().expect("the pause's length");
    assert!(
        (4_500..=5_500).contains(&unseen_ms),
        "unseen {unseen_ms} ms"
    );
    // Someone leads again.
    wait_for("a leader again", 5 * LEASE, || {
        (follower.leader()["is_leader"] == true || leader.leader()["is_leader"] == true)
            .then_some(())
    });
}

/// TTL 15 s, renew deadline 10 s, retry 1 s: a freeze of a few seconds fits within the
/// deadlines.
const LONG_TERM: [&str; 7] = [
    "--lease-duration",
    "15s",
    "--renew-deadline",
    "10s",
    "--retry-period",
    "1s",
    "--no-data-loss-cooldown",
];

/// A leader on `host` (whose Redis shares its clocks) once two renewals bounded Redis's clock
/// rate.
fn leading_on(host: &FrozenHost, redis: &RedisServer, name: &str) -> Replica {
    let lease = unique_lease(name);
    let leader =
        Replica::spawn_with_env(&redis.url(), &lease, "leader", &LONG_TERM, &[], &host.env());
    leader.wait_events("renewed", 2, Duration::from_secs(10));
    leader
}

/// A freeze of 5 s, within both deadlines of a 15 s term: Redis's clock advanced 5 s more than
/// the leader's boot clock between two renewals, which is this host's pause, not a step of
/// Redis's clock. The term counts it and goes on.
#[test]
fn a_freeze_within_the_deadlines_is_not_taken_for_a_step_of_redis_clock() {
    let host = FrozenHost::new();
    let redis = RedisServer::builder().clock_file(&host.offset).start();
    let leader = leading_on(&host, &redis, "unseen-short");
    let redis_now = || {
        let time: Vec<u64> = redis.cmd(&["TIME"]);
        Duration::from_secs(time[0]) + Duration::from_micros(time[1])
    };
    let (before, started) = (redis_now(), Instant::now());
    host.jump(5);
    // The premise: Redis's clock jumped with the host's, so a renewal that took the jump for a
    // step of Redis's clock would end the term (the bound leaves room for the replies' latency).
    let gained = redis_now().saturating_sub(before + started.elapsed());
    assert!(
        gained >= Duration::from_secs(4),
        "Redis's clock gained {gained:?}"
    );
    leader.wait_events("renewed", 5, Duration::from_secs(10));
    assert!(
        leader.events("stepped down").is_empty(),
        "{:?}",
        leader.events("stepped down")
    );
}

/// A freeze of 10 s passes the renew deadline (10 s) only counting time the boot clock did not
/// count, and not the validity: the term ends, as a pause.
#[test]
fn a_renew_deadline_passed_only_by_a_freeze_ends_the_term_as_a_pause() {
    let host = FrozenHost::new();
    let redis = RedisServer::builder().clock_file(&host.offset).start();
    let leader = leading_on(&host, &redis, "unseen-renew-deadline");
    host.jump(10);
    let stepped = leader.wait_events("stepped down", 1, Duration::from_secs(5));
    assert_eq!(stepped[0]["reason"], "pause", "{stepped:?}");
    let detail = stepped[0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("renew deadline"), "{detail}");
}

#[test]
fn a_guard_asked_after_a_freeze_the_boot_clock_did_not_count_refuses() {
    let host = FrozenHost::new();
    let guard = host.dir.path().join("guard");
    let guard_path = guard.to_str().expect("a UTF-8 path");
    let redis = RedisServer::builder().clock_file(&host.offset).start();
    let lease = unique_lease("unseen-guard");
    let frozen_host = host.env();
    let mut args = TIMING.to_vec();
    args.extend(["--guard-file", guard_path]);
    let leader = Replica::spawn_with_env(&redis.url(), &lease, "leader", &args, &[], &frozen_host);
    wait_for("the leader to lead", 5 * LEASE, || {
        leader.is_ready().then_some(())
    });
    leader.wait_events("renewed", 3, 5 * LEASE);
    let ask = || run_to_end(&["guard", "-v", "--guard-file", guard_path], &frozen_host);
    assert_eq!(ask().0, 0, "valid before the freeze: {}", ask().2);

    // The whole host freezes for 5 s, which its boot clock does not count: leasehold stops (so
    // nothing rewrites the guard file), and the clocks jump when it resumes.
    leader.signal(Signal::SIGSTOP);
    host.jump(5);
    let (code, _, words) = ask();
    let GuardRecord::Term { valid_until, .. } =
        read_guard_file(&guard).expect("the frozen leader's record")
    else {
        panic!("the frozen leader's record holds its term");
    };
    assert!(
        BootInstant::now() < valid_until,
        "the boot clock alone still finds the term valid"
    );
    assert_eq!(code, 1, "the guard must refuse after the freeze: {words}");
    assert!(words.contains("passed"), "{words}");
    leader.signal(Signal::SIGCONT);
}

/// What the leader shows counts a freeze its boot clock did not: right after a renewal of a real
/// `leasehold run` (TTL 30 s, the next renewal 10 s away), its wall clock gains 35 s. The term is
/// over, and `/readyz` and `/leader` say so at once, not when the watchdog next wakes.
#[test]
fn the_probes_count_a_freeze_the_boot_clock_did_not() {
    let host = FrozenHost::new();
    let redis = RedisServer::start();
    let lease = unique_lease("unseen-probes");
    let mut args = timing_flags(&THIRTY_SECOND_TERM);
    args.push("--no-data-loss-cooldown".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let frozen_host = host.env();
    let leader = Replica::spawn_with_env(&redis.url(), &lease, "leader", &args, &[], &frozen_host);
    leader.wait_events("renewed", 1, Duration::from_secs(20));
    assert!(leader.is_ready(), "ready before the freeze");
    host.jump(35);
    // The watchdog wakes 10 s after the renewal; the probes must not wait for it.
    wait_for("/readyz to refuse", Duration::from_secs(3), || {
        (!leader.is_ready()).then_some(())
    });
    assert_eq!(leader.leader()["is_leader"], false, "{}", leader.leader());
    assert!(
        leader.events("stepped down").is_empty(),
        "the watchdog had already woken: the test shows nothing\n{}",
        leader.log_text()
    );
}

/// The guard file's deadline on the wall clock counts a freeze inside the acquire's round trip:
/// it is the boot clock's deadline under the wall clock's lead read before the acquire was sent,
/// not the lead when the term is published. Over a link whose return leg takes 2 s, the wall
/// clock of a real `leasehold run` gains 5 s unseen by its boot clock while the acquire's reply is
/// on its way; the term it begins (TTL 30 s) stays valid, 5 s shorter than its boot clock says.
#[test]
fn the_guard_files_wall_deadline_counts_a_freeze_inside_the_acquires_round_trip() {
    let host = FrozenHost::new();
    let guard = host.dir.path().join("guard");
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    proxy.set(Fault::DelayReplies(Duration::from_secs(2)));
    let lease = unique_lease("unseen-in-acquire-guard");
    // No renewal within the test (the first is 10 s in): the record read is the term's first.
    let mut args = timing_flags(&THIRTY_SECOND_TERM);
    args.extend(["--no-data-loss-cooldown", "--guard-file"].map(String::from));
    args.push(guard.to_str().expect("a UTF-8 path").to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let frozen_host = host.env();
    let leader = Replica::spawn_with_env(&proxy.url(), &lease, "leader", &args, &[], &frozen_host);
    let key = format!("leasehold:{{{lease}}}");
    wait_for(
        "the acquire to run on Redis",
        Duration::from_secs(20),
        || (redis.cmd::<i64>(&["EXISTS", &key]) == 1).then_some(()),
    );
    // The wall clock's lead over the boot clock before the freeze: this process's, whose
    // clocks libfaketime leaves alone.
    let lead_before = WallLead::now().as_nanos();
    assert!(
        leader.events("became leader").is_empty(),
        "the term began before the freeze: the test shows nothing"
    );
    host.jump(5);
    leader.wait_events("became leader", 1, Duration::from_secs(10));
    let Ok(GuardRecord::Term {
        valid_until,
        wall_until,
        ..
    }) = read_guard_file(&guard)
    else {
        panic!("the guard file holds the term:\n{}", leader.log_text());
    };
    assert!(
        leader.events("renewed").is_empty(),
        "the record is the term's first"
    );
    let boot = i64::try_from(valid_until.as_nanos()).expect("a boot instant in range");
    let written_lead = i64::try_from(wall_until).expect("a wall instant in range") - boot;
    let late_ms = (written_lead - lead_before) / 1_000_000;
    assert!(
        late_ms.abs() < 1_000,
        "the wall deadline is {late_ms} ms past the deadline counting the freeze"
    );
}

/// A freeze inside the acquire's round trip counts too: the wall clock's lead a term starts from
/// is read before the acquire is sent, not after its reply. In this process, over a link whose
/// return leg takes 500 ms, the wall clock gains 20 s unseen by the boot clock while the
/// acquire's reply is on its way: the term that reply begins has outlived its 15 s lease, and
/// ends as a pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_inside_the_acquires_round_trip_ends_the_term_it_won_as_a_pause() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    proxy.set(Fault::DelayReplies(Duration::from_millis(500)));
    let clock = ShiftedClock::new();
    let name = unique_lease("freeze-in-acquire");
    let lease = lease_on_clock(&proxy.url(), &name, "a", &clock);
    let a = Contender::spawn(lease, FIFTEEN_SECOND_TERM, idle);
    let key = format!("leasehold:{{{name}}}");
    eventually(
        "the acquire to run on Redis",
        Duration::from_secs(10),
        || async { (redis.cmd::<i64>(&["EXISTS", &key]) == 1).then_some(()) },
    )
    .await;
    clock.pass_unseen(Duration::from_secs(20));
    let mut status = a.status.clone();
    let step = until_stepped_down("the term to end", &mut status, Duration::from_secs(10)).await;
    assert_eq!(step.reason, StepDownReason::Pause);
    a.shutdown().await;
}

/// After a pause the boot clock did not count, the work of the term it ended is not awaited
/// until the deadline on the boot clock alone: that deadline, counting the pause, has passed, and
/// the work gets its last turn, then is aborted, while another replica may already lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_of_a_term_a_pause_ended_is_not_awaited_past_its_deadline() {
    let redis = RedisServer::start();
    let clock = ShiftedClock::new();
    let lease = lease_on_clock(&redis.url(), &unique_lease("pause-work"), "a", &clock);
    // Work that does not stop when told: only an abort ends it, which its guard says.
    struct Aborted(tokio::sync::mpsc::UnboundedSender<()>);
    impl Drop for Aborted {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let (aborted, mut gone) = tokio::sync::mpsc::unbounded_channel();
    let a = Contender::spawn(lease, FIFTEEN_SECOND_TERM, move |_: Leadership| {
        let guard = Aborted(aborted.clone());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(())
        }
    });
    let mut status = a.status.clone();
    until("a to lead", &mut status, Duration::from_secs(10), |s| {
        matches!(s.role, Role::Leader { .. })
    })
    .await;
    clock.pass_unseen(Duration::from_secs(20));
    // The watchdog sees the pause at its next wake (a retry period at most).
    until_stepped_down("a to step down", &mut status, Duration::from_secs(10)).await;
    let stepped_down = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(15), gone.recv())
        .await
        .expect("the work is aborted within the lease");
    let took = stepped_down.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the work was aborted {took:?} after the step-down, past its deadline"
    );
    a.shutdown().await;
}
