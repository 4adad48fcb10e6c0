//! The HTTP port under a flood, against a real `leasehold run` on a real redis-server: a
//! request whose head never finishes is closed within seconds, connections beyond the cap are
//! refused while `/healthz` and `/readyz` still answer at once, event streams beyond theirs get
//! `503` with `Retry-After` and are counted, open files stay bounded, and the leader keeps its
//! lease through it all. The counts are small (a few hundred connections) to keep CI fast; the
//! 10,000-connection figures are in docs/BENCHMARKS.md.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use leasehold::http::{PROBE_RESERVE, RECEIVE_BUFFER};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use testbed::http::{get_with, http_get};
use testbed::process_tree;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

use crate::sse::EventWatcher;

const WAIT: Duration = Duration::from_secs(20);

/// The server's header read timeout is 5 s; the margin covers a loaded CI machine.
const CLOSED_WITHIN: Duration = Duration::from_secs(10);

/// A connection that sent `head` and nothing more.
pub(crate) fn stalled(addr: SocketAddr, head: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(head.as_bytes())
        .expect("send part of a head");
    stream
}

/// How long until the server closes `stream` (EOF or reset), reading whatever it sends; `None`
/// when it is still open after `bound`.
fn closed_after(stream: &mut TcpStream, bound: Duration) -> Option<Duration> {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(bound))
        .expect("a read timeout");
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return None,
            Err(_) => return Some(start.elapsed()),
        }
    }
}

fn a_leader(redis: &RedisServer, test: &str, args: &[&str]) -> Replica {
    let mut all = FAST.to_vec();
    all.push("--no-data-loss-cooldown");
    all.extend_from_slice(args);
    let replica = Replica::spawn(&redis.url(), &unique_lease(test), "web-a", &all, &[]);
    wait_for("the leader", Duration::from_secs(10), || {
        replica.is_ready().then_some(())
    });
    replica
}

#[test]
fn a_request_whose_head_never_finishes_is_closed_within_seconds() {
    let redis = RedisServer::start();
    let replica = a_leader(&redis, "slow-head", &[]);
    let mut unfinished = stalled(replica.http, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    let mut silent = stalled(replica.http, "");
    for (what, stream) in [("half a head", &mut unfinished), ("nothing", &mut silent)] {
        let closed = closed_after(stream, CLOSED_WITHIN);
        assert!(
            closed.is_some(),
            "a connection that sent {what} is still open after {CLOSED_WITHIN:?}"
        );
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed_within_seconds() {
    let redis = RedisServer::start();
    let replica = a_leader(&redis, "idle-keep-alive", &[]);
    let mut stream = stalled(replica.http, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    // The answer comes, then the connection idles, kept alive, until the server closes it.
    let closed = closed_after(&mut stream, CLOSED_WITHIN);
    assert!(
        closed.is_some(),
        "an idle keep-alive connection is still open after {CLOSED_WITHIN:?}"
    );
}

/// The files `pid` holds open (`usize::MAX` when they cannot be listed, which no bound passes).
fn open_files(pid: Pid) -> usize {
    process_tree::open_files(pid.as_raw()).unwrap_or(usize::MAX)
}

/// A thread that opens a connection every 5 ms, sends half a head and never finishes it (the
/// slow-header half of the flood), keeping the newest 300 open on its side, until dropped.
struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flood {
    fn start(addr: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut open = VecDeque::new();
            while !halt.load(Ordering::SeqCst) {
                if let Ok(mut stream) = TcpStream::connect(addr) {
                    let _ = stream.write_all(b"GET /leader HTTP/1.1\r\nHost: x\r\n");
                    open.push_back(stream);
                }
                if open.len() > 300 {
                    open.pop_front();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The status code of `GET /leader` asking for the event stream, read from its status line; the
/// stream is returned open (a `200` holds its slot until it is dropped).
fn event_stream(addr: SocketAddr) -> (u16, TcpStream) {
    event_stream_on(TcpStream::connect(addr).expect("connect"))
}

/// [`event_stream`] on a connection of the caller's.
fn event_stream_on(mut stream: TcpStream) -> (u16, TcpStream) {
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("a read timeout");
    stream
        .write_all(b"GET /leader HTTP/1.0\r\nAccept: text/event-stream\r\n\r\n")
        .expect("send the request");
    let mut line = String::new();
    let _ = BufReader::new(&stream).read_line(&mut line);
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, stream)
}

#[test]
fn probes_answer_at_once_while_every_connection_is_taken_and_open_files_stay_bounded() {
    const CAP: usize = 24;
    const STREAMS: usize = 8;
    let redis = RedisServer::start();
    let replica = a_leader(
        &redis,
        "flood",
        &[
            "--http-max-connections",
            "24",
            "--http-max-event-streams",
            "8",
        ],
    );
    let token = replica.leader()["token"].clone();
    let files_before = open_files(replica.pid());
    let watchers: Vec<EventWatcher> = (0..STREAMS)
        .map(|_| EventWatcher::connect(replica.http))
        .collect();
    wait_for("every stream's first event", WAIT, || {
        watchers
            .iter()
            .all(|w| !w.events().is_empty())
            .then_some(())
    });

    let flood = Flood::start(replica.http);
    let refused = "leasehold_http_connections_refused_total";
    let refused_before_probes = wait_for("connections beyond the cap refused", WAIT, || {
        replica.metric(refused).filter(|n| *n >= 50.0)
    });
    // Ten probes of each kind over a second of flood, with the files held counted between them.
    let (mut took, mut files_during) = (Vec::new(), 0);
    for path in ["/healthz", "/readyz"].repeat(10) {
        let start = Instant::now();
        let answer = http_get(replica.http, path);
        took.push(start.elapsed());
        assert_eq!(
            answer.map(|(code, _)| code),
            Some(200),
            "{path} during the flood"
        );
        files_during = files_during.max(open_files(replica.pid()));
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(flood);
    // Read once the flood is gone: during it `/metrics` and `/leader` may be refused too.
    let refused_after_probes = wait_for("the count of refused connections", WAIT, || {
        replica.metric(refused)
    });
    took.sort();
    assert!(
        took[took.len() / 2] < Duration::from_millis(100),
        "probes took {took:?} during the flood"
    );
    assert!(
        refused_after_probes >= refused_before_probes + 50.0,
        "the cap was not reached while the probes ran ({refused_before_probes} refused before, \
         {refused_after_probes} after)"
    );
    // The streams and the general connections, the reserve, and a few in passing.
    let bound = files_before + CAP + PROBE_RESERVE + 4;
    assert!(
        files_during <= bound,
        "{files_during} open files during the flood, more than {bound} ({files_before} before)"
    );
    // The same token: the term that began before the flood never ended.
    let leader = wait_for("/leader", WAIT, || replica.leader_view());
    assert_eq!(
        (leader["is_leader"].as_bool(), &leader["token"]),
        (Some(true), &token),
        "the leader kept its lease through the flood"
    );

    for watcher in &watchers {
        watcher.close();
    }
    wait_for("the open files back to before the flood", WAIT, || {
        (open_files(replica.pid()) <= files_before + 2).then_some(())
    });
}

/// A probe that waited in the kernel's accept queue ahead of more connections than the reserve
/// has places (they came after it while leasehold could not run: frozen here, throttled by a CPU
/// quota in a pod) is answered, not shed by them before it was ever read. One worker thread, as
/// the chart's CPU limit gives: the accept loop then runs on the probe's own thread.
#[test]
fn a_probe_queued_ahead_of_a_burst_larger_than_the_reserve_is_answered() {
    let redis = RedisServer::start();
    let mut args = FAST.to_vec();
    args.extend([
        "--no-data-loss-cooldown",
        "--http-max-connections",
        "2",
        "--http-max-event-streams",
        "1",
    ]);
    let lease = unique_lease("probe-burst");
    let env = [("TOKIO_WORKER_THREADS", "1")];
    let replica = Replica::spawn_with_env(&redis.url(), &lease, "web-a", &args, &[], &env);
    wait_for("the leader", WAIT, || replica.is_ready().then_some(()));
    // Both general places held by heads that never finish: a request for anything but a probe
    // is then refused on the reserve.
    let _held: Vec<TcpStream> = (0..2)
        .map(|_| stalled(replica.http, "GET /metrics HTTP/1.1\r\n"))
        .collect();
    wait_for("the general places taken", WAIT, || {
        (http_get(replica.http, "/metrics").map(|(code, _)| code) == Some(503)).then_some(())
    });
    replica.signal(Signal::SIGSTOP);
    wait_for("leasehold stopped", WAIT, || {
        process_tree::is_stopped(replica.pid().as_raw()).then_some(())
    });
    let mut probe = stalled(
        replica.http,
        "GET /healthz HTTP/1.1\r\nHost: leasehold\r\n\r\n",
    );
    let _burst: Vec<TcpStream> = (0..PROBE_RESERVE + 4)
        .map(|_| TcpStream::connect(replica.http).expect("connect"))
        .collect();
    replica.signal(Signal::SIGCONT);
    probe
        .set_read_timeout(Some(CLOSED_WITHIN))
        .expect("a read timeout");
    let mut answer = String::new();
    let _ = probe.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the probe got {answer:?}"
    );
}

/// Bytes the server has received on its side of the connection from `client_port` to `port`
/// and not read yet (`rx_queue` of `/proc/net/tcp`).
fn unread_by_server(port: u16, client_port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let hex_port = |address: &str| u16::from_str_radix(address.rsplit(':').next()?, 16).ok();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, queues) = (fields.get(1)?, fields.get(2)?, fields.get(4)?);
        (hex_port(local)? == port && hex_port(remote)? == client_port)
            .then(|| u64::from_str_radix(queues.split(':').nth(1)?, 16).ok())?
    })
}

/// A client that pipelines requests and never reads their answers leaves at most a small receive
/// buffer's worth in the kernel for each of its connections: once the answers fill both sides'
/// buffers the server reads no more, and what it has not read stays within the buffer the
/// listener gives each connection, not the kernel's default (`tcp_rmem`).
#[test]
fn requests_piled_up_behind_unread_answers_stop_at_a_small_receive_buffer() {
    let redis = RedisServer::start();
    let replica = a_leader(&redis, "receive-buffer", &[]);
    let mut client = TcpStream::connect(replica.http).expect("connect");
    let client_port = client.local_addr().expect("a local address").port();
    client
        .set_write_timeout(Some(Duration::from_millis(500)))
        .expect("a write timeout");
    let requests = "GET /healthz HTTP/1.1\r\nHost: leasehold\r\n\r\n".repeat(1000);
    let mut sent = 0;
    while sent < 16 << 20 {
        match client.write(requests.as_bytes()) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    assert!(
        sent < 16 << 20,
        "the server read everything: nothing piled up"
    );
    // The server closes the connection 5 s after its writes found no room; look before that.
    let unread = unread_by_server(replica.http.port(), client_port).expect("the server's socket");
    // Linux doubles a socket's receive buffer for its own bookkeeping.
    let bound = 2 * RECEIVE_BUFFER as u64;
    let rmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").expect("tcp_rmem");
    let default: u64 = rmem
        .split_whitespace()
        .nth(1)
        .and_then(|d| d.parse().ok())
        .expect("tcp_rmem's default");
    assert!(
        bound < default,
        "the premise: a buffer smaller than the default ({default})"
    );
    assert!(
        unread <= bound,
        "{unread} bytes left unread by the server ({sent} sent)"
    );
}

#[test]
fn event_streams_beyond_their_cap_are_refused_with_retry_after_and_counted() {
    let redis = RedisServer::start();
    let replica = a_leader(&redis, "stream-cap", &["--http-max-event-streams", "2"]);
    let first = event_stream(replica.http);
    let second = event_stream(replica.http);
    assert_eq!((first.0, second.0), (200, 200));

    let refused = get_with(replica.http, "/leader", &[("Accept", "text/event-stream")])
        .expect("an answer to the third stream");
    assert_eq!(refused.code, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("10"), "{refused:?}");
    assert_eq!(
        replica.metric("leasehold_http_event_streams_refused_total"),
        Some(1.0)
    );
    // `/leader` without the stream is still answered.
    assert_eq!(replica.get("/leader").map(|(code, _)| code), Some(200));

    // A client that goes frees its slot.
    drop(first);
    let (code, _third) = wait_for("a slot freed by a client that went", WAIT, || {
        let (code, stream) = event_stream(replica.http);
        (code == 200).then_some((code, stream))
    });
    assert_eq!(code, 200);
}

/// The longest a client that stopped reading may hold its slot once events come: its buffers
/// fill within a few seconds of the events below, then the server's write timeout (5 s) runs.
const STOPPED_READER_DROPPED_WITHIN: Duration = Duration::from_secs(20);

#[test]
fn an_event_stream_client_that_stops_reading_gives_its_slot_back_once_its_buffer_fills() {
    // A candidate check that fails and passes in turn: each turn changes the replica's
    // candidacy and role, an event of about 800 bytes for every watcher, some twenty a second.
    let dir = tempfile::tempdir().expect("a directory");
    let flip = dir.path().join("healthy");
    let check = format!(
        "if [ -e {f} ]; then rm {f}; else touch {f}; exit 1; fi",
        f = flip.display()
    );
    let redis = RedisServer::start();
    let mut args = FAST.to_vec();
    args.extend([
        "--no-data-loss-cooldown",
        "--readiness",
        "member",
        "--http-max-event-streams",
        "1",
        "--candidate-check-command",
        &check,
        "--candidate-check-period",
        "50ms",
        "--candidate-check-timeout",
        "50ms",
        "--candidate-check-failure-threshold",
        "1",
    ]);
    let lease = unique_lease("stops-reading");
    let replica = Replica::spawn(&redis.url(), &lease, "web-a", &args, &[]);
    wait_for("/leader", WAIT, || replica.leader_view());
    // The only slot, taken by a client that reads the status line and nothing more, with a
    // receive buffer of a few KiB (the kernel's default is 128 KiB) so that it fills sooner.
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket
        .set_recv_buffer_size(4096)
        .expect("a small receive buffer");
    socket.connect(&replica.http.into()).expect("connect");
    let (code, mut stopped) = event_stream_on(socket.into());
    assert_eq!(code, 200);
    let began = Instant::now();
    let _next = wait_for(
        "the slot of the client that stopped reading",
        STOPPED_READER_DROPPED_WITHIN,
        || {
            let (code, stream) = event_stream(replica.http);
            (code == 200).then_some(stream)
        },
    );
    eprintln!(
        "a client that stopped reading gave its slot back after {:?}",
        began.elapsed()
    );
    // The server closed it: what it had sent, then the end.
    assert!(
        closed_after(&mut stopped, CLOSED_WITHIN).is_some(),
        "the connection of the client that stopped reading is still open"
    );
}

/// Out of files, every accept fails at once and is tried again 50 ms later: said once, not
/// twenty times a second for as long as it lasts, and said again when accepts work again.
#[test]
fn running_out_of_files_is_said_once_and_its_end_is_said() {
    let redis = RedisServer::start();
    // The accept loop's debug events count the failures that are no longer said.
    let leader = a_leader(
        &redis,
        "flood-nofile",
        &[
            "--http-max-connections",
            "1000",
            "--log",
            "info,leasehold::http::serve=debug",
        ],
    );
    let pid = leader.pid();
    // A few files more than it holds now: the connections below take them and the rest of the
    // accepts fail.
    let limit = open_files(pid) + 4;
    let set = std::process::Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={limit}:{limit}"))
        .status()
        .expect("prlimit runs");
    assert!(set.success(), "prlimit --nofile={limit}");
    let held: Vec<TcpStream> = (0..12)
        .filter_map(|_| TcpStream::connect(leader.http).ok())
        .collect();
    let failed = leader.wait_events("http accept failed", 1, WAIT);
    // Five more failed accepts (a quarter of a second of them), each quiet.
    leader.wait_events("http accept failed again", 5, WAIT);
    assert_eq!(
        leader.events("http accept failed").len(),
        1,
        "said once: {failed:?}"
    );
    drop(held);
    leader.wait_events("http accepts work again", 1, WAIT);
    assert!(leader.is_ready(), "the leader kept its lease");
}
