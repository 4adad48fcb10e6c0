//! The guard file on a filesystem that is full (a `/dev/shm` that another program filled): the
//! leader cannot publish its term, and its command's checks refuse for as long as it leads. With
//! a file named by `--guard-file` (the command reads it) it steps down and sits out
//! (`guard_file`), saying so once, so that a healthy replica leads; once the file can be written
//! again it contends as before. The default file may be read by nobody: the leader leads on.

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

/// The warnings of `replica` that begin with [`WARNING`].
fn warnings(replica: &Replica) -> Vec<serde_json::Value> {
    let warned = |l: &serde_json::Value| {
        l["level"] == "WARN"
            && l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(WARNING))
    };
    replica.logs().into_iter().filter(warned).collect()
}

fn renewed(replica: &Replica) -> f64 {
    replica
        .metric("leasehold_renewals_total{result=\"renewed\"}")
        .unwrap_or(0.0)
}

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
    let from = renewed(&b);
    wait_for("b to renew five times", Duration::from_secs(10), || {
        (renewed(&b) >= from + 5.0).then_some(())
    });
    assert_eq!(warnings(&a).len(), 1, "{}", a.log_text());

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

/// The default guard file (here in `$XDG_RUNTIME_DIR`) on a full filesystem: the command may
/// not read it, so the leader leads on, and says so once.
#[test]
fn a_leader_whose_default_guard_file_cannot_be_written_leads_on() {
    let redis = RedisServer::start();
    let lease = unique_lease("full-default-guard");
    let full = FullDir::mount();
    let runtime = full.path().to_str().expect("a UTF-8 path");
    let env = [("XDG_RUNTIME_DIR", runtime)];
    let a = Replica::spawn_with_env(&redis.url(), &lease, "a", &fast(), &COMMAND, &env);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let _b = Replica::spawn(&redis.url(), &lease, "b", &fast(), &COMMAND);
    full.fill();
    wait_for("a to warn", Duration::from_secs(10), || {
        (!warnings(&a).is_empty()).then_some(())
    });
    let from = renewed(&a);
    wait_for(
        "a to renew five times more",
        Duration::from_secs(10),
        || (renewed(&a) >= from + 5.0).then_some(()),
    );
    let warned = warnings(&a);
    assert_eq!(warned.len(), 1, "{}", a.log_text());
    assert_eq!(warned[0]["stepping_down"], false, "{}", a.log_text());
    assert!(a.events("stepped down").is_empty(), "{}", a.log_text());
}
