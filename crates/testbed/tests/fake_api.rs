//! The fake API server proven with kube's real client, watcher and controller: CRUD, optimistic
//! concurrency, patches, selectors, watches, a controller, and injected conflicts.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http;
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, ObjectReference, Pod, PodStatus};
use k8s_openapi::api::events::v1::Event as EventsEvent;
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, PartialObjectMeta, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as RecordedEvent, EventType, Recorder};
use kube::runtime::{Controller, watcher};
use serde_json::json;
use testbed::fake_api::{FakeApiServer, HISTORY_LIMIT, Recorded};
use tokio::sync::{mpsc, watch as signal};

/// Bound on every wait for something the fake or kube does.
const WAIT: Duration = Duration::from_secs(10);

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some("default".to_owned()),
        labels: (!labels.is_empty()).then(|| {
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        }),
        ..ObjectMeta::default()
    }
}

fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(name, labels),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..ConfigMap::default()
    }
}

fn lease(name: &str, holder: &str) -> Lease {
    Lease {
        metadata: meta(name, &[]),
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            ..LeaseSpec::default()
        }),
    }
}

/// The fake API server, a lease API on it, and the lease `name` it holds, held by `holder`.
async fn server_with_lease(name: &str, holder: &str) -> (FakeApiServer, Api<Lease>, Lease) {
    let server = FakeApiServer::start().await;
    let api: Api<Lease> = Api::default_namespaced(server.client());
    let created = api
        .create(&PostParams::default(), &lease(name, holder))
        .await
        .unwrap();
    (server, api, created)
}

fn pod(name: &str) -> Pod {
    Pod {
        metadata: meta(name, &[("app", "demo")]),
        ..Pod::default()
    }
}

fn version_of(object: &impl kube::Resource) -> u64 {
    let version = object.meta().resource_version.as_deref();
    version
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("resourceVersion {version:?} is not a number"))
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

/// The last PATCH request the server got.
fn last_patch(server: &FakeApiServer) -> Recorded {
    server
        .requests()
        .into_iter()
        .rfind(|r| r.method == "PATCH")
        .expect("the server got a PATCH")
}

/// The HTTP code of a failed kube call.
fn api_code<T: std::fmt::Debug>(result: kube::Result<T>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends a raw request through kube's client and returns the HTTP code it got.
async fn raw_code(client: &kube::Client, request: http::Request<Vec<u8>>) -> u16 {
    match client.request_text(request).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(other) => panic!("expected an answer from the fake, got {other}"),
    }
}

/// Runs a kube watcher in the background and hands its events over a channel.
fn spawn_watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> mpsc::UnboundedReceiver<watcher::Event<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let event = event.unwrap_or_else(|err| panic!("the watcher failed: {err}"));
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    rx
}

async fn next_event<K>(
    rx: &mut mpsc::UnboundedReceiver<watcher::Event<K>>,
    what: &str,
) -> watcher::Event<K> {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the watcher stopped while waiting for {what}"),
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// Skips the initial list and returns once the watcher has finished it.
async fn until_init_done<K>(rx: &mut mpsc::UnboundedReceiver<watcher::Event<K>>) -> Vec<K> {
    let mut initial = Vec::new();
    loop {
        match next_event(rx, "the end of the initial list").await {
            watcher::Event::InitDone => return initial,
            watcher::Event::InitApply(object) => initial.push(object),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_map_goes_through_create_get_list_replace_and_delete() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());

    let created = api
        .create(
            &PostParams::default(),
            &config_map("settings", &[], &[("mode", "a")]),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some(), "create sets a uid");
    assert!(
        created.metadata.creation_timestamp.is_some(),
        "create sets creationTimestamp"
    );
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));

    let fetched = api.get("settings").await.unwrap();
    assert_eq!(fetched, created);
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items, vec![created.clone()]);
    assert_eq!(
        listed.metadata.resource_version.as_deref(),
        created.metadata.resource_version.as_deref(),
        "the list is at the store's current version"
    );

    let mut changed = fetched.clone();
    changed.data = Some(BTreeMap::from([("mode".to_owned(), "b".to_owned())]));
    let replaced = api
        .replace("settings", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.data, changed.data);
    assert_eq!(
        replaced.metadata.uid, created.metadata.uid,
        "a replace keeps the uid"
    );
    assert!(version_of(&replaced) > version_of(&created));

    let deleted = api
        .delete("settings", &DeleteParams::default())
        .await
        .unwrap();
    assert!(deleted.is_left(), "the delete answers the deleted object");
    assert_eq!(api_code(api.get("settings").await), 404);
    assert_eq!(api.get_opt("settings").await.unwrap(), None);
    assert_eq!(
        api_code(api.delete("settings", &DeleteParams::default()).await),
        404
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn replacing_with_a_stale_resource_version_is_a_conflict() {
    let (_server, api, first) = server_with_lease("stale", "a").await;

    let mut newer = first.clone();
    newer.spec = Some(LeaseSpec {
        holder_identity: Some("b".to_owned()),
        ..LeaseSpec::default()
    });
    api.replace("stale", &PostParams::default(), &newer)
        .await
        .unwrap();

    let mut stale = first;
    stale.spec = Some(LeaseSpec {
        holder_identity: Some("c".to_owned()),
        ..LeaseSpec::default()
    });
    assert_eq!(
        api_code(api.replace("stale", &PostParams::default(), &stale).await),
        409
    );
    assert_eq!(
        holder(&api.get("stale").await.unwrap()),
        Some("b"),
        "the stale write changed nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn creating_a_name_that_exists_is_already_exists() {
    let (_server, api, _) = server_with_lease("taken", "a").await;

    match api
        .create(&PostParams::default(), &lease("taken", "b"))
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 409);
            assert_eq!(status.reason, "AlreadyExists");
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(holder(&api.get("taken").await.unwrap()), Some("a"));
}

#[tokio::test(flavor = "multi_thread")]
async fn create_honours_generate_name_and_dry_run() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut generated = config_map("", &[], &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".to_owned());

    let first = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let second = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let (first, second) = (first.metadata.name.unwrap(), second.metadata.name.unwrap());
    assert!(
        first.starts_with("gen-") && first.len() > "gen-".len(),
        "{first}"
    );
    assert_ne!(first, second);

    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry, &config_map("dry", &[], &[]))
        .await
        .unwrap();
    assert_eq!(
        api.get_opt("dry").await.unwrap(),
        None,
        "a dry-run create stores nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn merge_patch_changes_the_object_and_bumps_the_resource_version() {
    let (server, api, created) = server_with_lease("merged", "a").await;

    let patch =
        json!({ "metadata": { "labels": { "team": "x" } }, "spec": { "holderIdentity": "b" } });
    let patched = api
        .patch("merged", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(holder(&patched), Some("b"));
    assert_eq!(patched.metadata.labels.as_ref().unwrap()["team"], "x");
    assert!(version_of(&patched) > version_of(&created));
    assert_eq!(
        patched.metadata.generation,
        Some(2),
        "a spec change bumps the generation"
    );

    let again = api
        .patch("merged", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        version_of(&again),
        version_of(&patched),
        "a no-op patch writes nothing"
    );

    let request = last_patch(&server);
    assert_eq!(
        request.path,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/merged"
    );
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(request.body, Some(patch));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_patch_carrying_a_stale_resource_version_is_a_conflict() {
    let (_server, api, created) = server_with_lease("guarded", "a").await;
    let seen = created.metadata.resource_version.clone().unwrap();
    api.patch(
        "guarded",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "holderIdentity": "b" } })),
    )
    .await
    .unwrap();

    let guarded =
        json!({ "metadata": { "resourceVersion": seen }, "spec": { "holderIdentity": "c" } });
    let result = api
        .patch("guarded", &PatchParams::default(), &Patch::Merge(&guarded))
        .await;
    assert_eq!(api_code(result), 409);
    assert_eq!(holder(&api.get("guarded").await.unwrap()), Some("b"));
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_creates_then_updates_and_requires_a_field_manager() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    let api: Api<Lease> = Api::default_namespaced(client.clone());
    let apply = |holder: &str| {
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": { "name": "applied" },
            "spec": { "holderIdentity": holder },
        })
    };

    let created = api
        .patch(
            "applied",
            &PatchParams::apply("test"),
            &Patch::Apply(apply("a")),
        )
        .await
        .unwrap();
    assert_eq!(
        holder(&created),
        Some("a"),
        "apply creates an absent object"
    );
    let updated = api
        .patch(
            "applied",
            &PatchParams::apply("test"),
            &Patch::Apply(apply("b")),
        )
        .await
        .unwrap();
    assert_eq!(holder(&updated), Some("b"));
    assert!(version_of(&updated) > version_of(&created));
    assert_eq!(updated.metadata.uid, created.metadata.uid);

    let request = last_patch(&server);
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(request.query_param("fieldManager").as_deref(), Some("test"));
    assert_eq!(request.body, Some(apply("b")));

    // kube refuses an apply without a field manager before sending it; the server does too.
    let unmanaged =
        http::Request::patch("/apis/coordination.k8s.io/v1/namespaces/default/leases/applied")
            .header(http::header::CONTENT_TYPE, "application/apply-patch+yaml")
            .body(b"spec:\n  holderIdentity: c\n".to_vec())
            .unwrap();
    assert_eq!(raw_code(&client, unmanaged).await, 422);
    assert_eq!(holder(&api.get("applied").await.unwrap()), Some("b"));
}

#[tokio::test(flavor = "multi_thread")]
async fn json_patch_applies_operations_and_a_failed_test_is_invalid() {
    let (_server, api, _) = server_with_lease("ops", "a").await;

    let swap: json_patch::Patch = serde_json::from_value(json!([
        { "op": "test", "path": "/spec/holderIdentity", "value": "a" },
        { "op": "replace", "path": "/spec/holderIdentity", "value": "b" },
    ]))
    .unwrap();
    let patched = api
        .patch(
            "ops",
            &PatchParams::default(),
            &Patch::Json::<()>(swap.clone()),
        )
        .await
        .unwrap();
    assert_eq!(holder(&patched), Some("b"));

    let result = api
        .patch("ops", &PatchParams::default(), &Patch::Json::<()>(swap))
        .await;
    assert_eq!(api_code(result), 422, "the test operation no longer holds");
    assert_eq!(holder(&api.get("ops").await.unwrap()), Some("b"));
}

#[tokio::test(flavor = "multi_thread")]
async fn status_writes_change_only_the_status_and_object_writes_keep_it() {
    let server = FakeApiServer::start().await;
    let api: Api<Pod> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &pod("worker"))
        .await
        .unwrap();

    let status = json!({
        "metadata": { "labels": { "ignored": "yes" } },
        "status": { "phase": "Running" },
    });
    let patched = api
        .patch_status("worker", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        patched.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert!(
        !patched.metadata.labels.unwrap().contains_key("ignored"),
        "a status write changes only the status"
    );

    let object =
        json!({ "metadata": { "labels": { "kept": "yes" } }, "status": { "phase": "Failed" } });
    let patched = api
        .patch("worker", &PatchParams::default(), &Patch::Merge(&object))
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["kept"], "yes");
    assert_eq!(
        patched.status.and_then(|s| s.phase).as_deref(),
        Some("Running"),
        "a pod's status changes only through /status"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn label_selectors_filter_lists_like_the_api_server() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    for (name, labels) in [
        ("web-prod", &[("app", "web"), ("env", "prod")][..]),
        ("web-dev", &[("app", "web"), ("env", "dev")][..]),
        ("db-prod", &[("app", "db"), ("env", "prod")][..]),
        ("bare", &[][..]),
    ] {
        api.create(&PostParams::default(), &config_map(name, labels, &[]))
            .await
            .unwrap();
    }

    let cases: &[(&str, &[&str])] = &[
        ("app=web", &["web-dev", "web-prod"]),
        ("app==web,env=prod", &["web-prod"]),
        ("env!=prod", &["bare", "web-dev"]),
        ("app", &["db-prod", "web-dev", "web-prod"]),
        ("!app", &["bare"]),
        ("env in (dev,staging)", &["web-dev"]),
        ("env notin (dev),app", &["db-prod", "web-prod"]),
        ("app in (web, db),env in (prod)", &["db-prod", "web-prod"]),
    ];
    for (selector, expected) in cases {
        let listed = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap();
        let names: Vec<String> = listed
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert_eq!(names, *expected, "labelSelector {selector}");
    }
    let bad = api.list(&ListParams::default().labels("app in (web")).await;
    assert_eq!(api_code(bad), 400, "a malformed selector is a bad request");
}

#[tokio::test(flavor = "multi_thread")]
async fn field_selectors_pick_by_name_and_namespace_across_namespaces() {
    let server = FakeApiServer::start().await;
    let mut elsewhere = config_map("shared", &[], &[]);
    elsewhere.metadata.namespace = Some("other".to_owned());
    server.insert(&elsewhere);
    server.insert(&config_map("shared", &[], &[]));
    server.insert(&config_map("mine", &[], &[]));
    let all: Api<ConfigMap> = Api::all(server.client());

    let names_in = |list: kube::core::ObjectList<ConfigMap>| -> Vec<(String, String)> {
        list.items
            .into_iter()
            .map(|c| (c.metadata.namespace.unwrap(), c.metadata.name.unwrap()))
            .collect()
    };
    let by_name = all
        .list(&ListParams::default().fields("metadata.name=shared"))
        .await
        .unwrap();
    assert_eq!(
        names_in(by_name),
        vec![
            ("default".to_owned(), "shared".to_owned()),
            ("other".to_owned(), "shared".to_owned())
        ]
    );
    let by_namespace = all
        .list(&ListParams::default().fields("metadata.namespace=other"))
        .await
        .unwrap();
    assert_eq!(
        names_in(by_namespace),
        vec![("other".to_owned(), "shared".to_owned())]
    );
    assert_eq!(
        server.requests().last().map(|r| r.path.as_str()),
        Some("/api/v1/configmaps"),
        "Api::all lists across namespaces"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watcher_sees_objects_added_modified_and_deleted_after_it_started() {
    let (server, api, _) = server_with_lease("before", "a").await;
    let mut events = spawn_watcher(api.clone(), watcher::Config::default());
    let initial = until_init_done(&mut events).await;
    assert_eq!(
        initial.len(),
        1,
        "the initial list holds the existing lease"
    );

    api.create(&PostParams::default(), &lease("watched", "a"))
        .await
        .unwrap();
    api.patch(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "holderIdentity": "b" } })),
    )
    .await
    .unwrap();
    api.delete("watched", &DeleteParams::default())
        .await
        .unwrap();

    match next_event(&mut events, "the added lease").await {
        watcher::Event::Apply(lease) => assert_eq!(holder(&lease), Some("a")),
        other => panic!("expected the added lease, got {other:?}"),
    }
    match next_event(&mut events, "the modified lease").await {
        watcher::Event::Apply(lease) => assert_eq!(holder(&lease), Some("b")),
        other => panic!("expected the modified lease, got {other:?}"),
    }
    match next_event(&mut events, "the deleted lease").await {
        watcher::Event::Delete(lease) => {
            assert_eq!(lease.metadata.name.as_deref(), Some("watched"))
        }
        other => panic!("expected the deleted lease, got {other:?}"),
    }

    let watch = server
        .requests()
        .into_iter()
        .find(|r| r.query_param("watch").is_some())
        .expect("the watcher sent a watch request");
    assert_eq!(
        watch.query_param("allowWatchBookmarks").as_deref(),
        Some("true")
    );
    assert!(
        watch.query_param("resourceVersion").is_some(),
        "it resumes from the list's version"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streaming_list_watcher_gets_current_objects_then_changes() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    server.insert(&config_map("existing", &[], &[]));
    let mut events = spawn_watcher(api.clone(), watcher::Config::default().streaming_lists());

    let initial = until_init_done(&mut events).await;
    let names: Vec<_> = initial
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["existing"]);
    server.insert(&config_map("later", &[], &[]));
    match next_event(&mut events, "the later config map").await {
        watcher::Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("later")),
        other => panic!("expected the later config map, got {other:?}"),
    }
    let first = server.requests().into_iter().next().unwrap();
    assert_eq!(
        first.query_param("sendInitialEvents").as_deref(),
        Some("true")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_with_bookmarks_gets_them_and_ends_at_its_timeout() {
    let (_server, api, created) = server_with_lease("marked", "a").await;
    let params = WatchParams::default().timeout(3);
    let version = created.metadata.resource_version.unwrap();

    let stream = api.watch(&params, &version).await.unwrap();
    let events: Vec<_> = tokio::time::timeout(WAIT, stream.try_collect::<Vec<_>>())
        .await
        .expect("the watch ends at its timeout")
        .unwrap();
    assert!(
        matches!(events.first(), Some(WatchEvent::Bookmark(b)) if b.metadata.resource_version == version),
        "a bookmark at the current version comes first: {events:?}"
    );
    assert!(
        events.len() >= 2,
        "bookmarks keep coming every second: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_from_a_forgotten_resource_version_gets_410_gone() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = server.insert(&config_map("churn", &[], &[("n", "0")]));
    // A watch from `first` needs the changes after it: the history forgets the first of them
    // once it holds HISTORY_LIMIT newer ones.
    for n in 1..=HISTORY_LIMIT + 1 {
        server.insert(&config_map("churn", &[], &[("n", &n.to_string())]));
    }

    let params = WatchParams::default().timeout(5);
    let version = first.metadata.resource_version.unwrap();
    let mut stream = api.watch(&params, &version).await.unwrap().boxed();
    match tokio::time::timeout(WAIT, stream.next()).await {
        Ok(Some(Ok(WatchEvent::Error(status)))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 Gone event, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_controller_reconciles_an_inserted_pod_and_again_after_a_patch() {
    let server = FakeApiServer::start().await;
    let api: Api<Pod> = Api::default_namespaced(server.client());
    let (reconciled, mut reconciles) = signal::channel(0usize);

    async fn reconcile(
        _pod: Arc<Pod>,
        count: Arc<signal::Sender<usize>>,
    ) -> Result<Action, Infallible> {
        count.send_modify(|n| *n += 1);
        Ok(Action::await_change())
    }
    fn error_policy(
        _pod: Arc<Pod>,
        _error: &Infallible,
        _count: Arc<signal::Sender<usize>>,
    ) -> Action {
        Action::await_change()
    }
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(reconciled))
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    server.insert(&pod("reconciled"));
    testbed::wait::until("the first reconcile", &mut reconciles, WAIT, |n| *n >= 1).await;
    api.patch(
        "reconciled",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "touched": "yes" } } })),
    )
    .await
    .unwrap();
    testbed::wait::until(
        "the reconcile after the patch",
        &mut reconciles,
        WAIT,
        |n| *n >= 2,
    )
    .await;
    controller.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn fail_next_writes_makes_one_write_conflict_then_lets_writes_through() {
    let server = FakeApiServer::start().await;
    let api: Api<Lease> = Api::default_namespaced(server.client());
    server.fail_next_writes("leases", 1);

    assert_eq!(
        api_code(
            api.create(&PostParams::default(), &lease("retried", "a"))
                .await
        ),
        409
    );
    assert!(
        server.get::<Lease>("default", "retried").is_none(),
        "the failed write stored nothing"
    );
    api.create(&PostParams::default(), &lease("retried", "a"))
        .await
        .unwrap();
    assert_eq!(
        server
            .get::<Lease>("default", "retried")
            .and_then(|l| holder(&l).map(str::to_owned))
            .as_deref(),
        Some("a")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_test_handle_inserts_gets_lists_and_removes_objects() {
    let server = FakeApiServer::start().await;
    let mut running = pod("direct");
    running.status = Some(PodStatus {
        phase: Some("Running".to_owned()),
        ..PodStatus::default()
    });

    let inserted = server.insert(&running);
    assert!(inserted.metadata.uid.is_some() && inserted.metadata.resource_version.is_some());
    assert_eq!(inserted.metadata.generation, Some(1));
    assert_eq!(
        server.get::<Pod>("default", "direct"),
        Some(inserted.clone())
    );
    let replaced = server.insert(&running);
    assert_eq!(
        replaced.metadata.uid, inserted.metadata.uid,
        "inserting again replaces in place"
    );
    assert_eq!(server.list::<Pod>("default").len(), 1);
    assert!(server.list::<Pod>("other").is_empty());

    server.remove::<Pod>("default", "direct");
    assert_eq!(server.get::<Pod>("default", "direct"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn finalizers_hold_a_delete_until_the_last_one_is_removed() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut held = config_map("held", &[], &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
    api.create(&PostParams::default(), &held).await.unwrap();

    api.delete("held", &DeleteParams::default()).await.unwrap();
    let terminating = api.get("held").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
    assert_eq!(
        api.get_opt("held").await.unwrap(),
        None,
        "removing the last finalizer deletes it"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_a_status_not_a_panic() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let request = |method: http::Method, path: &str, content_type: &str, body: &[u8]| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body.to_vec())
            .unwrap()
    };

    let bad_json = request(http::Method::POST, leases, "application/json", b"{not json");
    assert_eq!(raw_code(&client, bad_json).await, 400);
    let unknown_type = request(http::Method::POST, leases, "text/plain", b"hello");
    assert_eq!(raw_code(&client, unknown_type).await, 415);
    let unknown_patch = request(
        http::Method::PATCH,
        &format!("{leases}/x"),
        "application/xml",
        b"<x/>",
    );
    assert_eq!(raw_code(&client, unknown_patch).await, 415);
    let nowhere = request(http::Method::GET, "/nowhere", "application/json", b"");
    assert_eq!(raw_code(&client, nowhere).await, 404);
    let bad_version = request(
        http::Method::GET,
        &format!("{leases}?watch=true&resourceVersion=x"),
        "application/json",
        b"",
    );
    assert_eq!(raw_code(&client, bad_version).await, 400);

    let api: Api<Lease> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &lease("still-fine", "a"))
        .await
        .unwrap();
    assert_eq!(
        server.requests().len(),
        6,
        "every request is recorded, bad ones too"
    );
    assert_eq!(
        server.requests()[0].body,
        None,
        "an unreadable body is recorded as None"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_watch_sees_objects_enter_and_leave_its_selection() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let listed = api.list(&ListParams::default()).await.unwrap();
    let version = listed.metadata.resource_version.unwrap();
    let params = WatchParams::default().labels("app=web").timeout(5);
    let mut stream = api.watch(&params, &version).await.unwrap().boxed();

    let relabel = |app: &'static str| {
        let api = api.clone();
        async move {
            let patch = json!({ "metadata": { "labels": { "app": app } } });
            api.patch("moving", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    api.create(
        &PostParams::default(),
        &config_map("moving", &[("app", "db")], &[]),
    )
    .await
    .unwrap();
    relabel("web").await;
    relabel("db").await;

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the watch delivers the selection changes")
            .expect("the watch is still open")
            .unwrap();
        match event {
            WatchEvent::Added(c) => seen.push(("ADDED", c.metadata.name)),
            WatchEvent::Modified(c) => seen.push(("MODIFIED", c.metadata.name)),
            WatchEvent::Deleted(c) => seen.push(("DELETED", c.metadata.name)),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(status) => panic!("the watch failed: {status:?}"),
        }
    }
    let moving = Some("moving".to_owned());
    assert_eq!(seen, [("ADDED", moving.clone()), ("DELETED", moving)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_metadata_watcher_sees_partial_objects() {
    let server = FakeApiServer::start().await;
    // kube 5 asks for PartialObjectMetadata whenever the Api is over PartialObjectMeta.
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::default_namespaced(server.client());
    let mut events = spawn_watcher(api, watcher::Config::default());
    until_init_done(&mut events).await;

    server.insert(&config_map("slim", &[("app", "web")], &[("big", "data")]));
    match next_event(&mut events, "the inserted config map's metadata").await {
        watcher::Event::Apply(partial) => {
            assert_eq!(partial.metadata.name.as_deref(), Some("slim"));
            let kind = partial.types.map(|t| t.kind);
            assert_eq!(
                kind.as_deref(),
                Some("PartialObjectMetadata"),
                "the server sent metadata only"
            );
            assert_eq!(partial.metadata.labels.unwrap()["app"], "web");
        }
        other => panic!("expected the config map's metadata, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kubes_event_recorder_creates_then_patches_an_events_k8s_io_event() {
    let server = FakeApiServer::start().await;
    let recorder = Recorder::new(server.client(), "leasehold".into());
    let regarding = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: Some("worker".to_owned()),
        namespace: Some("default".to_owned()),
        ..ObjectReference::default()
    };
    let event = RecordedEvent {
        type_: EventType::Normal,
        reason: "Elected".to_owned(),
        note: Some("became the leader".to_owned()),
        action: "Lead".to_owned(),
        secondary: None,
    };

    recorder.publish(&event, &regarding).await.unwrap();
    recorder.publish(&event, &regarding).await.unwrap();

    let stored = server.list::<EventsEvent>("default");
    assert_eq!(
        stored.len(),
        1,
        "the repeat became a series on the same event"
    );
    assert_eq!(stored[0].series.as_ref().map(|s| s.count), Some(2));
    let writes: Vec<(String, String)> = server
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    let name = stored[0].metadata.name.clone().unwrap();
    assert_eq!(
        writes,
        [
            (
                "POST".to_owned(),
                "/apis/events.k8s.io/v1/namespaces/default/events".to_owned()
            ),
            (
                "PATCH".to_owned(),
                format!("/apis/events.k8s.io/v1/namespaces/default/events/{name}")
            ),
        ]
    );
    assert!(
        server.list::<CoreEvent>("default").is_empty(),
        "core/v1 events are a separate store"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn apps_resources_and_core_events_use_their_own_group_paths() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let deployment = Deployment {
        metadata: meta("web", &[("app", "web")]),
        spec: DeploymentSpec {
            replicas: Some(1),
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    };
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let scaled = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({ "spec": { "replicas": 3 } })),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.replicas, Some(3));
    assert_eq!(scaled.metadata.generation, Some(2));

    server.insert(&ReplicaSet {
        metadata: meta("web-1", &[("app", "web")]),
        ..ReplicaSet::default()
    });
    let replica_sets: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let listed = replica_sets
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);

    let core_events: Api<CoreEvent> = Api::default_namespaced(client);
    let core_event = CoreEvent {
        metadata: meta("worker.1", &[]),
        reason: Some("Elected".to_owned()),
        ..CoreEvent::default()
    };
    core_events
        .create(&PostParams::default(), &core_event)
        .await
        .unwrap();
    assert_eq!(server.list::<CoreEvent>("default").len(), 1);

    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/apis/apps/v1/namespaces/default/deployments",
            "/apis/apps/v1/namespaces/default/deployments/web",
            "/apis/apps/v1/namespaces/default/replicasets",
            "/api/v1/namespaces/default/events",
        ]
    );
}
