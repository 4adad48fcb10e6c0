//! The binary end to end against the in-process fake API server, through a kubeconfig: it names
//! its lease after its Deployment, labels the leader and mirrors the lease, and the label moves
//! to the next leader.

use std::time::Duration;

use crate::calls::assert_within_rbac;
use crate::fixtures::{NS, api_on_a_runtime, deployment_with_pods, label_of};
use harness::command::RunCommand;
use harness::replica::{FAST, Replica};
use k8s_openapi::api::coordination::v1::Lease;
use testbed::fake_api::FakeApiServer;
use testbed::redis_server::RedisServer;

#[test]
fn the_binary_names_its_lease_after_its_deployment_and_labels_the_leader() {
    use testbed::wait::wait_for;
    let (runtime, api) = api_on_a_runtime();
    deployment_with_pods(&api, &["web-7d4f-a", "web-7d4f-b"]);
    let redis = RedisServer::start();
    let spawn = |pod: &str| start_in_pod(&api, &redis, pod, pod, None);
    let (_a_dir, a) = spawn("web-7d4f-a");
    let a = a.healthy();
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    assert_eq!(
        a.leader()["lease"],
        "shop/web",
        "named after the Deployment"
    );
    assert_eq!(a.leader()["lease_key"], "leasehold:{shop/web}");
    let (_b_dir, b) = spawn("web-7d4f-b");
    let b = b.healthy();
    wait_for("b to follow a", Duration::from_secs(5), || {
        (b.leader()["leader"] == "web-7d4f-a").then_some(())
    });
    wait_for("the label on a", Duration::from_secs(5), || {
        (label_of(&api, "web-7d4f-a").as_deref() == Some("true")).then_some(())
    });
    assert!(
        wait_for("the mirror", Duration::from_secs(5), || api
            .get::<Lease>(NS, "web"))
        .spec
        .is_some()
    );
    drop(a);
    wait_for(
        "b to lead and carry the label",
        Duration::from_secs(5),
        || (b.is_ready() && label_of(&api, "web-7d4f-b").as_deref() == Some("true")).then_some(()),
    );
    assert_within_rbac(&api);
    drop(b);
    drop(runtime);
}

/// A replica that was killed while it led (its container restarts, the pod stays) leaves the
/// leader label on its pod; without a Deployment to scope the label, no other replica removes
/// it, so the restarted process takes it off before it contends, and a Service that selects
/// the label stops routing to a pod that does not lead.
#[test]
fn a_restarted_replica_takes_off_the_label_an_earlier_process_left() {
    use harness::contenders::{lease, unique_lease};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use leasehold::lease::Acquired;
    use testbed::wait::wait_for;
    let (runtime, api) = api_on_a_runtime();
    api.insert(&Pod {
        metadata: ObjectMeta {
            name: Some("solo-a".into()),
            namespace: Some(NS.into()),
            labels: Some(crate::fixtures::labels(&[(crate::fixtures::LABEL, "true")])),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    });
    let redis = RedisServer::start();
    let name = unique_lease("restarted");
    // Another replica holds the lease: the restarted one only follows.
    let holder = lease(&redis.url(), &name, "solo-b", false);
    let held = runtime.block_on(holder.acquire(Duration::from_secs(30), Duration::from_secs(2)));
    assert!(matches!(held, Ok(Acquired::Leader(_))), "{held:?}");
    let (_dir, a) = start_in_pod(&api, &redis, "solo-a", "solo-a", Some(&name));
    let a = a.healthy();
    wait_for("the earlier label off", Duration::from_secs(5), || {
        label_of(&api, "solo-a").is_none().then_some(())
    });
    wait_for("a to follow solo-b", Duration::from_secs(5), || {
        (a.leader()["leader"] == "solo-b").then_some(())
    });
    assert_within_rbac(&api);
    drop(a);
    drop(runtime);
}

/// `leasehold run` on `redis` started (not waited for) as `identity` in pod `pod` of the fake
/// API server, through a kubeconfig, with `lease` named by flag when given; the kubeconfig's
/// directory beside it.
fn start_in_pod(
    api: &FakeApiServer,
    redis: &RedisServer,
    pod: &str,
    identity: &str,
    lease: Option<&str>,
) -> (tempfile::TempDir, Replica) {
    let dir = tempfile::tempdir().unwrap();
    let config = api.write_kubeconfig(dir.path(), NS);
    let mut args = FAST.to_vec();
    args.extend(["--no-data-loss-cooldown", "--kubernetes", "on"]);
    let env = [
        ("KUBECONFIG", config.to_str().unwrap()),
        ("POD_NAME", pod),
        ("POD_NAMESPACE", NS),
    ];
    let mut run = RunCommand::new(harness::leasehold_bin())
        .redis_url(&redis.url())
        .args(&args);
    if let Some(lease) = lease {
        run = run.lease(lease);
    }
    (dir, Replica::start(run, identity, &env))
}

/// With the lease named by flag, the Deployment that owns the pod still scopes the leader
/// label. An API that fails the look-up (a 500 here) is an error at start, as when the
/// name comes from the Deployment: taken for "no Deployment", the process ran for its whole
/// life labelling its own pod only, and never took off a label an earlier leader left.
#[test]
fn a_named_lease_whose_deployment_the_api_does_not_tell_ends_at_start() {
    let (runtime, api) = api_on_a_runtime();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    api.fail_next_reads("pods", 1);
    let redis = RedisServer::start();
    let (_dir, mut a) = start_in_pod(&api, &redis, "web-7d4f-a", "web-7d4f-a", Some("shop/web"));
    let code = a.wait_exit(Duration::from_secs(10));
    assert_ne!(code, 0, "{}", a.log_text());
    assert!(a.log_text().contains("internal error"), "{}", a.log_text());
    assert!(a.events("became leader").is_empty(), "{}", a.log_text());
    drop(runtime);
}

/// The leader label, the deletion cost, the step-down annotation and the Events find the
/// leader's pod by its identity: with the integration on, an identity other than the pod's name
/// is refused at start. Accepted, the leader labelled no pod, and took the label off its own.
#[test]
fn an_identity_other_than_the_pod_name_is_refused_with_the_integration_on() {
    let (runtime, api) = api_on_a_runtime();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    let redis = RedisServer::start();
    let (_dir, mut a) = start_in_pod(&api, &redis, "web-7d4f-a", "billing-primary", None);
    let code = a.wait_exit(Duration::from_secs(10));
    assert_eq!(code, 2, "{}", a.log_text());
    let said = a.log_text();
    assert!(
        said.contains("billing-primary") && said.contains("web-7d4f-a"),
        "{said}"
    );
    assert!(said.contains("--identity"), "names the flag: {said}");
    drop(runtime);
}

/// A leader whose label the API refuses (a Role without `patch` on pods, an admission webhook)
/// says so at warn level, the first time and every tenth, not only at debug: the Service has no
/// endpoint meanwhile, and nothing else would tell.
#[test]
fn a_leader_label_the_api_refuses_is_said_at_warn_level() {
    let write = |api: &FakeApiServer| api.forbid_next_writes("pods", 1_000);
    refusal_said_at_warn_level(write, "a kubernetes write failed; retrying");
}

/// A leader whose pods the API will not list (a Role without `list` or `watch` on pods, a
/// namespace of the wrong name) says so at warn level, not only at debug: no pod is labelled and
/// no step-down annotation is heard meanwhile, and nothing else would tell.
#[test]
fn a_pod_list_the_api_refuses_is_said_at_warn_level() {
    let list = |api: &FakeApiServer| api.forbid_next_lists("pods", 1_000);
    let said = refusal_said_at_warn_level(list, "a kubernetes watch failed; retrying");
    assert_eq!(said["resource"], "pods", "{said}");
}

/// A leader of Deployment `web` whose calls `refuse` makes the API refuse: its first `event`
/// at warn level, which names the refusal, while no pod carries the label.
fn refusal_said_at_warn_level(
    refuse: impl FnOnce(&FakeApiServer),
    event: &str,
) -> serde_json::Value {
    use testbed::wait::wait_for;
    let (runtime, api) = api_on_a_runtime();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    refuse(&api);
    let redis = RedisServer::start();
    let (_dir, a) = start_in_pod(&api, &redis, "web-7d4f-a", "web-7d4f-a", None);
    let a = a.healthy();
    let said = wait_for(
        "the refusal said at warn level",
        Duration::from_secs(10),
        || a.events(event).into_iter().find(|l| l["level"] == "WARN"),
    );
    let error = said["error"].as_str().unwrap_or_default();
    assert!(error.contains("forbidden"), "{said}");
    assert!(label_of(&api, "web-7d4f-a").is_none());
    drop(runtime);
    said
}

/// An API server that stops answering mid-call (a connection kept open and never answered) does
/// not hold the leader label for the rest of the term: each call of the term is bounded, and a
/// call given up is tried again. Unbounded (the client has no read timeout, for its watches),
/// the label's one hung write kept the pod unlabelled, the Service without an endpoint, for as
/// long as the term lasted.
#[test]
fn a_label_write_the_api_never_answers_is_given_up_and_tried_again() {
    let (runtime, api) = api_on_a_runtime();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    // The first write is the start's withdrawal of an earlier label (bounded by its caller);
    // the second, the term's label.
    api.hang_next_calls("pods", 2, false);
    let redis = RedisServer::start();
    let (_dir, a) = start_in_pod(&api, &redis, "web-7d4f-a", "web-7d4f-a", None);
    let _a = a.healthy();
    testbed::wait::wait_for("the leader label", Duration::from_secs(20), || {
        label_of(&api, "web-7d4f-a").filter(|v| v == "true")
    });
    drop(runtime);
}

/// A list that starts the label's watch and never finishes is given up too (the client's read
/// timeout, above the watches' own): the label's controller listed for the rest of the term.
#[test]
fn a_label_watch_whose_list_the_api_never_answers_starts_again() {
    let (runtime, api) = api_on_a_runtime();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    // The label's list and the step-down annotation's.
    api.hang_next_lists("pods", 2);
    let redis = RedisServer::start();
    let (_dir, a) = start_in_pod(&api, &redis, "web-7d4f-a", "web-7d4f-a", None);
    let _a = a.healthy();
    testbed::wait::wait_for("the leader label", Duration::from_secs(60), || {
        label_of(&api, "web-7d4f-a").filter(|v| v == "true")
    });
    drop(runtime);
}

/// The start's look-up of the pod's Deployment against an API server that never answers ends
/// the process (exit 1, as for an API error), where it waited for ever: neither leading nor
/// following, and saying nothing.
#[test]
fn a_deployment_look_up_the_api_never_answers_ends_at_start() {
    let (runtime, api) = api_on_a_runtime();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    api.hang_next_calls("pods", 1, true);
    let redis = RedisServer::start();
    let (_dir, mut a) = start_in_pod(&api, &redis, "web-7d4f-a", "web-7d4f-a", None);
    let code = a.wait_exit(Duration::from_secs(20));
    assert_eq!(code, 1, "{}", a.log_text());
    assert!(a.log_text().contains("get pod"), "{}", a.log_text());
    drop(runtime);
}
