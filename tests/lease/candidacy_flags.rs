//! The candidate check's and the status file's flags: every bad value is refused with exit code 2,
//! naming the flag, the value and the rule.

use std::time::Duration;

use harness::replica::exit_within;

#[test]
fn every_candidate_check_and_status_file_flag_refuses_bad_input_with_exit_code_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--candidate-check", "https://127.0.0.1:8443/healthz"],
            "--candidate-check `https://127.0.0.1:8443/healthz`: must be an http:// URL to a loopback address",
        ),
        (
            &["--candidate-check", "http://10.1.2.3:8080/healthz"],
            "--candidate-check `http://10.1.2.3:8080/healthz`: must be an http:// URL to a loopback address",
        ),
        (
            &["--candidate-check", "http://127.0.0.1:0/"],
            "--candidate-check `http://127.0.0.1:0/`: the port must be a number from 1 to 65535",
        ),
        (
            &["--candidate-check-command", " "],
            "--candidate-check-command ` `: must not be empty",
        ),
        (
            &[
                "--candidate-check",
                "http://127.0.0.1:1/",
                "--candidate-check-command",
                "true",
            ],
            "the argument '--candidate-check <URL>' cannot be used with '--candidate-check-command <CMD>'",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-period",
                "1ns",
            ],
            "--candidate-check-period `1ns`: must be at least 10ms",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-period",
                "soon",
            ],
            "invalid value 'soon' for '--candidate-check-period <CANDIDATE_CHECK_PERIOD>'",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-timeout",
                "20s",
            ],
            "--candidate-check-timeout `20s`: must be at least 10ms and no longer than --candidate-check-period (10s)",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-failure-threshold",
                "0",
            ],
            "--candidate-check-failure-threshold `0`: must be at least 1",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-success-threshold",
                "0",
            ],
            "--candidate-check-success-threshold `0`: must be at least 1",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-success-threshold",
                "many",
            ],
            "invalid value 'many' for '--candidate-check-success-threshold <N>'",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-initial-delay",
                "1x",
            ],
            "invalid value '1x' for '--candidate-check-initial-delay <CANDIDATE_CHECK_INITIAL_DELAY>'",
        ),
        (
            &["--candidate-check-period", "5s"],
            "--candidate-check-period `5s`: only with --candidate-check or --candidate-check-command",
        ),
        (
            &["--candidate-check-initial-delay", "5s"],
            "--candidate-check-initial-delay `5s`: only with --candidate-check or --candidate-check-command",
        ),
        (
            &["--status-file", "/nonexistent-dir/leader.json"],
            "--status-file `/nonexistent-dir/leader.json`: must name a file in an existing directory",
        ),
        (
            &["--status-file", "/"],
            "--status-file `/`: must name a file in an existing directory",
        ),
        (
            &["--status-file", "/tmp"],
            "--status-file `/tmp`: must name a file in an existing directory",
        ),
        // A trailing slash names a directory: it was taken for its last name, and never written.
        (
            &["--status-file", "/tmp/leasehold-no-such-dir/"],
            "--status-file `/tmp/leasehold-no-such-dir/`: must name a file in an existing directory",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-period",
                "2h",
            ],
            "--candidate-check-period 2h: must be at most 1h",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-initial-delay",
                "100000h",
            ],
            "--candidate-check-initial-delay 11years 4months 27days 3h 45m 36s: must be at most 1h",
        ),
        (
            &[
                "--candidate-check-command",
                "true",
                "--candidate-check-failure-threshold",
                "4000000000",
            ],
            "--candidate-check-failure-threshold `4000000000`: times --candidate-check-period (10s) must be at most 1h",
        ),
    ];
    for (args, want) in cases {
        // A value accepted runs (against no Redis): stopped after a bound and said so.
        let mut run = harness::replica::run_without_redis(&["--lease-name", "web"]);
        run.args(["--http-addr", "127.0.0.1:0"]).args(*args);
        let (code, stderr) = exit_within(run, Duration::from_secs(20));
        assert_eq!(code, Some(2), "{args:?} exited {code:?}; stderr:\n{stderr}");
        assert!(
            stderr.contains(want),
            "{args:?}\n got: {stderr}\nwant: {want}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
