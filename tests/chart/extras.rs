//! The chart's opt-in extras, checked with the real helm like the rest of this target: the
//! NetworkPolicy, image digests, the Grafana dashboard ConfigMap, the PrometheusRule's presence,
//! and the `helm test` Pod. They lint, render into their k8s-openapi types, pass
//! `kubernetes-validate --strict`, and have a schema test per rule. What each renders is checked
//! in images.rs, dashboard.rs and network_policy.rs; the `helm test` Pod and its script, run
//! against three real replicas, are in helm_test.rs.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;

use harness::helm::{self, render};
use harness::prometheus::rule_values;

pub const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Value sets with the extras on, each with a name for the messages.
pub fn extra_value_sets() -> Vec<(&'static str, String)> {
    vec![
        (
            "everything on",
            rule_values(
                "",
                &format!(
                    "serviceMonitor:\n  enabled: true\ngrafanaDashboard:\n  enabled: true\nhelmTest:\n  enabled: true\nimage:\n  digest: {DIGEST}\nnetworkPolicy:\n  enabled: true\n  ingressFrom:\n    - namespaceSelector:\n        matchLabels:\n          kubernetes.io/metadata.name: monitoring\n"
                ),
            ),
        ),
        (
            "network policy without peers",
            "networkPolicy:\n  enabled: true\n".to_owned(),
        ),
        (
            "network policy with every peer given",
            "networkPolicy:\n  enabled: true\n  ingressFrom:\n    - podSelector:\n        matchLabels:\n          app: gateway\n  redis:\n    to:\n      - ipBlock:\n          cidr: 10.20.0.0/16\n    ports: [6379, 26379]\n  apiServer:\n    to:\n      - ipBlock:\n          cidr: 172.16.0.1/32\n    ports: [443]\n  dns:\n    to:\n      - ipBlock:\n          cidr: 169.254.20.10/32\n    ports: [53]\n  extraEgress:\n    - ports:\n        - port: 5432\n          protocol: TCP\n  extraIngress:\n    - ports:\n        - port: 9000\n          protocol: TCP\n".to_owned(),
        ),
        (
            "helm test in leader mode without the leader service",
            helm::HELM_TEST_IN_LEADER_MODE.to_owned(),
        ),
        (
            "dashboard for a sidecar elsewhere",
            "grafanaDashboard:\n  enabled: true\n  labelName: example.com/dashboard\n  labelValue: leasehold\n  namespace: monitoring\n  annotations:\n    grafana_folder: Platform\n".to_owned(),
        ),
        (
            "exec mode and test image by digest",
            format!(
                "exec:\n  enabled: true\n  image:\n    repository: registry.example.com/worker\n    digest: {DIGEST}\n  command: [/app/worker]\nhelmTest:\n  enabled: true\n  image:\n    repository: registry.example.com/busybox\n    digest: {DIGEST}\n"
            ),
        ),
    ]
}

#[test]
fn the_chart_lints_strictly_with_every_extra() {
    for (name, values) in extra_value_sets() {
        let out = helm::lint_strict(&values);
        assert!(
            out.ok() && out.stdout.contains("0 chart(s) failed"),
            "helm lint --strict failed for {name:?} ({}):\n{}{}",
            out.code,
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn the_default_release_renders_none_of_the_extras() {
    let r = render("");
    for kind in ["NetworkPolicy", "Pod", "ConfigMap", "PrometheusRule"] {
        assert!(r.untyped(kind).is_empty(), "{kind} rendered by default");
    }
    let services: Vec<Service> = r.all();
    assert_eq!(services.len(), 1, "only the leader Service by default");
}

#[test]
fn every_extra_parses_as_its_kubernetes_type_and_validates_strictly() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, (name, values)) in extra_value_sets().iter().enumerate() {
        let r = render(values);
        for kind in r.kinds() {
            match kind.as_str() {
                "NetworkPolicy" => drop(r.all::<NetworkPolicy>()),
                "Pod" => drop(r.all::<Pod>()),
                "ConfigMap" => drop(r.all::<ConfigMap>()),
                "Service" => drop(r.all::<Service>()),
                "Deployment" => drop(r.all::<Deployment>()),
                _ => {}
            }
        }
        helm::assert_valid_for_kubernetes(name, &r, &dir.path().join(format!("extras-{i}.yaml")));
    }
}

// ---------------------------------------------------------------------------------------------
// values.schema.json: one test per new rule, each with helm's words

harness::schema_rule! {
    schema_refuses_a_registry_with_a_scheme:
        "image:\n  registry: https://registry.example.com\n" => ["at '/image/registry': 'https://registry.example.com' does not match pattern"];
    schema_refuses_a_global_registry_with_a_scheme:
        "global:\n  imageRegistry: http://mirror\n" => ["at '/global/imageRegistry': 'http://mirror' does not match pattern"];
    schema_refuses_a_dashboard_uid_longer_than_grafana_allows:
        "grafanaDashboard:\n  uid: a123456789b123456789c123456789d123456789e\n" => ["at '/grafanaDashboard/uid':", "does not match pattern"];
    schema_refuses_a_dashboard_uid_grafana_would_refuse:
        "grafanaDashboard:\n  uid: my.dashboard\n" => ["at '/grafanaDashboard/uid': 'my.dashboard' does not match pattern"];
    schema_refuses_a_digest_that_is_no_sha256:
        "image:\n  digest: sha256:abc\n" => ["at '/image/digest': 'sha256:abc' does not match pattern"];
    schema_refuses_a_test_image_digest_in_upper_case:
        "helmTest:\n  image:\n    digest: SHA256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n" => ["at '/helmTest/image/digest':", "does not match pattern"];
    schema_refuses_a_runbook_url_that_is_no_url:
        "prometheusRule:\n  runbookBaseUrl: docs/RUNBOOK.md\n" => ["at '/prometheusRule/runbookBaseUrl': 'docs/RUNBOOK.md' does not match pattern"];
    schema_refuses_a_runbook_url_with_a_fragment:
        "prometheusRule:\n  runbookBaseUrl: https://docs.example.com/RUNBOOK.md#top\n" => ["at '/prometheusRule/runbookBaseUrl':", "does not match pattern"];
    schema_refuses_a_selector_in_braces:
        "prometheusRule:\n  selector: '{job=\"leasehold\"}'\n" => ["at '/prometheusRule/selector':", "does not match pattern"];
    schema_refuses_a_negative_flapping_threshold:
        "prometheusRule:\n  flapping:\n    transitions: -1\n" => ["at '/prometheusRule/flapping/transitions': minimum: got -1, want 0"];
    schema_refuses_a_flapping_window_prometheus_cannot_read:
        "prometheusRule:\n  flapping:\n    window: 15 minutes\n" => ["at '/prometheusRule/flapping/window': '15 minutes' does not match pattern"];
    schema_refuses_a_pause_window_in_days:
        "prometheusRule:\n  pauseWindow: 1d\n" => ["at '/prometheusRule/pauseWindow': '1d' does not match pattern"];
    schema_refuses_an_unknown_prometheus_rule_key:
        "prometheusRule:\n  severity: page\n" => ["at '/prometheusRule': additional properties 'severity' not allowed"];
    schema_refuses_a_dashboard_label_value_kubernetes_would_refuse:
        "grafanaDashboard:\n  labelValue: not ok\n" => ["at '/grafanaDashboard/labelValue': 'not ok' does not match pattern"];
    schema_refuses_a_dashboard_label_name_that_is_no_label_key:
        "grafanaDashboard:\n  labelName: grafana dashboard\n" => ["at '/grafanaDashboard/labelName': 'grafana dashboard' does not match pattern"];
    schema_refuses_a_dashboard_namespace_kubernetes_would_refuse:
        "grafanaDashboard:\n  namespace: Monitoring\n" => ["at '/grafanaDashboard/namespace': 'Monitoring' does not match pattern"];
    schema_refuses_an_unknown_network_policy_key:
        "networkPolicy:\n  egress: []\n" => ["at '/networkPolicy': additional properties 'egress' not allowed"];
    schema_refuses_a_redis_port_out_of_range:
        "networkPolicy:\n  redis:\n    ports: [0]\n" => ["at '/networkPolicy/redis/ports/0': minimum: got 0, want 1"];
    schema_refuses_dns_without_ports:
        "networkPolicy:\n  dns:\n    ports: []\n" => ["at '/networkPolicy/dns/ports': minItems: got 0, want 1"];
    schema_refuses_peers_that_are_no_list:
        "networkPolicy:\n  ingressFrom:\n    podSelector: {}\n" => ["at '/networkPolicy/ingressFrom': got object, want array"];
    schema_refuses_a_helm_test_timeout_of_zero:
        "helmTest:\n  timeoutSeconds: 0\n" => ["at '/helmTest/timeoutSeconds': minimum: got 0, want 1"];
    schema_refuses_a_helm_test_image_without_a_repository:
        "helmTest:\n  image:\n    repository: \"\"\n" => ["at '/helmTest/image/repository': minLength: got 0, want 1"];
    schema_refuses_a_cluster_domain_kubernetes_would_refuse:
        "helmTest:\n  clusterDomain: Cluster.Local\n" => ["at '/helmTest/clusterDomain': 'Cluster.Local' does not match pattern"];
}
