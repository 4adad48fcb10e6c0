//! A real `redis-server` on a free port, in its own temporary directory, killed on drop. Its log
//! is printed when the test that owns it fails.

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How the server keeps its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Nothing on disk: a restart comes back empty.
    None,
    /// Append-only file, fsync on every write: a restart keeps every acknowledged write.
    AofAlways,
}

pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    persistence: Persistence,
    extra: Vec<String>,
    starts: u32,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

impl RedisServer {
    /// A server without persistence.
    pub fn start() -> Self {
        Self::start_with(Persistence::None, &[])
    }

    /// A server with the given persistence and extra arguments.
    pub fn start_with(persistence: Persistence, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = Self {
            port: 0,
            dir,
            child: None,
            persistence,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            starts: 0,
        };
        for _ in 0..10 {
            server.port = free_port();
            if server.spawn_and_wait() {
                return server;
            }
        }
        panic!(
            "redis-server did not start on any free port:\n{}",
            server.log()
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("server running").id() as i32)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.log_path()) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Starts the process on `self.port`; true when it answers PING.
    fn spawn_and_wait(&mut self) -> bool {
        self.spawn_only();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                self.child = None;
                return false; // lost the race for the port, or a bad argument
            }
            if self.ping() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn spawn_only(&mut self) {
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .arg("--save")
            .arg("")
            .arg("--daemonize")
            .arg("no");
        match self.persistence {
            Persistence::None => {
                cmd.arg("--appendonly").arg("no");
            }
            Persistence::AofAlways => {
                cmd.arg("--appendonly")
                    .arg("yes")
                    .arg("--appendfsync")
                    .arg("always");
            }
        }
        cmd.args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .expect("redis-server on PATH (apt-get install redis-server)");
        self.child = Some(child);
        self.starts += 1;
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

    /// A synchronous connection for test assertions and set-up.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.admin_url())
            .expect("url")
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect to the test redis")
    }

    /// Runs one command and returns its reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.connection())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the server stops answering but keeps its connections.
    pub fn pause(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP redis");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT redis");
    }

    /// Starts the server again on the same port (after [`kill`](Self::kill)), keeping whatever
    /// its persistence kept.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn_and_wait() {
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
        self.spawn_only();
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

    /// Kills the server, deletes its data directory's contents, and starts it again empty.
    pub fn restart_empty(&mut self) {
        self.kill();
        for entry in std::fs::read_dir(self.dir.path())
            .expect("read dir")
            .flatten()
        {
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == "redis.log") {
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

    /// Whether the process is running (not killed).
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
        if let Some(child) = self.child.as_ref() {
            // A paused server cannot die of SIGKILL any slower, but make sure it is not stopped.
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
        }
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
