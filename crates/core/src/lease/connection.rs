//! One Redis connection that is made on first use, made anew after it failed or timed out, and
//! knows which Redis process it talks to. Behind it: one Redis, a master found through Sentinel
//! (asked again at every dial, so a failover is followed), or a Redis Cluster.
//!
//! On a Sentinel target, each acquire and renewal counts only when a majority still names its
//! node ([`Connection::confirm_master`]; docs/DESIGN.md, "Sentinel").
//!
//! redis-rs's `ConnectionManager` reconnects after I/O errors, but keeps a connection whose
//! replies stopped coming (a blackholed link): every later call would queue behind the lost
//! ones. Here a timeout spoils the connection too, and so does a call its caller gave up on (a
//! `select!` around it): the next call dials again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use redis::aio::MultiplexedConnection;
use redis::{Client, ConnectionAddr};

use super::cluster;
use super::sentinels::Sentinels;
use super::target::{Access, RedisTarget, Target, connect_node};
use super::{LeaseError, Secret};
use crate::locked::locked;

#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) conn: MultiplexedConnection,
    generation: u64,
    /// On a Sentinel target: the node (host, port) a Sentinel named when this was dialled.
    node: Option<(String, u16)>,
}

/// Where a call's connection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialled {
    /// Kept from an earlier call: a connection error on it may mean Redis restarted, a
    /// READONLY a failover behind its address; try again.
    Earlier,
    /// Dialled for this very call: a connection error on it is the answer.
    Now,
}

/// The connection slot.
pub(crate) struct Connection {
    /// Replaced when a rotated password is read (see [`Connection::after_refusal`]).
    behind: Mutex<Arc<Behind>>,
    /// The target as parsed, to build `behind` again with a new password.
    target: RedisTarget,
    /// The password `behind` dials with.
    in_use: Mutex<Option<Secret>>,
    /// The user Redis is asked to authenticate, for the words of a refusal.
    user: String,
    lease_key: String,
    slot: Mutex<Slot>,
    /// The URL asks for TLS (`rediss://`).
    tls: bool,
    /// A call has been answered on this target since start: the link works, and a failure
    /// needs no hint about TLS.
    answered: AtomicBool,
}

/// What the connection reaches: the target, with a Sentinel target's Sentinels ready to ask.
// One per lease: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Behind {
    Single(Client),
    /// The Sentinels outlive a rotated password: only the nodes' `access` is built anew.
    Sentinel {
        sentinels: Arc<Sentinels>,
        access: Access,
    },
    Cluster {
        seeds: Vec<Client>,
        access: Access,
    },
}

/// A request sent on a connection, its answer not read yet: a caller that gives up on it (a
/// timeout, a `select!`) drops it, and the connection is thrown away, since what is sent next
/// would queue behind a request that may be stalled on the way.
pub(crate) struct Sent<'a>(pub(crate) &'a Connection, pub(crate) Option<Live>);

impl Sent<'_> {
    pub(crate) fn answered(mut self) {
        self.1 = None;
    }
}

impl Drop for Sent<'_> {
    fn drop(&mut self) {
        if let Some(live) = &self.1 {
            self.0.discard(live);
        }
    }
}

#[derive(Default)]
struct Slot {
    live: Option<Live>,
    generation: u64,
}

impl Behind {
    fn new(target: Target, access: Access) -> Self {
        match target {
            Target::Single(client) => Behind::Single(client),
            Target::Sentinel(sentinel) => Behind::Sentinel {
                sentinels: Arc::new(Sentinels::new(sentinel, &access)),
                access,
            },
            Target::Cluster(seeds) => Behind::Cluster { seeds, access },
        }
    }
}

impl Connection {
    pub(crate) fn new(parsed: &RedisTarget, lease_key: String) -> Self {
        let target = parsed.target.clone();
        let over_tls = |c: &Client| {
            matches!(
                c.get_connection_info().addr(),
                ConnectionAddr::TcpTls { .. }
            )
        };
        let tls = match &target {
            Target::Single(client) => over_tls(client),
            Target::Sentinel(sentinel) => sentinel.tls,
            Target::Cluster(seeds) => seeds.first().is_some_and(over_tls),
        };
        // Only one Redis's URL carries credentials; Sentinel and Cluster URLs take them from
        // the options alone.
        let from_url = match &target {
            Target::Single(client) => client.get_connection_info().redis_settings().username(),
            _ => None,
        };
        let user = (parsed.access.username.as_deref())
            .or(from_url)
            .unwrap_or("default")
            .to_owned();
        Self {
            behind: Mutex::new(Arc::new(Behind::new(target, parsed.access.clone()))),
            target: parsed.clone(),
            in_use: Mutex::new(parsed.access.password.clone()),
            user,
            lease_key,
            slot: Mutex::new(Slot::default()),
            tls,
            answered: AtomicBool::new(false),
        }
    }

    /// Whether the target is one Redis named by its own address (no Sentinel, no Cluster).
    pub(crate) fn is_single(&self) -> bool {
        matches!(self.target.target, Target::Single(_))
    }

    /// Whether the target is a Redis Cluster, where a script sees one node's pub/sub alone.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.target.target, Target::Cluster(_))
    }

    /// A call's result, with a hint at TLS on the failures that a URL of the wrong scheme
    /// shows until a first answer (`connected`: the call had a connection when it failed).
    pub(crate) fn explain<T>(
        &self,
        result: Result<T, LeaseError>,
        connected: bool,
    ) -> Result<T, LeaseError> {
        match result {
            Ok(value) => {
                self.answered.store(true, Ordering::Relaxed);
                Ok(value)
            }
            Err(e) if self.answered.load(Ordering::Relaxed) => Err(e),
            Err(e) => Err(e.hint_at_tls(self.tls, connected)),
        }
    }

    /// A client error of primitive `op` as ours, with [`LeaseError::hint_at_credentials`].
    pub(crate) fn refusal(&self, op: &'static str, err: &redis::RedisError) -> LeaseError {
        LeaseError::from_redis(op, &self.lease_key, err)
            .hint_at_credentials(&self.user, &self.target.remedies)
    }

    /// The current connection, dialling a new one when there is none, and which of the two
    /// it is. The caller bounds the time this takes.
    pub(crate) async fn get(&self, op: &'static str) -> Result<(Live, Dialled), LeaseError> {
        if let Some(live) = locked(&self.slot).live.clone() {
            return Ok((live, Dialled::Earlier));
        }
        let behind = self.behind();
        let (conn, node) = match self.dial(&behind, op).await {
            Err(refused @ LeaseError::Authentication { .. }) => {
                // A rotated password: dial at once with the one its source holds now.
                self.after_refusal(&refused);
                let now = self.behind();
                if Arc::ptr_eq(&now, &behind) {
                    return Err(refused);
                }
                self.dial(&now, op).await?
            }
            dialled => dialled?,
        };
        let mut slot = locked(&self.slot);
        slot.generation += 1;
        let live = Live {
            conn,
            generation: slot.generation,
            node,
        };
        slot.live = Some(live.clone());
        Ok((live, Dialled::Now))
    }

    async fn dial(
        &self,
        behind: &Behind,
        op: &'static str,
    ) -> Result<(MultiplexedConnection, Option<(String, u16)>), LeaseError> {
        let err = |e: redis::RedisError| self.refusal(op, &e);
        match behind {
            Behind::Single(client) => Ok((connect_node(client).await.map_err(err)?, None)),
            Behind::Sentinel { sentinels, access } => {
                let master = sentinels
                    .find_master(op, access, |e| self.refusal(op, e))
                    .await?;
                Ok((master.conn, Some(master.addr)))
            }
            Behind::Cluster { seeds, access } => Ok((
                cluster::slot_master(seeds, &self.lease_key, access)
                    .await
                    .map_err(err)?,
                None,
            )),
        }
    }

    /// On a Sentinel target: whether a majority of the Sentinels, asked now, still names the
    /// node `live` talks to as the master (see the module's docs). Call it beside the command,
    /// after the send instant was read. Any other target: yes, at once.
    pub(crate) async fn confirm_master(
        &self,
        op: &'static str,
        live: &Live,
    ) -> Result<(), LeaseError> {
        let behind = self.behind();
        let (Behind::Sentinel { sentinels, .. }, Some(node)) = (&*behind, &live.node) else {
            return Ok(());
        };
        let named = sentinels.majority_named(op).await?;
        if named == *node {
            return Ok(());
        }
        Err(LeaseError::Connection {
            op,
            detail: format!(
                "a majority of the Sentinels now names {}:{} as master `{}`, not {}:{} where \
                 the command ran",
                named.0,
                named.1,
                sentinels.master(),
                node.0,
                node.1
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
        match &*self.behind() {
            Behind::Single(client) => Ok(client.clone()),
            Behind::Sentinel { sentinels, access } => {
                let master = sentinels
                    .find_master(op, access, |e| self.refusal(op, e))
                    .await?;
                Ok(master.client)
            }
            Behind::Cluster { seeds, .. } => Ok(seeds[attempt % seeds.len()].clone()),
        }
    }

    /// Throws `live` away if it is still the current connection, so the next call dials anew.
    pub(crate) fn discard(&self, live: &Live) {
        let mut slot = locked(&self.slot);
        if slot.live.as_ref().map(|current| current.generation) == Some(live.generation) {
            slot.live = None;
        }
    }

    /// After an error: when Redis refused the password and its source holds another, builds
    /// the target anew with that one, for the next dial (the command's or the subscription's;
    /// docs/REFERENCE.md, "Password rotation").
    pub(crate) fn after_refusal(&self, err: &LeaseError) {
        let Some(source) = &self.target.password_source else {
            return;
        };
        if !matches!(err, LeaseError::Authentication { .. }) {
            return;
        }
        let mut in_use = locked(&self.in_use);
        let Some(password) = source.changed(in_use.as_ref()) else {
            return;
        };
        let access = Access {
            password: Some(password.clone()),
            ..self.target.access.clone()
        };
        let mut behind = locked(&self.behind);
        let next = match &**behind {
            // The Sentinels take no node's password: only the nodes' access is new.
            Behind::Sentinel { sentinels, .. } => Behind::Sentinel {
                sentinels: Arc::clone(sentinels),
                access,
            },
            _ => match self.target.parse_with(&access) {
                Ok(target) => Behind::new(target, access),
                Err(_) => return,
            },
        };
        *behind = Arc::new(next);
        *in_use = Some(password);
    }

    fn behind(&self) -> Arc<Behind> {
        locked(&self.behind).clone()
    }
}
