//! PostgreSQL, the second fenced resource: Debian's server programs (the newest
//! `/usr/lib/postgresql/<version>/bin`), `initdb` into a directory of its own under the system's
//! temporary directory, `pg_ctl start` on a free loopback port with trust authentication as
//! `postgres`; stopped (immediately) and removed when dropped. As root the programs run as
//! the `postgres` user the package creates, since `initdb` refuses root.

use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::redis::free_port;
use crate::time::Micros;

/// A running PostgreSQL cluster.
pub struct PostgresServer {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    running: bool,
}

/// The newest `/usr/lib/postgresql/<version>/bin` that holds `initdb`.
fn bin_dir() -> anyhow::Result<PathBuf> {
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
    versions
        .pop()
        .map(|(_, bin)| bin)
        .context("no /usr/lib/postgresql/<version>/bin/initdb: apt-get install postgresql")
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
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
            bin: bin_dir()?,
            running: false,
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
            server.port = free_port()?;
            if server.pg_ctl_start()? {
                server.running = true;
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
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        command
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", path.display()))
    }

    fn pg_ctl_start(&self) -> anyhow::Result<bool> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200",
            self.port,
            self.dir.display()
        );
        let (data, log) = (self.data(), self.log_path());
        let out = self.run_as_postgres(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-t".as_ref(),
                "30".as_ref(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        )?;
        Ok(out.status.success())
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if self.running {
            let data = self.data();
            let _ = self.run_as_postgres(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-m".as_ref(),
                    "immediate".as_ref(),
                    "-w".as_ref(),
                    "stop".as_ref(),
                ],
            );
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
