//! The leader label, the Lease mirror and Events following leadership, against the in-process
//! fake API server with kube's own client and Controller unmodified: the label moves with the
//! term and leaves another app's pods alone, the mirror names the holder and counts the
//! transitions, the Events regard the Deployment, and every request has the shape the RBAC list
//! allows; without a Deployment, only the own pod is labelled.

use std::time::Duration;

use crate::calls::assert_within_rbac;
use crate::fixtures::{
    LABEL, NS, deployment_with_pods, gaps_between, gaps_between_refused_writes, kube_settings,
    label_of, labels, member,
};
use harness::contenders::{
    Contender, fast_timing, idle, lease, spawn_publishing, unique_lease, until_leading,
};
use harness::timings::{SIX_SECOND_TERM, TEN_SECOND_TERM};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use leasehold::elector::Elector;
use leasehold::k8s::{self, Publisher};
use testbed::fake_api::{FakeApiServer, Recorded};
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::eventually;
use tokio_util::sync::CancellationToken;

/// The annotation that orders a ReplicaSet's scale-down.
const COST: &str = "controller.kubernetes.io/pod-deletion-cost";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_label_mirror_and_events_follow_leadership() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    let pods = ["web-7d4f-a", "web-7d4f-b", "web-7d4f-c"];
    deployment_with_pods(&api, &pods);
    // A stale label from an earlier leader, on a pod whose deletion cost its owner chose.
    let mut stale = api.get::<Pod>(NS, "web-7d4f-c").unwrap();
    stale.labels_mut().insert(LABEL.into(), "true".into());
    stale.annotations_mut().insert(COST.into(), "250".into());
    api.insert(&stale);
    let lease_name = format!("{NS}/web");
    let lease_name = unique_lease(&lease_name).replace("test/", "");
    let timing = fast_timing();

    let mut a = member(&api, &redis, &lease_name, "web-7d4f-a", timing).await;
    a.wait_leading().await;
    eventually("the label on a alone", Duration::from_secs(5), || async {
        (label_of(&api, "web-7d4f-a").as_deref() == Some("true")
            && label_of(&api, "web-7d4f-b").is_none()
            && label_of(&api, "web-7d4f-c").is_none())
        .then_some(())
    })
    .await;
    assert_eq!(
        label_of(&api, "other-app-1").as_deref(),
        Some("true"),
        "another app's pod is left alone"
    );
    let cost = |pod: &str| {
        api.get::<Pod>(NS, pod)
            .and_then(|p| p.annotations().get(COST).cloned())
    };
    assert_eq!(
        cost("web-7d4f-a").as_deref(),
        Some("1000"),
        "the leader's cost"
    );
    assert_eq!(
        cost("web-7d4f-c").as_deref(),
        Some("250"),
        "a cost its owner chose"
    );
    let mirror = eventually("the Lease mirror", Duration::from_secs(5), || async {
        api.get::<Lease>(NS, "web")
    })
    .await;
    let spec = mirror.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("web-7d4f-a"));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());

    // Hand over to b: a shuts down (releases), b leads. b's pod carries its owner's cost, which
    // b's start (taking off a label an earlier process left) leaves alone.
    let mut owned = api.get::<Pod>(NS, "web-7d4f-b").unwrap();
    owned.annotations_mut().insert(COST.into(), "250".into());
    api.insert(&owned);
    let mut b = member(&api, &redis, &lease_name, "web-7d4f-b", timing).await;
    b.withdraw_earlier_label().await;
    assert_eq!(
        cost("web-7d4f-b").as_deref(),
        Some("250"),
        "a cost its owner chose"
    );
    a.stop().await;
    b.wait_leading().await;
    eventually("the label to move to b", Duration::from_secs(5), || async {
        (label_of(&api, "web-7d4f-b").as_deref() == Some("true")
            && label_of(&api, "web-7d4f-a").is_none())
        .then_some(())
    })
    .await;
    assert_eq!(
        cost("web-7d4f-a"),
        None,
        "the old leader's cost is taken off"
    );
    assert_eq!(
        cost("web-7d4f-c").as_deref(),
        Some("250"),
        "a cost its owner chose"
    );
    let spec = eventually("the mirror to name b", Duration::from_secs(5), || async {
        api.get::<Lease>(NS, "web")
            .and_then(|l| l.spec)
            .filter(|s| s.holder_identity.as_deref() == Some("web-7d4f-b"))
    })
    .await;
    assert_eq!(spec.lease_transitions, Some(1));
    b.stop().await;

    let events = api.list::<Event>(NS);
    let notes: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e.reason.clone().unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
            )
        })
        .collect();
    for (reason, who) in [
        ("LeaderElected", "web-7d4f-a became leader"),
        ("LeadershipLost", "web-7d4f-a stopped leading"),
        ("LeaderElected", "web-7d4f-b became leader"),
    ] {
        assert!(
            notes.iter().any(|(r, n)| r == reason && n.starts_with(who)),
            "no {reason} event for {who}: {notes:?}"
        );
    }
    let lost = notes.iter().find(|(r, _)| r == "LeadershipLost").unwrap();
    assert!(lost.1.ends_with(": shutdown"), "{lost:?}");
    for e in &events {
        let regarding = e.regarding.as_ref().unwrap();
        assert_eq!(regarding.kind.as_deref(), Some("Deployment"));
        assert_eq!(regarding.name.as_deref(), Some("web"));
        assert_eq!(e.reporting_controller.as_deref(), Some("leasehold"));
    }

    // Request shapes: label writes are JSON merge patches of metadata.labels only.
    let label_patches: Vec<Recorded> = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("/pods/"))
        .collect();
    assert!(!label_patches.is_empty());
    for p in &label_patches {
        assert_eq!(
            p.content_type.as_deref(),
            Some("application/merge-patch+json")
        );
        let body = p.body.as_ref().unwrap();
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["metadata"], "{body}");
        let meta: Vec<&String> = body["metadata"].as_object().unwrap().keys().collect();
        assert_eq!(
            meta,
            ["annotations", "labels"],
            "only the label and the deletion cost: {body}"
        );
        assert!(body["metadata"]["labels"].get(LABEL).is_some(), "{body}");
    }
    let lease_writes: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/leases"))
        .map(|r| r.method)
        .collect();
    assert!(
        lease_writes.iter().any(|m| m == "POST") && lease_writes.iter().any(|m| m == "PUT"),
        "{lease_writes:?}"
    );
    assert_within_rbac(&api);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_deployment_only_the_own_pod_is_labelled() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    for pod in ["solo", "neighbour"] {
        api.insert(&Pod {
            metadata: ObjectMeta {
                name: Some(pod.into()),
                namespace: Some(NS.into()),
                labels: Some(labels(&[(LABEL, "true")])),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        });
    }
    let timing = fast_timing();
    let lease_name = unique_lease("solo");
    let cluster = Publisher::new(
        api.client(),
        NS,
        "solo",
        &lease_name,
        None,
        kube_settings(),
        timing,
    )
    .expect("a mirror name");
    let elector = Elector::new(lease(&redis.url(), &lease_name, "solo", false), timing).unwrap();
    let mut status = elector.status();
    let shutdown = CancellationToken::new();
    let task = spawn_publishing(elector, &cluster, &shutdown);
    until_leading("leading", &mut status, Duration::from_secs(5)).await;
    // Give the reconcile loop its chance: the watcher lists, then the own pod is reconciled.
    eventually(
        "a watch on the own pod only",
        Duration::from_secs(5),
        || async {
            api.requests()
                .iter()
                .any(|r| {
                    r.path.ends_with("/pods")
                        && r.query_param("fieldSelector").as_deref() == Some("metadata.name=solo")
                })
                .then_some(())
        },
    )
    .await;
    // Without a Deployment nobody else takes this pod's label off: a failed removal is retried.
    api.fail_next_writes("pods", 3);
    shutdown.cancel();
    task.await.unwrap();
    cluster.flush(Duration::from_secs(5)).await;
    assert_eq!(label_of(&api, "solo"), None, "the label left with the term");
    assert_eq!(
        label_of(&api, "neighbour").as_deref(),
        Some("true"),
        "not ours to touch"
    );
    assert!(
        !api.requests()
            .iter()
            .any(|r| r.method == "PATCH" && r.path.ends_with("/neighbour")),
        "no write to the neighbour"
    );
    assert_within_rbac(&api);
}

/// Without a Deployment nobody else takes a former leader's label off, so its removal goes on
/// until it lands: here pod writes fail for longer than the 5 s the term's notes get. The label
/// was given up after those 5 s and stayed for good, the Service routing to two pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_deployment_a_former_leaders_label_comes_off_after_a_long_api_outage() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    for pod in ["solo-a", "solo-b"] {
        api.insert(&Pod {
            metadata: ObjectMeta {
                name: Some(pod.into()),
                namespace: Some(NS.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        });
    }
    let (timing, lease_name) = (fast_timing(), unique_lease("solo-outage"));
    let redis_addr = std::net::SocketAddr::from(([127, 0, 0, 1], redis.port()));
    // a reaches Redis through a proxy, cut below to end its term; b directly.
    let proxy = FaultProxy::start(redis_addr);
    let shutdown = CancellationToken::new();
    let mut tasks = Vec::new();
    let mut statuses = Vec::new();
    for (pod, url) in [("solo-a", proxy.url()), ("solo-b", redis.url())] {
        let publisher = Publisher::new(
            api.client(),
            NS,
            pod,
            &lease_name,
            None,
            kube_settings(),
            timing,
        )
        .expect("a mirror name");
        let elector = Elector::new(lease(&url, &lease_name, pod, false), timing).unwrap();
        statuses.push(elector.status());
        tasks.push(spawn_publishing(elector, &publisher, &shutdown));
        if pod == "solo-a" {
            until_leading("a leading", &mut statuses[0], Duration::from_secs(5)).await;
            eventually("a's label", Duration::from_secs(5), || async {
                label_of(&api, "solo-a").map(|_| ())
            })
            .await;
        }
    }
    api.fail_next_writes("pods", 40);
    proxy.set(Fault::Drop);
    until_leading("b leading", &mut statuses[1], Duration::from_secs(10)).await;
    eventually(
        "a's label off once the API takes writes again",
        Duration::from_secs(40),
        || async { label_of(&api, "solo-a").is_none().then_some(()) },
    )
    .await;
    shutdown.cancel();
    for task in tasks {
        task.await.unwrap();
    }
}

/// A Kubernetes API that stops answering holds up neither the step-down nor the release: the
/// term's Kubernetes work (an Event first) ends when the term does, after a grace of 1 s for its
/// calls in flight, and a follower leads then, not when the 10 s lease would have run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_api_holds_up_neither_the_step_down_nor_the_release() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    let pods = ["web-7d4f-a", "web-7d4f-b"];
    deployment_with_pods(&api, &pods);
    let upstream = api.url().trim_start_matches("http://").parse();
    let proxy = FaultProxy::start(upstream.expect("the fake API server's address"));
    let through_proxy = format!("http://{}", proxy.addr()).parse().expect("a URI");
    let silent = kube::Client::try_from(kube::Config::new(through_proxy)).expect("a client");
    let deployment = k8s::owning_deployment(&api.client(), NS, pods[0])
        .await
        .expect("discovery");
    let (timing, lease_name) = (TEN_SECOND_TERM, unique_lease("silent-api"));
    let settings = kube_settings();
    let cluster = Publisher::new(
        silent,
        NS,
        pods[0],
        &lease_name,
        Some(deployment),
        settings,
        timing,
    )
    .expect("a mirror name");
    proxy.set(Fault::Blackhole);
    let elector = Elector::new(lease(&redis.url(), &lease_name, pods[0], false), timing).unwrap();
    let mut status = elector.status();
    let shutdown = CancellationToken::new();
    let task = spawn_publishing(elector, &cluster, &shutdown);
    until_leading("a to lead", &mut status, Duration::from_secs(5)).await;
    let follower = lease(&redis.url(), &lease_name, pods[1], false);
    let mut b = Contender::spawn(follower, timing, idle);
    shutdown.cancel();
    until_leading("b to lead", &mut b.status, Duration::from_secs(6)).await;
    task.await.unwrap();
    b.shutdown().await;
}

/// A label write the API refuses every time (a Role without `patch` on pods) is retried less and
/// less often while the term lasts, not at a fixed pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_label_write_is_retried_less_and_less_often() {
    let lease_name = unique_lease("shop-web-refused").replace("test/", "");
    let patched = |r: &Recorded| r.method == "PATCH" && r.path.ends_with("/pods/web-7d4f-a");
    let (gaps, timing) = gaps_between_refused_writes("pods", &lease_name, patched).await;
    assert!(
        gaps[3] >= 4 * timing.retry_period,
        "the retry period, doubling: {gaps:?}"
    );
}

/// Failures that may pass (conflicts) are retried after the retry period for every pod, whatever
/// failed on the others: a backoff shared by all the pods would leave a stale label on the last
/// one for seconds, and the Service routing to two pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_label_write_on_one_pod_does_not_slow_the_others() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    let pods = [
        "web-7d4f-a",
        "web-7d4f-b",
        "web-7d4f-c",
        "web-7d4f-d",
        "web-7d4f-e",
    ];
    deployment_with_pods(&api, &pods);
    for stale in &pods[1..] {
        let mut pod = api.get::<Pod>(NS, stale).unwrap();
        pod.labels_mut().insert(LABEL.into(), "true".into());
        api.insert(&pod);
    }
    let lease_name = unique_lease("shop-web-blip").replace("test/", "");
    api.fail_next_writes("pods", 4);
    let timing = SIX_SECOND_TERM;
    let mut a = member(&api, &redis, &lease_name, "web-7d4f-a", timing).await;
    a.wait_leading().await;
    eventually("the stale labels off", Duration::from_secs(10), || async {
        pods[1..]
            .iter()
            .all(|pod| label_of(&api, pod).is_none())
            .then_some(())
    })
    .await;
    for pod in &pods[1..] {
        let path = format!("/pods/{pod}");
        let gaps = gaps_between(&api, |r| r.method == "PATCH" && r.path.ends_with(&path));
        assert!(
            gaps.iter().all(|gap| *gap < 2 * timing.retry_period),
            "{pod}: {gaps:?}"
        );
    }
    a.stop().await;
}
