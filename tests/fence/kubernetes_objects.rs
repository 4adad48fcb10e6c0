//! `leasehold::fence::k8s` and `examples/fenced_reconciler.rs` against the fake API server (with
//! resourceVersion preconditions) and a real redis-server.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, ResourceExt};
use leasehold::elector::{Elector, Role};
use leasehold::fence::FenceError;
use leasehold::fence::k8s::{ANNOTATION, replace};
use leasehold::lease::FencingToken;
use tokio_util::sync::CancellationToken;

use crate::fenced_reconciler;
use crate::support::contenders::{fast_timing, lease, unique_lease};
use testbed::fake_api::FakeApiServer;
use testbed::redis_server::RedisServer;
use testbed::wait::{eventually, until};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_stamps_objects_under_leadership_with_its_token() {
    let api = FakeApiServer::start().await;
    let redis = RedisServer::start();
    api.insert(&config_map("report", true));
    api.insert(&config_map("other", false));
    let elector = Elector::new(
        lease(
            &redis.url(),
            &unique_lease("fenced-reconciler"),
            "pod-a",
            false,
        ),
        fast_timing(),
    )
    .expect("elector");
    let mut status = elector.status();
    let shutdown = CancellationToken::new();
    let config_maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let task = tokio::spawn(elector.run(shutdown.clone(), move |leadership| {
        fenced_reconciler::lead(leadership, config_maps.clone())
    }));
    let leader = until("leadership", &mut status, Duration::from_secs(5), |s| {
        matches!(s.role, Role::Leader { .. })
    })
    .await;
    let Role::Leader { token, .. } = leader.role else {
        unreachable!("waited for a leader")
    };
    let stamped = eventually("the stamp", Duration::from_secs(10), || async {
        let (leader, stored) = leader_and_token(&api, "report");
        (leader.is_some() && stored.is_some()).then_some((leader, stored))
    })
    .await;
    assert_eq!(stamped, (Some("pod-a".to_owned()), Some(token.to_string())));
    assert_eq!(
        leader_and_token(&api, "other"),
        (None, None),
        "not selected"
    );
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the elector stops")
        .expect("elector task");
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
