//! The error classification's tables: redaction, retry, and the replies of every version.

use redis::ServerErrorKind;

use super::*;

/// Redis's error reply `reply` (RESP, its line end optional) as the client gives it.
pub(crate) fn said(reply: &str) -> RedisError {
    let reply = format!("{}\r\n", reply.trim_end());
    let Ok(redis::Value::ServerError(err)) = redis::parse_redis_value(reply.as_bytes()) else {
        panic!("{reply} is an error reply");
    };
    err.into()
}

/// The error of an acquire that Redis answered with the error reply `reply`.
fn acquire_answered(reply: &str) -> LeaseError {
    LeaseError::from_redis("acquire", "leasehold:{a}", &said(reply))
}

#[test]
fn redact_url_hides_every_password_shape() {
    let cases = [
        ("redis://127.0.0.1:6380/0", "redis://127.0.0.1:6380/0"),
        ("redis://:s3cret@host:6379", "redis://:***@host:6379"),
        (
            "redis://app:s3cret@host:6379/2",
            "redis://app:***@host:6379/2",
        ),
        ("rediss://app:p@ss:w@rd@host", "rediss://app:***@host"),
        ("redis://s3cret@host", "redis://***@host"),
        (
            "redis://host/0?password=x&protocol=resp3",
            "redis://host/0?password=***&protocol=resp3",
        ),
        ("not a url", "not a url"),
        // Not a URL (a slash short): what comes before its last `@` may still be a password;
        // a word with no scheme before its `@` stays whole (a command's argument).
        ("redis:/:s3cret@host:6379", "redis:***@host:6379"),
        ("redis:s3cret@host", "redis:***@host"),
        ("deploy@host", "deploy@host"),
        ("git@github.com:org/repo", "git@github.com:org/repo"),
        ("--to=ops@example.com", "--to=ops@example.com"),
        // A Unix socket's password is its `pass` parameter.
        (
            "unix:///run/redis.sock?db=1&pass=s3cret",
            "unix:///run/redis.sock?db=1&pass=***",
        ),
        (
            "unix:///run/redis.sock?user=svc@corp&pass=s3cret",
            "unix:///run/redis.sock?user=svc@corp&pass=***",
        ),
        // Left unencoded, `/`, `?` and `#` break the URL; the password still goes.
        ("redis://:ab/cd@host:6379", "redis://:***@host:6379"),
        ("redis://app:12/cd@host/0", "redis://app:***@host/0"),
        (
            "redis://app:ab?cd@host/0?protocol=resp3",
            "redis://app:***@host/0?protocol=resp3",
        ),
        ("redis://app:ab#cd@host", "redis://app:***@host"),
        // A `?user=` before the scheme's `://` is no parameter of this URL (and no panic).
        ("a?user=b://c@d", "a?user=b://***@d"),
    ];
    for (url, want) in cases {
        assert_eq!(redact_url(url), want, "{url}");
    }
}

#[test]
fn configuration_faults_back_off_and_network_faults_retry_soon() {
    let op = "renew";
    let soon = LeaseError::Connection {
        op,
        detail: "reset".into(),
    };
    let back_off = LeaseError::NoPermission {
        op,
        detail: "no EVALSHA".into(),
    };
    assert_eq!(soon.retry(), Retry::Soon);
    assert_eq!(back_off.retry(), Retry::BackOff);
    assert!(soon.spoils_connection());
    assert!(!back_off.spoils_connection());
}

#[test]
fn scripting_that_redis_lacks_is_told_from_other_unknown_commands() {
    let cases = [
        (
            "ERR unknown command `evalsha`, with args beginning with: `abc`, `0`, ",
            true,
        ),
        (
            "ERR unknown command 'EVAL', with args beginning with: 'return 1', ",
            true,
        ),
        (
            "ERR unknown command `script`, with args beginning with: `load`, ",
            true,
        ),
        (
            "ERR unknown command `wait`, with args beginning with: `1`, ",
            false,
        ),
        (
            "ERR unknown command `evalshax`, with args beginning with: ",
            false,
        ),
        (
            "ERR Error running script (call to f_1): @user_script:3: @user_script: 3: Unknown Redis command called from Lua script",
            true,
        ),
        (
            "Unknown Redis command called from script script: 1a2b, on @user_script:9.",
            true,
        ),
        (
            "ERR Unknown command called from script script: 1a2b, on @user_script:1.",
            true,
        ),
        ("ERR syntax error", false),
    ];
    for (detail, want) in cases {
        assert_eq!(missing_scripting(detail), want, "{detail}");
    }
}

#[test]
fn a_readonly_inside_a_script_or_a_masterdown_is_a_replica_on_every_version() {
    let cases = [
        // Redis 6.2: the script's error wraps it.
        (
            "ERR",
            "Error running script (call to f_75): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica.",
        ),
        // Redis 7.0 and Valkey: the code itself.
        (
            "READONLY",
            "You can't write against a read only replica. script: 7569, on @user_script:1.",
        ),
        // A replica cut off from its master that serves no stale data, before the script runs.
        (
            "MASTERDOWN",
            "Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        ),
    ];
    for (code, message) in cases {
        let reply = format!("-{code} {message}\r\n");
        let ours = acquire_answered(&reply);
        assert!(
            matches!(ours, LeaseError::ReadOnly { .. }),
            "{code}: {ours:?}"
        );
        assert!(ours.is_answer());
    }
}

/// An error reply of no kind of its own is still an answer: readiness says Redis's words, not
/// "unreachable", and `leasehold_redis_up` stays 1. Each passes by itself (a save tried again, a
/// replica back, a script ended), so none ends a term at once.
#[test]
fn an_error_reply_of_no_kind_of_its_own_is_an_answer_that_passes() {
    let cases = [
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        "-NOREPLICAS Not enough good replicas to write.",
        "-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
        // Redis 6.2 wraps what a script ran into.
        "-ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -MISCONF Redis is configured to save RDB snapshots",
        "-ERR max number of clients reached",
    ];
    for reply in cases {
        let ours = acquire_answered(&format!("{reply}\r\n"));
        assert!(matches!(ours, LeaseError::ErrorReply { .. }), "{ours:?}");
        assert!(ours.is_answer() && !ours.is_lasting_refusal(), "{ours:?}");
        assert_eq!(ours.retry(), Retry::Soon, "{ours:?}");
    }
}

#[test]
fn a_refusal_that_does_not_pass_by_itself_is_told_from_a_passing_fault() {
    let op = "renew";
    // (error, lasting refusal, why)
    let cases = [
        (
            LeaseError::NoPermission {
                op,
                detail: "pexpire".into(),
            },
            true,
            "a missing permission stays missing",
        ),
        (
            LeaseError::ReadOnly { op },
            true,
            "a replica stays a replica",
        ),
        (
            LeaseError::OutOfMemory {
                op,
                detail: "OOM".into(),
            },
            true,
            "a full Redis with nothing to evict",
        ),
        (
            LeaseError::ErrorReply {
                op,
                detail: "MISCONF".into(),
            },
            false,
            "Redis tries a failed save again every few seconds",
        ),
        (
            LeaseError::Timeout {
                op,
                after: Duration::from_millis(400),
            },
            false,
            "a late reply may be on time next",
        ),
        (
            LeaseError::Connection {
                op,
                detail: "reset".into(),
            },
            false,
            "a broken link is dialled again",
        ),
        (LeaseError::Loading { op }, false, "a restart ends"),
        (
            LeaseError::TooFewReplicas {
                op,
                acked: 0,
                wanted: 1,
            },
            false,
            "a replica catches up",
        ),
    ];
    for (err, want, why) in cases {
        assert_eq!(err.is_lasting_refusal(), want, "{why}");
    }
}

#[test]
fn a_permission_refused_inside_a_script_is_named_on_every_engine() {
    let cases = [
        // Redis 7.0.
        "The user executing the script can't run this command or subcommand script: 7569, on @user_script:7.",
        // Valkey 9.1.
        "ACL failure in script: User no-info has no permissions to run the 'info' command script: on @user_script:7.",
        // Redis 7.0 and 6.2, a channel; Valkey 9.1's.
        "The user executing the script can't publish to the channel mentioned in the command script: 5874, on @user_script:1.",
        "Error running script (call to f_5874): @user_script:1: @user_script: 1: The user executing the script can't publish to the channel mentioned in the command",
        "ACL failure in script: No permissions to access a channel script: on @user_script:1.",
    ];
    for message in cases {
        let reply = format!("-ERR {message}\r\n");
        let ours = acquire_answered(&reply);
        assert!(
            matches!(ours, LeaseError::NoPermission { .. }),
            "{message}: {ours:?}"
        );
        assert!(ours.is_lasting_refusal(), "{message}");
    }
}

#[test]
fn the_client_library_type_names_and_the_primitives_names_stay_out_of_the_words() {
    let cases: [(RedisError, &str); 3] = [
        (
            (
                ErrorKind::AuthenticationFailed,
                "Password authentication failed",
            )
                .into(),
            "redis authentication failed while taking the lease: redis refused the password of user `app`",
        ),
        (
            (
                ErrorKind::Server(ServerErrorKind::ResponseError),
                "Redis server refused to switch database",
                "DB index is out of range".to_owned(),
            )
                .into(),
            "redis error while taking the lease: Redis server refused to switch database: DB index is out of range; the URL's database",
        ),
        (
            (ErrorKind::Io, "invalid peer certificate: UnknownIssuer").into(),
            "TLS to redis failed while taking the lease: the server's certificate comes from an issuer leasehold does not trust: the system's CAs did not sign it",
        ),
    ];
    let remedies = Remedies {
        unknown_issuer: "the system's CAs did not sign it".into(),
        ..Remedies::default()
    };
    for (err, want) in cases {
        let text = LeaseError::from_redis("acquire", "k", &err)
            .hint_at_credentials("app", &remedies)
            .to_string();
        assert!(text.starts_with(want), "{text}");
        for internal in [
            "AuthenticationFailed",
            "ResponseError",
            "UnknownIssuer",
            "`acquire`",
        ] {
            assert!(!text.contains(internal), "{text}");
        }
    }
}

#[test]
fn a_cluster_that_moved_the_slot_or_is_down_is_a_cluster_error() {
    let cases = [
        "-MOVED 3999 127.0.0.1:6381\r\n",
        "-ASK 3999 127.0.0.1:6381\r\n",
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
        "-CLUSTERDOWN The cluster is down\r\n",
        // Redis 7.0 with `cluster-allow-reads-when-down yes`, the cluster down.
        "-ERR Script attempted to execute a write command while the cluster is down and readonly script: bd6f, on @user_script:1.\r\n",
    ];
    for reply in cases {
        let ours = acquire_answered(reply);
        assert!(
            matches!(ours, LeaseError::Cluster { .. }),
            "{reply}: {ours:?}"
        );
        assert!(ours.spoils_connection() && ours.is_answer(), "{reply}");
        assert!(!ours.is_lasting_refusal(), "{reply}");
    }
}

#[test]
fn the_callers_remedies_follow_a_refusal_and_none_add_nothing() {
    let refused = || {
        LeaseError::from_redis(
            "renew",
            "k",
            &(ErrorKind::AuthenticationFailed, "refused").into(),
        )
    };
    let no_password = || acquire_answered("-NOAUTH Authentication required.\r\n");
    let untrusted = || {
        LeaseError::from_redis(
            "renew",
            "k",
            &(ErrorKind::Io, "invalid peer certificate: UnknownIssuer").into(),
        )
    };
    let remedies = Remedies {
        no_password: "give one".into(),
        refused_password: "it came from a file".into(),
        unknown_issuer: "trust another CA".into(),
    };
    let words =
        |err: LeaseError, remedies: &Remedies| match err.hint_at_credentials("app", remedies) {
            LeaseError::Authentication { detail, .. } | LeaseError::Tls { detail, .. } => detail,
            other => panic!("{other:?}"),
        };
    let cases: [(&dyn Fn() -> LeaseError, &str, &str); 3] = [
        (
            &refused,
            "of user `app` (a wrong password, a user that is disabled or unknown, or a Redis without a password set)",
            "; it came from a file",
        ),
        (
            &no_password,
            "redis asks for a password and none was given",
            "; give one",
        ),
        (&untrusted, "leasehold does not trust", ": trust another CA"),
    ];
    for (err, bare, added) in cases {
        let without = words(err(), &Remedies::default());
        assert!(without.ends_with(bare), "{without}");
        assert_eq!(words(err(), &remedies), format!("{without}{added}"));
    }
}

#[test]
fn an_error_a_script_ran_into_on_redis_6_2_is_read_by_its_own_code() {
    // (Redis 6.2's words of an error inside a script, the code found in them)
    let cases = [
        (
            "Error running script (call to f_d3c2): @user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value",
            Some("WRONGTYPE"),
        ),
        (
            "Error running script (call to f_4f93): @user_script:1: @user_script: 1: -OOM command not allowed when used memory > 'maxmemory'.",
            Some("OOM"),
        ),
        (
            "Error running script (call to f_75): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica.",
            Some("READONLY"),
        ),
        (
            "Error running script (call to f_5874): @user_script:1: @user_script: 1: The user executing the script can't publish to the channel mentioned in the command",
            None,
        ),
        (
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            None,
        ),
    ];
    for (detail, want) in cases {
        assert_eq!(words::script_code(detail), want, "{detail}");
    }
    let wrong = acquire_answered(&format!("-ERR {}", cases[0].0));
    assert!(matches!(wrong, LeaseError::WrongType { .. }), "{wrong:?}");
    let full = acquire_answered(&format!("-ERR {}", cases[1].0));
    assert!(matches!(full, LeaseError::OutOfMemory { .. }), "{full:?}");
}

/// A call bound derived from the timing (a third of a renew deadline) is said in whole
/// milliseconds, rounded up (the watchdog's last call may be bound below one): it read
/// `within 666.666666ms`.
#[test]
fn a_timeout_is_said_in_whole_milliseconds() {
    let words = |after| LeaseError::Timeout { op: "renew", after }.to_string();
    assert_eq!(
        words(Duration::from_nanos(666_666_666)),
        "redis did not answer within 667ms while renewing the lease"
    );
    assert_eq!(
        words(Duration::from_micros(500)),
        "redis did not answer within 1ms while renewing the lease"
    );
    assert_eq!(
        words(Duration::from_secs(5)),
        "redis did not answer within 5s while renewing the lease"
    );
}
