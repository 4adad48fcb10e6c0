//! `leasehold lock -- CMD`, the one-shot lock, as a real process against a real redis-server:
//! winning and exiting with the command's code, not acquired in time (exit 75 and the holder
//! named), waiting for a release, and lost while the command runs (exit 76, command stopped).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::contenders::{lease, unique_lease};
use harness::leasehold_bin;
use harness::replica::FAST;
use leasehold::cmd::lock::{LOST, NOT_ACQUIRED};
use leasehold::lease::{Acquired, Grant, RedisLease, minimal_acl_rule};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testbed::Guarded;
use testbed::RedisServer;
use testbed::wait::wait_for;

const TTL: Duration = Duration::from_millis(1500);
pub(crate) const CALL: Duration = Duration::from_secs(2);

/// A running `leasehold lock` with its output collected.
pub(crate) struct Lock {
    pub(crate) process: Guarded,
}

impl Lock {
    pub(crate) fn spawn(url: &str, lease: &str, extra: &[&str], command: &[&str]) -> Self {
        Self::spawn_in(Path::new("."), url, lease, &FAST, extra, command)
    }

    /// [`spawn`](Self::spawn) in the working directory `dir`, with `timing` instead of [`FAST`].
    pub(crate) fn spawn_in(
        dir: &Path,
        url: &str,
        lease: &str,
        timing: &[&str],
        extra: &[&str],
        command: &[&str],
    ) -> Self {
        let mut cmd = Command::new(leasehold_bin());
        cmd.args(["lock", "--redis-url", url, "--lease-name", lease])
            .args(["--kubernetes", "off", "--no-data-loss-cooldown"])
            .args(["--identity", "cron-run", "--log-format", "json"])
            .args(timing)
            .args(extra)
            .arg("--")
            .args(command)
            .current_dir(dir)
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE");
        Self {
            process: Guarded::spawn(cmd, "leasehold lock").expect("spawn leasehold lock"),
        }
    }

    pub(crate) fn wait(&mut self, timeout: Duration) -> i32 {
        match self.process.wait_exit(timeout).expect("poll the exit") {
            Some(code) => code,
            None => panic!(
                "leasehold lock did not exit within {timeout:?}:\n{}",
                self.logs()
            ),
        }
    }

    /// Waits up to `timeout` for the lock to end "not acquired", its command never run (it
    /// prints `ran` when it runs).
    pub(crate) fn not_acquired_within(&mut self, timeout: Duration) {
        assert_eq!(self.wait(timeout), NOT_ACQUIRED, "{}", self.logs());
        let printed = self.stdout();
        assert!(printed.is_empty(), "the command ran: {printed:?}");
    }

    pub(crate) fn stdout(&self) -> Vec<String> {
        self.process.stdout.snapshot()
    }

    pub(crate) fn logs(&self) -> String {
        self.process.stderr.text()
    }

    pub(crate) fn events(&self, message: &str) -> Vec<serde_json::Value> {
        self.process
            .stderr
            .snapshot()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["message"] == message)
            .collect()
    }
}

pub(crate) async fn hold(lease: &RedisLease, ttl: Duration) -> Grant {
    match lease.acquire(ttl, CALL).await.unwrap() {
        Acquired::Leader(grant) => grant,
        other => panic!("the test's holder did not lead: {other:?}"),
    }
}

/// A relative `--guard-file` reaches the command as an absolute path: given as typed, the
/// command's `leasehold guard` refused a valid term once it changed directory.
#[test]
fn a_relative_guard_file_is_named_to_the_command_by_its_absolute_path() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let check = r#"echo "$LEASEHOLD_GUARD_FILE"; cd / && "$0" guard"#;
    let mut lock = Lock::spawn_in(
        dir.path(),
        &redis.url(),
        &unique_lease("relative-guard"),
        &FAST,
        &["--guard-file", "relative.guard"],
        &["sh", "-c", check, leasehold_bin()],
    );
    assert_eq!(lock.wait(Duration::from_secs(10)), 0, "{}", lock.logs());
    let named = dir.path().join("relative.guard");
    assert_eq!(lock.stdout(), [named.to_str().unwrap()], "{}", lock.logs());
}

/// A release Redis refuses (an ACL without `+del`) leaves the lease to expire: the lock's last
/// line says so. It said "lock released" right after the warning that it could not release.
#[test]
fn a_lock_whose_release_is_refused_does_not_say_it_released() {
    let redis = RedisServer::start();
    let rule = minimal_acl_rule("leasehold:", false).replace(" +del", "");
    redis.set_acl_user("nodel", &rule, "nodel-pw");
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "nodel-pw\n").unwrap();
    let user = ["--redis-username", "nodel", "--redis-password-file"];
    let mut extra = user.to_vec();
    extra.push(password.to_str().unwrap());
    let lease = unique_lease("lock-unreleased");
    let mut lock = Lock::spawn(&redis.url(), &lease, &extra, &["echo", "ran"]);
    assert_eq!(lock.wait(Duration::from_secs(10)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), ["ran"], "{}", lock.logs());
    let claimed = lock.events("lock released; exiting with the command's exit code");
    assert!(claimed.is_empty(), "{}", lock.logs());
    let said = lock.events("lock not released (the lease expires on its own); exiting with the command's exit code, or 128 + the number of the signal that stopped leasehold");
    assert_eq!(said.len(), 1, "{}", lock.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_runs_the_command_once_with_its_token_and_exits_with_its_code() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-wins");
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &[],
        &["sh", "-c", "echo token=$LEASEHOLD_FENCING_TOKEN; exit 7"],
    );
    assert_eq!(lock.wait(Duration::from_secs(10)), 7, "{}", lock.logs());
    let printed = lock.stdout();
    let token: u64 = printed
        .iter()
        .find_map(|l| l.strip_prefix("token="))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no token printed: {printed:?}"));
    // Released at the end: the lease is free, and its last token was the command's.
    let seen = lease(&redis.url(), &name, "observer", false)
        .observe(CALL)
        .await
        .unwrap();
    assert!(seen.holder.is_none(), "{seen:?}");
    assert_eq!(seen.token.map(|t| t.0), Some(token));
    assert_eq!(
        printed.iter().filter(|l| l.starts_with("token=")).count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_held_by_another_exits_75_naming_the_holder_without_running_the_command() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-held");
    let other = lease(&redis.url(), &name, "cron-other", false);
    let grant = hold(&other, TTL).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let script = format!("touch {}", ran.display());
    let started = Instant::now();
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &["--wait", "300ms"],
        &["sh", "-c", &script],
    );
    assert_eq!(
        lock.wait(Duration::from_secs(10)),
        NOT_ACQUIRED,
        "{}",
        lock.logs()
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!ran.exists(), "the command ran without the lock");
    let said = lock.events("lock not acquired within --wait");
    assert_eq!(said.len(), 1, "{}", lock.logs());
    assert_eq!(said[0]["holder"], "cron-other");
    assert_eq!(said[0]["token"], grant.token.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_with_a_wait_takes_the_lease_once_the_holder_releases_it() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-waits");
    let other = lease(&redis.url(), &name, "cron-other", false);
    // Held for 30 s: only the release, not the lease running out, can end the 10 s wait well.
    let grant = hold(&other, Duration::from_secs(30)).await;
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &["--wait", "10s"],
        &["sh", "-c", "echo ran"],
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    other.release(grant.token, CALL).await.unwrap();
    assert_eq!(lock.wait(Duration::from_secs(10)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), vec!["ran".to_owned()]);
}

/// A signal ends a lock with 128 + its number, as a shell reports it, also while it waits:
/// not 75, which tells a CronJob's wrapper to try again later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_ends_a_lock_with_its_own_exit_code() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-signalled");
    let other = lease(&redis.url(), &name, "cron-other", false);
    hold(&other, Duration::from_secs(30)).await;
    let extra = ["--wait", "30s"];
    let mut waiting = Lock::spawn(&redis.url(), &name, &extra, &["sh", "-c", "echo ran"]);
    wait_for(
        "the lock to see the holder",
        Duration::from_secs(10),
        || (!waiting.events("following leader").is_empty()).then_some(()),
    );
    waiting.process.signal(Signal::SIGINT).unwrap();
    assert_eq!(
        waiting.wait(Duration::from_secs(10)),
        130,
        "{}",
        waiting.logs()
    );
    let said = waiting.events("lock stopped by a signal before it was acquired");
    assert_eq!(said.len(), 1, "{}", waiting.logs());
    assert!(waiting.events("lock not acquired within --wait").is_empty());
    // While the command runs: the command is stopped, and the signal's code is leasehold's.
    let name = unique_lease("lock-hung-up");
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let script = format!("touch {}; exec sleep 60", started.display());
    let mut running = Lock::spawn(&redis.url(), &name, &[], &["sh", "-c", &script]);
    wait_for("the command to start", Duration::from_secs(10), || {
        started.exists().then_some(())
    });
    running.process.signal(Signal::SIGHUP).unwrap();
    assert_eq!(
        running.wait(Duration::from_secs(10)),
        129,
        "{}",
        running.logs()
    );
    let said = running.events(
        "lock released; exiting with 128 + the number of the signal that stopped leasehold",
    );
    assert_eq!(said.len(), 1, "{}", running.logs());
    assert_eq!(said[0]["code"], 129);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_lost_while_the_command_runs_stops_it_and_exits_76() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-lost");
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let mut lock = Lock::spawn(&redis.url(), &name, &[], &["sh", "-c", &script]);
    let pid: i32 = wait_for("the command's pid", Duration::from_secs(10), || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    });
    // Somebody else's value in the lease: the next renewal finds it not ours.
    let key = lease(&redis.url(), &name, "observer", false)
        .keys()
        .lease
        .clone();
    redis.cmd::<()>(&["SET", &key, "intruder-1#1", "PX", "60000"]);
    let started = Instant::now();
    assert_eq!(lock.wait(Duration::from_secs(10)), LOST, "{}", lock.logs());
    eprintln!("lost → leasehold lock exited after {:?}", started.elapsed());
    assert!(
        kill(Pid::from_raw(pid), None).is_err(),
        "the command (pid {pid}) still runs after the lock was lost"
    );
    let stepped = lock.events("stepped down");
    assert_eq!(stepped.last().expect("a step-down")["reason"], "lost");
    assert_eq!(
        lock.events("lock lost while the command ran; the command was stopped")
            .len(),
        1
    );
}

/// A command that ended on its own with 0 did its work: a term lost while leasehold stops what
/// it left running (a child that ignores SIGTERM, for the grace period) is cleanup's, and the
/// lock exits 0. It exited 76, "lost, the command was stopped", and a Job ran the work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_while_the_commands_leftovers_stop_exits_with_the_commands_code() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-leftovers");
    let script = "sh -c 'trap \"\" TERM; sleep 30' & sleep 0.2; echo done; exit 0";
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &["--grace-period", "4s"],
        &["sh", "-c", script],
    );
    wait_for("the leftover's stop", Duration::from_secs(10), || {
        (!lock
            .events("stopping what the command left running")
            .is_empty())
        .then_some(())
    });
    let key = lease(&redis.url(), &name, "observer", false)
        .keys()
        .lease
        .clone();
    redis.cmd::<()>(&["SET", &key, "intruder-1#1", "PX", "60000"]);
    assert_eq!(lock.wait(Duration::from_secs(15)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), ["done"]);
}

/// The shell line of a lock of `inner` inside the outer lock's command: `env` before it, `args`
/// after `lock`, and `command` after `--`.
fn inner_lock(redis: &RedisServer, inner: &str, env: &str, args: &str, command: &str) -> String {
    format!(
        "{env} {} lock {args} --redis-url {} --lease-name {inner} --kubernetes off \
         --no-data-loss-cooldown -- {command}",
        leasehold_bin(),
        redis.url()
    )
}

/// A lock taken inside another leasehold's command claims a guard file of its own: the
/// `LEASEHOLD_GUARD_FILE` it inherits names its parent's, which it took for its own
/// `--guard-file` and was refused (exit 2, "another live leasehold writes this file").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_inside_a_lock_takes_its_own_guard_file() {
    let redis = RedisServer::start();
    let (outer, inner) = (unique_lease("lock-outer"), unique_lease("lock-inner"));
    let script = inner_lock(
        &redis,
        &inner,
        "",
        "",
        r#"sh -c 'echo inner ran; leasehold_guard=$LEASEHOLD_GUARD_FILE; [ "$leasehold_guard" != "$0" ] && echo own file' "$LEASEHOLD_GUARD_FILE""#,
    );
    let mut lock = Lock::spawn(&redis.url(), &outer, &[], &["sh", "-c", &script]);
    assert_eq!(lock.wait(Duration::from_secs(20)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), ["inner ran", "own file"], "{}", lock.logs());
}

/// A config file in `dir` whose `guard-file` is `dir/name`: the guard file and the config file.
fn config_naming_a_guard_file(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let guard = dir.join(name);
    let config = dir.join("leasehold.yaml");
    std::fs::write(&config, format!("guard-file: {}\n", guard.display())).unwrap();
    (guard, config)
}

/// So does one that inherits a config file whose `guard-file` names its parent's file; but a
/// config file's guard file of its own is still the nested lock's: only the parent's is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_inside_a_lock_leaves_only_its_parents_guard_file_that_a_config_file_names() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    // The parent's guard file, in a config file the nested lock inherits through the environment.
    let (guard, config) = config_naming_a_guard_file(dir.path(), "guard");
    let (outer, inner) = (unique_lease("conf-outer"), unique_lease("conf-inner"));
    let env = format!("LEASEHOLD_CONFIG={}", config.display());
    let script = inner_lock(&redis, &inner, &env, "", "echo inner ran");
    let path = guard.display().to_string();
    let mut lock = Lock::spawn(
        &redis.url(),
        &outer,
        &["--guard-file", &path],
        &["sh", "-c", &script],
    );
    assert_eq!(lock.wait(Duration::from_secs(20)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), ["inner ran"], "{}", lock.logs());

    // A guard file of the nested lock's own, in the config file it is given.
    let (own, config) = config_naming_a_guard_file(dir.path(), "inner-guard");
    let (outer, inner) = (unique_lease("own-outer"), unique_lease("own-inner"));
    let args = format!("--config {}", config.display());
    let script = inner_lock(
        &redis,
        &inner,
        "",
        &args,
        "sh -c 'echo $LEASEHOLD_GUARD_FILE'",
    );
    let mut lock = Lock::spawn(&redis.url(), &outer, &[], &["sh", "-c", &script]);
    assert_eq!(lock.wait(Duration::from_secs(20)), 0, "{}", lock.logs());
    assert_eq!(
        lock.stdout(),
        [own.display().to_string()],
        "{}",
        lock.logs()
    );
}
