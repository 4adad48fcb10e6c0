//! The chart's alert rules and dashboard for the alert tests: the values that turn the
//! PrometheusRule on, its rules rendered by the real helm as a Prometheus rules file, each alert
//! by name, and the dashboard's PromQL queries. `promtool` and the real `prometheus` server that
//! the tests run them with are `testbed::prometheus`'s.

use std::path::PathBuf;

use crate::helm::{self, Rendered};

/// Where the tests say the runbook is served; each alert links to a section of it.
pub const RUNBOOK_URL: &str = "https://docs.example.com/leasehold/RUNBOOK.md";

/// The fast timing (lease 1 s, renew deadline 0.6 s, retry period 0.2 s) and scrapes every
/// 500 ms, as chart values: the alerts' waits at their shortest.
pub const FAST_TIMING_VALUES: &str = "timing:\n  leaseDurationSeconds: 1\n  renewDeadlineSeconds: 0.6\n  retryPeriodSeconds: 0.2\nserviceMonitor:\n  interval: 500ms\n";

/// Rule values (see [`rule_values`]) under which every new leadership counts as flapping, with
/// a one-minute pause window.
pub const FLAPPING_AT_ONCE: &str =
    "  flapping:\n    transitions: 0\n    window: 30s\n  pauseWindow: 1m\n";

/// Values that turn the PrometheusRule on, with the tests' runbook URL; `rule_values` are more
/// lines under `prometheusRule:` (indented by two spaces), `values` more top-level values.
pub fn rule_values(rule_values: &str, values: &str) -> String {
    format!(
        "prometheusRule:\n  enabled: true\n  runbookBaseUrl: {RUNBOOK_URL}\n{rule_values}{values}"
    )
}

/// The rule groups of the one PrometheusRule rendered with `values` (release `lh`, namespace
/// `shop`), as a Prometheus rules file: the PrometheusRule's `spec` is exactly that format.
pub fn rules_file(values: &str) -> String {
    serde_yaml::to_string(&rule_spec(&helm::render(values))).expect("rules as YAML")
}

/// The `spec` of the one PrometheusRule in `rendered`.
pub fn rule_spec(rendered: &Rendered) -> serde_yaml::Value {
    let rules = rendered.untyped("PrometheusRule");
    assert_eq!(
        rules.len(),
        1,
        "want one PrometheusRule, rendered {:?}",
        rendered.kinds()
    );
    rules[0]["spec"].clone()
}

/// Every rule of a rules file's groups: (alert name, the rule).
pub fn alerts(spec: &serde_yaml::Value) -> Vec<(String, serde_yaml::Value)> {
    spec["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").clone())
        .map(|r| (r["alert"].as_str().expect("an alert").to_owned(), r))
        .collect()
}

/// The chart's Grafana dashboard.
pub fn dashboard_path() -> PathBuf {
    helm::chart().join("dashboards/leasehold.json")
}

/// Every PromQL expression of a dashboard's panels: (panel title, expression).
pub fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap_or_default().to_owned();
            p["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |t| (title.clone(), t["expr"].as_str().unwrap_or("").to_owned()))
        })
        .collect()
}
