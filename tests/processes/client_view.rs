//! Leadership as a client of the `leasehold` binary sees it, as real processes against a real
//! redis-server: a crash failover through `/readyz`, `/leader` and `/metrics`, liveness that stays
//! up and member readiness that follows Redis while Redis is down, and `leasehold status`
//! reading the lease from Redis.

use std::time::{Duration, Instant};

use harness::contenders::{lease as lease_of, unique_lease};
use harness::replica::{Replica, lease_status, lease_status_json, run_to_end};
use harness::timing_flags;
use harness::timings::SIX_SECOND_TERM;
use leasehold::lease::Acquired;
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

use crate::binary::{fast, the_leader, token_of};

#[test]
fn three_replicas_fail_over_as_probes_and_metrics_show() {
    let redis = RedisServer::start();
    let lease = unique_lease("failover");
    let mut replicas: Vec<Replica> = ["web-a", "web-b", "web-c"]
        .iter()
        .map(|name| Replica::spawn(&redis.url(), &lease, name, &fast(), &[]))
        .collect();

    let first = wait_for("one ready leader", Duration::from_secs(10), || {
        the_leader(&replicas)
    });
    let leader_name = replicas[first].identity.clone();
    let token = token_of(&replicas[first]);
    for (i, r) in replicas.iter().enumerate() {
        // A follower knows the leader from its first try, which a loaded machine may delay.
        let view = wait_for(
            &format!("{} to see the leader", r.identity),
            Duration::from_secs(5),
            || {
                let view = r.leader();
                (view["leader"] == leader_name.as_str()).then_some(view)
            },
        );
        assert_eq!(view["is_leader"], i == first);
        assert_eq!(
            r.metric("leasehold_is_leader"),
            Some(if i == first { 1.0 } else { 0.0 })
        );
        if i != first {
            let (code, body) = r.get("/readyz").unwrap();
            assert_eq!(code, 503);
            assert!(
                body.starts_with(&format!("not the leader: following {leader_name}")),
                "{body}"
            );
            assert_eq!(
                view["token"].as_u64(),
                Some(token),
                "followers see the leader's token"
            );
        }
    }
    let renewed = wait_for("renewals in the metrics", Duration::from_secs(5), || {
        replicas[first]
            .metric("leasehold_renewals_total{result=\"renewed\"}")
            .filter(|n| *n >= 2.0)
    });
    assert!(renewed >= 2.0);

    replicas[first].signal(Signal::SIGKILL);
    let killed = Instant::now();
    let dead = replicas.remove(first);
    let second = wait_for("a new ready leader", Duration::from_secs(5), || {
        the_leader(&replicas)
    });
    eprintln!("binary crash failover: {:?} (TTL 1.5 s)", killed.elapsed());
    drop(dead);
    let new = &replicas[second];
    let new_token = token_of(new);
    assert!(new_token > token, "{new_token} > {token}");
    assert_eq!(
        new.metric("leasehold_transitions_total{to=\"leader\"}"),
        Some(1.0)
    );
    assert!(new.metric("leasehold_validity_remaining_seconds").unwrap() > 0.5);
    let other = &replicas[1 - second];
    wait_for(
        "the other follower to see the new leader",
        Duration::from_secs(5),
        || (other.leader()["leader"] == new.identity.as_str()).then_some(()),
    );
    let became = new.wait_events("became leader", 1, Duration::from_secs(5));
    assert_eq!(became.len(), 1);
    assert_eq!(became[0]["identity"], new.identity.as_str());
    assert_eq!(became[0]["token"].as_u64(), Some(new_token));
}

#[test]
fn health_stays_up_while_redis_is_down_and_member_readiness_follows_redis() {
    let mut redis = RedisServer::start();
    let lease = unique_lease("member");
    let mut args = fast();
    args.extend(["--readiness", "member"]);
    let replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .map(|n| Replica::spawn(&redis.url(), &lease, n, &args, &[]))
        .collect();
    wait_for("both ready as members", Duration::from_secs(10), || {
        replicas.iter().all(Replica::is_ready).then_some(())
    });
    redis.kill();
    for r in &replicas {
        let body = wait_for("readiness to drop", Duration::from_secs(5), || {
            r.get("/readyz")
                .filter(|(code, _)| *code == 503)
                .map(|(_, b)| b)
        });
        assert!(body.starts_with("not ready: redis unreachable:"), "{body}");
        assert_eq!(r.metric("leasehold_redis_up"), Some(0.0));
    }
    // Liveness ignores Redis: the loop's calls time out or fail and it goes on backing off, so
    // it is never overdue, over three lease durations (FAST: 1.5 s).
    let until = Instant::now() + Duration::from_millis(4500);
    while Instant::now() < until {
        for r in &replicas {
            let health = r.get("/healthz");
            assert_eq!(
                health.as_ref().map(|(c, _)| *c),
                Some(200),
                "{}: liveness ignores redis: {health:?}",
                r.identity
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    redis.restart();
    wait_for("both ready again", Duration::from_secs(10), || {
        replicas.iter().all(Replica::is_ready).then_some(())
    });
}

#[test]
fn status_reads_the_lease_from_redis() {
    let redis = RedisServer::start();
    let lease = unique_lease("status");
    let a = Replica::spawn(&redis.url(), &lease, "a", &fast(), &[]);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let token = token_of(&a);
    let view = lease_status_json(&redis.url(), &lease).expect("leasehold status");
    assert_eq!(view["holder"], "a");
    assert_eq!(view["token"].as_u64(), Some(token));
    assert_eq!(view["lease_key"], format!("leasehold:{{{lease}}}"));
    assert!(view["expires_in_ms"].as_u64().unwrap() <= 1500);
    let text = lease_status(&redis.url(), &lease);
    assert!(text.contains("holder      a (owner id a-"), "{text}");
    // Redis down: a runtime error, exit code 1, and a message.
    drop(a);
    drop(redis);
    let (code, _, stderr) = run_to_end(
        &[
            "status",
            "--redis-url",
            "redis://127.0.0.1:1",
            "--lease-name",
            &lease,
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(stderr.starts_with("error: redis"), "{stderr}");
}

/// A lease key evicted or deleted while its term lasts: `status` says so, instead of showing a
/// holder whose key has no time left and no reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_says_when_the_lease_key_is_gone_before_its_time() {
    let redis = RedisServer::start();
    let lease = unique_lease("status-vanished");
    let holder = lease_of(&redis.url(), &lease, "web-a", false);
    let call = Duration::from_secs(2);
    let Acquired::Leader(_) = holder.acquire(Duration::from_secs(30), call).await.unwrap() else {
        panic!("web-a did not lead")
    };
    redis.cmd::<i64>(&["DEL", &holder.keys().lease]);
    let view = lease_status_json(&redis.url(), &lease).unwrap();
    assert_eq!(view["holder"], "web-a", "{view}");
    assert_eq!(view["vanished"], true, "{view}");
    let text = lease_status(&redis.url(), &lease);
    assert!(
        text.contains("but the lease key is gone before its time"),
        "{text}"
    );
}

/// `status` pointed at a Redis replica: the lease lives on its master, and the replica's copy
/// lags, or stands still once its link is down. It shows the copy, says where it came from, and
/// exits 1, so that a script does not take it for the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_pointed_at_a_redis_replica_says_so_and_exits_1() {
    let master = RedisServer::start();
    let port = master.port().to_string();
    let replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &port])
        .start();
    let lease = unique_lease("status-replica");
    let holder = lease_of(&master.url(), &lease, "web-a", false);
    let call = Duration::from_secs(2);
    let Acquired::Leader(_) = holder.acquire(Duration::from_secs(30), call).await.unwrap() else {
        panic!("web-a did not lead")
    };
    let args = |output: &'static str| {
        let url = replica.url();
        let lease = lease.clone();
        move || {
            run_to_end(
                &[
                    "status",
                    "--redis-url",
                    &url,
                    "--lease-name",
                    &lease,
                    "--output",
                    output,
                ],
                &[],
            )
        }
    };
    let (code, out, err) = wait_for(
        "the replica to hold the lease",
        Duration::from_secs(10),
        || {
            let seen = args("json")();
            seen.1.contains("web-a").then_some(seen)
        },
    );
    assert_eq!(code, 1, "{out}{err}");
    let view: serde_json::Value = serde_json::from_str(&out).expect("a JSON view");
    assert_eq!(view["holder"], "web-a", "{view}");
    assert_eq!(view["redis_role"], "replica", "{view}");
    // Whether the next acquire starts a cooldown is the master's to say: the replica's own
    // identity never names the record's writer (it said "pending" while the master's was idle).
    assert_eq!(view["cooldown"], "unknown", "{view}");
    assert!(
        err.contains(&format!("a replica of 127.0.0.1:{port}")) && err.contains("--redis-url"),
        "{err}"
    );
    drop(master);
    let (code, out, err) = wait_for(
        "the replica to see its link down",
        Duration::from_secs(10),
        || {
            let seen = args("text")();
            seen.2.contains("link down").then_some(seen)
        },
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("holder      web-a"), "{out}");
}

/// `step-down` pointed at a replica whose master is gone: its copy names nobody, but that is
/// no lease's word. It says what `status` says of a replica (it used to say "nobody leads").
#[test]
fn step_down_pointed_at_a_redis_replica_says_so() {
    let nowhere = "1";
    let replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", nowhere])
        .start();
    let lease = unique_lease("step-down-replica");
    let (code, _, err) = harness::replica::step_down(&replica.url(), &lease, &["--wait", "1s"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("a replica of 127.0.0.1:{nowhere}")) && !err.contains("nobody"),
        "{err}"
    );
}

/// A data-loss cooldown counts down in `/leader` and `/readyz` as it runs: both are read at
/// request time. They showed the time left at the follower's last look for the whole cooldown
/// (the follower does not look again before it is over).
#[test]
fn the_cooldown_counts_down_in_leader_and_readyz() {
    let redis = RedisServer::start();
    let lease = unique_lease("cooldown-counts");
    let flags = timing_flags(&SIX_SECOND_TERM);
    let timing: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = Replica::spawn(&redis.url(), &lease, "a", &timing, &[]);
    let left = || a.leader()["cooldown_ms"].as_u64();
    let first = wait_for("a cooldown", Duration::from_secs(5), left);
    let later = wait_for("the cooldown to count down", Duration::from_secs(3), || {
        left().filter(|ms| *ms + 1_000 <= first)
    });
    let said = a.get("/readyz").map(|(_, body)| body).unwrap_or_default();
    let readyz: u64 = said
        .split("cooling down for ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no cooldown in {said}"));
    assert!(readyz <= later, "/readyz {readyz} ms, /leader {later} ms");
}

/// A value leasehold did not write is shown as text, never acted on by the terminal: a lease
/// key holding a line break and an escape sequence drew a row of its own (a second `holder`)
/// and coloured what followed. `step-down` and `remove-keys`, which name the holder too, wrote
/// it as it stood.
#[test]
fn operator_commands_show_a_foreign_values_control_characters_escaped() {
    let redis = RedisServer::start();
    let lease = unique_lease("status-control");
    let key = format!("leasehold:{{{lease}}}");
    let foreign = "evil\n\u{1b}[31mholder      fake-leader#999";
    let _: () = redis.cmd(&["SET", &key, foreign, "PX", "60000"]);
    let url = redis.url();
    let args = ["status", "--redis-url", &url, "--lease-name", &lease];
    let (_, out, err) = run_to_end(&args, &[]);
    assert!(out.contains("evil\\n\\u{1b}[31mholder"), "{out}{err}");
    assert!(!out.contains('\u{1b}'), "{out}");
    let holders = out.lines().filter(|l| l.starts_with("holder")).count();
    assert_eq!(holders, 1, "{out}");
    let step_down = [
        "step-down",
        "--redis-url",
        &url,
        "--lease-name",
        &lease,
        "--wait",
        "1s",
    ];
    let remove = ["remove-keys", "--redis-url", &url, "--lease-name", &lease];
    for args in [&step_down[..], &remove[..]] {
        let (_, out, err) = run_to_end(args, &[]);
        let said = format!("{out}{err}");
        assert!(said.contains("evil\\n\\u{1b}[31m"), "{args:?}: {said}");
        assert!(!said.contains('\u{1b}'), "{args:?}: {said}");
    }
}

/// The text log format writes a value from Redis as text too: a follower of a foreign value
/// logged it as it stood, its line break forging a log line of its own and its escape sequence
/// acting on the terminal that shows the log.
#[test]
fn text_logs_show_a_foreign_values_control_characters_escaped() {
    let redis = RedisServer::start();
    let lease = unique_lease("text-log-control");
    let key = format!("leasehold:{{{lease}}}");
    let foreign = "evil\n\u{1b}[31mfake: line";
    let _: () = redis.cmd(&["SET", &key, foreign, "PX", "60000"]);
    let mut args = fast();
    args.extend(["--log-format", "text"]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &[]);
    let log = wait_for("a's view of the holder", Duration::from_secs(10), || {
        let log = a.log_text();
        log.contains("evil").then_some(log)
    });
    assert!(!log.contains('\u{1b}'), "{log}");
    assert!(!log.lines().any(|l| l.starts_with("fake")), "{log}");
    assert!(log.contains("evil\\n\\u{1b}[31mfake: line"), "{log}");
}
