//! The chart's opt-in extras, checked with the real helm like tests/chart_*.rs check the rest: the
//! NetworkPolicy, image digests, the Grafana dashboard ConfigMap, the PrometheusRule's presence,
//! and the `helm test` Pod. They lint, render into their k8s-openapi types, pass
//! `kubernetes-validate --strict`, and have a schema test per rule. The `helm test` Pod and its
//! script, run against three real replicas, are in tests/chart/helm_test.rs.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use harness::helm::{self, Rendered, labels, leasehold_container, render};
use harness::prometheus::{dashboard_queries, rule_values};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Value sets with the extras on, each with a name for the messages.
fn extra_value_sets() -> Vec<(&'static str, String)> {
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
// Image digests

fn images(r: &Rendered) -> Vec<String> {
    let mut all: Vec<String> = r
        .all::<Deployment>()
        .iter()
        .map(|d| leasehold_container(d).image.expect("image"))
        .collect();
    for pod in r.all::<Pod>() {
        for c in pod.spec.expect("spec").containers {
            all.push(c.image.expect("image"));
        }
    }
    all
}

#[test]
fn a_digest_pins_each_image_instead_of_its_tag() {
    // The chart's default tag is its appVersion, which is the crate's version.
    let default_image = format!("leasehold:{}", env!("CARGO_PKG_VERSION"));
    let cases = [
        ("", vec![default_image.clone()]),
        (
            "image:\n  tag: \"0.3.0-rc.1\"\n",
            vec!["leasehold:0.3.0-rc.1".to_owned()],
        ),
        (
            &*format!(
                "image:\n  repository: registry.example.com/leasehold\n  tag: \"0.2.0\"\n  digest: {DIGEST}\n"
            ),
            vec![format!("registry.example.com/leasehold@{DIGEST}")],
        ),
        (
            &*format!(
                "exec:\n  enabled: true\n  image:\n    repository: registry.example.com/worker\n    tag: \"3\"\n    digest: {DIGEST}\n  command: [/app/worker]\n"
            ),
            vec![format!("registry.example.com/worker@{DIGEST}")],
        ),
        (
            "helmTest:\n  enabled: true\n",
            vec![default_image.clone(), "busybox:1.36".to_owned()],
        ),
        (
            &*format!("helmTest:\n  enabled: true\n  image:\n    digest: {DIGEST}\n"),
            vec![default_image.clone(), format!("busybox@{DIGEST}")],
        ),
    ];
    for (values, want) in cases {
        assert_eq!(images(&render(values)), want, "values:\n{values}");
    }
}

#[test]
fn each_image_takes_its_registry_and_global_image_registry_takes_every_images_place() {
    let cases = [
        (
            "image:\n  registry: registry.example.com:5000\nhelmTest:\n  enabled: true\n",
            vec![
                format!(
                    "registry.example.com:5000/leasehold:{}",
                    env!("CARGO_PKG_VERSION")
                ),
                "busybox:1.36".to_owned(),
            ],
        ),
        (
            &*format!(
                "image:\n  registry: registry.example.com/\n  digest: {DIGEST}\nhelmTest:\n  enabled: true\n  image:\n    registry: docker.io/library\n"
            ),
            vec![
                format!("registry.example.com/leasehold@{DIGEST}"),
                "docker.io/library/busybox:1.36".to_owned(),
            ],
        ),
        (
            "global:\n  imageRegistry: mirror.example.com\nimage:\n  registry: registry.example.com\nhelmTest:\n  enabled: true\n",
            vec![
                format!("mirror.example.com/leasehold:{}", env!("CARGO_PKG_VERSION")),
                "mirror.example.com/busybox:1.36".to_owned(),
            ],
        ),
        (
            "global:\n  imageRegistry: mirror.example.com\nexec:\n  enabled: true\n  image:\n    registry: registry.example.com\n    repository: team/worker\n    tag: \"3\"\n  command: [/app/worker]\n",
            vec!["mirror.example.com/team/worker:3".to_owned()],
        ),
        (
            "exec:\n  enabled: true\n  image:\n    registry: registry.example.com\n    repository: team/worker\n  command: [/app/worker]\n",
            vec!["registry.example.com/team/worker:latest".to_owned()],
        ),
    ];
    for (values, want) in cases {
        assert_eq!(images(&render(values)), want, "values:\n{values}");
    }
    // A parent chart's other globals pass the schema untouched.
    render("global:\n  storageClass: fast\n  postgresql:\n    auth:\n      database: app\n");
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

// ---------------------------------------------------------------------------------------------
// The Grafana dashboard

fn dashboard_file() -> String {
    std::fs::read_to_string(harness::prometheus::dashboard_path()).expect("the dashboard")
}

#[test]
fn the_dashboard_configmap_carries_the_sidecars_label_and_the_dashboard() {
    let cases = [
        (
            "grafanaDashboard:\n  enabled: true\n",
            "grafana_dashboard",
            "1",
            "shop",
        ),
        (
            "grafanaDashboard:\n  enabled: true\n  labelName: example.com/dashboard\n  labelValue: leasehold\n  namespace: monitoring\n  annotations:\n    grafana_folder: Platform\n",
            "example.com/dashboard",
            "leasehold",
            "monitoring",
        ),
    ];
    for (values, label, value, namespace) in cases {
        let cm: ConfigMap = render(values).one();
        let l = labels(&cm.metadata.labels);
        assert_eq!(l.get(label).map(String::as_str), Some(value), "{values}");
        assert_eq!(cm.metadata.namespace.as_deref(), Some(namespace));
        let data = cm.data.expect("data");
        let mut want: serde_json::Value =
            serde_json::from_str(&dashboard_file()).expect("the dashboard is JSON");
        want["uid"] = "shop-lh-leasehold".into();
        want["title"] = "leasehold (shop/lh)".into();
        let got: serde_json::Value = serde_json::from_str(&data["leasehold.json"])
            .expect("the ConfigMap's dashboard is JSON");
        assert_eq!(
            got, want,
            "the ConfigMap carries dashboards/leasehold.json with the release's uid and title"
        );
    }
    let cm: ConfigMap = render(cases[1].0).one();
    assert_eq!(
        cm.metadata.annotations.expect("annotations")["grafana_folder"],
        "Platform"
    );
}

/// The uid and title of the dashboard the chart renders for `release` in `namespace`.
fn dashboard_identity(release: &str, namespace: &str, values: &str) -> (String, String) {
    let values = format!("grafanaDashboard:\n  enabled: true\n{values}");
    let cm: ConfigMap = helm::render_with(release, namespace, &values, &[]).one();
    let d: serde_json::Value =
        serde_json::from_str(&cm.data.expect("data")["leasehold.json"]).expect("JSON");
    (
        d["uid"].as_str().expect("uid").to_owned(),
        d["title"].as_str().expect("title").to_owned(),
    )
}

#[test]
fn each_release_gets_its_own_dashboard_uid_within_grafanas_40_characters() {
    let long_ns = "payments-eu-west-1-production";
    let cases = [
        ("lh", "shop", "", "shop-lh-leasehold"),
        ("leasehold", "leasehold", "", "leasehold-leasehold"),
        ("lh", "billing", "", "billing-lh-leasehold"),
        (
            "lh",
            "shop",
            "  uid: ops-leader-election\n",
            "ops-leader-election",
        ),
    ];
    let mut seen = BTreeSet::new();
    for (release, namespace, values, want) in cases {
        let (uid, title) = dashboard_identity(release, namespace, values);
        assert_eq!(uid, want, "{namespace}/{release} {values}");
        assert_eq!(title, format!("leasehold ({namespace}/{release})"));
        seen.insert(uid);
    }
    assert_eq!(seen.len(), cases.len(), "no two releases share a uid");

    // Past 40 characters: the first 31, a dash and 8 hex digits of the full name's hash, so
    // that two long names with the same beginning still differ.
    let (a, _) = dashboard_identity("orders-scheduler", long_ns, "");
    let (b, _) = dashboard_identity("orders-reconciler", long_ns, "");
    for uid in [&a, &b] {
        assert_eq!(uid.len(), 40, "{uid}");
        assert!(uid.starts_with("payments-eu-west-1-production-o"), "{uid}");
        assert!(
            uid[32..].chars().all(|c| c.is_ascii_hexdigit()),
            "{uid}: ends in 8 hex digits"
        );
    }
    assert_ne!(a, b);
}

#[test]
fn the_dashboard_shows_what_the_issue_asks_with_namespace_and_lease_variables() {
    let d: serde_json::Value =
        serde_json::from_str(&dashboard_file()).expect("the dashboard is JSON");
    let variables: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .map(|v| v["name"].as_str().expect("name"))
        .collect();
    assert_eq!(variables, ["datasource", "namespace", "lease"]);
    let panels = d["panels"].as_array().expect("panels");
    let titles: BTreeSet<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().expect("title"))
        .collect();
    for want in [
        "Who leads, over time",
        "Transitions",
        "Validity left",
        "Renewal latency",
        "Step-downs by reason",
        "Redis errors by kind",
        "Readiness, per replica",
    ] {
        assert!(titles.contains(want), "no panel {want:?}: {titles:?}");
    }
    let ids: BTreeSet<i64> = panels
        .iter()
        .map(|p| p["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    for p in panels {
        let title = p["title"].as_str().unwrap_or_default();
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_i64().expect("x"), g["w"].as_i64().expect("w"));
        assert!(x >= 0 && w > 0 && x + w <= 24, "{title}: gridPos {g}");
    }
    let queries = dashboard_queries(&d);
    assert!(queries.len() >= titles.len());
    for (title, expr) in &queries {
        for filter in ["namespace=~\"$namespace\"", "lease=~\"$lease\""] {
            assert!(expr.contains(filter), "{title}: {expr} lacks {filter}");
        }
    }
    let renewal: Vec<&String> = queries
        .iter()
        .filter(|(t, _)| t == "Renewal latency")
        .map(|(_, e)| e)
        .collect();
    assert!(
        renewal.len() == 3 && renewal.iter().all(|e| e.starts_with("histogram_quantile(")),
        "renewal latency shows quantiles: {renewal:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The NetworkPolicy

fn port_numbers(ports: &[k8s_openapi::api::networking::v1::NetworkPolicyPort]) -> Vec<String> {
    ports
        .iter()
        .map(|p| {
            let port = match p.port.as_ref().expect("a port") {
                IntOrString::Int(n) => n.to_string(),
                IntOrString::String(s) => s.clone(),
            };
            format!("{port}/{}", p.protocol.as_deref().unwrap_or("TCP"))
        })
        .collect()
}

#[test]
fn the_network_policy_admits_the_http_port_and_reaches_only_redis_the_api_and_dns() {
    let r = render(&extra_value_sets()[0].1);
    let np: NetworkPolicy = r.one();
    let spec = np.spec.expect("spec");
    let d: Deployment = r.one();
    assert_eq!(
        spec.pod_selector.clone().expect("podSelector").match_labels,
        d.spec.selector.match_labels,
        "it selects the Deployment's pods"
    );
    assert_eq!(
        spec.policy_types.clone().expect("policyTypes"),
        ["Ingress", "Egress"]
    );
    let ingress = spec.ingress.clone().expect("ingress");
    assert_eq!(ingress.len(), 1);
    let container = leasehold_container(&d);
    let http = container
        .ports
        .expect("ports")
        .into_iter()
        .find(|p| p.name.as_deref() == Some("http"))
        .expect("a port named http");
    assert_eq!(
        port_numbers(ingress[0].ports.as_deref().expect("ports")),
        [format!("{}/TCP", http.name.expect("name"))]
    );
    let from = ingress[0].from.clone().expect("from");
    assert_eq!(
        from.len(),
        2,
        "the peer given and the helm test Pod: {from:?}"
    );
    assert_eq!(
        from[0]
            .namespace_selector
            .clone()
            .expect("namespaceSelector")
            .match_labels
            .expect("labels")["kubernetes.io/metadata.name"],
        "monitoring"
    );
    let test_pod: Pod = r.one();
    let test_labels = labels(&test_pod.metadata.labels);
    for (k, v) in from[1]
        .pod_selector
        .clone()
        .expect("podSelector")
        .match_labels
        .expect("labels")
    {
        assert_eq!(
            test_labels.get(&k),
            Some(&v),
            "the peer selects the helm test Pod"
        );
    }
    let egress: Vec<Vec<String>> = spec
        .egress
        .expect("egress")
        .iter()
        .map(|e| port_numbers(e.ports.as_deref().expect("ports")))
        .collect();
    assert_eq!(
        egress,
        [
            vec!["6379/TCP"],
            vec!["443/TCP", "6443/TCP"],
            vec!["53/UDP", "53/TCP"]
        ]
    );

    // Without peers: the HTTP port from anywhere; with every peer given, each rule names them.
    let np: NetworkPolicy = render(&extra_value_sets()[1].1).one();
    let spec = np.spec.expect("spec");
    assert!(spec.ingress.expect("ingress")[0].from.is_none());
    let np: NetworkPolicy = render(&extra_value_sets()[2].1).one();
    let spec = np.spec.expect("spec");
    let egress = spec.egress.expect("egress");
    assert_eq!(egress.len(), 4, "redis, api, dns and the extra rule");
    let cidrs: Vec<String> = egress[..3]
        .iter()
        .map(|e| {
            e.to.clone().expect("to")[0]
                .ip_block
                .clone()
                .expect("ipBlock")
                .cidr
        })
        .collect();
    assert_eq!(cidrs, ["10.20.0.0/16", "172.16.0.1/32", "169.254.20.10/32"]);
    assert_eq!(
        port_numbers(egress[0].ports.as_deref().expect("ports")),
        ["6379/TCP", "26379/TCP"]
    );
    assert_eq!(
        spec.ingress.expect("ingress").len(),
        2,
        "the HTTP port and the extra rule"
    );
}

// ---------------------------------------------------------------------------------------------
// The helm test Pod
