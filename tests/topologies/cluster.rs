//! A Redis RedisCluster of real processes (three masters, three replicas): elect and hand over
//! through redis+cluster://, fail the master that owns the lease's slot, and move that slot to
//! another master while a leader holds it. Leadership recovers safely each time. A failover's
//! cooldown (another process answers for the slot) is checked on each engine.

use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{
    ActionLog, Contender, acting_contenders, handoff_gaps, shut_down_all, summary, unique_lease,
};
use leasehold::elector::Timing;
use leasehold::lease::{Acquired, FencingToken, split_term};
use testbed::cluster::{RedisCluster, url_first};
use testbed::on_engines;
use testbed::redis_server::{Engine, RedisServer};
use testbed::wait::eventually;

fn timing() -> Timing {
    harness::contenders::steady_timing()
}

fn spawn(
    cluster: &RedisCluster,
    name: &str,
    log: &ActionLog,
    hold: Option<Duration>,
) -> Vec<Contender> {
    acting_contenders(&cluster.url(), name, 3, timing(), true, log, hold)
}

/// Contenders that keep the lease once they have it, when one of them leads; with its token.
async fn a_leader(
    cluster: &RedisCluster,
    name: &str,
    log: &ActionLog,
) -> (Vec<Contender>, FencingToken) {
    let contenders = spawn(cluster, name, log, None);
    let first = eventually("a leader", Duration::from_secs(10), || async {
        contenders.iter().position(Contender::is_leader)
    })
    .await;
    let token = contenders[first].token().unwrap();
    (contenders, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_elect_and_hand_over_on_a_cluster() {
    let cluster = RedisCluster::start();
    let name = unique_lease("cluster");
    let log: ActionLog = Arc::default();
    let contenders = spawn(&cluster, &name, &log, Some(Duration::from_millis(200)));
    eventually("five handoffs", Duration::from_secs(15), || async {
        (handoff_gaps(&log.lock().unwrap()).len() >= 5).then_some(())
    })
    .await;
    let (log, tokens) = shut_down_all(contenders, &log).await;
    assert!(tokens.windows(2).all(|w| w[0] < w[1]));
    let gaps = handoff_gaps(&log);
    eprintln!("cluster handoff: {}", summary(&gaps));
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(500)),
        "release is announced across the cluster: {gaps:?}"
    );
    // All three keys live in one slot, on its master.
    let owner = cluster.master_of(cluster.lease_slot(&name)).unwrap();
    let keys: Vec<String> = cluster.nodes[owner].cmd(&[
        "CLUSTER",
        "GETKEYSINSLOT",
        &cluster.lease_slot(&name).to_string(),
        "10",
    ]);
    assert!(
        keys.iter().any(|k| k.ends_with(":fence")) && keys.iter().any(|k| k.ends_with(":state")),
        "{keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_master_is_replaced_and_leadership_recovers_safely() {
    let mut cluster = RedisCluster::start();
    let name = unique_lease("cluster-failover");
    let log: ActionLog = Arc::default();
    let (contenders, first_token) = a_leader(&cluster, &name, &log).await;
    let slot = cluster.lease_slot(&name);
    let owner = cluster.master_of(slot).unwrap();
    cluster.nodes[owner].kill();
    // The replica takes over the slot after the node timeout.
    let second = eventually(
        "a leader after the failover",
        Duration::from_secs(30),
        || async {
            contenders
                .iter()
                .position(|c| c.is_leader() && c.token().is_some_and(|t| t > first_token))
        },
    )
    .await;
    let new_owner = cluster.master_of(slot).unwrap();
    assert_ne!(new_owner, owner, "a replica was promoted");
    let holder: String = cluster.nodes[new_owner].cmd(&["GET", &format!("leasehold:{{{name}}}")]);
    assert_eq!(split_term(&holder).0, contenders[second].owner);
    shut_down_all(contenders, &log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_the_lease_slot_to_another_master_keeps_leadership_safe() {
    let cluster = RedisCluster::start();
    let name = unique_lease("cluster-move");
    let log: ActionLog = Arc::default();
    let (contenders, first_token) = a_leader(&cluster, &name, &log).await;
    let slot = cluster.lease_slot(&name);
    let src = cluster.master_of(slot).unwrap();
    let dst = cluster
        .masters()
        .find(|&m| m != src)
        .expect("another master");
    let (src_id, dst_id) = (cluster.node_id(src), cluster.node_id(dst));
    let slot_s = slot.to_string();
    // The documented live migration: IMPORTING, MIGRATING, MIGRATE the keys, then NODE.
    let _: String = cluster.nodes[dst].cmd(&["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &src_id]);
    let _: String = cluster.nodes[src].cmd(&["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &dst_id]);
    let keys: Vec<String> = cluster.nodes[src].cmd(&["CLUSTER", "GETKEYSINSLOT", &slot_s, "100"]);
    let dst_port = cluster.nodes[dst].port().to_string();
    let mut migrate = vec!["MIGRATE", "127.0.0.1", &dst_port, "", "0", "5000", "KEYS"];
    migrate.extend(keys.iter().map(String::as_str));
    let _: String = cluster.nodes[src].cmd(&migrate);
    // SETSLOT goes to the masters; the replicas learn it from them.
    for master in cluster.masters().collect::<Vec<_>>() {
        let _: redis::Value =
            cluster.nodes[master].cmd(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &dst_id]);
    }
    cluster.until_master_of(slot, dst).await;
    // The lease moved with its TTL; a leader exists again (the same one renewing through MOVED,
    // or a new one after a cooldown: another Redis process now answers for the slot).
    let after = eventually(
        "a leader after the move",
        Duration::from_secs(15),
        || async { contenders.iter().position(Contender::is_leader) },
    )
    .await;
    let holder: String = cluster.nodes[dst].cmd(&["GET", &format!("leasehold:{{{name}}}")]);
    assert_eq!(
        split_term(&holder).0,
        contenders[after].owner,
        "the lease lives on the new master"
    );
    assert!(contenders[after].token().unwrap() >= first_token);
    shut_down_all(contenders, &log).await;
}

on_engines!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_manual_failover_starts_the_cooldown_even_on_a_connection_kept_from_before);
async fn a_manual_failover_starts_the_cooldown_even_on_a_connection_kept_from_before(
    engine: Engine,
) {
    let cluster = RedisCluster::start_on(engine);
    let name = unique_lease("cluster-takeover");
    let ttl = Duration::from_millis(1000);
    let call = Duration::from_secs(2);
    let lease = harness::contenders::lease(&cluster.url(), &name, "pod-a", true);
    // A fresh lease cools down first; then the same connection wins it.
    let grant = eventually(
        "the lease after the first cooldown",
        Duration::from_secs(10),
        || async {
            match lease.acquire(ttl, call).await {
                Ok(Acquired::Leader(grant)) => Some(grant),
                _ => None,
            }
        },
    )
    .await;
    let slot = cluster.lease_slot(&name);
    let master = cluster.master_of(slot).unwrap();
    let replica = cluster.replica_of(master).expect("its replica");
    // The replica takes the slot over without the master's agreement, as an operator would
    // after losing the master's writes; the client keeps its connection and follows MOVED.
    let _: String = cluster.nodes[replica].cmd(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
    cluster.until_master_of(slot, replica).await;
    // Another Redis process answers for the slot now: it may have missed the lease, so the
    // next acquire must cool down, whatever the connection saw before.
    let after = eventually(
        "the promoted master to answer",
        Duration::from_secs(10),
        || async { lease.acquire(ttl, call).await.ok() },
    )
    .await;
    assert!(
        matches!(after, Acquired::CoolingDown { started: true, .. }),
        "no cooldown after the failover (token {} before): {after:?}",
        grant.token
    );
}

/// A seed named by its IPv6 address (`redis+cluster://[::1]:port`) keeps its brackets on the way
/// to the client: the lease is taken there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_named_by_an_ipv6_address_is_dialled() {
    let cluster =
        RedisCluster::try_create(|_| RedisServer::builder().args(["--bind", "127.0.0.1", "::1"]))
            .unwrap_or_else(|e| panic!("{e}"));
    cluster.wait_ok(Duration::from_secs(30));
    let url = format!("redis+cluster://[::1]:{}", cluster.nodes[0].port());
    let lease = harness::contenders::lease(&url, &unique_lease("cluster-v6"), "a", false);
    let acquired = lease
        .acquire(Duration::from_secs(5), Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(matches!(acquired, Acquired::Leader(_)), "{acquired:?}");
}

/// A node frozen elsewhere in the cluster (the replica of another shard, still a seed) costs
/// the lease nothing: a dial asks the seeds at once and goes to the lease's master alone, so
/// replicas that start while it is frozen elect a leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_frozen_elsewhere_in_the_cluster_does_not_stop_the_election() {
    let cluster = RedisCluster::start();
    let name = unique_lease("cluster-frozen-node");
    let owner = cluster.master_of(cluster.lease_slot(&name)).unwrap();
    let other = cluster
        .masters()
        .find(|&m| m != owner)
        .expect("another master");
    let frozen = &cluster.nodes[cluster.replica_of(other).expect("its replica")];
    frozen.pause();
    let pid = frozen.pid().as_raw();
    eventually("the node to stop", Duration::from_secs(5), || async {
        testbed::process_tree::is_stopped(pid).then_some(())
    })
    .await;
    let log: ActionLog = Arc::default();
    let (contenders, _) = a_leader(&cluster, &name, &log).await;
    frozen.resume();
    shut_down_all(contenders, &log).await;
}

/// A Redis of its own among the seeds (a wrong port, a stray server) answers a read like the
/// slot's master; the lease is never taken there. The cluster's seeds answer later (behind a
/// delay), so the stray one is the first to answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_that_is_no_cluster_node_never_holds_the_lease() {
    let cluster = RedisCluster::start();
    let stray = RedisServer::start();
    let seeds: Vec<&RedisServer> = cluster.nodes[..3].iter().collect();
    let (url, _slow) = url_first(stray.addr(), &seeds, Duration::from_millis(200));
    let name = unique_lease("cluster-stray-seed");
    let lease = harness::contenders::lease(&url, &name, "pod-a", false);
    let acquired = lease
        .acquire(Duration::from_secs(5), Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(matches!(acquired, Acquired::Leader(_)), "{acquired:?}");
    assert!(
        stray.calls("pttl") >= 1,
        "the premise: the stray Redis was asked"
    );
    let key = format!("leasehold:{{{name}}}");
    let on_stray: Option<String> = stray.cmd(&["GET", &key]);
    assert_eq!(on_stray, None, "the stray Redis holds no lease");
    let owner = cluster.master_of(cluster.lease_slot(&name)).unwrap();
    let on_cluster: Option<String> = cluster.nodes[owner].cmd(&["GET", &key]);
    assert!(on_cluster.is_some(), "the lease is on the slot's master");
}

/// A redirect that names an address where another Redis now listens (a slot's master announced
/// at an address a pod gave up) is not followed into that Redis: the node named must serve the
/// slot in cluster mode, as a seed must.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_redis_outside_the_cluster_is_not_followed() {
    let cluster = RedisCluster::start();
    let stray = RedisServer::start();
    let name = unique_lease("cluster-stray-redirect");
    let owner = cluster.master_of(cluster.lease_slot(&name)).unwrap();
    let port = stray.port().to_string();
    let _: String = cluster.nodes[owner].cmd(&["CONFIG", "SET", "cluster-announce-port", &port]);
    let others: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| i != owner).collect();
    eventually(
        "the others to hear the new port",
        Duration::from_secs(10),
        || async {
            others
                .iter()
                .all(|&i| {
                    let nodes: String = cluster.nodes[i].cmd(&["CLUSTER", "NODES"]);
                    nodes.contains(&format!(":{port}@"))
                })
                .then_some(())
        },
    )
    .await;
    // Seeds that do not serve the slot: each redirects to the stray Redis.
    let seeds: Vec<String> = others
        .iter()
        .map(|&i| cluster.nodes[i].addr().to_string())
        .collect();
    let url = format!("redis+cluster://{}", seeds.join(","));
    let lease = harness::contenders::lease(&url, &name, "pod-a", false);
    let taken = lease
        .acquire(Duration::from_secs(5), Duration::from_secs(2))
        .await;
    let key = format!("leasehold:{{{name}}}");
    let on_stray: Option<String> = stray.cmd(&["GET", &key]);
    assert_eq!(on_stray, None, "the stray Redis holds no lease: {taken:?}");
    assert!(
        taken.is_err(),
        "no node serves the slot where the redirects point: {taken:?}"
    );
}
