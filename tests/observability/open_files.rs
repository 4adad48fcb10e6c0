//! The open-files limit against the HTTP port's connection cap, with a real `leasehold run`
//! started under a low soft limit (1,024 is common, a container may give less): HTTP clients
//! holding every connection the cap allows must leave files for Redis, and a cap that no limit
//! can hold is refused at start.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::command::RunCommand;
use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use harness::target::leasehold_bin;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use testbed::http::http_get;
use testbed::process_tree;
use testbed::redis_server::RedisServer;
use testbed::wait::{holds_on_every_look, wait_for};

use crate::flood::stalled;

const WAIT: Duration = Duration::from_secs(20);

/// `leasehold run` of `lease` on `redis` with `args` and `env`, started with the open-files
/// limit `soft`/`hard`, with `command` after `--`.
fn under_limit(
    redis: &RedisServer,
    lease: &str,
    (soft, hard): (u64, u64),
    (args, env): (&[&str], &[(&str, &str)]),
    command: &[&str],
) -> Replica {
    let mut leasehold = Command::new(leasehold_bin());
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        leasehold.pre_exec(move || Ok(setrlimit(Resource::RLIMIT_NOFILE, soft, hard)?));
    }
    let run = RunCommand::wrapping(leasehold)
        .redis_url(&redis.url())
        .lease(lease)
        .args(FAST)
        .args(["--no-data-loss-cooldown"])
        .args(args)
        .command(command);
    Replica::start(run, "web-a", env)
}

/// Under a soft limit of 128 and the default cap of 256 connections, a flood of connections
/// that never finish their heads took every file: the probes waited in the kernel's backlog,
/// and once Redis dropped the leader's connection it could not dial again, and the term ended
/// at the renew deadline. The soft limit is raised as far as the cap needs now; the command and
/// the candidate check still get the limit leasehold was started with.
#[test]
fn http_clients_holding_every_connection_leave_files_for_redis() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("a directory");
    let seen = dir.path().join("limit");
    let lease = unique_lease("open-files");
    let checked = dir.path().join("check");
    let script = format!("ulimit -n > {}; exec sleep 600", seen.display());
    let check = format!("ulimit -n > {}", checked.display());
    let args = ["--candidate-check-command", &check];
    let command = ["sh", "-c", &script];
    // Soft 128, and a hard limit the cap fits under (this machine's, if lower than 4096).
    let hard = getrlimit(Resource::RLIMIT_NOFILE).map_or(4096, |(_, hard)| hard.min(4096));
    let replica = under_limit(&redis, &lease, (128, hard), (&args, &[]), &command).healthy();
    wait_for("the leader", WAIT, || replica.is_ready().then_some(()));
    let key = format!("leasehold:{{{lease}}}");
    let term: String = redis.cmd(&["GET", &key]);

    // More connections than the cap and the reserve, each holding half a head (for 5 s): as
    // many files as the first limit allows are taken.
    let flood: Vec<TcpStream> = (0..300)
        .map(|_| stalled(replica.http, "GET /leader HTTP/1.1\r\nHost: x\r\n"))
        .collect();
    wait_for("the flood to take 120 files", WAIT, || {
        let files = process_tree::open_files(replica.pid().as_raw()).unwrap_or(0);
        (files >= 120).then_some(())
    });
    // Redis drops the leader's connections: it must dial again, within its renew deadline.
    let _: i64 = redis.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
    let killed = Instant::now();
    let probe = http_get(replica.http, "/readyz").map(|(code, _)| code);
    // For two lease durations (3 s) after the kill, under the 5 s a head may take: the
    // connections are still held.
    let window = (FAST_LEASE * 2).saturating_sub(killed.elapsed());
    holds_on_every_look("the term that began before the flood", window, || {
        redis.cmd::<Option<String>>(&["GET", &key]).as_ref() == Some(&term)
    });
    drop(flood);
    assert_eq!(probe, Some(200), "/readyz during the flood");
    let limit = wait_for("the command's limit", WAIT, || {
        std::fs::read_to_string(&seen)
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    assert_eq!(limit.trim(), "128", "the command's open-files limit");
    let checked = std::fs::read_to_string(&checked).expect("the check ran before the term");
    assert_eq!(
        checked.trim(),
        "128",
        "the candidate check's open-files limit"
    );
}

/// The lease duration of [`FAST`].
const FAST_LEASE: Duration = Duration::from_millis(1500);

/// A cap that does not fit under the hard limit, with the probe reserve and the files kept for
/// Redis, is refused at start, naming the flag, and the variable it came from; it used to start,
/// to fail under load.
#[test]
fn a_connection_cap_the_open_files_limit_cannot_hold_is_refused_at_start() {
    let redis = RedisServer::start();
    let lease = unique_lease("open-files-refused");
    let variable = [("LEASEHOLD_HTTP_MAX_CONNECTIONS", "100")];
    for (env, named) in [
        (&[][..], "`256`"),
        (&variable[..], "$LEASEHOLD_HTTP_MAX_CONNECTIONS"),
    ] {
        let mut replica = under_limit(&redis, &lease, (128, 128), (&[], env), &[]);
        let code = replica.wait_exit(Duration::from_secs(10));
        let said = replica.log_text();
        assert_eq!(code, 2, "{said}");
        assert!(
            said.contains("--http-max-connections") && said.contains(named),
            "{said}"
        );
        assert!(said.contains("may open 128"), "{said}");
    }
}
