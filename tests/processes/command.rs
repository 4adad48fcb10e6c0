//! The singleton command through the `leasehold` binary, as real processes against a real
//! redis-server: it runs only on the leader, with its token in its environment, and dies with
//! it; a paused leader stops it first thing after resume; its exit ends the term and becomes
//! leasehold's exit code; `--restart-command` restarts it within the same term.

use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{RELEASE_ONLY, Replica};
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::{holds_on_every_look, wait_for};

use crate::binary::{fast, lines, process_alive, the_leader, token_of};

const RECORD: &str = r#"echo "start $LEASEHOLD_IDENTITY $LEASEHOLD_FENCING_TOKEN $LEASEHOLD_LEASE $$" >> "$OUT"; trap 'echo "term $LEASEHOLD_IDENTITY $$" >> "$OUT"; exit 0' TERM; while true; do sleep 0.02; done"#;

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
    // Not just at this instant: a's next try comes a retry period after its step-down.
    let two_leases = harness::timings::STEADY.lease_duration * 2;
    holds_on_every_look(
        "b leads, and a does not take the lease back",
        two_leases,
        || {
            let took_back = a
                .logs()
                .iter()
                .skip(mark)
                .any(|l| l["message"] == "became leader");
            !took_back && b.is_ready() && !a.is_ready()
        },
    );
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

/// A command ended by SIGKILL (as the kernel's out-of-memory killer ends one) is said so, not
/// only as code 137.
#[test]
fn a_command_killed_by_a_signal_is_said_so() {
    let redis = RedisServer::start();
    let lease = unique_lease("killed");
    let mut a = Replica::spawn(
        &redis.url(),
        &lease,
        "a",
        &RELEASE_ONLY,
        &["sh", "-c", "sleep 0.5; kill -9 $$"],
    );
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 137);
    let steps = a.events("stepped down");
    assert_eq!(
        steps[0]["detail"],
        "command exited with code 137 (128 + SIGKILL: killed, as by the out-of-memory killer)"
    );
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

/// The guard file is named after the lease, which may be longer than a file name may be: the
/// longest name a lease takes still leads and runs its command.
#[test]
fn a_lease_named_as_long_as_allowed_runs_its_command() {
    let redis = RedisServer::start();
    // A Kubernetes object name's 253 bytes after the namespace.
    let base = unique_lease("long");
    let lease = format!(
        "{base}-{}",
        "n".repeat(253 - (base.len() - "test/".len()) - 1)
    );
    let replica = Replica::spawn(&redis.url(), &lease, "a", &fast(), &["sleep", "60"]);
    replica.wait_events("started the command", 1, Duration::from_secs(10));
}

/// No secret of the command line reaches the log: not the password of a URL nor its query's
/// values, nor the value of an option named for a password, a secret or a token, nor of an HTTP
/// header named so (`Authorization: Bearer …`), also inside one argument (in
/// `leasehold starting` and in `started the command` alike).
#[test]
fn the_command_line_is_logged_without_its_secrets() {
    let redis = RedisServer::start();
    let command = [
        "sh",
        "-c",
        "sleep 60",
        "postgres://app:hunter2@db:5432/app",
        "--password",
        "hunter3",
        "--api-token=hunter4",
        "PGPASSWORD=hunter5 psql",
        "host=db password=hunter6",
        "redis-cli --pass hunter7 ping",
        "curl https://api.example/x?access_token=hunter8&sig=hunter9",
        "-H",
        "Authorization: Bearer hunter10",
        "--header=X-Api-Key: hunter11",
        "-H",
        "X-Api-Key:hunter12",
        "Cookie: session=hunter13",
        "mysql --password\thunter14",
        "*.log",
    ];
    let a = Replica::spawn(
        &redis.url(),
        &unique_lease("secrets"),
        "a",
        &fast(),
        &command,
    );
    let started = a.wait_events("started the command", 1, Duration::from_secs(10));
    let shown = started[0]["command"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        shown.contains("--password ***") && shown.contains("--api-token=***"),
        "{shown}"
    );
    // Each argument stays one, quoted as a shell would need it: where one ends can be read.
    assert!(
        shown.starts_with("sh -c 'sleep 60' postgres://app:***@db:5432/app ")
            && shown.contains(" 'PGPASSWORD=*** psql' ")
            // A literal `*` is quoted, as a shell needs it; a hidden value's `***` is not.
            && shown.ends_with(" '*.log'"),
        "{shown}"
    );
    let log = a.log_text();
    for secret in [
        "hunter2", "hunter3", "hunter4", "hunter5", "hunter6", "hunter7", "hunter8", "hunter9",
        "hunter10", "hunter11", "hunter12", "hunter13", "hunter14",
    ] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}

/// The command's environment is leasehold's, with the term's variables, less
/// `LEASEHOLD_REDIS_URL`: the Redis password it may carry never reaches what leasehold runs (a
/// crash reporter's dump, `env` in a log, every process the command starts).
#[test]
fn the_redis_url_and_its_password_stay_out_of_the_commands_environment() {
    let redis = RedisServer::builder()
        .args(["--requirepass", "hunter2"])
        .start();
    let url = format!("redis://:hunter2@127.0.0.1:{}", redis.port());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("env");
    let out_env = out.to_str().unwrap().to_owned();
    let a = Replica::spawn_with_env(
        "",
        &unique_lease("env"),
        "a",
        &fast(),
        &[
            "sh",
            "-c",
            r#"env > "$OUT.tmp"; mv "$OUT.tmp" "$OUT"; sleep 60"#,
        ],
        &[("OUT", &out_env), ("LEASEHOLD_REDIS_URL", &url)],
    );
    let env = wait_for("the command's environment", Duration::from_secs(10), || {
        std::fs::read_to_string(&out).ok()
    });
    assert!(env.contains("LEASEHOLD_FENCING_TOKEN="), "{env}");
    assert!(
        !env.contains("hunter2") && !env.contains("LEASEHOLD_REDIS_URL"),
        "{env}"
    );
    drop(a);
}

/// When Redis stops answering, the step-down comes at the renew deadline, and the command gets
/// what is left of the validity then (less 100 ms), not its whole grace period; a shutdown early
/// in a term gives it whole. `stopping the command` says which (`grace_ms`): the cut came in
/// silence, and a worker that needs its grace to flush was killed without a word.
#[test]
fn a_stop_says_the_grace_it_gives() {
    let redis = RedisServer::start();
    // A validity of 2968 ms (3 s less the drift) and a renew deadline of 2 s leave at most
    // 868 ms at an outage; a shutdown leaves more than 1.5 s unless a renewal is 1.3 s late.
    let args = [
        "--lease-duration",
        "3s",
        "--renew-deadline",
        "2s",
        "--retry-period",
        "250ms",
        "--no-data-loss-cooldown",
        "--grace-period",
        "1500ms",
    ];
    let lease = unique_lease("grace-given");
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &["sleep", "600"]);
    let bound = Duration::from_secs(10);
    wait_for("a to lead", bound, || a.is_ready().then_some(()));
    redis.pause();
    let cut = a.wait_events("stopping the command", 1, bound);
    redis.resume();
    let given = cut[0]["grace_ms"].as_u64();
    assert!(
        given.is_some_and(|ms| (1..=868).contains(&ms)),
        "{}",
        cut[0]
    );
    assert_eq!(cut[0]["reason"], "renew_deadline_passed", "{}", cut[0]);
    wait_for("a to lead again", bound, || a.is_ready().then_some(()));
    a.signal(Signal::SIGTERM);
    let stops = a.wait_events("stopping the command", 2, bound);
    assert_eq!(stops[1]["grace_ms"], 1500, "{}", stops[1]);
}
