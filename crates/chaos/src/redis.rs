//! The real `redis-server` under test: on a free loopback port (never 6379), append-only with
//! an fsync on every write, so that a restart keeps every acknowledged write; killed,
//! restarted (with its data, or with an empty directory on the same port) and paused by the
//! nemesis.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;

use crate::procs::Guarded;

/// A free loopback port (it may be taken again before it is used; callers retry).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("cannot bind an ephemeral loopback port")?;
    Ok(listener.local_addr().context("no local address")?.port())
}

/// One redis-server process at a time, always on the same port and directory.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    process: Option<Guarded>,
    starts: u32,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server with its data in `dir` (created if missing).
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        Self::start_with(dir, &[])
    }

    /// The same, with more of redis-server's options (`--replicaof …`, `--cluster-enabled …`).
    pub fn start_with(dir: &Path, extra: &[String]) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the redis directory {}", dir.display()))?;
        let mut server = Self {
            port: 0,
            dir: dir.to_owned(),
            process: None,
            starts: 0,
            extra: extra.to_vec(),
        };
        for _ in 0..10 {
            server.port = free_port()?;
            if server.spawn_and_wait()? {
                return Ok(server);
            }
        }
        bail!(
            "redis-server did not start on any free port; its log:\n{}",
            server.log()
        )
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// How many processes were started.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Starts the process; true once it answers PING, false when it exited (port taken).
    fn spawn_and_wait(&mut self) -> anyhow::Result<bool> {
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.log_path())
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .args(["--daemonize", "no", "--protected-mode", "yes"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut process = Guarded::spawn(&mut cmd)
            .context("cannot start redis-server (is it installed? apt-get install redis-server)")?;
        self.starts += 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if process.try_exit().is_some() {
                return Ok(false);
            }
            if ping(self.addr()) {
                self.process = Some(process);
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        bail!(
            "redis-server on port {} did not answer PING within 10 s; its log:\n{}",
            self.port,
            self.log()
        )
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill_and_reap();
        }
    }

    /// Starts it again on the same port, with its data (`keep_data`) or from an empty
    /// directory.
    pub fn restart(&mut self, keep_data: bool) -> anyhow::Result<()> {
        self.kill();
        if !keep_data {
            self.wipe()?;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn_and_wait()? {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "redis-server did not start again on port {}; its log:\n{}",
            self.port,
            self.log()
        )
    }

    /// Deletes everything in the directory but the log.
    fn wipe(&self) -> anyhow::Result<()> {
        let entries = std::fs::read_dir(&self.dir)
            .with_context(|| format!("cannot list {}", self.dir.display()))?;
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
            removed.with_context(|| format!("cannot delete {}", path.display()))?;
        }
        Ok(())
    }

    /// SIGSTOP or SIGCONT.
    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        let process = self
            .process
            .as_ref()
            .context("redis-server is not running")?;
        process
            .signal(signal)
            .with_context(|| format!("cannot send {signal} to redis-server"))
    }
}

impl RedisServer {
    /// Runs one command through `redis-cli` on database `db`, straight to the server (no
    /// proxy); its reply as redis-cli prints it. An error reply is an error.
    pub fn cli(&self, db: u32, args: &[&str]) -> anyhow::Result<String> {
        cli(self.port, db, args)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The client connections Redis has: the port of each one's address, and whether it is
    /// subscribed (pub/sub).
    pub fn clients(&self) -> anyhow::Result<Vec<(u16, bool)>> {
        let list = self.cli(0, &["CLIENT", "LIST"])?;
        Ok(list
            .lines()
            .filter_map(|line| {
                let field = |name: &str| {
                    line.split(' ')
                        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                };
                let port = field("addr")?.rsplit(':').next()?.parse().ok()?;
                let subscribed = field("sub").is_some_and(|n| n != "0")
                    || field("psub").is_some_and(|n| n != "0")
                    || field("ssub").is_some_and(|n| n != "0");
                Some((port, subscribed))
            })
            .collect())
    }
}

/// Runs one command through `redis-cli` against the server (or Sentinel) on `port`, database
/// `db`; its reply as redis-cli prints it. An error reply is an error.
pub fn cli(port: u16, db: u32, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-n", &db.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run redis-cli (apt-get install redis-tools)")?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || text.starts_with("ERR") || text.starts_with("OOM") {
        bail!(
            "redis-cli {}: {text} {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(text)
}

/// True when a server at `addr` answers PING with PONG (not while it loads its data).
fn ping(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    let mut got = 0;
    while got < reply.len() {
        match stream.read(&mut reply[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    reply[..got].starts_with(b"+PONG")
}
