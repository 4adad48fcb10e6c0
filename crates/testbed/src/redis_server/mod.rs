//! A real `redis-server` on a free port, in its own temporary directory (or one given), killed on
//! drop; its log is printed when the test that owns it panics. [`RedisServer::builder`] chooses
//! the engine (Debian's Redis 7.0 unless told), persistence, extra arguments and the directory;
//! a server restarts on its own port, keeping what its persistence kept.

mod builder;
#[cfg(test)]
mod tests;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::child::Guarded;
pub use crate::engine::Engine;
use builder::{Dir, FakeClock};
pub use builder::{FAKETIME, Persistence, RedisBuilder};

pub struct RedisServer {
    engine: Engine,
    port: u16,
    dir: Dir,
    child: Option<Guarded>,
    persistence: Persistence,
    extra: Vec<String>,
    clock: Option<FakeClock>,
    /// A second port and its flag ([`RedisBuilder::cluster_bus`], [`RedisBuilder::tls_port`]).
    second_port: Option<(&'static str, u16)>,
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

    /// A server of `engine` without persistence or extra arguments.
    pub fn start_on(engine: Engine) -> Self {
        Self::builder().engine(engine).start()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its TLS port, when it was built with one ([`RedisBuilder::tls_port`]).
    pub fn tls_port(&self) -> Option<u16> {
        self.second_port
            .filter(|(flag, _)| *flag == "--tls-port")
            .map(|(_, port)| port)
    }

    /// The server binary it runs.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    pub fn pid(&self) -> Pid {
        self.child.as_ref().expect("server running").pid()
    }

    /// The server's directory (its data and its log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// What the server logged, over all its starts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Starts the process on `self.port`; true when it answers, false when it exited (it lost
    /// the race for the port, or an argument is bad) or stayed silent for 10 s.
    fn spawn_and_wait(&mut self) -> io::Result<bool> {
        self.spawn_only()?;
        let url = self.admin_url();
        let up = match self.child.as_mut() {
            Some(child) => answers_as_itself(child, &url)?,
            None => false,
        };
        if !up {
            self.kill();
        }
        Ok(up)
    }

    fn spawn_only(&mut self) -> io::Result<()> {
        let mut cmd = Command::new(self.engine.binary());
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
        if let Some((flag, port)) = self.second_port {
            cmd.args([flag.to_owned(), port.to_string()]);
        }
        if let Some(clock) = &self.clock {
            if !Path::new(FAKETIME).is_file() {
                return Err(io::Error::other(format!(
                    "no {FAKETIME}: scripts/ensure-tools.sh installs Debian's faketime"
                )));
            }
            cmd.env("LD_PRELOAD", FAKETIME);
            match clock {
                FakeClock::Rate(rate) => cmd.env("FAKETIME", format!("+0 x{rate}")),
                FakeClock::File(file) => cmd
                    .env("FAKETIME_TIMESTAMP_FILE", file)
                    .env("FAKETIME_NO_CACHE", "1"),
            };
        }
        let name = format!("{} on port {}", self.engine.name(), self.port);
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

    /// A synchronous connection (as the admin, with `--requirepass`) for assertions and set-up.
    pub fn connection(&self) -> redis::Connection {
        self.try_connection().expect("connect to the test redis")
    }

    fn try_connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.admin_url())?.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// Creates ACL user `name` with `rule` (space-separated ACL words) and password `pw`,
    /// through the admin connection; panics when Redis refuses it.
    pub fn set_acl_user(&self, name: &str, rule: &str, pw: &str) {
        let mut args = vec!["ACL", "SETUSER", name, "reset"];
        args.extend(rule.split(' '));
        let password = format!(">{pw}");
        args.push(&password);
        let ok: String = self.cmd(&args);
        assert_eq!(ok, "OK", "ACL SETUSER {name}");
    }

    /// Runs one command and returns its reply; panics on an error reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.try_cmd(args)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// Runs one command and returns its reply, or the words of its error reply (or of a failed
    /// connection).
    pub fn try_cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> Result<T, String> {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        let mut connection = self.try_connection().map_err(|e| e.to_string())?;
        c.query(&mut connection).map_err(|e| e.to_string())
    }

    /// How many times this server ran `command` (`INFO commandstats`), scripts' calls included.
    pub fn calls(&self, command: &str) -> u64 {
        self.command_stat(command, "calls")
    }

    /// How many calls of `command` this server refused before running them (an ACL without it,
    /// among others; Redis 7.0 has no `acl_access_denied_cmd`).
    pub fn rejected_calls(&self, command: &str) -> u64 {
        self.command_stat(command, "rejected_calls")
    }

    fn command_stat(&self, command: &str, field: &str) -> u64 {
        let info: String = self.cmd(&["INFO", "commandstats"]);
        command_stats(&info, field)
            .get(command)
            .copied()
            .unwrap_or(0)
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
        self.try_signal(signal).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Sends `signal` (SIGSTOP, SIGCONT…) to the server; an error when it is not running.
    pub fn try_signal(&self, signal: Signal) -> io::Result<()> {
        let child = self.child.as_ref().ok_or_else(|| {
            io::Error::other(format!(
                "{signal} to redis-server on port {}: it is not running",
                self.port
            ))
        })?;
        child
            .signal(signal)
            .map_err(|e| io::Error::other(format!("{signal} to {}: {e}", child.name())))
    }

    /// Starts the server again on the same port (after [`kill`](Self::kill), or killing it),
    /// keeping whatever its persistence kept.
    pub fn restart(&mut self) {
        self.try_restart().unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`restart`](Self::restart), as an error (with the server's log) for callers outside a
    /// test.
    pub fn try_restart(&mut self) -> io::Result<()> {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn_and_wait()? {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(io::Error::other(format!(
            "redis-server did not restart on port {}:\n{}",
            self.port,
            self.log()
        )))
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
        self.try_restart_empty().unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`restart_empty`](Self::restart_empty), as an error for callers outside a test: a file
    /// that cannot be deleted is one.
    pub fn try_restart_empty(&mut self) -> io::Result<()> {
        self.kill();
        let context = |path: &Path, e: io::Error| {
            io::Error::new(e.kind(), format!("delete {}: {e}", path.display()))
        };
        let entries =
            std::fs::read_dir(self.dir.path()).map_err(|e| context(self.dir.path(), e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path == self.log_path() {
                continue;
            }
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.map_err(|e| context(&path, e))?;
        }
        self.try_restart()
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

/// Waits until `child`, a Redis or Sentinel process just started, answers at `url` as itself
/// (`INFO server`'s `process_id` is its pid): true then; false when it exited (it lost the race
/// for its port, or an argument is bad) or stayed silent for 10 s. A port answering is not
/// enough: the server of another test that took the same free port answers too, until that
/// test ends and its server with it, while this one exits for want of the port. A server still
/// loading its data (`loading:1`) answers `INFO` but refuses reads with `LOADING`, so it has
/// not started yet; a Sentinel has no `loading` field.
pub(crate) fn answers_as_itself(child: &mut Guarded, url: &str) -> io::Result<bool> {
    let ours = format!("process_id:{}", child.pid());
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_exit()?.is_some() {
            return Ok(false);
        }
        let info = redis::Client::open(url)
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("INFO").query::<String>(&mut c));
        let started = |info: String| {
            let mut lines = info.lines().map(str::trim_end);
            lines.clone().any(|l| l == ours) && !lines.any(|l| l == "loading:1")
        };
        if info.is_ok_and(started) {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(false)
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

/// The calls of every command in the text of `INFO commandstats`
/// (`cmdstat_<name>:calls=<n>,…`).
pub fn command_calls(info: &str) -> std::collections::BTreeMap<String, u64> {
    command_stats(info, "calls")
}

/// One counter (`calls`, `rejected_calls`, …) of every command in the text of `INFO
/// commandstats`.
fn command_stats(info: &str, field: &str) -> std::collections::BTreeMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let n = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))?;
            Some((name.to_owned(), n.trim().parse().ok()?))
        })
        .collect()
}
