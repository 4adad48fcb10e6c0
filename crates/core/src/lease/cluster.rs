//! The lease's node in a Redis Cluster: the master that serves the lease's slot, found by asking
//! every seed at once (docs/REFERENCE.md, "Cluster").

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::{Client, ConnectionAddr, ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::error::refuses_credentials;
use super::info_field;
use super::target::{Access, connect_node, node_at};

/// A connection to the master that serves `key`'s slot: the first seed that [serves](serves)
/// it, or the node that a seed's `MOVED` redirect names, once it serves it too (a redirect is
/// followed once). When every seed failed, see [`reason`].
pub(crate) async fn slot_master(
    seeds: &[Client],
    key: &str,
    access: &Access,
) -> RedisResult<MultiplexedConnection> {
    let mut asks: FuturesUnordered<_> = seeds.iter().map(|s| served_by(s, key, access)).collect();
    let mut failed = Vec::new();
    while let Some(answer) = asks.next().await {
        match answer {
            Ok(conn) => return Ok(conn),
            Err(failure) => failed.push(failure),
        }
    }
    Err(reason(failed))
}

/// Why one seed led to no connection to the slot's master.
struct Failure {
    err: RedisError,
    /// The node a redirect named as the slot's master gave the error.
    at_master: bool,
    /// Some node on the way took the credentials (the seed answered past them).
    took: bool,
}

/// The dial's error when no seed led to the master, by REFERENCE's rule ("Cluster"): one node's
/// refusal must not end a term that a master which takes the credentials could keep. `failed`
/// holds one failure per seed (there is at least one).
fn reason(failed: Vec<Failure>) -> RedisError {
    let lasting = |f: &Failure| rank(&f.err) >= 2;
    let from_master = failed.iter().any(|f| f.at_master && lasting(f));
    let none_took = !failed.iter().any(|f| f.took);
    let all_lasting = failed.iter().all(lasting);
    let counts = |f: &Failure| match (from_master, none_took || all_lasting) {
        (true, _) => f.at_master && lasting(f),
        (false, true) => true,
        (false, false) => !lasting(f),
    };
    failed
        .into_iter()
        .filter(counts)
        .max_by_key(|f| rank(&f.err))
        .map_or_else(
            || (ErrorKind::InvalidClientConfig, "no seed node").into(),
            |f| f.err,
        )
}

/// How much a failure says: refused credentials (3), another answer the lease cannot pass (2: a
/// missing permission, another mode), any other answer (1: a redirect, a cluster that is down,
/// a node loading), a failed link (0).
fn rank(err: &RedisError) -> u8 {
    if refuses_credentials(err) {
        3
    } else if err.code() == Some("NOPERM") || err.kind() == ErrorKind::InvalidClientConfig {
        2
    } else if err.code().is_some() {
        1
    } else {
        0
    }
}

/// `seed`'s connection when it serves `key`, else one to the node its redirect names; or why
/// not.
async fn served_by(
    seed: &Client,
    key: &str,
    access: &Access,
) -> Result<MultiplexedConnection, Failure> {
    let failure = |err, at_master, took| Failure {
        err,
        at_master,
        took,
    };
    let mut conn = connect_node(seed)
        .await
        .map_err(|e| failure(e, false, false))?;
    let err = match serves(&mut conn, key).await {
        Ok(()) => return Ok(conn),
        Err(err) => err,
    };
    let target = redirect(seed, &err, access).map_err(|e| failure(e, false, true))?;
    let Some(target) = target else {
        let took = !refuses_credentials(&err);
        return Err(failure(err, false, took));
    };
    let mut there = connect_node(&target)
        .await
        .map_err(|e| failure(e, true, true))?;
    serves(&mut there, key)
        .await
        .map_err(|e| failure(e, true, true))?;
    Ok(there)
}

/// The node that `err` redirects to, when it is a `MOVED`.
fn redirect(seed: &Client, err: &RedisError, access: &Access) -> RedisResult<Option<Client>> {
    let moved = err.kind() == ErrorKind::Server(ServerErrorKind::Moved);
    let Some((host, port)) = err
        .redirect_node()
        .filter(|_| moved)
        .and_then(|(addr, _)| addr.rsplit_once(':'))
    else {
        return Ok(None);
    };
    let (seed_host, tls) = match seed.get_connection_info().addr() {
        ConnectionAddr::TcpTls { host, .. } => (host.as_str(), true),
        ConnectionAddr::Tcp(host, _) => (host.as_str(), false),
        _ => ("", false),
    };
    // An empty host in a redirect is the node's own, unknown to it: the one the seed was dialled at.
    let host = if host.is_empty() { seed_host } else { host };
    node_at(host, port, 0, tls, access).map(Some)
}

/// Whether the node on `conn` serves `key`'s slot in cluster mode, in one round trip: it
/// answers a read of the key (`PTTL`, which leasehold's ACL rule allows) instead of a redirect,
/// and `INFO server` says cluster mode. A Redis of its own there would hold another lease.
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
    let mode = |field| info_field(&info, field) == Some("cluster");
    if mode("redis_mode") || mode("server_mode") {
        Ok(())
    } else {
        Err((
            ErrorKind::InvalidClientConfig,
            "a node of the URL or of a redirect is no Redis Cluster node (its INFO server says another mode)",
        )
            .into())
    }
}

#[cfg(test)]
mod tests;
