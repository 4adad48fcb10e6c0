//! The singleton command's supervisor stops every process of the command, by the validity
//! deadline: workers of its process group that ignore SIGTERM, daemons that left the group with
//! `setsid`, after step-down, after the command exited on its own, between restarts and when
//! leasehold exits, with one SIGTERM each; it reaps what is re-parented to it, also as a
//! container's PID 1, and keeps the command's exit code (`exec_suspend.rs`: a simulated
//! suspend).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::leasehold_bin;
use harness::replica::{FAST, Replica};
use nix::sys::signal::Signal;
use testbed::process_tree::{
    PidFile, children_of, is_gone, is_running, stat, wait_pids, zombie_children_of,
};
use testbed::redis_server::RedisServer;
use testbed::wait::first_instant;
use testbed::wait::wait_for;

/// The TTL of `FAST`: after Redis stops answering, the validity deadline is at most this far.
const TTL: Duration = Duration::from_millis(1500);
/// Scheduling slack on a loaded machine, on top of a deadline.
const SLACK: Duration = Duration::from_millis(500);

/// A worker of the command's group that ignores SIGTERM, beside a shell that waits for it.
const GROUP_WORKER: &str =
    r#"echo $$ >> "$PIDS"; (trap "" TERM; exec sleep 300) & echo $! >> "$PIDS"; wait"#;

/// A grandchild that leaves the group and the session (`setsid`) and ignores SIGTERM.
const DAEMON: &str = r#"echo $$ >> "$PIDS"; setsid sh -c 'echo $$ >> "$PIDS"; trap "" TERM; while :; do sleep 0.05; done' & wait"#;

/// The same daemon after a double fork: its parent exits at once, so it is an orphan from
/// the start, while the command runs on.
const DOUBLE_FORK: &str = r#"echo $$ >> "$PIDS"; (setsid sh -c 'echo $$ >> "$PIDS"; trap "" TERM; while :; do sleep 0.05; done' &); while :; do sleep 0.05; done"#;

/// `FAST` timings, no cooldown, and a grace period longer than the TTL: what bounds the
/// SIGKILL after a step-down is the validity deadline.
fn args() -> Vec<&'static str> {
    with_grace("5s")
}

/// `FAST` timings, no cooldown, and `grace` between SIGTERM and SIGKILL. (While the term
/// lasts, as after the command exited on its own, the grace period is what bounds it.)
fn with_grace(grace: &'static str) -> Vec<&'static str> {
    let mut args = FAST.to_vec();
    args.extend(["--no-data-loss-cooldown", "--grace-period", grace]);
    args
}

fn spawn(redis: &RedisServer, test: &str, args: &[&str], script: &str, pids: &PidFile) -> Replica {
    let (key, value) = pids.env();
    let replica = Replica::spawn_with_env(
        &redis.url(),
        &unique_lease(test),
        "a",
        args,
        &["sh", "-c", script],
        &[(key, value.as_str())],
    );
    wait_for("a to lead", Duration::from_secs(10), || {
        replica.is_ready().then_some(())
    });
    replica
}

/// Freezes Redis so that renewals fail: the replica steps down while it keeps running. The
/// validity deadline is at most one TTL after this instant.
fn step_down_by_freezing(redis: &RedisServer, replica: &Replica) -> Instant {
    redis.pause();
    let frozen = Instant::now();
    replica.wait_events("stepped down", 1, Duration::from_secs(5));
    frozen
}

/// Asserts that `pid` is gone (reaped) no later than `deadline` + slack; the time it took
/// from `from`.
fn assert_gone_by(pid: i32, from: Instant, deadline: Duration, what: &str) -> Duration {
    let gone = first_instant(deadline + SLACK + Duration::from_secs(2), || is_gone(pid));
    let took = gone.map(|g| g.saturating_duration_since(from));
    eprintln!("{what} (pid {pid}) gone after {took:?} (deadline {deadline:?})");
    let took = took.unwrap_or_else(|| {
        panic!(
            "{what} (pid {pid}, {:?}) still there {:?} after the deadline",
            stat(pid),
            SLACK + Duration::from_secs(2)
        )
    });
    assert!(
        took <= deadline + SLACK,
        "{what} (pid {pid}) gone only after {took:?}, past the deadline {deadline:?}"
    );
    took
}

/// The supervisor said the command stopped, by itself: the elector did not have to abort it at
/// the validity deadline.
fn assert_the_supervisor_stopped_it(replica: &Replica) {
    replica.wait_events("the command stopped", 1, Duration::from_secs(10));
    let aborted = replica.events(
        "leader work did not stop by the validity deadline; aborting it, and leaving the lease to expire",
    );
    assert!(aborted.is_empty(), "{}", replica.log_text());
}

fn assert_no_zombies_under(replica: &Replica) {
    let pid = replica.pid().as_raw();
    let clean = first_instant(Duration::from_secs(2), || {
        zombie_children_of(pid).is_empty()
    });
    assert!(
        clean.is_some(),
        "zombies left under leasehold: {:?}",
        zombie_children_of(pid)
    );
}

#[test]
fn a_group_worker_that_ignores_sigterm_is_gone_by_the_deadline_after_step_down() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let replica = spawn(&redis, "group-step-down", &args(), GROUP_WORKER, &pids);
    let worker = wait_pids(&pids.path, 2, Duration::from_secs(5))[1];
    assert!(is_running(worker));

    let frozen = step_down_by_freezing(&redis, &replica);
    assert_gone_by(worker, frozen, TTL, "the group worker");
    assert_the_supervisor_stopped_it(&replica);
    assert_no_zombies_under(&replica);
    redis.resume();
}

#[test]
fn a_group_worker_is_gone_when_the_command_exits_on_its_own_and_its_code_is_kept() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let script = r#"(trap "" TERM; exec sleep 300) & echo $! >> "$PIDS"; sleep 0.5; exit 7"#;
    let mut replica = spawn(&redis, "group-exit", &with_grace("1s"), script, &pids);
    let worker = wait_pids(&pids.path, 1, Duration::from_secs(5))[0];
    assert_eq!(replica.wait_exit(Duration::from_secs(10)), 7);
    assert!(
        !is_running(worker),
        "the group worker outlived leasehold: {:?}",
        stat(worker)
    );
    let released = replica.events("released the lease");
    assert_eq!(released.len(), 1, "{}", replica.log_text());
}

/// A step-down that lands while the supervisor stops what an exited command left running
/// (a handover asked meanwhile) still ends the process with the command's code: the command
/// exited while leading. It was started again in a later term instead.
#[test]
fn a_command_that_exited_ends_the_process_even_when_its_term_ends_while_its_leftovers_stop() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let lease = unique_lease("exit-then-step-down");
    let script = r#"(trap "" TERM; exec sleep 300) & echo $! >> "$PIDS"; exit 3"#;
    let (key, value) = pids.env();
    let mut replica = Replica::spawn_with_env(
        &redis.url(),
        &lease,
        "a",
        &with_grace("5s"),
        &["sh", "-c", script],
        &[(key, value.as_str())],
    );
    replica.wait_events(
        "stopping what the command left running",
        1,
        Duration::from_secs(10),
    );
    // The worker ignores SIGTERM: the supervisor waits out the grace period meanwhile.
    let (_, _, stderr) = harness::replica::step_down(&redis.url(), &lease, &["--wait", "1s"]);
    replica.wait_events("stepped down", 1, Duration::from_secs(5));
    assert_eq!(
        replica.wait_exit(Duration::from_secs(15)),
        3,
        "step-down said: {stderr}\n{}",
        replica.log_text()
    );
    let started = replica.events("started the command");
    assert_eq!(started.len(), 1, "{}", replica.log_text());
    // The exit is said as it happens, before its leftovers stop: it was said after the term
    // had ended for another reason, as if it had ended it.
    let log = replica.log_text();
    let at = |message: &str| {
        let message = format!("\"message\":\"{message}\"");
        let at = log.lines().position(|l| l.contains(&message));
        at.unwrap_or_else(|| panic!("no {message}:\n{log}"))
    };
    assert!(
        at("the command exited while leading; stepping down")
            < at("stopping what the command left running"),
        "{log}"
    );
}

#[test]
fn restarts_with_restart_command_leave_no_group_worker_of_an_earlier_run_behind() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let script = r#"(trap "" TERM; exec sleep 300) & echo $! >> "$PIDS"; sleep 0.2; exit 3"#;
    let mut args = with_grace("1s");
    args.push("--restart-command");
    let replica = spawn(&redis, "group-restart", &args, script, &pids);
    let workers = wait_pids(&pids.path, 3, Duration::from_secs(15));
    // Each run started after the previous one's processes were all gone.
    for &worker in &workers[..workers.len() - 1] {
        assert!(
            is_gone(worker),
            "the worker {worker} of an earlier run still there: {:?}",
            stat(worker)
        );
    }
    assert!(replica.is_ready(), "still leading");
}

#[test]
fn a_daemon_that_called_setsid_is_gone_by_the_deadline_after_step_down_and_reaped() {
    a_daemon_is_gone_after_step_down("daemon-step-down", DAEMON);
}

/// The kernel cuts a process's name to 15 bytes, which can split a character: the daemon's
/// name is no UTF-8, and it is still one of the command's processes.
#[test]
fn a_daemon_whose_name_is_no_utf8_is_gone_by_the_deadline_after_step_down() {
    let renamed = DAEMON.replace("sh -c '", r#"sh -c 'printf "daemon\377" > /proc/$$/comm; "#);
    a_daemon_is_gone_after_step_down("daemon-bytes", &renamed);
}

fn a_daemon_is_gone_after_step_down(test: &str, script: &str) {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let replica = spawn(&redis, test, &args(), script, &pids);
    let daemon = wait_pids(&pids.path, 2, Duration::from_secs(5))[1];
    let p = stat(daemon).expect("the daemon runs");
    assert_eq!(
        (p.pgid, p.sid),
        (daemon, daemon),
        "the daemon leads its own group and session"
    );

    let frozen = step_down_by_freezing(&redis, &replica);
    assert_gone_by(daemon, frozen, TTL, "the daemon");
    assert_the_supervisor_stopped_it(&replica);
    assert_no_zombies_under(&replica);
    redis.resume();
}

#[test]
fn a_double_forked_daemon_is_adopted_by_leasehold_and_gone_when_leasehold_is_terminated() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let mut replica = spawn(&redis, "daemon-sigterm", &args(), DOUBLE_FORK, &pids);
    let daemon = wait_pids(&pids.path, 2, Duration::from_secs(5))[1];
    let leasehold = replica.pid().as_raw();
    // Its parent exited at once: as a child subreaper, leasehold is its parent now.
    let adopted = first_instant(Duration::from_secs(2), || {
        stat(daemon).is_some_and(|p| p.ppid == leasehold)
    });
    assert!(
        adopted.is_some(),
        "the orphan went to {:?}, not to leasehold {leasehold}",
        stat(daemon)
    );

    replica.signal(Signal::SIGTERM);
    let terminated = Instant::now();
    assert_eq!(replica.wait_exit(Duration::from_secs(10)), 0);
    eprintln!("SIGTERM → leasehold exited: {:?}", terminated.elapsed());
    assert!(
        !is_running(daemon),
        "the daemon outlived leasehold: {:?}",
        stat(daemon)
    );
}

/// With `--restart-command` the process does not end with the command: a term whose command
/// could not start hands no exit code on to a later shutdown, which exits 0.
#[test]
fn a_command_that_could_not_start_in_an_earlier_term_leaves_shutdown_its_0() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let program = pids.path.with_extension("sh");
    let script = "#!/bin/sh\necho $$ >> \"$PIDS\"\nexec sleep 300\n";
    let write_program = || {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write_program();
    let mut args = with_grace("5s");
    args.push("--restart-command");
    let (key, value) = pids.env();
    let mut replica = Replica::spawn_with_env(
        &redis.url(),
        &unique_lease("restart-code"),
        "a",
        &args,
        &[program.to_str().unwrap()],
        &[(key, value.as_str())],
    );
    let first = wait_pids(&pids.path, 1, Duration::from_secs(10))[0];
    std::fs::remove_file(&program).unwrap();
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(first), Signal::SIGKILL);
    let failed = replica.wait_events("stepped down", 1, Duration::from_secs(10));
    assert_eq!(failed[0]["reason"], "work_failed", "{failed:?}");
    write_program();
    wait_pids(&pids.path, 2, Duration::from_secs(20));
    replica.signal(Signal::SIGTERM);
    assert_eq!(replica.wait_exit(Duration::from_secs(10)), 0);
}

/// Notes its pid in `$PIDS` once it listens, then each SIGTERM it gets in `$PIDS.<argv[1]>`,
/// and exits half a second after the first.
const TERM_COUNTER: &str = r#"import os, signal, sys, time
got = []
def note(*_):
    got.append(1)
    with open(os.environ["PIDS"] + "." + sys.argv[1], "a") as f:
        f.write("term\n")
signal.signal(signal.SIGTERM, note)
with open(os.environ["PIDS"], "a") as f:
    f.write(f"{os.getpid()}\n")
while not got:
    time.sleep(0.01)
time.sleep(0.5)
"#;

/// A second SIGTERM means "now" to many programs (leasehold among them): the command's process
/// in its group and a daemon that left it each get one, then the grace period.
#[test]
fn each_process_of_the_command_gets_one_sigterm() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let counter = pids.path.with_extension("py");
    std::fs::write(&counter, TERM_COUNTER).unwrap();
    let script = format!(
        "setsid python3 {c} daemon & exec python3 {c} command",
        c = counter.display()
    );
    let mut replica = spawn(&redis, "one-sigterm", &with_grace("5s"), &script, &pids);
    wait_pids(&pids.path, 2, Duration::from_secs(5));
    replica.signal(Signal::SIGTERM);
    assert_eq!(replica.wait_exit(Duration::from_secs(10)), 0);
    for name in ["command", "daemon"] {
        let got =
            std::fs::read_to_string(format!("{}.{name}", pids.path.display())).unwrap_or_default();
        assert_eq!(got.lines().count(), 1, "the {name} got {got:?}");
    }
}

#[test]
fn a_command_with_a_daemon_still_hands_its_exit_code_to_leasehold() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let script = r#"setsid sh -c 'echo $$ >> "$PIDS"; trap "" TERM; while :; do sleep 0.05; done' & sleep 0.5; exit 7"#;
    let mut replica = spawn(&redis, "daemon-exit", &with_grace("1s"), script, &pids);
    let daemon = wait_pids(&pids.path, 1, Duration::from_secs(5))[0];
    assert_eq!(replica.wait_exit(Duration::from_secs(10)), 7);
    assert!(
        !is_running(daemon),
        "the daemon outlived leasehold: {:?}",
        stat(daemon)
    );
    let steps = replica.events("stepped down");
    assert_eq!(steps[0]["detail"], "command exited with code 7");
}

/// `leasehold run` as PID 1 of a new PID namespace, as in a container.
/// `leasehold run` of `lease` as the PID 1 of a PID namespace of its own, with `command`.
fn as_pid_one(redis: &RedisServer, lease: &str, command: &[&str]) -> Command {
    let mut unshare = Command::new("unshare");
    unshare
        .args(["--pid", "--fork", "--mount-proc", leasehold_bin(), "run"])
        .args(["--redis-url", &redis.url(), "--lease-name", lease])
        .args(["--kubernetes", "off", "--identity", "pid1"])
        .args(["--http-addr", "127.0.0.1:0"])
        .args(args())
        .arg("--")
        .args(command);
    unshare
}

#[test]
fn leasehold_as_pid_one_reaps_every_orphan_and_keeps_the_exit_code() {
    let redis = RedisServer::start();
    let lease = unique_lease("pid-one");
    // Orphans with and without the command's environment, re-parented to PID 1 and exiting.
    let script =
        r#"for i in 1 2 3 4 5; do (sleep 0.05 &); (env -i sleep 0.05 &); done; sleep 1; exit 7"#;
    let mut unshare = as_pid_one(&redis, &lease, &["sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare");
    let unshare_pid = unshare.id() as i32;
    let leasehold = wait_for("leasehold as PID 1", Duration::from_secs(5), || {
        children_of(unshare_pid).first().map(|p| p.pid)
    });
    let mut seen_zombies = Vec::new();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = unshare.try_wait().expect("try_wait") {
            break status;
        }
        // A zombie may be seen for an instant before it is reaped; one that stays is a leak.
        let zombies = zombie_children_of(leasehold);
        if !zombies.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
            let still: Vec<i32> = zombie_children_of(leasehold)
                .into_iter()
                .filter(|z| zombies.contains(z))
                .collect();
            seen_zombies.extend(still);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "leasehold as PID 1 did not exit"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    if let Some(mut e) = unshare.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    seen_zombies.sort_unstable();
    seen_zombies.dedup();
    assert!(
        seen_zombies.is_empty(),
        "zombies stayed under leasehold as PID 1: {seen_zombies:?}\n{stderr}"
    );
    assert_eq!(status.code(), Some(7), "{stderr}");
}

/// As PID 1 a follower reaps the orphans re-parented to it (a `kubectl exec` session's), also
/// before its first term.
#[test]
fn leasehold_as_pid_one_reaps_orphans_while_it_follows() {
    let redis = RedisServer::start();
    let lease = unique_lease("pid-one-following");
    let holder = Replica::spawn(&redis.url(), &lease, "holder", &args(), &[]);
    wait_for("holder to lead", Duration::from_secs(10), || {
        holder.is_ready().then_some(())
    });
    let mut unshare = as_pid_one(&redis, &lease, &["sleep", "300"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("unshare");
    let leasehold = wait_for("leasehold as PID 1", Duration::from_secs(5), || {
        children_of(unshare.id() as i32).first().map(|p| p.pid)
    });
    // Orphans of a session entered into its namespace note their parent, then exit.
    let dir = tempfile::tempdir().unwrap();
    let parents = dir.path().join("parents");
    let orphan = format!(
        r#"(sh -c 'sleep 0.2; cut -d" " -f4 /proc/$$/stat >> {0}' &); (sh -c 'sleep 0.2; cut -d" " -f4 /proc/$$/stat >> {0}' &)"#,
        parents.display()
    );
    let target = leasehold.to_string();
    let entered = Command::new("nsenter")
        .args(["-t", &target, "-p", "-m", "sh", "-c", &orphan])
        .status()
        .expect("nsenter");
    assert!(entered.success(), "nsenter: {entered}");
    wait_for(
        "the orphans to note PID 1 as their parent",
        Duration::from_secs(5),
        || {
            let noted = std::fs::read_to_string(&parents).unwrap_or_default();
            (noted.lines().filter(|l| *l == "1").count() == 2).then_some(())
        },
    );
    let reaped = first_instant(Duration::from_secs(3), || {
        zombie_children_of(leasehold).is_empty()
    });
    let zombies = zombie_children_of(leasehold);
    assert!(holder.is_ready(), "the premise: holder leads throughout");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(leasehold), Signal::SIGKILL);
    let _ = unshare.wait();
    assert!(
        reaped.is_some(),
        "zombies stayed under a following PID 1: {zombies:?}"
    );
}
