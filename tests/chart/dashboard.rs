//! The Grafana dashboard, rendered by the real helm as a ConfigMap: the sidecar's label, its
//! namespace and annotations, dashboards/leasehold.json with the release's uid and title, a uid
//! of its own for each release within Grafana's 40 characters, and the panels and variables the
//! issue asks for.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;

use harness::helm::{self, labels, render};
use harness::prometheus::dashboard_queries;

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
