//! A watcher that comes back with `Last-Event-ID` is replayed the changes it missed; a replayed
//! event of a term that has ended reads as over, even before that term's deadline.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{Replica, run_to_end};
use harness::timing_flags;
use harness::timings::TEN_SECOND_TERM_QUICK_RETRY;
use testbed::RedisServer;
use testbed::wait::wait_for;

use crate::sse::{EventWatcher, id_parts};

const WAIT: Duration = Duration::from_secs(20);

/// A term of 10 s handed over at once: its deadline is some 9 s away when the watcher comes
/// back, and the replayed event of that term said `is_leader: true`.
#[test]
fn a_replayed_event_of_a_term_handed_over_before_its_deadline_reads_as_over() {
    let redis = RedisServer::start();
    let name = unique_lease("sse-replay-ended");
    let mut flags = timing_flags(&TEN_SECOND_TERM_QUICK_RETRY);
    flags.push("--no-data-loss-cooldown".into());
    let timing: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = Replica::spawn(&redis.url(), &name, "a", &timing, &[]);
    let watcher = EventWatcher::connect(a.http);
    let led = wait_for("a's event as leader", WAIT, || {
        let events = watcher.events();
        events.into_iter().find(|e| e.role() == "leader")
    });
    watcher.close();
    let b = Replica::spawn(&redis.url(), &name, "b", &timing, &[]);
    wait_for("b to follow a", WAIT, || {
        (b.leader()["leader"] == "a").then_some(())
    });
    let (code, _, err) = run_to_end(
        &[
            "step-down",
            "--redis-url",
            &redis.url(),
            "--lease-name",
            &name,
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let (owner, n) = id_parts(&led);
    let before = format!("{owner}:{}", n - 1);
    let back = EventWatcher::resume(a.http, Some(&before));
    let replayed = wait_for("the changes since a led, up to b's term", WAIT, || {
        let events = back.events();
        events
            .iter()
            .any(|e| e.role() == "follower" && e.json["leader"] == "b")
            .then_some(events)
    });
    let term = replayed
        .iter()
        .find(|e| e.role() == "leader")
        .unwrap_or_else(|| panic!("a's term replayed: {replayed:?}"));
    assert_eq!(term.json["is_leader"], false, "{}", term.json);
    assert_eq!(term.json["valid_for_ms"], 0, "{}", term.json);
}
