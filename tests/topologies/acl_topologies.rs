//! The ACL user with least privilege that docs/REFERENCE.md gives, through Sentinel and on a
//! Redis Cluster: each node's commands that leasehold sends are within the rule, so a leader is
//! elected as on one Redis.

use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{ActionLog, Contender, acting_work, fast_timing, unique_lease};
use leasehold::lease::{LeaseError, minimal_acl_rule};
use testbed::cluster::RedisCluster;
use testbed::sentinel::SentinelSet;
use testbed::wait::eventually;

use crate::acl::acl_lease;

/// A contender on `url` as the least-privilege user, once it leads.
async fn leads_as_the_minimal_user(url: &str, test: &str) {
    let log: ActionLog = Arc::default();
    let lease = acl_lease(url, &unique_lease(test), "pod-a", "leasehold", "s3cret");
    let a = Contender::spawn(
        lease,
        fast_timing(),
        acting_work(log, Duration::from_millis(20), None),
    );
    eventually(
        "a leader as the minimal user",
        Duration::from_secs(15),
        || async { a.is_leader().then_some(()) },
    )
    .await;
    let s = a.status.borrow().clone();
    assert_eq!(s.redis.last_error, None, "nothing was refused");
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
    leads_as_the_minimal_user(&set.url(), "acl-sentinel").await;
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
    leads_as_the_minimal_user(&cluster.url(), "acl-cluster").await;
}

/// A password every node refuses is said as such even while one seed hangs: the first refusal
/// of a password ends the dial (the seeds are one cluster's, with one set of users), so the
/// replica reads its password file again instead of waiting out the call as a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_password_is_said_on_a_cluster_with_a_frozen_seed() {
    let cluster = RedisCluster::start();
    for node in &cluster.nodes {
        node.set_acl_user(
            "leasehold",
            &minimal_acl_rule("leasehold:", false),
            "s3cret",
        );
    }
    let frozen = cluster
        .nodes
        .iter()
        .find(|n| {
            let role: Vec<redis::Value> = n.cmd(&["ROLE"]);
            matches!(role.first(), Some(redis::Value::BulkString(r)) if r.as_slice() == b"slave")
        })
        .expect("a replica");
    frozen.pause();
    let pid = frozen.pid().as_raw();
    eventually("the seed to stop", Duration::from_secs(5), || async {
        testbed::process_tree::is_stopped(pid).then_some(())
    })
    .await;
    let lease = acl_lease(
        &cluster.url(),
        &unique_lease("acl-cluster-wrong"),
        "pod-a",
        "leasehold",
        "wrong",
    );
    let err = lease
        .observe(Duration::from_secs(2))
        .await
        .expect_err("a wrong password");
    frozen.resume();
    assert!(
        matches!(err, LeaseError::Authentication { .. }),
        "the refusal, not a timeout: {err}"
    );
}
