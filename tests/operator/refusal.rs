//! How this target runs bad input through the real binary and checks the refusal: exit code 2
//! and one message in plain words that says the rule, no panic; for `leasehold run`, a lease name
//! from the environment, and a run that a binary without the rule would start stopped after a
//! bound and reported as accepted.

use std::ffi::OsStr;
use std::time::Duration;

use harness::replica::{
    assert_in_plain_words, exit_within, run_to_end, run_to_end_with, run_without_redis,
};

pub fn refused(args: &[&str], env: &[(&str, &str)], want: &str) {
    refused_saying(args, env, &[want]);
}

/// Like [`refused`], for a message that must say each of `want`.
pub fn refused_saying(args: &[&str], env: &[(&str, &str)], want: &[&str]) {
    let (code, _stdout, stderr) = run_to_end(args, env);
    assert_refusal(args, code, &stderr, want);
}

/// Like [`refused`], with variables that need not be UTF-8.
pub fn refused_with(args: &[&str], env: &[(&str, &OsStr)], want: &str) {
    let (code, _stdout, stderr) = run_to_end_with(args, env);
    assert_refusal(args, code, &stderr, &[want]);
}

/// The run of `args` ended with exit code 2 and one message in plain words that says each of
/// `want`.
fn assert_refusal(args: &[&str], code: i32, stderr: &str, want: &[&str]) {
    assert_eq!(code, 2, "{args:?} exited {code}; stderr:\n{stderr}");
    for want in want {
        assert!(
            stderr.contains(want),
            "{args:?}\n got: {stderr}\nwant: {want}"
        );
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_in_plain_words(stderr);
}

/// `leasehold run` with a lease name from the environment (so that only the rule under test
/// can fail, and a flag can still override it) and `args`.
pub fn run_refused(args: &[&str], want: &str) {
    let mut full = vec!["run", "--kubernetes", "off"];
    full.extend_from_slice(args);
    refused(&full, &[("LEASEHOLD_LEASE_NAME", "web")], want);
}

/// Like [`run_refused`], for values that a binary without the rule would accept and then run
/// with: such a run is stopped after a bound and reported as accepted.
pub fn run_refused_not_run(args: &[&str], want: &str) {
    let mut full = vec!["--http-addr", "127.0.0.1:0"];
    full.extend_from_slice(args);
    let (code, stderr) = exit_within(run_without_redis(&full), Duration::from_secs(20));
    let Some(code) = code else {
        panic!("{args:?} was accepted: still running after 20s; stderr:\n{stderr}");
    };
    assert_refusal(args, code, &stderr, &[want]);
}
