//! The chart's rendered container run as the real binary against a real redis-server: its
//! probes answer, it reads the password file, logs JSON without the password, exits 0 on SIGTERM
//! within the grace period; and in leader mode only the leader's pod is ready.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Container;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use harness::chart_settings::{resolve, shutdown_bound};
use harness::helm::{LEADER_MODE, args, deployment, pod_spec, render};
use harness::leasehold_bin;
use harness::startup::bound_http;
use testbed::http::http_get;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

// ---------------------------------------------------------------------------------------------
// The rendered container, run as the real binary

/// The leasehold process of one rendered pod: its arguments and environment as the chart renders
/// them, except what only a cluster provides: no API (`--kubernetes=off` and a lease name, since
/// the Deployment cannot be looked up), the Secret's file in a temporary directory, and the HTTP
/// port on loopback.
struct Pod {
    child: Child,
    http: std::net::SocketAddr,
    _dir: tempfile::TempDir,
    stderr_path: std::path::PathBuf,
}

impl Pod {
    fn start(container: &Container, name: &str, redis: &RedisServer, password: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut argv = Vec::new();
        for arg in args(container) {
            if let Some(path) = arg.strip_prefix("--redis-password-file=") {
                let local = dir.path().join("password");
                std::fs::write(&local, format!("{password}\n")).expect("password file");
                assert!(path.ends_with("/password"), "{path}");
                argv.push(format!("--redis-password-file={}", local.display()));
            } else if arg == "--kubernetes=on" {
                argv.push("--kubernetes=off".to_owned());
            } else if arg.starts_with("--http-addr=") {
                // The kernel picks the port; the start line names it.
                argv.push("--http-addr=127.0.0.1:0".to_owned());
            } else {
                argv.push(arg);
            }
        }
        argv.push("--lease-name=lh-leasehold".to_owned());
        let stderr_path = dir.path().join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let child = Command::new(leasehold_bin())
            .args(&argv)
            .env_clear()
            .env("POD_NAME", name)
            .env("POD_NAMESPACE", "shop")
            .env("LEASEHOLD_REDIS_URL", redis.url())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn leasehold");
        let mut pod = Self {
            child,
            http: (std::net::Ipv4Addr::LOCALHOST, 0).into(),
            _dir: dir,
            stderr_path,
        };
        pod.http = wait_for("the start line", Duration::from_secs(15), || {
            pod.log().lines().find_map(bound_http)
        });
        pod
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.http, path)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// SIGTERM, then the exit code and how long it took.
    fn terminate(&mut self, bound: Duration) -> (i32, Duration) {
        let start = Instant::now();
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return (status.code().unwrap_or(-1), start.elapsed());
            }
            assert!(
                start.elapsed() < bound,
                "leasehold did not exit within {bound:?} of SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- leasehold log ----\n{}", self.log());
        }
    }
}

#[test]
fn the_rendered_container_runs_the_real_binary_and_its_probes_answer() {
    let (d, c) = deployment(&render(""));
    let redis = RedisServer::builder()
        .args(["--requirepass", "s3cret"])
        .start();
    let mut pod = Pod::start(&c, "lh-leasehold-7d4f9c-x2x9q", &redis, "s3cret");
    for (what, probe) in [
        ("startup", &c.startup_probe),
        ("liveness", &c.liveness_probe),
        ("readiness", &c.readiness_probe),
    ] {
        let path = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|g| g.path.clone())
            .expect("path");
        wait_for(
            &format!("the {what} probe {path} to answer 200"),
            Duration::from_secs(15),
            || pod.get(&path).filter(|(code, _)| *code == 200),
        );
    }
    let (_, body) = pod.get("/leader").expect("/leader answers");
    let view: serde_json::Value = serde_json::from_str(&body).expect("/leader is JSON");
    assert_eq!(
        view["identity"], "lh-leasehold-7d4f9c-x2x9q",
        "identity is $POD_NAME"
    );
    assert_eq!(
        view["redis"]["reachable"], true,
        "the password file was read: {view}"
    );
    // Logs are JSON lines (not a terminal), and never show the password.
    let log = pod.log();
    assert!(
        log.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{log}"
    );
    assert!(!log.contains("s3cret"), "{log}");
    // SIGTERM from the kubelet: exit 0 well within terminationGracePeriodSeconds.
    let grace = pod_spec(&d)
        .termination_grace_period_seconds
        .expect("grace");
    let (code, took) = pod.terminate(Duration::from_secs(u64::try_from(grace).expect("positive")));
    assert_eq!(code, 0, "{}", pod.log());
    assert!(took < shutdown_bound(&resolve(&c)), "{took:?}");
}

#[test]
fn in_leader_mode_only_the_leaders_pod_is_ready() {
    // The chart's default timing, so that leadership stays put while the test looks; and no
    // cooldown on this brand-new Redis, so that someone leads at once.
    let (_, c) = deployment(&render(&format!(
        "{LEADER_MODE}timing:\n  dataLossCooldown: false\n"
    )));
    let redis = RedisServer::builder()
        .args(["--requirepass", "s3cret"])
        .start();
    let pods = [
        Pod::start(&c, "lh-leasehold-7d4f9c-aaaaa", &redis, "s3cret"),
        Pod::start(&c, "lh-leasehold-7d4f9c-bbbbb", &redis, "s3cret"),
    ];
    wait_for("both pods to answer", Duration::from_secs(15), || {
        pods.iter()
            .all(|p| p.get("/healthz").is_some())
            .then_some(())
    });
    let leader = wait_for("one pod to become ready", Duration::from_secs(15), || {
        pods.iter()
            .position(|p| p.get("/readyz").is_some_and(|(code, _)| code == 200))
    });
    let follower = &pods[1 - leader];
    let (code, body) = follower.get("/readyz").expect("/readyz answers");
    assert_eq!(
        code, 503,
        "the follower is not ready in leader mode: {body}"
    );
    assert!(body.starts_with("not the leader"), "{body}");
    let (code, body) = pods[leader].get("/readyz").expect("/readyz answers");
    assert_eq!(code, 200, "the leader stays ready: {body}");
    let (code, _) = follower.get("/healthz").expect("/healthz answers");
    assert_eq!(code, 200, "a follower is alive");
}
