//! The chart's status file, its example sidecar and the candidate check: rendered by the real
//! helm, the leasehold container's arguments accepted by the real parser, the sidecar reading the
//! shared emptyDir, the manifests valid to `kubernetes-validate --strict`, and the schema
//! refusing a check that is not on loopback or that names both forms.

use harness::helm::{self, args, assert_refused, leasehold_container, pod_spec, render};
use k8s_openapi::api::apps::v1::Deployment;
use leasehold::cli::{Command, Environment, parse_from};

const SIDECAR_VALUES: &str = "\
statusFile:
  enabled: true
  exampleSidecar:
    enabled: true
candidateCheck:
  url: http://127.0.0.1:9000/healthz
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 2
  initialDelaySeconds: 30
";

#[test]
fn the_status_file_and_its_example_sidecar_share_an_emptydir_and_the_args_parse() {
    let r = render(SIDECAR_VALUES);
    let d: Deployment = r.one();
    let leasehold = leasehold_container(&d);
    let argv = args(&leasehold);
    for want in [
        "--status-file=/var/run/leasehold/leader.json",
        "--candidate-check=http://127.0.0.1:9000/healthz",
        "--candidate-check-period=5s",
        "--candidate-check-timeout=2s",
        "--candidate-check-failure-threshold=2",
        "--candidate-check-success-threshold=1",
        "--candidate-check-initial-delay=30s",
    ] {
        assert!(
            argv.iter().any(|a| a == want),
            "{want} missing from {argv:?}"
        );
    }
    // The real parser takes what the chart renders; the files that exist only in the pod (the
    // password secret, the emptyDir) are left out or moved here.
    let here = tempfile::tempdir().expect("temp dir");
    let mut full = vec!["leasehold".to_owned()];
    full.extend(argv.iter().filter_map(|a| {
        if a.starts_with("--redis-password-file") {
            None
        } else if a.starts_with("--status-file=") {
            Some(format!(
                "--status-file={}/leader.json",
                here.path().display()
            ))
        } else {
            Some(a.clone())
        }
    }));
    full.push("--lease-name=shop/web".into());
    let cli = parse_from(&full).unwrap_or_else(|e| panic!("{e}"));
    let Command::Run(run) = cli.command else {
        panic!("not run")
    };
    let settings = run
        .resolve(&Environment {
            pod_name: Some("web-1".into()),
            ..Environment::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let check = settings.candidacy.expect("a candidate check");
    assert_eq!(check.failure_threshold, 2);
    assert_eq!(check.initial_delay, std::time::Duration::from_secs(30));

    let spec = pod_spec(&d);
    let mounts = |name: &str| {
        spec.containers
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no container {name}"))
            .volume_mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|m| m.name == "leasehold-status")
            .unwrap_or_else(|| panic!("{name} does not mount leasehold-status"))
    };
    assert_eq!(mounts("leasehold").mount_path, "/var/run/leasehold");
    assert_eq!(mounts("leasehold").read_only, None);
    assert_eq!(mounts("leader-watcher").mount_path, "/var/run/leasehold");
    assert_eq!(mounts("leader-watcher").read_only, Some(true));
    let volume = spec
        .volumes
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "leasehold-status")
        .expect("the emptyDir");
    assert!(volume.empty_dir.is_some());

    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("sidecar.yaml");
    let docs: Vec<String> = r
        .docs
        .iter()
        .map(|d| serde_yaml::to_string(d).expect("yaml"))
        .collect();
    std::fs::write(&file, docs.join("---\n")).expect("write");
    let out = helm::run(
        &helm::kubernetes_validate(),
        &[
            "--strict",
            "--quiet",
            "-k",
            "1.34.0",
            file.to_str().expect("utf-8"),
        ],
    );
    assert!(
        out.ok(),
        "kubernetes-validate:\n{}{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn the_default_release_has_no_status_file_sidecar_or_check() {
    let d: Deployment = render("").one();
    let argv = args(&leasehold_container(&d));
    assert!(
        !argv
            .iter()
            .any(|a| a.starts_with("--status-file") || a.starts_with("--candidate-check")),
        "{argv:?}"
    );
    assert_eq!(pod_spec(&d).containers.len(), 1);
}

#[test]
fn the_schema_refuses_a_check_off_loopback_or_in_both_forms() {
    assert_refused(
        "candidateCheck:\n  url: http://10.0.0.1:9000/healthz\n",
        &["candidateCheck", "url"],
    );
    assert_refused(
        "candidateCheck:\n  url: http://127.0.0.1:9000/\n  command: \"true\"\n",
        &["candidateCheck"],
    );
    assert_refused(
        "candidateCheck:\n  command: \"true\"\n  failureThreshold: 0\n",
        &["failureThreshold"],
    );
}
