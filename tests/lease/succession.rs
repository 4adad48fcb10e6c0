//! A new leader's "became leader" line says how the term before it ended, read from the real
//! log of real replicas on a real redis-server: a Redis that is new (or lost its data), a
//! release at shutdown, a holder killed (its term expired), a handover that names the
//! successor, and Redis losing its data under a running term; and replicas that all waited out
//! a new Redis's cooldown, whose later terms did not end with the data. The other followers of a
//! handover learn the successor as it takes the term.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica, run_to_end, step_down};
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

const WAIT: Duration = Duration::from_secs(15);

/// The `previous_term` of the last "became leader" line of whichever replica leads now, once a
/// replica other than those in `not` leads; its index and the field.
fn next_leader(replicas: &[Replica], not: &[usize]) -> (usize, String) {
    wait_for("a new leader", WAIT, || {
        (0..replicas.len())
            .filter(|i| !not.contains(i))
            .find(|&i| replicas[i].is_ready())
            // Readiness can flip before the log line is written and read: wait for both.
            .and_then(|i| {
                let line = replicas[i].events("became leader").pop()?;
                Some((
                    i,
                    line["previous_term"]
                        .as_str()
                        .unwrap_or("(none)")
                        .to_owned(),
                ))
            })
    })
}

/// The leader `first` shuts down (the next leader says `released`), then that one is killed
/// (the one after it says `expired`); the indices of the two new leaders.
fn released_then_expired(replicas: &[Replica], first: usize) -> (usize, usize) {
    replicas[first].signal(Signal::SIGTERM);
    let (second, previous) = next_leader(replicas, &[first]);
    assert_eq!(previous, "released", "{}", replicas[second].log_text());

    replicas[second].signal(Signal::SIGKILL);
    let (third, previous) = next_leader(replicas, &[first, second]);
    assert_eq!(previous, "expired", "{}", replicas[third].log_text());
    (second, third)
}

#[test]
fn a_new_leader_says_how_the_previous_term_ended() {
    let mut redis = RedisServer::start();
    let lease = unique_lease("succession");
    let spawn = |name: &str| Replica::spawn(&redis.url(), &lease, name, &FAST, &[]);
    let mut replicas = vec![spawn("a")];

    // A new Redis: the first leader waited out the data-loss cooldown.
    let (first, previous) = next_leader(&replicas, &[]);
    assert_eq!(previous, "data_loss", "{}", replicas[first].log_text());
    replicas.extend([spawn("b"), spawn("c"), spawn("d")]);

    let (second, third) = released_then_expired(&replicas, first);

    // A handover that names the successor.
    let to = (0..replicas.len())
        .find(|i| ![first, second, third].contains(i))
        .expect("one replica left");
    let (code, stdout, stderr) = run_to_end(
        &[
            "step-down",
            "--redis-url",
            &redis.url(),
            "--lease-name",
            &lease,
            "--to",
            &replicas[to].identity,
        ],
        &[],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (fourth, previous) = next_leader(&replicas, &[first, second, third]);
    assert_eq!(fourth, to);
    assert_eq!(previous, "handed_over", "{}", replicas[fourth].log_text());

    // Redis loses its data under the running term: the leader's renewal finds the lease gone,
    // and whoever leads after the cooldown says why.
    let before = replicas[fourth].events("became leader").len();
    redis.restart_empty();
    let previous = wait_for("a leader after the data loss", WAIT, || {
        [third, fourth].into_iter().find_map(|i| {
            let lines = replicas[i].events("became leader");
            let new = if i == fourth {
                &lines[before..]
            } else {
                &lines[1..]
            };
            new.last()
                .filter(|_| replicas[i].is_ready())
                .map(|l| l["previous_term"].as_str().unwrap_or("(none)").to_owned())
        })
    });
    assert_eq!(previous, "data_loss");
}

#[test]
fn followers_that_waited_out_the_first_cooldown_say_how_later_terms_ended() {
    let redis = RedisServer::start();
    let lease = unique_lease("succession-cooled");
    // All three start on a new Redis, so every one of them sees the data-loss cooldown before
    // the first term; the terms after it did not end with the data.
    let replicas: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|name| Replica::spawn(&redis.url(), &lease, name, &FAST, &[]))
        .collect();
    let (first, previous) = next_leader(&replicas, &[]);
    assert_eq!(previous, "data_loss", "{}", replicas[first].log_text());
    for r in &replicas {
        wait_for("every replica to follow the first leader", WAIT, || {
            (r.leader()["leader"] == replicas[first].identity.as_str()).then_some(())
        });
    }

    released_then_expired(&replicas, first);
}

/// A handover to a named replica reserves the next term for it for two retry periods (10 s
/// here); the other followers learn who leads when it takes the term, not at the reservation's
/// end (they used to name no leader until then, and never saw a shorter term).
#[test]
fn followers_learn_the_successor_of_a_handover_as_it_takes_the_term() {
    let redis = RedisServer::start();
    let lease = unique_lease("succession-seen");
    let timing = [
        "--lease-duration",
        "30s",
        "--renew-deadline",
        "20s",
        "--retry-period",
        "5s",
        "--no-data-loss-cooldown",
    ];
    let spawn = |name: &str| Replica::spawn(&redis.url(), &lease, name, &timing, &[]);
    let a = spawn("a");
    wait_for("a to lead", WAIT, || a.is_ready().then_some(()));
    let (b, c) = (spawn("b"), spawn("c"));
    for follower in [&b, &c] {
        follower.wait_events("following leader", 1, WAIT);
    }

    let (code, json, stderr) =
        step_down(&redis.url(), &lease, &["--to", &b.identity, "--wait", "5s"]);
    assert_eq!(code, 0, "{stderr}\n{json}");
    assert_eq!(json["leader"], b.identity.as_str(), "{json}");
    // Well inside the reservation: c heard of the new term, it did not wait the reservation out.
    let seen = c.wait_events("following leader", 2, Duration::from_secs(3));
    assert_eq!(seen[1]["leader"], b.identity.as_str(), "{}", c.log_text());
}
