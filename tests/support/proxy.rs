//! The TCP fault proxy for tests: the chaos harness's link proxy (one implementation of pass,
//! delay, blackhole and drop), run on its own thread and runtime so that it keeps working
//! whatever the test's runtime does.

use std::net::SocketAddr;
use std::sync::mpsc;

#[path = "../../examples/chaos/proxy.rs"]
mod link;

/// What the proxy does to the bytes: `Pass`, `Delay(d)` (each chunk, both ways), `Blackhole`
/// (hold everything, connections stay open), `Drop` (reset every connection and every new one).
pub use link::Link as Fault;

pub struct FaultProxy {
    inner: link::LinkProxy,
    _runtime: mpsc::Sender<()>,
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port that forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        let (proxy_tx, proxy_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("proxy runtime");
            let proxy =
                link::LinkProxy::start(runtime.handle(), upstream).expect("start the proxy");
            proxy_tx.send(proxy).expect("hand the proxy over");
            // Drive the proxy until the FaultProxy is dropped (its sender closes).
            runtime.block_on(async move {
                let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
            });
        });
        Self {
            inner: proxy_rx.recv().expect("the proxy started"),
            _runtime: stop_tx,
        }
    }

    /// Redis URL through the proxy.
    pub fn url(&self) -> String {
        self.inner.url()
    }

    /// Sets the fault of every connection (but those given one of their own).
    pub fn set(&self, fault: Fault) {
        self.inner.set(fault);
    }

    /// Sets the fault of the one connection whose upstream side uses local port
    /// `upstream_port`: the port Redis's `CLIENT LIST` shows as that client's address.
    pub fn set_one(&self, upstream_port: u16, fault: Fault) {
        self.inner.set_one(upstream_port, fault);
    }

    /// The local ports of the upstream sides of the open connections.
    pub fn upstream_ports(&self) -> Vec<u16> {
        self.inner.upstream_ports()
    }
}
