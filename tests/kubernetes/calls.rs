//! The requests the fake API server saw, as RBAC sees them, and the check that a test made no
//! call outside rbac::API_CALLS.

use leasehold::k8s::rbac;
use testbed::fake_api::{FakeApiServer, Recorded};

/// The (group, resource, verb) of a request, as RBAC sees it.
pub fn rbac_of(r: &Recorded) -> (String, String, String) {
    let parts: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => ((*group).to_owned(), rest),
        _ => panic!("unexpected path {}", r.path),
    };
    let (resource, named) = match rest {
        ["namespaces", _ns, resource, _name, ..] => (*resource, true),
        ["namespaces", _ns, resource] => (*resource, false),
        other => panic!("not a namespaced path: {other:?} in {}", r.path),
    };
    let watching = r
        .query_param("watch")
        .is_some_and(|w| w == "true" || w == "1");
    let verb = match (r.method.as_str(), named) {
        ("GET", true) => "get",
        ("GET", false) if watching => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (m, _) => panic!("unexpected method {m}"),
    };
    (group, resource.to_owned(), verb.to_owned())
}

/// Every request the fake saw is a call that rbac::API_CALLS lists.
pub fn assert_within_rbac(api: &FakeApiServer) {
    for r in api.requests() {
        let (group, resource, verb) = rbac_of(&r);
        assert!(
            rbac::allows(&group, &resource, &verb),
            "{} {} is `{verb}` on {group}/{resource}, which rbac::API_CALLS does not list",
            r.method,
            r.path
        );
    }
}
