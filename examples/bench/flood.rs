//! The HTTP port under a flood: one `leasehold run` leader at its default HTTP limits, then
//! thousands of connections at once that it must not serve (half ask for `/leader`'s event
//! stream and never read, half send half a request head and never finish it). Its memory and
//! open files are read from /proc before, during and after, `/healthz` and `/readyz` are timed
//! while the flood holds, and its `/leader` and refused counters are read from its endpoints.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use socket2::{Domain, Socket, Type};
use testbed::http::http_get;
use testbed::process_tree;
use testbed::wait::first_instant;

use crate::Plan;
use crate::footprint::read_proc;
use crate::procs::{self, Events, Replica};

/// The counters of what the limits turned away: connections beyond the cap and its reserve,
/// and event streams beyond theirs.
pub const REFUSED: [&str; 2] = [
    "leasehold_http_connections_refused_total",
    "leasehold_http_event_streams_refused_total",
];

/// The probes asked during the hold, each once a round.
const PROBES: [&str; 2] = ["/healthz", "/readyz"];

/// How often the probes are asked, and the leader's memory and files read, during the hold.
pub const EVERY: Duration = Duration::from_millis(200);

/// Files this harness holds beside the flood's connections (its redis-servers' and replicas'
/// pipes, its runtime, the probes): the connection count leaves them room under the limit.
const OWN_FILES: u64 = 256;

/// How long one connection of the flood may take to be accepted by the kernel.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The most the leader's open files may take to come back once the clients closed.
pub const BACK_WITHIN: Duration = Duration::from_secs(30);

/// Files the leader may hold beyond its count before the flood and still be "back": a Redis
/// connection being replaced, a scrape in passing.
pub const BACK_MARGIN: usize = 2;

/// The event-stream half: a complete request that the client will never read the answer of.
const STREAM_REQUEST: &[u8] =
    b"GET /leader HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n";

/// The slow-head half: a request head that never ends.
const HALF_HEAD: &[u8] = b"GET /leader HTTP/1.1\r\nHost: x\r\n";

/// The leader's resident memory and open files at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub rss_kib: u64,
    pub files: usize,
}

impl Usage {
    /// The larger of each figure.
    fn max(self, other: Self) -> Self {
        Self {
            rss_kib: self.rss_kib.max(other.rss_kib),
            files: self.files.max(other.files),
        }
    }
}

/// What `/leader` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub is_leader: bool,
    pub token: Option<u64>,
    /// Times the replica became leader or stepped down since it started.
    pub transitions: u64,
}

/// One probe asked during the hold.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub path: &'static str,
    /// The status code, or `None` without an answer within two seconds.
    pub code: Option<u16>,
    pub took: Duration,
}

/// How many connections the flood opens.
#[derive(Debug, Clone, Copy)]
pub struct Count {
    /// Connections the plan asked for.
    pub asked: usize,
    /// Connections tried: fewer than asked when this process may not hold them all.
    pub tried: usize,
    /// This process's open-files limit once raised to its hard limit, when it lowered the count.
    pub limited_by: Option<u64>,
}

impl Count {
    /// The plan's count, raising this process's open-files limit for it, and lowered to what
    /// the limit leaves room for.
    fn within_limit(asked: usize) -> Result<Self> {
        let limit = raise_open_files(asked as u64 + OWN_FILES)?;
        let room = usize::try_from(limit.saturating_sub(OWN_FILES)).unwrap_or(usize::MAX);
        let tried = asked.min(room);
        Ok(Self {
            asked,
            tried,
            limited_by: (tried < asked).then_some(limit),
        })
    }
}

/// What one flood measured.
#[derive(Debug, Clone)]
pub struct Flood {
    pub count: Count,
    /// Connections accepted and held open until the end of the hold.
    pub opened: usize,
    /// Connections that could not be made or sent their bytes (a refusal the server answered
    /// before this side wrote counts here too).
    pub failed: usize,
    /// How long opening them all took.
    pub opening: Duration,
    pub hold: Duration,
    pub before: Usage,
    /// The largest figures while the connections were opened (the first ones' heads time out
    /// while the last are opened), and over the hold.
    pub peak_opening: Usage,
    pub peak_hold: Usage,
    /// Once the open files were back, or at [`BACK_WITHIN`].
    pub after: Usage,
    /// From the clients' close until the leader's open files were back to before (within
    /// [`BACK_MARGIN`]); `None` when they were not within [`BACK_WITHIN`].
    pub back_after: Option<Duration>,
    pub probes: Vec<Probe>,
    /// `/leader` before the flood, its last answer during the hold (it shares the general
    /// connections with the flood, so it may get none), and after.
    pub view_before: Option<View>,
    pub view_during: Option<View>,
    pub view_after: Option<View>,
    /// The growth of each of [`REFUSED`] over the flood; `None` when `/metrics` did not answer.
    pub refused: [Option<f64>; 2],
}

impl Flood {
    /// The answer times of the probes answered `200`.
    pub fn answered(&self) -> Vec<Duration> {
        self.probes
            .iter()
            .filter(|p| p.code == Some(200))
            .map(|p| p.took)
            .collect()
    }

    /// Whether one term ran through it all: the same leader and token before, during (when
    /// `/leader` answered) and after, and no transition between.
    pub fn kept_the_lease(&self) -> bool {
        match (self.view_before, self.view_after) {
            (Some(before), Some(after)) => {
                before.is_leader
                    && before == after
                    && self.view_during.is_none_or(|during| during == before)
            }
            _ => false,
        }
    }
}

/// Floods one leader, on a redis-server of its own, with the plan's connections for the plan's
/// hold.
pub async fn measure(bin: &Path, plan: &Plan) -> Result<Flood> {
    let count = Count::within_limit(plan.flood_connections)?;
    let redis = crate::start_redis().await?;
    let leader = procs::start(
        bin,
        &redis.url(),
        "bench/flood",
        "flood-a",
        &plan.load_timing,
        &[],
    )
    .await?;
    leader
        .wait_event(0, "became leader", None, Duration::from_secs(15))
        .await?;
    // Blocking sockets and /proc reads, on this worker: the leader and its redis-server stay
    // owned by this task.
    tokio::task::block_in_place(|| flood(&leader, count, plan.flood_hold))
}

/// Opens `count.tried` connections to `leader`, holds them for `hold` while probing, then
/// closes them and waits for its files to come back.
fn flood(leader: &Replica, count: Count, hold: Duration) -> Result<Flood> {
    let pid = leader.process.pid().as_raw();
    let before = usage(pid)?;
    let view_before = view(leader);
    let refused_before = REFUSED.map(|name| leader.metric(name));

    let began = Instant::now();
    let (held, failed, peak_opening) = open(leader.http, count.tried, pid)?;
    let opening = began.elapsed();

    let mut peak_hold = usage(pid)?;
    let (mut probes, mut view_during) = (Vec::new(), None);
    let hold_began = Instant::now();
    let mut round = hold_began;
    while round < hold_began + hold {
        peak_hold = peak_hold.max(usage(pid)?);
        for path in PROBES {
            let asked = Instant::now();
            let code = http_get(leader.http, path).map(|(code, _)| code);
            probes.push(Probe {
                path,
                code,
                took: asked.elapsed(),
            });
        }
        view_during = view(leader).or(view_during);
        round += EVERY;
        std::thread::sleep(round.saturating_duration_since(Instant::now()));
    }
    let opened = held.len();
    drop(held);

    let closed = Instant::now();
    let back = first_instant(BACK_WITHIN, || {
        process_tree::open_files(pid).is_some_and(|files| files <= before.files + BACK_MARGIN)
    });
    let after = usage(pid)?;
    let refused_after = REFUSED.map(|name| leader.metric(name));
    let refused = std::array::from_fn(|i| {
        refused_after[i].map(|after| after - refused_before[i].unwrap_or(0.0))
    });
    Ok(Flood {
        count,
        opened,
        failed,
        opening,
        hold,
        before,
        peak_opening,
        peak_hold,
        after,
        back_after: back.map(|at| at - closed),
        probes,
        view_before,
        view_during,
        view_after: view(leader),
        refused,
    })
}

/// `count` connections to `addr`, alternately an unread event stream and half a head: those
/// held, how many failed, and the largest usage of `pid` read every [`EVERY`] meanwhile.
fn open(addr: SocketAddr, count: usize, pid: i32) -> Result<(Vec<TcpStream>, usize, Usage)> {
    let mut held = Vec::with_capacity(count);
    let mut failed = 0;
    let mut peak = usage(pid)?;
    let mut next_look = Instant::now() + EVERY;
    for i in 0..count {
        if Instant::now() >= next_look {
            peak = peak.max(usage(pid)?);
            next_look += EVERY;
        }
        let request = if i % 2 == 0 {
            STREAM_REQUEST
        } else {
            HALF_HEAD
        };
        match connect(addr, request) {
            Ok(stream) => held.push(stream),
            Err(_) => failed += 1,
        }
    }
    Ok((held, failed, peak.max(usage(pid)?)))
}

/// One connection that sends `request` and never reads. Its receive buffer is 4 KiB (the
/// kernel's default is 128 KiB), so that an event stream's writes back up at the server sooner.
fn connect(addr: SocketAddr, request: &[u8]) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_recv_buffer_size(4096)?;
    socket.connect_timeout(&addr.into(), CONNECT_TIMEOUT)?;
    let mut stream = TcpStream::from(socket);
    stream.write_all(request)?;
    Ok(stream)
}

/// The leader's VmRSS and its open files now.
fn usage(pid: i32) -> Result<Usage> {
    let rss_kib = read_proc(pid)?.rss_kib;
    let files = process_tree::open_files(pid).with_context(|| format!("list /proc/{pid}/fd"))?;
    Ok(Usage { rss_kib, files })
}

/// `/leader`'s role, token and transitions, when it answers `200` with them.
fn view(leader: &Replica) -> Option<View> {
    let json = leader.leader_view()?;
    Some(View {
        is_leader: json["is_leader"].as_bool()?,
        token: json["token"].as_u64(),
        transitions: json["transitions"].as_u64()?,
    })
}

/// Raises this process's soft limit of open files to its hard limit when it is below `wanted`
/// (each connection of the flood is a file here too); the soft limit now in force.
fn raise_open_files(wanted: u64) -> Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given, which lives here.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error()).context("read the open-files limit");
    }
    if limit.rlim_cur >= wanted {
        return Ok(limit.rlim_cur);
    }
    // An unlimited hard limit still has the kernel's ceiling (fs.nr_open): ask for what is needed.
    let raised = libc::rlimit {
        rlim_cur: if limit.rlim_max == libc::RLIM_INFINITY {
            wanted
        } else {
            limit.rlim_max
        },
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given, which lives here.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(io::Error::last_os_error()).context("raise the open-files limit");
    }
    Ok(raised.rlim_cur)
}
