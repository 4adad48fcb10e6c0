//! How a [`RedisServer`] starts: its engine, persistence, arguments, clock and directory.

use std::io;
use std::path::{Path, PathBuf};

use super::{Engine, RedisServer};
use crate::port::{on_a_free_port, try_free_addr};

/// How the server keeps its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Persistence {
    /// Nothing on disk: a restart comes back empty.
    #[default]
    None,
    /// Append-only file, fsync on every write: a restart keeps every acknowledged write.
    AofAlways,
}

/// libfaketime (Debian's `faketime`), for a server whose clock runs at another rate, or a process
/// whose wall clock jumps.
pub const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// How to start a [`RedisServer`].
#[derive(Debug, Clone, Default)]
pub struct RedisBuilder {
    engine: Engine,
    persistence: Persistence,
    extra: Vec<String>,
    dir: Option<PathBuf>,
    clock: Option<FakeClock>,
    /// The flag of a second port of its own (`--cluster-port`, `--tls-port`).
    second_port: Option<&'static str>,
}

/// A clock of the server's own, from libfaketime.
#[derive(Debug, Clone)]
pub(super) enum FakeClock {
    /// Runs this many times as fast as the machine's.
    Rate(f64),
    /// Offset as the file says (libfaketime's form, `+2 x1.0`), read at every clock call.
    File(PathBuf),
}

impl RedisBuilder {
    /// The server binary to run (default: `redis-server` on `PATH`).
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    pub fn persistence(mut self, persistence: Persistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// One more argument for `redis-server` (after the fixture's own).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra.push(arg.into());
        self
    }

    /// More arguments for `redis-server` (after the fixture's own).
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.extra.extend(args.into_iter().map(Into::into));
        self
    }

    /// A server whose clock (its `TIME`, and so its key expiry) runs `rate` times as fast as the
    /// machine's: libfaketime preloaded into it (Debian's `faketime`). Redis 6.2 of the venv
    /// only: Debian's redis-server, built with jemalloc, does not start under libfaketime.
    pub fn clock_rate(mut self, rate: f64) -> Self {
        self.engine = Engine::Redis62;
        self.clock = Some(FakeClock::Rate(rate));
        self
    }

    /// A server whose clock is offset as `file` says, read again at every clock call, so that
    /// writing `+3 x1.0` there steps its clock 3 s forward while it runs (write `+0 x1.0` before
    /// the start). As [`clock_rate`](Self::clock_rate): libfaketime, Redis 6.2 of the venv.
    pub fn clock_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.engine = Engine::Redis62;
        self.clock = Some(FakeClock::File(file.into()));
        self
    }

    /// A cluster node's bus on a free port of its own (`--cluster-port`), chosen anew with the
    /// client port at each try of the start, and kept across restarts.
    pub fn cluster_bus(mut self) -> Self {
        self.second_port = Some("--cluster-port");
        self
    }

    /// A TLS port of its own (`--tls-port`, [`RedisServer::tls_port`]), chosen and kept as the
    /// cluster bus's is; the certificates go in with [`arg`](Self::arg).
    pub fn tls_port(mut self) -> Self {
        self.second_port = Some("--tls-port");
        self
    }

    /// The engine it will run.
    pub(crate) fn chosen_engine(&self) -> Engine {
        self.engine
    }

    /// Keeps the data and the log in `dir` (created if missing, left in place on drop) instead
    /// of a temporary directory.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Starts the server on a free port and waits until it answers PING; panics when it cannot.
    pub fn start(self) -> RedisServer {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`start`](Self::start), as an error (with the server's log) for callers outside a test.
    pub fn try_start(self) -> io::Result<RedisServer> {
        let dir = match self.dir {
            Some(path) => {
                std::fs::create_dir_all(&path).map_err(|e| {
                    io::Error::new(e.kind(), format!("create {}: {e}", path.display()))
                })?;
                Dir::Given(path)
            }
            None => Dir::Temporary(tempfile::tempdir()?),
        };
        let mut server = RedisServer {
            engine: self.engine,
            port: 0,
            dir,
            child: None,
            persistence: self.persistence,
            extra: self.extra,
            clock: self.clock,
            second_port: None,
            starts: 0,
        };
        match on_a_free_port(|port| {
            server.port = port;
            if let Some(flag) = self.second_port {
                server.second_port = Some((flag, try_free_addr()?.port()));
            }
            server.spawn_and_wait()
        }) {
            Ok(_) => Ok(server),
            Err(e) => Err(io::Error::other(format!(
                "{} {e} ({}):\n{}",
                server.engine.name(),
                server.engine.install_hint(),
                server.log()
            ))),
        }
    }
}

/// Where a server keeps its data and log.
#[derive(Debug)]
pub(super) enum Dir {
    /// Deleted on drop.
    Temporary(tempfile::TempDir),
    /// The caller's, left in place.
    Given(PathBuf),
}

impl Dir {
    pub(super) fn path(&self) -> &Path {
        match self {
            Dir::Temporary(dir) => dir.path(),
            Dir::Given(path) => path,
        }
    }
}
