//! The chart's values, refused where they make no sense: the values schema (a test per rule,
//! each with helm's words) and the rules across values that the templates check, the
//! termination grace period against leasehold's own shutdown bound among them.

use std::time::Duration;

use harness::chart_settings::{resolve, shutdown_bound};
use harness::helm::{deployment, each_value_set, pod_spec, refused, render};

#[test]
fn tls_keys_without_a_tls_secret_are_refused() {
    let err = refused("redis:\n  tls:\n    caKey: ca.crt\n");
    assert!(err.contains("redis.tls: caKey, clientCertKey and clientKeyKey name keys of a Secret; set redis.tls.existingSecret"), "{err}");
}

#[test]
fn half_of_mutual_tls_is_refused() {
    let err = refused("redis:\n  tls:\n    existingSecret: t\n    clientCertKey: tls.crt\n");
    assert!(
        err.contains("redis.tls: mutual TLS needs both clientCertKey and clientKeyKey, or neither"),
        "{err}"
    );
}

#[test]
fn a_wait_for_replicas_as_long_as_the_retry_period_is_refused() {
    let err = refused("redis:\n  waitReplicas: 1\n  waitTimeoutSeconds: 2\n");
    assert!(
        err.contains("redis.waitTimeoutSeconds 2 must be shorter than timing.retryPeriodSeconds 2"),
        "{err}"
    );
}

#[test]
fn a_sentinel_password_for_a_url_without_sentinels_is_refused() {
    let err =
        refused("redis:\n  urlKey: \"\"\n  url: redis://redis:6379\n  sentinelPasswordKey: sp\n");
    assert!(
        err.contains("redis.sentinelPasswordKey is only for redis+sentinel:// URLs"),
        "{err}"
    );
}

#[test]
fn the_termination_grace_period_exceeds_leaseholds_shutdown_bound() {
    each_value_set(|name, r| {
        let (d, c) = deployment(r);
        let bound = shutdown_bound(&resolve(&c));
        let given = pod_spec(&d)
            .termination_grace_period_seconds
            .expect("terminationGracePeriodSeconds");
        assert!(
            Duration::from_secs(u64::try_from(given).expect("positive")) > bound,
            "{name}: terminationGracePeriodSeconds {given} does not exceed the shutdown bound \
             {bound:?}"
        );
    });
}

#[test]
fn a_termination_grace_period_within_the_shutdown_bound_is_refused() {
    let err = refused("terminationGracePeriodSeconds: 9\n");
    assert!(
        err.contains("terminationGracePeriodSeconds 9 must exceed leasehold's own bound on a graceful shutdown, 9 s"),
        "{err}"
    );
    let (d, _) = deployment(&render("terminationGracePeriodSeconds: 10\n"));
    assert_eq!(pod_spec(&d).termination_grace_period_seconds, Some(10));
}

// ---------------------------------------------------------------------------------------------
// values.schema.json: one test per rule, each with helm's words

harness::schema_rule! {
    schema_refuses_an_unknown_top_level_key:
        "replicas: 3\n" => ["at '': additional properties 'replicas' not allowed"];
    schema_refuses_an_unknown_nested_key:
        "timing:\n  leaseDuration: 15s\n" => ["at '/timing': additional properties 'leaseDuration' not allowed"];
    schema_refuses_a_replica_count_that_is_not_an_integer:
        "replicaCount: three\n" => ["at '/replicaCount': got string, want integer"];
    schema_refuses_zero_replicas:
        "replicaCount: 0\n" => ["at '/replicaCount': minimum: got 0, want 1"];
    schema_refuses_an_unknown_readiness_mode:
        "readiness: always\n" => ["at '/readiness':", "'member'", "'leader'"];
    schema_refuses_a_duration_written_as_text:
        "timing:\n  leaseDurationSeconds: 15s\n" => ["at '/timing/leaseDurationSeconds': got string, want number"];
    schema_refuses_a_duration_below_ten_milliseconds:
        "timing:\n  retryPeriodSeconds: 0.001\n" => ["at '/timing/retryPeriodSeconds': minimum: got 0.001, want 0.01"];
    schema_refuses_a_duration_above_an_hour:
        "timing:\n  leaseDurationSeconds: 7200\n" => ["at '/timing/leaseDurationSeconds': maximum: got 7,200, want 3,600"];
    schema_refuses_a_grace_period_out_of_range:
        "exec:\n  gracePeriodSeconds: 0\n" => ["at '/exec/gracePeriodSeconds': minimum: got 0, want 0.01"];
    schema_refuses_a_secret_name_that_kubernetes_would_refuse:
        "redis:\n  existingSecret: Redis_Secret\n" => ["at '/redis/existingSecret': 'Redis_Secret' does not match pattern"];
    schema_refuses_an_empty_secret_name:
        "redis:\n  existingSecret: \"\"\n" => ["at '/redis/existingSecret': minLength: got 0, want 1"];
    schema_refuses_a_password_in_the_redis_url_value:
        "redis:\n  urlKey: \"\"\n  url: redis://:hunter2@redis:6379\n" => ["at '/redis/url': 'redis://:hunter2@redis:6379' does not match pattern"];
    schema_refuses_a_redis_url_without_a_redis_scheme:
        "redis:\n  urlKey: \"\"\n  url: http://redis:6379\n" => ["at '/redis/url': 'http://redis:6379' does not match pattern"];
    schema_refuses_a_negative_number_of_replicas_to_wait_for:
        "redis:\n  waitReplicas: -1\n" => ["at '/redis/waitReplicas': minimum: got -1, want 0"];
    schema_refuses_a_tls_secret_name_that_kubernetes_would_refuse:
        "redis:\n  tls:\n    existingSecret: TLS\n" => ["at '/redis/tls/existingSecret': 'TLS' does not match pattern"];
    schema_refuses_a_leader_label_that_is_no_label_key:
        "leaderLabel: \"leader label\"\n" => ["at '/leaderLabel': 'leader label' does not match pattern"];
    schema_refuses_an_unknown_pull_policy:
        "image:\n  pullPolicy: Sometimes\n" => ["at '/image/pullPolicy':", "'Always'", "'IfNotPresent'", "'Never'"];
    schema_refuses_an_http_port_out_of_range:
        "http:\n  port: 70000\n" => ["at '/http/port': maximum: got 70,000, want 65,535"];
    schema_refuses_a_service_port_out_of_range:
        "service:\n  port: 0\n" => ["at '/service/port': minimum: got 0, want 1"];
    schema_refuses_an_unknown_service_type:
        "service:\n  type: ExternalName\n" => ["at '/service/type':", "'ClusterIP'"];
    schema_refuses_a_disruption_budget_that_allows_no_eviction:
        "podDisruptionBudget:\n  maxUnavailable: 0\n" => ["at '/podDisruptionBudget/maxUnavailable': 'oneOf' failed", "minimum: got 0, want 1"];
    schema_refuses_an_unknown_strategy_type:
        "strategy:\n  type: BlueGreen\n" => ["at '/strategy/type':", "'RollingUpdate'", "'Recreate'"];
    schema_refuses_a_termination_grace_period_that_is_not_a_whole_number:
        "terminationGracePeriodSeconds: 30s\n" => ["at '/terminationGracePeriodSeconds': got string, want null or integer"];
    schema_refuses_an_unknown_log_format:
        "logs:\n  format: xml\n" => ["at '/logs/format':", "'json'"];
    schema_refuses_exec_mode_without_a_command_or_an_image:
        "exec:\n  enabled: true\n" => ["at '/exec/command': minItems: got 0, want 1", "at '/exec/image/repository': minLength: got 0, want 1"];
    schema_refuses_a_relative_leasehold_path:
        "exec:\n  leaseholdPath: bin/leasehold\n" => ["at '/exec/leaseholdPath': 'bin/leasehold' does not match pattern '^/'"];
    schema_refuses_an_extra_argument_that_is_no_flag:
        "extraArgs: [\"--\", worker]\n" => ["at '/extraArgs/0'", "at '/extraArgs/1': 'worker' does not match pattern '^-'"];
    schema_refuses_a_lease_name_without_a_name_after_its_namespace:
        "leaseName: \"shop/\"\n" => ["at '/leaseName': 'shop/' does not match pattern"];
    schema_refuses_a_lease_name_with_braces:
        "leaseName: \"web{1}\"\n" => ["at '/leaseName': 'web{1}' does not match pattern"];
    schema_refuses_a_key_prefix_with_whitespace:
        "redis:\n  keyPrefix: \"my app:\"\n" => ["at '/redis/keyPrefix': 'my app:' does not match pattern"];
    schema_refuses_a_key_prefix_with_a_no_break_space:
        "redis:\n  keyPrefix: \"my\\u00a0app:\"\n" => ["at '/redis/keyPrefix':", "does not match pattern"];
    schema_refuses_a_username_of_whitespace:
        "redis:\n  username: \" \"\n" => ["at '/redis/username': ' ' does not match pattern"];
    schema_refuses_a_bind_address_in_brackets:
        "http:\n  bindAddress: \"[::]\"\n" => ["at '/http/bindAddress': '[::]' does not match pattern"];
    // The chart adds http.port: `0.0.0.0:9000` rendered `--http-addr=[0.0.0.0:9000]:8080`.
    schema_refuses_a_bind_address_with_a_port:
        "http:\n  bindAddress: \"0.0.0.0:9000\"\n" => ["at '/http/bindAddress': '0.0.0.0:9000' does not match pattern"];
    schema_refuses_an_empty_word_of_the_command:
        "exec:\n  command: [\"\"]\n" => ["at '/exec/command/0': minLength: got 0, want 1"];
    schema_refuses_a_user_in_a_sentinel_url:
        "redis:\n  urlKey: \"\"\n  url: redis+sentinel://app@s1:26379,s2:26379,s3:26379/main\n" => ["at '/redis/url':", "does not match pattern"];
    schema_refuses_a_recreate_strategy_with_rolling_update_settings:
        "strategy:\n  type: Recreate\n  rollingUpdate:\n    maxSurge: 1\n" => ["at '/strategy'"];
    schema_refuses_a_scrape_interval_prometheus_cannot_read:
        "serviceMonitor:\n  interval: 30 seconds\n" => ["at '/serviceMonitor/interval': '30 seconds' does not match pattern"];
}

// Rules across values, checked by the templates.

#[test]
fn a_lease_duration_not_above_the_renew_deadline_is_refused() {
    let err = refused("timing:\n  leaseDurationSeconds: 10\n");
    assert!(
        err.contains("timing.leaseDurationSeconds 10 must be greater than timing.renewDeadlineSeconds 10 (rule: lease duration > renew deadline > retry period × 1.2)"),
        "{err}"
    );
}

#[test]
fn a_renew_deadline_not_above_the_jittered_retry_period_is_refused() {
    let err = refused("timing:\n  renewDeadlineSeconds: 2.4\n");
    assert!(
        err.contains("timing.renewDeadlineSeconds 2.4 must be greater than timing.retryPeriodSeconds × 1.2 = 2.4"),
        "{err}"
    );
}

/// The binary's rule for a command (`leasehold run -- CMD`), which would refuse the pods' start.
#[test]
fn a_lease_too_short_for_the_command_is_refused() {
    let exec = "exec:\n  enabled: true\n  image:\n    repository: registry.example.com/worker\n    tag: \"3\"\n  command: [/app/worker]\n";
    let timing = "timing:\n  leaseDurationSeconds: 0.124\n  renewDeadlineSeconds: 0.1\n  retryPeriodSeconds: 0.02\n";
    let err = refused(&format!("{exec}{timing}"));
    assert!(
        err.contains("timing.leaseDurationSeconds 0.124 is too short for exec: it must be greater than the drift margin, timing.retryPeriodSeconds, a renewal attempt's bound"),
        "{err}"
    );
    render(&format!("{exec}{}", timing.replace("0.124", "0.16")));
    // A drift factor given in extraArgs holds back more of the lease.
    let drift = "extraArgs: [\"--drift-factor=0.05\"]\n";
    let err = refused(&format!("{exec}{drift}{}", timing.replace("0.124", "0.16")));
    assert!(err.contains("is too short for exec"), "{err}");
    // So does one given in extraEnv.
    let drift = "extraEnv:\n  - name: LEASEHOLD_DRIFT_FACTOR\n    value: \"0.05\"\n";
    let err = refused(&format!("{exec}{drift}{}", timing.replace("0.124", "0.16")));
    assert!(err.contains("is too short for exec"), "{err}");
}

#[test]
fn a_release_without_a_redis_url_is_refused() {
    let err = refused("redis:\n  urlKey: \"\"\n");
    assert!(err.contains("redis: set redis.urlKey"), "{err}");
}

#[test]
fn timings_are_compared_as_the_flags_carry_them_in_whole_milliseconds() {
    // 10.0004 s renders as `--lease-duration=10s`, no longer than the 10 s renew deadline.
    let err = refused("timing:\n  leaseDurationSeconds: 10.0004\n  renewDeadlineSeconds: 10\n");
    assert!(
        err.contains("timing.leaseDurationSeconds 10.0004 must be greater than timing.renewDeadlineSeconds 10"),
        "{err}"
    );
}

#[test]
fn as_many_event_streams_as_connections_are_refused() {
    let err = refused("http:\n  maxConnections: 32\n");
    assert!(
        err.contains("http.maxEventStreams 64 must be lower than http.maxConnections 32"),
        "{err}"
    );
}

#[test]
fn a_candidate_check_the_binary_would_refuse_is_refused() {
    let check = "candidateCheck:\n  command: \"true\"\n";
    let err = refused(&format!(
        "{check}  periodSeconds: 0.5\n  timeoutSeconds: 1\n"
    ));
    assert!(
        err.contains("candidateCheck.timeoutSeconds 1 must be no longer than candidateCheck.periodSeconds 0.5"),
        "{err}"
    );
    let err = refused(&format!(
        "{check}  periodSeconds: 600\n  failureThreshold: 7\n"
    ));
    assert!(
        err.contains("candidateCheck.failureThreshold 7 times candidateCheck.periodSeconds must be at most 3600 seconds"),
        "{err}"
    );
}

/// Values the binary would take and that leave no replica leading, or that bind the Role to the
/// namespace's every pod, or that skip the cooldown on a Redis that fails over.
#[test]
fn values_that_break_the_election_or_the_roles_bound_are_refused() {
    let err = refused("candidateCheck:\n  command: \"true\"\n");
    assert!(
        err.contains(
            "candidateCheck.command runs by /bin/sh -c, and leasehold's image has no shell"
        ),
        "{err}"
    );
    render(
        "exec:\n  enabled: true\n  image:\n    repository: example/app\n    tag: \"1\"\n  command: [\"/app\"]\ncandidateCheck:\n  command: \"true\"\n",
    );
    let err = refused("serviceAccount:\n  create: false\n");
    assert!(
        err.contains("serviceAccount.create=false: name the ServiceAccount the pods run as"),
        "{err}"
    );
    render("serviceAccount:\n  create: false\n  name: app\n");
    // Values a review found rendered and broken at install or at run: (values, the refusal).
    let cases = [
        (
            "serviceAccount:\n  create: false\n  name: default\n",
            "serviceAccount.name default: every pod of the namespace",
        ),
        (
            "http:\n  bindAddress: 127.0.0.1\n",
            "http.bindAddress 127.0.0.1: the kubelet probes the pod's IP",
        ),
        ("http:\n  bindAddress: \"::1\"\n", "http.bindAddress ::1"),
        // A fresh Redis's cooldown outlasted the test: `helm install --wait && helm test` failed.
        (
            "helmTest:\n  enabled: true\ntiming:\n  leaseDurationSeconds: 60\n  renewDeadlineSeconds: 40\n",
            "helmTest.timeoutSeconds 60 is not longer than a fresh Redis's first election may take (62000 ms",
        ),
        // The same loopback addresses, written otherwise.
        (
            "http:\n  bindAddress: \"0:0:0:0:0:0:0:1\"\n",
            "http.bindAddress 0:0:0:0:0:0:0:1: the kubelet probes",
        ),
        (
            "http:\n  bindAddress: \"::FFFF:127.0.0.1\"\n",
            "http.bindAddress ::FFFF:127.0.0.1: the kubelet probes",
        ),
        (
            "strategy:\n  type: RollingUpdate\n  rollingUpdate:\n    maxSurge: 0\n    maxUnavailable: 0\n",
            "maxSurge and maxUnavailable both 0",
        ),
        (
            "redis:\n  tls:\n    existingSecret: redis-tls\n",
            "redis.tls.existingSecret: name the keys it holds",
        ),
        (
            "podDisruptionBudget:\n  minAvailable: 3\n",
            "podDisruptionBudget.minAvailable 3 with replicaCount 3 lets no healthy replica",
        ),
        (
            "replicaCount: 1\npodDisruptionBudget:\n  minAvailable: 100%\n",
            "podDisruptionBudget.minAvailable 100% with replicaCount 1",
        ),
        (
            "exec:\n  enabled: true\n  image:\n    repository: example/app\n  command: [\"/app\"]\n",
            "exec.enabled: set exec.image.tag or exec.image.digest",
        ),
        (
            "extraArgs: [\"--lease-duration=20s\"]\n",
            "extraArgs: --lease-duration repeats a flag the chart sets from its values",
        ),
        (
            "statusFile:\n  enabled: true\nextraArgs: [\"--status-file=/tmp/x.json\"]\n",
            "extraArgs: --status-file repeats a flag the chart sets",
        ),
        (
            "extraArgs: [\"--leader-elect-retry-period=3s\"]\n",
            "extraArgs: --retry-period repeats a flag the chart sets",
        ),
        // A flag's other half undoes the chart's: `--no-leader-label` left the leader Service
        // without an endpoint, in silence.
        (
            "extraArgs: [\"--no-leader-label\"]\n",
            "extraArgs: --no-leader-label undoes --leader-label, which the chart sets from its values",
        ),
        (
            "extraEnv:\n  - name: LEASEHOLD_NO_LEADER_LABEL\n    value: \"true\"\n",
            "extraEnv: LEASEHOLD_NO_LEADER_LABEL undoes --leader-label, which the chart sets",
        ),
        (
            "extraEnv:\n  - name: LEASEHOLD_LEASE_DURATION\n    value: 20s\n",
            "extraEnv: LEASEHOLD_LEASE_DURATION repeats --lease-duration, a flag the chart sets",
        ),
        // What the chart gives through the pod: its name and namespace.
        (
            "extraArgs: [\"--identity=worker\"]\n",
            "extraArgs: --identity is the pod's name, which the chart gives",
        ),
        (
            "extraEnv:\n  - name: LEASEHOLD_NAMESPACE\n    value: other\n",
            "extraEnv: LEASEHOLD_NAMESPACE is the pod's namespace, which the chart gives",
        ),
        (
            "extraArgs: [\"--leader-elect-resource-namespace=other\"]\n",
            "extraArgs: --namespace is the pod's namespace, which the chart gives",
        ),
        // Kubernetes rounds a percentage up: 67 % of 3 replicas is 3.
        (
            "podDisruptionBudget:\n  minAvailable: 67%\n",
            "podDisruptionBudget.minAvailable 67% with replicaCount 3 lets no healthy replica",
        ),
    ];
    for (values, want) in cases {
        let err = refused(values);
        assert!(err.contains(want), "{values}: {err}");
    }
    render("http:\n  bindAddress: \"::\"\n");
    render("http:\n  bindAddress: \"fd00::10\"\n");
    render(
        "helmTest:\n  enabled: true\n  timeoutSeconds: 63\ntiming:\n  leaseDurationSeconds: 60\n  renewDeadlineSeconds: 40\n",
    );
    render("http:\n  bindAddress: \"::ffff:10.0.0.1\"\n");
    // A flag the chart does not set passes, as does one it sets only for other values.
    render("extraArgs: [\"--drift-factor=0.02\", \"--status-file=/tmp/x.json\"]\n");
    render("podDisruptionBudget:\n  minAvailable: 2\n");
    render("podDisruptionBudget:\n  minAvailable: 66%\n");
    render("extraEnv:\n  - name: LEASEHOLD_DRIFT_FACTOR\n    value: \"0.02\"\n");
    // A Secret's key that reads as a number stays a string.
    let quoted = render("redis:\n  passwordKey: \"6379\"\n");
    assert!(quoted.yaml.contains("- key: \"6379\""), "{}", quoted.yaml);
    for url in [
        "redis+sentinel://s1:26379,s2:26379,s3:26379/main",
        "redis+cluster://n1:7000",
    ] {
        let err = refused(&format!(
            "redis:\n  urlKey: \"\"\n  url: {url}\ntiming:\n  dataLossCooldown: false\n"
        ));
        assert!(
            err.contains("timing.dataLossCooldown=false is only for a Redis that never fails over"),
            "{err}"
        );
    }
}

/// `leasehold run` takes client-go's names as aliases of its flags: an extra argument under one
/// repeats the chart's flag as much as under the flag's own name.
#[test]
fn an_extra_argument_under_an_alias_of_a_chart_flag_is_refused_too() {
    use clap::CommandFactory;
    let cli = leasehold::cli::Cli::command();
    let run = cli.find_subcommand("run").expect("the run command");
    let (_, leasehold) = deployment(&render("leaseName: web\n"));
    let chart_args = harness::helm::args(&leasehold);
    let mut checked = 0;
    for arg in run.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if !chart_args
            .iter()
            .any(|a| a.starts_with(&format!("--{long}=")))
        {
            continue;
        }
        for alias in arg.get_visible_aliases().unwrap_or_default() {
            let err = refused(&format!("leaseName: web\nextraArgs: [\"--{alias}=1s\"]\n"));
            let want = format!("extraArgs: --{long} repeats a flag the chart sets");
            assert!(err.contains(&want), "--{alias}: {err}");
            checked += 1;
        }
    }
    assert_eq!(checked, 4, "the aliases of the chart's flags");
}

#[test]
fn a_redis_url_with_a_password_parameter_is_refused() {
    for url in [
        "unix:///run/redis.sock?pass=s3cret",
        "redis://redis:6379/0?db=1&Password=x",
    ] {
        let err = refused(&format!("redis:\n  urlKey: \"\"\n  url: \"{url}\"\n"));
        assert!(
            err.contains("redis.url: carries a password") && !err.contains("s3cret"),
            "{err}"
        );
    }
}
