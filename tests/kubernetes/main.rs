//! The Kubernetes side against the in-process fake API server, with kube's own client and runtime
//! unmodified: the controller's parts (discovery, the leader label, the Lease mirror, Events, RBAC)
//! and the operator commands' Kubernetes side.

mod binary;
mod calls;
mod controller;
mod discovery;
mod events;
mod fixtures;
mod lease_mirror;
mod operator;
