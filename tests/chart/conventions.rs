//! The keys Helm users carry from chart to chart, rendered by the real helm: commonLabels and
//! commonAnnotations on every object, extraObjects through `tpl`, revisionHistoryLimit, the
//! ServiceMonitor's scrapeTimeout and relabelings, and the security contexts OpenShift accepts
//! (its restricted SCC assigns the user, group and fsGroup). Each has its schema or template
//! refusal with helm's words. Image registries are in chart_extras (beside digests), the
//! disruption budget's minAvailable in chart_rollout, the alerts' switches in alerts.rs.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSecurityContext, Secret};

use harness::helm::{
    self, Rendered, deployment, labels, leasehold_container, pod_spec, refused, render, render_with,
};
use harness::prometheus::rule_values;

/// Every object the chart can render, with commonLabels and commonAnnotations, and annotations
/// of their own on the Service and the ServiceAccount (one of them on a common key).
fn everything_with_common_metadata() -> String {
    rule_values(
        "",
        "commonLabels:\n  team: platform\n  example.com/tier: \"2\"\ncommonAnnotations:\n  example.com/owner: platform@example.com\n  example.com/ticket: OPS-1\nservice:\n  annotations:\n    example.com/ticket: OPS-2\nserviceAccount:\n  annotations:\n    eks.amazonaws.com/role-arn: arn:aws:iam::1:role/lh\nserviceMonitor:\n  enabled: true\ngrafanaDashboard:\n  enabled: true\nhelmTest:\n  enabled: true\nnetworkPolicy:\n  enabled: true\npodAnnotations:\n  example.com/pod: scraped\n",
    )
}

fn meta_map(doc: &serde_yaml::Value, key: &str) -> BTreeMap<String, String> {
    serde_yaml::from_value(doc["metadata"][key].clone()).unwrap_or_default()
}

#[test]
fn common_labels_and_annotations_reach_every_object_and_the_pods() {
    let r = render(&everything_with_common_metadata());
    let kinds = r.kinds();
    for want in [
        "Deployment",
        "Service",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "PodDisruptionBudget",
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
        "NetworkPolicy",
        "Pod",
    ] {
        assert!(
            kinds.iter().any(|k| k == want),
            "{want} not rendered: {kinds:?}"
        );
    }
    for doc in &r.docs {
        let what = format!(
            "{} {}",
            doc["kind"].as_str().unwrap_or_default(),
            doc["metadata"]["name"].as_str().unwrap_or_default()
        );
        let l = meta_map(doc, "labels");
        assert_eq!(
            l.get("team").map(String::as_str),
            Some("platform"),
            "{what}"
        );
        assert_eq!(
            l.get("example.com/tier").map(String::as_str),
            Some("2"),
            "{what}"
        );
        assert!(
            l.contains_key("app.kubernetes.io/instance"),
            "{what}: the chart's own labels stay"
        );
        let a = meta_map(doc, "annotations");
        assert_eq!(
            a.get("example.com/owner").map(String::as_str),
            Some("platform@example.com"),
            "{what}"
        );
        let ticket = if doc["kind"] == "Service" && doc["metadata"]["name"] == "lh-leasehold" {
            "OPS-2"
        } else {
            "OPS-1"
        };
        assert_eq!(
            a.get("example.com/ticket").map(String::as_str),
            Some(ticket),
            "{what}: an object's own annotation wins over the common one"
        );
    }
    let sa = r.untyped("ServiceAccount");
    assert_eq!(
        meta_map(&sa[0], "annotations")["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::1:role/lh"
    );
    let test_pod: Pod = r.one();
    assert_eq!(
        test_pod.metadata.annotations.expect("annotations")["helm.sh/hook"],
        "test",
        "the helm test Pod stays a test hook"
    );

    // The pods carry the labels (not the annotations: podAnnotations are theirs), and the
    // Deployment's selector stays the chart's own, so that commonLabels can change later.
    let (d, _) = deployment(&r);
    let template = d.spec.template.metadata.clone().expect("template metadata");
    let pod_labels = labels(&template.labels);
    assert_eq!(pod_labels.get("team").map(String::as_str), Some("platform"));
    let pod_annotations = labels(&template.annotations);
    assert_eq!(
        pod_annotations.keys().collect::<Vec<_>>(),
        ["example.com/pod"],
        "the pod template's annotations are podAnnotations alone"
    );
    let selector = d.spec.selector.match_labels.clone().expect("matchLabels");
    assert_eq!(
        selector.keys().collect::<Vec<_>>(),
        ["app.kubernetes.io/instance", "app.kubernetes.io/name"]
    );
    let dir = tempfile::tempdir().expect("temp dir");
    helm::assert_valid_for_kubernetes("common metadata", &r, &dir.path().join("common.yaml"));
}

#[test]
fn without_common_metadata_no_object_gains_an_annotations_block() {
    let r = render("");
    for doc in &r.docs {
        assert!(
            doc["metadata"]["annotations"].is_null(),
            "{:?} has annotations by default",
            doc["kind"]
        );
    }
}

#[test]
fn common_or_pod_labels_that_would_take_the_charts_own_keys_are_refused() {
    for (values, words) in [
        (
            "commonLabels:\n  app.kubernetes.io/name: other\n",
            "commonLabels: app.kubernetes.io/name is one of the chart's own labels",
        ),
        (
            "commonLabels:\n  helm.sh/chart: other\n",
            "commonLabels: helm.sh/chart is one of the chart's own labels",
        ),
        (
            "commonLabels:\n  leasehold.io/leader: \"true\"\n",
            "commonLabels: leasehold.io/leader is the leader label (leaderLabel)",
        ),
        (
            "leaderLabel: example.com/active\ncommonLabels:\n  example.com/active: \"true\"\n",
            "commonLabels: example.com/active is the leader label",
        ),
        // The pods' own labels by the same rules: rendered, one unselected the Deployment's
        // pods (refused by the API server), the other made every pod the leader's to the Service.
        (
            "podLabels:\n  app.kubernetes.io/instance: other\n",
            "podLabels: app.kubernetes.io/instance is one of the labels that select the release's pods",
        ),
        (
            "podLabels:\n  leasehold.io/leader: \"true\"\n",
            "podLabels: leasehold.io/leader is the leader label (leaderLabel)",
        ),
        // A leader label that selects the pods: the Service's selector named it twice, and
        // leasehold would take the selector's key off the followers (rendered, unrefused).
        (
            "leaderLabel: app.kubernetes.io/instance\n",
            "leaderLabel: app.kubernetes.io/instance is a label that selects the release's pods",
        ),
        (
            "leaderLabel: pod-template-hash\n",
            "leaderLabel: pod-template-hash is a label that selects the release's pods",
        ),
    ] {
        let err = refused(values);
        assert!(err.contains(words), "{values}: {err}");
    }
    // The pods carry the selector's keys alone of the chart's: others are the user's to set.
    let rendered = helm::render("podLabels:\n  app.kubernetes.io/version: \"1.2\"\n");
    let (deployment, _) = helm::deployment(&rendered);
    let labels = deployment.spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/version"], "1.2");
}

harness::schema_rule! {
    schema_refuses_a_common_label_value_kubernetes_would_refuse:
        "commonLabels:\n  team: platform team\n" => ["at '/commonLabels/team': 'platform team' does not match pattern"];
    schema_refuses_a_common_label_key_kubernetes_would_refuse:
        "commonLabels:\n  bad key: x\n" => ["invalid propertyName 'bad key'"];
    schema_refuses_common_annotations_that_are_no_strings:
        "commonAnnotations:\n  replicas: 3\n" => ["at '/commonAnnotations/replicas': got number, want string"];
    schema_refuses_extra_objects_that_are_no_list:
        "extraObjects:\n  kind: ConfigMap\n" => ["at '/extraObjects': got object, want array"];
    schema_refuses_a_negative_revision_history_limit:
        "revisionHistoryLimit: -1\n" => ["at '/revisionHistoryLimit': minimum: got -1, want 0"];
    schema_refuses_a_scrape_timeout_prometheus_cannot_read:
        "serviceMonitor:\n  scrapeTimeout: 10 seconds\n" => ["at '/serviceMonitor/scrapeTimeout': '10 seconds' does not match pattern"];
    schema_refuses_prometheus_snake_case_in_a_relabeling:
        "serviceMonitor:\n  relabelings:\n    - source_labels: [pod]\n      target_label: instance\n" => ["at '/serviceMonitor/relabelings/0': additional properties", "source_labels"];
    schema_refuses_a_relabeling_action_prometheus_does_not_know:
        "serviceMonitor:\n  metricRelabelings:\n    - action: delete\n" => ["at '/serviceMonitor/metricRelabelings/0/action': value must be one of"];
    schema_refuses_an_openshift_switch_that_is_not_auto_force_or_disabled:
        "global:\n  compatibility:\n    openshift:\n      adaptSecurityContext: \"true\"\n" => ["at '/global/compatibility/openshift/adaptSecurityContext': value must be one of 'auto', 'force', 'disabled'"];
}

// ---------------------------------------------------------------------------------------------
// extraObjects

#[test]
fn extra_objects_render_through_tpl_as_maps_and_as_strings() {
    let values = "extraObjects:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: '{{ include \"leasehold.fullname\" . }}-settings'\n      namespace: '{{ .Release.Namespace }}'\n    data:\n      lease: '{{ .Values.timing.leaseDurationSeconds }}'\n  - |\n    apiVersion: v1\n    kind: Secret\n    metadata:\n      name: {{ .Release.Name }}-token\n      namespace: {{ .Release.Namespace }}\n    stringData:\n      replicas: \"{{ .Values.replicaCount }}\"\n";
    let r = render(values);
    let cm: ConfigMap = r.one();
    assert_eq!(cm.metadata.name.as_deref(), Some("lh-leasehold-settings"));
    assert_eq!(cm.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(cm.data.expect("data")["lease"], "15");
    let secret: Secret = r.one();
    assert_eq!(secret.metadata.name.as_deref(), Some("lh-token"));
    assert_eq!(secret.string_data.expect("stringData")["replicas"], "3");
    // The chart's own objects are all still there, each once.
    let d: Deployment = r.one();
    assert_eq!(d.metadata.name.as_deref(), Some("lh-leasehold"));
    let dir = tempfile::tempdir().expect("temp dir");
    helm::assert_valid_for_kubernetes("extraObjects", &r, &dir.path().join("extra.yaml"));
    assert_eq!(
        render("").kinds(),
        render("extraObjects: []\n").kinds(),
        "no extraObjects, nothing more"
    );
}

// ---------------------------------------------------------------------------------------------
// revisionHistoryLimit and the ServiceMonitor

#[test]
fn the_revision_history_limit_is_the_value_given() {
    for (values, want) in [
        ("", 5),
        ("revisionHistoryLimit: 0\n", 0),
        ("revisionHistoryLimit: 20\n", 20),
    ] {
        let (d, _) = deployment(&render(values));
        assert_eq!(d.spec.revision_history_limit, Some(want), "{values}");
    }
}

fn service_monitor_endpoint(r: &Rendered) -> serde_yaml::Value {
    let monitors = r.untyped("ServiceMonitor");
    assert_eq!(monitors.len(), 1);
    monitors[0]["spec"]["endpoints"][0].clone()
}

#[test]
fn the_service_monitor_carries_the_scrape_timeout_and_relabelings() {
    let endpoint = service_monitor_endpoint(&render("serviceMonitor:\n  enabled: true\n"));
    for key in ["scrapeTimeout", "relabelings", "metricRelabelings"] {
        assert!(
            endpoint[key].is_null(),
            "{key} rendered by default: {endpoint:?}"
        );
    }
    let endpoint = service_monitor_endpoint(&render(
        "serviceMonitor:\n  enabled: true\n  interval: 15s\n  scrapeTimeout: 15s\n  relabelings:\n    - sourceLabels: [__meta_kubernetes_pod_node_name]\n      targetLabel: node\n  metricRelabelings:\n    - sourceLabels: [__name__]\n      regex: process_.*\n      action: drop\n",
    ));
    assert_eq!(endpoint["interval"].as_str(), Some("15s"));
    assert_eq!(endpoint["scrapeTimeout"].as_str(), Some("15s"));
    assert_eq!(
        endpoint["relabelings"][0]["targetLabel"].as_str(),
        Some("node")
    );
    assert_eq!(
        endpoint["relabelings"][0]["sourceLabels"][0].as_str(),
        Some("__meta_kubernetes_pod_node_name")
    );
    assert_eq!(
        endpoint["metricRelabelings"][0]["action"].as_str(),
        Some("drop")
    );
}

#[test]
fn a_scrape_timeout_longer_than_the_interval_is_refused() {
    for (values, words) in [
        (
            "serviceMonitor:\n  enabled: true\n  scrapeTimeout: 1m\n",
            "serviceMonitor.scrapeTimeout 1m must not exceed serviceMonitor.interval 30s",
        ),
        (
            "serviceMonitor:\n  enabled: true\n  interval: 500ms\n  scrapeTimeout: 1s\n",
            "serviceMonitor.scrapeTimeout 1s must not exceed serviceMonitor.interval 500ms",
        ),
    ] {
        let err = refused(values);
        assert!(err.contains(words), "{values}: {err}");
    }
}

// ---------------------------------------------------------------------------------------------
// OpenShift: the platform assigns the user, group and fsGroup

const OPENSHIFT_API: [&str; 2] = ["--api-versions", "security.openshift.io/v1"];

/// The pod securityContexts of the Deployment and of the `helm test` Pod.
fn pod_contexts(r: &Rendered) -> Vec<PodSecurityContext> {
    let (d, _) = deployment(r);
    let mut all = vec![pod_spec(&d).security_context.expect("pod securityContext")];
    for pod in r.all::<Pod>() {
        all.push(
            pod.spec
                .expect("spec")
                .security_context
                .expect("securityContext"),
        );
    }
    all
}

fn fixed_ids(c: &PodSecurityContext) -> (Option<i64>, Option<i64>, Option<i64>) {
    (c.run_as_user, c.run_as_group, c.fs_group)
}

#[test]
fn on_openshift_the_pods_leave_the_user_group_and_fs_group_to_the_platform() {
    let with_test = "helmTest:\n  enabled: true\n";
    let force = "helmTest:\n  enabled: true\nglobal:\n  compatibility:\n    openshift:\n      adaptSecurityContext: force\n";
    let disabled = "helmTest:\n  enabled: true\nglobal:\n  compatibility:\n    openshift:\n      adaptSecurityContext: disabled\n";
    for (what, r, fixed) in [
        ("a cluster without OpenShift's API", render(with_test), true),
        (
            "OpenShift, auto",
            render_with("lh", "shop", with_test, &OPENSHIFT_API),
            false,
        ),
        ("force, without a cluster", render(force), false),
        (
            "OpenShift, disabled",
            render_with("lh", "shop", disabled, &OPENSHIFT_API),
            true,
        ),
    ] {
        let contexts = pod_contexts(&r);
        assert_eq!(
            contexts.len(),
            2,
            "{what}: the Deployment's and the test Pod's"
        );
        for c in &contexts {
            if fixed {
                assert!(c.run_as_user.is_some_and(|u| u > 0), "{what}: {c:?}");
                assert!(c.run_as_group.is_some(), "{what}: {c:?}");
            } else {
                assert_eq!(
                    (c.run_as_user, c.run_as_group),
                    (None, None),
                    "{what}: {c:?}"
                );
                assert_eq!(c.fs_group, None, "{what}: {c:?}");
            }
            // What the restricted SCC asks for stays.
            assert_eq!(c.run_as_non_root, Some(true), "{what}");
            assert_eq!(
                c.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
                Some("RuntimeDefault"),
                "{what}"
            );
        }
        let (d, _) = deployment(&r);
        let sc = leasehold_container(&d)
            .security_context
            .expect("container securityContext");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
        assert_eq!(sc.run_as_non_root, Some(true), "{what}");
    }

    // A user given in the container's context goes too; Helm's own null drops one key anywhere.
    let r = render_with(
        "lh",
        "shop",
        "containerSecurityContext:\n  runAsUser: 1000\n",
        &OPENSHIFT_API,
    );
    let (d, _) = deployment(&r);
    let sc = leasehold_container(&d)
        .security_context
        .expect("container securityContext");
    assert_eq!(sc.run_as_user, None);
    let r = render("podSecurityContext:\n  runAsUser: null\n  fsGroup: null\n");
    let (d, _) = deployment(&r);
    let c = pod_spec(&d).security_context.expect("pod securityContext");
    assert_eq!(fixed_ids(&c), (None, Some(65532), None));
    let dir = tempfile::tempdir().expect("temp dir");
    helm::assert_valid_for_kubernetes(
        "OpenShift",
        &render(force),
        &dir.path().join("openshift.yaml"),
    );
}

/// Every object's name fits its kind with the longest release name helm takes (53 characters,
/// a full name of 63): a Service's name is a DNS label of at most 63 characters, and the metrics
/// Service's was the full name and `-metrics`, refused by the API server past a release name of
/// 45 characters, with the ServiceMonitor, the `helm test` Pod and the alerts that use it.
#[test]
fn every_name_fits_its_kind_with_the_longest_release_name() {
    let release = "r".repeat(53);
    let values = format!(
        "{}serviceMonitor:\n  enabled: true\nprometheusRule:\n  enabled: true\ngrafanaDashboard:\n  enabled: true\nnetworkPolicy:\n  enabled: true\n",
        helm::HELM_TEST_IN_LEADER_MODE
    );
    let rendered = render_with(&release, "shop", &values, &[]);
    let named = |d: &serde_yaml::Value| {
        let name = d["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (d["kind"].as_str().unwrap_or_default().to_owned(), name)
    };
    use leasehold::k8s::names::{MAX_OBJECT_NAME_LEN, is_dns_label};
    for (kind, name) in rendered.docs.iter().map(named) {
        let fits = match kind.as_str() {
            "Service" => is_dns_label(&name),
            _ => name.len() <= MAX_OBJECT_NAME_LEN,
        };
        assert!(fits, "{kind} {name}: {} characters", name.len());
    }
    let metrics = rendered
        .docs
        .iter()
        .map(named)
        .find(|(kind, name)| kind == "Service" && name.ends_with("-metrics"))
        .map(|(_, name)| name)
        .expect("the metrics Service");
    // What finds the metrics Service by name: the test Pod's address and the alerts' job.
    let pod: Pod = rendered.one();
    let env = serde_yaml::to_string(&pod.spec).unwrap_or_default();
    assert!(env.contains(&format!("{metrics}.shop.svc.")), "{env}");
    assert!(
        rendered.yaml.contains(&format!("job=\"{metrics}\"")),
        "the alerts' job is not {metrics}"
    );
}
