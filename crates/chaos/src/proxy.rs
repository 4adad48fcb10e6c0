//! The harness's TCP fault proxy, one per replica, between that replica and Redis. It passes
//! bytes, delays them, holds them (blackhole: connections stay open, nothing arrives until the
//! fault ends), or drops the link (every connection, and every new one, is reset). A fault may
//! also be set for one connection alone, named by the port its upstream side uses (the port
//! Redis's `CLIENT LIST` shows for it).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the link does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Forward at once.
    Pass,
    /// Forward every chunk this long after it was read, in both directions.
    Delay(Duration),
    /// Hold every byte in both directions until the fault changes; connections stay open.
    Blackhole,
    /// Reset every connection, and every new one, until the fault changes.
    Drop,
}

/// What the link does to every connection, and to single ones.
#[derive(Debug, Clone)]
struct Faults {
    all: Link,
    /// By the local port of the connection's upstream side.
    one: BTreeMap<u16, Link>,
}

impl Faults {
    fn of(&self, upstream_port: u16) -> Link {
        self.one.get(&upstream_port).copied().unwrap_or(self.all)
    }
}

/// The upstream ports of the open connections.
type Open = Arc<Mutex<BTreeSet<u16>>>;

/// A running proxy; stops (and resets its connections) when dropped.
pub struct LinkProxy {
    addr: SocketAddr,
    link: watch::Sender<Faults>,
    open: Open,
    stop: CancellationToken,
}

impl LinkProxy {
    /// Listens on a free loopback port and forwards to `upstream`, on `runtime`.
    pub fn start(runtime: &Handle, upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = runtime
            .block_on(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .context("the fault proxy cannot bind a loopback port")?;
        let addr = listener
            .local_addr()
            .context("the fault proxy has no address")?;
        let (link, link_rx) = watch::channel(Faults {
            all: Link::Pass,
            one: BTreeMap::new(),
        });
        let open = Open::default();
        let stop = CancellationToken::new();
        runtime.spawn(accept(
            listener,
            upstream,
            link_rx,
            open.clone(),
            stop.clone(),
        ));
        Ok(Self {
            addr,
            link,
            open,
            stop,
        })
    }

    /// The Redis URL through this proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Changes what the link does, for open connections too (except those given a fault of
    /// their own with [`set_one`](Self::set_one)).
    pub fn set(&self, link: Link) {
        self.link.send_modify(|f| f.all = link);
    }

    /// Changes what the link does to the one connection whose upstream side uses local port
    /// `upstream_port`.
    pub fn set_one(&self, upstream_port: u16, link: Link) {
        self.link.send_modify(|f| {
            f.one.insert(upstream_port, link);
        });
    }

    /// Lifts the fault of one connection (it follows the whole link's again).
    pub fn clear_one(&self, upstream_port: u16) {
        self.link.send_modify(|f| {
            f.one.remove(&upstream_port);
        });
    }

    /// The local ports of the upstream sides of the open connections.
    pub fn upstream_ports(&self) -> Vec<u16> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.iter().copied().collect()
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    link: watch::Receiver<Faults>,
    open: Open,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else {
            // Out of descriptors or a similar passing failure: do not spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        tokio::spawn(connection(
            client,
            upstream,
            link.clone(),
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
    mut link: watch::Receiver<Faults>,
    open: Open,
    stop: CancellationToken,
) {
    let _ = client.set_zero_linger();
    if link.borrow().all == Link::Drop {
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
    let up = pump(client_read, server_write, link.clone(), port);
    let down = pump(server_read, client_write, link.clone(), port);
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = link.wait_for(|f| f.of(port) == Link::Drop) => {}
        _ = stop.cancelled() => {}
    }
    open.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&port);
}

/// Moves bytes one way: each chunk is stamped with its delivery time when read, and written
/// then, in order, but not while the link is blackholed.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    link: watch::Receiver<Faults>,
    port: u16,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read_link = link.clone();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let delay = match read_link.borrow().of(port) {
                Link::Delay(d) => d,
                _ => Duration::ZERO,
            };
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                return;
            }
        }
    };
    let mut write_link = link;
    let writer = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if write_link
                .wait_for(|f| f.of(port) != Link::Blackhole)
                .await
                .is_err()
            {
                return;
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    // The reader ending (EOF) still lets the writer deliver what it holds.
    let (_, ()) = tokio::join!(reader, writer);
}
