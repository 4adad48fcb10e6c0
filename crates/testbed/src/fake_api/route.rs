//! Request paths: which resource type, namespace, object and subresource a URL addresses.

use super::resource::ResourceType;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub resource: ResourceType,
    /// `None` for cluster-scoped objects and for lists and watches across all namespaces.
    pub namespace: Option<String>,
    /// `None` for the collection (list, watch, create, delete collection).
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Route {
    /// Parses `/api/v1/...` and `/apis/{group}/{version}/...` paths; `None` for anything else.
    ///
    /// Namespaced: `namespaces/{ns}/{plural}[/{name}[/{subresource}]]`. Cluster-wide or
    /// cluster-scoped: `{plural}[/{name}[/{subresource}]]`. `namespaces/{name}` is therefore the
    /// Namespace object itself, as on the real server.
    pub fn parse(path: &str) -> Option<Self> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return None;
        }
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return None,
        };
        let (namespace, plural, tail) = match rest {
            // The Namespace object's own subresources, not a resource type called "status".
            ["namespaces", _, "status" | "finalize"] => (None, "namespaces", &rest[1..]),
            ["namespaces", namespace, plural, tail @ ..] => (Some(*namespace), *plural, tail),
            [plural, tail @ ..] => (None, *plural, tail),
            [] => return None,
        };
        let (name, subresource) = match tail {
            [] => (None, None),
            [name] => (Some(*name), None),
            [name, subresource] => (Some(*name), Some(*subresource)),
            _ => return None,
        };
        Some(Self {
            resource: ResourceType::new(group, version, plural),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            subresource: subresource.map(str::to_owned),
        })
    }
}
