//! `examples/fenced_http.rs`, the fenced HTTP service, run as its own program, and the curl
//! recipe against it.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use testbed::Guarded;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::docs::{run_sh, snippet};

/// `examples/fenced_http.rs` as the program it is, on a loopback port the kernel picks, once it
/// listens. It serves for as long as the returned process lives.
fn serve() -> (Guarded, SocketAddr) {
    let mut cmd = Command::new(harness::example("fenced_http"));
    cmd.arg("127.0.0.1:0");
    let service = Guarded::spawn(cmd, "fenced_http").expect("start the example");
    let addr = service.stderr.wait_from(
        0,
        "fenced_http to listen",
        Duration::from_secs(10),
        |line| line.split_once("listening on ")?.1.trim().parse().ok(),
    );
    (service, addr)
}

/// One HTTP/1.1 request; status code and body.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let header = token
        .map(|t| format!("Leasehold-Fencing-Token: {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{header}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, body.to_owned())
}

#[tokio::test]
async fn the_http_service_refuses_a_stale_token_with_409_and_keeps_the_newer_write() {
    let (_service, addr) = serve();
    let put = |token, body| request(addr, "PUT", "/items/report", token, body);
    assert_eq!(put(Some("5"), "from 5").await.0, 204);
    assert_eq!(put(Some("7"), "from 7").await.0, 204);
    assert_eq!(put(Some("7"), "from 7 again").await.0, 204);
    let (code, body) = put(Some("6"), "from 6").await;
    assert_eq!(code, 409, "{body}");
    let refusal: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(refusal["seen"], 7);
    assert_eq!(refusal["offered"], 6);
    assert_eq!(
        request(addr, "GET", "/items/report", None, "").await,
        (200, "from 7 again".to_owned())
    );
}

#[tokio::test]
async fn the_http_service_wants_a_token_that_is_a_number() {
    let (_service, addr) = serve();
    let (missing, _) = request(addr, "PUT", "/items/a", None, "x").await;
    assert_eq!(missing, 428);
    let (malformed, _) = request(addr, "PUT", "/items/a", Some("seven"), "x").await;
    assert_eq!(malformed, 400);
    assert_eq!(request(addr, "GET", "/items/a", None, "").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_curl_recipe_writes_with_a_newer_token_and_fails_with_a_stale_one() {
    let (_service, addr) = serve();
    let url = format!("http://{addr}");
    let curl = |leader: &'static str, token: u64| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let dir = tempfile::tempdir().expect("temp dir");
            let token = token.to_string();
            run_sh(
                &snippet("curl-write"),
                dir.path(),
                &[
                    ("SERVICE_URL", &url),
                    ("LEASEHOLD_FENCING_TOKEN", &token),
                    ("LEASEHOLD_IDENTITY", leader),
                ],
            )
        })
    };
    let out = curl("a", 5).await.expect("curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = curl("b", 7).await.expect("curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stale = curl("a", 6).await.expect("curl");
    let stdout = String::from_utf8_lossy(&stale.stdout);
    assert_eq!(
        stale.status.code(),
        Some(22),
        "curl --fail-with-body exits 22 on 409: {stdout}"
    );
    assert!(stdout.contains("stale fencing token"), "{stdout}");
    assert_eq!(
        request(addr, "GET", "/items/report", None, "").await,
        (200, "written by b".to_owned())
    );
}
