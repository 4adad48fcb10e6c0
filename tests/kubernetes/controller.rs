//! The Kubernetes parts against the in-process fake API server, with kube's own client and
//! Controller unmodified: Deployment discovery, the leader label, the Lease mirror, Events, the
//! shape of every request against the RBAC list, and the binary end to end through a kubeconfig.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::calls::{assert_within_rbac, rbac_of};
use harness::contenders::{fast_timing, lease, spawn_publishing, unique_lease, until_leading};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::ResourceExt;
use leasehold::cli::LeaseSource;
use leasehold::cmd::lease::{Workload, name_lease};
use leasehold::elector::{Elector, Timing};
use leasehold::k8s::{self, K8sError, Publisher};
use leasehold::k8s::{KubeSettings, KubernetesMode};
use leasehold::lease::LeaseName;
use testbed::fake_api::{FakeApiServer, Recorded};
use testbed::redis_server::RedisServer;
use testbed::wait::eventually;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const NS: &str = "shop";
const LABEL: &str = "leasehold.io/leader";

fn owner(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The labels the chart gives its objects (release `web`).
fn chart_labels() -> BTreeMap<String, String> {
    labels(&[
        ("app.kubernetes.io/instance", "web"),
        ("app.kubernetes.io/managed-by", "Helm"),
        ("app.kubernetes.io/name", "leasehold"),
        ("helm.sh/chart", "leasehold-0.2.0"),
    ])
}

/// A Deployment `web` (with the chart's labels) with a ReplicaSet and `pods` owned the way the
/// controllers own them.
fn deployment_with_pods(api: &FakeApiServer, pods: &[&str]) -> Deployment {
    let deployment = api.insert(&Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some(NS.into()),
            labels: Some(chart_labels()),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec::default(),
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    });
    let rs = api.insert(&ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web-7d4f".into()),
            namespace: Some(NS.into()),
            owner_references: Some(vec![owner(
                "Deployment",
                "apps/v1",
                "web",
                &deployment.uid().unwrap(),
            )]),
            ..ObjectMeta::default()
        },
        ..ReplicaSet::default()
    });
    for pod in pods {
        api.insert(&Pod {
            metadata: ObjectMeta {
                name: Some((*pod).into()),
                namespace: Some(NS.into()),
                labels: Some(labels(&[("app", "web"), ("pod-template-hash", "7d4f")])),
                owner_references: Some(vec![owner(
                    "ReplicaSet",
                    "apps/v1",
                    "web-7d4f",
                    &rs.uid().unwrap(),
                )]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        });
    }
    // A pod of another app that happens to carry the label: never ours to touch.
    api.insert(&Pod {
        metadata: ObjectMeta {
            name: Some("other-app-1".into()),
            namespace: Some(NS.into()),
            labels: Some(labels(&[("app", "other"), (LABEL, "true")])),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    });
    deployment
}

fn label_of(api: &FakeApiServer, pod: &str) -> Option<String> {
    api.get::<Pod>(NS, pod)
        .and_then(|p| p.labels().get(LABEL).cloned())
}

fn kube_settings() -> KubeSettings {
    KubeSettings {
        mode: KubernetesMode::On,
        leader_label: Some(LABEL.into()),
        lease_mirror: true,
        events: true,
    }
}

/// An elector for `pod` whose work is the Kubernetes parts, on its own redis lease.
struct Member {
    status: watch::Receiver<leasehold::elector::Status>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    cluster: Publisher,
}

async fn member(
    api: &FakeApiServer,
    redis: &RedisServer,
    lease_name: &str,
    pod: &str,
    timing: Timing,
) -> Member {
    let deployment = k8s::owning_deployment(&api.client(), NS, pod)
        .await
        .expect("discovery");
    let cluster = Publisher::new(
        api.client(),
        NS,
        pod,
        lease_name,
        Some(deployment),
        kube_settings(),
        timing,
    )
    .expect("a mirror name");
    let elector = Elector::new(lease(&redis.url(), lease_name, pod, false), timing).unwrap();
    let status = elector.status();
    let shutdown = CancellationToken::new();
    let task = spawn_publishing(elector, &cluster, &shutdown);
    Member {
        status,
        shutdown,
        task,
        cluster,
    }
}

impl Member {
    async fn wait_leading(&mut self) {
        until_leading("leadership", &mut self.status, Duration::from_secs(5)).await;
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("elector stops")
            .expect("elector task");
        self.cluster.flush(Duration::from_secs(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_named_after_the_owning_deployment() {
    let api = FakeApiServer::start().await;
    let deployment = deployment_with_pods(&api, &["web-7d4f-a"]);
    let found = k8s::owning_deployment(&api.client(), NS, "web-7d4f-a")
        .await
        .unwrap();
    assert_eq!(found.name, "web");
    assert_eq!(found.selector, "app=web");
    assert_eq!(found.reference.uid, deployment.uid());
    assert_eq!(found.reference.kind.as_deref(), Some("Deployment"));

    let source = LeaseSource::OwningWorkload {
        namespace: NS.into(),
        pod: "web-7d4f-a".into(),
    };
    let (name, _) = name_lease(&source, Some(&api.client()), Workload::Deployment)
        .await
        .unwrap();
    assert_eq!(name, LeaseName::new("shop/web").unwrap());
    // Exactly the calls discovery needs: pod → replicaset → deployment, all `get`.
    let calls: Vec<(String, String, String)> = api.requests().iter().map(rbac_of).collect();
    let distinct: std::collections::BTreeSet<_> = calls.into_iter().collect();
    let want: std::collections::BTreeSet<_> = [
        ("", "pods"),
        ("apps", "replicasets"),
        ("apps", "deployments"),
    ]
    .iter()
    .map(|(g, r)| (g.to_string(), r.to_string(), "get".to_string()))
    .collect();
    assert_eq!(distinct, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_no_deployment_owns_is_a_clear_error() {
    let api = FakeApiServer::start().await;
    api.insert(&Pod {
        metadata: ObjectMeta {
            name: Some("db-0".into()),
            namespace: Some(NS.into()),
            owner_references: Some(vec![owner("StatefulSet", "apps/v1", "db", "u-1")]),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    });
    let err = k8s::owning_deployment(&api.client(), NS, "db-0")
        .await
        .unwrap_err();
    assert!(matches!(err, K8sError::NotADeployment { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "pod shop/db-0 is not owned by a Deployment (StatefulSet db); pass --lease-name"
    );
    let missing = k8s::owning_deployment(&api.client(), NS, "nope")
        .await
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("kubernetes API: get pod shop/nope:"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_label_mirror_and_events_follow_leadership() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    let pods = ["web-7d4f-a", "web-7d4f-b", "web-7d4f-c"];
    deployment_with_pods(&api, &pods);
    // A stale label from an earlier leader.
    let mut stale = api.get::<Pod>(NS, "web-7d4f-c").unwrap();
    stale.labels_mut().insert(LABEL.into(), "true".into());
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
    let mirror = eventually("the Lease mirror", Duration::from_secs(5), || async {
        api.get::<Lease>(NS, "web")
    })
    .await;
    let spec = mirror.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("web-7d4f-a"));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());

    // Hand over to b: a shuts down (releases), b leads.
    let mut b = member(&api, &redis, &lease_name, "web-7d4f-b", timing).await;
    a.stop().await;
    b.wait_leading().await;
    eventually("the label to move to b", Duration::from_secs(5), || async {
        (label_of(&api, "web-7d4f-b").as_deref() == Some("true")
            && label_of(&api, "web-7d4f-a").is_none())
        .then_some(())
    })
    .await;
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
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    let deployment = deployment_with_pods(&api, &["web-7d4f-a", "web-7d4f-b"]);
    let lease_name = unique_lease("shop-web-owned").replace("test/", "shop/");
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
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    let lease_name = unique_lease("shop-web-conflict").replace("test/", "shop/");
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

#[test]
fn the_binary_names_its_lease_after_its_deployment_and_labels_the_leader() {
    use harness::replica::{FAST, Replica};
    use testbed::wait::wait_for;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let api = runtime.block_on(FakeApiServer::start());
    let api = Arc::new(api);
    deployment_with_pods(&api, &["web-7d4f-a", "web-7d4f-b"]);
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = api.write_kubeconfig(dir.path(), NS);
    let config = config.to_str().unwrap().to_owned();
    let mut args = FAST.to_vec();
    args.extend(["--no-data-loss-cooldown", "--kubernetes", "on"]);
    let spawn = |pod: &str| {
        Replica::spawn_with_env(
            &redis.url(),
            "",
            pod,
            &args,
            &[],
            &[
                ("KUBECONFIG", config.as_str()),
                ("POD_NAME", pod),
                ("POD_NAMESPACE", NS),
            ],
        )
    };
    let a = spawn("web-7d4f-a");
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    assert_eq!(
        a.leader()["lease"],
        "shop/web",
        "named after the Deployment"
    );
    assert_eq!(a.leader()["lease_key"], "leasehold:{shop/web}");
    let b = spawn("web-7d4f-b");
    wait_for("b to follow a", Duration::from_secs(5), || {
        (b.leader()["leader"] == "web-7d4f-a").then_some(())
    });
    wait_for("the label on a", Duration::from_secs(5), || {
        (label_of(&api, "web-7d4f-a").as_deref() == Some("true")).then_some(())
    });
    assert!(
        wait_for("the mirror", Duration::from_secs(5), || api
            .get::<Lease>(NS, "web"))
        .spec
        .is_some()
    );
    drop(a);
    wait_for(
        "b to lead and carry the label",
        Duration::from_secs(5),
        || (b.is_ready() && label_of(&api, "web-7d4f-b").as_deref() == Some("true")).then_some(()),
    );
    assert_within_rbac(&api);
    drop(b);
    drop(runtime);
}
