//! The `leasehold` binary end to end, as real processes against a real redis-server: failover
//! seen through `/readyz`, `/leader` and `/metrics` as a client sees it, shutdown, the singleton
//! command (only on the leader, token in its environment, stopped at step-down, its exit code),
//! health during a Redis outage, `leasehold status`, and configuration precedence.

use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{FAST, RELEASE_ONLY, Replica, lease_status, lease_status_json, run_to_end};
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// `FAST` timings, and no cooldown on the test's fresh redis (tests about the cooldown say so).
fn fast() -> Vec<&'static str> {
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    args
}

/// `FAST` spells out a timing preset as flags; the flags are the ones every harness gives a
/// replica for that timing.
#[test]
fn fast_is_the_steady_timing_as_flags() {
    assert_eq!(harness::timing_flags(&harness::timings::STEADY), FAST);
}

/// The only ready replica in leader mode, once there is exactly one.
fn the_leader(replicas: &[Replica]) -> Option<usize> {
    let ready: Vec<usize> = (0..replicas.len())
        .filter(|&i| replicas[i].is_ready())
        .collect();
    (ready.len() == 1).then(|| ready[0])
}

fn token_of(replica: &Replica) -> u64 {
    replica.leader()["token"].as_u64().expect("a token")
}

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

const RECORD: &str = r#"echo "start $LEASEHOLD_IDENTITY $LEASEHOLD_FENCING_TOKEN $LEASEHOLD_LEASE $$" >> "$OUT"; trap 'echo "term $LEASEHOLD_IDENTITY $$" >> "$OUT"; exit 0' TERM; while true; do sleep 0.02; done"#;

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn process_alive(pid: i32) -> bool {
    // Signal 0 checks existence; a zombie of a dead parent is reaped by init quickly.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
}

#[test]
fn the_command_runs_only_on_the_leader_with_its_token_and_dies_with_it() {
    let redis = RedisServer::start();
    let lease = unique_lease("exec");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("record");
    let out_env = out.to_str().unwrap().to_owned();
    let env = [("OUT", out_env.as_str())];
    let mut replicas: Vec<Replica> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            Replica::spawn_with_env(
                &redis.url(),
                &lease,
                n,
                &fast(),
                &["sh", "-c", RECORD],
                &env,
            )
        })
        .collect();
    let first = wait_for("a leader", Duration::from_secs(10), || {
        the_leader(&replicas)
    });
    let started = wait_for("the command to start", Duration::from_secs(5), || {
        let l = lines(&out);
        (!l.is_empty()).then_some(l)
    });
    assert_eq!(
        started.len(),
        1,
        "one command, on the leader only: {started:?}"
    );
    let fields: Vec<&str> = started[0].split(' ').collect();
    assert_eq!(fields[0], "start");
    assert_eq!(fields[1], replicas[first].identity);
    assert_eq!(
        fields[2].parse::<u64>().unwrap(),
        token_of(&replicas[first])
    );
    assert_eq!(fields[3], lease.as_str());
    let child_pid: i32 = fields[4].parse().unwrap();

    // SIGKILL of leasehold: the kernel kills its command (parent-death signal) and a new
    // leader starts its own, with a higher token.
    replicas[first].signal(Signal::SIGKILL);
    wait_for(
        "the old command to die with its leasehold",
        Duration::from_secs(2),
        || (!process_alive(child_pid)).then_some(()),
    );
    replicas.remove(first);
    let second = wait_for("a new leader", Duration::from_secs(5), || {
        the_leader(&replicas)
    });
    let all = wait_for("the new command", Duration::from_secs(5), || {
        let l = lines(&out);
        (l.iter().filter(|l| l.starts_with("start")).count() == 2).then_some(l)
    });
    let new_start: Vec<&str> = all
        .iter()
        .rfind(|l| l.starts_with("start"))
        .unwrap()
        .split(' ')
        .collect();
    assert_eq!(new_start[1], replicas[second].identity);
    assert!(new_start[2].parse::<u64>().unwrap() > fields[2].parse::<u64>().unwrap());

    // SIGTERM of the new leader: its command gets SIGTERM and exits before the lease moves.
    replicas[second].signal(Signal::SIGTERM);
    assert_eq!(replicas[second].wait_exit(Duration::from_secs(5)), 0);
    let after = lines(&out);
    assert!(
        after
            .iter()
            .any(|l| l.starts_with(&format!("term {}", replicas[second].identity))),
        "the command got SIGTERM: {after:?}"
    );
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
    // A drain would last the whole grace period: the command ignores SIGTERM, and the
    // validity deadline (about a minute) comes later still.
    let args = [
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
    a.wait_events("stopping the command", 1, Duration::from_secs(5));
    assert!(process_alive(child), "the command ignores SIGTERM");

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
        a.events("second signal: exiting at once, without releasing the lease")
            .len(),
        1
    );
}

#[test]
fn a_paused_leader_stops_its_command_first_thing_after_resume() {
    let redis = RedisServer::start();
    let lease = unique_lease("exec-pause");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("record");
    let out_env = out.to_str().unwrap().to_owned();
    let env = [("OUT", out_env.as_str())];
    let a = Replica::spawn_with_env(
        &redis.url(),
        &lease,
        "a",
        &fast(),
        &["sh", "-c", RECORD],
        &env,
    );
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let b = Replica::spawn_with_env(
        &redis.url(),
        &lease,
        "b",
        &fast(),
        &["sh", "-c", RECORD],
        &env,
    );
    let a_start = wait_for("a's command", Duration::from_secs(5), || {
        lines(&out).first().cloned()
    });
    let a_child: i32 = a_start.split(' ').nth(4).unwrap().parse().unwrap();

    a.signal(Signal::SIGSTOP);
    let stopped = Instant::now();
    wait_for("b to lead", Duration::from_secs(5), || {
        b.is_ready().then_some(())
    });
    wait_for("b's command", Duration::from_secs(5), || {
        lines(&out)
            .iter()
            .any(|l| l.starts_with("start b"))
            .then_some(())
    });
    // a's command is another process: it runs on while a is frozen (why the token exists).
    assert!(
        process_alive(a_child),
        "a's command runs on while a is frozen"
    );
    std::thread::sleep(Duration::from_millis(3000).saturating_sub(stopped.elapsed()));

    let mark = a.log_len();
    a.signal(Signal::SIGCONT);
    let resumed = Instant::now();
    wait_for(
        "a's old command to be stopped",
        Duration::from_secs(2),
        || (!process_alive(a_child)).then_some(()),
    );
    eprintln!("resume → old command gone: {:?}", resumed.elapsed());
    // Both speak within moments of resume (the supervisor once it saw every process gone).
    wait_for("both to speak", Duration::from_secs(2), || {
        let said: Vec<String> = a
            .logs()
            .iter()
            .skip(mark)
            .filter_map(|l| l["message"].as_str().map(str::to_owned))
            .collect();
        (said.iter().any(|m| m == "stepped down")
            && said.iter().any(|m| m == "stopping the command"))
        .then_some(())
    });
    let logs = a.logs();
    let mut after: Vec<&serde_json::Value> = logs.iter().skip(mark).collect();
    // In the order the events happened: two tasks' lines can reach the log in the other order
    // (a line is stamped, then written; a thread may lose the CPU in between).
    after.sort_by_key(|l| l["timestamp"].as_str().unwrap_or_default().to_owned());
    // The reaper's reports of the processes the kill left behind (a `sleep` of the loop) may
    // come between the two: they follow from the stop, they do not decide it.
    let messages: Vec<&str> = after
        .iter()
        .filter(|l| l["target"] != "leasehold::exec::reaper")
        .filter_map(|l| l["message"].as_str())
        .collect();
    // The watchdog and the supervisor both wake at resume, each on the boot clock, so either
    // may speak first, and the supervisor may even finish its stop before the watchdog speaks.
    // What neither may do is anything else first.
    let before = |event: &str| -> Vec<&str> {
        let at = messages.iter().position(|m| *m == event);
        messages[..at.unwrap_or(messages.len())].to_vec()
    };
    assert!(
        before("stopping the command")
            .iter()
            .all(|m| *m == "stepped down"),
        "the command's stop was not the first thing after resume: {messages:?}"
    );
    assert!(
        before("stepped down")
            .iter()
            .all(|m| ["stopping the command", "the command stopped"].contains(m)),
        "the step-down was not the first thing after resume: {messages:?}"
    );
    let stepped = after
        .iter()
        .find(|l| l["message"] == "stepped down")
        .unwrap();
    assert_eq!(stepped["reason"], "validity_deadline_passed");
    assert!(
        !messages.contains(&"became leader"),
        "a took the lease back: {messages:?}"
    );
    assert!(b.is_ready(), "b still leads");
    assert!(!a.is_ready());
}

#[test]
fn a_command_that_exits_ends_the_term_and_leasehold_exits_with_its_code() {
    let redis = RedisServer::start();
    let lease = unique_lease("exit-code");
    let args = RELEASE_ONLY;
    let mut a = Replica::spawn(
        &redis.url(),
        &lease,
        "a",
        &args,
        &["sh", "-c", "sleep 0.5; exit 7"],
    );
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let b = Replica::spawn(&redis.url(), &lease, "b", &args, &["sleep", "1000"]);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 7);
    // a released the lease: b leads long before the 10 s TTL could run out.
    wait_for("b to lead", Duration::from_secs(3), || {
        b.is_ready().then_some(())
    });
    let steps = a.events("stepped down");
    assert_eq!(steps[0]["reason"], "work_failed");
    assert_eq!(steps[0]["detail"], "command exited with code 7");
}

#[test]
fn restart_command_keeps_the_leadership_and_restarts_it() {
    let redis = RedisServer::start();
    let lease = unique_lease("restart");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let out_env = out.to_str().unwrap().to_owned();
    let mut args = fast();
    args.push("--restart-command");
    let a = Replica::spawn_with_env(
        &redis.url(),
        &lease,
        "a",
        &args,
        &[
            "sh",
            "-c",
            r#"echo "$LEASEHOLD_FENCING_TOKEN" >> "$OUT"; exit 3"#,
        ],
        &[("OUT", &out_env)],
    );
    let runs = wait_for("three runs", Duration::from_secs(10), || {
        let l = lines(&out);
        (l.len() >= 3).then_some(l)
    });
    assert!(
        runs.iter().all(|t| t == &runs[0]),
        "one term, one token: {runs:?}"
    );
    assert!(a.is_ready(), "still leading");
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

#[test]
fn flags_beat_the_environment_which_beats_the_config_file() {
    let redis = RedisServer::start();
    let lease = unique_lease("precedence");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("leasehold.yaml");
    std::fs::write(
        &config,
        "lease-duration: 9s\nrenew-deadline: 6s\nretry-period: 1500ms\nreadiness: member\n",
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();
    let a = Replica::spawn_with_env(
        &redis.url(),
        &lease,
        "a",
        &[
            "--config",
            &config,
            "--lease-duration",
            "8s",
            "--no-data-loss-cooldown",
        ],
        &[],
        &[
            ("LEASEHOLD_RENEW_DEADLINE", "5s"),
            ("LEASEHOLD_LEASE_DURATION", "7s"),
        ],
    );
    let start = &a.wait_events("leasehold starting", 1, Duration::from_secs(5))[0];
    assert_eq!(
        start["lease_duration_ms"], 8000,
        "the flag beats env and file"
    );
    assert_eq!(
        start["renew_deadline_ms"], 5000,
        "the environment beats the file"
    );
    assert_eq!(start["retry_period_ms"], 1500, "the file beats the default");
    assert_eq!(start["readiness"], "member");
}

#[test]
fn the_log_never_shows_the_redis_password() {
    let redis = RedisServer::builder()
        .args(["--requirepass", "s3cret-pw"])
        .start();
    let lease = unique_lease("secret");
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "s3cret-pw\n").unwrap();
    let pw = pw.to_str().unwrap().to_owned();
    let a = Replica::spawn(
        &redis.url(),
        &lease,
        "a",
        &["--redis-password-file", &pw, "--no-data-loss-cooldown"],
        &[],
    );
    wait_for(
        "a to lead with the password from its file",
        Duration::from_secs(10),
        || a.is_ready().then_some(()),
    );
    // A URL with a password, from the environment (an empty URL leaves out the flag).
    let url = format!("redis://:s3cret-pw@127.0.0.1:{}", redis.port());
    let b = Replica::spawn_with_env(
        "",
        &lease,
        "b",
        &["--no-data-loss-cooldown"],
        &[],
        &[("LEASEHOLD_REDIS_URL", &url)],
    );
    wait_for("b to follow a", Duration::from_secs(5), || {
        (b.leader()["leader"] == "a").then_some(())
    });
    let start = b.wait_events("leasehold starting", 1, Duration::from_secs(5));
    assert_eq!(
        start[0]["redis"],
        format!("redis://:***@127.0.0.1:{}", redis.port())
    );
    for r in [&a, &b] {
        let text = r.log_text();
        assert!(
            !text.contains("s3cret-pw"),
            "{} leaked the password:\n{text}",
            r.identity
        );
    }
}

#[test]
fn without_a_cluster_the_kubernetes_parts_are_off_with_one_log_line() {
    let redis = RedisServer::start();
    let lease = unique_lease("no-cluster");
    let mut args = fast();
    args.extend(["--kubernetes", "auto"]);
    let a = Replica::spawn_with_env(
        &redis.url(),
        &lease,
        "a",
        &args,
        &[],
        &[
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
            ("KUBERNETES_SERVICE_HOST", ""),
        ],
    );
    wait_for(
        "a to lead without a cluster",
        Duration::from_secs(10),
        || a.is_ready().then_some(()),
    );
    let off = a.wait_events("no kubernetes cluster found (no in-cluster config, no kubeconfig); the leader label, Lease mirror, events and Deployment discovery are off", 1, Duration::from_secs(5));
    assert_eq!(off.len(), 1, "{}", a.log_text());
    let start = a.events("leasehold starting");
    assert_eq!(start[0]["kubernetes"], false);
}
