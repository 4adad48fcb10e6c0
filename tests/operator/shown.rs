//! How a refusal shows what it refuses, through the real binary: a password never, a value's
//! control characters escaped, a long value cut short, a typed value that is not UTF-8 by its
//! flag; and its exit code kept with stderr gone.

use std::time::Duration;

use harness::replica::{exit_within, run_to_end, run_without_redis};

/// However a URL spells its password (a Unix socket's `?pass=`, or a password with `/`, `?` or
/// `#` left unencoded, which breaks the URL), the refusal shows `***`, never the password.
#[test]
fn a_refused_url_never_shows_its_password() {
    let mut flag = std::process::Command::new(harness::leasehold_bin());
    flag.args(["run", "--kubernetes", "off", "--lease-name", "web"])
        .args(["--http-addr", "127.0.0.1:0"])
        .args(["--redis-url", "unix:///run/redis.sock?pass=hunter2"]);
    let (code, stderr) = exit_within(flag, Duration::from_secs(20));
    assert_eq!(code, Some(2), "accepted: {stderr}");
    assert!(
        stderr.contains("a password on the command line shows in `ps`")
            && !stderr.contains("hunter2"),
        "{stderr}"
    );
    for url in [
        "redis://:hun/ter2@x:6379",
        "redis://app:hun#ter2@x",
        "redis://app:hun?ter2@x/0",
    ] {
        let env = [
            ("LEASEHOLD_REDIS_URL", url),
            ("LEASEHOLD_LEASE_NAME", "web"),
        ];
        let (code, _, stderr) = run_to_end(&["run", "--kubernetes", "off"], &env);
        assert_eq!(code, 2, "{url}: {stderr}");
        assert!(stderr.contains(":***@x"), "{url}: {stderr}");
        assert!(
            !stderr.contains("hun") && !stderr.contains("ter2"),
            "{url}: {stderr}"
        );
    }
    // No URL at all (a `:` or `//` missing), a password where the port goes, or a password
    // alone: any part may be the password, so none of it shows.
    for url in [
        "redis//:hunter2@x:6379",
        "rediss//:hunter2@x",
        "//:hunter2@x",
        ":hunter2@x",
        "redis://:hunter2",
        "hunter2",
        "redis//hunter2@x:6379",
        "hunter2@x:6379",
        "redis://:hun:hunter2",
        "redis://default:hunter2:6379",
        "redis://user:12345678hunter2",
        "redis+sentinel://h1:hunter2,h2:26379/m",
        "x?password=hun:hunter2",
    ] {
        let env = [
            ("LEASEHOLD_REDIS_URL", url),
            ("LEASEHOLD_LEASE_NAME", "web"),
        ];
        let (code, _, stderr) = run_to_end(&["status"], &env);
        assert_eq!(code, 2, "{url}: {stderr}");
        assert!(stderr.contains("***"), "{url}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{url}: {stderr}");
    }
}

/// With stderr gone (a full disk, a closed pipe), a refusal still ends with its exit code: the
/// words are lost, and nothing panics (101).
#[test]
fn a_refusal_with_stderr_gone_still_exits_with_its_code() {
    for (args, want) in [
        (
            &["status", "--lease-name", "web", "--redis-url", "nope"][..],
            2,
        ),
        (
            &["step-down", "--lease-name", "web", "--redis-url", "nope"],
            2,
        ),
        // No guard file: no term, said with --verbose.
        (&["guard", "--guard-file", "/nonexistent/guard", "-v"], 1),
        (&["guard"], 2),
    ] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
        let mut cmd = std::process::Command::new(harness::leasehold_bin());
        cmd.args(args).env_remove("LEASEHOLD_GUARD_FILE");
        let code = cmd
            .stderr(full.expect("/dev/full"))
            .status()
            .expect("run")
            .code();
        assert_eq!(code, Some(want), "{args:?}");
    }
}

/// A typed value that is not UTF-8 is refused naming its flag (or the command after `--`), as a
/// variable's is named; never showing it (a URL's password), and not blaming a path (which
/// may be any bytes) typed before it.
#[test]
fn an_argument_that_is_not_utf8_is_refused_naming_its_flag() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let garbled = OsStr::from_bytes(b"pr\xffd");
    let mut joined = b"--key-prefix=".to_vec();
    joined.extend(garbled.as_bytes());
    let url = OsStr::from_bytes(b"redis://u:hunter2\xff@127.0.0.1:1");
    let guard = OsStr::from_bytes(b"/tmp/g\xff");
    let mut guard_joined = b"--guard-file=".to_vec();
    guard_joined.extend(guard.as_bytes());
    let cases: [(Vec<&OsStr>, &str); 5] = [
        (
            vec![
                OsStr::from_bytes(&guard_joined),
                OsStr::new("--lease-name"),
                garbled,
            ],
            "the value of --lease-name is not UTF-8",
        ),
        (
            vec![
                OsStr::new("--guard-file"),
                guard,
                OsStr::new("--lease-name"),
                garbled,
            ],
            "the value of --lease-name is not UTF-8",
        ),
        (
            vec![OsStr::from_bytes(&joined)],
            "the value of --key-prefix is not UTF-8",
        ),
        (
            vec![OsStr::new("--redis-url"), url],
            "the value of --redis-url is not UTF-8",
        ),
        (
            vec![OsStr::new("--"), OsStr::new("echo"), garbled],
            "an argument of the command after `--` is not UTF-8",
        ),
    ];
    for (args, want) in cases {
        let mut cmd = std::process::Command::new(harness::leasehold_bin());
        cmd.args(["run", "--kubernetes", "off"]).args(&args);
        let (code, stderr) = exit_within(cmd, Duration::from_secs(20));
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(want),
            "{args:?}\n got: {stderr}\nwant: {want}"
        );
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
}

/// A refused value is shown with its control characters escaped (an escape sequence would act
/// on the operator's terminal, a line break split the message), and a long line cut short.
#[test]
fn a_refused_value_is_shown_escaped_and_cut_short() {
    let run = |args: &[&str]| exit_within(run_without_redis(args), Duration::from_secs(20));
    let (code, stderr) = run(&["--namespace", "a\x1b[31mRED\rb"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!stderr.contains(['\x1b', '\r']), "{stderr:?}");
    assert!(stderr.contains("`a\\u{1b}[31mRED\\rb`"), "{stderr:?}");
    // The command line parser's refusal, and a path a guard check names.
    let (code, stderr) = run(&["--lease-duration", "5\rx"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        !stderr.contains('\r') && stderr.contains("'5\\rx'"),
        "{stderr:?}"
    );
    let mut guard = std::process::Command::new(harness::leasehold_bin());
    guard.args([
        "guard",
        "--guard-file",
        "/nonexistent/a\x1b[31m/b",
        "--verbose",
    ]);
    let (code, stderr) = exit_within(guard, Duration::from_secs(20));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        !stderr.contains('\x1b') && stderr.contains("a\\u{1b}[31m/b"),
        "{stderr:?}"
    );
    // A long line keeps its head and its tail, where the rule is: a name, a path, a value of
    // clap's own refusal.
    let long = "a".repeat(100_000);
    for (flag, rule) in [
        ("--lease-name", "a Kubernetes object name is at most 253"),
        ("--config", "cannot read it"),
        ("--lease-duration", "expected a duration such as 15s"),
    ] {
        let (code, stderr) = run(&[flag, &long]);
        assert_eq!(code, Some(2), "{}", &stderr[..stderr.len().min(500)]);
        let shown = format!(
            "{} bytes: {}",
            stderr.len(),
            &stderr[..stderr.len().min(500)]
        );
        assert!(stderr.len() < 5_000, "{shown}");
        assert!(
            stderr.contains("characters left out") && stderr.contains(rule),
            "{shown}"
        );
    }
}
