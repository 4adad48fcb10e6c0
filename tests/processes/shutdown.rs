//! How the `leasehold` binary shuts down, as real processes against a real redis-server: on
//! SIGTERM or SIGHUP the leader steps down, releases and exits 0, and its follower leads long
//! before the TTL; a second SIGTERM exits at once and takes a command that ignores the first
//! with it.

use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{RELEASE_ONLY, Replica};
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

use crate::binary::{lines, process_alive, the_leader};

#[test]
fn sigterm_steps_down_releases_and_exits_zero() {
    signal_steps_down_releases_and_exits_zero(Signal::SIGTERM);
}

/// A hang-up (a closed terminal, a supervisor hanging up) is a shutdown like SIGTERM: without a
/// handler its default action killed leasehold without a release, and the successor waited out
/// the TTL.
#[test]
fn sighup_steps_down_releases_and_exits_zero_like_sigterm() {
    signal_steps_down_releases_and_exits_zero(Signal::SIGHUP);
}

/// Every other signal whose default action ends a process (but for its own faults, and SIGKILL)
/// is a shutdown too: SIGQUIT (Ctrl-\\), SIGUSR1 and SIGALRM killed leasehold without a release,
/// and the command's children ran on beside the next leader's command.
#[test]
fn every_signal_that_would_end_leasehold_is_a_shutdown_like_sigterm() {
    for signal in [
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGALRM,
        Signal::SIGVTALRM,
        Signal::SIGPROF,
        Signal::SIGIO,
        Signal::SIGPWR,
        Signal::SIGXCPU,
        Signal::SIGXFSZ,
    ] {
        signal_steps_down_releases_and_exits_zero(signal);
    }
}

/// docs/REFERENCE.md's Shutdown section names every signal that starts the drain.
#[test]
fn the_reference_names_every_signal_that_drains() {
    let doc = std::fs::read_to_string(harness::repo().join("docs/REFERENCE.md")).unwrap();
    let section = doc
        .split("### Shutdown")
        .nth(1)
        .and_then(|s| s.split("\n## ").next());
    let section = section.expect("a Shutdown section");
    for signal in leasehold::shutdown::DRAIN {
        assert!(
            section.contains(signal.as_str()),
            "{signal} is not in Shutdown"
        );
    }
}

/// `signal` to the leader: it steps down, releases, exits 0, and the follower leads long
/// before the TTL (10 s) could have run out.
fn signal_steps_down_releases_and_exits_zero(signal: Signal) {
    let redis = RedisServer::start();
    let lease = unique_lease(&signal.as_str().to_ascii_lowercase());
    // A long TTL: the follower can only take over this fast if the lease was released.
    let args = RELEASE_ONLY;
    let mut replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .map(|n| Replica::spawn(&redis.url(), &lease, n, &args, &[]))
        .collect();
    let first = wait_for("a leader", Duration::from_secs(10), || {
        the_leader(&replicas)
    });
    let other = 1 - first;
    wait_for("the follower to see it", Duration::from_secs(5), || {
        (replicas[other].leader()["leader"] == replicas[first].identity.as_str()).then_some(())
    });
    replicas[first].signal(signal);
    let sent = Instant::now();
    assert_eq!(replicas[first].wait_exit(Duration::from_secs(5)), 0);
    wait_for("the follower to lead", Duration::from_secs(3), || {
        replicas[other].is_ready().then_some(())
    });
    let took = sent.elapsed();
    eprintln!("{signal} → follower ready: {took:?} (TTL 10 s)");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let shutting = replicas[first].events("shutting down: stepping down and releasing the lease");
    assert_eq!(shutting.len(), 1);
    assert_eq!(shutting[0]["signal"], signal.as_str());
    let steps = replicas[first].events("stepped down");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0]["reason"], "shutdown");
    assert_eq!(replicas[first].events("released the lease").len(), 1);
}

/// A command that ignores SIGTERM: only SIGKILL stops it.
const STUBBORN: &str =
    r#"trap '' TERM; echo "start $$" >> "$OUT"; while true; do sleep 0.02; done"#;

#[test]
fn a_second_sigterm_exits_at_once_and_takes_the_command_with_it() {
    let redis = RedisServer::start();
    let lease = unique_lease("second-signal");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("record");
    let out_env = out.to_str().unwrap().to_owned();
    let guard = dir.path().join("guard");
    // A drain would last the whole grace period: the command ignores SIGTERM, and the
    // validity deadline (about a minute) comes later still.
    let args = [
        "--guard-file",
        guard.to_str().unwrap(),
        "--lease-duration",
        "60s",
        "--renew-deadline",
        "40s",
        "--retry-period",
        "2s",
        "--grace-period",
        "30s",
        "--no-data-loss-cooldown",
    ];
    let mut a = Replica::spawn_with_env(
        &redis.url(),
        &lease,
        "a",
        &args,
        &["sh", "-c", STUBBORN],
        &[("OUT", out_env.as_str())],
    );
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let start = wait_for("the command", Duration::from_secs(5), || {
        lines(&out).first().cloned()
    });
    let child: i32 = start.split(' ').nth(1).unwrap().parse().unwrap();

    a.signal(Signal::SIGTERM);
    let first = Instant::now();
    a.wait_events("stopping the command", 1, Duration::from_secs(5));
    assert!(process_alive(child), "the command ignores SIGTERM");

    // A person's second signal, later than one sent twice at once (which is one shutdown).
    std::thread::sleep(Duration::from_millis(300).saturating_sub(first.elapsed()));
    a.signal(Signal::SIGTERM);
    let sent = Instant::now();
    assert_eq!(
        a.wait_exit(Duration::from_secs(5)),
        128 + 15,
        "128 + SIGTERM"
    );
    wait_for("the command to be gone", Duration::from_secs(2), || {
        (!process_alive(child)).then_some(())
    });
    eprintln!(
        "second SIGTERM → exit, command gone: {:?} (grace 30 s)",
        sent.elapsed()
    );
    assert_eq!(
        a.events("second signal: exiting at once, without waiting for the lease's release")
            .len(),
        1
    );
    for left in [guard.clone(), dir.path().join(".guard.lock")] {
        assert!(!left.exists(), "{} is left", left.display());
    }
}

/// A stopped command (SIGSTOP, or a tty's SIGTTIN) runs its SIGTERM handler when leasehold stops
/// it: a SIGCONT follows the SIGTERM, as the init systems do. Without it the signal waited
/// for a SIGCONT that never came, and the command was SIGKILLed after the whole grace period,
/// its cleanup never run.
#[test]
fn a_stopped_command_is_continued_so_that_it_can_clean_up() {
    let redis = RedisServer::start();
    let (mut a, out) = leading_with_a_cleanup(&redis, "stopped-command", "");
    let child: i32 = lines(&out.path)[0]
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child), Signal::SIGSTOP).unwrap();
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0, "{}", a.log_text());
    out.assert_cleanup_ran();
}

/// A command's record: it writes `start <pid>` when it starts, and `cleanup ran` on SIGTERM.
struct Record {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Record {
    fn assert_cleanup_ran(&self) {
        let lines = lines(&self.path);
        assert!(lines.iter().any(|l| l == "cleanup ran"), "{lines:?}");
    }
}

/// A leader (grace period 20 s) whose command, on SIGTERM, runs `before` and then writes
/// `cleanup ran` to its record; returned once the command started.
fn leading_with_a_cleanup(redis: &RedisServer, name: &str, before: &str) -> (Replica, Record) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("record");
    let out_env = path.to_str().unwrap().to_owned();
    let script = format!(
        r#"trap '{before} echo "cleanup ran" >> "$OUT"; exit 0' TERM; echo "start $$" >> "$OUT"; while true; do sleep 0.02; done"#
    );
    let a = Replica::spawn_with_env(
        &redis.url(),
        &unique_lease(name),
        "a",
        &["--grace-period", "20s", "--no-data-loss-cooldown"],
        &["sh", "-c", &script],
        &[("OUT", out_env.as_str())],
    );
    wait_for("the command", Duration::from_secs(10), || {
        lines(&path).first().cloned()
    });
    (a, Record { _dir: dir, path })
}

/// One signal sent twice at once is one shutdown: GNU `timeout` sends its signal to the process
/// and again to its process group, microseconds apart. Taken as a second signal, it killed the
/// command without its SIGTERM and left the lease to expire.
#[test]
fn a_signal_sent_twice_at_once_is_one_shutdown() {
    let redis = RedisServer::start();
    let (mut a, out) = leading_with_a_cleanup(&redis, "twice-at-once", "sleep 0.3;");
    a.signal(Signal::SIGTERM);
    // Delivered apart: a signal sent while the first is still pending would merge with it.
    std::thread::sleep(Duration::from_millis(5));
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0, "{}", a.log_text());
    out.assert_cleanup_ran();
    assert_eq!(
        a.events("shutting down: stepping down and releasing the lease")
            .len(),
        1
    );
    assert_eq!(a.events("released the lease").len(), 1);
}

/// SIGTTIN and SIGTTOU (a background leasehold reading or writing its terminal) do not stop it
/// either: stopped, it let its command run on past the lease, as with SIGTSTP. The command does
/// not inherit leasehold's ignoring them.
#[test]
fn sigttin_and_sigttou_do_not_stop_the_leader() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("record");
    let out_env = out.to_str().unwrap().to_owned();
    let mut a = Replica::spawn_with_env(
        &redis.url(),
        &unique_lease("ttin-ttou"),
        "a",
        &["--no-data-loss-cooldown"],
        &[
            "sh",
            "-c",
            r#"grep SigIgn /proc/$$/status >> "$OUT"; exec sleep 60"#,
        ],
        &[("OUT", out_env.as_str())],
    );
    let ignored = wait_for(
        "the command's ignored signals",
        Duration::from_secs(10),
        || lines(&out).first().cloned(),
    );
    let mask = u64::from_str_radix(ignored.split_whitespace().nth(1).unwrap(), 16).unwrap();
    for signal in [Signal::SIGTTIN, Signal::SIGTTOU] {
        assert_eq!(
            mask & (1 << (signal as u64 - 1)),
            0,
            "{signal} ignored: {ignored}"
        );
    }
    for signal in [Signal::SIGTTIN, Signal::SIGTTOU] {
        a.signal(signal);
        let renewed = a.events("renewed").len();
        wait_for(
            &format!("a renewal after {signal}"),
            Duration::from_secs(10),
            || (a.events("renewed").len() > renewed).then_some(()),
        );
    }
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0);
}

/// Ctrl-Z (SIGTSTP) does not stop leasehold: its command runs in its own process group, so it
/// went on running past the lease while leasehold, stopped, renewed nothing.
#[test]
fn sigtstp_is_ignored_and_the_leader_keeps_renewing() {
    let redis = RedisServer::start();
    let mut a = Replica::spawn(
        &redis.url(),
        &unique_lease("tstp"),
        "a",
        &["--no-data-loss-cooldown"],
        &[],
    );
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    a.signal(Signal::SIGTSTP);
    a.wait_events(
        "ignored SIGTSTP: stopped alone, leasehold would let its command run on past the lease; stop it with SIGTERM or SIGINT",
        1,
        Duration::from_secs(5),
    );
    let renewed = a.events("renewed").len();
    wait_for("a renewal after SIGTSTP", Duration::from_secs(10), || {
        (a.events("renewed").len() > renewed).then_some(())
    });
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0);
}
