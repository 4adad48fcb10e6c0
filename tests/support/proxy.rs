//! A userspace TCP fault proxy between a client and Redis: pass, delay, blackhole or reset.
//! It runs on its own thread and runtime, so it keeps working whatever the test's runtime does.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What the proxy does to the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward at once.
    Pass,
    /// Forward each chunk this long after it was read (both directions).
    Delay(Duration),
    /// Hold every byte, in both directions, until the fault changes (then deliver it, as TCP
    /// would after retransmission). Connections stay open.
    Blackhole,
    /// Close every connection and every new one at once.
    Reset,
}

pub struct FaultProxy {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    _stop: std::sync::mpsc::Sender<()>,
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port that forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        let (fault, fault_rx) = watch::channel(Fault::Pass);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("proxy runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
                addr_tx
                    .send(listener.local_addr().expect("addr"))
                    .expect("send addr");
                let stopped = tokio::task::spawn_blocking(move || {
                    let _ = stop_rx.recv();
                });
                tokio::pin!(stopped);
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => {
                            let Ok((client, _)) = accepted else { continue };
                            let fault = fault_rx.clone();
                            tokio::spawn(serve(client, upstream, fault));
                        }
                    }
                }
            });
        });
        let addr = addr_rx.recv().expect("proxy address");
        Self {
            addr,
            fault,
            _stop: stop_tx,
        }
    }

    /// Redis URL through the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }
}

async fn serve(client: TcpStream, upstream: SocketAddr, fault: watch::Receiver<Fault>) {
    if *fault.borrow() == Fault::Reset {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let mut up = tokio::spawn(pump(client_read, server_write, fault.clone()));
    let mut down = tokio::spawn(pump(server_read, client_write, fault));
    // Either direction ending ends the connection.
    tokio::select! {
        _ = &mut up => down.abort(),
        _ = &mut down => up.abort(),
    }
}

/// Moves bytes one way: a reader stamps each chunk with its delivery time, a writer delivers it
/// then, holding it while the link is blackholed. A reset ends both at once.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    fault: watch::Receiver<Fault>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read_fault = fault.clone();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let delay = match *read_fault.borrow() {
                Fault::Delay(d) => d,
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
    let mut write_fault = fault.clone();
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            while *write_fault.borrow_and_update() == Fault::Blackhole {
                if write_fault.changed().await.is_err() {
                    return;
                }
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    let mut reset_fault = fault;
    let reset = async move {
        let _ = reset_fault.wait_for(|f| *f == Fault::Reset).await;
    };
    tokio::select! {
        _ = reader => {}
        _ = writer => {}
        _ = reset => {}
    }
}
