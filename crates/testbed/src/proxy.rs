//! A TCP fault proxy between a client and a server: it passes bytes, delays them, holds them
//! (blackhole: connections stay open, nothing arrives until the fault ends), or drops the link
//! (every connection, and every new one, is reset). A fault may also be set for one connection
//! alone, named by the local port of its upstream side (the port a Redis server's `CLIENT
//! LIST` shows as that client's address). New connections may be sent to another server while
//! the open ones keep theirs, as a failover behind one address does.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc as std_mpsc};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::accept::next_connection;

/// What the proxy does to the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward at once.
    Pass,
    /// Forward every chunk this long after it was read, in both directions.
    Delay(Duration),
    /// Forward every request chunk this long after it was read and replies at once: a link
    /// whose outward leg is slow (each command runs this late on the server, and its reply
    /// comes back at once).
    DelayRequests(Duration),
    /// Forward requests at once and every reply chunk this long after it was read: a link
    /// whose return leg is slow (each round trip costs this, and a new connection's first
    /// command twice as much, after its handshake's reply).
    DelayReplies(Duration),
    /// Forward each request chunk that calls the script of this SHA1 (`EVALSHA <sha>`, the hex
    /// digest) this long after it was read, and every other chunk at once, in order (behind a
    /// delayed one): a link slow for one command, the others' replies coming back at once.
    DelayScript { sha: [u8; 40], delay: Duration },
    /// Forward requests, and reset the connection instead of delivering a reply: every command
    /// reaches the server and runs, and its caller never hears the answer.
    ResetReplies,
    /// As `ResetReplies`, but the connection is closed in order (a FIN, no reset), as by a
    /// server that died after it read the request, and left half open until the client closes.
    CloseReplies,
    /// Hold every byte in both directions until the fault changes; connections stay open.
    Blackhole,
    /// Reset every connection, and every new one, until the fault changes.
    Drop,
}

/// A running proxy; it stops (and resets its connections) when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    faults: watch::Sender<Faults>,
    open: Open,
    stop: CancellationToken,
    /// With [`start`](Self::start): closing it ends the proxy's own runtime thread.
    _own_runtime: Option<std_mpsc::Sender<()>>,
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port that forwards to `upstream`, on a runtime of its
    /// own (a thread), so that it keeps working whatever the caller's runtime does.
    pub fn start(upstream: SocketAddr) -> Self {
        let (proxy_tx, proxy_rx) = std_mpsc::channel();
        let (stop_tx, stop_rx) = std_mpsc::channel::<()>();
        std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = proxy_tx.send(Err(e));
                    return;
                }
            };
            let _ = proxy_tx.send(Self::start_on(runtime.handle(), upstream));
            // Drive the proxy until the FaultProxy is dropped (its sender closes).
            runtime.block_on(async move {
                let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
            });
        });
        let mut proxy = proxy_rx
            .recv()
            .map_err(io::Error::other)
            .and_then(|started| started)
            .unwrap_or_else(|e| panic!("start the fault proxy: {e}"));
        proxy._own_runtime = Some(stop_tx);
        proxy
    }

    /// Starts a proxy on a free loopback port that forwards to `upstream`, on `runtime`.
    pub fn start_on(runtime: &Handle, upstream: SocketAddr) -> io::Result<Self> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let (faults, faults_rx) = watch::channel(Faults {
            all: Fault::Pass,
            one: BTreeMap::new(),
            upstream,
            held: Arc::default(),
        });
        let open = Open::default();
        let stop = CancellationToken::new();
        runtime.spawn(accept(listener, faults_rx, open.clone(), stop.clone()));
        Ok(Self {
            addr,
            faults,
            open,
            stop,
            _own_runtime: None,
        })
    }

    /// How many requests [`Fault::DelayScript`] has held so far: a test that acts while one is
    /// in flight waits for this.
    pub fn scripts_held(&self) -> u64 {
        self.faults.borrow().held.load(Ordering::SeqCst)
    }

    /// The proxy's own address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A Redis URL through the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Sets the fault of every connection, open ones too (but those given one of their own
    /// with [`set_one`](Self::set_one)).
    pub fn set(&self, fault: Fault) {
        self.faults.send_modify(|f| f.all = fault);
    }

    /// Sets the fault of the one connection whose upstream side uses local port
    /// `upstream_port`.
    pub fn set_one(&self, upstream_port: u16, fault: Fault) {
        self.faults.send_modify(|f| {
            f.one.insert(upstream_port, fault);
        });
    }

    /// Sends every new connection to `upstream`; the open ones keep their server.
    pub fn point_new_connections_at(&self, upstream: SocketAddr) {
        self.faults.send_modify(|f| f.upstream = upstream);
    }

    /// Lifts the fault of one connection: it follows the whole proxy's again.
    pub fn clear_one(&self, upstream_port: u16) {
        self.faults.send_modify(|f| {
            f.one.remove(&upstream_port);
        });
    }

    /// The local ports of the upstream sides of the open connections.
    pub fn upstream_ports(&self) -> Vec<u16> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.iter().copied().collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What the proxy does to every connection, and to single ones, and where new ones go.
#[derive(Debug, Clone)]
struct Faults {
    all: Fault,
    /// By the local port of the connection's upstream side.
    one: BTreeMap<u16, Fault>,
    upstream: SocketAddr,
    /// Requests held by `DelayScript` so far.
    held: Arc<AtomicU64>,
}

impl Faults {
    fn of(&self, upstream_port: u16) -> Fault {
        self.one.get(&upstream_port).copied().unwrap_or(self.all)
    }
}

/// The upstream ports of the open connections.
type Open = Arc<Mutex<BTreeSet<u16>>>;

async fn accept(
    listener: TcpListener,
    faults: watch::Receiver<Faults>,
    open: Open,
    stop: CancellationToken,
) {
    while let Some(client) = next_connection(&listener, &stop).await {
        let upstream = faults.borrow().upstream;
        tokio::spawn(connection(
            client,
            upstream,
            faults.clone(),
            open.clone(),
            stop.clone(),
        ));
    }
}

/// One client connection and its upstream twin. Both sockets close with a reset, so a
/// dropped link looks like one to the client.
async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut faults: watch::Receiver<Faults>,
    open: Open,
    stop: CancellationToken,
) {
    let _ = client.set_zero_linger();
    if faults.borrow().all == Fault::Drop {
        return;
    }
    let server =
        match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(upstream)).await {
            Ok(Ok(server)) => server,
            _ => return, // Redis is down: the client sees its connection reset.
        };
    let _ = server.set_zero_linger();
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let port = server.local_addr().map_or(0, |a| a.port());
    open.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(port);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(
        client_read,
        server_write,
        faults.clone(),
        port,
        Leg::Requests,
    );
    let down = pump(
        server_read,
        client_write,
        faults.clone(),
        port,
        Leg::Replies,
    );
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = faults.wait_for(|f| f.of(port) == Fault::Drop) => {}
        _ = stop.cancelled() => {}
    }
    open.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&port);
}

/// Which way a pump moves bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leg {
    /// Client to server.
    Requests,
    /// Server to client.
    Replies,
}

impl Fault {
    /// How long `chunk`, read on `leg`, waits before it is written.
    fn delay(self, leg: Leg, chunk: &[u8]) -> Duration {
        match (self, leg) {
            (Fault::Delay(d), _)
            | (Fault::DelayRequests(d), Leg::Requests)
            | (Fault::DelayReplies(d), Leg::Replies) => d,
            (Fault::DelayScript { sha, delay }, Leg::Requests)
                if chunk
                    .windows(sha.len())
                    .any(|w| w.eq_ignore_ascii_case(&sha)) =>
            {
                delay
            }
            _ => Duration::ZERO,
        }
    }
}

/// Moves bytes one way: each chunk is stamped with its delivery time when read, and written
/// then, in order, but not while the link is blackholed. A reply read while replies are reset
/// ends the pump, and with it the connection (reset); one read while they are closed closes the
/// client's side in order.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    faults: watch::Receiver<Faults>,
    port: u16,
    leg: Leg,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read_faults = faults.clone();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let fault = read_faults.borrow().of(port);
            if fault == Fault::ResetReplies && leg == Leg::Replies {
                return;
            }
            if fault == Fault::CloseReplies && leg == Leg::Replies {
                // An empty chunk: the writer closes its side, and holds the socket open.
                let _ = tx.send((Instant::now(), Vec::new()));
                return;
            }
            let delay = fault.delay(leg, &buf[..n]);
            if matches!(fault, Fault::DelayScript { .. }) && !delay.is_zero() {
                read_faults.borrow().held.fetch_add(1, Ordering::SeqCst);
            }
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                return;
            }
        }
    };
    let mut write_faults = faults;
    let writer = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if write_faults
                .wait_for(|f| f.of(port) != Fault::Blackhole)
                .await
                .is_err()
            {
                return;
            }
            if bytes.is_empty() {
                let _ = to.shutdown().await;
                std::future::pending::<()>().await;
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    // The reader ending (EOF) still lets the writer deliver what it holds.
    let (_, ()) = tokio::join!(reader, writer);
}
