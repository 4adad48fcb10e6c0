//! The Helm chart as the real helm renders it, and what is built beside it: values and their
//! refusals, the rendered objects and their schemas, RBAC, rollouts, the pod run as the real
//! binary, the extras, the generated README, the alerts with Prometheus's own tools, the
//! manifests, the Dockerfile and the example manifests in docs/examples.

mod alerts;
mod bitnami_keys;
mod conventions;
mod dashboard;
mod examples;
mod extras;
mod helm_test;
mod images;
mod manifests;
mod network_policy;
mod pod;
mod rbac;
mod readme;
mod render;
mod rollout;
mod sidecar;
mod values;
