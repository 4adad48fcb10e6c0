//! The binary end to end against the in-process fake API server, through a kubeconfig: it names
//! its lease after its Deployment, labels the leader and mirrors the lease, and the label moves
//! to the next leader.

use std::sync::Arc;
use std::time::Duration;

use crate::calls::assert_within_rbac;
use crate::fixtures::{NS, deployment_with_pods, label_of};
use k8s_openapi::api::coordination::v1::Lease;
use testbed::fake_api::FakeApiServer;
use testbed::redis_server::RedisServer;

#[test]
fn the_binary_names_its_lease_after_its_deployment_and_labels_the_leader() {
    use harness::replica::{FAST, Replica};
    use testbed::wait::wait_for;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let api = runtime.block_on(FakeApiServer::start());
    let api = Arc::new(api);
    deployment_with_pods(&api, &["web-7d4f-a", "web-7d4f-b"]);
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = api.write_kubeconfig(dir.path(), NS);
    let config = config.to_str().unwrap().to_owned();
    let mut args = FAST.to_vec();
    args.extend(["--no-data-loss-cooldown", "--kubernetes", "on"]);
    let spawn = |pod: &str| {
        Replica::spawn_with_env(
            &redis.url(),
            "",
            pod,
            &args,
            &[],
            &[
                ("KUBECONFIG", config.as_str()),
                ("POD_NAME", pod),
                ("POD_NAMESPACE", NS),
            ],
        )
    };
    let a = spawn("web-7d4f-a");
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    assert_eq!(
        a.leader()["lease"],
        "shop/web",
        "named after the Deployment"
    );
    assert_eq!(a.leader()["lease_key"], "leasehold:{shop/web}");
    let b = spawn("web-7d4f-b");
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
