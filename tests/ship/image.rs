//! The image, built and run for real. First, it builds from what the Dockerfile copies: its
//! build stage replayed outside a container. The files its COPYs take (through .dockerignore) go into an empty directory and
//! its RUN steps run there, with `cargo build` standing in as `cargo metadata --locked
//! --offline`: the workspace, every member's manifest and targets, and the lock file must
//! resolve from those files alone, so a workspace member that the image leaves out fails here as
//! it would in `docker build --locked`. (A `cargo check` there would also catch a missing
//! source file, but it type-checks every dependency anew: many minutes on a loaded machine.)
//!
//! Then the final stage, as the Dockerfile writes it, assembled by buildah: a static binary
//! built here by the build stage's own `cargo build` with the stage's `ENV`, the files the
//! replay made (the passwd and group entries), and the base image's CA certificates (this
//! machine's: the same Debian release as the build stage's base). Three containers from that
//! image, read-only, as the image's user, on the host's loopback, elect one leader against a
//! real redis-server, hand over on `podman stop`, fail over after the TTL on `podman kill`, and
//! run the leader's command inside the container.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use harness::RunCommand;
use harness::contenders::unique_lease;
use harness::replica::{RELEASE_ONLY, Replica};
use testbed::image::{Built, Engine, build, replay_build_stage, target_dir};
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

fn cargo() -> PathBuf {
    PathBuf::from(env!("CARGO"))
}

#[test]
fn the_image_build_stage_resolves_its_workspace_from_what_the_dockerfile_copies() {
    let (_root, done) =
        replay_build_stage(&harness::repo(), &cargo()).unwrap_or_else(|e| panic!("{e}"));
    let cargo_runs = done.ran.iter().filter(|r| r.starts_with("cargo ")).count();
    assert!(
        cargo_runs >= 2,
        "both the dependency layer and the final build ran cargo: {done:?}"
    );
    assert!(
        done.copied.iter().any(|p| p.ends_with("src/main.rs")),
        "the sources were copied: {done:?}"
    );
    // Only copying the product out of the stage is not replayed.
    assert!(
        done.skipped.iter().all(|s| s.starts_with("cp ")),
        "{:?}",
        done.skipped
    );
}

// ---------------------------------------------------------------------------------------------
// The final stage, built and run

/// The image, built on storage of the test's own; the size and the times on stderr.
fn build_image() -> Built {
    let image = format!("localhost/leasehold-test:{}", env!("CARGO_PKG_VERSION"));
    let built = build(
        &harness::repo(),
        &cargo(),
        &target_dir(&harness::repo()),
        &image,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let size = built.engine.image_size().unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "static build {:?}, buildah {:?}; image {image}: {size} bytes ({:.1} MiB), binary {} bytes",
        built.binary.took,
        built.assembled_in,
        size as f64 / 1048576.0,
        std::fs::metadata(&built.binary.path)
            .map(|m| m.len())
            .unwrap_or(0)
    );
    built
}

/// The stdout of `podman ARGS`; panics with its stderr when it fails.
fn podman_out(engine: &Engine, args: &[&str]) -> String {
    engine.podman_out(args).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_final_stage_is_a_scratch_image_of_the_static_binary_its_certificates_and_its_user() {
    let built = build_image();
    let engine = &built.engine;
    let size = engine.image_size().expect("the size");
    let image = engine.image.clone();
    let inspect =
        |format: &str| podman_out(engine, &["image", "inspect", "--format", format, &image]);
    assert_eq!(inspect("{{.Config.User}}"), "65532:65532");
    assert_eq!(
        inspect("{{json .Config.Entrypoint}}"),
        r#"["/usr/local/bin/leasehold"]"#
    );
    assert_eq!(inspect("{{json .Config.Cmd}}"), r#"["run"]"#);
    assert_eq!(
        inspect(r#"{{index .Config.Labels "org.opencontainers.image.version"}}"#),
        env!("CARGO_PKG_VERSION")
    );
    // Nothing but the binary, its certificates and the user: the binary and less than 1 MiB.
    let binary = std::fs::metadata(&built.binary.path)
        .expect("the binary")
        .len();
    assert!(
        size >= binary && size < binary + (1 << 20),
        "image {size} bytes, binary {binary}"
    );
    // The binary runs in it, read-only, as the image's user.
    let out = engine
        .run(&format!("lh-version-{}", std::process::id()), &[])
        .arg("--version")
        .output()
        .expect("podman run");
    assert!(
        out.status.success(),
        "podman run --version: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The static binary is built in the checkout here, so it names git's commit; a `docker
    // build` has no .git and names the build argument's, or says it is unknown. Either way
    // `leasehold 0.2.0 (…)`; tests/ship/version.rs checks each source of the commit.
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version
            .trim()
            .starts_with(&format!("leasehold {} (", env!("CARGO_PKG_VERSION")))
            && version.trim().ends_with(')'),
        "{version}"
    );
}

const TTL: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);

/// `podman run` of the image as `name`, with the debug logs the replica tests read.
fn run(engine: &Engine, name: &str) -> std::process::Command {
    engine.run(name, &["--env", "RUST_LOG=leasehold=debug"])
}

fn ready(replicas: &[Replica], among: &[usize]) -> Option<usize> {
    among.iter().copied().find(|&i| replicas[i].is_ready())
}

#[test]
fn three_containers_elect_hand_over_on_stop_fail_over_after_the_ttl_on_kill_and_exec_inside() {
    let built = build_image();
    let engine = &built.engine;
    let redis = RedisServer::start();
    let lease = unique_lease("image");
    let id = std::process::id();
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("lh-{id}-{n}"))
        .collect();
    let mut replicas: Vec<Replica> = names
        .iter()
        .map(|n| {
            let replica = RunCommand::wrapping(run(engine, n))
                .redis_url(&redis.url())
                .lease(&lease)
                .args(RELEASE_ONLY);
            Replica::start(replica, n, &[]).healthy()
        })
        .collect();

    // One leader, seen from outside the containers on /readyz and /leader.
    let first = wait_for("a leader", Duration::from_secs(15), || {
        ready(&replicas, &[0, 1, 2])
    });
    for (i, r) in replicas.iter().enumerate() {
        wait_for(
            "every replica to name the leader",
            Duration::from_secs(5),
            || (r.leader()["leader"] == names[first].as_str()).then_some(()),
        );
        if i != first {
            assert!(!r.is_ready(), "{} is no leader", names[i]);
        }
    }
    // Read-only, as the image's user (uid 65532, named in the image's passwd).
    let name = &names[first];
    assert_eq!(
        podman_out(
            engine,
            &[
                "inspect",
                "--format",
                "{{.HostConfig.ReadonlyRootfs}}",
                name
            ]
        ),
        "true"
    );
    let top = podman_out(engine, &["top", name, "user", "huser"]);
    assert!(
        top.lines()
            .skip(1)
            .all(|l| l.split_whitespace().collect::<Vec<_>>() == ["nonroot", "65532"]),
        "{top}"
    );

    // podman stop: SIGTERM, the leader steps down and releases, exits 0; a follower leads at
    // once rather than after the TTL.
    let stopped = Instant::now();
    podman_out(engine, &["stop", "--time", "10", name]);
    assert_eq!(
        replicas[first].wait_exit(Duration::from_secs(10)),
        0,
        "{}",
        replicas[first].log_text()
    );
    let rest: Vec<usize> = (0..3).filter(|&i| i != first).collect();
    let second = wait_for("a follower to lead", Duration::from_secs(3), || {
        ready(&replicas, &rest)
    });
    let handover = stopped.elapsed();
    let steps = replicas[first].events("stepped down");
    assert_eq!(steps.len(), 1, "{}", replicas[first].log_text());
    assert_eq!(steps[0]["reason"], "shutdown");
    assert_eq!(replicas[first].events("released the lease").len(), 1);

    // podman kill: SIGKILL, nothing released; the last one leads once the TTL has run out.
    podman_out(engine, &["kill", &names[second]]);
    let killed = Instant::now();
    let third = rest.into_iter().find(|&i| i != second).expect("a third");
    wait_for("the last one to lead", TTL + Duration::from_secs(5), || {
        replicas[third].is_ready().then_some(())
    });
    let failover = killed.elapsed();
    assert_ne!(replicas[second].wait_exit(Duration::from_secs(10)), 0);
    // The lease was last renewed at most a retry period before the kill.
    assert!(
        failover >= TTL - RETRY - Duration::from_millis(500),
        "took over before the TTL ran out: {failover:?}"
    );
    eprintln!(
        "podman stop → follower ready: {handover:?}; podman kill → ready: {failover:?} (TTL {TTL:?})"
    );
    podman_out(engine, &["stop", "--time", "10", &names[third]]);
    assert_eq!(replicas[third].wait_exit(Duration::from_secs(10)), 0);

    // Exec mode: the leader's command runs inside the container. The image holds one program,
    // leasehold, whose `guard` is what a command asks before it acts: it reads the guard file and
    // the variables leasehold gives its command. leasehold then exits with the command's code.
    let exec = |n: &str, command: &[&str]| {
        let name = format!("lh-{id}-{n}");
        let replica = RunCommand::wrapping(run(engine, &name))
            .redis_url(&redis.url())
            .lease(&lease)
            .args(RELEASE_ONLY)
            .command(command);
        let mut r = Replica::start(replica, n, &[]);
        let code = r.wait_exit(Duration::from_secs(20));
        (code, r.log_text())
    };
    let (code, log) = exec("d", &["/usr/local/bin/leasehold", "guard", "--verbose"]);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("valid: token") && log.contains(&format!("of lease {lease}")),
        "{log}"
    );
    let (code, log) = exec(
        "e",
        &[
            "/usr/local/bin/leasehold",
            "guard",
            "--verbose",
            "--lease",
            "test/another",
        ],
    );
    assert_eq!(
        code, 1,
        "the command's refusal is the container's exit code: {log}"
    );
    assert!(log.contains("not valid"), "{log}");
}
