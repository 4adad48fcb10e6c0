//! The step-down annotation: `leasehold.io/step-down` on the leader's pod asks it to hand over
//! (empty: to any replica; else the identity, the pod name, to hand to). While leading, the
//! leader watches its own pod; it removes the annotation first, then steps down with reason
//! `handover`. Whoever may patch the pods (RBAC) may ask; the chart's Role already lets
//! leasehold read and patch its pods, so this needs no new rule.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Inner, K8sError, LeaderContext, reconcile_while_leading};
use crate::elector::Leadership;
use crate::lease::OwnerId;
use leasehold_core::locked::locked;

/// The annotation that asks the leader to hand over.
pub const STEP_DOWN_ANNOTATION: &str = "leasehold.io/step-down";

/// What an annotation's value asks of the leader `identity`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    /// Hand over to any replica.
    Anyone,
    /// Hand over to this replica.
    To(String),
    /// Not a request that can be honoured: why.
    Refused(String),
}

fn request(value: &str, identity: &str) -> Request {
    let value = value.trim();
    // `-` is how a request says any replica (`leasehold step-down`'s).
    if value.is_empty() || value == "-" {
        return Request::Anyone;
    }
    if value == identity {
        return Request::Refused(format!(
            "`{value}` is this replica, the leader itself; name another replica or leave the value empty"
        ));
    }
    match OwnerId::check_identity(value) {
        Ok(()) => Request::To(value.to_owned()),
        Err(e) => Request::Refused(e.to_string()),
    }
}

struct OwnPod {
    pods: Api<Pod>,
    identity: String,
    /// The request whose removal went unanswered: it may have landed, and then no later look
    /// at the pod shows it again.
    unanswered: Mutex<Option<String>>,
}

/// Acts on the annotation of pod `identity` for as long as this term lasts (until `stop`).
pub(super) async fn watch_own_pod(inner: &Inner, leadership: Leadership, stop: CancellationToken) {
    let (identity, retry) = (inner.identity.as_str(), inner.timing.retry_period);
    let pods: Api<Pod> = Api::namespaced(inner.client.clone(), &inner.namespace);
    let config = super::watch_config().fields(&format!("metadata.name={identity}"));
    let context = OwnPod {
        pods: pods.clone(),
        identity: identity.to_owned(),
        unanswered: Mutex::default(),
    };
    reconcile_while_leading(leadership, stop, pods, config, reconcile, context, retry).await;
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<LeaderContext<OwnPod>>) -> Result<Action, K8sError> {
    let c = &ctx.inner;
    let Some(value) = pod.annotations().get(STEP_DOWN_ANNOTATION) else {
        // A removal that went unanswered landed: its request stands.
        if let Some(value) = locked(&c.unanswered).take() {
            act(&ctx, &value, ctx.leadership.check()?.0);
        }
        return Ok(Action::await_change());
    };
    // Removed before acting, by a term still valid (a late reconcile leaves it to the next): an
    // annotation left behind would end the next term too. A failed removal is retried.
    let token = ctx.leadership.check()?.0;
    let patch =
        Patch::Merge(json!({ "metadata": { "annotations": { STEP_DOWN_ANNOTATION: null } } }));
    let what = || {
        format!(
            "remove the {STEP_DOWN_ANNOTATION} annotation of pod {}",
            c.identity
        )
    };
    let params = PatchParams::default();
    let removed = super::call(what, c.pods.patch(&c.identity, &params, &patch)).await;
    *locked(&c.unanswered) = match &removed {
        Err(K8sError::Unanswered { .. }) => Some(value.clone()),
        _ => None,
    };
    removed?;
    act(&ctx, value, token);
    Ok(Action::await_change())
}

/// Hands over as the annotation's `value` asks, in term `token`.
fn act(ctx: &LeaderContext<OwnPod>, value: &str, token: u64) {
    let c = &ctx.inner;
    match request(value, &c.identity) {
        Request::Anyone => {
            info!(pod = %c.identity, token, "the step-down annotation asks for a handover to any replica");
            ctx.leadership.hand_over(None);
        }
        Request::To(to) => {
            info!(pod = %c.identity, token, to = %to, "the step-down annotation asks for a handover");
            ctx.leadership.hand_over(Some(to));
        }
        Request::Refused(rule) => {
            warn!(pod = %c.identity, token, value = %value, rule = %rule, "ignored the step-down annotation");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_values_read_as_requests() {
        let cases = [
            ("", Request::Anyone),
            ("  ", Request::Anyone),
            // A request's word for any replica: taken for a replica named `-`, it reserved the
            // next term for nobody.
            ("-", Request::Anyone),
            ("web-b", Request::To("web-b".into())),
            (" web-b ", Request::To("web-b".into())),
        ];
        for (value, want) in cases {
            assert_eq!(request(value, "web-a"), want, "{value:?}");
        }
        for refused in ["web-a", "a{b}", "two words"] {
            assert!(
                matches!(request(refused, "web-a"), Request::Refused(_)),
                "{refused:?}"
            );
        }
    }
}
