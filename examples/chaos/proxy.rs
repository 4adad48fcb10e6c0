//! The harness's TCP fault proxy, one per replica, between that replica and Redis. It passes
//! bytes, delays them, holds them (blackhole: connections stay open, nothing arrives until the
//! fault ends), or drops the link (every connection, and every new one, is reset).

use std::net::{Ipv4Addr, SocketAddr};
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

/// A running proxy; stops (and resets its connections) when dropped.
pub struct LinkProxy {
    addr: SocketAddr,
    link: watch::Sender<Link>,
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
        let (link, link_rx) = watch::channel(Link::Pass);
        let stop = CancellationToken::new();
        runtime.spawn(accept(listener, upstream, link_rx, stop.clone()));
        Ok(Self { addr, link, stop })
    }

    /// The Redis URL through this proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Changes what the link does, for open connections too.
    pub fn set(&self, link: Link) {
        self.link.send_replace(link);
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
    link: watch::Receiver<Link>,
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
        tokio::spawn(connection(client, upstream, link.clone(), stop.clone()));
    }
}

/// One client connection and its upstream twin. Both sockets close with a reset, so a
/// dropped link looks like one to the client.
async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut link: watch::Receiver<Link>,
    stop: CancellationToken,
) {
    let _ = client.set_zero_linger();
    if *link.borrow() == Link::Drop {
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
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, link.clone());
    let down = pump(server_read, client_write, link.clone());
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = link.wait_for(|l| *l == Link::Drop) => {}
        _ = stop.cancelled() => {}
    }
}

/// Moves bytes one way: each chunk is stamped with its delivery time when read, and written
/// then, in order, but not while the link is blackholed.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, link: watch::Receiver<Link>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read_link = link.clone();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let delay = match *read_link.borrow() {
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
                .wait_for(|l| *l != Link::Blackhole)
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
