//! `leasehold lock` and the data-loss cooldown: a cooldown is no holder, only Redis's state (a
//! new lease name, a Redis that lost its data), so a lock waits it out whatever its `--wait`,
//! and runs its command after it. At `--wait 0s` the first run of every new CronJob exited 75.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, run_to_end};
use leasehold::cmd::lock::NOT_ACQUIRED;
use testbed::RedisServer;

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
