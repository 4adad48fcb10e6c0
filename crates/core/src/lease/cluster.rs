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
/// the seeds again. When every seed failed, the dial's error is the one that says the most
/// ([`rank`]); users are each node's own, so a refused password is the reason only when no node
/// took it.
pub(crate) async fn slot_master(
    seeds: &[Client],
    key: &str,
    access: &Access,
) -> RedisResult<MultiplexedConnection> {
    let mut asks: FuturesUnordered<_> = seeds.iter().map(|s| served_by(s, key, access)).collect();
    let (mut refusal, mut other, mut taken) = (None, None::<RedisError>, false);
    while let Some(answer) = asks.next().await {
        let (err, took) = match answer {
            Ok(conn) => return Ok(conn),
            Err(failed) => failed,
        };
        taken |= took;
        if refuses_credentials(&err) {
            refusal = Some(err);
        } else if other.as_ref().is_none_or(|o| rank(&err) > rank(o)) {
            other = Some(err);
        }
    }
    let (first, then) = if taken {
        (other, refusal)
    } else {
        (refusal, other)
    };
    Err(first
        .or(then)
        .unwrap_or_else(|| (ErrorKind::InvalidClientConfig, "no seed node").into()))
}

/// Whether Redis refused the credentials (a wrong password, or none given).
fn refuses_credentials(err: &RedisError) -> bool {
    err.kind() == ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"))
}

/// How much a failure other than refused credentials says: an answer of Redis's that the
/// lease cannot pass (a missing permission, another mode), then a redirect or a cluster that is
/// down (which passes), then a failed link.
fn rank(err: &RedisError) -> u8 {
    let passing = matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
        )
    );
    let answered = err.code().is_some() || err.kind() == ErrorKind::InvalidClientConfig;
    match (answered, passing) {
        (true, false) => 2,
        (true, true) => 1,
        (false, _) => 0,
    }
}

/// `seed`'s connection when it serves `key`, else one to the node its redirect names; or why
/// not, and whether the seed took the credentials.
async fn served_by(
    seed: &Client,
    key: &str,
    access: &Access,
) -> Result<MultiplexedConnection, (RedisError, bool)> {
    let conn = connect_node(seed).await.map_err(|e| (e, false))?;
    redirected(seed, conn, key, access)
        .await
        .map_err(|e| (e, true))
}

/// `conn` (to `seed`) when it serves `key`, else a connection to the node its redirect names.
async fn redirected(
    seed: &Client,
    mut conn: MultiplexedConnection,
    key: &str,
    access: &Access,
) -> RedisResult<MultiplexedConnection> {
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
