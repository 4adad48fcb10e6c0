//! The client: how it reaches the cluster, and how long its calls may take.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::runtime::watcher;
use tracing::info;

use super::{K8sError, KubernetesMode};

/// How long one API call may take. The client has no read timeout (its watches wait minutes for
/// a change): unbounded, a call to an API server that stopped answering waited for ever, and
/// the start, the label or the mirror that made it waited with it.
const CALL_BOUND: Duration = Duration::from_secs(5);

/// How long the client waits for a read on a connection: a call the bound above does not cover
/// (the list that starts a watch inside kube's controller) is given up after it, and the watch
/// starts again. Above [`WATCH_SECONDS`], after which the API server ends each watch.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the API server keeps one of the term's watches open (`timeoutSeconds`).
const WATCH_SECONDS: u32 = 25;

/// A watch of the term's, which the API server ends within [`WATCH_SECONDS`].
pub(super) fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(WATCH_SECONDS)
}

/// One API call within [`CALL_BOUND`]; an error says what was called.
pub(super) async fn call<T>(
    what: impl FnOnce() -> String,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, K8sError> {
    match tokio::time::timeout(CALL_BOUND, call).await {
        Ok(answer) => answer.map_err(|source| K8sError::Api {
            what: what(),
            source,
        }),
        Err(_) => Err(K8sError::Unanswered {
            what: what(),
            after: CALL_BOUND,
        }),
    }
}

/// Connects to the cluster as `mode` says: `None` when off, or when `auto` finds no cluster
/// (after one log line saying so).
pub async fn connect(mode: KubernetesMode) -> Result<Option<Client>, K8sError> {
    if mode == KubernetesMode::Off {
        info!("kubernetes integration off (--kubernetes off)");
        return Ok(None);
    }
    match kube::Config::infer().await {
        Ok(mut config) => {
            config.read_timeout = Some(READ_TIMEOUT);
            // The countdown starts with each request, not while a kept connection idles.
            config.reset_reader_on_write = true;
            Client::try_from(config).map(Some).map_err(K8sError::Client)
        }
        Err(err) if mode == KubernetesMode::Auto => {
            info!(error = %err, "no kubernetes cluster found (no in-cluster config, no kubeconfig); the leader label, Lease mirror, events and Deployment discovery are off");
            Ok(None)
        }
        Err(err) => Err(K8sError::NoCluster(err.to_string())),
    }
}
