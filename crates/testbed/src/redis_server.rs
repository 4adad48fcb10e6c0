//! A real `redis-server` on a free port, in its own temporary directory, killed on drop; its log
//! is printed when the test that owns it panics. [`RedisServer::builder`] chooses persistence and
//! extra arguments; a server restarts on its own port, keeping what its persistence kept.

use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::child::Guarded;
use crate::port::try_free_addr;

/// How the server keeps its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Persistence {
    /// Nothing on disk: a restart comes back empty.
    #[default]
    None,
    /// Append-only file, fsync on every write: a restart keeps every acknowledged write.
    AofAlways,
}

/// How to start a [`RedisServer`].
#[derive(Debug, Clone, Default)]
pub struct RedisBuilder {
    persistence: Persistence,
    extra: Vec<String>,
}

impl RedisBuilder {
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

    /// Starts the server on a free port and waits until it answers PING; panics when it cannot.
    pub fn start(self) -> RedisServer {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`start`](Self::start), as an error (with the server's log) for callers outside a test.
    pub fn try_start(self) -> io::Result<RedisServer> {
        let mut server = RedisServer {
            port: 0,
            dir: tempfile::tempdir()?,
            child: None,
            persistence: self.persistence,
            extra: self.extra,
            starts: 0,
        };
        for _ in 0..10 {
            server.port = try_free_addr()?.port();
            if server.spawn_and_wait()? {
                return Ok(server);
            }
        }
        Err(io::Error::other(format!(
            "redis-server did not start on any free port (apt-get install redis-server):\n{}",
            server.log()
        )))
    }
}

pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Guarded>,
    persistence: Persistence,
    extra: Vec<String>,
    starts: u32,
}

impl RedisServer {
    pub fn builder() -> RedisBuilder {
        RedisBuilder::default()
    }

    /// A server without persistence or extra arguments.
    pub fn start() -> Self {
        Self::builder().start()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Pid {
        self.child.as_ref().expect("server running").pid()
    }

    /// The server's directory (its data and its log).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// What the server logged, over all its starts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Starts the process on `self.port`; true when it answers PING, false when it exited (it
    /// lost the race for the port, or an argument is bad) or stayed silent for 10 s.
    fn spawn_and_wait(&mut self) -> io::Result<bool> {
        self.spawn_only()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && child.try_exit()?.is_some()
            {
                self.child = None;
                return Ok(false);
            }
            if self.ping() {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        Ok(false)
    }

    fn spawn_only(&mut self) -> io::Result<()> {
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .args(["--save", "", "--daemonize", "no"]);
        match self.persistence {
            Persistence::None => cmd.args(["--appendonly", "no"]),
            Persistence::AofAlways => cmd.args(["--appendonly", "yes", "--appendfsync", "always"]),
        };
        cmd.args(&self.extra);
        let name = format!("redis-server on port {}", self.port);
        self.child = Some(Guarded::spawn(cmd, &name)?);
        self.starts += 1;
        Ok(())
    }

    /// The URL with the password of `--requirepass`, if the server was started with one.
    fn admin_url(&self) -> String {
        let password = self
            .extra
            .iter()
            .position(|a| a == "--requirepass")
            .and_then(|i| self.extra.get(i + 1));
        match password {
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{}", self.port),
            None => self.url(),
        }
    }

    fn ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.admin_url()) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut conn).is_ok()
    }

    /// A synchronous connection (as the admin, with `--requirepass`) for assertions and set-up.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.admin_url())
            .expect("url")
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect to the test redis")
    }

    /// Runs one command and returns its reply; panics on an error reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.connection())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// The ports (as this server sees its clients' addresses) of the clients among `ports`
    /// that hold a subscription.
    pub fn subscribed_client_ports(&self, ports: &[u16]) -> Vec<u16> {
        let clients: String = self.cmd(&["CLIENT", "LIST"]);
        clients
            .lines()
            .filter(|line| {
                line.split(' ')
                    .any(|f| f.strip_prefix("sub=").is_some_and(|n| n != "0"))
            })
            .filter_map(|line| {
                let addr = line.split(' ').find_map(|f| f.strip_prefix("addr="))?;
                addr.rsplit_once(':')?.1.parse().ok()
            })
            .filter(|port| ports.contains(port))
            .collect()
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill();
        }
    }

    /// SIGSTOP: the server stops answering but keeps its connections.
    pub fn pause(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// SIGCONT.
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    fn signal(&self, signal: Signal) {
        let child = self.child.as_ref().expect("server running");
        child
            .signal(signal)
            .unwrap_or_else(|e| panic!("{signal} to {}: {e}", child.name()));
    }

    /// Starts the server again on the same port (after [`kill`](Self::kill), or killing it),
    /// keeping whatever its persistence kept.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn_and_wait().expect("spawn redis-server") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "redis-server did not restart on port {}:\n{}",
            self.port,
            self.log()
        );
    }

    /// Starts the server again on the same port and returns as soon as it accepts TCP
    /// connections, without waiting for it to finish loading its data.
    pub fn restart_without_waiting(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        self.spawn_only().expect("spawn redis-server");
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!(
            "redis-server did not listen again on port {}:\n{}",
            self.port,
            self.log()
        );
    }

    /// Kills the server, deletes its data (not its log), and starts it again empty.
    pub fn restart_empty(&mut self) {
        self.kill();
        for entry in std::fs::read_dir(self.dir.path())
            .expect("read the server's directory")
            .flatten()
        {
            let path = entry.path();
            if path == self.log_path() {
                continue;
            }
            if path.is_dir() {
                let _ = std::fs::remove_dir_all(&path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
        self.restart();
    }

    /// Replaces the extra arguments used from the next (re)start on.
    pub fn set_extra_args(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| s.to_string()).collect();
    }

    /// Whether the process runs (was not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// How many times the process was started (restarts included).
    pub fn starts(&self) -> u32 {
        self.starts
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "---- redis-server log (port {}) ----\n{}",
                self.port,
                self.log()
            );
        }
    }
}
