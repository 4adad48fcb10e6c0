//! Which parts of the Kubernetes side run.

/// Whether to use the Kubernetes API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum KubernetesMode {
    /// On when an in-cluster config or a kubeconfig is found, else off with one log line.
    Auto,
    /// On; fail when no cluster configuration is found.
    On,
    /// Off.
    Off,
}

/// Which Kubernetes parts run.
#[derive(Debug, Clone)]
pub struct KubeSettings {
    /// Auto, on or off.
    pub mode: KubernetesMode,
    /// The leader label key, or `None` when off.
    pub leader_label: Option<String>,
    /// Mirror into a coordination.k8s.io Lease.
    pub lease_mirror: bool,
    /// Record Events.
    pub events: bool,
}
