//! Unit tests of flags to settings; every refusal rule is tested through the binary in
//! tests/operator/ (`cli.rs` and the files beside it that `refusal.rs` serves).

use std::time::Duration;

use super::*;
use crate::elector::Timing;
use crate::http::ReadinessMode;
use crate::lease::{LeaseName, Secret};

fn env() -> Environment {
    Environment {
        pod_name: Some("web-7d4f-x2x9".into()),
        pod_namespace: Some("shop".into()),
        rust_log: None,
        hostname: Some("host".into()),
        redis_url_on_command_line: false,
        redis_url_from: None,
    }
}

fn run(argv: &[&str]) -> Result<RunSettings, CliError> {
    let mut full = vec!["leasehold", "run"];
    full.extend_from_slice(argv);
    let cli = parse_from(&full)?;
    let Command::Run(args) = cli.command else {
        panic!("run")
    };
    args.resolve(&Environment {
        redis_url_on_command_line: on_command_line(&full, &["redis-url"]),
        ..env()
    })
}

fn error(argv: &[&str]) -> String {
    match run(argv) {
        Ok(s) => panic!("{argv:?} was accepted: {s:?}"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        }
    }
}

// Every refusal rule is tested through the real binary in tests/operator/.

#[test]
fn a_flag_is_typed_by_its_long_or_short_name_whatever_its_value() {
    use std::os::unix::ffi::OsStringExt;
    let typed = |arg: &[u8]| {
        let argv = [OsString::from("status"), OsString::from_vec(arg.to_vec())];
        on_command_line(argv, &["output", "o"])
    };
    for arg in [
        &b"--output"[..],
        b"--output=json",
        b"--output=pr\xffd",
        b"-o",
        b"-ojson",
    ] {
        assert!(typed(arg), "{}", String::from_utf8_lossy(arg));
    }
    for arg in [&b"--outputs"[..], b"-v", b"json", b"--"] {
        assert!(!typed(arg), "{}", String::from_utf8_lossy(arg));
    }
}

#[test]
fn defaults_follow_the_design() {
    let s = run(&[]).unwrap();
    assert_eq!(s.contender.timing, Timing::default());
    assert_eq!(s.contender.identity, "web-7d4f-x2x9");
    assert_eq!(s.contender.namespace, "shop");
    assert_eq!(
        s.contender.lease,
        LeaseSource::OwningWorkload {
            namespace: "shop".into(),
            pod: "web-7d4f-x2x9".into()
        }
    );
    assert_eq!(s.readiness, ReadinessMode::Member);
    assert_eq!(s.http_addr, "0.0.0.0:8080".parse().unwrap());
    assert!(s.contender.redis.options.cooldown_on_data_loss);
    assert_eq!(
        s.contender.kube.leader_label.as_deref(),
        Some("leasehold.io/leader")
    );
    assert!(s.contender.exec.is_none());
}

#[test]
fn durations_read_like_people_write_them() {
    let s = run(&[
        "--lease-duration",
        "2m",
        "--renew-deadline",
        "90s",
        "--retry-period",
        "500ms",
    ])
    .unwrap();
    assert_eq!(s.contender.timing.lease_duration, Duration::from_secs(120));
    assert_eq!(s.contender.timing.renew_deadline, Duration::from_secs(90));
    assert_eq!(s.contender.timing.retry_period, Duration::from_millis(500));
}

#[test]
fn an_hour_is_the_longest_duration_accepted() {
    let s = run(&[
        "--lease-duration",
        "1h",
        "--renew-deadline",
        "59m",
        "--retry-period",
        "1m",
        "--redis-wait-timeout",
        "1h",
        "--grace-period",
        "1h",
        "--",
        "sh",
    ])
    .unwrap();
    assert_eq!(s.contender.timing.lease_duration, Timing::MAX);
    assert_eq!(s.contender.exec.unwrap().grace_period, Timing::MAX);
    let err = error(&["--lease-duration", "3600001ms"]);
    assert!(
        err.starts_with("--lease-duration 1h 1ms: must be at most 1h"),
        "{err}"
    );
}

#[test]
fn lease_names_take_the_namespace_when_short() {
    let s = run(&["--lease-name", "web"]).unwrap();
    assert_eq!(
        s.contender.lease,
        LeaseSource::Named(LeaseName::new("shop/web").unwrap())
    );
    let s = run(&["--lease-name", "other/web"]).unwrap();
    assert_eq!(
        s.contender.lease,
        LeaseSource::Named(LeaseName::new("other/web").unwrap())
    );
    let s = run(&["--namespace", "other", "--lease-name", "other/web"]).unwrap();
    assert_eq!(
        s.contender.lease,
        LeaseSource::Named(LeaseName::new("other/web").unwrap())
    );
    // It used to take the name's namespace and drop the flag's in silence.
    let err = error(&["--namespace", "other", "--lease-name", "shop/web"]);
    assert_eq!(
        err,
        "--lease-name `shop/web`: names the namespace `shop`, but --namespace is `other`: give the name alone, or the same namespace"
    );
}

#[test]
fn the_command_after_the_separator_is_the_singleton() {
    let s = run(&["--grace-period", "3s", "--", "sh", "-c", "worker --once"]).unwrap();
    let exec = s.contender.exec.unwrap();
    assert_eq!(exec.command, vec!["sh", "-c", "worker --once"]);
    assert_eq!(exec.grace_period, Duration::from_secs(3));
}

#[test]
fn the_password_file_is_read_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pw");
    std::fs::write(&path, "hunter2\n").unwrap();
    let s = run(&["--redis-password-file", path.to_str().unwrap()]).unwrap();
    assert_eq!(
        s.contender
            .redis
            .options
            .password
            .as_ref()
            .map(Secret::expose),
        Some("hunter2")
    );
    assert!(!format!("{s:?}").contains("hunter2"));
    std::fs::write(&path, "\n").unwrap();
    let err = error(&["--redis-password-file", path.to_str().unwrap()]);
    assert!(err.ends_with("the file is empty"), "{err}");
}

/// Flags and settings printed for debugging show no secret: not a URL's password (which
/// LEASEHOLD_REDIS_URL may carry), not the command's.
#[test]
fn a_debug_print_of_the_flags_or_the_settings_shows_no_secret() {
    let argv = [
        "leasehold",
        "run",
        "--",
        "psql",
        "postgres://app:hunter3@db/app",
    ];
    let Command::Run(mut args) = parse_from(argv).unwrap().command else {
        panic!("run")
    };
    args.contender.redis.redis_url = "redis://:hunter2@redis:6379".into();
    let shown = format!("{args:?}");
    assert!(shown.contains("redis://:***@redis:6379"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
    let s = args.resolve(&env()).unwrap();
    let shown = format!("{s:?}");
    assert!(shown.contains("postgres://app:***@db/app"), "{shown}");
    assert!(
        !shown.contains("hunter2") && !shown.contains("hunter3"),
        "{shown}"
    );
}

fn write_config(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leasehold.yaml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap().to_owned();
    (dir, p)
}

#[test]
fn the_config_file_sets_what_flags_do_not() {
    let (_dir, path) = write_config(
        "lease-duration: 30s\nrenew-deadline: 20s\nreadiness: member\nno-events: true\nlease-name: web\n",
    );
    let s = run(&["--config", &path, "--lease-duration", "40s"]).unwrap();
    assert_eq!(
        s.contender.timing.lease_duration,
        Duration::from_secs(40),
        "the flag wins"
    );
    assert_eq!(
        s.contender.timing.renew_deadline,
        Duration::from_secs(20),
        "the file beats the default"
    );
    assert_eq!(s.readiness, ReadinessMode::Member);
    assert!(!s.contender.kube.events);
    assert_eq!(
        s.contender.lease,
        LeaseSource::Named(LeaseName::new("shop/web").unwrap())
    );
    // A switch quoted as a string (Helm's `quote`), in the spellings its variable takes.
    for on in ["\"true\"", "yes", "on", "1"] {
        let (_dir, path) = write_config(&format!("no-events: {on}\n"));
        let s = run(&["--config", &path]).unwrap_or_else(|e| panic!("{on}: {e}"));
        assert!(!s.contender.kube.events, "{on}");
    }
}

/// YAML would read `1.10` as the number 1.1 and `0x10` as 16: a replica configured by the file
/// would then use another lease than one given the same text by flag or variable.
#[test]
fn the_config_file_gives_text_as_written() {
    let (_dir, path) = write_config("lease-name: 1.10\nidentity: 0x10\nno-events: True\n");
    let s = run(&["--config", &path]).unwrap();
    assert_eq!(
        s.contender.lease,
        LeaseSource::Named(LeaseName::new("shop/1.10").unwrap())
    );
    assert_eq!(s.contender.identity, "0x10");
    assert!(!s.contender.kube.events);
}

/// A key of the file that conflicts with a given flag is refused, whichever of the two names
/// the conflict: the file must not win over the flag.
#[test]
fn a_file_key_that_a_given_flag_conflicts_with_is_refused() {
    let (dir, path) = write_config("redis-username: bob\n");
    let user = dir.path().join("user");
    std::fs::write(&user, "alice\n").unwrap();
    let given = [
        "--config",
        &path,
        "--redis-username-file",
        user.to_str().unwrap(),
    ];
    let refused = run(&given)
        .map(|s| s.contender.redis.options.username)
        .unwrap_err();
    let words = refused.to_string();
    assert!(
        words.contains("`redis-username` cannot be used with --redis-username-file"),
        "{words}"
    );
}

#[test]
fn a_password_in_the_url_is_accepted_from_the_environment() {
    let cli = parse_from(["leasehold", "run"]).unwrap();
    let Command::Run(mut args) = cli.command else {
        panic!()
    };
    args.contender.redis.redis_url = "redis://:hunter2@x:6379".into();
    let s = args.resolve(&env()).unwrap();
    assert_eq!(
        s.contender.redis.target.redacted_url(),
        "redis://:***@x:6379"
    );
}
