//! `leasehold lock` and the data-loss cooldown: a cooldown is no holder, only Redis's state (a
//! new lease name, a Redis that lost its data), so a lock waits it out whatever its `--wait`,
//! and runs its command after it. At `--wait 0s` the first run of every new CronJob exited 75.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, run_to_end};
use leasehold::cmd::lock::NOT_ACQUIRED;
use testbed::{Guarded, RedisServer};

#[test]
fn a_lock_waits_out_a_cooldown_whatever_its_wait() {
    let redis = RedisServer::start();
    let lease = unique_lease("lock-cooldown");
    let url = redis.url();
    let mut argv = vec!["lock", "--redis-url", &url, "--lease-name", &lease];
    argv.extend(["--kubernetes", "off", "--wait", "0s"]);
    argv.extend(FAST);
    argv.extend(["--", "echo", "ran"]);
    let (code, stdout, stderr) = run_to_end(&argv, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "ran", "{stderr}");

    // A holder is still not waited for at --wait 0s: the lock held by another run exits 75.
    let holder = harness::contenders::lease(&url, &lease, "other-run", false);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let held = runtime.block_on(holder.acquire(Duration::from_secs(30), Duration::from_secs(2)));
    assert!(
        matches!(held, Ok(leasehold::lease::Acquired::Leader(_))),
        "{held:?}"
    );
    let (code, stdout, stderr) = run_to_end(&argv, &[]);
    assert_eq!(code, NOT_ACQUIRED, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
}

/// The one try after a cooldown is a `--wait 0s` lock's last: locks that wait out the same
/// cooldown (a new lease name's) try once each as it ends; one runs its command and the others
/// exit 75. They ran one after another while a call bound was left of their wait, each taking
/// the lock its predecessor released.
#[test]
fn locks_that_wait_out_one_cooldown_try_once_after_it_and_one_runs() {
    let redis = RedisServer::start();
    let lease = unique_lease("lock-cooldown-race");
    let url = redis.url();
    let mut runs: Vec<_> = (0..3)
        .map(|i| {
            let mut argv = vec!["lock", "--redis-url", &url, "--lease-name", &lease];
            argv.extend(["--kubernetes", "off", "--wait", "0s"]);
            argv.extend(FAST);
            argv.extend(["--", "sh", "-c", "echo ran; sleep 0.3"]);
            let mut cmd = harness::command::leasehold_command(harness::leasehold_bin());
            cmd.args(argv).arg(format!("--identity=run-{i}"));
            Guarded::spawn(cmd, "leasehold lock").expect("spawn leasehold lock")
        })
        .collect();
    let codes: Vec<_> = runs
        .iter_mut()
        .map(|run| run.wait_exit(Duration::from_secs(20)).ok().flatten())
        .collect();
    let said: String = runs.iter().map(|run| run.stderr.text()).collect();
    let ran = runs
        .iter()
        .filter(|run| run.stdout.snapshot() == ["ran"])
        .count();
    assert_eq!(ran, 1, "{codes:?}\n{said}");
    let mut codes: Vec<_> = codes.into_iter().flatten().collect();
    codes.sort();
    assert_eq!(codes, [0, NOT_ACQUIRED, NOT_ACQUIRED], "{said}");
}
