//! Keys that users of bitnami's charts carry over and expect to mean the same here: the
//! ServiceMonitor's `namespace`, `targetLabels` and `honorLabels`, the pod's `initContainers`,
//! and `extraEnvFrom` for the leasehold container. Rendered by the real helm into their
//! Kubernetes types, linted strictly, and checked against the schema.

use harness::helm::{self, deployment, pod_spec, render};

const BITNAMI_KEYS: &str = "serviceMonitor:\n  enabled: true\n  namespace: monitoring\n  targetLabels: [app.kubernetes.io/instance]\n  honorLabels: true\ninitContainers:\n  - name: wait-for-redis\n    image: busybox:1.37\n    command: [sh, -c, 'until nc -z redis.data 6379; do sleep 1; done']\nextraEnvFrom:\n  - secretRef:\n      name: leasehold-env\n";

#[test]
fn bitnamis_keys_lint_strictly() {
    let out = helm::lint_strict(BITNAMI_KEYS);
    assert!(
        out.ok(),
        "helm lint --strict:\n{}{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn the_service_monitor_may_live_in_prometheuss_namespace_with_target_and_honored_labels() {
    let monitors = render(BITNAMI_KEYS).untyped("ServiceMonitor");
    let monitor = &monitors[0];
    assert_eq!(
        monitor["metadata"]["namespace"].as_str(),
        Some("monitoring")
    );
    let names = &monitor["spec"]["namespaceSelector"]["matchNames"];
    assert_eq!(
        names.as_sequence().map(|n| n.len()),
        Some(1),
        "selects the Service in the release's namespace only: {names:?}"
    );
    assert_eq!(names[0].as_str(), Some("shop"));
    assert_eq!(
        monitor["spec"]["targetLabels"][0].as_str(),
        Some("app.kubernetes.io/instance")
    );
    assert_eq!(
        monitor["spec"]["endpoints"][0]["honorLabels"].as_bool(),
        Some(true)
    );

    // By default: the release's namespace, no selector of namespaces, Prometheus's defaults.
    let monitors = render("serviceMonitor:\n  enabled: true\n").untyped("ServiceMonitor");
    let monitor = &monitors[0];
    assert_eq!(monitor["metadata"]["namespace"].as_str(), Some("shop"));
    assert!(monitor["spec"].get("namespaceSelector").is_none());
    assert!(monitor["spec"].get("targetLabels").is_none());
    assert!(monitor["spec"]["endpoints"][0].get("honorLabels").is_none());
}

#[test]
fn init_containers_run_before_leasehold_and_env_from_reaches_its_container() {
    let (d, c) = deployment(&render(BITNAMI_KEYS));
    let init = pod_spec(&d).init_containers.unwrap_or_default();
    assert_eq!(
        init.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["wait-for-redis"]
    );
    let from = c.env_from.expect("envFrom");
    assert_eq!(
        from[0].secret_ref.as_ref().map(|s| s.name.as_str()),
        Some("leasehold-env")
    );

    let (d, c) = deployment(&render(""));
    assert!(pod_spec(&d).init_containers.is_none());
    assert!(c.env_from.is_none());
}

harness::schema_rule! {
    a_service_monitor_namespace_that_is_no_namespace_name_is_refused:
        "serviceMonitor:\n  namespace: Monitoring\n" => ["at '/serviceMonitor/namespace'"];
    honor_labels_that_is_no_boolean_is_refused:
        "serviceMonitor:\n  honorLabels: \"yes\"\n" => ["at '/serviceMonitor/honorLabels'"];
    target_labels_that_is_no_list_is_refused:
        "serviceMonitor:\n  targetLabels: app\n" => ["at '/serviceMonitor/targetLabels'"];
    init_containers_that_is_no_list_is_refused:
        "initContainers: {}\n" => ["at '/initContainers'"];
    extra_env_from_of_strings_is_refused:
        "extraEnvFrom: [leasehold-env]\n" => ["at '/extraEnvFrom/0'"];
}
