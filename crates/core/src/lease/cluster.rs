//! The lease's node in a Redis Cluster: the master that serves the lease's slot, found by asking
//! every seed at once. Only that node serves the lease, so a node that is slow, frozen or cut off
//! elsewhere in the cluster costs nothing (a cluster client waits for every node it knows).

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::{
    Client, ConnectionAddr, ErrorKind, IntoConnectionInfo, RedisError, RedisResult, ServerErrorKind,
};

use super::target::{Access, connect_node, node_client, url_host};

/// A connection to the master that serves `key`'s slot: the first seed to answer a read of
/// `key` (`PTTL`, which leasehold's ACL rule allows) serves it, or names the node that does in
/// its `MOVED` redirect, which is followed once. A node that does not serve the slot (a stale
/// view, a slot moved since) answers the lease's calls with another redirect, which spoils the
/// connection, and the next call asks the seeds again. A refused password ends the dial at once
/// (the seeds are one cluster's, with one set of users): a seed that hangs must not turn it
/// into a timeout, which would never read a rotated password. When every seed failed, the
/// error that says the most is the dial's.
pub(crate) async fn slot_master(
    seeds: &[Client],
    key: &str,
    access: &Access,
) -> RedisResult<MultiplexedConnection> {
    let mut asks: FuturesUnordered<_> = seeds.iter().map(|s| served_by(s, key, access)).collect();
    let mut telling: Option<RedisError> = None;
    while let Some(answer) = asks.next().await {
        match answer {
            Ok(conn) => return Ok(conn),
            Err(err) if refuses_credentials(&err) => return Err(err),
            Err(err) => {
                if telling.as_ref().is_none_or(|t| says_more(&err, t)) {
                    telling = Some(err);
                }
            }
        }
    }
    Err(telling.unwrap_or_else(|| (ErrorKind::InvalidClientConfig, "no seed node").into()))
}

/// Whether Redis refused the credentials (a wrong password, or none given).
fn refuses_credentials(err: &RedisError) -> bool {
    err.kind() == ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"))
}

/// Whether `err` says more than `than`: Redis's own answer says more than a failed link.
fn says_more(err: &RedisError, than: &RedisError) -> bool {
    err.code().is_some() && than.code().is_none()
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
        Ok(_) => return in_cluster_mode(conn).await,
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

/// `conn` when its node runs in cluster mode: a Redis of its own among the seeds (a wrong port,
/// a stray server) answers the read too, and a lease there would be another lease.
async fn in_cluster_mode(mut conn: MultiplexedConnection) -> RedisResult<MultiplexedConnection> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await?;
    let cluster = ["redis_mode:cluster", "server_mode:cluster"];
    if info.lines().any(|l| cluster.contains(&l.trim_end())) {
        Ok(conn)
    } else {
        Err((
            ErrorKind::InvalidClientConfig,
            "a seed node of the URL is no Redis Cluster node (its INFO server says another mode)",
        )
            .into())
    }
}
