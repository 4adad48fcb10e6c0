//! Serving the endpoints with a bound on what clients may hold: how many connections at once,
//! how long a request's head may take, how long a kept-alive connection may idle, and a reserve
//! of connections on which `/healthz` and `/readyz` stay answered while the rest are taken.
//!
//! Why an accept loop of our own instead of `axum::serve`: axum 0.8's `serve` has no knob for
//! any of these, and a limit on concurrent *requests* (tower's `ConcurrencyLimit`) does not see
//! a connection whose head never finishes, which was half of the flood that took a leader from
//! 11 MiB to 149 MiB and from 16 open files to 6,016. So each accepted connection first takes a
//! permit of a tokio [`Semaphore`] (held by its task until it closes), and is then served by
//! hyper's own HTTP/1 connection with `header_read_timeout`: hyper starts that timer whenever it
//! waits for a request's head, the first one and each one after on a kept-alive connection, so
//! the one timeout closes both the head that never finishes and the connection left idle.
//!
//! Why a reserve instead of a listener of its own for the probes: a second port would need its
//! own flag, chart port and probe wiring, and would be flooded as easily as the first from
//! anywhere the first can be reached. A connection accepted while the general permits are all
//! taken gets one of [`PROBE_RESERVE`] places more, a shorter head timeout, no keep-alive, and a
//! router that serves only `/healthz` and `/readyz` (everything else `503` with `Retry-After`).
//! When every place is taken, the newest connection sheds the oldest: the kubelet sends its
//! probe at once and does not keep the connection, so it is answered within a millisecond or two
//! of being accepted, and a flood would have to open [`PROBE_RESERVE`] connections within that
//! time to shed it. The accept loop lets each reserve connection read its request before it
//! accepts the next, so connections that queued behind a probe while this process could not run
//! (a CPU quota's throttle) do not shed it unread. No connection waits in the kernel's backlog
//! behind thousands of others.
//!
//! Why a write timeout and a bounded send buffer: a client that stops reading (an event-stream
//! watcher that hangs without closing) leaves its socket full, and hyper then waits for room
//! without a bound and polls the stream no more, so the watcher's own bounded buffer never
//! comes into play: the connection and its event-stream slot were held for ever, behind a send
//! buffer the kernel grows to megabytes. Each socket's send buffer is fixed at [`SEND_BUFFER`]
//! (and its receive buffer at [`RECEIVE_BUFFER`], for what a client piles up unread),
//! and a write that finds no room for [`WRITE_TIMEOUT`] closes the connection (tokio-io-timeout's
//! stream around the socket; hyper has no write timeout of its own).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use leasehold_core::locked::locked;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;

/// Connections served at once by default: a few dozen dashboards and sidecars, a scraper or two,
/// the kubelet, with room to spare; each holds a file and at most `MAX_BUF` twice.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Event-stream clients served at once by default: a few dozen dashboards and sidecars.
pub const DEFAULT_MAX_EVENT_STREAMS: usize = 64;

/// Connections accepted beyond the cap that are served `/healthz` and `/readyz` alone.
pub const PROBE_RESERVE: usize = 16;

/// How long a request's head may take, and a kept-alive connection may idle: the kubelet,
/// Prometheus and `curl` send a head at once, so nothing that means well needs more.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The same on the reserve, whose only clients are probes.
const PROBE_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(1);

/// The largest head (and write buffer) one connection may hold: the endpoints take no body and
/// their requests are a few hundred bytes (hyper's default is about 400 KiB).
const MAX_BUF: usize = 16 * 1024;

/// The kernel's send buffer of each connection (Linux doubles it for its bookkeeping): what a
/// client may leave unread before the next write waits, instead of up to 4 MiB grown by the
/// kernel's autotuning. Larger answers (`/metrics`) go out in a few more round trips.
pub const SEND_BUFFER: usize = 16 * 1024;

/// The kernel's receive buffer of each connection (set on the listener, which each accepted
/// connection inherits): what a client may pile up that the server has not read, such as
/// requests pipelined behind answers it leaves unread (hyper reads no more while an answer waits
/// for room), instead of the kernel's default of 128 KiB. The endpoints take no body.
pub const RECEIVE_BUFFER: usize = 16 * 1024;

/// How long a write may wait for room in the send buffer before the connection is closed: the
/// client stopped reading. A client that reads, however slowly, makes room within it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Seconds a refused client is told to wait (`Retry-After`).
pub const RETRY_AFTER_SECONDS: &str = "10";

/// How long shutdown waits for connections to finish after it asked them to.
pub const DRAIN: Duration = Duration::from_secs(2);

/// After a failed accept (out of files, most often), the pause before the next one, so that the
/// loop does not spin while nothing can be accepted.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// What clients may hold: set by `--http-max-connections` and `--http-max-event-streams`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once (beyond it, the probe reserve, then none).
    pub max_connections: usize,
    /// Event-stream clients served at once (beyond it, `503` with `Retry-After`).
    pub max_event_streams: usize,
    /// How long a request's head may take, and a kept-alive connection may idle.
    pub header_read_timeout: Duration,
}

impl Limits {
    /// The files they may hold, and those kept for the rest ([`crate::open_files::KEPT`]).
    pub fn files(&self) -> u64 {
        (self.max_connections + PROBE_RESERVE) as u64 + crate::open_files::KEPT
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_event_streams: DEFAULT_MAX_EVENT_STREAMS,
            header_read_timeout: HEADER_READ_TIMEOUT,
        }
    }
}

/// The two routers a connection may be served by.
pub(super) struct Routers {
    /// Every endpoint.
    pub(super) full: Router,
    /// `/healthz` and `/readyz` alone, for the reserve.
    pub(super) probes: Router,
}

/// Accepts and serves connections on `listener` within `limits` until `shutdown` is cancelled,
/// then asks every connection to finish and waits for them a bounded while.
pub(super) async fn serve(
    listener: TcpListener,
    routers: Routers,
    limits: Limits,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let general = Arc::new(Semaphore::new(limits.max_connections));
    let reserve = Arc::new(Reserve::default());
    let connections = TaskTracker::new();
    // Failed accepts since the last that worked.
    let mut failed_accepts: u64 = 0;
    loop {
        let tcp = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    if failed_accepts > 0 {
                        info!(failures = failed_accepts, "http accepts work again");
                        failed_accepts = 0;
                    }
                    tcp
                }
                Err(error) => {
                    // Said once per run of failures: out of files, each retry fails alike.
                    failed_accepts += 1;
                    if failed_accepts == 1 {
                        warn!(error = %error, "http accept failed");
                    } else {
                        debug!(error = %error, failures = failed_accepts, "http accept failed again");
                    }
                    tokio::select! {
                        biased;
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    }
                }
            },
        };
        // No Nagle: an event written behind an earlier one must not wait for the watcher's
        // delayed ACK (up to 40 ms).
        let _ = tcp.set_nodelay(true);
        let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(SEND_BUFFER);
        let lane = if let Ok(permit) = general.clone().try_acquire_owned() {
            Lane {
                router: routers.full.clone(),
                header_read_timeout: limits.header_read_timeout,
                keep_alive: true,
                held: Held::General { _permit: permit },
            }
        } else {
            let (place, shed) = reserve.admit();
            if shed {
                metrics.http_connection_refused();
            }
            Lane {
                router: routers.probes.clone(),
                header_read_timeout: PROBE_HEADER_READ_TIMEOUT.min(limits.header_read_timeout),
                keep_alive: false,
                held: Held::Reserve(place),
            }
        };
        let reserved = matches!(lane.held, Held::Reserve(_));
        connections.spawn(connection(tcp, lane, shutdown.clone()));
        if reserved {
            // Its task runs (reads its request, answers a probe) before the loop accepts more
            // that could shed it: a burst queued while this process could not run (a CPU
            // quota's throttle) would otherwise shed a probe that waited in the queue before it.
            tokio::task::yield_now().await;
        }
    }
    connections.close();
    let _ = tokio::time::timeout(DRAIN, connections.wait()).await;
    Ok(())
}

/// How one connection is served, and the place it holds until it closes.
struct Lane {
    router: Router,
    header_read_timeout: Duration,
    keep_alive: bool,
    held: Held,
}

/// A connection's place: a general permit, or a place in the reserve that a newer connection
/// may shed.
enum Held {
    /// Released when dropped.
    General {
        _permit: OwnedSemaphorePermit,
    },
    Reserve(ReservePlace),
}

impl Held {
    /// Resolves when a newer connection sheds this one; never for a general permit.
    async fn shed(&self) {
        match self {
            Held::General { .. } => std::future::pending().await,
            Held::Reserve(place) => place.shed.cancelled().await,
        }
    }
}

/// The reserve's places, oldest first.
#[derive(Default)]
struct Reserve {
    held: Mutex<VecDeque<(u64, CancellationToken)>>,
    next: AtomicU64,
}

impl Reserve {
    /// A place for a new connection; when every place is taken, the oldest is shed (its
    /// connection closes) and `true` says so.
    fn admit(self: &Arc<Self>) -> (ReservePlace, bool) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let shed = CancellationToken::new();
        let mut held = locked(&self.held);
        let shed_oldest = held.len() >= PROBE_RESERVE;
        if shed_oldest && let Some((_, oldest)) = held.pop_front() {
            oldest.cancel();
        }
        held.push_back((id, shed.clone()));
        let place = ReservePlace {
            reserve: self.clone(),
            id,
            shed,
        };
        (place, shed_oldest)
    }
}

/// A place in the reserve, given back when its connection closes.
struct ReservePlace {
    reserve: Arc<Reserve>,
    id: u64,
    shed: CancellationToken,
}

impl Drop for ReservePlace {
    fn drop(&mut self) {
        let mut held = locked(&self.reserve.held);
        held.retain(|(id, _)| *id != self.id);
    }
}

/// Serves one connection until it closes (an error only closes it: a write that timed out among
/// them), or finishes it gracefully (its request in flight answered) once `shutdown` is
/// cancelled.
async fn connection(tcp: TcpStream, lane: Lane, shutdown: CancellationToken) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(lane.header_read_timeout)
        .keep_alive(lane.keep_alive)
        .max_buf_size(MAX_BUF);
    let service = TowerToHyperService::new(lane.router);
    let mut io = TimeoutStream::new(tcp);
    io.set_write_timeout(Some(WRITE_TIMEOUT));
    let conn = builder.serve_connection(TokioIo::new(Box::pin(io)), service);
    tokio::pin!(conn);
    tokio::select! {
        biased;
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
        // A request already in hand is served before a shed closes the connection.
        _ = conn.as_mut() => {}
        // Dropping the connection closes it.
        () = lane.held.shed() => {}
    }
}
