//! Requests the fake cannot serve (a body that is not JSON, an unknown content type, an unknown
//! path, a resourceVersion that is not a number): each gets a status, is recorded, and leaves
//! the server serving.

use axum::http;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use testbed::fake_api::FakeApiServer;

use crate::fixtures::{lease, raw_code};

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
