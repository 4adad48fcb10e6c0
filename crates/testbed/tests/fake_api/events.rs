//! Events as kube's Recorder writes them: an events.k8s.io Event created, then patched into a
//! series on a repeat, in a store apart from core/v1 Events.

use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event as EventsEvent;
use kube::runtime::events::{Event as RecordedEvent, EventType, Recorder};
use testbed::fake_api::FakeApiServer;

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
