//! The Lease mirror as `helm uninstall` and a rollout meet it, against the in-process fake API
//! server: it carries the Deployment's labels and an owner reference to it (added to a mirror
//! an older release left without them), and it recovers from conflicting writes.

use std::time::Duration;

use crate::calls::assert_within_rbac;
use crate::fixtures::{
    NS, chart_labels, deployment_with_pods, gaps_between_refused_writes, labels, member, member_at,
};
use harness::contenders::{fast_timing, unique_lease};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use testbed::fake_api::{FakeApiServer, Recorded};
use testbed::redis_server::RedisServer;
use testbed::wait::eventually;

/// A fake API server with Deployment `web` in namespace `shop` and its `pods`, a Redis, and a
/// lease of `shop` named for the calling `test`.
async fn shop_web(test: &str, pods: &[&str]) -> (FakeApiServer, RedisServer, String) {
    let api = FakeApiServer::start().await;
    deployment_with_pods(&api, pods);
    let lease_name = unique_lease(test).replace("test/", "shop/");
    (api, RedisServer::start(), lease_name)
}

/// The garbage collector's rule, as `helm uninstall` relies on it: an object whose owner
/// reference names the deleted Deployment (by uid) is deleted with it.
fn owned_by(lease: &Lease, deployment: &Deployment) -> bool {
    lease.owner_references().iter().any(|o| {
        o.kind == "Deployment"
            && o.api_version == "apps/v1"
            && o.name == deployment.name_any()
            && Some(&o.uid) == deployment.uid().as_ref()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_mirror_carries_the_deployments_labels_and_is_owned_by_it() {
    let (api, redis, lease_name) = shop_web("shop-web-owned", &["web-7d4f-a", "web-7d4f-b"]).await;
    let deployment = api.get::<Deployment>(NS, "web").expect("the Deployment");
    let timing = fast_timing();
    let mut a = member(&api, &redis, &lease_name, "web-7d4f-a", timing).await;
    a.wait_leading().await;
    let mirror = eventually("the Lease mirror", Duration::from_secs(5), || async {
        api.get::<Lease>(NS, "web")
    })
    .await;
    for (key, value) in chart_labels() {
        assert_eq!(mirror.labels().get(&key), Some(&value), "{key}: {mirror:?}");
    }
    assert!(owned_by(&mirror, &deployment), "{mirror:?}");
    let owner = &mirror.owner_references()[0];
    assert_eq!(
        owner.controller, None,
        "the Deployment does not control a Lease"
    );
    a.stop().await;

    // A mirror left by a release that gave it neither (or a label of its own): the next
    // leader's update adds both and keeps what else is there.
    let mut old = api.get::<Lease>(NS, "web").expect("the mirror");
    old.metadata.labels = Some(labels(&[("team", "shop")]));
    old.metadata.owner_references = None;
    api.insert(&old);
    let mut b = member(&api, &redis, &lease_name, "web-7d4f-b", timing).await;
    b.wait_leading().await;
    let mirror = eventually(
        "b's mirror with labels and owner",
        Duration::from_secs(5),
        || async {
            api.get::<Lease>(NS, "web").filter(|l| {
                l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some("web-7d4f-b")
                    && owned_by(l, &deployment)
            })
        },
    )
    .await;
    assert_eq!(
        mirror.labels().get("team").map(String::as_str),
        Some("shop")
    );
    assert_eq!(
        mirror
            .labels()
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some("web")
    );
    assert_eq!(mirror.owner_references().len(), 1, "{mirror:?}");
    assert_within_rbac(&api);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_mirror_recovers_from_a_conflicting_write() {
    let (api, redis, lease_name) = shop_web("shop-web-conflict", &["web-7d4f-a"]).await;
    api.fail_next_writes("leases", 2);
    let mut a = member(&api, &redis, &lease_name, "web-7d4f-a", fast_timing()).await;
    a.wait_leading().await;
    let spec = eventually(
        "the mirror despite two conflicts",
        Duration::from_secs(5),
        || async { api.get::<Lease>(NS, "web").and_then(|l| l.spec) },
    )
    .await;
    assert_eq!(spec.holder_identity.as_deref(), Some("web-7d4f-a"));
    let conflicts = api
        .requests()
        .iter()
        .filter(|r| r.path.contains("/leases") && r.method != "GET")
        .count();
    assert!(
        conflicts >= 3,
        "two refused writes, then one that landed: {conflicts}"
    );
    a.stop().await;
}

/// A refusal that repeats (a Role without the verb) is asked again less and less often, not at a
/// fixed pace for the whole term; a conflict is read again at once (above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_mirror_backs_off_from_a_refusal_that_repeats() {
    let lease_name = unique_lease("shop-web-forbidden").replace("test/", "shop/");
    let written = |r: &Recorded| r.path.contains("/leases") && r.method != "GET";
    let (gaps, timing) = gaps_between_refused_writes("leases", &lease_name, written).await;
    assert!(
        gaps[0] >= timing.retry_period && gaps[3] >= 4 * timing.retry_period,
        "the retry period, doubling: {gaps:?}"
    );
}

/// After its term the old leader takes its name off the mirror: scaled to zero (or with Redis
/// down, nobody leading), `kubectl get lease` named it for ever. The next leader's take-over
/// counts a transition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_mirror_names_no_holder_once_the_term_is_over() {
    let (api, redis, lease_name) =
        shop_web("shop-web-withdrawn", &["web-7d4f-a", "web-7d4f-b"]).await;
    let holder = || {
        api.get::<Lease>(NS, "web")
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
    };
    let mut a = member(&api, &redis, &lease_name, "web-7d4f-a", fast_timing()).await;
    a.wait_leading().await;
    eventually("the mirror to name a", Duration::from_secs(5), || async {
        (holder().as_deref() == Some("web-7d4f-a")).then_some(())
    })
    .await;
    // Stopping waits for the term's notes (bounded), as `leasehold run` does before it exits.
    a.stop().await;
    assert_eq!(holder(), None, "the mirror still names the old leader");
    let mut b = member(&api, &redis, &lease_name, "web-7d4f-b", fast_timing()).await;
    b.wait_leading().await;
    let spec = eventually("the mirror to name b", Duration::from_secs(5), || async {
        api.get::<Lease>(NS, "web")
            .and_then(|l| l.spec)
            .filter(|s| s.holder_identity.as_deref() == Some("web-7d4f-b"))
    })
    .await;
    assert_eq!(spec.lease_transitions, Some(1), "{spec:?}");
    assert_within_rbac(&api);
    b.stop().await;
}

/// The mirror's `renewTime` is when the term was last renewed in Redis, not when the mirror was
/// last written: while renewals fail, the leader went on writing a fresh `renewTime` until its
/// step-down, so the mirror claimed the term up to a renew deadline past the Redis lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_mirror_shows_the_last_renewal_not_the_last_write() {
    use k8s_openapi::jiff::Timestamp;
    use testbed::proxy::{Fault, FaultProxy};
    let (api, redis, lease_name) = shop_web("shop-web-renewed", &["web-7d4f-a"]).await;
    let proxy = FaultProxy::start(redis.addr());
    // The mirror is refreshed every 2 s; the step-down comes 4 s after the last renewal.
    let timing = harness::timings::SIX_SECOND_TERM;
    let mut a = member_at(&api, &proxy.url(), &lease_name, "web-7d4f-a", timing).await;
    a.wait_leading().await;
    let mirror = || api.get::<Lease>(NS, "web").and_then(|l| l.spec);
    eventually("the mirror", Duration::from_secs(5), || async { mirror() }).await;
    proxy.set(Fault::Drop);
    let (cut, cut_at) = (Timestamp::now(), std::time::Instant::now());
    let mut status = a.status();
    // Every mirror written until the step-down, looked at as it lands.
    let mut latest = None;
    // At the renew deadline, 4 s after the cut; bounded, should it never come.
    let stepped_down = async {
        let stepped = status.wait_for(|s| s.last_step_down.is_some());
        let stepped = tokio::time::timeout(Duration::from_secs(15), stepped).await;
        assert!(stepped.is_ok(), "no step-down within 15 s of the cut");
    };
    tokio::pin!(stepped_down);
    loop {
        if let Some(renewed) = mirror().and_then(|s| s.renew_time) {
            latest = latest.max(Some(renewed.0));
        }
        tokio::select! {
            _ = &mut stepped_down => break,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    let writes = api
        .requests()
        .iter()
        .filter(|r| r.path.contains("/leases") && r.method == "PUT" && r.at > cut_at)
        .count();
    assert!(
        writes >= 1,
        "the mirror was refreshed while renewals failed"
    );
    let latest = latest.expect("a renewTime");
    assert!(
        latest <= cut,
        "the mirror says {latest}, after the last renewal (the link was cut at {cut})"
    );
    a.stop().await;
}
