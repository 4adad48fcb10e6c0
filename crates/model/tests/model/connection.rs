//! How a replica's request reaches Redis in the model, over its link (`link.rs`): the Redis
//! nodes behind it (the first master, and the node a Sentinel failover promotes while the first
//! keeps running and writable), and when the link dials again. It mirrors
//! `crates/core/src/lease/connection.rs`: a dial goes to the node the Sentinels' rule names
//! (`sentinels.rs`); a call that timed out throws its connection away, so the next request
//! dials; a command whose node is not confirmed throws its connection away too, and the same
//! call dials again and sends the command anew (keeping the call's send instant for the
//! deadlines) on the node named then.

use crate::config::Config;
use crate::link::Request;
use crate::redis::Redis;
use crate::sentinels::PROMOTED;
use crate::system::{Msg, State};
use leasehold_core::clock::BootInstant;

/// The server identity of the promoted node: another `run_id/master_replid` than any the first
/// master has had.
const PROMOTED_SERVER: u8 = 200;

impl State {
    /// Redis node `node`: 0 the first master, 1 the promoted one.
    pub fn node_mut(&mut self, node: u8) -> Option<&mut Redis> {
        match node {
            0 => Some(&mut self.redis),
            PROMOTED => self.promoted.as_mut(),
            _ => None,
        }
    }

    /// A Sentinel failover: node 1 is promoted with the dataset as before the first master's
    /// last write and a new identity; the first master keeps running and taking writes; one
    /// Sentinel names the new master.
    pub fn sentinel_failover(&mut self) {
        let data = self.redis.before_last_write.unwrap_or(self.redis.data);
        self.promoted = Some(Redis {
            data,
            server: PROMOTED_SERVER,
            before_last_write: None,
            evictions: 0,
            restarts_keeping_data: 0,
            restarts_losing_data: 0,
            failovers: 0,
        });
        self.sentinels.fail_over();
    }

    /// Where replica `n`'s request goes now and whether its reply will count: dials first
    /// when the connection was thrown away. `None`: the dial found no master.
    fn route(&mut self, config: &Config, n: u8) -> Option<(u8, bool)> {
        let word = config.sentinel_word;
        let sentinels = self.sentinels;
        let link = &mut self.replicas[usize::from(n)].link;
        if link.dial {
            link.node = sentinels.dial(word, link.first)?;
            link.dial = false;
        }
        Some((link.node, sentinels.confirms(word, link.first, link.node)))
    }

    /// Replica `n` sends `request` (its call's send instant `sent_at`) over its connection.
    /// A dial that finds no master fails the call, which the replica then times out.
    pub fn request(&mut self, config: &Config, n: u8, sent_at: BootInstant, request: Request) {
        if let Some((node, confirmed)) = self.route(config, n) {
            // A release is not confirmed: nothing waits on its reply.
            let confirmed = confirmed || matches!(request, Request::Release { .. });
            self.send(Msg::ToRedis {
                from: n,
                sent_at,
                node,
                confirmed,
                request,
            });
        }
    }

    /// A call timed out: its connection is thrown away (only where there is a node to move to,
    /// so that the other configurations' states stay as they were).
    pub fn discard_connection(&mut self, config: &Config, n: u8) {
        if config.sentinel_failovers > 0 {
            self.replicas[usize::from(n)].link.dial = true;
        }
    }

    /// A reply whose node was not confirmed: the connection is thrown away, and the same call
    /// dials again and sends its command anew, with the call's send instant.
    pub fn resend(&mut self, config: &Config, n: u8, sent_at: BootInstant, request: Request) {
        self.replicas[usize::from(n)].link.dial = true;
        self.request(config, n, sent_at, request);
    }
}
