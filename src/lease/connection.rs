//! One Redis connection that is made on first use, made anew after it failed or timed out, and
//! knows which Redis process it talks to. Behind it: one Redis, a master found through Sentinel
//! (asked again at every dial, so a failover is followed), or a Redis Cluster.
//!
//! The Sentinels are asked staggered, not one after another: the one that answered last goes
//! first, and each that has not answered within [`SENTINEL_HEDGE`] gets the next one asked
//! beside it (or at once when it refused). A Sentinel that accepts connections but never answers
//! (a frozen process: its kernel still completes the handshake) costs one hedge delay, once,
//! instead of every lookup.
//!
//! On a Sentinel target a term's acquire and each renewal count only when a Sentinel, asked
//! after the command's send instant, still names the node the command ran on as the master
//! ([`Connection::confirm_master`]). A master that Sentinel replaced may stay up and take writes
//! until it is reconfigured as a replica (seconds, or never while it is cut off); a leader whose
//! connection was kept from before the failover would renew there while a contender elects on
//! the new master. Why the check suffices: a contender reaches the new master only through a
//! Sentinel that names it, and the new master's data-loss record (another `master_replid`)
//! makes it wait one lease duration there before it leads. A confirmed renewal sent at `t` had
//! a Sentinel name the old node at some `t' >= t`, so the switch came after `t`, and the term it
//! extends (to `t` plus one lease duration) ends before that cooldown does. Sentinels that
//! disagree while the switch propagates narrow this: the asked one may still name the old node
//! a moment after another named the new one, and the overlap is bounded by that lag (see
//! docs/DESIGN.md). The ask runs beside the command and goes to the Sentinel that answered
//! last, with the hedging above; no answer in time means the command does not count.
//!
//! redis-rs's `ConnectionManager` reconnects after I/O errors, but keeps a connection whose
//! replies stopped coming (a blackholed link): every later call would queue behind the lost
//! ones. Here a timeout spoils the connection too, and the next call dials again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{AsyncConnectionConfig, Client, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, Value};

use super::LeaseError;
use super::target::{
    Access, SENTINEL_HEDGE, SENTINEL_TIMEOUT, SentinelTarget, Target, cluster_slot, node_client,
};

/// A connection to one node, or to a cluster.
#[derive(Clone)]
pub(crate) enum Conn {
    Node(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Node(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Node(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Node(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// Runs `cmd` on the node that owns `key`'s slot (on one Redis: on that Redis). For
    /// commands without keys that must reach that node: `INFO`, `WAIT`.
    pub(crate) async fn on_node_of(&mut self, key: &str, cmd: Cmd) -> redis::RedisResult<Value> {
        match self {
            Conn::Node(c) => cmd.query_async(c).await,
            Conn::Cluster(c) => {
                let route = Route::new(cluster_slot(key), SlotAddr::Master);
                c.route_command(
                    cmd,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
        }
    }
}

/// A live connection.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) conn: Conn,
    generation: u64,
    /// On a Sentinel target: the node (host, port) a Sentinel named when this was dialled.
    node: Option<(String, u16)>,
}

/// Where a call's connection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialled {
    /// Kept from an earlier call: it may have died since (Redis restarted), so a connection
    /// error on it deserves one more try on a new one.
    Earlier,
    /// Dialled for this very call: a connection error on it is the answer.
    Now,
}

/// The connection slot.
pub(crate) struct Connection {
    target: Target,
    access: Access,
    lease_key: String,
    slot: Mutex<Slot>,
    /// The Sentinel (index in the URL's list) that named the master last; asked first.
    preferred_sentinel: AtomicUsize,
    /// Connections to the Sentinels, kept between asks (index in the URL's list).
    sentinel_conns: Mutex<HashMap<usize, MultiplexedConnection>>,
}

/// A master a Sentinel named, whose `ROLE` agreed.
struct Master {
    client: Client,
    addr: (String, u16),
}

#[derive(Default)]
struct Slot {
    live: Option<Live>,
    generation: u64,
}

impl Connection {
    pub(crate) fn new(target: Target, access: Access, lease_key: String) -> Self {
        Self {
            target,
            access,
            lease_key,
            slot: Mutex::new(Slot::default()),
            preferred_sentinel: AtomicUsize::new(0),
            sentinel_conns: Mutex::new(HashMap::new()),
        }
    }

    /// The current connection, dialling a new one when there is none, and which of the two
    /// it is. The caller bounds the time this takes.
    pub(crate) async fn get(&self, op: &'static str) -> Result<(Live, Dialled), LeaseError> {
        if let Some(live) = self.lock().live.clone() {
            return Ok((live, Dialled::Earlier));
        }
        let (conn, node) = self.dial(op).await?;
        let mut slot = self.lock();
        slot.generation += 1;
        let live = Live {
            conn,
            generation: slot.generation,
            node,
        };
        slot.live = Some(live.clone());
        Ok((live, Dialled::Now))
    }

    async fn dial(&self, op: &'static str) -> Result<(Conn, Option<(String, u16)>), LeaseError> {
        let err = |e: redis::RedisError| LeaseError::from_redis(op, &self.lease_key, &e);
        match &self.target {
            Target::Single(client) => {
                Ok((Conn::Node(connect_node(client).await.map_err(err)?), None))
            }
            Target::Sentinel(sentinel) => {
                let master = self.find_master(op, sentinel).await?;
                let conn = connect_node(&master.client).await.map_err(err)?;
                Ok((Conn::Node(conn), Some(master.addr)))
            }
            Target::Cluster { client, .. } => Ok((
                Conn::Cluster(client.get_async_connection().await.map_err(err)?),
                None,
            )),
        }
    }

    /// On a Sentinel target: whether a Sentinel, asked now, still names the node `live` talks
    /// to as the master (see the module's docs). Call it beside the command, after the send
    /// instant was read. Any other target: yes, at once.
    pub(crate) async fn confirm_master(
        &self,
        op: &'static str,
        live: &Live,
    ) -> Result<(), LeaseError> {
        let (Target::Sentinel(sentinel), Some(node)) = (&self.target, &live.node) else {
            return Ok(());
        };
        let named = self
            .ask_staggered(op, sentinel, |index| self.named_master(index, sentinel))
            .await?;
        if named == *node {
            return Ok(());
        }
        Err(LeaseError::Connection {
            op,
            detail: format!(
                "Sentinel now names {}:{} as master `{}`, not {}:{} where the command ran",
                named.0, named.1, sentinel.master, node.0, node.1
            ),
        })
    }

    /// A client for the node to subscribe on: the Redis itself, the current master, or a
    /// seed node of the cluster (classic pub/sub reaches every node of a cluster).
    pub(crate) async fn pubsub_client(
        &self,
        op: &'static str,
        attempt: usize,
    ) -> Result<Client, LeaseError> {
        match &self.target {
            Target::Single(client) => Ok(client.clone()),
            Target::Sentinel(sentinel) => Ok(self.find_master(op, sentinel).await?.client),
            Target::Cluster { seeds, .. } => Ok(seeds[attempt % seeds.len()].clone()),
        }
    }

    /// Asks the Sentinels for the master's address, staggered (see the module's docs), and
    /// checks that the node there says it is the master (a Sentinel may lag behind a failover).
    async fn find_master(
        &self,
        op: &'static str,
        sentinel: &SentinelTarget,
    ) -> Result<Master, LeaseError> {
        self.ask_staggered(op, sentinel, |index| self.ask_sentinel(index, sentinel))
            .await
    }

    /// Runs `ask` on the Sentinels staggered (see the module's docs). The first good answer
    /// wins; the asks still under way are dropped with it.
    async fn ask_staggered<'a, T, F, Fut>(
        &'a self,
        op: &'static str,
        sentinel: &'a SentinelTarget,
        ask: F,
    ) -> Result<T, LeaseError>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<T, String>> + 'a,
    {
        let preferred = self.preferred_sentinel.load(Ordering::Relaxed);
        let mut queue = sentinel_order(preferred, sentinel.sentinels.len());
        let mut asking = FuturesUnordered::new();
        let ask = |index: usize| {
            let answer = ask(index);
            async move { (index, answer.await) }
        };
        let mut last = String::from("no Sentinel answered");
        if let Some(first) = queue.next() {
            asking.push(ask(first));
        }
        while !asking.is_empty() {
            let answered = tokio::select! {
                answered = asking.next() => answered,
                _ = tokio::time::sleep(SENTINEL_HEDGE), if queue.len() > 0 => None,
            };
            match answered {
                Some((index, Ok(answer))) => {
                    self.preferred_sentinel.store(index, Ordering::Relaxed);
                    return Ok(answer);
                }
                Some((index, Err(e))) => {
                    let (host, port) = &sentinel.sentinels[index];
                    last = format!("sentinel {host}:{port}: {e}");
                }
                // The hedge delay passed without an answer.
                None => {}
            }
            if let Some(next) = queue.next() {
                asking.push(ask(next));
            }
        }
        Err(LeaseError::Connection {
            op,
            detail: format!(
                "cannot find master `{}` through Sentinel: {last}",
                sentinel.master
            ),
        })
    }

    /// A connection to Sentinel `index`, kept from an earlier ask or dialled now.
    async fn sentinel_conn(
        &self,
        index: usize,
        target: &SentinelTarget,
    ) -> Result<MultiplexedConnection, String> {
        if let Some(conn) = self.sentinels_lock().get(&index) {
            return Ok(conn.clone());
        }
        let (host, port) = &target.sentinels[index];
        let scheme = if target.tls { "rediss" } else { "redis" };
        let sentinel_access = Access {
            username: None,
            password: self.access.sentinel_password.clone(),
            tls: self.access.tls.clone(),
            sentinel_password: None,
        };
        let info = format!("{scheme}://{host}:{port}")
            .into_connection_info()
            .map_err(|e| e.to_string())?;
        let client = node_client(info, &sentinel_access).map_err(|e| e.to_string())?;
        let conn = connect_node(&client).await.map_err(|e| e.to_string())?;
        self.sentinels_lock().insert(index, conn.clone());
        Ok(conn)
    }

    /// The master's address as Sentinel `index` names it, within [`SENTINEL_TIMEOUT`]. A
    /// connection that failed or timed out is not kept.
    async fn named_master(
        &self,
        index: usize,
        target: &SentinelTarget,
    ) -> Result<(String, u16), String> {
        let ask = async {
            let mut conn = self.sentinel_conn(index, target).await?;
            let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&target.master)
                .query_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            addr.ok_or_else(|| format!("does not know master `{}`", target.master))
        };
        let answer = tokio::time::timeout(SENTINEL_TIMEOUT, ask)
            .await
            .map_err(|_| format!("no answer within {SENTINEL_TIMEOUT:?}"))
            .and_then(|answer| answer);
        if answer.is_err() {
            self.sentinels_lock().remove(&index);
        }
        answer
    }

    /// The master Sentinel `index` names, once its `ROLE` agrees.
    async fn ask_sentinel(&self, index: usize, target: &SentinelTarget) -> Result<Master, String> {
        let scheme = if target.tls { "rediss" } else { "redis" };
        let ask = async {
            let (master_host, master_port) = self.named_master(index, target).await?;
            let url = format!("{scheme}://{master_host}:{master_port}/{}", target.db);
            let info = url.into_connection_info().map_err(|e| e.to_string())?;
            let master = node_client(info, &self.access).map_err(|e| e.to_string())?;
            let mut node = master
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| format!("master {master_host}:{master_port}: {e}"))?;
            let role: Vec<Value> = redis::cmd("ROLE")
                .query_async(&mut node)
                .await
                .map_err(|e| format!("master {master_host}:{master_port}: {e}"))?;
            let is_master = matches!(role.first(), Some(v) if redis::from_redis_value::<String>(v.clone()).is_ok_and(|r| r == "master"));
            if is_master {
                Ok(Master {
                    client: master,
                    addr: (master_host, master_port),
                })
            } else {
                Err(format!("{master_host}:{master_port} is not a master (yet)"))
            }
        };
        tokio::time::timeout(SENTINEL_TIMEOUT, ask)
            .await
            .map_err(|_| format!("no answer within {SENTINEL_TIMEOUT:?}"))?
    }

    /// Throws `live` away if it is still the current connection, so the next call dials anew.
    pub(crate) fn discard(&self, live: &Live) {
        let mut slot = self.lock();
        if slot
            .live
            .as_ref()
            .is_some_and(|current| current.generation == live.generation)
        {
            slot.live = None;
        }
    }

    /// Throws away whatever connection there is (used when a call timed out before it even had
    /// a connection to blame).
    pub(crate) fn discard_current(&self) {
        self.lock().live = None;
    }

    fn sentinels_lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, MultiplexedConnection>> {
        // A map of connections: nothing a panic could leave half-changed.
        self.sentinel_conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        // The slot holds no invariant that a panic could break halfway.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn connect_node(client: &Client) -> redis::RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None);
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// The order in which `count` Sentinels are asked: the one that answered last first, then the
/// others as listed after it, wrapping around.
fn sentinel_order(preferred: usize, count: usize) -> impl ExactSizeIterator<Item = usize> {
    let start = if count == 0 { 0 } else { preferred % count };
    (0..count).map(move |k| (start + k) % count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentinel_that_answered_last_is_asked_first() {
        // (preferred, count) -> order
        let cases: [(usize, usize, &[usize]); 6] = [
            (0, 3, &[0, 1, 2]),
            (1, 3, &[1, 2, 0]),
            (2, 3, &[2, 0, 1]),
            // A remembered index from a longer list never points past the end.
            (7, 3, &[1, 2, 0]),
            (0, 1, &[0]),
            (0, 0, &[]),
        ];
        for (preferred, count, want) in cases {
            let order: Vec<usize> = sentinel_order(preferred, count).collect();
            assert_eq!(order, want, "preferred={preferred} count={count}");
        }
    }
}
