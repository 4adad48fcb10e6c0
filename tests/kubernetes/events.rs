//! The Events a replica records, one per moment of a term, each with its own note: a second term
//! of the same replica is an Event of its own (not a repeat of the first one's, which would show
//! the first term's token), and a term's end is recorded when it ends.

use std::time::Duration;

use crate::fixtures::{NS, api_on_a_runtime, deployment_with_pods, member};
use harness::contenders::{lease, unique_lease};
use harness::replica::run_to_end;
use harness::timings::SIX_SECOND_TERM;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use testbed::fake_api::FakeApiServer;
use testbed::redis_server::RedisServer;
use testbed::wait::eventually;

/// The notes of the Events recorded with `reason`, oldest first.
fn notes(api: &FakeApiServer, reason: &str) -> Vec<String> {
    let mut events = api.list::<Event>(NS);
    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    events
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_leads_again_records_its_new_term_with_its_own_token() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    deployment_with_pods(&api, &["web-7d4f-a"]);
    let lease_name = unique_lease(&format!("{NS}/web")).replace("test/", "");
    // A term no load ends before the intruder does.
    let mut a = member(&api, &redis, &lease_name, "web-7d4f-a", SIX_SECOND_TERM).await;
    a.wait_leading().await;
    let key = lease(&redis.url(), &lease_name, "observer", false)
        .keys()
        .lease
        .clone();
    // Someone else's value: a's next renewal finds its term gone (`lost`). Deleted, the lease
    // is free again, and a takes a second term.
    redis.cmd::<String>(&["SET", &key, "intruder-1#1", "PX", "60000"]);
    eventually("a to lose its term", Duration::from_secs(5), || async {
        (!notes(&api, "LeadershipLost").is_empty()).then_some(())
    })
    .await;
    redis.cmd::<i64>(&["DEL", &key]);
    let elected = eventually("a's second term", Duration::from_secs(10), || async {
        let elected = notes(&api, "LeaderElected");
        (elected.len() == 2).then_some(elected)
    })
    .await;
    assert_ne!(
        elected[0], elected[1],
        "the second term's token: {elected:?}"
    );
    a.stop().await;
    let lost = notes(&api, "LeadershipLost");
    assert!(lost[0].ends_with(": lease lost"), "{lost:?}");
    assert!(lost[1].ends_with(": shutdown"), "{lost:?}");
}

/// A lock with Events and neither the label nor the mirror has nothing to keep while it leads:
/// its term's end is still recorded when the term ends, with the reason.
#[test]
fn a_lock_records_the_end_of_its_term_when_it_ends() {
    let (runtime, api) = api_on_a_runtime();
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = api.write_kubeconfig(dir.path(), NS);
    let lease_name = unique_lease("events-lock");
    let url = redis.url();
    let args = [
        "lock",
        "--redis-url",
        &url,
        "--lease-name",
        &lease_name,
        "--kubernetes",
        "on",
        "--no-leader-label",
        "--no-lease-mirror",
        "--no-data-loss-cooldown",
        "--",
        "sh",
        "-c",
        "sleep 1",
    ];
    let env = [
        ("KUBECONFIG", config.to_str().unwrap()),
        ("POD_NAME", "cron-1"),
        ("POD_NAMESPACE", NS),
    ];
    // The Events are about the lock's pod, by its uid too: `kubectl describe pod` finds an
    // object's Events by name and uid, and showed none of a reference without the uid.
    let pod = api.insert(&Pod {
        metadata: ObjectMeta {
            name: Some("cron-1".into()),
            namespace: Some(NS.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    });
    let (code, _, stderr) = run_to_end(&args, &env);
    assert_eq!(code, 0, "{stderr}");
    let lost = notes(&api, "LeadershipLost");
    assert_eq!(lost.len(), 1, "{lost:?}\n{stderr}");
    assert!(lost[0].ends_with(": work ended"), "{lost:?}");
    for event in api.list::<Event>(NS) {
        let about = event.regarding.unwrap_or_default();
        assert_eq!(about.name.as_deref(), Some("cron-1"), "{about:?}");
        assert_eq!(about.uid, pod.metadata.uid, "{about:?}");
    }
    drop(runtime);
}
