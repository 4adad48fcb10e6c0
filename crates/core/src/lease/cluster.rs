//! The lease's node in a Redis Cluster: the master that serves the lease's slot, found by asking
//! every seed at once. Only that node serves the lease, so a node that is slow, frozen or cut off
//! elsewhere in the cluster holds up no dial that another seed answers (a cluster client waits for
//! every node it knows).

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::{
    Client, ConnectionAddr, ErrorKind, IntoConnectionInfo, RedisError, RedisResult, ServerErrorKind,
};

use super::target::{Access, connect_node, node_client, url_host};

/// A connection to the master that serves `key`'s slot: the first seed that [serves](serves)
/// it, or the node that a seed's `MOVED` redirect names, once it serves it too (a redirect is
/// followed once). A node that stops serving the slot later (a slot moved, a failover) answers
/// the lease's calls with another redirect, which spoils the connection, and the next call asks
/// the seeds again. Users are each node's own, so one seed's refusal does not end the dial; when
/// every seed failed, the error that says the most is the dial's.
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
            Err(err) if telling.as_ref().is_none_or(|t| rank(&err) > rank(t)) => {
                telling = Some(err);
            }
            Err(_) => {}
        }
    }
    Err(telling.unwrap_or_else(|| (ErrorKind::InvalidClientConfig, "no seed node").into()))
}

/// How much an error says: refused credentials (the password file is read again on it), then
/// any other answer of Redis's, then a failed link.
fn rank(err: &RedisError) -> u8 {
    let refused = err.kind() == ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"));
    match (refused, err.code()) {
        (true, _) => 2,
        (false, Some(_)) => 1,
        (false, None) => 0,
    }
}

/// `seed`'s connection when it serves `key`, else one to the node its redirect names.
async fn served_by(
    seed: &Client,
    key: &str,
    access: &Access,
) -> RedisResult<MultiplexedConnection> {
    let mut conn = connect_node(seed).await?;
    let err = match serves(&mut conn, key).await {
        Ok(()) => return Ok(conn),
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
    let mut there = connect_node(&node_client(info, access)?).await?;
    serves(&mut there, key).await?;
    Ok(there)
}

/// Whether the node on `conn` serves `key`'s slot in cluster mode, in one round trip: it
/// answers a read of the key (`PTTL`, which leasehold's ACL rule allows) instead of a redirect,
/// and `INFO server` says cluster mode (`redis_mode`, or Valkey's `server_mode`). A Redis of its
/// own at a seed's or a redirect's address (a wrong port, a stray server, an address a pod gave
/// up) answers the read too, and a lease there would be another lease.
async fn serves(conn: &mut MultiplexedConnection, key: &str) -> RedisResult<()> {
    let (read, info): (RedisResult<i64>, RedisResult<String>) = redis::pipe()
        .ignore_errors()
        .cmd("PTTL")
        .arg(key)
        .cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await?;
    read?;
    let info = info?;
    let cluster = ["redis_mode:cluster", "server_mode:cluster"];
    if info.lines().any(|l| cluster.contains(&l.trim_end())) {
        Ok(())
    } else {
        Err((
            ErrorKind::InvalidClientConfig,
            "a node of the URL or of a redirect is no Redis Cluster node (its INFO server says another mode)",
        )
            .into())
    }
}
