//! The Kubernetes side of the operator commands against the in-process fake API server: the
//! step-down annotation on the leader's pod (acted on, then removed), and a lock's name found
//! from its pod's Job and CronJob, with every request within the RBAC list.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::calls::assert_within_rbac;
use crate::fixtures::NS;
use harness::contenders::{
    Contender, fast_timing, idle, lease, spawn_publishing, unique_lease, until_leading,
};
use harness::timings::THREE_SECOND_TERM;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use leasehold::elector::{Elector, Leadership, Status, StepDownReason, Timing};
use leasehold::k8s::{self, K8sError, OwningJob, Publisher, STEP_DOWN_ANNOTATION};
use leasehold::k8s::{KubeSettings, KubernetesMode};
use testbed::RedisServer;
use testbed::fake_api::FakeApiServer;
use testbed::wait::{eventually, until};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

fn pod(name: &str, owners: Vec<OwnerReference>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

fn controller(kind: &str, api_version: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A Redis, the fake API with `pods`, a lease for `test`, and `web-a`'s publisher with the
/// step-down annotation alone (no label, mirror or Events).
async fn web_a(test: &str, pods: &[&str]) -> (RedisServer, FakeApiServer, String, Publisher) {
    let (redis, api) = (RedisServer::start(), FakeApiServer::start().await);
    for name in pods {
        api.insert(&pod(name, vec![]));
    }
    let settings = KubeSettings {
        mode: KubernetesMode::On,
        leader_label: None,
        lease_mirror: false,
        events: false,
    };
    let name = unique_lease(test);
    let publisher = Publisher::new(
        api.client(),
        NS,
        "web-a",
        &name,
        None,
        settings,
        fast_timing(),
    )
    .expect("a publisher");
    (redis, api, name, publisher)
}

/// `web-a` contending through `publisher` until it leads: its status, shutdown and task.
async fn web_a_leads(
    redis: &RedisServer,
    name: &str,
    publisher: &Publisher,
    timing: Timing,
) -> (watch::Receiver<Status>, CancellationToken, JoinHandle<()>) {
    let elector = Elector::new(lease(&redis.url(), name, "web-a", false), timing).unwrap();
    let mut status = elector.status();
    let shutdown = CancellationToken::new();
    let task = spawn_publishing(elector, publisher, &shutdown);
    until_leading("web-a to lead", &mut status, Duration::from_secs(5)).await;
    (status, shutdown, task)
}

/// Waits until web-a (its status `a`) hands over, as the annotation asked, and `c` leads: a `c`
/// that started late may first wait out a lease duration, so its bound leaves room for a loaded
/// machine (5 s timed out once, under a load average of 3).
async fn hands_over_to_web_c(a: &mut watch::Receiver<Status>, c: &Contender) {
    let stepped = until("web-a to hand over", a, Duration::from_secs(5), |s| {
        s.last_step_down.is_some()
    })
    .await;
    let step = stepped.last_step_down.expect("a step-down");
    assert_eq!(step.reason, StepDownReason::Handover);
    assert_eq!(step.detail.as_deref(), Some("handing over to web-c"));
    let mut c_status = c.status.clone();
    until_leading("web-c to lead", &mut c_status, Duration::from_secs(15)).await;
}

/// Waits until a watch of web-a's own pod (the step-down annotation's) has listed it.
async fn watched_own_pod(api: &FakeApiServer) {
    eventually("a watch on web-a's pod", Duration::from_secs(5), || async {
        api.requests()
            .iter()
            .any(|r| r.query_param("fieldSelector").as_deref() == Some("metadata.name=web-a"))
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_down_annotation_hands_over_to_the_named_replica_and_is_removed() {
    let (redis, api, name, cluster) = web_a("annotation", &["web-a", "web-b", "web-c"]).await;
    let timing = fast_timing();
    let (mut a, shutdown, task) = web_a_leads(&redis, &name, &cluster, timing).await;
    let b = Contender::spawn(lease(&redis.url(), &name, "web-b", false), timing, idle);
    let c = Contender::spawn(lease(&redis.url(), &name, "web-c", false), timing, idle);
    // Give the leader's watch on its own pod its first list, then annotate.
    watched_own_pod(&api).await;
    let mut annotated: Pod = api.get(NS, "web-a").expect("web-a");
    annotated
        .annotations_mut()
        .insert(STEP_DOWN_ANNOTATION.into(), "web-c".into());
    api.insert(&annotated);
    hands_over_to_web_c(&mut a, &c).await;
    assert!(!b.is_leader(), "the reservation was web-c's");
    let after: Pod = api.get(NS, "web-a").expect("web-a");
    assert!(
        !after.annotations().contains_key(STEP_DOWN_ANNOTATION),
        "the annotation is removed: {:?}",
        after.annotations()
    );
    assert_within_rbac(&api);
    shutdown.cancel();
    let _ = task.await;
    b.shutdown().await;
    c.shutdown().await;
}

/// A removal of the annotation that lands but is never answered (given up after the call's
/// bound) still hands over: the request is kept until the pod shows the annotation again or
/// gone. It was lost: the next reconcile found no annotation, and nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_of_the_annotation_that_lands_unanswered_still_hands_over() {
    let (redis, api, name, cluster) = web_a("annotation-unanswered", &["web-a", "web-c"]).await;
    let timing = fast_timing();
    let (mut a, shutdown, task) = web_a_leads(&redis, &name, &cluster, timing).await;
    let c = Contender::spawn(lease(&redis.url(), &name, "web-c", false), timing, idle);
    watched_own_pod(&api).await;
    // The publisher keeps no label: the removal is the one write to pods. A read of the pod
    // after it fails too, as it may from an API server that slow.
    api.hang_next_writes_after_applying("pods", 1);
    api.fail_next_reads("pods", 1);
    let mut annotated: Pod = api.get(NS, "web-a").expect("web-a");
    annotated
        .annotations_mut()
        .insert(STEP_DOWN_ANNOTATION.into(), "web-c".into());
    api.insert(&annotated);
    let stepped = until("web-a to hand over", &mut a, Duration::from_secs(15), |s| {
        s.last_step_down.is_some()
    })
    .await;
    assert_eq!(
        stepped.last_step_down.expect("a step-down").reason,
        StepDownReason::Handover
    );
    shutdown.cancel();
    let _ = task.await;
    c.shutdown().await;
}

/// A reconcile that starts after its term ended (a pause past the validity deadline, before the
/// watchdog steps down) leaves the request for the replica's next term instead of using it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_term_leaves_the_step_down_annotation_to_the_next() {
    let (redis, api, name, cluster) = web_a("annotation-ended", &["web-a", "web-c"]).await;
    // The request is there before web-a's next term begins, so web-a hands over at once, maybe
    // before web-c's first try: web-c has the reservation (two retry periods), then web-a's
    // hold-off (a lease duration), to start. FAST gives 300 ms and 1 s: on a loaded CI machine
    // web-c once never led (web-a, it seems, took the lease back first).
    let timing = THREE_SECOND_TERM;
    // web-a's first term, ended.
    let (terms, mut taken) = tokio::sync::mpsc::unbounded_channel();
    let first = Contender::spawn(
        lease(&redis.url(), &name, "web-a", false),
        timing,
        move |l: Leadership| {
            let _ = terms.send(l.clone());
            async move {
                l.lost().await;
                Ok::<(), String>(())
            }
        },
    );
    let ended = tokio::time::timeout(Duration::from_secs(5), taken.recv())
        .await
        .expect("web-a leads within 5 s")
        .expect("a term");
    first.shutdown().await;
    assert!(ended.check().is_err(), "the first term has ended");
    let mut annotated: Pod = api.get(NS, "web-a").expect("web-a");
    annotated
        .annotations_mut()
        .insert(STEP_DOWN_ANNOTATION.into(), "web-c".into());
    api.insert(&annotated);
    // The ended term's work still runs, and lists the pod.
    let late = CancellationToken::new();
    let late_work = tokio::spawn({
        let (cluster, late) = (cluster.clone(), late.clone());
        async move { cluster.lead(ended, late).await }
    });
    watched_own_pod(&api).await;
    // web-a's next term takes the request up.
    let (mut a, shutdown, task) = web_a_leads(&redis, &name, &cluster, timing).await;
    let c = Contender::spawn(lease(&redis.url(), &name, "web-c", false), timing, idle);
    hands_over_to_web_c(&mut a, &c).await;
    late.cancel();
    let _ = late_work.await;
    shutdown.cancel();
    let _ = task.await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_in_a_jobs_pod_is_named_after_its_cronjob_or_its_job() {
    let api = FakeApiServer::start().await;
    let job = |name: &str, owners: Vec<OwnerReference>| Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            owner_references: Some(owners),
            labels: Some(BTreeMap::new()),
            ..ObjectMeta::default()
        },
        ..Job::default()
    };
    api.insert(&job(
        "nightly-29000000",
        vec![controller("CronJob", "batch/v1", "nightly")],
    ));
    api.insert(&job("migrate", vec![]));
    api.insert(&pod(
        "nightly-29000000-x7k2p",
        vec![controller("Job", "batch/v1", "nightly-29000000")],
    ));
    api.insert(&pod(
        "migrate-q9z",
        vec![controller("Job", "batch/v1", "migrate")],
    ));
    api.insert(&pod("loose", vec![]));
    let client = api.client();
    let cron = k8s::owning_job(&client, NS, "nightly-29000000-x7k2p")
        .await
        .unwrap();
    assert_eq!(cron, OwningJob::CronJob("nightly".into()));
    assert_eq!(cron.lease_name(NS), "shop/cronjob/nightly");
    let job = k8s::owning_job(&client, NS, "migrate-q9z").await.unwrap();
    assert_eq!(job.lease_name(NS), "shop/job/migrate");
    let loose = k8s::owning_job(&client, NS, "loose").await.unwrap_err();
    assert!(matches!(loose, K8sError::NotAJob { .. }), "{loose}");
    assert!(loose.to_string().contains("pass --lease-name"), "{loose}");
    assert_within_rbac(&api);
}
