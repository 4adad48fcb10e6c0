//! The chart's alerts, checked with Prometheus's own tools: `promtool check rules` on the rules
//! that the real helm renders, `promtool test rules` with a firing and a quiet case for every
//! alert (tests/chart/alerts/*.test.yaml), the waits derived from the timing values, the runbook
//! sections the alerts link to. tests/observability/prometheus.rs loads the same rules into a real server.

use std::collections::BTreeSet;

use harness::helm::{self, refused};
use harness::prometheus::{
    FAST_TIMING_VALUES, FLAPPING_AT_ONCE, RUNBOOK_URL, alerts, rule_spec, rule_values, rules_file,
};
use testbed::prometheus::run_promtool;

/// The rules rendered with `values` into a fresh directory as rules.yaml, beside `test_file`.
fn rules_dir(values: &str, test_file: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("rules.yaml"), rules_file(values)).expect("write rules");
    if let Some(name) = test_file {
        let source = harness::repo().join("tests/chart/alerts").join(name);
        std::fs::copy(&source, dir.path().join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    }
    dir
}

const RULE_VALUE_SETS: &[(&str, &str, &str)] = &[
    ("defaults", "", ""),
    (
        "fast timing, short scrapes",
        FLAPPING_AT_ONCE,
        FAST_TIMING_VALUES,
    ),
    (
        "own selector, alert labels, a named lease",
        "  selector: 'job=\"leasehold\", cluster=\"eu-1\"'\n  alertLabels:\n    team: platform\n  labels:\n    release: prometheus\n",
        "leaseName: billing/jobs\n",
    ),
];

#[test]
fn the_rendered_rules_pass_promtool_check_rules() {
    for (name, rules, values) in RULE_VALUE_SETS {
        let dir = rules_dir(&rule_values(rules, values), None);
        let (code, out) = run_promtool(dir.path(), &["check", "rules", "rules.yaml"], None);
        assert_eq!(code, 0, "{name}: promtool check rules:\n{out}");
        assert!(out.contains("SUCCESS: 9 rules found"), "{name}: {out}");
    }
}

/// The clock alert's step-down part outlasts its `for: 5m` with any pause window: with one of
/// 5m it was true for 5m after a step-down, and never fired.
#[test]
fn a_clock_step_warns_with_a_pause_window_no_longer_than_the_alerts_for() {
    let file = "short-pause-window.test.yaml";
    let dir = rules_dir(&rule_values("  pauseWindow: 5m\n", ""), Some(file));
    let (code, out) = run_promtool(dir.path(), &["test", "rules", file], None);
    assert_eq!(code, 0, "promtool test rules {file}:\n{out}");
}

#[test]
fn every_alert_fires_and_stays_quiet_in_the_promtool_unit_tests() {
    let file = "default-values.test.yaml";
    let dir = rules_dir(&rule_values("", ""), Some(file));
    let (code, out) = run_promtool(dir.path(), &["test", "rules", file], None);
    assert_eq!(code, 0, "promtool test rules {file}:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");

    // Every alert the chart renders has a case where it fires and one where it must not.
    let tests: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(harness::repo().join("tests/chart/alerts").join(file))
            .expect("read"),
    )
    .expect("the test file parses");
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for test in tests["tests"].as_sequence().expect("tests") {
        for case in test["alert_rule_test"].as_sequence().expect("cases") {
            let name = case["alertname"].as_str().expect("alertname").to_owned();
            let expected = case["exp_alerts"].as_sequence().map_or(0, Vec::len);
            if expected > 0 {
                fires.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    let rendered: BTreeSet<String> = alerts(&rule_spec(&helm::render(&rule_values("", ""))))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(fires, rendered, "alerts with a firing case");
    assert_eq!(quiet, rendered, "alerts with a quiet case");
}

/// The alert names of docs/RUNBOOK.md's `## ` sections, with each section's text.
fn runbook_sections() -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(harness::repo().join("docs/RUNBOOK.md")).expect("docs/RUNBOOK.md");
    text.split("\n## ")
        .skip(1)
        .map(|section| {
            let (title, body) = section.split_once('\n').unwrap_or((section, ""));
            (title.trim().to_owned(), body.to_owned())
        })
        .collect()
}

#[test]
fn every_alert_has_a_summary_a_description_and_a_runbook_section() {
    let spec = rule_spec(&helm::render(&rule_values("", "")));
    let sections = runbook_sections();
    let titles: BTreeSet<&str> = sections.iter().map(|(t, _)| t.as_str()).collect();
    let mut names = BTreeSet::new();
    for (name, rule) in alerts(&spec) {
        let annotations = &rule["annotations"];
        for key in ["summary", "description"] {
            let text = annotations[key].as_str().unwrap_or_default();
            assert!(text.len() > 20, "{name}: {key} is {text:?}");
        }
        assert_eq!(
            annotations["runbook_url"].as_str(),
            Some(format!("{RUNBOOK_URL}#{}", name.to_lowercase()).as_str()),
            "{name}: runbook_url names its section (GitHub's anchor of `## {name}`)"
        );
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        assert!(
            titles.contains(name.as_str()),
            "docs/RUNBOOK.md lacks `## {name}`"
        );
        names.insert(name);
    }
    assert_eq!(
        titles,
        names.iter().map(String::as_str).collect(),
        "docs/RUNBOOK.md has a section for each alert and no other"
    );
    for (title, body) in &sections {
        for part in [
            "**What it means.**",
            "**What to check first.**",
            "**What to do.**",
        ] {
            assert!(body.contains(part), "RUNBOOK.md, {title}: lacks {part}");
        }
    }
}

/// The rendered rule of `alert`.
fn rule(spec: &serde_yaml::Value, alert: &str) -> serde_yaml::Value {
    alerts(spec)
        .into_iter()
        .find(|(name, _)| name == alert)
        .unwrap_or_else(|| panic!("no alert {alert}"))
        .1
}

/// A renewal attempt is cut at its bound (`Timing::renew_attempt_timeout`), so a threshold at
/// half the renew deadline, above that bound, could never be crossed: the chart's is half the
/// bound, as the binary computes it.
#[test]
fn the_slow_renewal_threshold_is_half_of_what_the_binary_gives_one_attempt() {
    let spec = rule_spec(&helm::render(&rule_values("", "")));
    let expr = rule(&spec, "LeaseholdRenewalSlow")["expr"]
        .as_str()
        .expect("expr")
        .to_owned();
    let half = leasehold::elector::Timing::default().renew_attempt_timeout() / 2;
    let threshold = format!("> {:.3}", half.as_secs_f64());
    assert!(
        expr.trim_end().ends_with(&threshold),
        "{threshold}:\n{expr}"
    );
}

#[test]
fn alert_waits_derive_from_the_timing_and_the_scrape_interval() {
    // (timing and scrape interval; the `for` of no leader, multiple leaders, redis unreachable and
    // slow renewals; the slow-renewal threshold in seconds)
    let cases = [
        ("", ["60s", "60s", "60s", "120s"], "1.667"),
        (
            "serviceMonitor:\n  interval: 5s\n",
            ["30s", "10s", "10s", "60s"],
            "1.667",
        ),
        (FAST_TIMING_VALUES, ["2s", "1s", "1s", "6s"], "0.1"),
        (
            "timing:\n  leaseDurationSeconds: 60\n  renewDeadlineSeconds: 40\n  retryPeriodSeconds: 10\nserviceMonitor:\n  interval: 1m30s\n",
            ["180s", "180s", "180s", "360s"],
            "6.667",
        ),
        (
            "timing:\n  leaseDurationSeconds: 300\n  renewDeadlineSeconds: 200\n  retryPeriodSeconds: 20\n",
            ["600s", "60s", "200s", "600s"],
            "26",
        ),
    ];
    for (values, fors, slow) in cases {
        let spec = rule_spec(&helm::render(&rule_values("", values)));
        let got: Vec<&str> = [
            "LeaseholdNoLeader",
            "LeaseholdMultipleLeaders",
            "LeaseholdRedisUnreachable",
            "LeaseholdRenewalSlow",
        ]
        .iter()
        .map(|a| {
            spec["groups"][0]["rules"]
                .as_sequence()
                .expect("rules")
                .iter()
                .find(|r| r["alert"].as_str() == Some(a))
                .and_then(|r| r["for"].as_str())
                .unwrap_or("<none>")
        })
        .collect();
        assert_eq!(got, fors, "values:\n{values}");
        let expr = rule(&spec, "LeaseholdRenewalSlow")["expr"]
            .as_str()
            .expect("expr")
            .to_owned();
        let window = fors[3];
        assert!(
            expr.trim_end().ends_with(&format!("> {slow}"))
                && expr.contains(&format!("[{window}]")),
            "values:\n{values}\nslow-renewal threshold {slow}, window {window}:\n{expr}"
        );
    }
}

#[test]
fn every_series_an_alert_reads_is_scoped_to_the_release() {
    for (rules, values, want) in [
        ("", "", "{job=\"lh-leasehold-metrics\", namespace=\"shop\""),
        (
            "  selector: 'job=\"leasehold\", cluster=\"eu-1\"'\n",
            "",
            "{job=\"leasehold\", cluster=\"eu-1\"",
        ),
    ] {
        let spec = rule_spec(&helm::render(&rule_values(rules, values)));
        for (name, rule) in alerts(&spec) {
            let expr = rule["expr"].as_str().expect("expr");
            let selectors = series_read_by(expr);
            assert!(!selectors.is_empty(), "{name}: no series in {expr}");
            for (series, selector) in selectors {
                assert!(
                    selector.starts_with(want),
                    "{name}: {series} is read without the release's selector {want}: {expr}"
                );
            }
        }
    }
}

/// The series an expression reads, each with the text from its name's end on: every name of
/// leasehold's metrics, client-go's gauge, and `up` (outside quoted label values).
fn series_read_by(expr: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let bytes = expr.as_bytes();
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if is_name(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_name(bytes[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            if word.starts_with("leasehold_")
                || word == "leader_election_master_status"
                || word == "up"
            {
                found.push((word.to_owned(), expr[i..].to_owned()));
            }
        } else {
            i += 1;
        }
    }
    found
}

#[test]
fn prometheus_rule_enabled_alone_renders_every_alert_without_a_runbook_url() {
    let values = "prometheusRule:\n  enabled: true\n";
    let lint = helm::lint_strict(values);
    assert!(lint.ok(), "{}{}", lint.stdout, lint.stderr);
    let spec = rule_spec(&helm::render(values));
    let rendered = alerts(&spec);
    assert_eq!(rendered.len(), 9, "every alert renders: {rendered:?}");
    for (name, rule) in rendered {
        let annotations = &rule["annotations"];
        assert!(
            annotations.get("runbook_url").is_none(),
            "{name}: no runbook link without prometheusRule.runbookBaseUrl: {annotations:?}"
        );
        assert!(annotations["summary"].as_str().is_some(), "{name}");
    }
    let dir = rules_dir(values, None);
    let (code, out) = run_promtool(dir.path(), &["check", "rules", "rules.yaml"], None);
    assert_eq!(code, 0, "promtool check rules:\n{out}");
}

#[test]
fn the_prometheus_rule_renders_only_when_enabled_with_its_labels() {
    assert!(helm::render("").untyped("PrometheusRule").is_empty());
    let r = helm::render(&rule_values("  labels:\n    release: prometheus\n", ""));
    let rules = r.untyped("PrometheusRule");
    assert_eq!(rules.len(), 1);
    let meta = &rules[0]["metadata"];
    assert_eq!(meta["namespace"].as_str(), Some("shop"));
    assert_eq!(meta["labels"]["release"].as_str(), Some("prometheus"));
    assert_eq!(
        meta["labels"]["app.kubernetes.io/instance"].as_str(),
        Some("lh")
    );
}

#[test]
fn an_alert_can_be_turned_off_or_given_its_own_severity_and_promtool_still_accepts_the_rules() {
    let overrides = "  alerts:\n    LeaseholdRenewalSlow:\n      enabled: false\n    LeaseholdLeadershipFlapping:\n      enabled: false\n    LeaseholdNoLeader:\n      severity: page\n    LeaseholdRedisMayEvictLease:\n      severity: info\n";
    let values = rule_values(overrides, "");
    let spec = rule_spec(&helm::render(&values));
    let rendered: BTreeSet<String> = alerts(&spec).into_iter().map(|(n, _)| n).collect();
    let all: BTreeSet<String> = alerts(&rule_spec(&helm::render(&rule_values("", ""))))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let off: BTreeSet<String> = all.difference(&rendered).cloned().collect();
    assert_eq!(
        off,
        ["LeaseholdLeadershipFlapping", "LeaseholdRenewalSlow"]
            .map(str::to_owned)
            .into(),
        "exactly the alerts turned off are gone"
    );
    let severity = |alert: &str| {
        rule(&spec, alert)["labels"]["severity"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(severity("LeaseholdNoLeader"), "page");
    assert_eq!(severity("LeaseholdRedisMayEvictLease"), "info");
    assert_eq!(
        severity("LeaseholdMultipleLeaders"),
        "critical",
        "the others keep theirs"
    );
    assert_eq!(severity("LeaseholdLeaderPaused"), "warning");

    let dir = rules_dir(&values, None);
    let (code, out) = run_promtool(dir.path(), &["check", "rules", "rules.yaml"], None);
    assert_eq!(code, 0, "promtool check rules:\n{out}");
    assert!(out.contains("SUCCESS: 7 rules found"), "{out}");
}

#[test]
fn a_prometheus_rule_with_every_alert_off_or_an_unknown_alert_is_refused() {
    let every_alert_off: String = alerts(&rule_spec(&helm::render(&rule_values("", ""))))
        .into_iter()
        .map(|(name, _)| format!("    {name}:\n      enabled: false\n"))
        .collect();
    let err = refused(&rule_values(&format!("  alerts:\n{every_alert_off}"), ""));
    assert!(
        err.contains("prometheusRule.alerts: every alert is disabled; turn prometheusRule.enabled off instead"),
        "{err}"
    );
    let err = refused(&rule_values("  alertLabels:\n    severity: page\n", ""));
    assert!(
        err.contains("prometheusRule.alertLabels: severity is each alert's own label; set it with prometheusRule.alerts.<alert>.severity"),
        "{err}"
    );
    let err = refused(&rule_values(
        "  alerts:\n    LeaseholdNoLeaders:\n      enabled: false\n",
        "",
    ));
    assert!(
        err.contains(
            "at '/prometheusRule/alerts': additional properties 'LeaseholdNoLeaders' not allowed"
        ),
        "{err}"
    );
    let err = refused(&rule_values(
        "  alerts:\n    LeaseholdNoLeader:\n      severity: \"\"\n",
        "",
    ));
    assert!(
        err.contains(
            "at '/prometheusRule/alerts/LeaseholdNoLeader/severity': minLength: got 0, want 1"
        ),
        "{err}"
    );
}
