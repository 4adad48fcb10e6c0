//! The one list of Kubernetes API calls leasehold makes. The Helm chart's Role is checked
//! against it (both ways), and the tests check that the code calls nothing outside it.

/// Calls on one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCalls {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resource (plural).
    pub resource: &'static str,
    /// Verbs.
    pub verbs: &'static [&'static str],
    /// Why leasehold needs them.
    pub why: &'static str,
    /// Whether `leasehold run` makes them (the chart's pods); else only `leasehold lock` does.
    pub run: bool,
}

/// Every call, in the namespace of the Deployment only.
pub const API_CALLS: &[ApiCalls] = &[
    ApiCalls {
        group: "",
        resource: "pods",
        verbs: &["get", "list", "watch", "patch"],
        why: "find this pod's owner; watch the Deployment's pods and keep the leader label on the leader alone; read and remove the step-down annotation on the leader's pod",
        run: true,
    },
    ApiCalls {
        group: "apps",
        resource: "replicasets",
        verbs: &["get"],
        why: "follow the pod's owner to its Deployment",
        run: true,
    },
    ApiCalls {
        group: "apps",
        resource: "deployments",
        verbs: &["get"],
        why: "name the lease after the Deployment and read its pod selector",
        run: true,
    },
    ApiCalls {
        group: "batch",
        resource: "jobs",
        verbs: &["get"],
        why: "name a one-shot lock (`leasehold lock`) after the CronJob that owns its Job, or the Job",
        run: false,
    },
    ApiCalls {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "create", "update"],
        why: "mirror leadership into a Lease for `kubectl get lease`",
        run: true,
    },
    ApiCalls {
        group: "events.k8s.io",
        resource: "events",
        // A Recorder of its own for each Event, so never the patch of a repeat's count.
        verbs: &["create"],
        why: "record leadership changes as Events on the Deployment",
        run: true,
    },
];

/// Whether `verb` on `group`/`resource` is in [`API_CALLS`].
pub fn allows(group: &str, resource: &str, verb: &str) -> bool {
    API_CALLS
        .iter()
        .any(|c| c.group == group && c.resource == resource && c.verbs.contains(&verb))
}
