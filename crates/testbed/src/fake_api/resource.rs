//! What the fake knows about resource types: how they are named, their kinds, their scope, and
//! which of them have a status subresource. Anything it does not know still works generically.

/// A resource type as the API addresses it: group (empty for the core group), version, plural.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub plural: String,
}

/// Kinds of well-known resources, for answers about a type before any object of it was seen.
const KNOWN_KINDS: &[(&str, &str, &str)] = &[
    ("", "pods", "Pod"),
    ("", "configmaps", "ConfigMap"),
    ("", "secrets", "Secret"),
    ("", "services", "Service"),
    ("", "serviceaccounts", "ServiceAccount"),
    ("", "endpoints", "Endpoints"),
    ("", "events", "Event"),
    ("", "namespaces", "Namespace"),
    ("", "nodes", "Node"),
    ("", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("", "persistentvolumes", "PersistentVolume"),
    ("events.k8s.io", "events", "Event"),
    ("apps", "deployments", "Deployment"),
    ("apps", "replicasets", "ReplicaSet"),
    ("apps", "statefulsets", "StatefulSet"),
    ("apps", "daemonsets", "DaemonSet"),
    ("batch", "jobs", "Job"),
    ("batch", "cronjobs", "CronJob"),
    ("coordination.k8s.io", "leases", "Lease"),
    ("policy", "poddisruptionbudgets", "PodDisruptionBudget"),
];

/// Types whose `.status` only the `/status` subresource may change, as on a real API server.
const WITH_STATUS_SUBRESOURCE: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "services"),
    ("", "nodes"),
    ("", "namespaces"),
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
    ("policy", "poddisruptionbudgets"),
    ("autoscaling", "horizontalpodautoscalers"),
];

/// Types that live outside namespaces.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "nodes"),
    ("", "persistentvolumes"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("storage.k8s.io", "storageclasses"),
    ("scheduling.k8s.io", "priorityclasses"),
];

impl ResourceType {
    pub fn new(group: &str, version: &str, plural: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        }
    }

    /// The type of a kube resource, from its static type information.
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Self::new(&K::group(&()), &K::version(&()), &K::plural(&()))
    }

    /// The `apiVersion` of its objects: `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// How error messages name it: `pods`, `leases.coordination.k8s.io`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn has_status_subresource(&self) -> bool {
        self.is_in(WITH_STATUS_SUBRESOURCE)
    }

    pub fn is_cluster_scoped(&self) -> bool {
        self.is_in(CLUSTER_SCOPED)
    }

    /// The kind of a well-known type, else a guess from the plural (`widgets` gives `Widget`).
    pub fn default_kind(&self) -> String {
        let known = KNOWN_KINDS
            .iter()
            .find(|(group, plural, _)| *group == self.group && *plural == self.plural);
        if let Some((_, _, kind)) = known {
            return (*kind).to_owned();
        }
        let singular = self.plural.strip_suffix('s').unwrap_or(&self.plural);
        let mut chars = singular.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => String::new(),
        }
    }

    fn is_in(&self, table: &[(&str, &str)]) -> bool {
        table
            .iter()
            .any(|(group, plural)| *group == self.group && *plural == self.plural)
    }
}
