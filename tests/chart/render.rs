//! The Helm chart in charts/leasehold, as the real helm renders it: `helm lint --strict` with
//! every value set, the rendered objects parsed into k8s-openapi types with the standard labels,
//! the rendered arguments fed to the binary's own parser, and what each object must hold (probes,
//! environment, secrets and their mounts, the locked-down containers, the Services). The other
//! chart tests: chart_values (the values schema and the templates' own refusals), chart_rollout,
//! chart_rbac, chart_manifests (manifests/, offline schemas, the image) and chart_pod (the
//! rendered container run as the real binary).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use leasehold::http::ReadinessMode;
use leasehold::k8s::KubernetesMode;

use harness::chart_settings::resolve;
use harness::helm::{
    self, LEADER_MODE, VALUE_SETS, args, deployment, each_value_set, flag, labels, pod_spec, render,
};

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
            s.contender.kube.mode,
            KubernetesMode::On,
            "{name}: in a pod the API must be there; fail loudly rather than run without it"
        );
        assert_eq!(
            s.contender.kube.leader_label.as_deref(),
            flag(&a, "leader-label").as_deref(),
            "{name}"
        );
        assert!(
            s.contender.redis.options.password.is_some()
                == flag(&a, "redis-password-file").is_some()
        );
        assert_eq!(
            s.contender.identity, "lh-leasehold-7d4f9c-x2x9q",
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
        // A key under the chart's prefix that selects nothing is the user's to choose.
        (
            "leaderLabel: app.kubernetes.io/leader\n",
            "app.kubernetes.io/leader",
        ),
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

    assert_eq!(
        secret.optional,
        Some(true),
        "a Secret without the password key must not hold the pod in FailedMount"
    );

    // No password key: no flag, no volume but the API token's.
    let (d, c) = deployment(&render("redis:\n  passwordKey: \"\"\n"));
    assert!(flag(&args(&c), "redis-password-file").is_none());
    let volumes = pod_spec(&d).volumes.unwrap_or_default();
    let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["leasehold-api-token"]);

    // A Redis without a password, its URL in the values: no Secret at all.
    let values =
        "redis:\n  urlKey: \"\"\n  url: redis://redis.data.svc:6379/0\n  passwordKey: \"\"\n";
    let lint = helm::lint_strict(values);
    assert!(lint.ok(), "{}{}", lint.stdout, lint.stderr);
    let (d, _) = deployment(&render(values));
    let spec = serde_yaml::to_string(&pod_spec(&d)).expect("the pod spec as YAML");
    let spec = spec.replace("/var/run/secrets/kubernetes.io/", "");
    assert!(
        !spec.contains("secret") && !spec.contains("leasehold-redis"),
        "a passwordless Redis needs no Secret:\n{spec}"
    );
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
