//! What a lease asks Redis outside its scripts: the eviction policy (`INFO memory`), and after
//! a script ran into a key of the wrong type, which key that is.

use std::time::Duration;

use super::connection::Live;
use super::reply::{protocol, text};
use super::{EvictionPolicy, LeaseError, RedisLease};

impl RedisLease {
    /// Reads Redis's memory limit and eviction policy (`INFO memory`) on the node that holds
    /// the lease.
    pub async fn eviction_policy(&self, timeout: Duration) -> Result<EvictionPolicy, LeaseError> {
        const OP: &str = "info";
        let reply = self
            .call(OP, timeout, |mut live| async move {
                live.conn
                    .on_node_of(&self.keys.lease, redis::cmd("INFO").arg("memory").clone())
                    .await
                    .map_err(self.fail(OP))
            })
            .await?;
        text(&reply)
            .as_deref()
            .and_then(EvictionPolicy::parse)
            .ok_or_else(|| protocol(OP, &reply))
    }

    /// The keys of the lease that hold something other than a string, with their type: asked
    /// after a script ran into one, so that the error names the key to delete (the script's
    /// message names only its line). Best effort: a failed look-up names none.
    pub(super) async fn wrong_types(&self, mut live: Live) -> Vec<(String, String)> {
        let mut found = Vec::new();
        for key in self.keys.written() {
            let kind = live
                .conn
                .on_node_of(&self.keys.lease, redis::cmd("TYPE").arg(key).clone())
                .await
                .ok()
                .and_then(|v| text(&v));
            if let Some(kind) = kind.filter(|k| k != "string" && k != "none") {
                found.push((key.to_owned(), kind));
            }
        }
        found
    }
}
