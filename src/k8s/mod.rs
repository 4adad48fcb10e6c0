//! The Kubernetes side: while this replica leads, keep the leader label on its pod (and off
//! the Deployment's other pods), mirror leadership into a `coordination.k8s.io/v1` Lease, and
//! record Events on the Deployment. Every leader write first passes `Leadership::check()`.
//!
//! Three writes happen after a term ended, by design: removing the label from this replica's
//! own pod, its name from the Lease mirror, and the "leadership lost" Event. Each only withdraws
//! a claim, so none can make two leaders; they run in the background so that they never delay
//! the release of the lease.
//!
//! Rust users run their own reconciler under leadership with [`reconcile_while_leading`].

mod client;
mod discover;
mod handover;
mod job;
mod label;
mod mirror;
pub mod names;
pub mod rbac;
mod settings;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::runtime::controller::{self, Action};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use leasehold_core::locked::locked;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

pub use client::connect;
use client::{call, watch_config};
pub use discover::{OwningDeployment, owning_deployment};
pub use handover::STEP_DOWN_ANNOTATION;
pub use job::{OwningJob, owning_job};
pub use settings::{KubeSettings, KubernetesMode};

use crate::elector::{Leadership, NotLeader, Timing, backoff};

/// A failure on the Kubernetes side.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// Mode `on`, but no cluster configuration was found.
    #[error("no cluster configuration found (no in-cluster service account, no kubeconfig): {0}")]
    NoCluster(String),
    /// A client could not be built from the configuration.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// An API call failed.
    #[error("kubernetes API: {what}: {source}")]
    Api {
        /// The call.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// An API call got no answer within its bound (5 s).
    #[error("kubernetes API: {what}: no answer within {after:?}")]
    Unanswered {
        /// The call.
        what: String,
        /// The bound.
        after: Duration,
    },
    /// The pod is not part of a Deployment, so the lease cannot be named after one.
    #[error("pod {pod} is not owned by a Deployment ({owners}); pass --lease-name")]
    NotADeployment {
        /// The pod.
        pod: String,
        /// What owns it.
        owners: String,
    },
    /// A one-shot lock without --lease-name runs in a pod that no Job owns.
    #[error(
        "pod {pod} is not owned by a Job, so the lock cannot be named after it; pass --lease-name"
    )]
    NotAJob {
        /// The pod.
        pod: String,
    },
    /// The Lease mirror is on, and neither a Deployment nor the lease name gives it a valid
    /// object name (without a Deployment, the lease name after its namespace, `/` as `.`).
    #[error(
        "the Lease mirror is named after it, and `{name}` {}; pass --no-lease-mirror to keep no mirror",
        names::DNS_SUBDOMAIN_RULE
    )]
    NoMirrorName {
        /// The lease name.
        lease: String,
        /// The name the mirror would take.
        name: String,
    },
    /// `Leadership::check` refused a leader write.
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
}

/// What a reconciler gets: the leadership of the current term, and its own context.
pub struct LeaderContext<C> {
    /// Check it before every write.
    pub leadership: Leadership,
    /// The reconciler's own context.
    pub inner: C,
}

/// Runs a kube `Controller` over `api` for as long as this term lasts (until `stop` is
/// cancelled); each reconcile gets a [`LeaderContext`] whose `leadership.check()` it must pass
/// before it writes. A failed reconcile is retried after `retry`; one the API refuses
/// ([`refused`]: a Role without the verb) again and again backs off, per object ([`backoff`]).
pub async fn reconcile_while_leading<K, C, R, Fut, E>(
    leadership: Leadership,
    stop: CancellationToken,
    api: Api<K>,
    watcher_config: watcher::Config,
    reconcile: R,
    inner: C,
    retry: Duration,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    R: FnMut(Arc<K>, Arc<LeaderContext<C>>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let context = Arc::new(LeaderContext { leadership, inner });
    let stopped = stop.clone();
    // Failures in a row, by object; a reconcile of it that passes starts its count again.
    let failures: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let counted = failures.clone();
    // Lists and watches failed in a row: the watcher retries them with its own backoff.
    let mut watch_failures = 0u32;
    let mut reconcile = reconcile;
    let reconcile = move |object: Arc<K>, context| {
        let (key, counted) = (object.name_any(), counted.clone());
        let outcome = reconcile(object, context);
        async move {
            let outcome = outcome.await;
            if outcome.is_ok() {
                locked(&counted).remove(&key);
            }
            outcome
        }
    };
    Controller::new(api, watcher_config)
        .graceful_shutdown_on(async move { stopped.cancelled().await })
        .run(
            reconcile,
            move |object, error, _ctx| {
                let object = object.name_any();
                let failed = {
                    let mut failures = locked(&failures);
                    let count = failures.entry(object.clone()).or_default();
                    *count = count.saturating_add(1);
                    *count
                };
                // Said, not only logged at debug: a leader label that never lands leaves the
                // Service without an endpoint. The first failure in a row and every tenth.
                if failed == 1 || failed.is_multiple_of(10) {
                    warn!(%object, error = %error, failed, "a kubernetes write failed; retrying");
                } else {
                    debug!(%object, error = %error, failed, "a kubernetes write failed; retrying");
                }
                Action::requeue(backoff(retry, if refused(error) { failed } else { 1 }))
            },
            context,
        )
        .for_each(move |outcome| {
            match outcome {
                Ok(_) => watch_failures = 0,
                // Said like a failed write: a list or watch that keeps failing (a Role without
                // the verb) leaves nothing to reconcile, the label unset, for the whole term.
                Err(controller::Error::QueueError(error)) => {
                    watch_failures = watch_failures.saturating_add(1);
                    let (resource, failed) = (K::plural(&()), watch_failures);
                    if failed == 1 || failed.is_multiple_of(10) {
                        warn!(%resource, %error, failed, "a kubernetes watch failed; retrying");
                    } else {
                        debug!(%resource, %error, failed, "a kubernetes watch failed; retrying");
                    }
                }
                Err(err) => debug!(error = %err, "reconcile loop error"),
            }
            std::future::ready(())
        })
        .await;
}

/// Whether `error`, or an error it wraps, is the API's refusal of the caller (401, 403): asking
/// again soon cannot help until someone changes a Role.
pub fn refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(kube::Error::Api(status)) = error.downcast_ref::<kube::Error>() {
            return status.is_forbidden() || status.code == 401;
        }
        next = error.source();
    }
    false
}

/// Sends a term's step-down notes when dropped.
struct AfterTerm {
    publisher: Publisher,
    leadership: Leadership,
}

impl Drop for AfterTerm {
    fn drop(&mut self) {
        // Spawning needs a runtime; at process teardown there may be none, and then there is
        // nobody left to note anything to.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.publisher.after_term(self.leadership.clone());
        }
    }
}

/// How long the leader's Kubernetes work may take to finish its calls in flight once its term is
/// over (the release of the lease waits for it).
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A replica's Kubernetes side: while it leads, publishes its leadership into Kubernetes (the
/// leader label on its pod, the mirrored Lease, Events), and withdraws it after the term.
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    namespace: String,
    identity: String,
    deployment: Option<OwningDeployment>,
    /// Name of the mirrored Lease, if mirroring is on and the name is usable.
    mirror_name: Option<String>,
    settings: KubeSettings,
    timing: Timing,
    reporter: Reporter,
    background: TaskTracker,
    /// Act on the step-down annotation of this pod while leading.
    handover_annotation: bool,
    /// Terms begun: a former term's label removal stops once a later one begins.
    terms: AtomicU64,
    /// This pod's uid, read at its first Event without a Deployment.
    pod_uid: tokio::sync::OnceCell<Option<String>>,
}

impl Publisher {
    /// The parts for pod `identity` in `namespace`. `deployment` is the owning Deployment when
    /// it is known: without it, the label is only kept on this pod, events are recorded on the
    /// pod, and the Lease mirror is named after the lease (refused when that is no object name).
    pub fn new(
        client: Client,
        namespace: &str,
        identity: &str,
        lease_name: &str,
        deployment: Option<OwningDeployment>,
        settings: KubeSettings,
        timing: Timing,
    ) -> Result<Self, K8sError> {
        let mirror_name = settings
            .lease_mirror
            .then(|| mirror::lease_name(deployment.as_ref().map(|d| d.name.as_str()), lease_name))
            .transpose()?;
        let reporter = Reporter {
            controller: "leasehold".into(),
            instance: Some(identity.to_owned()),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                namespace: namespace.to_owned(),
                identity: identity.to_owned(),
                deployment,
                mirror_name,
                settings,
                timing,
                reporter,
                background: TaskTracker::new(),
                handover_annotation: true,
                terms: AtomicU64::new(0),
                pod_uid: tokio::sync::OnceCell::new(),
            }),
        })
    }

    /// Leaves the step-down annotation alone (a one-shot lock hands nothing over, and its Role
    /// need not list or patch pods).
    pub fn without_handover_annotation(mut self) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.handover_annotation = false;
        }
        self
    }

    /// Takes the leader label off this pod before any term, where an earlier process killed while
    /// it led left it (no other replica removes it without a Deployment). Bounded by a call.
    pub async fn withdraw_earlier_label(&self) {
        let inner = &self.inner;
        if let Some(key) = &inner.settings.leader_label {
            let remove = label::remove_own(inner, key, || true);
            let _ = tokio::time::timeout(inner.timing.call_timeout(), remove).await;
        }
    }

    /// The leader's Kubernetes work for one term; returns when `stop` is cancelled.
    pub async fn lead(&self, leadership: Leadership, stop: CancellationToken) {
        // The notes run however the term ends: also when the elector aborts work that did
        // not stop by the validity deadline (dropping this future).
        self.inner.terms.fetch_add(1, Ordering::Relaxed);
        let _notes = AfterTerm {
            publisher: self.clone(),
            leadership: leadership.clone(),
        };
        let inner = &self.inner;
        let token = leadership.token();
        let elected = async {
            if inner.settings.events && leadership.check().is_ok() {
                let note = format!("{} became leader (fencing token {token})", inner.identity);
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => {}
                    _ = self.event("LeaderElected", note) => {}
                }
            }
        };
        let labels = async {
            if let Some(key) = &inner.settings.leader_label {
                label::keep_on_leader(inner, key, leadership.clone(), stop.clone()).await;
            }
        };
        let lease = async {
            if let Some(name) = &inner.mirror_name {
                mirror::keep(inner, name, &leadership, &stop).await;
            }
        };
        let handover = async {
            if inner.handover_annotation {
                handover::watch_own_pod(inner, leadership.clone(), stop.clone()).await;
            }
        };
        // The parts end by themselves when the term does, the label loop once its writes in
        // flight are answered; what still waits on an API that does not answer is given up
        // after a grace: the elector waits for this work before it releases the lease.
        let parts = async { tokio::join!(elected, labels, lease, handover) };
        tokio::pin!(parts);
        let stopped = tokio::select! {
            _ = &mut parts => false,
            _ = stop.cancelled() => true,
        };
        if stopped {
            let _ = tokio::time::timeout(STOP_GRACE, parts).await;
        } else {
            // Nothing to keep (a lock with Events alone): the term goes on, and its notes wait
            // for its end.
            stop.cancelled().await;
        }
    }

    /// The notes of a term that ended, in the background: this pod's label off (until it
    /// lands or a later term begins), its name off the Lease mirror, and an Event (within 5 s).
    fn after_term(&self, leadership: Leadership) {
        let this = self.clone();
        let term = self.inner.terms.load(Ordering::Relaxed);
        self.inner.background.spawn(async move {
            let inner = &this.inner;
            // The parts may end before the elector ends the term (a command that exited): the
            // notes wait for its end, when its reason is set.
            leadership.lost().await;
            let label = async {
                if let Some(key) = &inner.settings.leader_label {
                    let still = || inner.terms.load(Ordering::Relaxed) == term;
                    label::remove_own(inner, key, still).await;
                }
            };
            let mirror = async {
                if let Some(name) = &inner.mirror_name {
                    let still = || inner.terms.load(Ordering::Relaxed) == term;
                    mirror::withdraw(inner, name, still).await;
                }
            };
            let event = async {
                if inner.settings.events {
                    let reason = leadership
                        .step_down_reason()
                        .map_or_else(|| "term ended".to_owned(), |r| r.to_string());
                    let note = format!(
                        "{} stopped leading (fencing token {}): {reason}",
                        inner.identity,
                        leadership.token()
                    );
                    let recorded = this.event("LeadershipLost", note);
                    if tokio::time::timeout(Duration::from_secs(5), recorded)
                        .await
                        .is_err()
                    {
                        debug!("the step-down's Event to kubernetes timed out");
                    }
                }
            };
            tokio::join!(label, mirror, event);
        });
    }

    /// Waits (bounded) for the background notes, before the process exits.
    pub async fn flush(&self, bound: Duration) {
        self.inner.background.close();
        let _ = tokio::time::timeout(bound, self.inner.background.wait()).await;
    }

    /// This pod's uid, read once (a failed read is tried again at the next Event).
    async fn pod_uid(&self) -> Option<String> {
        let inner = &self.inner;
        let pods: Api<Pod> = Api::namespaced(inner.client.clone(), &inner.namespace);
        let what = || format!("get pod {}", inner.identity);
        let uid = inner.pod_uid.get_or_try_init(|| async {
            let pod = call(what, pods.get_opt(&inner.identity)).await?;
            Ok::<_, K8sError>(pod.and_then(|p| p.metadata.uid))
        });
        uid.await.ok().cloned().flatten()
    }

    /// Records a Normal Event on the Deployment (or this pod when none is known).
    async fn event(&self, reason: &str, note: String) {
        let inner = &self.inner;
        let reference = match &inner.deployment {
            Some(d) => d.reference.clone(),
            None => ObjectReference {
                api_version: Some(Pod::api_version(&()).into_owned()),
                kind: Some(Pod::kind(&()).into_owned()),
                name: Some(inner.identity.clone()),
                namespace: Some(inner.namespace.clone()),
                // `kubectl describe pod` finds an object's Events by its uid too.
                uid: self.pod_uid().await,
                ..ObjectReference::default()
            },
        };
        let event = Event {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Elect".into(),
            secondary: None,
        };
        // A recorder of its own for each: one recorder makes a repeat of an Event (same reason,
        // same object, within minutes) a count on the first one, which keeps the first note (a
        // second term's Event would show the first term's token).
        let recorder = Recorder::new(inner.client.clone(), inner.reporter.clone());
        let what = || format!("record a {reason} event");
        if let Err(err) = call(what, recorder.publish(&event, &reference)).await {
            warn!(error = %err, reason, "could not record a kubernetes event");
        }
    }
}
