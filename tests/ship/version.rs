//! `leasehold --version` names the commit the binary was built from (build.rs): the binary of
//! this checkout says git's commit, and the build script itself, compiled alone with rustc and
//! run as cargo would run it, says the commit it is given, the one a packaged crate records, or
//! that it is unknown.

use std::path::Path;
use std::process::Command;

/// git's short commit of the repository, as `git log --oneline` shows it.
fn head() -> String {
    let out = Command::new("git")
        .args(["rev-parse", "--short=7", "HEAD"])
        .current_dir(harness::repo())
        .output()
        .expect("run git");
    assert!(out.status.success(), "git rev-parse: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

#[test]
fn the_binary_names_its_version_and_commit() {
    let out = Command::new(harness::leasehold_bin())
        .arg("--version")
        .output()
        .expect("run leasehold --version");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("leasehold {} ({})", env!("CARGO_PKG_VERSION"), head())
    );
}

/// build.rs compiled by rustc alone (it needs nothing but std), into `dir`.
fn build_script(dir: &Path) -> std::path::PathBuf {
    let exe = dir.join("build-script");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args(["--edition", "2024", "-o"])
        .arg(&exe)
        .arg(harness::repo().join("build.rs"))
        .output()
        .expect("run rustc");
    assert!(
        out.status.success(),
        "rustc build.rs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What the script tells cargo for a crate in `manifest_dir`, with `commit` as
/// LEASEHOLD_BUILD_COMMIT: the value of LEASEHOLD_COMMIT and every line it printed.
fn run(script: &Path, manifest_dir: &Path, commit: Option<&str>) -> (String, String) {
    let mut cmd = Command::new(script);
    cmd.env("CARGO_MANIFEST_DIR", manifest_dir)
        .env_remove("LEASEHOLD_BUILD_COMMIT");
    if let Some(c) = commit {
        cmd.env("LEASEHOLD_BUILD_COMMIT", c);
    }
    let out = cmd.output().expect("run the build script");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix("cargo::rustc-env=LEASEHOLD_COMMIT="))
        .unwrap_or_else(|| panic!("no LEASEHOLD_COMMIT in:\n{text}"))
        .to_owned();
    (value, text)
}

#[test]
fn the_build_script_takes_the_commit_from_git_the_environment_or_the_packaged_crate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = build_script(dir.path());

    // The checkout: git's commit, and it runs again when HEAD moves, not on every edit.
    let (value, said) = run(&script, &harness::repo(), None);
    assert_eq!(value, head());
    assert!(
        said.lines()
            .any(|l| l.starts_with("cargo::rerun-if-changed=") && l.ends_with("HEAD")),
        "{said}"
    );

    // A crate unpacked without git of its own (here inside another repository, whose commit is
    // not its): the commit `cargo package` recorded, else unknown, said so.
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .output()
        .expect("git init");
    assert!(init.status.success(), "{init:?}");
    let unpacked = dir.path().join("leasehold-0.2.0");
    std::fs::create_dir(&unpacked).expect("mkdir");
    let (value, _) = run(&script, &unpacked, None);
    assert_eq!(
        value,
        "commit unknown: built without git or a packaged crate's record"
    );
    std::fs::write(
        unpacked.join(".cargo_vcs_info.json"),
        "{\n  \"git\": {\n    \"sha1\": \"4ce66371b2a4cd4e2f2c0f36b1d7c8e9a0b1c2d3\"\n  },\n  \"path_in_vcs\": \"\"\n}",
    )
    .expect("write .cargo_vcs_info.json");
    let (value, _) = run(&script, &unpacked, None);
    assert_eq!(value, "4ce6637");

    // The Dockerfile's build argument wins over both.
    let (value, _) = run(&script, &unpacked, Some("abcdef0123"));
    assert_eq!(value, "abcdef0");
}

#[test]
fn the_changelog_has_the_current_release_and_an_upgrade_note_for_each() {
    let text = std::fs::read_to_string(harness::repo().join("CHANGELOG.md")).expect("CHANGELOG.md");
    let releases: Vec<&str> = text.split("\n## ").skip(1).collect();
    let titles: Vec<&str> = releases
        .iter()
        .map(|r| r.lines().next().unwrap_or_default())
        .collect();
    assert_eq!(titles.first(), Some(&"Unreleased"), "{titles:?}");
    assert!(
        titles
            .iter()
            .any(|t| t.starts_with(&format!("{} - ", env!("CARGO_PKG_VERSION")))),
        "Cargo.toml's version has its section (`## X.Y.Z - date`): {titles:?}"
    );
    assert!(
        titles.last().is_some_and(|t| t.starts_with("0.1.0 - ")),
        "from 0.1.0 on: {titles:?}"
    );
    for release in &releases {
        assert!(
            release.contains("\n### Upgrading\n"),
            "no Upgrading note in `## {}`",
            release.lines().next().unwrap_or_default()
        );
    }
}
