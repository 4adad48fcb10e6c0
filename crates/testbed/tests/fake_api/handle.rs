//! The test handle: what a test does to the store directly (insert, get, list and remove), and
//! the conflicts it injects into the next writes.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, PostParams};
use testbed::fake_api::FakeApiServer;

use crate::fixtures::{api_code, holder, lease, pod};

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
