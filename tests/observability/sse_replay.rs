//! A watcher that comes back with `Last-Event-ID` is replayed the changes it missed; a replayed
//! event of a term that has ended reads as over, even before that term's deadline.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{Replica, run_to_end};
use harness::timing_flags;
use harness::timings::TEN_SECOND_TERM_QUICK_RETRY;
use testbed::RedisServer;
use testbed::wait::wait_for;

use crate::sse::{EventWatcher, Seen, id_parts};

const WAIT: Duration = Duration::from_secs(20);

/// A 10 s term with a quick retry and no cooldown: the flags of every replica here.
fn flags() -> Vec<String> {
    let mut flags = timing_flags(&TEN_SECOND_TERM_QUICK_RETRY);
    flags.push("--no-data-loss-cooldown".into());
    flags
}

/// The event in which `replica` became leader, from a watcher closed after it.
fn leading_event(replica: &Replica) -> Seen {
    let watcher = EventWatcher::connect(replica.http);
    let led = wait_for("the event as leader", WAIT, || {
        watcher.events().into_iter().find(|e| e.role() == "leader")
    });
    watcher.close();
    led
}

/// A term of 10 s handed over at once: its deadline is some 9 s away when the watcher comes
/// back, and the replayed event of that term said `is_leader: true`.
#[test]
fn a_replayed_event_of_a_term_handed_over_before_its_deadline_reads_as_over() {
    let redis = RedisServer::start();
    let name = unique_lease("sse-replay-ended");
    let flags = flags();
    let timing: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = Replica::spawn(&redis.url(), &name, "a", &timing, &[]);
    let led = leading_event(&a);
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

/// An identity beyond ASCII (`pöd`, which identities allow) is in every event id: a watcher
/// resuming with such an id is replayed what it missed. The header was read as ASCII alone, so
/// it got only the current event.
#[test]
fn a_resume_under_an_identity_beyond_ascii_is_replayed() {
    let redis = RedisServer::start();
    let name = unique_lease("sse-replay-utf8");
    let flags = flags();
    let timing: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = Replica::spawn(&redis.url(), &name, "pöd", &timing, &[]);
    let led = leading_event(&a);
    let (owner, n) = id_parts(&led);
    assert!(n >= 1, "{led:?}");
    let back = EventWatcher::resume(a.http, Some(&format!("{owner}:0")));
    let replayed = wait_for("the replay from event 1", WAIT, || {
        let events = back.events();
        (!events.is_empty()).then_some(events)
    });
    assert_eq!(id_parts(&replayed[0]).1, 1, "{replayed:?}");
}

/// `Accept` split over two header lines is one list (RFC 9110): the second line's
/// `text/event-stream` asks for the stream. Only the first line was read.
#[test]
fn an_accept_header_split_over_two_lines_is_read_whole() {
    use std::io::{Read, Write};
    let redis = RedisServer::start();
    let a = Replica::spawn(&redis.url(), &unique_lease("sse-accept"), "a", &[], &[]);
    wait_for("the port", WAIT, || a.get("/healthz"));
    let mut stream = std::net::TcpStream::connect(a.http).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("a timeout");
    let request =
        "GET /leader HTTP/1.0\r\nAccept: application/json\r\nAccept: text/event-stream\r\n\r\n";
    stream.write_all(request.as_bytes()).expect("send");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.contains("content-type: text/event-stream"), "{head}");
}
