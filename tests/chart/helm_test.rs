//! The chart's `helm test` Pod: a test hook the Deployment does not adopt, pointed at the
//! replicas' headless Service, and its script (`scripts/check-one-leader.sh`) run against three
//! real replicas on three loopback addresses, with a stand-in `nslookup`.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};

use harness::helm::{self, labels, render};
use harness::leasehold_bin;
use harness::replica::FAST;
use testbed::Guarded;
use testbed::http::http_get;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

fn env_of(pod: &Pod, name: &str) -> String {
    pod.spec.clone().expect("spec").containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value)
        .unwrap_or_else(|| panic!("no env {name}"))
}

#[test]
fn the_helm_test_pod_is_a_test_hook_that_the_deployment_does_not_adopt() {
    let r = render("helmTest:\n  enabled: true\n");
    let pod: Pod = r.one();
    let annotations = pod.metadata.annotations.clone().expect("annotations");
    assert_eq!(annotations["helm.sh/hook"], "test");
    assert_eq!(
        annotations["helm.sh/hook-delete-policy"],
        "before-hook-creation,hook-succeeded"
    );
    let d: Deployment = r.one();
    let selector = d.spec.selector.match_labels.clone().expect("matchLabels");
    let pod_labels = labels(&pod.metadata.labels);
    assert!(
        selector.iter().any(|(k, v)| pod_labels.get(k) != Some(v)),
        "the Deployment's selector {selector:?} must not match the test Pod {pod_labels:?}"
    );
    let spec = pod.spec.clone().expect("spec");
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.automount_service_account_token, Some(false));
    let c = &spec.containers[0];
    let command = c.command.clone().expect("command");
    assert_eq!(command[..2], ["/bin/sh", "-c"]);
    let script = std::fs::read_to_string(helm::chart().join("scripts/check-one-leader.sh"))
        .expect("the script");
    assert_eq!(
        command[2].trim_end(),
        script.trim_end(),
        "the Pod runs the chart's script"
    );
    let sc = c.security_context.clone().expect("securityContext");
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));

    // The replicas' name is the headless Service of every replica, ready or not.
    assert_eq!(
        env_of(&pod, "LEASEHOLD_TEST_REPLICAS"),
        "lh-leasehold-metrics.shop.svc.cluster.local"
    );
    assert_eq!(
        env_of(&pod, "LEASEHOLD_TEST_SERVICE"),
        "lh-leasehold.shop.svc.cluster.local:8080"
    );
    assert_eq!(env_of(&pod, "LEASEHOLD_TEST_PORT"), "8080");
    let services: Vec<Service> = r.all();
    let headless = services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("lh-leasehold-metrics"))
        .expect("the headless Service")
        .spec
        .clone()
        .expect("spec");
    assert_eq!(headless.cluster_ip.as_deref(), Some("None"));
    assert_eq!(headless.publish_not_ready_addresses, Some(true));
    assert_eq!(headless.selector, d.spec.selector.match_labels);

    let pod: Pod = render(helm::HELM_TEST_IN_LEADER_MODE).one();
    assert_eq!(env_of(&pod, "LEASEHOLD_TEST_SERVICE"), "");
    assert_eq!(env_of(&pod, "LEASEHOLD_TEST_TIMEOUT"), "120");
    assert_eq!(
        env_of(&pod, "LEASEHOLD_TEST_REPLICAS"),
        "lh-leasehold-metrics.shop.svc.corp.internal"
    );
}

/// A `leasehold run` replica listening on `addr` (the replicas of a pod network share a port and
/// differ in address; loopback has 127.0.0.0/8).
struct PodReplica {
    name: String,
    addr: SocketAddr,
    /// The process; dropping it kills it and, when a test panics, prints its log.
    _child: Guarded,
}

impl PodReplica {
    fn spawn(redis_url: &str, name: &str, addr: SocketAddr) -> Self {
        let mut cmd = Command::new(leasehold_bin());
        cmd.args([
            "run",
            "--redis-url",
            redis_url,
            "--lease-name",
            "shop/helm-test",
        ])
        .args(["--identity", name, "--http-addr", &addr.to_string()])
        .args([
            "--kubernetes",
            "off",
            "--readiness",
            "member",
            "--log-format",
            "json",
        ])
        .args(FAST)
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE");
        let child = Guarded::spawn(cmd, &format!("leasehold {name}")).expect("spawn leasehold");
        Self {
            name: name.to_owned(),
            addr,
            _child: child,
        }
    }

    fn leads(&self) -> Option<bool> {
        let (_, body) = http_get(self.addr, "/leader")?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        json["is_leader"].as_bool()
    }
}

/// A port free on 127.0.0.1, 127.0.0.2 and 127.0.0.3.
fn port_free_on_three_addresses() -> u16 {
    for _ in 0..20 {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        if (2..=3).all(|n| TcpListener::bind(format!("127.0.0.{n}:{port}")).is_ok()) {
            return port;
        }
    }
    panic!("no port free on 127.0.0.1-3");
}

/// A stand-in for the cluster's DNS: an `nslookup` that answers `name` with `addresses`, in
/// busybox 1.36's format or in the older one.
fn standin_nslookup(dir: &Path, name: &str, addresses: &[SocketAddr], old_format: bool) {
    let mut answer = String::from("Server:\t\t10.96.0.10\nAddress:\t10.96.0.10:53\n\n");
    for (i, a) in addresses.iter().enumerate() {
        if old_format {
            if i == 0 {
                answer.push_str(&format!("Name:      {name}\n"));
            }
            answer.push_str(&format!("Address {}: {} {name}\n", i + 1, a.ip()));
        } else {
            answer.push_str(&format!("Name:\t{name}\nAddress: {}\n", a.ip()));
        }
    }
    let path = dir.join("nslookup");
    std::fs::write(
        &path,
        format!("#!/bin/sh\n[ \"$1\" = '{name}' ] || exit 1\ncat <<'EOF'\n{answer}EOF\n"),
    )
    .expect("write nslookup");
    let mut perms = std::fs::metadata(&path).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
}

/// Runs the chart's test script: exit code, stdout, stderr.
fn run_check(dns: &Path, port: u16, service: &str, timeout_s: u32) -> (i32, String, String) {
    let path = format!(
        "{}:{}",
        dns.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("/bin/sh")
        .arg(helm::chart().join("scripts/check-one-leader.sh"))
        .env("PATH", path)
        .env(
            "LEASEHOLD_TEST_REPLICAS",
            "lh-leasehold-metrics.shop.svc.cluster.local",
        )
        .env("LEASEHOLD_TEST_PORT", port.to_string())
        .env("LEASEHOLD_TEST_SERVICE", service)
        .env("LEASEHOLD_TEST_TIMEOUT", timeout_s.to_string())
        .output()
        .expect("run the test script");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_helm_test_passes_with_one_leader_and_says_what_is_wrong_otherwise() {
    let mut redis = RedisServer::start();
    let port = port_free_on_three_addresses();
    let addrs: Vec<SocketAddr> = (1..=3)
        .map(|n| format!("127.0.0.{n}:{port}").parse().expect("addr"))
        .collect();
    let mut replicas: Vec<PodReplica> = ["web-a", "web-b", "web-c"]
        .iter()
        .zip(&addrs)
        .map(|(name, addr)| PodReplica::spawn(&redis.url(), name, *addr))
        .collect();
    let leader = wait_for("a leader", Duration::from_secs(30), || {
        replicas.iter().position(|r| r.leads() == Some(true))
    });
    let (leader_name, leader_addr) = (replicas[leader].name.clone(), addrs[leader]);
    let follower = (leader + 1) % 3;
    let dns = tempfile::tempdir().expect("temp dir");

    for old_format in [false, true] {
        standin_nslookup(
            dns.path(),
            "lh-leasehold-metrics.shop.svc.cluster.local",
            &addrs,
            old_format,
        );
        let (code, out, err) = run_check(dns.path(), port, &leader_addr.to_string(), 30);
        assert_eq!(code, 0, "old nslookup format {old_format}: {out}{err}");
        assert_eq!(
            out.trim(),
            format!("one leader: {leader_name}; all 3 replicas name it")
        );
    }

    // The leader Service routes to a follower: the label is on the wrong pod.
    let (code, _, err) = run_check(dns.path(), port, &addrs[follower].to_string(), 1);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "FAILED: the leader Service {} routes to {}, not to the leader {leader_name}",
            addrs[follower], replicas[follower].name
        )),
        "{err}"
    );

    // A replica that does not answer.
    let gone = (leader + 2) % 3;
    drop(replicas.remove(gone));
    let (code, _, err) = run_check(dns.path(), port, "", 1);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "FAILED: the replica at {} does not answer /leader",
            addrs[gone].ip()
        )),
        "{err}"
    );

    // No leader: Redis is gone, and the leader stepped down.
    let live: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
    standin_nslookup(
        dns.path(),
        "lh-leasehold-metrics.shop.svc.cluster.local",
        &live,
        false,
    );
    redis.kill();
    wait_for("the leader to step down", Duration::from_secs(20), || {
        replicas
            .iter()
            .all(|r| r.leads() == Some(false))
            .then_some(())
    });
    let (code, _, err) = run_check(dns.path(), port, "", 1);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("FAILED: 0 of 2 replicas lead, want exactly one"),
        "{err}"
    );
}
