//! What the tests of the controller's parts share: a Deployment `web` in the fake API server as
//! the controllers build it (its ReplicaSet and pods, with the chart's labels, beside another
//! app's pod that carries the leader label), a pod's leader label, the Kubernetes settings with
//! every part on, and a member: an elector for one pod whose work is the Kubernetes parts.

use std::collections::BTreeMap;
use std::time::Duration;

use harness::contenders::{lease, spawn_publishing, until_leading};
use harness::timings::SIX_SECOND_TERM;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::ResourceExt;
use leasehold::elector::{Elector, Timing};
use leasehold::k8s::{self, Publisher};
use leasehold::k8s::{KubeSettings, KubernetesMode};
use testbed::fake_api::{FakeApiServer, Recorded};
use testbed::redis_server::RedisServer;
use testbed::wait::eventually;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub const NS: &str = "shop";
pub const LABEL: &str = "leasehold.io/leader";

pub fn owner(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The labels the chart gives its objects (release `web`).
pub fn chart_labels() -> BTreeMap<String, String> {
    labels(&[
        ("app.kubernetes.io/instance", "web"),
        ("app.kubernetes.io/managed-by", "Helm"),
        ("app.kubernetes.io/name", "leasehold"),
        ("helm.sh/chart", "leasehold-0.2.0"),
    ])
}

/// A Deployment `web` (with the chart's labels) with a ReplicaSet and `pods` owned the way the
/// controllers own them.
pub fn deployment_with_pods(api: &FakeApiServer, pods: &[&str]) -> Deployment {
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

/// A leader, `web-7d4f-a` of `lease_name`, whose writes of `plural` the API refuses every time
/// (a Role without the verb), for a term that outlasts the test on a loaded machine (a new one
/// would count again): the gaps between the first five of its requests that `which` picks, and
/// its timing.
pub async fn gaps_between_refused_writes(
    plural: &str,
    lease_name: &str,
    which: impl Fn(&Recorded) -> bool,
) -> (Vec<Duration>, Timing) {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    api.forbid_next_writes(plural, 1000);
    let timing = SIX_SECOND_TERM;
    let mut a = member(&api, &redis, lease_name, "web-7d4f-a", timing).await;
    a.wait_leading().await;
    let gaps = eventually("five refused writes", Duration::from_secs(10), || async {
        let gaps = gaps_between(&api, &which);
        (gaps.len() >= 4).then_some(gaps)
    })
    .await;
    a.stop().await;
    (gaps, timing)
}

/// The times between the requests `api` received that `which` picks, in order.
pub fn gaps_between(api: &FakeApiServer, which: impl Fn(&Recorded) -> bool) -> Vec<Duration> {
    let times: Vec<_> = api
        .requests()
        .into_iter()
        .filter(which)
        .map(|r| r.at)
        .collect();
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

/// A fake API server for a test that runs the binary (blocking) beside it: the server runs on
/// the returned runtime, which must outlive it.
pub fn api_on_a_runtime() -> (tokio::runtime::Runtime, std::sync::Arc<FakeApiServer>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let api = std::sync::Arc::new(runtime.block_on(FakeApiServer::start()));
    (runtime, api)
}

pub fn label_of(api: &FakeApiServer, pod: &str) -> Option<String> {
    api.get::<Pod>(NS, pod)
        .and_then(|p| p.labels().get(LABEL).cloned())
}

pub fn kube_settings() -> KubeSettings {
    KubeSettings {
        mode: KubernetesMode::On,
        leader_label: Some(LABEL.into()),
        lease_mirror: true,
        events: true,
    }
}

/// An elector for `pod` whose work is the Kubernetes parts, on its own redis lease.
pub struct Member {
    status: watch::Receiver<leasehold::elector::Status>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    cluster: Publisher,
}

pub async fn member(
    api: &FakeApiServer,
    redis: &RedisServer,
    lease_name: &str,
    pod: &str,
    timing: Timing,
) -> Member {
    member_at(api, &redis.url(), lease_name, pod, timing).await
}

/// A [`member`] that reaches Redis at `url` (a fault proxy's).
pub async fn member_at(
    api: &FakeApiServer,
    url: &str,
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
    let elector = Elector::new(lease(url, lease_name, pod, false), timing).unwrap();
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
    /// What `leasehold run` does at start: a label an earlier process of the pod left goes.
    pub async fn withdraw_earlier_label(&self) {
        self.cluster.withdraw_earlier_label().await;
    }

    pub fn status(&self) -> watch::Receiver<leasehold::elector::Status> {
        self.status.clone()
    }

    pub async fn wait_leading(&mut self) {
        until_leading("leadership", &mut self.status, Duration::from_secs(5)).await;
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("elector stops")
            .expect("elector task");
        self.cluster.flush(Duration::from_secs(5)).await;
    }
}
