//! `leasehold::fence::k8s` against the fake API server (with resourceVersion preconditions) and a
//! real redis-server, and `examples/fenced_reconciler.rs` run as its own program against both.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, ResourceExt};
use leasehold::elector::{Elector, Role};
use leasehold::fence::FenceError;
use leasehold::fence::k8s::{ANNOTATION, replace};
use leasehold::lease::FencingToken;
use tokio_util::sync::CancellationToken;

use harness::contenders::{fast_timing, lease, until_leading};
use harness::replica::lease_status_json;
use nix::sys::signal::Signal;
use testbed::Guarded;
use testbed::fake_api::FakeApiServer;
use testbed::redis_server::RedisServer;
use testbed::wait::eventually;

fn config_map(name: &str, stamped: bool) -> ConfigMap {
    let labels =
        stamped.then(|| BTreeMap::from([("example.com/stamped".to_owned(), "true".to_owned())]));
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            labels,
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn leader_and_token(api: &FakeApiServer, name: &str) -> (Option<String>, Option<String>) {
    let cm: ConfigMap = api.get("default", name).expect("the config map");
    let leader = cm.data.as_ref().and_then(|d| d.get("leader")).cloned();
    (leader, cm.annotations().get(ANNOTATION).cloned())
}

fn set(key: &'static str, value: &'static str) -> impl FnOnce(&mut ConfigMap) {
    move |cm| {
        cm.data
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
    }
}

/// The lease `examples/fenced_reconciler.rs` contends for.
const EXAMPLE_LEASE: &str = "default/fenced-reconciler";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_stamps_objects_under_leadership_with_its_token() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    api.insert(&config_map("report", true));
    api.insert(&config_map("other", false));
    // A term that begins and ends first, on this Redis: the example's own term then follows a
    // release instead of waiting out the data-loss cooldown that a fresh Redis calls for.
    let before = first_term_released(&redis.url()).await;

    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(harness::example("fenced_reconciler"));
    cmd.args([redis.url().as_str(), "default", "pod-a"])
        .env("KUBECONFIG", api.write_kubeconfig(dir.path(), "default"));
    let mut example = Guarded::spawn(cmd, "fenced_reconciler").expect("start the example");

    let stamped = eventually("the stamp", Duration::from_secs(15), || async {
        let (leader, stored) = leader_and_token(&api, "report");
        (leader.is_some() && stored.is_some()).then_some((leader, stored))
    })
    .await;
    let status = lease_status_json(&redis.url(), EXAMPLE_LEASE).expect("leasehold status");
    let token = status["token"]
        .as_u64()
        .expect("the example's term has a token");
    assert!(
        token > before.0,
        "{token} follows the first term's {before}"
    );
    assert_eq!(stamped, (Some("pod-a".to_owned()), Some(token.to_string())));
    assert_eq!(
        leader_and_token(&api, "other"),
        (None, None),
        "not selected"
    );

    // Ctrl-C ends the example's election: it releases the lease and exits.
    example.signal(Signal::SIGINT).expect("signal the example");
    let exited = tokio::task::spawn_blocking(move || example.wait_exit(Duration::from_secs(10)))
        .await
        .expect("wait for the example");
    assert_eq!(
        exited.expect("its exit"),
        Some(0),
        "the example exits 0 on Ctrl-C"
    );
}

/// Leads `EXAMPLE_LEASE` once with a short term, from this process, and steps down with a
/// release; the term's token.
async fn first_term_released(url: &str) -> FencingToken {
    let elector = Elector::new(lease(url, EXAMPLE_LEASE, "pod-first", false), fast_timing())
        .expect("elector");
    let mut status = elector.status();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(elector.run(shutdown.clone(), |leadership| async move {
        leadership.lost().await;
        Ok::<(), FenceError>(())
    }));
    let leader = until_leading("the first term", &mut status, Duration::from_secs(5)).await;
    let Role::Leader { token, .. } = leader.role else {
        unreachable!("waited for a leader")
    };
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the elector stops")
        .expect("elector task");
    token
}

#[tokio::test]
async fn a_write_with_a_lower_token_than_the_objects_is_refused_and_changes_nothing() {
    let api = FakeApiServer::start().await;
    api.insert(&config_map("report", true));
    let config_maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    replace(&config_maps, "report", FencingToken(7), set("leader", "b"))
        .await
        .expect("first write");
    let refused = replace(&config_maps, "report", FencingToken(6), set("leader", "a")).await;
    match refused {
        Err(FenceError::Stale { seen, offered, .. }) => {
            assert_eq!((seen, offered), (FencingToken(7), FencingToken(6)));
        }
        other => panic!("expected a stale refusal, got {other:?}"),
    }
    assert_eq!(
        leader_and_token(&api, "report"),
        (Some("b".to_owned()), Some("7".to_owned()))
    );
    replace(&config_maps, "report", FencingToken(7), set("leader", "b2"))
        .await
        .expect("the same term writes again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_write_between_the_read_and_the_write_makes_the_older_conflict_then_refused() {
    let api = FakeApiServer::start().await;
    api.insert(&config_map("report", true));
    let config_maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let newer = config_maps.clone();
    // The older leader (token 5) has read the object; the newer (token 6) writes before it does.
    let older = replace(&config_maps, "report", FencingToken(5), move |cm| {
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current()
                .block_on(replace(
                    &newer,
                    "report",
                    FencingToken(6),
                    set("leader", "new"),
                ))
                .expect("the newer leader writes");
        });
        set("leader", "old")(cm);
    })
    .await;
    assert!(
        matches!(older, Err(FenceError::Conflict { .. })),
        "{older:?}"
    );
    // Its retry reads again and meets the newer token.
    let retry = replace(
        &config_maps,
        "report",
        FencingToken(5),
        set("leader", "old"),
    )
    .await;
    assert!(matches!(retry, Err(FenceError::Stale { .. })), "{retry:?}");
    assert_eq!(
        leader_and_token(&api, "report"),
        (Some("new".to_owned()), Some("6".to_owned()))
    );
}
