//! PostgreSQL, the second fenced resource: the server programs where the test kit finds them
//! (`$TESTBED_PG_BINDIR`, else the newest `/usr/lib/postgresql/<version>/bin`), `initdb` into a directory of its own under the system's
//! temporary directory, `postgres` started as a child on a free loopback port with trust
//! authentication as `postgres` (it dies with the harness); stopped (immediately) and removed
//! when dropped. As root the programs run as the `postgres` user the package creates, since
//! `initdb` refuses root.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use testbed::Guarded;
use testbed::port::try_free_addr;
use testbed::postgres::{as_postgres, bin_dir, is_root};

use crate::time::Micros;

/// A running PostgreSQL cluster.
pub struct PostgresServer {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    process: Option<Guarded>,
}

impl PostgresServer {
    /// A fresh cluster, started and accepting connections.
    pub fn start() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "chaos-pg-{}-{}",
            std::process::id(),
            crate::time::now()
        ));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let mut server = Self {
            port: 0,
            dir,
            bin: bin_dir(),
            process: None,
        };
        if is_root() {
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&server.dir)
                .status()
                .context("cannot run chown")?;
            if !chown.success() {
                bail!("cannot chown {} to postgres", server.dir.display());
            }
        }
        let data = server.data();
        let initdb = server.run_as_postgres(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--no-sync".as_ref(),
                "--no-instructions".as_ref(),
            ],
        )?;
        if !initdb.status.success() {
            bail!(
                "initdb failed:\n{}",
                String::from_utf8_lossy(&initdb.stderr)
            );
        }
        for _ in 0..10 {
            server.port = try_free_addr().context("no free loopback port")?.port();
            if server.spawn()? {
                return Ok(server);
            }
        }
        bail!(
            "postgres did not start on any free port; its log:\n{}",
            server.log()
        )
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("postgres.log")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn run_as_postgres(&self, program: &str, args: &[&std::ffi::OsStr]) -> anyhow::Result<Output> {
        let path = self.bin.join(program);
        as_postgres(&path)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {} (apt-get install postgresql)", path.display()))
    }

    /// Starts `postgres` itself as a child (not through `pg_ctl`, which would leave it behind
    /// should the harness die): as root through `setpriv`, which drops to the `postgres` user
    /// and sets SIGKILL as the parent-death signal after that. True once `pg_isready` says it
    /// accepts connections (not merely its port: it refuses them while starting up); false
    /// when it exited (the port was taken).
    fn spawn(&mut self) -> anyhow::Result<bool> {
        let log = std::fs::File::create(self.log_path())
            .with_context(|| format!("cannot create {}", self.log_path().display()))?;
        let postgres = self.bin.join("postgres");
        let mut cmd = if is_root() {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid",
                "postgres",
                "--regid",
                "postgres",
                "--init-groups",
            ])
            .args(["--pdeathsig", "KILL", "--"])
            .arg(&postgres);
            c
        } else {
            Command::new(&postgres)
        };
        cmd.arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(&self.dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "synchronous_commit=off", "-c", "max_connections=200"])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let mut process = Guarded::spawn_unread(cmd, "postgres")
            .with_context(|| format!("cannot start {}", postgres.display()))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(process.try_exit(), Ok(Some(_))) {
                return Ok(false);
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", "postgres", "-t", "1"])
                .stdin(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                self.process = Some(process);
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "postgres did not accept connections within 30 s; its log:\n{}",
            self.log()
        )
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            // SIGQUIT: immediate shutdown, the backends with it; SIGKILL if that takes long.
            let _ = process.signal(Signal::SIGQUIT);
            let _ = process.wait_exit(Duration::from_secs(5));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A row of `chaos_writes` (or of `chaos_refused`, with `role` empty): a committed write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PgWrite {
    /// Commit order (the fence row's lock orders fenced transactions).
    pub id: i64,
    /// When the transaction inserted it (server clock, the same machine's).
    pub at: Micros,
    /// Its token.
    pub token: u64,
    /// The replica.
    pub identity: String,
    /// The writing process.
    pub pid: u32,
    /// Its write counter.
    pub seq: u64,
    /// `c` (command), `d` (daemon), `s` (stubborn worker).
    pub role: String,
}
