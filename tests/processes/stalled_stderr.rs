//! A reader of leasehold's stderr that stops reading (a stuck log pipe, `leasehold lock … |
//! less` left on its first page) must not stop the election: a log line that cannot be written
//! is dropped, not waited for, so a leader that loses Redis still stops its command by the
//! validity deadline.

use std::process::Stdio;
use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::FAST;
use harness::{RunCommand, leasehold_bin};
use testbed::child::Guarded;
use testbed::process_tree::{PidFile, is_gone, stat, wait_pids};
use testbed::redis_server::RedisServer;
use testbed::wait::{first_instant, wait_for};

/// The TTL of `FAST`: after Redis stops answering, the validity deadline is at most this far.
const TTL: Duration = Duration::from_millis(1500);

/// The command, which shares leasehold's stderr, fills it (`yes`), then works on.
const FLOODS_STDERR: &str =
    r#"echo $$ >> "$PIDS"; yes stalled >&2 & echo $! >> "$PIDS"; while :; do sleep 0.05; done"#;

#[test]
fn a_stalled_stderr_does_not_keep_the_command_running_past_the_validity_deadline() {
    let redis = RedisServer::start();
    let pids = PidFile::new();
    let (key, value) = pids.env();
    let mut args = FAST.to_vec();
    args.extend(["--no-data-loss-cooldown", "--grace-period", "5s"]);
    let mut cmd = RunCommand::new(leasehold_bin())
        .redis_url(&redis.url())
        .lease(&unique_lease("stalled-stderr"))
        .identity("a")
        .http_addr((std::net::Ipv4Addr::LOCALHOST, 0).into())
        .args(&args)
        .command(["sh", "-c", FLOODS_STDERR])
        .build();
    cmd.env(key, value)
        .env("RUST_LOG", "leasehold=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut leasehold = Guarded::spawn_unread(cmd, "leasehold a").expect("spawn leasehold");
    // Held open and never read.
    let _stalled = leasehold.take_stderr().expect("stderr is piped");
    let started = wait_pids(&pids.path, 2, Duration::from_secs(10));
    let (shell, yes) = (started[0], started[1]);
    // `yes` sleeps only when the pipe is full: asleep, its CPU time unchanged over 100 ms.
    wait_for("the pipe to be full", Duration::from_secs(5), || {
        let before = stat(yes)?;
        std::thread::sleep(Duration::from_millis(100));
        let after = stat(yes)?;
        (after.state == 'S' && after.utime + after.stime == before.utime + before.stime)
            .then_some(())
    });

    // Renewals fail from here on; each failure and the step-down are logged.
    redis.pause();
    let frozen = Instant::now();
    let gone = first_instant(TTL + Duration::from_secs(5), || {
        is_gone(shell) && is_gone(yes)
    });
    redis.resume();
    let took = gone.map(|g| g.saturating_duration_since(frozen));
    assert!(
        took.is_some_and(|t| t <= TTL + Duration::from_millis(500)),
        "the command outlived the validity deadline ({TTL:?} after Redis froze) by more than \
         500 ms: gone after {took:?}"
    );
    // And it still shuts down on SIGTERM, the pipe still full.
    leasehold
        .signal(nix::sys::signal::Signal::SIGTERM)
        .expect("signal leasehold");
    let code = leasehold
        .wait_exit(Duration::from_secs(15))
        .expect("wait for leasehold");
    assert_eq!(
        code,
        Some(0),
        "leasehold did not exit on SIGTERM within 15 s"
    );
}
