//! The guard file on a filesystem that is full (a `/dev/shm` that another program filled): the
//! leader cannot publish its term, and its command's checks refuse for as long as it leads. It
//! steps down and sits out (`guard_file`), saying so once, so that a healthy replica leads; once
//! the file can be written again it contends as before.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::Replica;
use testbed::full_dir::FullDir;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

use crate::binary::fast;

/// A command that runs until it is stopped.
const COMMAND: [&str; 3] = ["sh", "-c", "while :; do sleep 0.05; done"];

const WARNING: &str = "could not publish the term in the guard file";

#[test]
fn a_leader_that_cannot_write_its_guard_file_steps_down_for_a_healthy_replica() {
    let redis = RedisServer::start();
    let lease = unique_lease("full-guard");
    let full = FullDir::mount();
    let guard = full.path().join("a.guard");
    let guard = guard.to_str().expect("a UTF-8 path");
    let mut args = fast();
    args.extend(["--guard-file", guard]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &COMMAND);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let b = Replica::spawn(&redis.url(), &lease, "b", &fast(), &COMMAND);

    full.fill();
    let stepped = a.wait_events("stepped down", 1, Duration::from_secs(10));
    assert_eq!(stepped[0]["reason"], "guard_file", "{}", a.log_text());
    wait_for("b to lead", Duration::from_secs(10), || {
        b.is_ready().then_some(())
    });
    // Said once, not at every renewal or try while it sits out: a few of b's renewals later.
    let renewed = |r: &Replica| {
        r.metric("leasehold_renewals_total{result=\"renewed\"}")
            .unwrap_or(0.0)
    };
    let from = renewed(&b);
    wait_for("b to renew five times", Duration::from_secs(10), || {
        (renewed(&b) >= from + 5.0).then_some(())
    });
    let warned = a
        .logs()
        .into_iter()
        .filter(|l| {
            l["level"] == "WARN"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(WARNING))
        })
        .count();
    assert_eq!(warned, 1, "{}", a.log_text());

    // Room again: a leads once b is gone, and its command's guard passes.
    full.free();
    b.signal(nix::sys::signal::Signal::SIGTERM);
    wait_for("a to lead again", Duration::from_secs(20), || {
        a.is_ready().then_some(())
    });
    let (code, _, stderr) =
        harness::replica::run_to_end(&["guard", "--guard-file", guard, "--lease", &lease], &[]);
    assert_eq!(code, 0, "{stderr}\n{}", a.log_text());
}
