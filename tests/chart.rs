//! The Helm chart in charts/leasehold, checked with the real helm: `helm lint --strict`, the
//! rendered objects parsed into k8s-openapi types, the rendered arguments fed to the binary's own
//! parser, the Role against the code's list of API calls (both ways), the values schema (a test
//! per rule), the update strategy against the Deployment controller's arithmetic, manifests/
//! against the chart, offline Kubernetes schemas, the Dockerfile linter, and the rendered
//! container run as the real binary against a real redis-server.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{Container, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use leasehold::cli::{self, Command as Subcommand, Environment, RunSettings};
use leasehold::http::ReadinessMode;
use leasehold::k8s::KubernetesMode;
use leasehold::k8s::rbac::API_CALLS;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use support::helm::{
    self, Rendered, args, flag, labels, leasehold_container, pod_spec, refused, render, switch,
};
use support::replica::BIN;
use support::rollout::{self, Mode};
use testbed::http::http_get;
use testbed::pki::Pki;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// Leader readiness, as the chart accepts it.
const LEADER_MODE: &str = "readiness: leader\npodDisruptionBudget:\n  enabled: false\n";

/// Value sets every structural test runs against, each with a name for the messages.
const VALUE_SETS: &[(&str, &str)] = &[
    ("defaults", ""),
    ("leader mode", LEADER_MODE),
    (
        "exec mode",
        "exec:\n  enabled: true\n  image:\n    repository: registry.example.com/worker\n    tag: \"2.1\"\n  command: [/app/worker, --once]\n  gracePeriodSeconds: 30\n  restartCommand: true\nextraVolumes:\n  - name: scratch\n    emptyDir: {}\nextraVolumeMounts:\n  - name: scratch\n    mountPath: /tmp\n",
    ),
    (
        "sidecar",
        "sidecars:\n  - name: app\n    image: registry.example.com/app:1.0\n    ports:\n      - name: app\n        containerPort: 9000\nservice:\n  extraPorts:\n    - name: app\n      port: 80\n      targetPort: app\n",
    ),
    (
        "fast timing",
        "timing:\n  leaseDurationSeconds: 1.5\n  renewDeadlineSeconds: 0.9\n  retryPeriodSeconds: 0.25\n",
    ),
    (
        "url in values, no password",
        "redis:\n  urlKey: \"\"\n  url: redis://redis.data.svc:6379/2\n  passwordKey: \"\"\n  username: leasehold\n  keyPrefix: \"lh:\"\n",
    ),
    (
        "monitoring",
        "serviceMonitor:\n  enabled: true\n  interval: 15s\n  labels:\n    release: prometheus\n",
    ),
    (
        "existing service account, no rbac",
        "rbac:\n  create: false\nserviceAccount:\n  create: false\n  name: platform-leasehold\n",
    ),
    (
        "one replica",
        "replicaCount: 1\npodDisruptionBudget:\n  enabled: false\n",
    ),
    (
        "tls, sentinel, wait for replicas",
        "redis:\n  urlKey: \"\"\n  url: rediss+sentinel://s1.data:26379,s2.data:26379/main\n  sentinelPasswordKey: sentinel-password\n  waitReplicas: 1\n  waitTimeoutSeconds: 0.25\n  tls:\n    existingSecret: redis-tls\n    caKey: ca.crt\n    clientCertKey: tls.crt\n    clientKeyKey: tls.key\n",
    ),
    (
        "ipv6, own label, parts off",
        "http:\n  bindAddress: \"::\"\n  port: 9090\nleaderLabel: example.com/active\nkubernetes:\n  leaseMirror: false\n  events: false\nleaseName: billing\ntiming:\n  dataLossCooldown: false\n",
    ),
];

fn each_value_set(mut check: impl FnMut(&str, &Rendered)) {
    for (name, values) in VALUE_SETS {
        let rendered = render(values);
        check(name, &rendered);
    }
}

fn deployment(r: &Rendered) -> (Deployment, Container) {
    let d: Deployment = r.one();
    let c = leasehold_container(&d);
    (d, c)
}

/// The rendered container's arguments, resolved by the binary's own parser and validation, in
/// the environment the pod gives it: the mounted Secrets' files exist (passwords, and PEM files
/// from a throwaway CA), and the Redis URL is the rendered value, or a stand-in for one from a
/// Secret.
fn resolve(container: &Container) -> RunSettings {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::new();
    let mut argv = vec!["leasehold".to_owned()];
    let mut after_separator = false;
    let mut tls = false;
    for arg in args(container) {
        if arg == "--" {
            after_separator = true;
            argv.push(arg);
            continue;
        }
        if after_separator {
            // The command lives in the user's image; let an existing program stand in for it.
            argv.push(if argv.last().is_some_and(|a| a == "--") {
                "/bin/sh".to_owned()
            } else {
                arg
            });
            continue;
        }
        let file_flag = arg
            .split_once('=')
            .filter(|(flag, value)| flag.ends_with("-file") && value.starts_with('/'));
        match file_flag {
            Some((flag, path)) => {
                let local = dir
                    .path()
                    .join(Path::new(path).strip_prefix("/").expect("absolute"));
                std::fs::create_dir_all(local.parent().expect("parent")).expect("mkdir");
                let content = match flag {
                    "--redis-ca-file" => std::fs::read_to_string(&pki.ca).expect("CA"),
                    "--redis-client-cert-file" => {
                        std::fs::read_to_string(&pki.client_cert).expect("cert")
                    }
                    "--redis-client-key-file" => {
                        std::fs::read_to_string(&pki.client_key).expect("key")
                    }
                    _ => "s3cret\n".to_owned(),
                };
                tls |= flag.starts_with("--redis-c");
                std::fs::write(&local, content).expect("write a mounted file");
                argv.push(format!("{flag}={}", local.display()));
            }
            None => argv.push(arg),
        }
    }
    let url_var = container
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|e| e.name == "LEASEHOLD_REDIS_URL")
        .expect("LEASEHOLD_REDIS_URL is set");
    let url = url_var.value.unwrap_or_else(|| {
        if tls {
            "rediss://redis:6380"
        } else {
            "redis://redis:6379"
        }
        .to_owned()
    });
    argv.insert(2, format!("--redis-url={url}"));
    let cli = cli::parse_from(&argv)
        .unwrap_or_else(|e| panic!("the binary refuses the chart's arguments {argv:?}: {e}"));
    let Subcommand::Run(run) = cli.command else {
        panic!("the chart runs `leasehold run`, not {argv:?}")
    };
    let env = Environment {
        pod_name: Some("lh-leasehold-7d4f9c-x2x9q".into()),
        pod_namespace: Some("shop".into()),
        rust_log: None,
        hostname: Some("lh-leasehold-7d4f9c-x2x9q".into()),
    };
    // `false`: in the pod the URL comes from the environment, not the command line.
    run.resolve(&env, false)
        .unwrap_or_else(|e| panic!("the binary refuses the chart's arguments {argv:?}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// helm lint

#[test]
fn the_chart_lints_strictly_with_default_values() {
    let out = helm::lint_strict("");
    assert!(
        out.ok(),
        "helm lint --strict failed ({}):\n{}{}",
        out.code,
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{}",
        out.stdout
    );
}

#[test]
fn the_chart_lints_strictly_with_every_value_set() {
    for (name, values) in VALUE_SETS {
        let out = helm::lint_strict(values);
        assert!(
            out.ok() && out.stdout.contains("0 chart(s) failed"),
            "helm lint --strict failed for value set {name:?} ({}):\n{}{}",
            out.code,
            out.stdout,
            out.stderr
        );
    }
}

// ---------------------------------------------------------------------------------------------
// What the chart renders

#[test]
fn every_rendered_document_parses_as_its_kubernetes_type_with_the_standard_labels() {
    each_value_set(|name, r| {
        for kind in r.kinds() {
            match kind.as_str() {
                "Deployment" => drop(r.all::<Deployment>()),
                "Service" => drop(r.all::<Service>()),
                "ServiceAccount" => drop(r.all::<ServiceAccount>()),
                "Role" => drop(r.all::<Role>()),
                "RoleBinding" => drop(r.all::<RoleBinding>()),
                "PodDisruptionBudget" => drop(r.all::<PodDisruptionBudget>()),
                "ServiceMonitor" => {}
                other => panic!("{name}: unexpected kind {other}"),
            }
        }
        for doc in &r.docs {
            let meta = &doc["metadata"];
            assert_eq!(meta["namespace"].as_str(), Some("shop"), "{name}: {doc:?}");
            for key in [
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "app.kubernetes.io/managed-by",
                "helm.sh/chart",
            ] {
                assert!(
                    meta["labels"][key].is_string(),
                    "{name}: {} {} lacks label {key}",
                    doc["kind"].as_str().unwrap_or_default(),
                    meta["name"].as_str().unwrap_or_default()
                );
            }
        }
    });
}

#[test]
fn the_default_release_renders_the_objects_the_issue_asks_for() {
    let r = render("");
    let kinds: BTreeSet<String> = r.kinds().into_iter().collect();
    let want: BTreeSet<String> = [
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(kinds, want);
    let (d, _) = deployment(&r);
    assert_eq!(d.spec.replicas, Some(3));
    assert_eq!(
        d.metadata.name.as_deref(),
        Some("lh-leasehold"),
        "the lease is named after the Deployment"
    );
}

#[test]
fn the_rendered_arguments_pass_the_binarys_own_validation() {
    each_value_set(|name, r| {
        let (_, c) = deployment(r);
        let s = resolve(&c);
        let a = args(&c);
        let want_mode = if name == "leader mode" {
            ReadinessMode::Leader
        } else {
            ReadinessMode::Member
        };
        assert_eq!(s.readiness, want_mode, "{name}");
        assert_eq!(
            s.kube.mode,
            KubernetesMode::On,
            "{name}: in a pod the API must be there; fail loudly rather than run without it"
        );
        assert_eq!(
            s.kube.leader_label.as_deref(),
            flag(&a, "leader-label").as_deref(),
            "{name}"
        );
        assert!(s.redis.options.password.is_some() == flag(&a, "redis-password-file").is_some());
        assert_eq!(
            s.identity, "lh-leasehold-7d4f9c-x2x9q",
            "{name}: identity is $POD_NAME"
        );
    });
}

#[test]
fn probes_use_the_binarys_paths_on_its_http_port() {
    for values in ["", "http:\n  bindAddress: \"::\"\n  port: 9090\n"] {
        let (_, c) = deployment(&render(values));
        let settings = resolve(&c);
        let ports = c.ports.clone().unwrap_or_default();
        let http = ports
            .iter()
            .find(|p| p.name.as_deref() == Some("http"))
            .expect("a container port named http");
        assert_eq!(
            http.container_port,
            i32::from(settings.http_addr.port()),
            "the container port is the port the binary listens on (--http-addr)"
        );
        let probe = |p: &Option<k8s_openapi::api::core::v1::Probe>, what: &str| {
            let get = p
                .as_ref()
                .and_then(|p| p.http_get.clone())
                .unwrap_or_else(|| panic!("{what} probe is an HTTP GET"));
            assert_eq!(
                get.port,
                IntOrString::String("http".into()),
                "{what} probe port"
            );
            get.path.unwrap_or_default()
        };
        assert_eq!(probe(&c.startup_probe, "startup"), "/healthz");
        assert_eq!(probe(&c.liveness_probe, "liveness"), "/healthz");
        assert_eq!(probe(&c.readiness_probe, "readiness"), "/readyz");
    }
}

#[test]
fn the_env_the_binary_reads_comes_from_the_downward_api_and_the_secret() {
    let (_, c) = deployment(&render(""));
    let env: BTreeMap<String, k8s_openapi::api::core::v1::EnvVar> = c
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect();
    let field = |name: &str| {
        env.get(name)
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone())
            .unwrap_or_else(|| panic!("{name} from the downward API"))
    };
    assert_eq!(field("POD_NAME"), "metadata.name");
    assert_eq!(field("POD_NAMESPACE"), "metadata.namespace");
    let url = env
        .get("LEASEHOLD_REDIS_URL")
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.secret_key_ref.as_ref())
        .expect("LEASEHOLD_REDIS_URL from a Secret");
    assert_eq!(
        (url.name.as_str(), url.key.as_str()),
        ("leasehold-redis", "url")
    );

    // With the URL in the values it is still passed through the environment.
    let (_, c) = deployment(&render(
        "redis:\n  urlKey: \"\"\n  url: redis://redis.data.svc:6379/2\n",
    ));
    let url = c
        .env
        .unwrap_or_default()
        .into_iter()
        .find(|e| e.name == "LEASEHOLD_REDIS_URL")
        .and_then(|e| e.value);
    assert_eq!(url.as_deref(), Some("redis://redis.data.svc:6379/2"));
}

#[test]
fn the_redis_url_and_password_never_appear_on_the_command_line() {
    each_value_set(|name, r| {
        let (_, c) = deployment(r);
        for arg in args(&c) {
            assert!(
                !arg.starts_with("--redis-url"),
                "{name}: the URL may carry a password and would show in `ps`: {arg}"
            );
            assert!(
                !arg.contains("s3cret") && !arg.contains("://"),
                "{name}: {arg}"
            );
        }
    });
}

#[test]
fn the_containers_run_locked_down_with_requests_and_limits() {
    each_value_set(|name, r| {
        let (d, c) = deployment(r);
        let pod = pod_spec(&d).security_context.expect("pod securityContext");
        assert_eq!(pod.run_as_non_root, Some(true), "{name}");
        assert!(
            pod.run_as_user.is_some_and(|u| u > 0),
            "{name}: a numeric non-root user"
        );
        assert_eq!(
            pod.seccomp_profile.map(|s| s.type_).as_deref(),
            Some("RuntimeDefault"),
            "{name}"
        );
        let sc = c
            .security_context
            .clone()
            .expect("container securityContext");
        assert_eq!(sc.run_as_non_root, Some(true), "{name}");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}");
        assert_eq!(
            sc.capabilities.and_then(|c| c.drop),
            Some(vec!["ALL".to_owned()]),
            "{name}"
        );
        assert_ne!(sc.privileged, Some(true), "{name}");
        let resources = c.resources.clone().expect("resources");
        for (what, map) in [
            ("requests", resources.requests),
            ("limits", resources.limits),
        ] {
            let map = map.unwrap_or_else(|| panic!("{name}: {what} set"));
            assert!(
                map.contains_key("cpu") && map.contains_key("memory"),
                "{name}: {what} has cpu and memory: {map:?}"
            );
        }
    });
}

#[test]
fn the_service_routes_to_the_leader_alone() {
    for (values, key) in [
        ("", "leasehold.io/leader"),
        ("leaderLabel: example.com/active\n", "example.com/active"),
        (LEADER_MODE, "leasehold.io/leader"),
    ] {
        let r = render(values);
        let (d, c) = deployment(&r);
        assert_eq!(flag(&args(&c), "leader-label").as_deref(), Some(key));
        let service: Service = r.one();
        let spec = service.spec.expect("spec");
        let selector = spec.selector.clone().expect("a selector");
        assert_eq!(
            selector.get(key).map(String::as_str),
            Some("true"),
            "the Service selects {key}=true"
        );
        let deploy_spec = d.spec.clone();
        let pod_labels = labels(&deploy_spec.template.metadata.clone().expect("meta").labels);
        let match_labels = deploy_spec
            .selector
            .match_labels
            .clone()
            .unwrap_or_default();
        for (k, v) in &selector {
            if k != key {
                assert_eq!(
                    pod_labels.get(k),
                    Some(v),
                    "the Service selects the release's pods"
                );
            }
        }
        assert!(
            !pod_labels.contains_key(key) && !match_labels.contains_key(key),
            "the leader label must come from leasehold alone, never from the pod template or \
             the Deployment's selector"
        );
        let port = spec.ports.expect("ports").remove(0);
        assert_eq!(port.target_port, Some(IntOrString::String("http".into())));
    }
}

#[test]
fn the_metrics_service_scrapes_every_replica_ready_or_not() {
    let r = render("serviceMonitor:\n  enabled: true\n  labels:\n    release: prometheus\n");
    let services: Vec<Service> = r.all();
    let metrics = services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("lh-leasehold-metrics"))
        .expect("a metrics Service");
    let spec = metrics.spec.clone().expect("spec");
    assert_eq!(spec.publish_not_ready_addresses, Some(true));
    let selector = spec.selector.expect("selector");
    assert!(!selector.contains_key("leasehold.io/leader"));
    let monitor = r.untyped("ServiceMonitor").remove(0);
    let wanted = &monitor["spec"]["selector"]["matchLabels"];
    let have = labels(&metrics.metadata.labels);
    for (k, v) in wanted.as_mapping().expect("matchLabels") {
        let (k, v) = (k.as_str().expect("key"), v.as_str().expect("value"));
        assert_eq!(
            have.get(k).map(String::as_str),
            Some(v),
            "ServiceMonitor selects {k}"
        );
    }
    assert_eq!(
        monitor["spec"]["endpoints"][0]["path"].as_str(),
        Some("/metrics")
    );
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"].as_str(),
        Some("http")
    );
    assert_eq!(
        monitor["metadata"]["labels"]["release"].as_str(),
        Some("prometheus")
    );
}

#[test]
fn the_password_secret_is_mounted_where_the_flag_points() {
    let (d, c) = deployment(&render(""));
    let file = flag(&args(&c), "redis-password-file").expect("--redis-password-file");
    let volume = pod_spec(&d)
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.secret.is_some())
        .expect("a Secret volume");
    let secret = volume.secret.clone().expect("secret");
    assert_eq!(secret.secret_name.as_deref(), Some("leasehold-redis"));
    let item = secret.items.expect("items").remove(0);
    assert_eq!(item.key, "password");
    let mount = c
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.name == volume.name)
        .expect("the Secret volume is mounted in the leasehold container");
    assert_eq!(mount.read_only, Some(true));
    assert_eq!(
        format!("{}/{}", mount.mount_path, item.path),
        file,
        "--redis-password-file names the mounted key"
    );
    let mode = secret.default_mode.expect("defaultMode");
    assert_eq!(
        mode & 0o007,
        0,
        "others may not read the password: {mode:o}"
    );

    // No password key: no flag, no volume.
    let (d, c) = deployment(&render("redis:\n  passwordKey: \"\"\n"));
    assert!(flag(&args(&c), "redis-password-file").is_none());
    assert!(pod_spec(&d).volumes.unwrap_or_default().is_empty());
}

#[test]
fn the_tls_files_and_the_sentinel_password_are_mounted_where_the_flags_point() {
    let values = VALUE_SETS
        .iter()
        .find(|(name, _)| *name == "tls, sentinel, wait for replicas")
        .expect("the TLS value set")
        .1;
    let (d, c) = deployment(&render(values));
    let a = args(&c);
    let mounts = c.volume_mounts.clone().unwrap_or_default();
    let volumes = pod_spec(&d).volumes.unwrap_or_default();
    // Each file flag names `<mountPath>/<path>` of an item of the Secret it belongs to.
    for (flag_name, secret, key) in [
        ("redis-password-file", "leasehold-redis", "password"),
        (
            "sentinel-password-file",
            "leasehold-redis",
            "sentinel-password",
        ),
        ("redis-ca-file", "redis-tls", "ca.crt"),
        ("redis-client-cert-file", "redis-tls", "tls.crt"),
        ("redis-client-key-file", "redis-tls", "tls.key"),
    ] {
        let file = flag(&a, flag_name).unwrap_or_else(|| panic!("--{flag_name}"));
        let found = volumes.iter().any(|v| {
            let Some(src) = &v.secret else { return false };
            src.secret_name.as_deref() == Some(secret)
                && src.items.clone().unwrap_or_default().iter().any(|item| {
                    item.key == key
                        && mounts.iter().any(|m| {
                            m.name == v.name
                                && m.read_only == Some(true)
                                && format!("{}/{}", m.mount_path, item.path) == file
                        })
                })
        });
        assert!(
            found,
            "--{flag_name}={file} is no mounted key {key} of Secret {secret}"
        );
    }
    assert_eq!(flag(&a, "redis-wait-replicas").as_deref(), Some("1"));
    assert_eq!(flag(&a, "redis-wait-timeout").as_deref(), Some("250ms"));
}

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

/// leasehold's own bound on a graceful shutdown, from the binary's code.
fn shutdown_bound(s: &RunSettings) -> Duration {
    leasehold::cmd::run::shutdown_bound(s)
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
// The rollout strategy, against the Deployment controller's arithmetic

fn strategy(values: &str) -> (DeploymentStrategy, i32) {
    let (d, _) = deployment(&render(values));
    let spec = d.spec;
    (
        spec.strategy.expect("a strategy"),
        spec.replicas.expect("replicas"),
    )
}

#[test]
fn member_mode_rollouts_finish_for_the_controller_helm_wait_and_rollout_status() {
    for replicas in [1, 2, 3, 5] {
        let (s, n) = strategy(&format!("replicaCount: {replicas}\n"));
        let rolling = s.rolling_update.clone().expect("RollingUpdate");
        assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)));
        assert_eq!(rolling.max_surge, Some(IntOrString::Int(1)));
        let out = rollout::roll_out(&s, n, Mode::Member);
        assert!(out.controller_finished(), "{replicas} replicas: {out:?}");
        assert!(
            out.kstatus_current(),
            "helm --wait (kstatus) finishes: {out:?}"
        );
        assert!(
            out.rollout_status_done(),
            "kubectl rollout status finishes: {out:?}"
        );
        assert!(
            out.helm_legacy_done(),
            "helm --wait=legacy finishes: {out:?}"
        );
        assert!(
            out.handoffs <= u32::try_from(replicas).expect("small"),
            "at most one handoff per old replica: {out:?}"
        );
    }
}

#[test]
fn leader_mode_rollouts_finish_for_the_controller_but_never_for_helm_wait() {
    for replicas in [2, 3, 5] {
        let (s, n) = strategy(&format!("{LEADER_MODE}replicaCount: {replicas}\n"));
        let out = rollout::roll_out(&s, n, Mode::Leader);
        assert!(out.controller_finished(), "{replicas} replicas: {out:?}");
        assert_eq!(out.ready, 1, "only the leader is ready");
        assert!(
            !out.kstatus_current() && !out.rollout_status_done(),
            "helm --wait and kubectl rollout status want every replica ready; the chart says \
             so (NOTES.txt, docs/DEPLOY.md): {out:?}"
        );
        assert!(
            out.helm_legacy_done(),
            "helm --wait=legacy finishes: {out:?}"
        );
    }
    // One replica is the leader, so every judge is satisfied.
    let (s, n) = strategy(&format!("{LEADER_MODE}replicaCount: 1\n"));
    let out = rollout::roll_out(&s, n, Mode::Leader);
    assert!(
        out.kstatus_current() && out.rollout_status_done(),
        "{out:?}"
    );
}

fn rolling(surge: IntOrString, unavailable: IntOrString) -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(surge),
            max_unavailable: Some(unavailable),
        }),
    }
}

fn yaml_of(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => format!("{s:?}"),
    }
}

#[test]
fn the_chart_refuses_exactly_the_leader_mode_strategies_that_would_stall() {
    use IntOrString::{Int, String as Percent};
    let candidates = [
        (Percent("25%".into()), Percent("25%".into())), // Kubernetes' default
        (Int(1), Int(0)),
        (Int(1), Int(1)),
        (Int(1), Int(2)),
        (Int(3), Int(2)),
        (Int(1), Int(3)),
        (Int(0), Int(3)),
        (Int(1), Percent("100%".into())),
        (Percent("100%".into()), Percent("100%".into())),
    ];
    for (surge, unavailable) in candidates {
        let strategy = rolling(surge, unavailable);
        let values = format!(
            "{LEADER_MODE}replicaCount: 3\nstrategy:\n  type: RollingUpdate\n  rollingUpdate:\n    maxSurge: {}\n    maxUnavailable: {}\n",
            yaml_of(
                &strategy
                    .rolling_update
                    .as_ref()
                    .and_then(|r| r.max_surge.clone())
                    .expect("surge")
            ),
            yaml_of(
                &strategy
                    .rolling_update
                    .as_ref()
                    .and_then(|r| r.max_unavailable.clone())
                    .expect("unavailable")
            ),
        );
        let out = helm::template_as("lh", "shop", &values);
        let model = rollout::roll_out(&strategy, 3, Mode::Leader);
        if model.controller_finished() {
            assert!(
                out.ok(),
                "{strategy:?} finishes but was refused: {}",
                out.stderr
            );
            let d: Deployment = Rendered::parse(&out.stdout).one();
            assert_eq!(
                d.spec.strategy.as_ref(),
                Some(&strategy),
                "rendered as given"
            );
        } else {
            assert!(
                !out.ok()
                    && out.stderr.contains(
                        "the Deployment controller counts only ready pods (the leader) as available"
                    ),
                "{strategy:?} stalls the rollout ({model:?}) but was not refused with the reason: {}",
                out.stderr
            );
            assert!(model.old_replicas >= 1, "the old leader is left: {model:?}");
        }
    }
    // Recreate needs no availability, so the chart accepts it.
    assert!(
        helm::template_as(
            "lh",
            "shop",
            &format!("{LEADER_MODE}strategy:\n  type: Recreate\n")
        )
        .ok()
    );
}

#[test]
fn leader_mode_with_a_disruption_budget_is_refused_with_the_reason() {
    let err = refused("readiness: leader\n");
    for words in [
        "readiness=leader: only the leader pod is ever ready",
        "a PodDisruptionBudget would block every eviction of the leader",
        "`helm --wait` and `kubectl rollout status` never see the Deployment rolled out",
        "Set podDisruptionBudget.enabled=false",
    ] {
        assert!(err.contains(words), "missing {words:?} in:\n{err}");
    }
}

#[test]
fn the_disruption_budget_lets_drains_evict_replicas_that_cannot_reach_redis() {
    let pdb: PodDisruptionBudget = render("").one();
    let spec = pdb.spec.expect("spec");
    assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(
        spec.unhealthy_pod_eviction_policy.as_deref(),
        Some("AlwaysAllow")
    );
    assert!(render(LEADER_MODE).all::<PodDisruptionBudget>().is_empty());
}

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

fn code_calls(skip: &[&str]) -> BTreeSet<Call> {
    API_CALLS
        .iter()
        .filter(|c| !skip.contains(&c.resource))
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
        assert_eq!(pod_spec(&d).automount_service_account_token, Some(true));
    }
}

// ---------------------------------------------------------------------------------------------
// values.schema.json: one test per rule, each with helm's words

schema_rule! {
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

#[test]
fn a_release_without_a_redis_url_is_refused() {
    let err = refused("redis:\n  urlKey: \"\"\n");
    assert!(err.contains("redis: set redis.urlKey"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// manifests/ and the offline Kubernetes schemas

#[test]
fn manifests_equal_the_chart_rendered_with_default_values() {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let chart = helm::chart();
    let out = helm::run(
        &helm::helm(),
        &[
            "template",
            helm::MANIFESTS_RELEASE,
            chart.to_str().expect("utf-8"),
            "--namespace",
            helm::MANIFESTS_NAMESPACE,
            "--output-dir",
            out_dir.path().to_str().expect("utf-8"),
        ],
    );
    assert!(out.ok(), "{}", out.stderr);
    let rendered_dir = out_dir.path().join("leasehold/templates");
    let read_dir = |dir: &Path| -> BTreeMap<String, String> {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("entry").path())
            .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
            .map(|p| {
                let name = p.file_name().expect("name").to_string_lossy().into_owned();
                (name, std::fs::read_to_string(&p).expect("read"))
            })
            .collect()
    };
    let rendered = read_dir(&rendered_dir);
    let manifests_dir = helm::repo().join("manifests");
    let committed = read_dir(&manifests_dir);
    let stale = "manifests/ is stale: run scripts/render-manifests.sh";
    assert_eq!(
        committed.keys().collect::<Vec<_>>(),
        rendered.keys().collect::<Vec<_>>(),
        "{stale}"
    );
    for (name, text) in &rendered {
        assert!(
            committed[name] == *text,
            "{stale} (manifests/{name} differs)"
        );
    }
    let kustomization: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(manifests_dir.join("kustomization.yaml")).expect("kustomization"),
    )
    .expect("kustomization.yaml parses");
    let resources: Vec<&str> = kustomization["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a file"))
        .collect();
    assert_eq!(
        resources,
        rendered.keys().map(String::as_str).collect::<Vec<_>>(),
        "{stale}"
    );
    assert_eq!(
        kustomization["namespace"].as_str(),
        Some(helm::MANIFESTS_NAMESPACE)
    );
}

#[test]
fn rendered_objects_validate_against_the_kubernetes_schemas() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, (name, values)) in VALUE_SETS.iter().enumerate() {
        let file = dir.path().join(format!("set-{i}.yaml"));
        helm::assert_valid_for_kubernetes(name, &render(values), &file);
    }
}

// ---------------------------------------------------------------------------------------------
// The image

#[test]
fn the_dockerfile_passes_hadolint() {
    let out = helm::run(
        &helm::hadolint(),
        &["--failure-threshold", "info", "Dockerfile"],
    );
    assert!(out.ok(), "hadolint:\n{}{}", out.stdout, out.stderr);
}

#[test]
fn the_build_context_keeps_what_the_dockerfile_copies_and_nothing_else() {
    let ignore =
        std::fs::read_to_string(helm::repo().join(".dockerignore")).expect(".dockerignore");
    let lines: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        lines.first(),
        Some(&"*"),
        "the context starts empty: {lines:?}"
    );
    let kept: BTreeSet<&str> = lines[1..]
        .iter()
        .map(|l| {
            l.strip_prefix('!')
                .unwrap_or_else(|| panic!("only re-inclusions after `*`: {l}"))
        })
        .map(|l| l.trim_end_matches('/'))
        .collect();
    let dockerfile = std::fs::read_to_string(helm::repo().join("Dockerfile")).expect("Dockerfile");
    let mut copied = BTreeSet::new();
    for line in dockerfile.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        let words: Vec<&str> = rest
            .split_whitespace()
            .filter(|w| !w.starts_with("--"))
            .collect();
        if rest.split_whitespace().any(|w| w.starts_with("--from")) {
            continue;
        }
        for src in &words[..words.len() - 1] {
            copied.insert(src.trim_end_matches('/'));
        }
    }
    assert_eq!(
        kept, copied,
        "the build context holds exactly what the Dockerfile copies"
    );
}

// ---------------------------------------------------------------------------------------------
// The rendered container, run as the real binary

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The leasehold process of one rendered pod: its arguments and environment as the chart renders
/// them, except what only a cluster provides: no API (`--kubernetes=off` and a lease name, since
/// the Deployment cannot be looked up), the Secret's file in a temporary directory, and the HTTP
/// port on loopback.
struct Pod {
    child: Child,
    http: std::net::SocketAddr,
    _dir: tempfile::TempDir,
    stderr_path: std::path::PathBuf,
}

impl Pod {
    fn start(container: &Container, name: &str, redis: &RedisServer, password: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let http: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut argv = Vec::new();
        for arg in args(container) {
            if let Some(path) = arg.strip_prefix("--redis-password-file=") {
                let local = dir.path().join("password");
                std::fs::write(&local, format!("{password}\n")).expect("password file");
                assert!(path.ends_with("/password"), "{path}");
                argv.push(format!("--redis-password-file={}", local.display()));
            } else if arg == "--kubernetes=on" {
                argv.push("--kubernetes=off".to_owned());
            } else if arg.starts_with("--http-addr=") {
                argv.push(format!("--http-addr={http}"));
            } else {
                argv.push(arg);
            }
        }
        argv.push("--lease-name=lh-leasehold".to_owned());
        let stderr_path = dir.path().join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let child = Command::new(BIN)
            .args(&argv)
            .env_clear()
            .env("POD_NAME", name)
            .env("POD_NAMESPACE", "shop")
            .env("LEASEHOLD_REDIS_URL", redis.url())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn leasehold");
        Self {
            child,
            http,
            _dir: dir,
            stderr_path,
        }
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.http, path)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// SIGTERM, then the exit code and how long it took.
    fn terminate(&mut self, bound: Duration) -> (i32, Duration) {
        let start = Instant::now();
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return (status.code().unwrap_or(-1), start.elapsed());
            }
            assert!(
                start.elapsed() < bound,
                "leasehold did not exit within {bound:?} of SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- leasehold log ----\n{}", self.log());
        }
    }
}

#[test]
fn the_rendered_container_runs_the_real_binary_and_its_probes_answer() {
    let (d, c) = deployment(&render(""));
    let redis = RedisServer::builder()
        .args(["--requirepass", "s3cret"])
        .start();
    let mut pod = Pod::start(&c, "lh-leasehold-7d4f9c-x2x9q", &redis, "s3cret");
    for (what, probe) in [
        ("startup", &c.startup_probe),
        ("liveness", &c.liveness_probe),
        ("readiness", &c.readiness_probe),
    ] {
        let path = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|g| g.path.clone())
            .expect("path");
        wait_for(
            &format!("the {what} probe {path} to answer 200"),
            Duration::from_secs(15),
            || pod.get(&path).filter(|(code, _)| *code == 200),
        );
    }
    let (_, body) = pod.get("/leader").expect("/leader answers");
    let view: serde_json::Value = serde_json::from_str(&body).expect("/leader is JSON");
    assert_eq!(
        view["identity"], "lh-leasehold-7d4f9c-x2x9q",
        "identity is $POD_NAME"
    );
    assert_eq!(
        view["redis"]["reachable"], true,
        "the password file was read: {view}"
    );
    // Logs are JSON lines (not a terminal), and never show the password.
    let log = pod.log();
    assert!(
        log.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{log}"
    );
    assert!(!log.contains("s3cret"), "{log}");
    // SIGTERM from the kubelet: exit 0 well within terminationGracePeriodSeconds.
    let grace = pod_spec(&d)
        .termination_grace_period_seconds
        .expect("grace");
    let (code, took) = pod.terminate(Duration::from_secs(u64::try_from(grace).expect("positive")));
    assert_eq!(code, 0, "{}", pod.log());
    assert!(took < shutdown_bound(&resolve(&c)), "{took:?}");
}

#[test]
fn in_leader_mode_only_the_leaders_pod_is_ready() {
    // The chart's default timing, so that leadership stays put while the test looks; and no
    // cooldown on this brand-new Redis, so that someone leads at once.
    let (_, c) = deployment(&render(&format!(
        "{LEADER_MODE}timing:\n  dataLossCooldown: false\n"
    )));
    let redis = RedisServer::builder()
        .args(["--requirepass", "s3cret"])
        .start();
    let pods = [
        Pod::start(&c, "lh-leasehold-7d4f9c-aaaaa", &redis, "s3cret"),
        Pod::start(&c, "lh-leasehold-7d4f9c-bbbbb", &redis, "s3cret"),
    ];
    wait_for("both pods to answer", Duration::from_secs(15), || {
        pods.iter()
            .all(|p| p.get("/healthz").is_some())
            .then_some(())
    });
    let leader = wait_for("one pod to become ready", Duration::from_secs(15), || {
        pods.iter()
            .position(|p| p.get("/readyz").is_some_and(|(code, _)| code == 200))
    });
    let follower = &pods[1 - leader];
    let (code, body) = follower.get("/readyz").expect("/readyz answers");
    assert_eq!(
        code, 503,
        "the follower is not ready in leader mode: {body}"
    );
    assert!(body.starts_with("not the leader"), "{body}");
    let (code, body) = pods[leader].get("/readyz").expect("/readyz answers");
    assert_eq!(code, 200, "the leader stays ready: {body}");
    let (code, _) = follower.get("/healthz").expect("/healthz answers");
    assert_eq!(code, 200, "a follower is alive");
}
