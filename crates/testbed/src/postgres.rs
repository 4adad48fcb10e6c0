//! A real PostgreSQL cluster for tests and harnesses: `initdb` into a temporary directory, then
//! `postgres` itself as a guarded child on a free loopback port (never 5432), trust
//! authentication as `postgres`. It is not started through `pg_ctl`, which detaches the server:
//! a test or harness that died would leave it running. Here it dies with the thread that
//! started it, and is stopped at once (SIGQUIT) and its directory removed when dropped; its log
//! is printed when the test that owns it fails. As root the server programs run as the
//! `postgres` user that Debian's package creates (initdb refuses root).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::child::Guarded;
use crate::port::on_a_free_port;

pub struct PostgresServer {
    port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    process: Option<Guarded>,
}

/// Where the server's programs (`initdb`, `postgres`) are: `$TESTBED_PG_BINDIR`,
/// else the newest `/usr/lib/postgresql/<version>/bin` (Debian's layout), else the PATH (an
/// empty path).
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TESTBED_PG_BINDIR") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_default()
}

/// Whether this process runs as root (the owner of `/proc/self` is its effective user): then
/// the server's programs must run as the `postgres` user, since initdb refuses root.
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A command that runs the server program at `path` as the `postgres` user when this process is
/// root, as itself otherwise. Through `setpriv`, which sets SIGKILL as the parent-death signal
/// after it changed user (a change of user clears the one [`Guarded`] sets).
fn as_postgres(path: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            "postgres",
            "--regid",
            "postgres",
            "--init-groups",
        ])
        .args(["--pdeathsig", "KILL", "--"])
        .arg(path);
        c
    } else {
        Command::new(path)
    }
}

fn utf8(path: &Path) -> io::Result<&str> {
    path.to_str()
        .ok_or_else(|| io::Error::other(format!("{} is not UTF-8", path.display())))
}

impl PostgresServer {
    /// A fresh cluster, started and accepting connections.
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`start`](Self::start), as an error for callers outside a test.
    pub fn try_start() -> io::Result<Self> {
        let mut server = Self::initialized()?;
        let started = on_a_free_port(|port| {
            server.port = port;
            server.spawn()
        });
        let why = |e| io::Error::other(format!("postgres {e}:\n{}", server.log()));
        started.map_err(why).map(|_| server)
    }

    /// A fresh cluster in a temporary directory, not started.
    fn initialized() -> io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let server = Self {
            port: 0,
            dir,
            bin: bin_dir(),
            process: None,
        };
        if is_root() {
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(server.dir.path())
                .status()?;
            if !chown.success() {
                return Err(io::Error::other(
                    "chown the data directory to postgres (apt-get install postgresql creates the user)",
                ));
            }
        }
        let data = server.data();
        let initdb = server.run_as_postgres(
            "initdb",
            &[
                "-D",
                utf8(&data)?,
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "--no-instructions",
            ],
        )?;
        if !initdb.status.success() {
            return Err(io::Error::other(format!(
                "initdb failed (apt-get install postgresql):\n{}",
                String::from_utf8_lossy(&initdb.stderr)
            )));
        }
        Ok(server)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// Runs one of the server's programs to its end, as `postgres` when we are root.
    fn run_as_postgres(&self, program: &str, args: &[&str]) -> io::Result<Output> {
        let path = self.bin.join(program);
        as_postgres(&path)
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| io::Error::new(e.kind(), format!("run {}: {e}", path.display())))
    }

    /// Starts `postgres` on `self.port`. True once the server says in its lock file
    /// (`postmaster.pid`: its pid on the first line, its state on the eighth) that it is the
    /// one that accepts connections: not merely its port, which it refuses while starting up,
    /// and which a server of another test that took the same free port answers too, until this
    /// one exits for want of it. False when it exited.
    fn spawn(&mut self) -> io::Result<bool> {
        let log = std::fs::File::create(self.log_path())?;
        let mut cmd = as_postgres(&self.bin.join("postgres"));
        let port = self.port.to_string();
        cmd.args(["-D", utf8(&self.data())?, "-p", &port])
            .args(["-k", utf8(self.dir.path())?])
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "synchronous_commit=off", "-c", "max_connections=200"])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let mut process = Guarded::spawn_unread(cmd, "postgres")?;
        let pid = process.pid().to_string();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if process.try_exit()?.is_some() {
                return Ok(false);
            }
            let lock = std::fs::read_to_string(self.data().join("postmaster.pid"));
            let lines: Vec<&str> = lock.as_deref().unwrap_or("").lines().collect();
            if lines.first() == Some(&pid.as_str())
                && lines.get(7).map(|s| s.trim()) == Some("ready")
            {
                self.process = Some(process);
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(io::Error::other(format!(
            "postgres did not accept connections within 30 s:\n{}",
            self.log()
        )))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `postgresql://postgres@127.0.0.1:PORT/postgres`, for psql and the like.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The key-value form for tokio-postgres.
    pub fn config(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// Runs `sql` through psql (stop at the first error) and returns its unaligned output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .arg(self.url())
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .expect("psql on PATH (apt-get install postgresql-client)");
        assert!(
            out.status.success(),
            "psql {sql:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            // SIGQUIT: immediate shutdown, the backends with it; the guard SIGKILLs it after.
            let _ = process.signal(Signal::SIGQUIT);
            let _ = process.wait_exit(Duration::from_secs(5));
        }
        if std::thread::panicking() {
            eprintln!(
                "---- postgres log (port {}) ----\n{}",
                self.port,
                self.log()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_server_leaves_no_process_behind() {
        let server = PostgresServer::start();
        assert_eq!(server.psql("SELECT 1"), "1");
        let pid = server.process.as_ref().expect("running").pid().as_raw();
        drop(server);
        assert!(
            !crate::process_tree::is_running(pid),
            "postgres {pid} still runs"
        );
    }

    #[test]
    fn a_server_that_lost_its_port_does_not_count_as_started() {
        let first = PostgresServer::start();
        let mut second = PostgresServer::initialized().expect("initdb");
        second.port = first.port();
        assert!(
            !second.spawn().expect("spawn"),
            "the second server took the first one's answer on port {} for its own",
            first.port()
        );
    }
}
