//! A wrong password for the ACL user: a clear error that names the user and where the password
//! comes from, with back-off instead of a retry storm, shown in readiness and the log.

use std::time::Duration;

use harness::contenders::{ActionLog, acting_work, unique_lease};
use harness::timings::QUICK_RETRY;
use leasehold::elector::{Elector, Role};
use leasehold::lease::{LeaseError, minimal_acl_rule};
use testbed::redis_server::RedisServer;
use testbed::wait::until;

use super::acl::{CALL, TTL, acl_lease};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_clear_error_with_back_off() {
    let redis = RedisServer::start();
    redis.set_acl_user("leasehold", &minimal_acl_rule("leasehold:", false), "right");
    let lease = acl_lease(
        &redis.url(),
        &unique_lease("wrongpass"),
        "pod-a",
        "leasehold",
        "wrong",
    );
    let err = lease.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::Authentication { .. }), "{err:?}");
    assert!(err.to_string().contains("authentication failed"), "{err}");

    let connections = |r: &RedisServer| -> u64 {
        let info: String = r.cmd(&["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    let timing = QUICK_RETRY;
    let before = connections(&redis);
    let elector = Elector::new(
        acl_lease(
            &redis.url(),
            &unique_lease("wrongpass"),
            "pod-a",
            "leasehold",
            "wrong",
        ),
        timing,
    )
    .unwrap();
    let mut status = elector.status();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(elector.run(
        shutdown.clone(),
        acting_work(ActionLog::default(), Duration::from_millis(5), None),
    ));
    let s = until(
        "the error in the status",
        &mut status,
        Duration::from_secs(2),
        |s| s.redis.last_error.is_some(),
    )
    .await;
    assert!(
        s.redis
            .last_error
            .unwrap()
            .contains("authentication failed")
    );
    // Three seconds of a retry period of 100 ms would be 30 dials per connection kind in a
    // retry storm; back-off doubles the pause from the retry period up to 30 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let dials = connections(&redis) - before;
    eprintln!("dials with a wrong password in 3 s: {dials}");
    assert!(dials <= 14, "{dials} dials in 3 s: a retry storm");
    assert!(!matches!(status.borrow().role, Role::Leader { .. }));
    shutdown.cancel();
    task.await.unwrap();
}

#[test]
fn a_wrong_password_shows_in_readiness_and_the_log() {
    use harness::replica::{FAST, Replica};
    let redis = RedisServer::start();
    redis.set_acl_user("leasehold", &minimal_acl_rule("leasehold:", false), "right");
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "wrong\n").unwrap();
    let pw = pw.to_str().unwrap().to_owned();
    let mut args = FAST.to_vec();
    args.extend([
        "--readiness",
        "member",
        "--redis-username",
        "leasehold",
        "--redis-password-file",
        &pw,
    ]);
    let a = Replica::spawn(
        &redis.url(),
        &unique_lease("wrongpass-binary"),
        "a",
        &args,
        &[],
    );
    let body = a.wait_not_ready_reason(Duration::from_secs(5));
    assert!(
        body.starts_with("not ready: redis authentication failed"),
        "{body}"
    );
    a.wait_events(
        "redis refuses leasehold; backing off until it is fixed",
        1,
        Duration::from_secs(5),
    );
    assert!(
        !a.log_text().contains("wrong\""),
        "the password is not logged"
    );
}

/// A refused password through the real binary: Redis's refusal in plain words, the user, and
/// where the password comes from (the file's flag, or the variable or file that holds the URL), never
/// the password itself.
#[test]
fn a_refused_password_names_the_user_and_where_the_password_comes_from() {
    use harness::replica::{assert_in_plain_words, run_to_end};
    let redis = RedisServer::builder()
        .args(["--requirepass", "right-pw"])
        .start();
    redis.set_acl_user("app", &minimal_acl_rule("leasehold:", false), "app-pw");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, "wrong-pw\n").unwrap();
    let file = file.to_str().unwrap();
    let url = redis.url();
    let with_password = format!("redis://app:wrong-pw@127.0.0.1:{}", redis.port());
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("redis-url: {with_password}\n")).unwrap();
    let config = config.to_str().unwrap();
    let status = ["status", "--lease-name", "web"];
    /// Flags, environment, words the refusal holds.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &["--redis-url", &url, "--redis-password-file", file],
            &[],
            &[
                "redis authentication failed while reading the lease: redis refused the password of user `default`",
                &format!("the password comes from --redis-password-file {file}"),
            ],
        ),
        (
            &[],
            &[("LEASEHOLD_REDIS_URL", &with_password)],
            &[
                "redis refused the password of user `app`",
                "the password comes from the URL in $LEASEHOLD_REDIS_URL",
            ],
        ),
        (
            &["--config", config],
            &[],
            &[
                "redis refused the password of user `app`",
                &format!("the password comes from the URL in `redis-url` in --config {config}"),
            ],
        ),
        (
            &["--redis-url", &url],
            &[],
            &[
                "redis authentication failed while reading the lease: redis asks for a password and none was given",
                "put it in a file and pass --redis-password-file, or in the URL of LEASEHOLD_REDIS_URL",
            ],
        ),
    ];
    for (flags, env, want) in cases {
        let mut args = status.to_vec();
        args.extend_from_slice(flags);
        let (code, _, stderr) = run_to_end(&args, env);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        for words in *want {
            assert!(stderr.contains(words), "want {words:?} in:\n{stderr}");
        }
        assert_in_plain_words(&stderr);
        for secret in ["wrong-pw", "right-pw", "app-pw"] {
            assert!(!stderr.contains(secret), "shows a password:\n{stderr}");
        }
    }
}

/// A username file ends as a person's editor leaves it, with a newline and maybe a space: the
/// name is read trimmed, as `--redis-username` is (no ACL user name holds whitespace). A space
/// after the name made every login fail for user `leasehold `.
#[test]
fn a_username_file_is_read_trimmed_as_the_flag_is() {
    let redis = RedisServer::start();
    redis.set_acl_user(
        "leasehold",
        &minimal_acl_rule("leasehold:", false),
        "s3cret",
    );
    let dir = tempfile::tempdir().unwrap();
    let (user, password) = (dir.path().join("user"), dir.path().join("password"));
    std::fs::write(&user, "leasehold \n").unwrap();
    std::fs::write(&password, "s3cret\n").unwrap();
    let mut args = harness::replica::FAST.to_vec();
    args.extend([
        "--redis-username-file",
        user.to_str().unwrap(),
        "--redis-password-file",
        password.to_str().unwrap(),
    ]);
    let a =
        harness::replica::Replica::spawn(&redis.url(), &unique_lease("user-file"), "a", &args, &[]);
    testbed::wait::wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
}
