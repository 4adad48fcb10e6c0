//! The Redis deployments a topology run elects on, beside the single server: a Sentinel set (a
//! master, a replica, three Sentinels, the first behind a fault proxy so that it can accept
//! connections and never answer) and a Redis Cluster (three masters, three replicas). Each
//! knows how to fail over and, for the cluster, how to move the lease's slot live.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::runtime::Handle;

use testbed::cluster::RedisCluster as Nodes;
use testbed::port::try_free_addr;
use testbed::proxy::FaultProxy;
use testbed::{Guarded, RedisServer};

use crate::redis_cli::{self, RedisCli, cli};

/// The master's name in the Sentinels' configuration.
pub const MASTER_NAME: &str = "leasemaster";

/// What the replicas elect on.
pub enum Topo {
    /// The single redis-server of `Cluster::redis`, through each replica's proxy.
    Single,
    /// A Sentinel set.
    Sentinel(SentinelSet),
    /// A Redis Cluster.
    Cluster(RedisCluster),
}

impl Topo {
    /// The URL every replica uses, when it is not its own proxy's.
    pub fn url(&self) -> Option<String> {
        match self {
            Topo::Single => None,
            Topo::Sentinel(s) => Some(s.url()),
            Topo::Cluster(c) => Some(c.url()),
        }
    }
}

/// A master, its replica, three Sentinels; Sentinel 0 is reached through `mute`.
pub struct SentinelSet {
    nodes: Vec<RedisServer>,
    sentinels: Vec<(u16, Guarded)>,
    /// The proxy in front of Sentinel 0 (blackholed: it accepts and never answers).
    pub mute: FaultProxy,
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !ok() {
        if Instant::now() >= deadline {
            bail!("{what} not within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

impl SentinelSet {
    /// Starts the set under `dir`, Sentinel 0's proxy on `runtime`.
    pub fn start(dir: &Path, runtime: &Handle) -> anyhow::Result<Self> {
        let master = redis_cli::server(&dir.join("node0")).try_start()?;
        let master_port = master.port().to_string();
        let replica = redis_cli::server(&dir.join("node1"))
            .args(["--replicaof", "127.0.0.1", &master_port])
            .args(["--replica-announce-ip", "127.0.0.1"])
            .try_start()?;
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let sdir = dir.join(format!("sentinel{i}"));
            std::fs::create_dir_all(&sdir)
                .with_context(|| format!("cannot create {}", sdir.display()))?;
            let port = try_free_addr().context("no free loopback port")?.port();
            let conf = sdir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {d}\nlogfile {d}/sentinel.log\n\
                     sentinel announce-ip 127.0.0.1\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 6000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    d = sdir.display()
                ),
            )
            .with_context(|| format!("cannot write {}", conf.display()))?;
            let mut sentinel = std::process::Command::new("redis-server");
            sentinel.arg(&conf).arg("--sentinel");
            let process = Guarded::spawn(sentinel, &format!("Sentinel {i}"))
                .context("cannot start a Sentinel")?;
            sentinels.push((port, process));
        }
        let mute = FaultProxy::start_on(
            runtime,
            std::net::SocketAddr::from(([127, 0, 0, 1], sentinels[0].0)),
        )?;
        let set = Self {
            nodes: vec![master, replica],
            sentinels,
            mute,
        };
        wait_until(
            "the Sentinels know the master and its replica in sync",
            Duration::from_secs(30),
            || {
                set.synced()
                    && set
                        .sentinels
                        .iter()
                        .all(|(p, _)| set.master_by(*p).is_some())
            },
        )?;
        Ok(set)
    }

    /// `redis+sentinel://` over Sentinel 0's proxy and Sentinels 1 and 2.
    pub fn url(&self) -> String {
        let mut hosts = vec![self.mute.url().trim_start_matches("redis://").to_owned()];
        hosts.extend(
            self.sentinels[1..]
                .iter()
                .map(|(p, _)| format!("127.0.0.1:{p}")),
        );
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    fn master_by(&self, sentinel: u16) -> Option<u16> {
        let reply = cli(
            sentinel,
            0,
            &["SENTINEL", "get-master-addr-by-name", MASTER_NAME],
        )
        .ok()?;
        reply.lines().nth(1)?.trim().parse().ok()
    }

    /// The master's port as Sentinel 1 names it.
    pub fn master_port(&self) -> Option<u16> {
        self.master_by(self.sentinels[1].0)
    }

    fn synced(&self) -> bool {
        let Some(master) = self.master_port() else {
            return false;
        };
        self.nodes.iter().all(|n| {
            let info = n.cli(0, &["INFO", "replication"]).unwrap_or_default();
            if n.port() == master {
                info.contains("role:master")
            } else {
                info.contains("master_link_status:up")
            }
        })
    }

    /// Asks Sentinel `via` for a failover and waits until the other node is master, named so
    /// by the Sentinels (the demoted one catches up before the next failover). A failover the
    /// Sentinels abort (a promotion that timed out on a loaded machine) is asked for again, up
    /// to three times. Returns the new master's port and the attempts it took.
    pub fn failover(&self, via: usize) -> anyhow::Result<(u16, usize)> {
        // The previous failover's demoted master must be back in sync first.
        wait_until("the Sentinel set in sync", Duration::from_secs(40), || {
            self.synced()
        })?;
        let before = self.master_port().context("no Sentinel names a master")?;
        let mut last = None;
        for attempt in 1..=3 {
            if let Err(e) = cli(
                self.sentinels[via].0,
                0,
                &["SENTINEL", "FAILOVER", MASTER_NAME],
            ) {
                // INPROG: an aborted failover is still being wound up.
                last = Some(e);
                std::thread::sleep(Duration::from_secs(2));
                continue;
            }
            let done = wait_until("the Sentinels' failover", Duration::from_secs(20), || {
                self.master_port().is_some_and(|p| p != before)
                    && self.nodes.iter().any(|n| {
                        Some(n.port()) == self.master_port()
                            && n.cli(0, &["INFO", "replication"])
                                .is_ok_and(|i| i.contains("role:master"))
                    })
            });
            match done {
                Ok(()) => {
                    return Ok((
                        self.master_port().context("no Sentinel names a master")?,
                        attempt,
                    ));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no failover attempt was made")))
    }
}

/// Three masters and three replicas.
pub struct RedisCluster {
    /// The test kit's cluster, its nodes the harness's servers.
    kit: Nodes,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its id.
    pub id: String,
    /// Its client port.
    pub port: u16,
    /// Whether it is a master.
    pub master: bool,
    /// Its master's id (replicas).
    pub master_id: String,
    /// The slot ranges it serves (masters).
    pub slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Starts six nodes under `dir` and creates the cluster.
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let kit = Nodes::try_create(|i| redis_cli::server(&dir.join(format!("node{i}"))))?;
        let cluster = Self { kit };
        cluster.wait_ok()?;
        Ok(cluster)
    }

    /// `redis+cluster://` with every node as a seed.
    pub fn url(&self) -> String {
        self.kit.url()
    }

    /// Every node reports `cluster_state:ok`, every replica in sync, and all agree on the
    /// masters.
    pub fn wait_ok(&self) -> anyhow::Result<()> {
        wait_until("the cluster's state ok", Duration::from_secs(30), || {
            let views: Vec<Vec<(u16, bool)>> = self
                .kit
                .nodes
                .iter()
                .filter_map(|n| {
                    let info = n.cli(0, &["CLUSTER", "INFO"]).ok()?;
                    let repl = n.cli(0, &["INFO", "replication"]).ok()?;
                    let fine = info.contains("cluster_state:ok")
                        && (repl.contains("role:master") || repl.contains("master_link_status:up"));
                    fine.then(|| {
                        let mut v: Vec<(u16, bool)> =
                            parse_nodes(&n.cli(0, &["CLUSTER", "NODES"]).unwrap_or_default())
                                .into_iter()
                                .map(|x| (x.port, x.master))
                                .collect();
                        v.sort_unstable();
                        v
                    })
                })
                .collect();
            views.len() == self.kit.nodes.len() && views.windows(2).all(|w| w[0] == w[1])
        })
    }

    /// The nodes as node 0 sees them.
    pub fn nodes(&self) -> anyhow::Result<Vec<Node>> {
        Ok(parse_nodes(
            &self.kit.nodes[0].cli(0, &["CLUSTER", "NODES"])?,
        ))
    }

    /// The slot of `key`.
    pub fn slot(&self, key: &str) -> anyhow::Result<u16> {
        self.kit.nodes[0]
            .cli(0, &["CLUSTER", "KEYSLOT", key])?
            .parse()
            .context("CLUSTER KEYSLOT is not a number")
    }

    fn master_of(&self, slot: u16) -> anyhow::Result<Node> {
        self.nodes()?
            .into_iter()
            .find(|n| n.master && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            .with_context(|| format!("no master serves slot {slot}"))
    }

    /// `CLUSTER FAILOVER TAKEOVER` on a replica of `slot`'s master; returns the old and the
    /// new master's ports once the cluster agrees.
    pub fn takeover(&self, slot: u16) -> anyhow::Result<(u16, u16)> {
        let master = self.master_of(slot)?;
        let replica = self
            .nodes()?
            .into_iter()
            .find(|n| !n.master && n.master_id == master.id)
            .context("the lease slot's master has no replica")?;
        cli(replica.port, 0, &["CLUSTER", "FAILOVER", "TAKEOVER"])?;
        wait_until("the takeover", Duration::from_secs(20), || {
            self.master_of(slot).is_ok_and(|m| m.port == replica.port)
        })?;
        self.wait_ok()?;
        Ok((master.port, replica.port))
    }

    /// Moves `slot`, with its keys, from its master to another one, live; returns both ports.
    pub fn migrate(&self, slot: u16) -> anyhow::Result<(u16, u16)> {
        let from = self.master_of(slot)?;
        let to = self
            .nodes()?
            .into_iter()
            .find(|n| n.master && n.id != from.id)
            .context("no other master")?;
        let s = slot.to_string();
        cli(
            to.port,
            0,
            &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id],
        )?;
        cli(
            from.port,
            0,
            &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to.id],
        )?;
        loop {
            let keys = cli(from.port, 0, &["CLUSTER", "GETKEYSINSLOT", &s, "100"])?;
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let port = to.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys);
            cli(from.port, 0, &args)?;
        }
        for n in self.nodes()?.iter().filter(|n| n.master) {
            cli(n.port, 0, &["CLUSTER", "SETSLOT", &s, "NODE", &to.id])?;
        }
        wait_until(
            "every node to agree on the slot",
            Duration::from_secs(20),
            || {
                self.kit.nodes.iter().all(|n| {
                    n.cli(0, &["CLUSTER", "NODES"]).is_ok_and(|text| {
                        parse_nodes(&text).iter().any(|x| {
                            x.id == to.id && x.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
                        })
                    })
                })
            },
        )?;
        Ok((from.port, to.port))
    }
}

/// Parses `CLUSTER NODES`.
fn parse_nodes(text: &str) -> Vec<Node> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let addr = f.get(1)?;
            let port = addr
                .split(['@', ','])
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let flags = f.get(2)?;
            let slots = f
                .iter()
                .skip(8)
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => {
                        let n = s.parse().ok()?;
                        Some((n, n))
                    }
                })
                .collect();
            Some(Node {
                id: (*f.first()?).to_owned(),
                port,
                master: flags.contains("master") && !flags.contains("fail"),
                master_id: (*f.get(3)?).to_owned(),
                slots,
            })
        })
        .collect()
}
