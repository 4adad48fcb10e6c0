//! Which failure a dial that reached no master reports, one sentence per row.

use super::*;
use crate::lease::error::tests::said;

fn link() -> RedisError {
    std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into()
}

fn refused() -> RedisError {
    (
        ErrorKind::AuthenticationFailed,
        "Password authentication failed",
    )
        .into()
}

fn other_mode() -> RedisError {
    (ErrorKind::InvalidClientConfig, "no Redis Cluster node").into()
}

/// A seed's own failure, past the credentials (`took`) or not.
fn at_seed(err: RedisError, took: bool) -> Failure {
    Failure {
        err,
        at_master: false,
        took,
    }
}

/// A failure of the node a seed's redirect named.
fn at_master(err: RedisError) -> Failure {
    Failure {
        err,
        at_master: true,
        took: true,
    }
}

/// What an error is, in a word.
fn word(err: &RedisError) -> String {
    match (err.kind(), err.code()) {
        (ErrorKind::AuthenticationFailed, _) => "refused".into(),
        (ErrorKind::InvalidClientConfig, _) => "mode".into(),
        (_, Some(code)) => code.to_owned(),
        (_, None) => "link".into(),
    }
}

#[test]
fn a_dial_that_reached_no_master_reports_what_the_lease_would_meet() {
    let cases: Vec<(Vec<Failure>, &str, &str)> = vec![
        (
            vec![
                at_seed(refused(), false),
                at_seed(refused(), false),
                at_seed(link(), false),
            ],
            "refused",
            "a password every live node refuses, a seed down: no node took it",
        ),
        (
            vec![
                at_seed(refused(), false),
                at_master(link()),
                at_master(link()),
            ],
            "link",
            "a node without the user, the master dead: the others took the password",
        ),
        (
            vec![
                at_seed(refused(), false),
                at_master(refused()),
                at_seed(link(), false),
            ],
            "refused",
            "the master a redirect named refuses it, a seed down: the master's word",
        ),
        (
            vec![
                at_seed(said("-NOPERM no permissions"), true),
                at_master(link()),
            ],
            "link",
            "one replica with an older rule, the master dead",
        ),
        (
            vec![
                at_seed(said("-NOPERM no permissions"), true),
                at_seed(said("-NOPERM no permissions"), true),
            ],
            "NOPERM",
            "a rule that lacks a command on every node",
        ),
        (
            vec![
                at_seed(said("-LOADING loading"), true),
                at_seed(refused(), false),
            ],
            "LOADING",
            "the master loading, another node without the user: the loading passes",
        ),
        (
            vec![at_master(other_mode()), at_seed(link(), false)],
            "mode",
            "a redirect to a Redis outside cluster mode",
        ),
        (
            vec![
                at_seed(said("-NOAUTH Authentication required."), false),
                at_seed(said("-NOAUTH Authentication required."), false),
            ],
            "NOAUTH",
            "no password given to nodes that ask for one",
        ),
        (
            vec![
                at_seed(said("-CLUSTERDOWN The cluster is down"), true),
                at_seed(link(), false),
            ],
            "CLUSTERDOWN",
            "a cluster that is down says more than a lost link",
        ),
    ];
    for (failed, want, why) in cases {
        assert_eq!(word(&reason(failed)), want, "{why}");
    }
}
