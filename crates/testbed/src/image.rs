//! The repository's Dockerfile built into a real image on this machine, which can pull no base
//! image: its build stage replayed ([`replay_build_stage`]), its static binary built by the
//! stage's own `cargo build` with the stage's `ENV` ([`static_binary`]), and its final stage
//! (`FROM scratch`) assembled by buildah from those files ([`build`]); podman runs it from the
//! same storage, which is the caller's own (a temporary directory), so that nothing is shared
//! with other images on the machine.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::dockerfile::{
    Ignore, Replay, Step, final_stage, replay, stage_env, stage_steps, stages,
};

/// The Dockerfile's build stage, which every other step reads from.
pub const BUILD_STAGE: &str = "build";

fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path).map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

/// A `cargo` that runs `cargo build …` as `cargo metadata --locked --offline` for this
/// platform (the others' crates are not downloaded); any other subcommand goes to `$REAL_CARGO`.
fn cargo_stand_in(dir: &Path) -> io::Result<()> {
    let script = r#"#!/bin/sh
set -e
[ "$1" = build ] || exec "$REAL_CARGO" "$@"
shift
host=$(rustc -vV | sed -n 's/^host: //p')
"$REAL_CARGO" metadata --locked --offline --format-version 1 --filter-platform "$host" > /dev/null
"#;
    let path = dir.join("cargo");
    std::fs::write(&path, script)?;
    let status = Command::new("chmod").arg("+x").arg(&path).status()?;
    if !status.success() {
        return Err(io::Error::other("chmod +x the cargo stand-in"));
    }
    Ok(())
}

/// The build stage of `repo`'s Dockerfile replayed into a new directory (the stage's root), with
/// `cargo build` standing in as `cargo metadata --locked --offline` (`cargo` is the real one):
/// the files its `COPY`s take and its `RUN`s make, and what the replay did.
pub fn replay_build_stage(repo: &Path, cargo: &Path) -> io::Result<(tempfile::TempDir, Replay)> {
    let dockerfile = read(&repo.join("Dockerfile"))?;
    let ignore = Ignore::parse(&read(&repo.join(".dockerignore")).unwrap_or_default());
    let steps = stage_steps(&dockerfile, BUILD_STAGE);
    if !steps.iter().any(|s| matches!(s, Step::Run(_))) {
        return Err(io::Error::other(format!(
            "the Dockerfile has no stage `{BUILD_STAGE}` with RUN steps: {steps:?}"
        )));
    }
    let root = tempfile::tempdir()?;
    let bin = tempfile::tempdir()?;
    cargo_stand_in(bin.path())?;
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let done = replay(&steps, repo, &ignore, root.path(), |part| {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", part])
            .env("PATH", &path)
            .env("REAL_CARGO", cargo);
        crate::cargo::without_package_variables(&mut cmd);
        cmd
    })?;
    Ok((root, done))
}

/// Words as `sh` expands them (`$(uname -m)`, quotes).
fn expanded(words: &str) -> io::Result<Vec<String>> {
    let out = Command::new("sh")
        .args([
            "-c",
            &format!("for w in {words}; do printf '%s\\n' \"$w\"; done"),
        ])
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("sh could not expand {words}")));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// The target directory of the builds in `repo`: `CARGO_TARGET_DIR` (relative to `repo`) or
/// `repo/target`, as cargo itself chooses it.
pub fn target_dir(repo: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => repo.join(dir),
        None => repo.join("target"),
    }
}

/// The static binary, built here as the build stage builds it.
#[derive(Debug, Clone)]
pub struct StaticBinary {
    /// Where the stage's `cp` puts it (`/leasehold`), which the final stage copies from.
    pub in_stage: String,
    /// The binary built here.
    pub path: PathBuf,
    /// How long the build took (a no-op when it was built before).
    pub took: Duration,
}

/// Runs the build stage's last `cargo build` in `repo` with the stage's `ENV` (static glibc,
/// stripped symbols), with the build in `target_dir`. The `cargo` is the one on `PATH`, as in
/// a shell, so that a build made there beforehand is found up to date.
pub fn static_binary(repo: &Path, target_dir: &Path) -> io::Result<StaticBinary> {
    let dockerfile = read(&repo.join("Dockerfile"))?;
    let parts: Vec<String> = stage_steps(&dockerfile, BUILD_STAGE)
        .into_iter()
        .filter_map(|s| match s {
            Step::Run(parts) => Some(parts),
            _ => None,
        })
        .flatten()
        .collect();
    let build = parts
        .iter()
        .rev()
        .find(|p| p.starts_with("cargo build"))
        .ok_or_else(|| io::Error::other("the build stage runs no cargo build"))?;
    let copy = parts
        .iter()
        .find_map(|p| p.strip_prefix("cp "))
        .ok_or_else(|| io::Error::other("the build stage copies no product out with cp"))?;
    let started = Instant::now();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", build])
        .current_dir(repo)
        .env("CARGO_TARGET_DIR", target_dir)
        .envs(stage_env(&dockerfile, BUILD_STAGE))
        // The stage's build is rustc's alone: not the linting one scripts/test.sh sets up.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS");
    crate::cargo::without_package_variables(&mut cmd);
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{build}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let took = started.elapsed();
    let words = expanded(copy)?;
    let [from, to] = words.as_slice() else {
        return Err(io::Error::other(format!("cp SRC DEST, not {copy}")));
    };
    let from = from
        .strip_prefix("target/")
        .ok_or_else(|| io::Error::other(format!("cp from target/, not {from}")))?;
    let path = target_dir.join(from);
    if !path.is_file() {
        return Err(io::Error::other(format!(
            "{build} built no {}",
            path.display()
        )));
    }
    Ok(StaticBinary {
        in_stage: to.clone(),
        path,
        took,
    })
}

/// Storage of the caller's own for buildah and podman, and the image built on it. Dropping it
/// removes its containers and the storage.
pub struct Engine {
    dir: tempfile::TempDir,
    /// The image's name.
    pub image: String,
}

impl Engine {
    fn global(&self) -> Vec<String> {
        let dir = self.dir.path();
        vec![
            "--root".into(),
            dir.join("storage").display().to_string(),
            "--runroot".into(),
            dir.join("run").display().to_string(),
            "--storage-driver".into(),
            "vfs".into(),
        ]
    }

    /// buildah on this storage.
    pub fn buildah(&self) -> Command {
        let mut cmd = Command::new("buildah");
        cmd.args(self.global());
        cmd
    }

    /// podman on this storage, on runc (crun fails on hybrid cgroups), without systemd.
    pub fn podman(&self) -> Command {
        let mut cmd = Command::new("podman");
        cmd.args(self.global()).args([
            "--runtime",
            "runc",
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "file",
        ]);
        cmd
    }

    /// `podman ARGS`' stdout, trimmed; its stderr in the error when it fails.
    pub fn podman_out(&self, args: &[&str]) -> io::Result<String> {
        let out = self.podman().args(args).output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "podman {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// `podman run --rm` of the image as container `name`: read-only root, the image's user,
    /// the host's network (loopback included), the rlimits set (runc fails to set the default
    /// ones here), and `options` of the caller's; the arguments of the image's entrypoint
    /// follow.
    pub fn run(&self, name: &str, options: &[&str]) -> Command {
        let mut cmd = self.podman();
        cmd.args([
            "run",
            "--rm",
            "--name",
            name,
            "--read-only",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "--network",
            "host",
        ]);
        cmd.args(options).arg(&self.image);
        cmd
    }

    /// The image's size in bytes, as podman counts it.
    pub fn image_size(&self) -> io::Result<u64> {
        self.podman_out(&["image", "inspect", "--format", "{{.Size}}", &self.image])?
            .parse()
            .map_err(io::Error::other)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Only this storage's containers: the caller's own.
        let _ = self.podman().args(["rm", "--force", "--all"]).output();
    }
}

/// The image built, and the binary in it.
pub struct Built {
    pub engine: Engine,
    pub binary: StaticBinary,
    /// How long buildah took.
    pub assembled_in: Duration,
}

/// Builds `repo`'s Dockerfile as image `image`: the static binary ([`static_binary`] in
/// `target_dir`), the build stage replayed (`cargo` standing behind its stand-in) for the files
/// its `RUN`s make, and the
/// base image's own files (its CA certificates) from this machine, which must run the same
/// Debian release as the build stage's base; then the final stage by buildah.
pub fn build(repo: &Path, cargo: &Path, target_dir: &Path, image: &str) -> io::Result<Built> {
    let dockerfile = read(&repo.join("Dockerfile"))?;
    let binary = static_binary(repo, target_dir)?;
    let (stage_root, _) = replay_build_stage(repo, cargo)?;
    let all = stages(&dockerfile);
    let base = all
        .iter()
        .find(|s| s.name.as_deref() == Some(BUILD_STAGE))
        .map(|s| s.image.clone())
        .unwrap_or_default();
    let os = read(Path::new("/etc/os-release"))?;
    let codename = os
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .unwrap_or_default();
    if codename.is_empty() || !base.ends_with(&format!("-{codename}")) {
        return Err(io::Error::other(format!(
            "the build stage's base ({base}) is not this machine's Debian release ({codename}), \
             whose files would stand in for its own"
        )));
    }
    let engine = Engine {
        dir: tempfile::tempdir()?,
        image: image.to_owned(),
    };
    let context = engine.dir.path().join("context");
    let containerfile = final_stage(&dockerfile, &context, |stage, src| {
        if stage != BUILD_STAGE {
            return Err(io::Error::other(format!(
                "COPY --from={stage}: no such stage here"
            )));
        }
        if src == binary.in_stage {
            return Ok(binary.path.clone());
        }
        let made = stage_root.path().join(src.trim_start_matches('/'));
        Ok(if made.exists() {
            made
        } else {
            PathBuf::from(src)
        })
    })?;
    std::fs::write(context.join("Containerfile"), &containerfile)?;
    let started = Instant::now();
    let out = engine
        .buildah()
        .args(["bud", "--quiet", "--layers=false", "-f"])
        .arg(context.join("Containerfile"))
        .args(["-t", image])
        .arg(&context)
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "buildah bud:\n{containerfile}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(Built {
        engine,
        binary,
        assembled_in: started.elapsed(),
    })
}
