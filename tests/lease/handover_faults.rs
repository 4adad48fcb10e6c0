//! `leasehold step-down` while Redis or the link fails during its wait: its last look unanswered,
//! Redis stalled past the wait, the request's own answer lost in a slow link.

use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::step_down;
use nix::sys::signal::Signal;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

use crate::handover::{WAIT, asked_of_a_frozen_leader, frozen_leader, leader_of, spawn};

/// When Redis stops answering during the wait, who leads at its end is not known: `step-down`
/// says that Redis failed, and names no leader (it used to report the old one as leading).
#[test]
fn step_down_says_redis_failed_when_its_last_look_found_no_answer() {
    let mut redis = RedisServer::start();
    let (replicas, asked, _) = asked_of_a_frozen_leader(&redis, "handover-redis-gone", "2s");
    redis.kill();
    let (code, json, stderr) = asked.join().expect("step-down ran");
    replicas[0].signal(Signal::SIGCONT);
    assert_eq!(code, 1, "{stderr}\n{json}");
    assert_eq!(json, serde_json::Value::Null, "a view was printed: {json}");
    assert!(stderr.contains("redis at"), "{stderr}");
}

/// `--wait` bounds the wait: with Redis stalled during it (SIGSTOP), each look had the whole call
/// bound of its own (up to 5 s), and the command ended a second and more past its wait.
#[test]
fn step_down_ends_at_its_wait_while_redis_stalls() {
    let redis = RedisServer::start();
    let (replicas, lease) = frozen_leader(&redis, "handover-stalled");
    let (url, asked_lease) = (redis.url(), lease.clone());
    let asked = std::thread::spawn(move || step_down(&url, &asked_lease, &["--wait", "3s"]));
    let request = format!("leasehold:{{{lease}}}:handover");
    wait_for("the request to be stored", WAIT, || {
        (redis.cmd::<i64>(&["EXISTS", &request]) == 1).then_some(())
    });
    // The wait counts from the request, not from the process's start, which a loaded machine
    // may slow by half a second.
    let stored = Instant::now();
    redis.pause();
    let (code, json, stderr) = asked.join().expect("step-down ran");
    let took = stored.elapsed();
    redis.resume();
    replicas[0].signal(Signal::SIGCONT);
    assert_eq!(code, 1, "{stderr}\n{json}");
    assert!(
        took < Duration::from_millis(3_600),
        "{took:?} for --wait 3s: {stderr}"
    );
}

/// A request whose answer is lost in a slow link (6 s, past the call's 5 s bound) may still reach
/// the leader, and does here: the command waits for its effect as for any request, for as long
/// as the request lives (`--wait`). It used to exit 1 at 5 s, saying Redis did not answer, and
/// the leader handed over a second later.
#[test]
fn a_step_down_whose_request_went_unanswered_waits_for_its_effect() {
    let redis = RedisServer::start();
    let lease = unique_lease("handover-unanswered");
    let mut replicas = spawn(&redis.url(), &lease, &["web-a"]);
    leader_of(&replicas);
    replicas.extend(spawn(&redis.url(), &lease, &["web-b"]));
    let source = leasehold::lease::script_source("handover").expect("the handover script");
    let sha: String = redis.cmd(&["SCRIPT", "LOAD", &source]);
    let sha: [u8; 40] = sha.as_bytes().try_into().expect("a SHA1 in hex");
    let proxy = FaultProxy::start(redis.addr());
    let delay = Duration::from_secs(6);
    proxy.set(Fault::DelayScript { sha, delay });
    let (code, json, stderr) = step_down(&proxy.url(), &lease, &["--wait", "20s"]);
    assert_eq!(code, 0, "{stderr}\n{json}");
    assert_eq!(json["handed_over"], true, "{json}");
    assert_eq!(json["leader"], "web-b", "{json}");
    // The request's answer was lost indeed: the handover came after the call's 5 s bound.
    assert!(
        json["waited_ms"].as_u64().is_some_and(|ms| ms >= 5_000),
        "{json}"
    );
}
