//! Health-gated candidacy through the real binary, a real Redis and real check commands and
//! HTTP endpoints: an unhealthy leader steps aside and rejoins, an unhealthy follower does not
//! contend, and a command's check waits out its start-up grace (its flags' refusals:
//! `candidacy_flags.rs`).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use harness::replica::{FAST, Replica};
use nix::sys::signal::Signal;
use testbed::RedisServer;
use testbed::process_tree::{is_gone, wait_pids};
use testbed::wait::{holds_on_every_look, wait_for};

const WAIT: Duration = Duration::from_secs(20);

/// Check flags: every 200 ms, 2 failures in a row put a replica out.
pub(crate) const CHECK: [&str; 6] = [
    "--candidate-check-period",
    "200ms",
    "--candidate-check-timeout",
    "200ms",
    "--candidate-check-failure-threshold",
    "2",
];

fn lease(test: &str) -> String {
    format!("test/{test}-{}", std::process::id())
}

/// A replica whose check passes while `DIR/NAME-healthy` exists.
fn checked_replica(redis: &RedisServer, lease: &str, name: &str, dir: &Path) -> Replica {
    let check = format!("test -f {}/{name}-healthy", dir.display());
    let mut args = FAST.to_vec();
    args.extend(CHECK);
    args.extend(["--readiness", "member", "--candidate-check-command", &check]);
    Replica::spawn(&redis.url(), lease, name, &args, &[])
}

pub(crate) fn set_healthy(dir: &Path, name: &str, healthy: bool) {
    let file = dir.join(format!("{name}-healthy"));
    if healthy {
        std::fs::write(&file, b"").expect("write the health file");
    } else {
        std::fs::remove_file(&file).expect("remove the health file");
    }
}

fn leads(r: &Replica) -> bool {
    r.get("/leader")
        .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
        .is_some_and(|v| v["is_leader"] == true)
}

#[test]
fn an_unhealthy_leader_steps_aside_and_rejoins_once_healthy_again() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let name = lease("unhealthy-leader");
    set_healthy(dir.path(), "a", true);
    set_healthy(dir.path(), "b", true);
    let a = checked_replica(&redis, &name, "a", dir.path());
    wait_for("a leads", WAIT, || leads(&a).then_some(()));
    let b = checked_replica(&redis, &name, "b", dir.path());
    wait_for("b is ready", WAIT, || b.is_ready().then_some(()));

    set_healthy(dir.path(), "a", false);
    wait_for("b takes over from the unhealthy a", WAIT, || {
        leads(&b).then_some(())
    });
    let view = a.leader();
    assert_eq!(view["is_leader"], false);
    assert_eq!(view["last_step_down"]["reason"], "unhealthy", "{view}");
    assert_eq!(view["candidacy"]["state"], "unhealthy", "{view}");
    let reason = view["candidacy"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("-healthy`: exit code 1"), "{view}");
    let (code, words) = a.get("/readyz").expect("/readyz answers");
    assert_eq!(code, 503, "{words}");
    assert!(words.contains("candidate check unhealthy"), "{words}");
    assert_eq!(a.metric("leasehold_candidate_unhealthy_total"), Some(1.0));
    assert_eq!(
        a.metric("leasehold_step_downs_total{reason=\"unhealthy\"}"),
        Some(1.0)
    );
    assert_eq!(
        a.wait_events(
            "the candidate check failed; standing aside from the election",
            1,
            WAIT
        )
        .len(),
        1
    );

    // Healthy again: a stands again, and takes over when b in turn falls ill.
    set_healthy(dir.path(), "a", true);
    wait_for("a is ready again", WAIT, || a.is_ready().then_some(()));
    assert_eq!(a.leader()["candidacy"]["state"], "healthy");
    set_healthy(dir.path(), "b", false);
    wait_for("a leads again", WAIT, || leads(&a).then_some(()));
    assert!(!leads(&b));
}

#[test]
fn an_unhealthy_follower_does_not_contend_until_its_check_passes() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let name = lease("unhealthy-follower");
    let a = checked_replica(&redis, &name, "a", dir.path());
    // Alone and with a free lease, it still does not contend: three lease durations.
    holds_on_every_look(
        "a stays out of the election",
        Duration::from_millis(4500),
        || !leads(&a),
    );
    let (code, words) = a.get("/readyz").expect("/readyz answers");
    assert_eq!(code, 503, "{words}");
    assert!(words.contains("candidate check"), "{words}");
    // Never healthy, then unhealthy: said once, as when a healthy check fails (it was silent).
    let failed = "the candidate check failed; standing aside from the election";
    assert_eq!(a.events(failed).len(), 1, "{}", a.log_text());
    let held: Option<String> = redis.cmd(&["GET", &format!("leasehold:{{{name}}}")]);
    assert_eq!(held, None, "nobody took the lease");

    set_healthy(dir.path(), "a", true);
    wait_for("a leads once healthy", WAIT, || leads(&a).then_some(()));
}

/// An HTTP endpoint on loopback that answers 200 while `healthy`, else 503.
fn health_endpoint(healthy: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let status = if healthy.load(Ordering::SeqCst) {
                "200 OK"
            } else {
                "503 Service Unavailable"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

#[test]
fn an_http_candidate_check_that_answers_503_makes_the_leader_step_down() {
    let redis = RedisServer::start();
    let healthy = Arc::new(AtomicBool::new(true));
    let port = health_endpoint(healthy.clone());
    // A token in the query is not shown where the check is said.
    let url = format!("http://127.0.0.1:{port}/healthz?token=s3cret");
    let mut args = FAST.to_vec();
    args.extend(CHECK);
    args.extend(["--candidate-check", &url]);
    let a = Replica::spawn(&redis.url(), &lease("http-check"), "a", &args, &[]);
    wait_for("a leads", WAIT, || leads(&a).then_some(()));
    healthy.store(false, Ordering::SeqCst);
    wait_for("a steps down", WAIT, || (!leads(&a)).then_some(()));
    let view = a.leader();
    assert_eq!(view["last_step_down"]["reason"], "unhealthy", "{view}");
    assert_eq!(
        view["candidacy"]["reason"],
        format!("GET http://127.0.0.1:{port}/healthz?token=***: status 503"),
        "{view}"
    );
    assert!(!a.log_text().contains("s3cret"), "{}", a.log_text());
    healthy.store(true, Ordering::SeqCst);
    wait_for("a leads again", WAIT, || leads(&a).then_some(()));
}

/// With `--restart-command` the start-up grace begins again at each start of the command: its
/// first run crashes after a second, and the next takes a second to be ready. The grace was
/// counted from the term's start alone, so the restarted command was judged while it started,
/// and the leader stepped down `unhealthy` with a command that was about to be ready.
#[test]
fn a_restarted_commands_check_waits_out_a_new_start_up_grace() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let script = format!(
        "if [ -e {d}/ran ]; then sleep 1; touch {d}/ready; exec sleep 60; fi; \
         touch {d}/ran {d}/ready; sleep 1; rm -f {d}/ready; exit 1"
    );
    let check = format!("test -f {d}/ready");
    let mut args = FAST.to_vec();
    args.extend(CHECK);
    args.extend(["--candidate-check-command", &check]);
    args.extend(["--candidate-check-initial-delay", "2s", "--restart-command"]);
    let a = Replica::spawn(
        &redis.url(),
        &lease("regrace"),
        "a",
        &args,
        &["sh", "-c", &script],
    );
    wait_for("the restarted command's check to pass", WAIT, || {
        (a.leader()["candidacy"]["state"] == "healthy").then_some(())
    });
    assert!(a.events("stepped down").is_empty(), "{}", a.log_text());
    assert_eq!(a.events("started the command").len(), 2, "{}", a.log_text());
}

/// A command that crashes again and again within its start-up grace is unhealthy all the same:
/// each restart counts as a failed check, so the leader steps down and sits out (the grace,
/// begun again at each start, kept it from ever being judged).
#[test]
fn a_command_that_crashes_again_and_again_is_unhealthy_within_its_grace() {
    let redis = RedisServer::start();
    let mut args = FAST.to_vec();
    args.extend(CHECK);
    args.extend(["--candidate-check-command", "true"]);
    args.extend(["--candidate-check-initial-delay", "1h", "--restart-command"]);
    let command = ["sh", "-c", "sleep 0.2; exit 3"];
    let a = Replica::spawn(&redis.url(), &lease("crash-loop"), "a", &args, &command);
    wait_for("a steps down as unhealthy", WAIT, || {
        (a.leader()["last_step_down"]["reason"] == "unhealthy").then_some(())
    });
    let reason = a.leader()["last_step_down"]["detail"].to_string();
    assert!(reason.contains("started again"), "{reason}");
}

#[test]
fn a_commands_check_waits_out_its_start_up_grace_then_ends_the_term_and_sits_out() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    // The command never makes the check pass: each term lasts the grace plus two failures.
    let check = format!("test -f {}/never", dir.path().display());
    let mut args = FAST.to_vec();
    args.extend(CHECK);
    args.extend([
        "--candidate-check-command",
        &check,
        "--candidate-check-initial-delay",
        "1500ms",
    ]);
    let a = Replica::spawn(&redis.url(), &lease("grace"), "a", &args, &["sleep", "60"]);
    wait_for("a leads", WAIT, || leads(&a).then_some(()));
    let began = Instant::now();
    // A follower running no command stands: it contended, and the check is not judged yet.
    holds_on_every_look(
        "the term lasts the start-up grace",
        Duration::from_millis(1000),
        || leads(&a),
    );
    wait_for("a steps down as unhealthy", WAIT, || {
        (!leads(&a)).then_some(())
    });
    let lasted = began.elapsed();
    assert!(lasted >= Duration::from_millis(1000), "{lasted:?}");
    assert_eq!(a.leader()["last_step_down"]["reason"], "unhealthy");
    // It sits out one lease duration, then stands again and leads (it is alone).
    let stepped_down = Instant::now();
    wait_for("a leads again after its hold-off", WAIT, || {
        leads(&a).then_some(())
    });
    assert!(
        stepped_down.elapsed() >= Duration::from_millis(1000),
        "rejoined after {:?}",
        stepped_down.elapsed()
    );
    a.signal(Signal::SIGTERM);
}

/// A check that runs past its timeout ends with everything it started: its process group is
/// killed and reaped, also in exec mode, where leasehold is the subreaper its orphans come to.
/// Each run of this check starts two sleeps and waits for them.
#[test]
fn a_check_past_its_timeout_leaves_no_process_behind() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let p = pids.display();
    let check = format!("sleep 300 & echo $! >> {p}; sleep 300 & echo $! >> {p}; wait");
    let mut args = FAST.to_vec();
    args.extend(CHECK);
    args.extend(["--candidate-check-command", &check]);
    let a = Replica::spawn(
        &redis.url(),
        &lease("overdue"),
        "a",
        &args,
        &["sleep", "60"],
    );
    let started = wait_pids(&pids, 2, WAIT);
    wait_for("the overdue check's sleeps killed and reaped", WAIT, || {
        started.iter().all(|&pid| is_gone(pid)).then_some(())
    });
    a.signal(Signal::SIGTERM);
}

/// A check is leasehold's own, never the command's, though it runs in a process group of its
/// own: when the command ends by itself while a check runs, the step-down stops what the command
/// left running, and the check is not among it (it is not sent SIGTERM).
#[test]
fn a_running_check_is_not_stopped_with_the_command() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (started, termed) = (dir.path().join("started"), dir.path().join("termed"));
    let (s, t) = (started.display(), termed.display());
    let check = format!("echo $$ >> {s}; trap 'echo term >> {t}' TERM; sleep 2 & wait");
    let command = format!("while [ ! -s {s} ]; do sleep 0.05; done");
    let mut args = FAST.to_vec();
    args.extend(["--candidate-check-command", &check]);
    args.extend([
        "--candidate-check-period",
        "5s",
        "--candidate-check-timeout",
        "5s",
    ]);
    let a = Replica::spawn(
        &redis.url(),
        &lease("own-check"),
        "a",
        &args,
        &["sh", "-c", &command],
    );
    let shell = wait_pids(&started, 1, WAIT)[0];
    wait_for("the command's term to end", WAIT, || {
        a.events("stepped down").into_iter().next()
    });
    wait_for("the check to end by itself", WAIT, || {
        is_gone(shell).then_some(())
    });
    assert!(
        !termed.exists(),
        "the step-down sent the check SIGTERM as if it were the command's:\n{}",
        a.log_text()
    );
    a.signal(Signal::SIGTERM);
}

/// A process a check started in a session of its own (`setsid`, a daemon) is still the check's:
/// once the check's shell is gone it is re-parented to leasehold, outside every group leasehold
/// knows, and the command's step-down must not stop it as the command's.
#[test]
fn a_check_process_that_left_the_checks_group_is_not_stopped_with_the_command() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let [apart, started, termed, ended] =
        ["apart", "started", "termed", "ended"].map(|f| dir.path().join(f));
    let [a, s, t, e] = [&apart, &started, &termed, &ended].map(|f| f.display().to_string());
    // The escapee says it is there once its parent, the check's shell, has long exited; it
    // ends by itself 3 s later (a SIGTERM would say so first; a SIGKILL would leave no end).
    let escapee = format!(
        "echo $$ >> {a}; sleep 0.5; echo $$ >> {s}; trap 'echo term >> {t}' TERM; sleep 3 & wait; echo end >> {e}"
    );
    // The shell ends (and its group is killed) only once the escapee runs in a session of its own.
    let check = format!("setsid sh -c \"{escapee}\" & while [ ! -s {a} ]; do sleep 0.01; done");
    let command = format!("while [ ! -s {s} ]; do sleep 0.05; done");
    let mut args = FAST.to_vec();
    args.extend(["--candidate-check-command", &check]);
    args.extend(["--candidate-check-period", "5s"]);
    let a = Replica::spawn(
        &redis.url(),
        &lease("escaped-check"),
        "a",
        &args,
        &["sh", "-c", &command],
    );
    wait_pids(&started, 1, WAIT);
    wait_for("the command's term to end", WAIT, || {
        a.events("stepped down").into_iter().next()
    });
    wait_for("the escapee to end by itself", WAIT, || {
        ended.exists().then_some(())
    });
    assert!(
        !termed.exists(),
        "the step-down sent the check's escapee SIGTERM as if it were the command's:\n{}",
        a.log_text()
    );
    a.signal(Signal::SIGTERM);
}
