//! Leadership pushed to sidecars: `GET /leader` as server-sent events and `--status-file`, with
//! real replicas and a real Redis; watchers that never read do not hold the elector back; and
//! the time from a step-down to a watcher's event and to the status file's rename, measured.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::contenders::{lease, steady_timing, summary, unique_lease, until_leading};
use harness::replica::{FAST, Replica};
use leasehold::board::Board;
use leasehold::elector::{Elector, Leadership};
use leasehold::http::ReadinessMode;
use leasehold::http::{self, Endpoints};
use leasehold::lease::LeaseName;
use leasehold::metrics::Metrics;
use leasehold::status_file::{StatusDocument, StatusFile};
use nix::sys::signal::Signal;
use testbed::RedisServer;
use testbed::wait::wait_for;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// One event or file state: when it arrived, its role and token, and an event's id.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    at: Instant,
    pub(crate) json: serde_json::Value,
    id: Option<String>,
}

impl Seen {
    pub(crate) fn role(&self) -> &str {
        self.json["role"].as_str().unwrap_or_default()
    }
}

/// A watcher of `GET /leader` with `Accept: text/event-stream`, on its own thread, keeping
/// every event with the instant it arrived; `ended` is set when the server ended the stream.
pub(crate) struct EventWatcher {
    seen: Arc<Mutex<Vec<Seen>>>,
    ended: Arc<AtomicBool>,
    stream: TcpStream,
}

impl EventWatcher {
    pub(crate) fn connect(addr: SocketAddr) -> Self {
        Self::resume(addr, None)
    }

    /// A watcher that sends `Last-Event-ID: last_event_id` when given, as a reconnecting
    /// `EventSource` does.
    pub(crate) fn resume(addr: SocketAddr, last_event_id: Option<&str>) -> Self {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let resume = last_event_id
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        // HTTP/1.0: the body is the raw event stream, ended by closing the connection.
        stream
            .write_all(
                format!("GET /leader HTTP/1.0\r\nAccept: text/event-stream\r\n{resume}\r\n")
                    .as_bytes(),
            )
            .expect("send the request");
        let kept = stream.try_clone().expect("a handle on the stream");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(AtomicBool::new(false));
        let (s, e) = (seen.clone(), ended.clone());
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stream).lines();
            let mut head = true;
            let mut id = None;
            while let Some(Ok(line)) = lines.next() {
                if head {
                    if line.starts_with("HTTP/") {
                        assert!(line.contains(" 200"), "{line}");
                    }
                    head = !line.is_empty();
                    continue;
                }
                if let Some(value) = line.strip_prefix("id: ") {
                    id = Some(value.to_owned());
                }
                if let Some(data) = line.strip_prefix("data: ") {
                    let json = serde_json::from_str(data).expect("an event's data is JSON");
                    s.lock().unwrap().push(Seen {
                        at: Instant::now(),
                        json,
                        id: id.take(),
                    });
                }
            }
            e.store(true, Ordering::SeqCst);
        });
        Self {
            seen,
            ended,
            stream: kept,
        }
    }

    /// Hangs up, as a client whose connection broke.
    pub(crate) fn close(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    pub(crate) fn events(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The first event after `after` that `pred` accepts.
    fn first_after(&self, after: Instant, pred: impl Fn(&Seen) -> bool) -> Option<Seen> {
        self.events().into_iter().find(|e| e.at >= after && pred(e))
    }
}

/// A watcher of a status file: reads it every 100 µs on its own thread and keeps every new
/// content with the instant it was first seen.
struct FileWatcher {
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl FileWatcher {
    fn start(path: PathBuf) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut last = String::new();
            while !halt.load(Ordering::SeqCst) {
                if let Ok(text) = std::fs::read_to_string(&path)
                    && text != last
                {
                    // Written through a rename: never half a JSON.
                    let json = serde_json::from_str(&text).expect("the status file is whole JSON");
                    s.lock().unwrap().push(Seen {
                        at: Instant::now(),
                        json,
                        id: None,
                    });
                    last = text;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        Self { seen, stop }
    }

    fn first_after(&self, after: Instant, pred: impl Fn(&Seen) -> bool) -> Option<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .find(|e| e.at >= after && pred(e))
            .cloned()
    }
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("read the status file");
    serde_json::from_str(&text).expect("the status file is JSON")
}

fn with_status_file(path: &str) -> Vec<&str> {
    let mut args = FAST.to_vec();
    args.extend(["--status-file", path]);
    args
}

#[test]
fn events_and_the_status_file_follow_every_transition_and_the_stream_ends_at_exit() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let name = unique_lease("sse-transitions");
    let (file_a, file_b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let (path_a, path_b) = (file_a.display().to_string(), file_b.display().to_string());
    let mut a = Replica::spawn(&redis.url(), &name, "a", &with_status_file(&path_a), &[]);
    wait_for("a leads", WAIT, || a.is_ready().then_some(()));
    let on_a = EventWatcher::connect(a.http);
    let first = wait_for("a's first event", WAIT, || on_a.events().first().cloned());
    assert_eq!(first.json["is_leader"], true, "{}", first.json);
    let token_a = first.json["token"].as_u64().expect("a token");
    assert_eq!(read_json(&file_a)["term"], token_a);

    let b = Replica::spawn(&redis.url(), &name, "b", &with_status_file(&path_b), &[]);
    wait_for("b follows a", WAIT, || {
        (b.leader()["leader"] == "a").then_some(())
    });
    let on_b = EventWatcher::connect(b.http);
    let first = wait_for("b's first event", WAIT, || on_b.events().first().cloned());
    assert_eq!(
        (first.role(), first.json["leader"].as_str()),
        ("follower", Some("a")),
        "{}",
        first.json
    );

    a.signal(Signal::SIGTERM);
    assert_eq!(
        a.wait_exit(WAIT),
        0,
        "a exits, its watcher does not hold it"
    );
    wait_for("a's stream ends", WAIT, || {
        on_a.ended.load(Ordering::SeqCst).then_some(())
    });
    let roles: Vec<_> = on_a.events().iter().map(|e| e.role().to_owned()).collect();
    assert_eq!(
        roles,
        ["leader", "follower", "stopped"],
        "{:?}",
        on_a.events()
    );
    let stepped = &on_a.events()[1].json;
    assert_eq!(stepped["last_step_down"]["reason"], "shutdown", "{stepped}");
    assert_eq!(stepped["is_leader"], false);
    assert_eq!(read_json(&file_a)["state"], "stopped");

    let took_over = wait_for("b's event of its own term", WAIT, || {
        on_b.events()
            .into_iter()
            .find(|e| e.json["is_leader"] == true)
    });
    let token_b = took_over.json["token"].as_u64().expect("b's token");
    assert!(token_b > token_a, "{token_b} after {token_a}");
    wait_for("b's status file shows its term", WAIT, || {
        (read_json(&file_b)["term"] == token_b).then_some(())
    });
    // Only changes are sent: b's renewals since did not add events.
    let roles: Vec<_> = on_b.events().iter().map(|e| e.role().to_owned()).collect();
    assert!(roles.ends_with(&["leader".to_owned()]), "{roles:?}");
}

/// An event id: `<owner id>:<n>`.
pub(crate) fn id_parts(seen: &Seen) -> (String, u64) {
    let id = seen.id.as_deref().expect("every event has an id");
    let (owner, n) = id.rsplit_once(':').expect("<owner id>:<n>");
    (owner.to_owned(), n.parse().expect("a number"))
}

#[test]
fn a_watcher_that_comes_back_with_its_last_event_id_gets_every_change_it_missed() {
    let redis = RedisServer::start();
    let name = unique_lease("sse-resume");
    let a = Replica::spawn(&redis.url(), &name, "a", &FAST, &[]);
    wait_for("a leads", WAIT, || a.is_ready().then_some(()));
    let b = Replica::spawn(&redis.url(), &name, "b", &FAST, &[]);
    wait_for("b follows a", WAIT, || {
        (b.leader()["leader"] == "a").then_some(())
    });
    let away = EventWatcher::connect(b.http);
    let last = wait_for("b's first event", WAIT, || away.events().first().cloned());
    assert_eq!(last.json["leader"], "a", "{}", last.json);
    let (owner, had) = id_parts(&last);
    assert!(owner.starts_with("b-"), "{owner}");
    away.close();

    // While it is away, a shuts down and b takes over.
    a.signal(Signal::SIGTERM);
    wait_for("b leads", WAIT, || b.is_ready().then_some(()));
    let back = EventWatcher::resume(b.http, last.id.as_deref());
    let caught_up = wait_for("the missed changes up to b's term", WAIT, || {
        let events = back.events();
        events.last().filter(|e| e.json["is_leader"] == true)?;
        Some(events)
    });
    let numbers: Vec<u64> = caught_up.iter().map(|e| id_parts(e).1).collect();
    let want: Vec<u64> = (had + 1..had + 1 + numbers.len() as u64).collect();
    assert_eq!(
        numbers, want,
        "every change after {had}, in order: {caught_up:?}"
    );
    assert!(
        caught_up.iter().all(|e| id_parts(e).0 == owner),
        "{caught_up:?}"
    );
    let now = caught_up.last().expect("b's term").clone();

    // No id, another process's id, or the last id itself: the current status at once, under
    // the last change's id.
    let a_id = format!("a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e:{had}");
    for resume in [None, Some(a_id.as_str()), now.id.as_deref()] {
        let watcher = EventWatcher::resume(b.http, resume);
        let first = wait_for("the current status", WAIT, || {
            watcher.events().first().cloned()
        });
        assert_eq!(first.id, now.id, "{resume:?}");
        assert_eq!(first.json["is_leader"], true, "{resume:?}: {}", first.json);
    }
    // Two lease durations on, past the deadline b's first event carried: the missed changes
    // end with b's term as it is now, renewed.
    let since = Instant::now();
    wait_for("b to lead on, renewing", WAIT, || {
        (since.elapsed() > Duration::from_secs(3) && b.is_ready()).then_some(())
    });
    let later = EventWatcher::resume(b.http, last.id.as_deref());
    let again = wait_for("the missed changes again", WAIT, || {
        Some(later.events()).filter(|e| e.len() == caught_up.len())
    });
    assert_eq!(again.last().unwrap().json["is_leader"], true, "{again:?}");
}

#[test]
fn many_watchers_that_never_read_do_not_hold_back_a_step_down_or_the_exit() {
    let redis = RedisServer::start();
    let name = unique_lease("sse-slow");
    let mut a = Replica::spawn(&redis.url(), &name, "a", &FAST, &[]);
    wait_for("a leads", WAIT, || a.is_ready().then_some(()));
    let b = Replica::spawn(&redis.url(), &name, "b", &FAST, &[]);
    wait_for("b follows a", WAIT, || {
        (b.leader()["leader"] == "a").then_some(())
    });
    // Fifty watchers that ask and never read a byte, and one that reads.
    let idle: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(a.http).expect("connect");
            s.write_all(b"GET /leader HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\n\r\n")
                .expect("send");
            s
        })
        .collect();
    let reading = EventWatcher::connect(a.http);
    wait_for("the reading watcher's first event", WAIT, || {
        reading.events().first().cloned()
    });
    let asked = Instant::now();
    a.signal(Signal::SIGTERM);
    let stepped = wait_for("the step-down event", WAIT, || {
        reading.first_after(asked, |e| e.role() == "follower")
    });
    let to_event = stepped.at - asked;
    wait_for("b leads", WAIT, || b.is_ready().then_some(()));
    let to_new_leader = asked.elapsed();
    assert_eq!(a.wait_exit(WAIT), 0);
    let to_exit = asked.elapsed();
    eprintln!(
        "with 50 idle watchers: SIGTERM → step-down event {to_event:?}, → b ready {to_new_leader:?}, → a exited {to_exit:?}"
    );
    assert!(to_event < Duration::from_secs(2), "{to_event:?}");
    assert!(to_new_leader < Duration::from_secs(3), "{to_new_leader:?}");
    drop(idle);
}

/// The step-down instants of 60 terms, each ended by its work, against when a watcher over
/// HTTP received the step-down event and when the status file showed it; with a watcher that
/// never reads (dropped) and twenty idle HTTP watchers beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_reaches_a_watcher_and_the_status_file_within_milliseconds() {
    const SAMPLES: usize = 60;
    let redis = RedisServer::start();
    let name = unique_lease("sse-latency");
    let lease = lease(&redis.url(), &name, "m", false);
    let key = lease.keys().lease.clone();
    let clock = lease.clock().clone();
    let elector = Elector::new(lease, steady_timing()).unwrap();
    let board = Board::new(elector.status().borrow().clone());
    let elector = elector.with_hooks(Arc::new(board.clone()));
    let watchers = board.watchers().clone();
    let mut status = elector.status();
    let stop = CancellationToken::new();
    let endpoints = Endpoints::new(
        board.subscribe(),
        Arc::new(Metrics::new("m", &name)),
        ReadinessMode::Member,
        key.clone(),
        clock.clone(),
    )
    .with_watchers(watchers.clone());
    let (addr, serve) = http::bind("127.0.0.1:0".parse().unwrap(), endpoints, stop.clone())
        .await
        .expect("bind");
    tokio::spawn(serve);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("leader.json");
    let (k, c) = (key.clone(), clock.clone());
    let _writer = StatusFile::claim(file.clone(), &LeaseName::new(name.as_str()).unwrap())
        .expect("claim the status file")
        .spawn(
            &watchers,
            board.subscribe(),
            move |s| StatusDocument::json(s, &k, c.now(), c.wall_lead(), None),
            stop.clone(),
        );
    let never_reads = watchers.subscribe(1);
    let idle: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.write_all(b"GET /leader HTTP/1.1\r\nHost: m\r\nAccept: text/event-stream\r\n\r\n")
                .expect("send");
            s
        })
        .collect();
    let events = EventWatcher::connect(addr);
    let files = FileWatcher::start(file.clone());

    let end_term = Arc::new(tokio::sync::Notify::new());
    let trigger = end_term.clone();
    let run = tokio::spawn(elector.run(stop.clone(), move |l: Leadership| {
        let end = trigger.clone();
        async move {
            tokio::select! {
                _ = end.notified() => {}
                _ = l.lost() => {}
            }
            Ok::<(), String>(())
        }
    }));

    let (mut to_event, mut to_file) = (Vec::new(), Vec::new());
    let mut follower_seen_in_file = 0;
    for _ in 0..SAMPLES {
        let token = until_leading("a term", &mut status, WAIT)
            .await
            .token()
            .map(|t| t.0);
        // Both watchers have seen the term before it ends.
        let is_term = |e: &Seen| e.role() == "leader" && e.json["token"].as_u64() == token;
        let since = Instant::now() - WAIT;
        testbed::wait::eventually("the term's event", WAIT, || async {
            events.first_after(since, is_term)
        })
        .await;
        let in_file = |e: &Seen| {
            e.json["state"] == "leading_until_deadline" && e.json["term"].as_u64() == token
        };
        testbed::wait::eventually("the term in the file", WAIT, || async {
            files.first_after(since, in_file)
        })
        .await;
        let ended = Instant::now();
        end_term.notify_one();
        let stepped = |e: &Seen| {
            e.role() == "follower" && e.json["last_step_down"]["token"].as_u64() == token
        };
        let event = testbed::wait::eventually("the step-down event", WAIT, || async {
            events.first_after(ended, stepped)
        })
        .await;
        // The file may have moved on to the next term before a poll saw the step-down (the
        // elector contends again at once); that state names the step-down too, and was renamed
        // later: an upper bound.
        let shows_step_down = |e: &Seen| e.json["last_step_down"]["token"].as_u64() == token;
        let written = testbed::wait::eventually("the step-down in the file", WAIT, || async {
            files.first_after(ended, shows_step_down)
        })
        .await;
        if written.json["state"] == "follower" {
            follower_seen_in_file += 1;
        }
        to_event.push(event.at - ended);
        to_file.push(written.at - ended);
    }
    eprintln!(
        "step-down → event received by an SSE watcher: {}",
        summary(&to_event)
    );
    eprintln!(
        "step-down → status file renamed (seen by a 100 µs poll; {follower_seen_in_file} of {SAMPLES} saw the follower state itself, the others the next term's, an upper bound): {}",
        summary(&to_file)
    );
    let p99 = |v: &[Duration]| {
        let mut s = v.to_vec();
        s.sort();
        s[((s.len() - 1) as f64 * 0.99).round() as usize]
    };
    // Loose bounds: the machine is shared; the figures are in the output.
    assert!(
        p99(&to_event) < Duration::from_millis(500),
        "{}",
        summary(&to_event)
    );
    assert!(
        p99(&to_file) < Duration::from_millis(500),
        "{}",
        summary(&to_file)
    );
    assert_eq!(
        watchers.count(),
        22,
        "the watcher that never read was dropped; the 21 over HTTP and the status file stay"
    );
    drop(never_reads);
    stop.cancel();
    tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    drop(idle);
}
