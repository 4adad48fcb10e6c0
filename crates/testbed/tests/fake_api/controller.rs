//! kube's Controller over the fake: a pod inserted through the test handle is reconciled, and
//! reconciled again after a patch.

use std::convert::Infallible;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use serde_json::json;
use testbed::fake_api::FakeApiServer;
use tokio::sync::watch as signal;

use crate::fixtures::{WAIT, pod};

#[tokio::test(flavor = "multi_thread")]
async fn a_controller_reconciles_an_inserted_pod_and_again_after_a_patch() {
    let server = FakeApiServer::start().await;
    let api: Api<Pod> = Api::default_namespaced(server.client());
    let (reconciled, mut reconciles) = signal::channel(0usize);

    async fn reconcile(
        _pod: Arc<Pod>,
        count: Arc<signal::Sender<usize>>,
    ) -> Result<Action, Infallible> {
        count.send_modify(|n| *n += 1);
        Ok(Action::await_change())
    }
    fn error_policy(
        _pod: Arc<Pod>,
        _error: &Infallible,
        _count: Arc<signal::Sender<usize>>,
    ) -> Action {
        Action::await_change()
    }
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(reconciled))
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    server.insert(&pod("reconciled"));
    testbed::wait::until("the first reconcile", &mut reconciles, WAIT, |n| *n >= 1).await;
    api.patch(
        "reconciled",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "touched": "yes" } } })),
    )
    .await
    .unwrap();
    testbed::wait::until(
        "the reconcile after the patch",
        &mut reconciles,
        WAIT,
        |n| *n >= 2,
    )
    .await;
    controller.abort();
}
