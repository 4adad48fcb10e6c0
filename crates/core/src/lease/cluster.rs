//! The lease's node in a Redis Cluster: the master that serves the lease's slot, found by asking
//! every seed at once. Only that node serves the lease, so a node that is slow, frozen or cut off
//! elsewhere in the cluster costs nothing (a cluster client waits for every node it knows).

use futures_util::future::select_ok;
use redis::aio::MultiplexedConnection;
use redis::{Client, ConnectionAddr, ErrorKind, IntoConnectionInfo, RedisResult, ServerErrorKind};

use super::target::{Access, connect_node, node_client, url_host};

/// A connection to the master that serves `key`'s slot: the first seed to answer a read of
/// `key` (`PTTL`, which leasehold's ACL rule allows) serves it, or names the node that does in
/// its `MOVED` redirect, which is followed once. A node that does not serve the slot (a stale
/// view, a slot moved since) answers the lease's calls with another redirect, which spoils the
/// connection, and the next call asks the seeds again.
pub(crate) async fn slot_master(
    seeds: &[Client],
    key: &str,
    access: &Access,
) -> RedisResult<MultiplexedConnection> {
    if seeds.is_empty() {
        return Err((ErrorKind::InvalidClientConfig, "no seed node").into());
    }
    let asks = seeds
        .iter()
        .map(|seed| Box::pin(served_by(seed, key, access)));
    select_ok(asks).await.map(|(conn, _)| conn)
}

/// `seed`'s connection when it serves `key`, else one to the node its redirect names.
async fn served_by(
    seed: &Client,
    key: &str,
    access: &Access,
) -> RedisResult<MultiplexedConnection> {
    let mut conn = connect_node(seed).await?;
    let err = match redis::cmd("PTTL")
        .arg(key)
        .query_async::<i64>(&mut conn)
        .await
    {
        Ok(_) => return Ok(conn),
        Err(err) => err,
    };
    let moved = err.kind() == ErrorKind::Server(ServerErrorKind::Moved);
    let Some((host, port)) = err
        .redirect_node()
        .filter(|_| moved)
        .and_then(|(addr, _)| addr.rsplit_once(':'))
    else {
        return Err(err);
    };
    let (seed_host, tls) = match seed.get_connection_info().addr() {
        ConnectionAddr::TcpTls { host, .. } => (host.as_str(), true),
        ConnectionAddr::Tcp(host, _) => (host.as_str(), false),
        _ => ("", false),
    };
    // An empty host in a redirect is the node's own, unknown to it: the one the seed was dialled at.
    let host = if host.is_empty() { seed_host } else { host };
    let scheme = if tls { "rediss" } else { "redis" };
    let info = format!("{scheme}://{}:{port}", url_host(host)).into_connection_info()?;
    connect_node(&node_client(info, access)?).await
}
