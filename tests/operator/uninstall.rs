//! What uninstalling leaves in Redis and how `leasehold remove-keys` takes it away, with the
//! real binary and a real redis-server: refused while a term may be valid (a holder, a
//! data-loss cooldown, a value leasehold did not write), unless forced; after the replicas are
//! gone it removes every key of the lease and names each, and no other lease's.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica, lease_status_json, run_to_end};
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// `leasehold remove-keys` for `lease`, with `more` flags: exit code, stdout, stderr.
fn remove_keys(redis: &RedisServer, lease: &str, more: &[&str]) -> (i32, String, String) {
    let url = redis.url();
    let mut args = vec!["remove-keys", "--redis-url", &url, "--lease-name", lease];
    args.extend_from_slice(more);
    run_to_end(&args, &[])
}

/// The keys of `lease` in Redis.
fn keys_of(redis: &RedisServer, lease: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis.cmd(&["KEYS", &format!("leasehold:{{{lease}}}*")]);
    keys.sort();
    keys
}

fn fast() -> Vec<&'static str> {
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    args
}

#[test]
fn remove_keys_refuses_while_a_term_is_valid_then_removes_every_key_and_names_each() {
    let redis = RedisServer::start();
    let lease = unique_lease("uninstall");
    let other = unique_lease("uninstall-other");
    let mut a = Replica::spawn(&redis.url(), &lease, "a", &fast(), &[]);
    let _b = Replica::spawn(&redis.url(), &other, "b", &fast(), &[]);
    wait_for("a and b lead", Duration::from_secs(10), || {
        (a.is_ready() && _b.is_ready()).then_some(())
    });
    let token = a.leader()["token"].as_u64().expect("a token");
    let before = keys_of(&redis, &lease);
    assert!(
        before.contains(&format!("leasehold:{{{lease}}}")),
        "{before:?}"
    );

    let (code, stdout, stderr) = remove_keys(&redis, &lease, &[]);
    assert_eq!(code, 1, "refused while a leads: {stdout}{stderr}");
    assert!(
        stderr.contains(&format!("lease {lease} is held by a (token {token}) for ")),
        "{stderr}"
    );
    assert!(stderr.contains("or pass --force"), "{stderr}");
    assert_eq!(keys_of(&redis, &lease), before, "nothing removed");

    // The replicas are gone (helm uninstall): a releases at SIGTERM.
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0);
    let left = keys_of(&redis, &lease);
    assert!(
        !left.is_empty(),
        "the fence and the state record outlive the term"
    );
    let (code, stdout, stderr) = remove_keys(&redis, &lease, &[]);
    assert_eq!(code, 0, "{stderr}");
    let named: Vec<String> = stdout
        .lines()
        .map(|l| {
            l.strip_prefix("removed ")
                .expect("one `removed KEY` a line")
                .to_owned()
        })
        .collect();
    let mut sorted = named.clone();
    sorted.sort();
    assert_eq!(sorted, left, "each key it removed, named");
    assert!(keys_of(&redis, &lease).is_empty());
    assert!(
        !keys_of(&redis, &other).is_empty(),
        "another lease's keys are left alone"
    );

    let (code, stdout, _) = remove_keys(&redis, &lease, &["--output", "json"]);
    assert_eq!(code, 0);
    let view: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(view["lease"], lease.as_str());
    assert_eq!(view["removed"], serde_json::json!([]));
}

#[test]
fn a_value_leasehold_did_not_write_and_a_running_cooldown_need_force() {
    let redis = RedisServer::start();
    let foreign = unique_lease("uninstall-foreign");
    let key = format!("leasehold:{{{foreign}}}");
    let _: () = redis.cmd(&["SET", &key, "somebody"]);
    let (code, _, stderr) = remove_keys(&redis, &foreign, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("holds `somebody`, which never expires (not written by leasehold)"),
        "{stderr}"
    );
    let (code, stdout, stderr) = remove_keys(&redis, &foreign, &["--force"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, format!("removed {key}\n"));

    // A fresh Redis: the first try starts a data-loss cooldown of one lease duration (20 s).
    let cooling = unique_lease("uninstall-cooldown");
    let timing = [
        "--lease-duration",
        "20s",
        "--renew-deadline",
        "10s",
        "--retry-period",
        "2s",
    ];
    let _c = Replica::spawn(&redis.url(), &cooling, "c", &timing, &[]);
    wait_for("the cooldown", Duration::from_secs(10), || {
        lease_status_json(&redis.url(), &cooling)
            .ok()
            .filter(|v| v["cooldown"] == "running")
    });
    let (code, _, stderr) = remove_keys(&redis, &cooling, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("lease {cooling} is in a data-loss cooldown for ")),
        "{stderr}"
    );
    assert!(!keys_of(&redis, &cooling).is_empty());
    let (code, stdout, stderr) = remove_keys(&redis, &cooling, &["--force"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("removed leasehold:{{{cooling}}}:state\n")),
        "{stdout}"
    );
}
