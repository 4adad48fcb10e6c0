//! The ACL user with least privilege that docs/REFERENCE.md gives, through Sentinel and on a
//! Redis Cluster: each node's commands that leasehold sends are within the rule, so a leader is
//! elected as on one Redis.

use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{
    ActionLog, Contender, acting_work, fast_timing, unique_lease, until_leading,
};
use leasehold::lease::{Acquired, LeaseError, minimal_acl_rule};
use testbed::cluster::{RedisCluster, url_first};
use testbed::redis_server::RedisServer;
use testbed::sentinel::SentinelSet;

use crate::acl::acl_lease;

/// A contender on `url` as the least-privilege user, once it leads; none of `nodes` logged a
/// command or key it refused (`ACL LOG`).
async fn leads_as_the_minimal_user(url: &str, test: &str, nodes: &[&RedisServer]) {
    let log: ActionLog = Arc::default();
    let lease = acl_lease(url, &unique_lease(test), "pod-a", "leasehold", "s3cret");
    let a = Contender::spawn(
        lease,
        fast_timing(),
        acting_work(log, Duration::from_millis(20), None),
    );
    until_leading(
        "a leader as the minimal user",
        &mut a.status.clone(),
        Duration::from_secs(15),
    )
    .await;
    for node in nodes {
        let refused: Vec<redis::Value> = node.cmd(&["ACL", "LOG"]);
        assert!(refused.is_empty(), "{}: {refused:?}", node.port());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_acl_user_leads_through_sentinel() {
    let set = SentinelSet::start();
    // The Sentinels log in as the default user; only leasehold's user is limited.
    set.master.set_acl_user(
        "leasehold",
        &minimal_acl_rule("leasehold:", false),
        "s3cret",
    );
    leads_as_the_minimal_user(&set.url(), "acl-sentinel", &[&set.master]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_acl_user_leads_on_a_cluster() {
    let cluster = RedisCluster::start();
    for node in &cluster.nodes {
        node.set_acl_user(
            "leasehold",
            &minimal_acl_rule("leasehold:", false),
            "s3cret",
        );
    }
    let nodes: Vec<&RedisServer> = cluster.nodes.iter().collect();
    leads_as_the_minimal_user(&cluster.url(), "acl-cluster", &nodes).await;
}

/// `cluster` with leasehold's user on every node but `lacking`, and a URL whose first seed is
/// `lacking` (the others answer after it, behind a delay), with the proxies that delay them.
fn without_the_user_on(
    cluster: &RedisCluster,
    lacking: &RedisServer,
) -> (String, Vec<testbed::proxy::FaultProxy>) {
    let others: Vec<&RedisServer> = cluster
        .nodes
        .iter()
        .filter(|n| n.port() != lacking.port())
        .collect();
    for node in &others {
        node.set_acl_user(
            "leasehold",
            &minimal_acl_rule("leasehold:", false),
            "s3cret",
        );
    }
    url_first(lacking.addr(), &others, Duration::from_millis(200))
}

/// Users are each node's own: a seed that lacks leasehold's user (a node restarted without a
/// saved ACL) refuses the password, but the others accept it, so the lease is taken there. The
/// other seeds answer later (behind a delay), so the refusal is the first answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_that_refuses_the_user_does_not_keep_the_lease_from_the_others() {
    let cluster = RedisCluster::start();
    let name = unique_lease("acl-cluster-lacking");
    let owner = cluster.master_of(cluster.lease_slot(&name)).unwrap();
    // A replica of another master: the slot's master and its replica have the user.
    let lacking = cluster
        .replicas()
        .find(|r| cluster.replicates(r) != Some(owner))
        .expect("a replica of another master");
    let (url, _slow) = without_the_user_on(&cluster, lacking);
    let lease = acl_lease(&url, &name, "pod-a", "leasehold", "s3cret");
    let acquired = lease
        .acquire(Duration::from_secs(5), Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    // The cluster's own answer: a new lease cools down first.
    assert!(
        matches!(acquired, Acquired::CoolingDown { .. }),
        "{acquired:?}"
    );
    let refused: Vec<redis::Value> = lacking.cmd(&["ACL", "LOG"]);
    assert!(
        !refused.is_empty(),
        "the premise: the lacking seed refused the password"
    );
    // The slot's master dies: until its replica takes over, the seeds' redirects end at a dead
    // node. The refusal is not the reason then (the other nodes took the password): the lost
    // link is, retried soon, not a refusal that backs off.
    cluster.nodes[owner]
        .try_signal(nix::sys::signal::Signal::SIGKILL)
        .expect("kill the slot's master");
    let err = lease
        .observe(Duration::from_secs(2))
        .await
        .expect_err("the slot's master is dead");
    // A lost link, or the cluster down once it noticed: either passes.
    assert!(
        matches!(
            err,
            LeaseError::Connection { .. } | LeaseError::Cluster { .. }
        ),
        "{err}"
    );
}

/// The slot's own master refusing the password is the reason, even while a seed is down: its
/// answer is the lease's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slot_masters_refusal_is_said_while_a_seed_is_down() {
    let cluster = RedisCluster::start();
    let name = unique_lease("acl-cluster-master-lacking");
    let owner = cluster.master_of(cluster.lease_slot(&name)).unwrap();
    let (url, _slow) = without_the_user_on(&cluster, &cluster.nodes[owner]);
    let down = cluster.replicas().next().expect("a replica");
    down.try_signal(nix::sys::signal::Signal::SIGKILL)
        .expect("kill a replica");
    let lease = acl_lease(&url, &name, "pod-a", "leasehold", "s3cret");
    let err = lease
        .observe(Duration::from_secs(5))
        .await
        .expect_err("the slot's master lacks the user");
    assert!(matches!(err, LeaseError::Authentication { .. }), "{err}");
}
