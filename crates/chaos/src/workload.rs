//! The leader's work: the singleton command that leasehold starts while a replica leads. It
//! writes to the fenced resource every few milliseconds with the fencing token from its
//! environment, and never stops on its own (leasehold stops it at step-down; a refusal is the
//! resource's business, and the checker's). It runs as `chaos child`, the harness's own binary.
//!
//! Each write also goes to PostgreSQL when the harness runs one (see `pgwrite.rs`). The
//! resource's reply may carry an order from the nemesis, which only the command itself obeys:
//! `FORK` (start a grandchild that calls `setsid` and writes on), `STUBBORN` (start a worker
//! in the command's process group that ignores SIGTERM) or `EXIT` (exit at once with code 1).
//! Those helpers are the same program again, told their role by [`ROLE_ENV`]; they write with
//! the command's token and their own pid, and give up by themselves after [`HELPER_LIFETIME`].

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::config::{PG_ENV, PG_FENCING_ENV, RESOURCE_ENV, WRITE_INTERVAL_ENV};
use crate::pgwrite::PgWriter;

/// The variables leasehold gives its command.
const TOKEN_ENV: &str = "LEASEHOLD_FENCING_TOKEN";
const IDENTITY_ENV: &str = "LEASEHOLD_IDENTITY";
const LEASE_ENV: &str = "LEASEHOLD_LEASE";
/// Set for the command's own helpers: `daemon` or `stubborn`.
pub const ROLE_ENV: &str = "CHAOS_CHILD_ROLE";
/// How long a helper writes at most, should nobody stop it.
pub const HELPER_LIFETIME: Duration = Duration::from_secs(20);

/// Which process of the leader's work this is, as the resource records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The command leasehold started.
    Command,
    /// A grandchild in a session of its own.
    Daemon,
    /// A worker in the command's group that ignores SIGTERM.
    Stubborn,
}

impl Role {
    /// Its letter on the wire.
    pub fn letter(self) -> char {
        match self {
            Role::Command => 'c',
            Role::Daemon => 'd',
            Role::Stubborn => 's',
        }
    }

    fn from_env() -> anyhow::Result<Role> {
        match std::env::var(ROLE_ENV).as_deref() {
            Err(_) | Ok("") => Ok(Role::Command),
            Ok("daemon") => Ok(Role::Daemon),
            Ok("stubborn") => Ok(Role::Stubborn),
            Ok(other) => anyhow::bail!("{ROLE_ENV}={other:?}: the roles are daemon and stubborn"),
        }
    }
}

/// Where and how often to write, from the environment the harness gives every leasehold.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The fenced resource.
    pub resource: SocketAddr,
    /// Time between two writes.
    pub interval: Duration,
    /// PostgreSQL's address, when the harness runs one.
    pub postgres: Option<SocketAddr>,
    /// Whether the PostgreSQL write advances the token row first (off: the negative control).
    pub pg_fencing: bool,
}

impl Settings {
    /// From `CHAOS_*` variables (the resource's address is required).
    pub fn from_env() -> anyhow::Result<Self> {
        let resource = std::env::var(RESOURCE_ENV)
            .with_context(|| format!("{RESOURCE_ENV} is not set"))?
            .parse()
            .with_context(|| format!("{RESOURCE_ENV} is not an address"))?;
        let interval = match std::env::var(WRITE_INTERVAL_ENV) {
            Ok(v) => humantime::parse_duration(&v)
                .with_context(|| format!("{WRITE_INTERVAL_ENV}={v:?} is not a duration"))?,
            Err(_) => Duration::from_millis(20),
        };
        let postgres = match std::env::var(PG_ENV) {
            Ok(v) if !v.is_empty() => Some(
                v.parse()
                    .with_context(|| format!("{PG_ENV}={v:?} is not an address"))?,
            ),
            _ => None,
        };
        let pg_fencing = std::env::var(PG_FENCING_ENV).as_deref() != Ok("off");
        Ok(Self {
            resource,
            interval,
            postgres,
            pg_fencing,
        })
    }
}

/// Writes until stopped (the command), or for [`HELPER_LIFETIME`] (a helper); returns early
/// only when the environment is not what leasehold gives.
pub fn run(settings: &Settings) -> anyhow::Result<()> {
    let token: u64 = std::env::var(TOKEN_ENV)
        .with_context(|| format!("{TOKEN_ENV} is not set: run me as leasehold's command"))?
        .parse()
        .with_context(|| format!("{TOKEN_ENV} is not a number"))?;
    let identity = std::env::var(IDENTITY_ENV)
        .with_context(|| format!("{IDENTITY_ENV} is not set: run me as leasehold's command"))?;
    if identity.is_empty() || identity.contains(char::is_whitespace) {
        anyhow::bail!("{IDENTITY_ENV} {identity:?} must be one word");
    }
    std::env::var(LEASE_ENV)
        .with_context(|| format!("{LEASE_ENV} is not set: run me as leasehold's command"))?;
    let role = Role::from_env()?;
    if role == Role::Stubborn {
        // SAFETY: setting a signal's disposition to SIG_IGN installs no handler.
        unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGTERM,
                nix::sys::signal::SigHandler::SigIgn,
            )
        }
        .context("cannot ignore SIGTERM")?;
    }
    let pid = std::process::id();
    let born = Instant::now();
    let mut pg = settings
        .postgres
        .map(|addr| PgWriter::new(addr, settings.pg_fencing));
    let mut seq: u64 = 0;
    let mut helpers: Vec<std::process::Child> = Vec::new();
    let mut link: Option<(TcpStream, BufReader<TcpStream>)> = None;
    loop {
        if role != Role::Command && born.elapsed() > HELPER_LIFETIME {
            return Ok(());
        }
        if link.is_none() {
            link = connect(settings.resource);
        }
        seq += 1;
        let mut order = None;
        if let Some((stream, reader)) = link.as_mut() {
            let letter = role.letter();
            let sent = writeln!(stream, "W {token} {identity} {pid} {seq} {letter}");
            let mut reply = String::new();
            let answered = sent.is_ok() && matches!(reader.read_line(&mut reply), Ok(n) if n > 0);
            if answered {
                order = reply.split_whitespace().nth(1).map(str::to_owned);
                if reply.starts_with("STALE") {
                    order = reply.split_whitespace().nth(2).map(str::to_owned);
                }
            } else {
                link = None;
            }
        }
        if let Some(pg) = pg.as_mut() {
            pg.write(token, &identity, pid, seq, role.letter());
        }
        if role == Role::Command {
            match order.as_deref() {
                Some("EXIT") => std::process::exit(1),
                Some("FORK") => helpers.extend(spawn_helper("daemon", true)),
                Some("STUBBORN") => helpers.extend(spawn_helper("stubborn", false)),
                _ => {}
            }
            helpers.retain_mut(|h| !matches!(h.try_wait(), Ok(Some(_))));
        }
        std::thread::sleep(settings.interval);
    }
}

/// Starts this program again as a helper: in a session of its own (`setsid`) or in this
/// process's group. It inherits the environment, the token with it.
fn spawn_helper(role: &str, new_session: bool) -> Option<std::process::Child> {
    let exe = std::env::current_exe().ok()?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env(ROLE_ENV, role)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if new_session {
        // SAFETY: setsid() is async-signal-safe; it runs in the forked child before exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
    }
    cmd.spawn().ok()
}

fn connect(resource: SocketAddr) -> Option<(TcpStream, BufReader<TcpStream>)> {
    let stream = TcpStream::connect_timeout(&resource, Duration::from_millis(500)).ok()?;
    stream.set_nodelay(true).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let reader = BufReader::new(stream.try_clone().ok()?);
    Some((stream, reader))
}
