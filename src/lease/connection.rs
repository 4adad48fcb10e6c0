//! One Redis connection that is made on first use, made anew after it failed or timed out, and
//! knows which Redis process it talks to.
//!
//! redis-rs's `ConnectionManager` reconnects after I/O errors, but keeps a connection whose
//! replies stopped coming (a blackholed link): every later call would queue behind the lost
//! ones. Here a timeout spoils the connection too, and the next call dials again.

use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client};
use tokio::sync::OnceCell;

use super::LeaseError;

/// A live connection, and the run id of the Redis process behind it once asked for.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) conn: MultiplexedConnection,
    /// `run_id` from `INFO server`: changes whenever Redis restarts or another process (a
    /// promoted replica) answers, which is how the acquire script notices possible data loss.
    /// Read on first need (acquire, observe), not at dial time: a leader that redials to renew
    /// over a slow link should not pay a round trip it does not need.
    run_id: Arc<OnceCell<Arc<str>>>,
    generation: u64,
}

impl Live {
    /// The run id of the Redis process behind this connection.
    pub(crate) async fn run_id(
        &mut self,
        op: &'static str,
        lease_key: &str,
    ) -> Result<Arc<str>, LeaseError> {
        let mut conn = self.conn.clone();
        self.run_id
            .get_or_try_init(|| async move {
                read_run_id(&mut conn)
                    .await
                    .map(Arc::from)
                    .map_err(|e| match e {
                        RunIdError::Redis(e) => LeaseError::from_redis(op, lease_key, &e),
                        RunIdError::Missing => LeaseError::Protocol {
                            op,
                            detail: "INFO server has no run_id field".into(),
                        },
                    })
            })
            .await
            .cloned()
    }
}

/// Whether a connection was dialled for this very call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fresh(pub(crate) bool);

/// The connection slot.
pub(crate) struct Connection {
    client: Client,
    lease_key: String,
    slot: Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    live: Option<Live>,
    generation: u64,
}

impl Connection {
    pub(crate) fn new(client: Client, lease_key: String) -> Self {
        Self {
            client,
            lease_key,
            slot: Mutex::new(Slot::default()),
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The current connection, dialling a new one when there is none; the flag says whether
    /// it was dialled just now. The caller bounds the time this takes.
    pub(crate) async fn get(&self, op: &'static str) -> Result<(Live, Fresh), LeaseError> {
        if let Some(live) = self.lock().live.clone() {
            return Ok((live, Fresh(false)));
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| LeaseError::from_redis(op, &self.lease_key, &e))?;
        let mut slot = self.lock();
        slot.generation += 1;
        let live = Live {
            conn,
            run_id: Arc::default(),
            generation: slot.generation,
        };
        slot.live = Some(live.clone());
        Ok((live, Fresh(true)))
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        // The slot holds no invariant that a panic could break halfway.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

enum RunIdError {
    Redis(redis::RedisError),
    Missing,
}

async fn read_run_id(conn: &mut MultiplexedConnection) -> Result<String, RunIdError> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .map_err(RunIdError::Redis)?;
    parse_run_id(&info)
        .map(str::to_owned)
        .ok_or(RunIdError::Missing)
}

fn parse_run_id(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.trim_end().strip_prefix("run_id:"))
        .filter(|id| !id.is_empty() && !id.contains(' '))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_is_read_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:4f1c0e9b2a\r\ntcp_port:7001\r\n";
        assert_eq!(parse_run_id(info), Some("4f1c0e9b2a"));
        assert_eq!(parse_run_id("# Server\r\nredis_version:7\r\n"), None);
        assert_eq!(parse_run_id("run_id:\r\n"), None);
    }
}
