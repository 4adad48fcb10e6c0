//! A real PostgreSQL cluster for tests: `initdb` into a temporary directory, `pg_ctl start` on a
//! free loopback port (never 5432), trust authentication as `postgres`; stopped and removed on
//! drop, its log printed when the test that owns it fails. As root the server programs run as
//! the `postgres` user that Debian's package creates (initdb refuses root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::port::free_port;

pub struct PostgresServer {
    port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    running: bool,
}

/// Where the server's programs (`initdb`, `pg_ctl`, `postgres`) are: `$TESTBED_PG_BINDIR`, else
/// the newest `/usr/lib/postgresql/<version>/bin` (Debian's layout), else the PATH (an empty
/// path).
pub fn bin_dir() -> PathBuf {
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
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A command that runs the server program at `path` as the `postgres` user when this process is
/// root (through `runuser`), as itself otherwise.
pub fn as_postgres(path: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(path);
        c
    } else {
        Command::new(path)
    }
}

impl PostgresServer {
    /// A fresh cluster, started and accepting connections.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = Self {
            port: 0,
            dir,
            bin: bin_dir(),
            running: false,
        };
        if is_root() {
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(server.dir.path())
                .status()
                .expect("run chown");
            assert!(
                chown.success(),
                "chown the data directory to postgres (apt-get install postgresql creates the user)"
            );
        }
        let initdb = server.run_as_postgres(
            "initdb",
            &[
                "-D",
                server.data().to_str().expect("utf-8 temp path"),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "--no-instructions",
            ],
        );
        assert!(
            initdb.status.success(),
            "initdb failed (apt-get install postgresql):\n{}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        for _ in 0..10 {
            server.port = free_port();
            if server.pg_ctl_start() {
                server.running = true;
                return server;
            }
        }
        panic!("postgres did not start on any free port:\n{}", server.log());
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// Runs one of the server's programs, as `postgres` when we are root.
    fn run_as_postgres(&self, program: &str, args: &[&str]) -> Output {
        let path = self.bin.join(program);
        as_postgres(&path)
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", path.display()))
    }

    /// `pg_ctl start -w` on `self.port`; false when it did not come up (the port was taken).
    fn pg_ctl_start(&self) -> bool {
        let socket_dir = self.dir.path().to_str().expect("utf-8 temp path");
        let options = format!(
            "-p {} -k {socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port
        );
        let out = self.run_as_postgres(
            "pg_ctl",
            &[
                "-D",
                self.data().to_str().expect("utf-8 temp path"),
                "-l",
                self.log_path().to_str().expect("utf-8 temp path"),
                "-o",
                &options,
                "-t",
                "30",
                "-w",
                "start",
            ],
        );
        out.status.success()
    }

    pub fn port(&self) -> u16 {
        self.port
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
        if self.running {
            let data = self.data();
            let _ = self.run_as_postgres(
                "pg_ctl",
                &[
                    "-D",
                    data.to_str().unwrap_or_default(),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
            );
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
