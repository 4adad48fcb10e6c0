//! The image builds from what the Dockerfile copies: its build stage replayed outside a
//! container. The files its COPYs take (through .dockerignore) go into an empty directory and
//! its RUN steps run there, with `cargo build` standing in as `cargo metadata --locked
//! --offline`: the workspace, every member's manifest and targets, and the lock file must
//! resolve from those files alone, so a workspace member that the image leaves out fails here as
//! it would in `docker build --locked`. (A `cargo check` there would also catch a missing
//! source file, but it type-checks every dependency anew: many minutes on a loaded machine.)

use std::path::{Path, PathBuf};
use std::process::Command;

use testbed::dockerfile::{Ignore, Step, replay, stage_steps};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A `cargo` that runs `cargo build …` as `cargo metadata --locked --offline` for this
/// platform (the others' crates are not downloaded); any other subcommand is passed through.
fn cargo_stand_in(dir: &Path) -> PathBuf {
    let script = r#"#!/bin/sh
set -e
[ "$1" = build ] || exec "$REAL_CARGO" "$@"
shift
host=$(rustc -vV | sed -n 's/^host: //p')
"$REAL_CARGO" metadata --locked --offline --format-version 1 --filter-platform "$host" > /dev/null
"#;
    let path = dir.join("cargo");
    std::fs::write(&path, script).expect("write the cargo stand-in");
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .expect("chmod");
    assert!(status.success(), "chmod +x the cargo stand-in");
    path
}

fn replay_build_stage() -> Result<testbed::dockerfile::Replay, std::io::Error> {
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).expect("the Dockerfile");
    let ignore =
        Ignore::parse(&std::fs::read_to_string(repo().join(".dockerignore")).unwrap_or_default());
    let steps = stage_steps(&dockerfile, "build");
    assert!(
        steps.iter().any(|s| matches!(s, Step::Run(_))),
        "the Dockerfile has a build stage named `build` with RUN steps: {steps:?}"
    );
    let root = tempfile::tempdir().expect("temp dir");
    let bin = tempfile::tempdir().expect("temp dir");
    cargo_stand_in(bin.path());
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    replay(&steps, &repo(), &ignore, root.path(), |part| {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", part])
            .env("PATH", &path)
            .env("REAL_CARGO", env!("CARGO"))
            .env_remove("CARGO_MANIFEST_DIR");
        cmd
    })
}

#[test]
fn the_image_build_stage_resolves_its_workspace_from_what_the_dockerfile_copies() {
    let done = replay_build_stage().unwrap_or_else(|e| panic!("{e}"));
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
