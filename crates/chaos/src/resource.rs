//! The fenced resource: a small line-protocol service on loopback that the leaders' children
//! write to. It records every write with its fencing token, replica and arrival time, and
//! refuses a token lower than the highest it has accepted (unless fencing is turned off, for
//! the negative control).
//!
//! Protocol, one line each way: `W <token> <identity> <pid> <seq> [<role>]` → `OK` or
//! `STALE <highest>` (or `ERR <why>`). The role is `c` for the command leasehold started, `d`
//! for a grandchild in a session of its own, `s` for a worker that ignores SIGTERM. A reply
//! to a command may end with the nemesis's order for it: `FORK`, `STUBBORN` or `EXIT`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use testbed::accept::next_connection;
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
    /// Which process of the leader's work sent it: `c`, `d` or `s`.
    #[serde(default = "command_role")]
    pub role: char,
}

fn command_role() -> char {
    'c'
}

#[derive(Default)]
struct State {
    highest: Option<u64>,
    writes: Vec<Write>,
    /// One order for the next write of a replica's command.
    orders: HashMap<String, &'static str>,
    /// Every command is told to exit until then.
    fail_until: Option<Micros>,
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
        self.lock().writes.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives `order` (`FORK`, `STUBBORN`) to the next write of `identity`'s command.
    pub fn order(&self, identity: &str, order: &'static str) {
        self.lock().orders.insert(identity.to_owned(), order);
    }

    /// Withdraws an order not yet delivered.
    pub fn withdraw(&self, identity: &str) {
        self.lock().orders.remove(identity);
    }

    /// Tells every command that writes before `until` to exit.
    pub fn fail_until(&self, until: Option<Micros>) {
        self.lock().fail_until = until;
    }

    /// The latest write at or after `since` from `identity` by a process of `role`.
    pub fn latest(&self, identity: &str, role: char, since: Micros) -> Option<Write> {
        let state = self.lock();
        state
            .writes
            .iter()
            .rev()
            .take_while(|w| w.at >= since)
            .find(|w| w.identity == identity && w.role == role)
            .cloned()
    }

    /// The processes other than commands that ever wrote (daemons, stubborn workers).
    pub fn helper_pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .lock()
            .writes
            .iter()
            .filter(|w| w.role != 'c')
            .map(|w| w.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
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
    while let Some(stream) = next_connection(&listener, &stop).await {
        tokio::spawn(session(stream, state.clone(), fencing, stop.clone()));
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
            Some((token, identity, pid, seq, role)) => {
                decide(&state, fencing, token, identity, pid, seq, role)
            }
            None => format!("ERR cannot parse {line:?}\n"),
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn parse(line: &str) -> Option<(u64, String, u32, u64, char)> {
    let mut words = line.split(' ');
    if words.next()? != "W" {
        return None;
    }
    let token = words.next()?.parse().ok()?;
    let identity = words.next()?.to_owned();
    let pid = words.next()?.parse().ok()?;
    let seq = words.next()?.parse().ok()?;
    let role = match words.next() {
        None => 'c',
        Some(r) if r.len() == 1 => r.chars().next()?,
        Some(_) => return None,
    };
    Some((token, identity, pid, seq, role))
}

/// Accepts or refuses one write, and records it.
fn decide(
    state: &Mutex<State>,
    fencing: bool,
    token: u64,
    identity: String,
    pid: u32,
    seq: u64,
    role: char,
) -> String {
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    let now = time::now();
    let order = if role != 'c' {
        None
    } else if state.fail_until.is_some_and(|u| now < u) {
        Some("EXIT")
    } else {
        state.orders.remove(&identity)
    };
    let highest = state.highest;
    let accepted = !fencing || highest.is_none_or(|h| token >= h);
    if accepted {
        state.highest = Some(highest.map_or(token, |h| h.max(token)));
    }
    state.writes.push(Write {
        at: now,
        token,
        identity,
        pid,
        seq,
        accepted,
        role,
    });
    let order = order.map(|o| format!(" {o}")).unwrap_or_default();
    if accepted {
        format!("OK{order}\n")
    } else {
        format!("STALE {}{order}\n", highest.unwrap_or_default())
    }
}
