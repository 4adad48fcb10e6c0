//! Bad input to the operator commands (`leasehold step-down`, `leasehold lock`) through the real
//! binary: one message that names the flag, the value and the rule, and exit code 2, before
//! anything connects.

use harness::replica::run_to_end;

use crate::refusal::refused_saying;

fn refused(args: &[&str], want: &[&str]) {
    refused_saying(args, &[("LEASEHOLD_LEASE_NAME", "web")], want);
}

#[test]
fn every_step_down_flag_rule_is_refused_with_exit_code_2() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--to", "web b"],
            &["--to `web b`", "must be a replica's identity", "whitespace"],
        ),
        (
            &["--to", "web{b}"],
            &["--to `web{b}`", "must be a replica's identity", "braces"],
        ),
        (&["--to", ""], &["--to ``", "must not be empty"]),
        // The request's own word for "any replica": it handed over to any, then said it failed.
        (
            &["--to", "-"],
            &["--to `-`", "any replica", "leave --to out"],
        ),
        (
            &["--wait", "soon"],
            &[
                "invalid value 'soon' for '--wait <WAIT>'",
                "expected a duration",
            ],
        ),
        (&["--wait", "0s"], &["--wait 0s", "must be at least 1s"]),
        // Too short for any handover to be seen: it ended the term, then said it failed.
        (&["--wait", "1ns"], &["--wait 1ns", "must be at least 1s"]),
        (
            &["--wait", "999ms"],
            &["--wait 999ms", "must be at least 1s", "ends the term"],
        ),
        (&["--wait", "2h"], &["--wait 2h", "must be at most 1h"]),
        (
            &["--output", "yaml"],
            &["invalid value 'yaml' for '--output <OUTPUT>'", "text, json"],
        ),
    ];
    for (args, want) in cases {
        let mut full = vec!["step-down"];
        full.extend_from_slice(args);
        refused(&full, want);
    }
}

#[test]
fn every_lock_flag_rule_is_refused_with_exit_code_2() {
    let cases: &[(&[&str], &[&str])] = &[
        (&[], &["-- CMD", "needs the command to run after `--`"]),
        (&["--wait", "5s"], &["-- CMD", "needs the command"]),
        (
            &["--wait", "2h", "--", "true"],
            &["--wait 2h", "must be at most 1h"],
        ),
        (
            &["--wait", "later", "--", "true"],
            &[
                "invalid value 'later' for '--wait <WAIT>'",
                "expected a duration",
            ],
        ),
        (
            &["--grace-period", "0s", "--", "true"],
            &["--grace-period 0s", "must be greater than zero"],
        ),
        (
            &["--", "/no/such/program"],
            &["-- CMD `/no/such/program`", "not found"],
        ),
        (
            &["--lease-duration", "5s", "--", "true"],
            &["--lease-duration 5s must be greater than --renew-deadline 10s"],
        ),
        (
            &["--restart-command", "--", "true"],
            &["unexpected argument '--restart-command'"],
        ),
        // Without the cooldown only the Redis's own persistence keeps two leaders apart: a
        // target built to fail over refuses it (the rule is `run`'s too).
        (
            &[
                "--no-data-loss-cooldown",
                "--lease-name",
                "web",
                "--redis-url",
                "redis+sentinel://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/m",
                "--",
                "true",
            ],
            &["--no-data-loss-cooldown: is only for a Redis that never fails over"],
        ),
        (
            &[
                "--no-data-loss-cooldown",
                "--lease-name",
                "web",
                "--redis-url",
                "redis+cluster://127.0.0.1:1",
                "--",
                "true",
            ],
            &["--no-data-loss-cooldown: is only for a Redis that never fails over"],
        ),
    ];
    for (args, want) in cases {
        let mut full = vec!["lock", "--kubernetes", "off"];
        full.extend_from_slice(args);
        refused(&full, want);
    }
}

#[test]
fn one_shot_commands_name_the_redis_they_could_not_reach() {
    for command in ["status", "step-down", "remove-keys"] {
        let (code, _stdout, stderr) = run_to_end(
            &[command, "--lease-name", "web"],
            &[("LEASEHOLD_REDIS_URL", "redis://:hunter2@127.0.0.1:1")],
        );
        assert_eq!(code, 1, "{command} exited {code}; stderr:\n{stderr}");
        assert!(
            stderr.contains("redis at redis://:***@127.0.0.1:1: "),
            "{command}: {stderr}"
        );
        assert!(!stderr.contains("hunter2"), "{command}: {stderr}");
    }
}

#[test]
fn a_server_that_is_not_redis_is_named_as_such() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // An HTTP server's answer to whatever it is sent.
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.read(&mut [0; 1024]);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let url = format!("redis://127.0.0.1:{port}");
    let (code, _stdout, stderr) =
        run_to_end(&["status", "--lease-name", "web", "--redis-url", &url], &[]);
    assert_eq!(code, 1, "exited {code}; stderr:\n{stderr}");
    assert!(
        stderr.contains("this does not answer like Redis"),
        "{stderr}"
    );
    assert!(!stderr.contains("Unexpected `"), "a parser dump: {stderr}");
}

/// A value read from Redis never brings `status` down: a `:clock` note (someone else's write)
/// whose time lies past the year 9999, which RFC 3339 cannot write, is shown in seconds.
#[test]
fn status_shows_a_clock_note_from_past_the_year_9999() {
    let redis = testbed::RedisServer::start();
    let note = "someone#1 1.0 1.0 253402300800000000";
    redis.cmd::<String>(&["SET", "leasehold:{default/web}:clock", note]);
    let url = redis.url();
    let args = [
        "status",
        "--lease-name",
        "web",
        "--redis-url",
        &url,
        "--output",
        "json",
    ];
    let (code, stdout, stderr) = run_to_end(&args, &[]);
    assert_eq!(code, 0, "exited {code}; stderr:\n{stderr}");
    let view: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(
        view["redis_clock"]["measured_at"], "253402300800s after the epoch",
        "{stdout}"
    );
}

/// A lease without a single key (never taken, or the replicas use another prefix or name) is
/// said so, not shown as merely free.
#[test]
fn status_says_when_no_key_of_the_lease_exists() {
    let redis = testbed::RedisServer::start();
    let url = redis.url();
    let (code, stdout, stderr) = run_to_end(
        &[
            "status",
            "--lease-name",
            "web",
            "--redis-url",
            &url,
            "--key-prefix",
            "other:",
        ],
        &[],
    );
    assert_eq!(code, 0, "exited {code}; stderr:\n{stderr}");
    assert!(
        stdout.contains("no key of this lease exists: a lease never taken, or the replicas use another --key-prefix, --lease-name, or Redis (--redis-url, its database)"),
        "{stdout}"
    );
}

/// A reader that stopped reading (`| head`) is no failure of the command, which has done its
/// work: no panic, exit 0.
#[test]
fn an_answer_nobody_reads_ends_the_command_cleanly() {
    let redis = testbed::RedisServer::start();
    let url = redis.url();
    let (read, write) = nix::unistd::pipe().expect("a pipe");
    drop(read);
    let out = harness::command::leasehold_command(harness::leasehold_bin())
        .args(["status", "--lease-name", "web", "--redis-url", &url])
        .args(["--output", "json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(write))
        .output()
        .expect("run leasehold");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// A URL that only looks like one is refused with words, not a panic.
#[test]
fn an_odd_redis_url_is_refused_without_a_panic() {
    let (code, _stdout, stderr) = run_to_end(
        &[
            "status",
            "--lease-name",
            "web",
            "--redis-url",
            "a?user=b://c@d",
        ],
        &[],
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(code, 2, "exited {code}; stderr:\n{stderr}");
}

/// A query that the client library does not read for a TCP URL (`?db=3`: database 0 was used)
/// is refused, not dropped; and a Sentinel or seed at port 0, and a Sentinel URL's query or
/// segment after the database (`/m?db=2` was taken as the master's name).
#[test]
fn a_url_part_that_would_be_ignored_or_port_0_is_refused() {
    for (url, said) in [
        ("redis://127.0.0.1:6379?db=3", "`?db=` is not read"),
        ("rediss://127.0.0.1:6379/0?foo=bar", "`?foo=` is not read"),
        ("redis+cluster://127.0.0.1:0", "list the seed nodes"),
        (
            "redis+sentinel://127.0.0.1:0,127.0.0.2:1,127.0.0.3:1/m",
            "list the Sentinels",
        ),
        (
            "redis+sentinel://127.0.0.1:1,127.0.0.2:1,127.0.0.3:1/m/0/1",
            "the master name and a database, nothing else",
        ),
        (
            "redis+sentinel://127.0.0.1:1,127.0.0.2:1,127.0.0.3:1/m?db=2",
            "the master name and a database, nothing else",
        ),
    ] {
        refused(
            &["status", "--lease-name", "web", "--redis-url", url],
            &[&format!("--redis-url `{url}`: "), said],
        );
    }
}

/// A URL that the client library cannot parse is refused with its form, not the library's
/// type names: a port beyond 65535, a database that is no number or below 0 (which passed, and
/// failed only once Redis refused it).
#[test]
fn a_url_that_does_not_parse_is_refused_with_its_form() {
    for url in [
        "redis://127.0.0.1:99999",
        "redis://127.0.0.1:0",
        "redis://127.0.0.1:6379/abc",
        "redis://127.0.0.1:6379/-1",
    ] {
        refused(
            &["status", "--lease-name", "web", "--redis-url", url],
            &[
                &format!("--redis-url `{url}`: "),
                "the form is redis://[user:password@]host[:port][/database]",
            ],
        );
    }
}
