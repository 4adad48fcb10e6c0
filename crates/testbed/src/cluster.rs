//! A Redis Cluster of real processes: three masters and three replicas on free ports, created
//! with `redis-cli --cluster create`, all killed on drop.

use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::proxy::{Fault, FaultProxy};
use crate::redis_server::{RedisBuilder, RedisServer};

pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> Self {
        Self::start_on(Engine::default())
    }

    /// Six nodes of `engine`, created by the `redis-cli` on `PATH` (it speaks to each engine).
    pub fn start_on(engine: Engine) -> Self {
        let cluster = Self::try_create(|_| RedisServer::builder().engine(engine))
            .unwrap_or_else(|e| panic!("{e}"));
        cluster.wait_ok(Duration::from_secs(30));
        cluster
    }

    /// Starts the six nodes, node `i` from `node(i)` with the cluster's arguments added, and
    /// creates the cluster, without waiting for its state to be ok; an error when a node or
    /// `redis-cli --cluster create` fails, for callers outside a test.
    pub fn try_create(mut node: impl FnMut(usize) -> RedisBuilder) -> io::Result<Self> {
        let nodes = (0..6)
            .map(|i| {
                let node = node(i);
                let node = if node.chosen_engine().has_cluster_port() {
                    node.cluster_bus()
                } else {
                    node
                };
                node.args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    "--cluster-announce-ip",
                    "127.0.0.1",
                    // A replica may stand for election however long ago it last heard its
                    // master: tests kill masters soon after the cluster formed.
                    "--cluster-replica-validity-factor",
                    "0",
                ])
                .try_start()
            })
            .collect::<io::Result<Vec<RedisServer>>>()?;
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .map_err(|e| {
                io::Error::new(e.kind(), format!("run redis-cli --cluster create: {e}"))
            })?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(Self { nodes })
    }

    /// `redis+cluster://` URL with every node as a seed.
    pub fn url(&self) -> String {
        cluster_url(self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())))
    }

    /// The nodes that replicate a master of this cluster now (their `ROLE`). Like the two below,
    /// it asks every node: each must be running.
    pub fn replicas(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| self.replicates(n).is_some())
    }

    /// The indices of the nodes that replicate no node of this cluster now (their `ROLE`): the
    /// masters.
    pub fn masters(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.replicates(&self.nodes[i]).is_none())
    }

    /// The index of the master that `node` replicates now (its `ROLE`); `None` for a master.
    pub fn replicates(&self, node: &RedisServer) -> Option<usize> {
        let role: Vec<redis::Value> = node.cmd(&["ROLE"]);
        let [redis::Value::BulkString(r), _, redis::Value::Int(port), ..] = role.as_slice() else {
            return None;
        };
        let port = (r.as_slice() == b"slave").then_some(*port)?;
        self.nodes.iter().position(|n| i64::from(n.port()) == port)
    }

    /// The index of the node that replicates master `master` now.
    pub fn replica_of(&self, master: usize) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| self.replicates(&self.nodes[i]) == Some(master))
    }

    /// The slot of lease `name`'s keys (all share its hash tag), as the cluster computes it.
    pub fn lease_slot(&self, name: &str) -> u16 {
        let key = format!("leasehold:{{{name}}}");
        let slot: i64 = self.nodes[0].cmd(&["CLUSTER", "KEYSLOT", &key]);
        u16::try_from(slot).expect("CLUSTER KEYSLOT answers a slot")
    }

    /// Waits until every live node reports `cluster_state:ok` and every live replica is in
    /// sync with its master (a replica that never synced cannot stand for election).
    pub fn wait_ok(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                let info: String = n.cmd(&["CLUSTER", "INFO"]);
                let replication: String = n.cmd(&["INFO", "replication"]);
                info.contains("cluster_state:ok")
                    && (replication.contains("role:master")
                        || replication.contains("master_link_status:up"))
            });
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not reach state ok within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The index of the node that serves `slot` as master, as the first live node sees it.
    pub fn master_of(&self, slot: u16) -> Option<usize> {
        self.master_seen_by(self.nodes.iter().find(|n| n.is_running())?, slot)
    }

    /// The index of the node that serves `slot` as master, as `asker` sees it.
    fn master_seen_by(&self, asker: &RedisServer, slot: u16) -> Option<usize> {
        let slots: Vec<redis::Value> = asker.cmd(&["CLUSTER", "SLOTS"]);
        for range in slots {
            let redis::Value::Array(parts) = range else {
                continue;
            };
            let (
                Some(redis::Value::Int(start)),
                Some(redis::Value::Int(end)),
                Some(redis::Value::Array(master)),
            ) = (parts.first(), parts.get(1), parts.get(2))
            else {
                continue;
            };
            if (*start..=*end).contains(&i64::from(slot)) {
                let Some(redis::Value::Int(port)) = master.get(1) else {
                    return None;
                };
                return self.nodes.iter().position(|n| i64::from(n.port()) == *port);
            }
        }
        None
    }

    /// Waits until node `node` serves `slot` as master (a failover or a slot migration has
    /// reached the live nodes' view), or panics after 10 s.
    pub async fn until_master_of(&self, slot: u16, node: usize) {
        crate::wait::eventually(
            &format!("node {node} to serve slot {slot} as master"),
            Duration::from_secs(10),
            || async {
                // Every live node, the old master too: until it has heard, it still serves the
                // slot to a connection that was already open to it.
                self.nodes
                    .iter()
                    .filter(|n| n.is_running())
                    .all(|n| self.master_seen_by(n, slot) == Some(node))
                    .then_some(())
            },
        )
        .await;
    }

    /// The node id of node `i`.
    pub fn node_id(&self, i: usize) -> String {
        self.nodes[i].cmd(&["CLUSTER", "MYID"])
    }
}

/// A `redis+cluster://` URL whose first seed is `first` and whose others are `nodes`, each behind
/// a fault proxy that holds every request `delay`: `first` answers before any of them. The
/// proxies pass until they are dropped.
pub fn url_first(
    first: std::net::SocketAddr,
    nodes: &[&RedisServer],
    delay: Duration,
) -> (String, Vec<FaultProxy>) {
    let proxies: Vec<FaultProxy> = nodes.iter().map(|n| FaultProxy::start(n.addr())).collect();
    for proxy in &proxies {
        proxy.set(Fault::DelayRequests(delay));
    }
    let seeds = std::iter::once(first).chain(proxies.iter().map(FaultProxy::addr));
    (cluster_url(seeds.map(|a| a.to_string())), proxies)
}

/// The `redis+cluster://` URL over `seeds` (`host:port`), in their order.
fn cluster_url(seeds: impl Iterator<Item = String>) -> String {
    format!("redis+cluster://{}", seeds.collect::<Vec<_>>().join(","))
}
