//! The harness's Redis servers: the test kit's [`RedisServer`], append-only with an fsync on
//! every write so that a restart keeps every acknowledged write, and talked to through
//! `redis-cli`, straight (no proxy), for the nemesis's own commands and what it reads back.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use testbed::redis_server::RedisBuilder;
use testbed::{Persistence, RedisServer};

/// A redis-server with its data and log in `dir`, append-only, fsync always.
pub fn server(dir: &Path) -> RedisBuilder {
    RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .dir(dir)
}

/// What the harness asks of a server through `redis-cli`.
pub trait RedisCli {
    /// Runs one command on database `db`; its reply as redis-cli prints it. An error reply is
    /// an error.
    fn cli(&self, db: u32, args: &[&str]) -> anyhow::Result<String>;

    /// The client connections the server has: the port of each one's address, and whether it
    /// is subscribed (pub/sub).
    fn clients(&self) -> anyhow::Result<Vec<(u16, bool)>>;
}

impl RedisCli for RedisServer {
    fn cli(&self, db: u32, args: &[&str]) -> anyhow::Result<String> {
        cli(self.port(), db, args)
    }

    fn clients(&self) -> anyhow::Result<Vec<(u16, bool)>> {
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
