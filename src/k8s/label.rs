//! The leader label: `true` on the leader's pod, absent on the Deployment's other pods, kept so
//! by a reconcile loop on pod events while leading. The leader's pod also carries a high
//! `controller.kubernetes.io/pod-deletion-cost`, so that a rolling update (or a scale-down)
//! removes the followers first and the leader last: one handoff per rollout, not several.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{Inner, K8sError, LeaderContext, reconcile_while_leading};
use crate::elector::Leadership;

struct LabelContext {
    pods: Api<Pod>,
    identity: String,
    key: String,
}

/// Keeps the label on this replica's pod and off every other pod that its Deployment's selector
/// selects, until `stop`. Without a selector (the Deployment is unknown) only this pod is
/// looked at.
pub(super) async fn keep_on_leader(
    inner: &Inner,
    key: &str,
    leadership: Leadership,
    stop: CancellationToken,
) {
    let (identity, retry) = (inner.identity.as_str(), inner.timing.retry_period);
    let pods: Api<Pod> = Api::namespaced(inner.client.clone(), &inner.namespace);
    let config = match inner.deployment.as_ref().map(|d| d.selector.as_str()) {
        Some(s) => super::watch_config().labels(s),
        None => super::watch_config().fields(&format!("metadata.name={identity}")),
    };
    let context = LabelContext {
        pods: pods.clone(),
        identity: identity.to_owned(),
        key: key.to_owned(),
    };
    reconcile_while_leading(leadership, stop, pods, config, reconcile, context, retry).await;
}

/// The annotation that orders a ReplicaSet's scale-down (lowest cost goes first).
pub(super) const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The value the label should have on `pod`: `Some("true")` on the leader, `None` elsewhere.
fn wanted(pod: &str, identity: &str) -> Option<&'static str> {
    (pod == identity).then_some("true")
}

/// The pod-deletion cost `pod` (now `have`) should carry: high on the leader; elsewhere none
/// in place of ours, and a cost its owner chose left as it is.
fn wanted_cost<'a>(pod: &str, identity: &str, have: Option<&'a str>) -> Option<&'a str> {
    (pod == identity)
        .then_some("1000")
        .or(have.filter(|&cost| cost != "1000"))
}

/// A merge patch that sets or removes the label and the deletion cost.
fn claim_patch(key: &str, label: Option<&str>, cost: Option<&str>) -> serde_json::Value {
    let value = |v: Option<&str>| v.map_or(serde_json::Value::Null, |v| json!(v));
    json!({ "metadata": {
        "labels": { key: value(label) },
        "annotations": { DELETION_COST: value(cost) },
    } })
}

async fn reconcile(
    pod: Arc<Pod>,
    ctx: Arc<LeaderContext<LabelContext>>,
) -> Result<Action, K8sError> {
    let c = &ctx.inner;
    let name = pod.name_any();
    let want = wanted(&name, &c.identity);
    let have = pod.labels().get(&c.key).map(String::as_str);
    let have_cost = pod.annotations().get(DELETION_COST).map(String::as_str);
    let want_cost = wanted_cost(&name, &c.identity, have_cost);
    if have == want && have_cost == want_cost {
        return Ok(Action::await_change());
    }
    let token = ctx.leadership.check()?;
    let patch = Patch::Merge(claim_patch(&c.key, want, want_cost));
    let params = PatchParams::default();
    let write = c.pods.patch(&name, &params, &patch);
    super::call(|| format!("patch the leader label of pod {name}"), write).await?;
    if want.is_some() {
        info!(pod = %name, label = %c.key, token = token.0, "set the leader label");
    } else {
        info!(pod = %name, label = %c.key, token = token.0, "removed the leader label");
    }
    Ok(Action::await_change())
}

/// Takes the label off this replica's own pod (after a term: withdraws a claim, needs no
/// leadership), and the deletion cost when it is ours. Tried again until it lands, a refusal
/// (401, 403) aside, while `still` holds (no later term of ours began) and within the caller's
/// bound, if any: without a Deployment's selector no other replica takes it off.
pub(super) async fn remove_own(inner: &Inner, key: &str, still: impl Fn() -> bool) {
    let identity = inner.identity.as_str();
    let pods: Api<Pod> = Api::namespaced(inner.client.clone(), &inner.namespace);
    let mut pause = Duration::from_millis(100);
    let mut failed = false;
    while still() {
        let removed = async {
            let what = || format!("remove the leader label of pod {identity}");
            let pod = super::call(what, pods.get(identity)).await?;
            let cost = pod.annotations().get(DELETION_COST).map(String::as_str);
            // As on a follower's pod (led by nobody here): only our cost goes.
            let patch = Patch::Merge(claim_patch(key, None, wanted_cost(identity, "", cost)));
            super::call(what, pods.patch(identity, &PatchParams::default(), &patch)).await
        };
        match removed.await {
            Ok(_) => {
                debug!(pod = %identity, label = %key, "removed the leader label from this pod");
                return;
            }
            Err(err) => {
                // Said once (and a refusal, which ends the tries); the retries quietly.
                let refused = super::refused(&err);
                if failed && !refused {
                    debug!(pod = %identity, error = %err, "could not remove the leader label from this pod");
                } else {
                    warn!(pod = %identity, error = %err, retrying = !refused, "could not remove the leader label from this pod");
                }
                if refused {
                    return;
                }
                failed = true;
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_patch_sets_or_removes_both() {
        let set = claim_patch("leasehold.io/leader", Some("true"), Some("1000"));
        assert_eq!(set["metadata"]["labels"]["leasehold.io/leader"], "true");
        assert_eq!(set["metadata"]["annotations"][DELETION_COST], "1000");
        let unset = claim_patch("leasehold.io/leader", None, None);
        assert!(unset["metadata"]["labels"]["leasehold.io/leader"].is_null());
        assert!(unset["metadata"]["annotations"][DELETION_COST].is_null());
    }

    #[test]
    fn only_the_leader_carries_the_label() {
        assert_eq!(wanted_cost("web-a", "web-a", None), Some("1000"));
        assert_eq!(wanted_cost("web-a", "web-a", Some("5")), Some("1000"));
        assert_eq!(wanted_cost("web-b", "web-a", Some("1000")), None);
        assert_eq!(wanted_cost("web-b", "web-a", Some("5")), Some("5"));
        assert_eq!(wanted_cost("web-b", "web-a", None), None);
        assert_eq!(wanted("web-a", "web-a"), Some("true"));
        assert_eq!(wanted("web-b", "web-a"), None);
    }
}
