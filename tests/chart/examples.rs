//! The example manifests in docs/examples: valid against the offline Kubernetes schemas, their
//! leasehold arguments accepted by the real parser, and their RBAC within the code's one list of
//! API calls.

use std::path::PathBuf;

use harness::helm::{self, Rendered};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::rbac::v1::Role;
use leasehold::cli::{self, Command, Environment};
use leasehold::k8s::rbac;

fn example(name: &str) -> PathBuf {
    harness::repo().join("docs/examples").join(name)
}

fn cronjob_example() -> Rendered {
    let text = std::fs::read_to_string(example("cronjob.yaml")).expect("read the example");
    Rendered::parse(&text)
}

#[test]
fn the_cronjob_example_validates_against_the_kubernetes_schemas() {
    helm::assert_file_valid_for_kubernetes("docs/examples/cronjob.yaml", &example("cronjob.yaml"));
}

#[test]
fn the_cronjob_example_forbids_overlap_and_runs_leasehold_lock_with_valid_flags() {
    let cron: CronJob = cronjob_example().one();
    let spec = cron.spec;
    assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
    let job = spec.job_template.spec.expect("job spec");
    assert_eq!(job.backoff_limit, Some(0), "a skipped run is not retried");
    let pod = job.template.spec.expect("pod spec");
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let container = &pod.containers[0];
    let args = container.args.clone().expect("args");
    assert_eq!(args[0], "lock");
    let env_names: Vec<_> = container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    for name in ["POD_NAME", "POD_NAMESPACE", "LEASEHOLD_REDIS_URL"] {
        assert!(env_names.contains(&name), "{name} missing: {env_names:?}");
    }
    // The real parser and validation, with the password file replaced by one that exists and the
    // command by one on this machine.
    let dir = tempfile::tempdir().expect("temp dir");
    let password = dir.path().join("password");
    std::fs::write(&password, "secret\n").expect("write");
    let mut argv = vec!["leasehold".to_owned()];
    for arg in &args {
        argv.push(match arg.split_once('=') {
            Some(("--redis-password-file", _)) => {
                format!("--redis-password-file={}", password.display())
            }
            _ => arg.clone(),
        });
    }
    let separator = argv.iter().position(|a| a == "--").expect("-- CMD");
    argv.truncate(separator + 1);
    argv.push("true".into());
    let cli = cli::parse_from(&argv).expect("the example's flags parse");
    let Command::Lock(lock) = cli.command else {
        panic!("not the lock subcommand");
    };
    let env = Environment {
        pod_name: Some("nightly-report-29000000-abcde".into()),
        pod_namespace: Some("reports".into()),
        ..Environment::default()
    };
    let settings = lock.resolve(&env).expect("the example's flags validate");
    assert!(
        settings.wait.is_zero(),
        "a run that finds the lock held exits at once"
    );
    let timing = settings.contender.timing;
    assert!(
        settings
            .contender
            .exec
            .as_ref()
            .expect("a command")
            .grace_period
            < timing.lease_duration
    );
    let grace = settings
        .contender
        .exec
        .as_ref()
        .expect("a command")
        .grace_period;
    let termination = pod
        .termination_grace_period_seconds
        .expect("termination grace");
    assert!(
        grace + settings.contender.timing.call_timeout()
            < std::time::Duration::from_secs(termination as u64),
        "terminationGracePeriodSeconds {termination} must exceed --grace-period {grace:?} and a release"
    );
}

#[test]
fn the_cronjob_example_role_asks_only_for_calls_the_code_makes() {
    let role: Role = cronjob_example().one();
    for rule in role.rules.unwrap_or_default() {
        for group in rule.api_groups.clone().unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    assert!(
                        rbac::allows(&group, &resource, verb),
                        "{verb} on {group}/{resource} is not in rbac::API_CALLS"
                    );
                }
            }
        }
    }
}
