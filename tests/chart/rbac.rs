//! The chart's RBAC: the Role against the code's one list of API calls, both ways, with the
//! rules of the parts turned off dropped, its objects named where Kubernetes allows it, and the
//! binding to the pods' service account.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use leasehold::k8s::rbac::API_CALLS;

use harness::helm::{args, deployment, pod_spec, render, switch};

// ---------------------------------------------------------------------------------------------
// RBAC: the Role against the code's one list of API calls

type Call = (String, String, String);

fn role_calls(role: &Role) -> BTreeSet<Call> {
    let mut calls = BTreeSet::new();
    for rule in role.rules.clone().unwrap_or_default() {
        assert!(rule.non_resource_urls.is_none(), "{rule:?}");
        for group in rule.api_groups.clone().unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    assert!(
                        group != "*" && resource != "*" && verb != "*",
                        "no wildcards: {rule:?}"
                    );
                    calls.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    calls
}

/// The calls `leasehold run` makes (the chart's pods run nothing else), less `skip`'s.
fn code_calls(skip: &[&str]) -> BTreeSet<Call> {
    API_CALLS
        .iter()
        .filter(|c| c.run && !skip.contains(&c.resource))
        .flat_map(|c| {
            c.verbs
                .iter()
                .map(|v| (c.group.to_owned(), c.resource.to_owned(), (*v).to_owned()))
        })
        .collect()
}

fn assert_same_calls(role: &BTreeSet<Call>, code: &BTreeSet<Call>) {
    let extra: Vec<_> = role.difference(code).collect();
    let missing: Vec<_> = code.difference(role).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "the Role and leasehold::k8s::rbac::API_CALLS differ\n  allowed but never called: \
         {extra:?}\n  called but not allowed: {missing:?}"
    );
}

#[test]
fn the_role_allows_exactly_the_api_calls_the_code_makes() {
    let role: Role = render("").one();
    assert_same_calls(&role_calls(&role), &code_calls(&[]));
}

#[test]
fn the_role_drops_the_rules_of_the_parts_turned_off() {
    let r = render("kubernetes:\n  leaseMirror: false\n  events: false\n");
    let role: Role = r.one();
    assert_same_calls(&role_calls(&role), &code_calls(&["leases", "events"]));
    let (_, c) = deployment(&r);
    assert!(switch(&args(&c), "no-lease-mirror") && switch(&args(&c), "no-events"));
    assert!(render("rbac:\n  create: false\n").all::<Role>().is_empty());
}

#[test]
fn the_role_names_its_objects_where_kubernetes_allows_it() {
    let r = render("");
    let (d, _) = deployment(&r);
    let name = d.metadata.name.clone().expect("name");
    let role: Role = r.one();
    for rule in role.rules.unwrap_or_default() {
        let resources = rule.resources.clone().unwrap_or_default();
        if let Some(names) = &rule.resource_names {
            assert_eq!(names, &vec![name.clone()], "{rule:?}");
            assert!(
                rule.verbs.iter().all(|v| v == "get" || v == "update"),
                "a name cannot limit create, list or watch: {rule:?}"
            );
        } else if resources == ["deployments"] {
            panic!("deployments: only this Deployment may be read: {rule:?}");
        }
    }
    assert_eq!(role.metadata.namespace.as_deref(), Some("shop"));
}

#[test]
fn the_role_binding_grants_the_role_to_the_pods_service_account() {
    for values in ["", "serviceAccount:\n  name: custom\n"] {
        let r = render(values);
        let (d, _) = deployment(&r);
        let account = pod_spec(&d)
            .service_account_name
            .expect("serviceAccountName");
        let sa: ServiceAccount = r.one();
        assert_eq!(sa.metadata.name.as_deref(), Some(account.as_str()));
        let role: Role = r.one();
        let binding: RoleBinding = r.one();
        assert_eq!(binding.role_ref.kind, "Role");
        assert_eq!(
            Some(binding.role_ref.name.as_str()),
            role.metadata.name.as_deref()
        );
        let subjects = binding.subjects.expect("subjects");
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].name, account);
        assert_eq!(subjects[0].namespace.as_deref(), Some("shop"));
    }
}

#[test]
fn the_api_token_is_mounted_into_the_leasehold_container_alone() {
    const TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
    let r = render(
        "statusFile:\n  enabled: true\n  exampleSidecar:\n    enabled: true\nsidecars:\n  - name: app\n    image: app:1\ninitContainers:\n  - name: setup\n    image: app:1\n",
    );
    let (d, _) = deployment(&r);
    let spec = pod_spec(&d);
    assert_eq!(spec.automount_service_account_token, Some(false));
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "leasehold-api-token")
        .expect("the token's volume");
    let sources = volume
        .projected
        .as_ref()
        .and_then(|p| p.sources.clone())
        .expect("a projected volume");
    assert!(
        sources.iter().any(|s| s
            .service_account_token
            .as_ref()
            .is_some_and(|t| t.path == "token")),
        "{sources:?}"
    );
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let mounting: Vec<&str> = containers
        .filter(|c| {
            c.volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == "leasehold-api-token" && m.mount_path == TOKEN_DIR)
        })
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(mounting, ["leasehold"]);
    assert_eq!(
        spec.init_containers.iter().flatten().count() + spec.containers.len(),
        4,
        "leasehold, the example sidecar, the user's sidecar and init container"
    );
}
