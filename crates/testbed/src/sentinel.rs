//! A Sentinel deployment of real processes: a master, a replica and three Sentinels on free
//! ports, each in its own directory, all killed on drop; all of one [`Engine`].
//!
//! The Sentinels may instead listen on addresses of the test's choice, all on one port
//! ([`SentinelSet::start_on_addresses`]): the Sentinels behind one name that resolves to all of
//! them, as the pods behind a headless Kubernetes Service (see [`hosts`](crate::hosts)).
//!
//! The last Sentinel may be made deaf ([`SentinelSet::start_with_a_deaf_sentinel`]): it logs in
//! to the Redis nodes as a user without pub/sub channels, so it neither hears nor sends the
//! Sentinels' hello messages. It never learns of the others or of a failover they make, and
//! keeps naming the master it was started with: a Sentinel cut off from its peers together with
//! the old master, or one restarted from a stale configuration.
//!
//! The Sentinels may instead monitor the master through a fault proxy
//! ([`SentinelSet::start_with_a_proxied_master`]): they name the proxy, so every client that asks
//! them reaches the master through it.

use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::child::Guarded;
use crate::engine::Engine;
use crate::port::on_a_free_port;
use crate::proxy::FaultProxy;
use crate::redis_server::{RedisServer, answers_as_itself};

/// The name the Sentinels monitor the master by.
pub const MASTER_NAME: &str = "mymaster";

/// The deaf Sentinel's user on the Redis nodes: every command but those that would demote a
/// node (so that it cannot undo the others' failover either), every key, no channel.
const DEAF_USER: &str = "deaf-sentinel";
const DEAF_PASSWORD: &str = "deaf-sentinel-password";

pub struct SentinelSet {
    pub master: RedisServer,
    pub replica: RedisServer,
    /// Each Sentinel's address, port, process and directory.
    sentinels: Vec<(String, u16, Guarded, tempfile::TempDir)>,
    deaf: bool,
    /// The proxy the Sentinels monitor the master through, when they do.
    master_proxy: Option<FaultProxy>,
}

/// Where the Sentinels listen.
enum Placement<'a> {
    /// Three on 127.0.0.1, each on a port of its own.
    OwnPorts,
    /// One on each address, all on one port.
    OnePort(&'a [&'a str]),
}

impl SentinelSet {
    pub fn start() -> Self {
        Self::start_with_master_args(&[])
    }

    /// A set whose nodes and Sentinels all run `engine`.
    pub fn start_on(engine: Engine) -> Self {
        Self::start_set(engine, &[], false, false, Placement::OwnPorts)
    }

    /// A set whose master is started with `extra` arguments (e.g. commands renamed away).
    pub fn start_with_master_args(extra: &[&str]) -> Self {
        Self::start_set(Engine::default(), extra, false, false, Placement::OwnPorts)
    }

    /// A set whose Sentinels listen one on each of `addresses` (loopback addresses such as
    /// 127.0.0.2), all on one port ([`SentinelSet::port`]).
    pub fn start_on_addresses(addresses: &[&str]) -> Self {
        Self::start_set(
            Engine::default(),
            &[],
            false,
            false,
            Placement::OnePort(addresses),
        )
    }

    /// A set whose last Sentinel is deaf (see the module's docs); its master is started with
    /// `extra` arguments.
    pub fn start_with_a_deaf_sentinel(extra: &[&str]) -> Self {
        Self::start_set(Engine::default(), extra, true, false, Placement::OwnPorts)
    }

    /// A set whose Sentinels monitor the master through a fault proxy
    /// ([`SentinelSet::master_proxy`]), which passes everything until told otherwise.
    pub fn start_with_a_proxied_master() -> Self {
        Self::start_set(Engine::default(), &[], false, true, Placement::OwnPorts)
    }

    fn start_set(
        engine: Engine,
        extra: &[&str],
        deaf: bool,
        proxied: bool,
        placement: Placement,
    ) -> Self {
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
            .engine(engine)
            .args(extra.iter().copied())
            .args(users.iter().copied())
            .start();
        let master_port = master.port().to_string();
        let master_proxy = proxied.then(|| FaultProxy::start(master.addr()));
        let monitored_port = master_proxy
            .as_ref()
            .map_or(master.port(), |proxy| proxy.addr().port());
        let replica = RedisServer::builder()
            .engine(engine)
            .args(["--replicaof", "127.0.0.1", &master_port])
            .args(["--replica-announce-ip", "127.0.0.1"])
            .args(users.iter().copied())
            .start();
        // Each group of Sentinels shares a port: one each, or all three on the addresses given.
        let groups: Vec<Vec<&str>> = match placement {
            Placement::OwnPorts => vec![vec!["127.0.0.1"]; 3],
            Placement::OnePort(addresses) => vec![addresses.to_vec()],
        };
        let mut sentinels = Vec::new();
        for group in groups {
            let mut started = Vec::new();
            on_a_free_port(|port| {
                started.clear();
                for host in &group {
                    let login = if deaf && sentinels.len() + started.len() == 2 {
                        format!(
                            "sentinel auth-user {MASTER_NAME} {DEAF_USER}\n\
                             sentinel auth-pass {MASTER_NAME} {DEAF_PASSWORD}\n"
                        )
                    } else {
                        String::new()
                    };
                    match start_sentinel(engine, host, port, monitored_port, &login)? {
                        Some((child, dir)) => started.push(((*host).to_owned(), port, child, dir)),
                        None => return Ok(false),
                    }
                }
                Ok(true)
            })
            .unwrap_or_else(|e| panic!("start the Sentinels {group:?}: {e}"));
            sentinels.append(&mut started);
        }
        let set = Self {
            master,
            replica,
            sentinels,
            deaf,
            master_proxy,
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
            .map(|&index| {
                let (host, port, _, _) = &self.sentinels[index];
                format!("{host}:{port}")
            })
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// `redis+sentinel://` URL that names the Sentinels by `host` (a name that resolves to
    /// their addresses) on their one port.
    pub fn url_by_name(&self, host: &str) -> String {
        format!("redis+sentinel://{host}:{}/{MASTER_NAME}", self.port())
    }

    /// The port of the first Sentinel: the port of all of them after
    /// [`SentinelSet::start_on_addresses`].
    pub fn port(&self) -> u16 {
        self.sentinels[0].1
    }

    /// The Sentinels' addresses (`host:port`), in the order they were started.
    pub fn addresses(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|(host, port, _, _)| format!("{host}:{port}"))
            .collect()
    }

    /// A client of Sentinel `index`.
    fn client(&self, index: usize) -> redis::RedisResult<redis::Client> {
        let (host, port, _, _) = &self.sentinels[index];
        redis::Client::open(format!("redis://{host}:{port}"))
    }

    /// The master's port as Sentinel `index` names it.
    pub fn master_port_named_by(&self, index: usize) -> Option<u16> {
        let client = self.client(index).ok()?;
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
        let (_, _, child, _) = &self.sentinels[index];
        child.signal(signal).expect("signal a sentinel");
    }

    /// Runs one command on every Sentinel (as its default user); panics on an error reply.
    pub fn on_every_sentinel(&self, args: &[&str]) {
        for index in 0..self.sentinels.len() {
            let mut conn = (self.client(index))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
                .unwrap_or_else(|e| panic!("connect to sentinel {index}: {e}"));
            let mut cmd = redis::cmd(args[0]);
            cmd.arg(&args[1..]);
            cmd.query::<redis::Value>(&mut conn)
                .unwrap_or_else(|e| panic!("sentinel {index}: {args:?}: {e}"));
        }
    }

    /// Asks the first Sentinel to fail over now, without the others' agreement.
    pub fn failover(&self) {
        let client = self.client(0).expect("sentinel");
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect to a sentinel");
        let _: () = redis::cmd("SENTINEL")
            .arg("failover")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .expect("SENTINEL FAILOVER");
    }

    /// The proxy the Sentinels monitor the master through
    /// ([`SentinelSet::start_with_a_proxied_master`]).
    pub fn master_proxy(&self) -> &FaultProxy {
        self.master_proxy
            .as_ref()
            .expect("a set started with a proxied master")
    }

    /// The master's port as the first Sentinel names it.
    pub fn master_port(&self) -> Option<u16> {
        self.master_port_named_by(0)
    }

    fn wait_until_monitored(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        // The replica is in sync and every Sentinel knows the master and the other Sentinels.
        loop {
            // A connection the replica resets meanwhile is one more look, not a failed set-up.
            let synced = (self.replica.try_cmd::<String>(&["INFO", "replication"]))
                .is_ok_and(|info| info.contains("master_link_status:up"));
            let count = self.sentinels.len();
            let known = (0..count).all(|index| {
                // A deaf Sentinel knows no other, and the others know only each other.
                let others = match (self.deaf, index) {
                    (false, _) => count - 1,
                    (true, 2) => 0,
                    (true, _) => 1,
                }
                .to_string();
                self.client(index)
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

/// Starts a Sentinel on `host:port` that monitors the master at `monitored_port`, with `login`
/// (lines of its configuration) for the Redis nodes: its process and directory once it answers
/// as itself, `None` when it exited (it lost the race for the port).
fn start_sentinel(
    engine: Engine,
    host: &str,
    port: u16,
    monitored_port: u16,
    login: &str,
) -> io::Result<Option<(Guarded, tempfile::TempDir)>> {
    let dir = tempfile::tempdir()?;
    let conf: PathBuf = dir.path().join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind {host}\ndir {dir}\nlogfile {dir}/sentinel.log\n\
             sentinel announce-ip {host}\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {monitored_port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 4000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n{login}",
            dir = dir.path().display()
        ),
    )?;
    let mut cmd = Command::new(engine.binary());
    cmd.arg(&conf).arg("--sentinel");
    let mut child = Guarded::spawn(cmd, &format!("sentinel on {host}:{port}"))?;
    let url = format!("redis://{host}:{port}");
    Ok(answers_as_itself(&mut child, &url)?.then_some((child, dir)))
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for (host, port, child, dir) in &mut self.sentinels {
            child.kill();
            if std::thread::panicking() {
                let log =
                    std::fs::read_to_string(dir.path().join("sentinel.log")).unwrap_or_default();
                eprintln!("---- sentinel {host}:{port} log ----\n{log}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_that_lost_its_port_is_not_taken_for_started() {
        let other = RedisServer::start();
        let started = start_sentinel(
            Engine::default(),
            "127.0.0.1",
            other.port(),
            other.port(),
            "",
        )
        .expect("spawn a sentinel");
        assert!(
            started.is_none(),
            "a Sentinel on port {} took the Redis there for itself",
            other.port()
        );
    }
}
