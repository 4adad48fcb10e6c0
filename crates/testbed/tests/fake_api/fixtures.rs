//! What the fake API server's tests share: the bound on every wait, the objects they write (a
//! config map, a lease, a pod, and their metadata), a server holding one lease, and the readings
//! of an answer (an object's resourceVersion, a lease's holder, the HTTP code of a failed call).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ObjectMeta, PostParams};
use testbed::fake_api::FakeApiServer;

/// Bound on every wait for something the fake or kube does.
pub const WAIT: Duration = Duration::from_secs(10);

pub fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some("default".to_owned()),
        labels: (!labels.is_empty()).then(|| {
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        }),
        ..ObjectMeta::default()
    }
}

pub fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(name, labels),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..ConfigMap::default()
    }
}

pub fn lease(name: &str, holder: &str) -> Lease {
    Lease {
        metadata: meta(name, &[]),
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            ..LeaseSpec::default()
        }),
    }
}

/// The fake API server, a lease API on it, and the lease `name` it holds, held by `holder`.
pub async fn server_with_lease(name: &str, holder: &str) -> (FakeApiServer, Api<Lease>, Lease) {
    let server = FakeApiServer::start().await;
    let api: Api<Lease> = Api::default_namespaced(server.client());
    let created = api
        .create(&PostParams::default(), &lease(name, holder))
        .await
        .unwrap();
    (server, api, created)
}

pub fn pod(name: &str) -> Pod {
    Pod {
        metadata: meta(name, &[("app", "demo")]),
        ..Pod::default()
    }
}

pub fn version_of(object: &impl kube::Resource) -> u64 {
    let version = object.meta().resource_version.as_deref();
    version
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("resourceVersion {version:?} is not a number"))
}

pub fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

/// The HTTP code of a failed kube call.
pub fn api_code<T: std::fmt::Debug>(result: kube::Result<T>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends a raw request through kube's client and returns the HTTP code it got.
pub async fn raw_code(client: &kube::Client, request: http::Request<Vec<u8>>) -> u16 {
    match client.request_text(request).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(other) => panic!("expected an answer from the fake, got {other}"),
    }
}
