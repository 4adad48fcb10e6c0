//! A Sentinel deployment of real processes: a master, a replica and three Sentinels on free
//! ports, each in its own directory, all killed on drop.
//!
//! The last Sentinel may be made deaf ([`SentinelSet::start_with_a_deaf_sentinel`]): it logs in
//! to the Redis nodes as a user without pub/sub channels, so it neither hears nor sends the
//! Sentinels' hello messages. It never learns of the others or of a failover they make, and
//! keeps naming the master it was started with: a Sentinel cut off from its peers together with
//! the old master, or one restarted from a stale configuration.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::child::Guarded;
use crate::port::free_port;
use crate::redis_server::RedisServer;

/// The name the Sentinels monitor the master by.
pub const MASTER_NAME: &str = "mymaster";

/// The deaf Sentinel's user on the Redis nodes: every command but those that would demote a
/// node (so that it cannot undo the others' failover either), every key, no channel.
const DEAF_USER: &str = "deaf-sentinel";
const DEAF_PASSWORD: &str = "deaf-sentinel-password";

pub struct SentinelSet {
    pub master: RedisServer,
    pub replica: RedisServer,
    sentinels: Vec<(u16, Guarded, tempfile::TempDir)>,
    deaf: bool,
}

impl SentinelSet {
    pub fn start() -> Self {
        Self::start_with_master_args(&[])
    }

    /// A set whose master is started with `extra` arguments (e.g. commands renamed away).
    pub fn start_with_master_args(extra: &[&str]) -> Self {
        Self::start_set(extra, false)
    }

    /// A set whose last Sentinel is deaf (see the module's docs); its master is started with
    /// `extra` arguments.
    pub fn start_with_a_deaf_sentinel(extra: &[&str]) -> Self {
        Self::start_set(extra, true)
    }

    fn start_set(extra: &[&str], deaf: bool) -> Self {
        let password = format!(">{DEAF_PASSWORD}");
        let deaf_user = [
            "--user",
            DEAF_USER,
            "on",
            &password,
            "~*",
            "resetchannels",
            "+@all",
            "-replicaof",
            "-slaveof",
        ];
        let users: &[&str] = if deaf { &deaf_user } else { &[] };
        let master = RedisServer::builder()
            .args(extra.iter().copied())
            .args(users.iter().copied())
            .start();
        let master_port = master.port().to_string();
        let replica = RedisServer::builder()
            .args(["--replicaof", "127.0.0.1", &master_port])
            .args(["--replica-announce-ip", "127.0.0.1"])
            .args(users.iter().copied())
            .start();
        let sentinels = (0..3)
            .map(|index| {
                let login = if deaf && index == 2 {
                    format!(
                        "sentinel auth-user {MASTER_NAME} {DEAF_USER}\n\
                         sentinel auth-pass {MASTER_NAME} {DEAF_PASSWORD}\n"
                    )
                } else {
                    String::new()
                };
                let dir = tempfile::tempdir().expect("sentinel dir");
                let port = free_port();
                let conf: PathBuf = dir.path().join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                         sentinel announce-ip 127.0.0.1\n\
                         sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                         sentinel failover-timeout {MASTER_NAME} 4000\n\
                         sentinel parallel-syncs {MASTER_NAME} 1\n{login}",
                        dir = dir.path().display()
                    ),
                )
                .expect("write sentinel.conf");
                let mut cmd = Command::new("redis-server");
                cmd.arg(&conf).arg("--sentinel");
                let child = Guarded::spawn(cmd, &format!("sentinel on port {port}"))
                    .unwrap_or_else(|e| panic!("{e}"));
                (port, child, dir)
            })
            .collect();
        let set = Self {
            master,
            replica,
            sentinels,
            deaf,
        };
        set.wait_until_monitored();
        set
    }

    /// `redis+sentinel://` URL over the three Sentinels.
    pub fn url(&self) -> String {
        self.url_in_order(&[0, 1, 2])
    }

    /// `redis+sentinel://` URL that lists the Sentinels `order` names (indexes), in that order.
    pub fn url_in_order(&self, order: &[usize]) -> String {
        let hosts: Vec<String> = order
            .iter()
            .map(|&index| format!("127.0.0.1:{}", self.sentinels[index].0))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The master's port as Sentinel `index` names it.
    pub fn master_port_named_by(&self, index: usize) -> Option<u16> {
        let (port, _, _) = &self.sentinels[index];
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
        let mut conn = client
            .get_connection_with_timeout(Duration::from_millis(500))
            .ok()?;
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .ok()?;
        addr.map(|(_, p)| p)
    }

    /// Sends `signal` to Sentinel `index` (in the URL's order): SIGSTOP freezes it, and its
    /// kernel still accepts connections that it never answers.
    pub fn signal_sentinel(&self, index: usize, signal: Signal) {
        let (_, child, _) = &self.sentinels[index];
        child.signal(signal).expect("signal a sentinel");
    }

    /// Asks the first Sentinel to fail over now, without the others' agreement.
    pub fn failover(&self) {
        let (port, _, _) = &self.sentinels[0];
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).expect("sentinel");
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect to a sentinel");
        let _: () = redis::cmd("SENTINEL")
            .arg("failover")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .expect("SENTINEL FAILOVER");
    }

    /// The master's port as the first Sentinel names it.
    pub fn master_port(&self) -> Option<u16> {
        self.master_port_named_by(0)
    }

    fn wait_until_monitored(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        // The replica is in sync and every Sentinel knows the master and the other Sentinels.
        loop {
            let synced = {
                let info: String = self.replica.cmd(&["INFO", "replication"]);
                info.contains("master_link_status:up")
            };
            let known = self
                .sentinels
                .iter()
                .enumerate()
                .all(|(index, (port, _, _))| {
                    // A deaf Sentinel knows no other, and the others know only each other.
                    let others = match (self.deaf, index) {
                        (false, _) => "2",
                        (true, 2) => "0",
                        (true, _) => "1",
                    };
                    redis::Client::open(format!("redis://127.0.0.1:{port}"))
                        .ok()
                        .and_then(|c| {
                            c.get_connection_with_timeout(Duration::from_millis(300))
                                .ok()
                        })
                        .and_then(|mut c| {
                            redis::cmd("SENTINEL")
                                .arg("master")
                                .arg(MASTER_NAME)
                                .query::<Vec<String>>(&mut c)
                                .ok()
                        })
                        .is_some_and(|fields| {
                            fields
                                .windows(2)
                                .any(|w| w[0] == "num-other-sentinels" && w[1] == others)
                        })
                });
            if synced && known {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Sentinel set did not settle within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for (port, child, dir) in &mut self.sentinels {
            child.kill();
            if std::thread::panicking() {
                let log =
                    std::fs::read_to_string(dir.path().join("sentinel.log")).unwrap_or_default();
                eprintln!("---- sentinel {port} log ----\n{log}");
            }
        }
    }
}
