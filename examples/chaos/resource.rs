//! The fenced resource: a small line-protocol service on loopback that the leaders' children
//! write to. It records every write with its fencing token, replica and arrival time, and
//! refuses a token lower than the highest it has accepted (unless fencing is turned off, for
//! the negative control).
//!
//! Protocol, one line each way: `W <token> <identity> <pid> <seq>` → `OK` or
//! `STALE <highest>` (or `ERR <why>`).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::time::{self, Micros};

/// One write as the resource saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Write {
    /// When it arrived (wall clock), taken under the resource's lock, so that the order of
    /// the log is the order of the decisions.
    pub at: Micros,
    /// The fencing token it carried.
    pub token: u64,
    /// The replica whose child sent it.
    pub identity: String,
    /// The child's process id.
    pub pid: u32,
    /// The child's write counter.
    pub seq: u64,
    /// Whether the resource accepted it.
    pub accepted: bool,
}

#[derive(Default)]
struct State {
    highest: Option<u64>,
    writes: Vec<Write>,
}

/// The running service; stops when dropped.
pub struct Resource {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
}

impl Resource {
    /// Starts the service on a free loopback port. With `fencing` off it accepts everything.
    pub fn start(runtime: &Handle, fencing: bool) -> anyhow::Result<Self> {
        let listener = runtime
            .block_on(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .context("the fenced resource cannot bind a loopback port")?;
        let addr = listener
            .local_addr()
            .context("the fenced resource has no address")?;
        let state = Arc::new(Mutex::new(State::default()));
        let stop = CancellationToken::new();
        runtime.spawn(serve(listener, state.clone(), fencing, stop.clone()));
        Ok(Self { addr, state, stop })
    }

    /// Where the children write.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every write so far, in arrival order.
    pub fn writes(&self) -> Vec<Write> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .writes
            .clone()
    }
}

impl Drop for Resource {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    fencing: bool,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(session(stream, state.clone(), fencing, stop.clone()));
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

async fn session(
    stream: TcpStream,
    state: Arc<Mutex<State>>,
    fencing: bool,
    stop: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    loop {
        let line = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            line = lines.next_line() => line,
        };
        let Ok(Some(line)) = line else { return };
        let reply = match parse(&line) {
            Some((token, identity, pid, seq)) => decide(&state, fencing, token, identity, pid, seq),
            None => format!("ERR cannot parse {line:?}\n"),
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn parse(line: &str) -> Option<(u64, String, u32, u64)> {
    let mut words = line.split(' ');
    if words.next()? != "W" {
        return None;
    }
    let token = words.next()?.parse().ok()?;
    let identity = words.next()?.to_owned();
    let pid = words.next()?.parse().ok()?;
    let seq = words.next()?.parse().ok()?;
    Some((token, identity, pid, seq))
}

/// Accepts or refuses one write, and records it.
fn decide(
    state: &Mutex<State>,
    fencing: bool,
    token: u64,
    identity: String,
    pid: u32,
    seq: u64,
) -> String {
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    let highest = state.highest;
    let accepted = !fencing || highest.is_none_or(|h| token >= h);
    if accepted {
        state.highest = Some(highest.map_or(token, |h| h.max(token)));
    }
    state.writes.push(Write {
        at: time::now(),
        token,
        identity,
        pid,
        seq,
        accepted,
    });
    if accepted {
        "OK\n".to_owned()
    } else {
        format!("STALE {}\n", highest.unwrap_or_default())
    }
}
