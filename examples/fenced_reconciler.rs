//! A reconciler under leadership that fences its writes to Kubernetes objects: it stamps every
//! ConfigMap labelled `example.com/stamped=true` with the leader's identity, through
//! `leasehold::fence::k8s::replace`, which keeps the writer's fencing token in an annotation and
//! writes with the resourceVersion of its read as a precondition. docs/FENCING.md quotes it.
//!
//! ```text
//! cargo run --example fenced_reconciler -- redis://127.0.0.1:6379 default pod-a
//! ```

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use leasehold::elector::{Elector, Leadership, Timing};
use leasehold::fence::{self, FenceError};
use leasehold::k8s::{LeaderContext, reconcile_while_leading};
use leasehold::lease::{LeaseName, LeaseOptions, OwnerId, RedisLease};
use tokio_util::sync::CancellationToken;

/// The ConfigMaps this reconciler stamps.
pub const SELECTOR: &str = "example.com/stamped=true";

/// Reconciles the selected ConfigMaps for as long as `leadership` lasts.
pub async fn lead(leadership: Leadership, config_maps: Api<ConfigMap>) -> Result<(), FenceError> {
    let stop = leadership.cancellation_token();
    let watch = watcher::Config::default().labels(SELECTOR);
    let retry = Duration::from_secs(1);
    let api = config_maps.clone();
    reconcile_while_leading(leadership, stop, api, watch, stamp, config_maps, retry).await;
    Ok(())
}

async fn stamp(
    config_map: Arc<ConfigMap>,
    ctx: Arc<LeaderContext<Api<ConfigMap>>>,
) -> Result<Action, FenceError> {
    let identity = ctx.leadership.identity().to_owned();
    let token = ctx.leadership.check()?; // right before the write
    let stamped = config_map.data.as_ref().and_then(|d| d.get("leader")) == Some(&identity)
        && fence::k8s::stored_token(&*config_map, &config_map.name_any())? == Some(token);
    if stamped {
        return Ok(Action::await_change());
    }
    // Refused when the object carries a higher token (a newer leader wrote), and on a
    // resourceVersion conflict (it changed since the read; the requeue reads it again).
    fence::k8s::replace(&ctx.inner, &config_map.name_any(), token, |object| {
        object
            .data
            .get_or_insert_default()
            .insert("leader".to_owned(), identity);
    })
    .await?;
    Ok(Action::await_change())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, namespace, identity] = args.as_slice() else {
        return Err("usage: fenced_reconciler REDIS_URL NAMESPACE IDENTITY".into());
    };
    let client = kube::Client::try_default().await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client, namespace);
    let name = LeaseName::for_deployment(namespace, "fenced-reconciler")?;
    let lease = RedisLease::new(
        url,
        name,
        OwnerId::generate(identity)?,
        LeaseOptions::default(),
    )?;
    let elector = Elector::new(lease, Timing::default())?;
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        on_signal.cancel();
    });
    elector
        .run(shutdown, move |leadership| {
            lead(leadership, config_maps.clone())
        })
        .await;
    Ok(())
}
