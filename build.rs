//! Names the commit the binary is built from, for `leasehold --version` (`leasehold 0.2.0
//! (4ce6637)`), in the compile-time variable `LEASEHOLD_COMMIT`. In order:
//!
//! 1. `LEASEHOLD_BUILD_COMMIT` in the build's environment, when a build without the repository knows
//!    it (an image built from a context without `.git`: the Dockerfile's build argument);
//! 2. git, when this crate is the top of a git checkout (`git rev-parse --short=7 HEAD`); a crate
//!    unpacked inside some other repository is not, and does not take that repository's commit;
//! 3. `.cargo_vcs_info.json`, which `cargo package` writes into a crate with the commit it was
//!    packaged from (a build of the published crate);
//! 4. otherwise it says that the commit is unknown.
//!
//! It runs again only when the commit can have changed (HEAD, the branch it names, packed refs,
//! the variable), so that an edit elsewhere does not rebuild the crate.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=LEASEHOLD_BUILD_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = from_env()
        .or_else(|| from_git(&dir))
        .or_else(|| from_vcs_info(&dir))
        .unwrap_or_else(|| {
            "commit unknown: built without git or a packaged crate's record".to_owned()
        });
    println!("cargo::rustc-env=LEASEHOLD_COMMIT={commit}");
}

fn from_env() -> Option<String> {
    let commit = std::env::var("LEASEHOLD_BUILD_COMMIT").ok()?;
    let commit = commit.trim();
    (!commit.is_empty()).then(|| short(commit))
}

/// Seven hex digits, as `git log --oneline` shows a commit.
fn short(commit: &str) -> String {
    commit.chars().take(7).collect()
}

/// Has cargo run this script again when `path` changes; only for a path that exists (cargo runs
/// it every time for one that does not).
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo::rerun-if-changed={}", path.display());
    }
}

/// `git` run in `dir`: its trimmed output, or `None` when git is missing or refuses.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned())
}

fn from_git(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    let same = |a: &Path, b: &Path| a.canonicalize().ok() == b.canonicalize().ok();
    if !same(Path::new(&top), dir) {
        return None;
    }
    // What moves when a commit is made or checked out: HEAD, and the branch it names, a loose
    // ref file or a line of packed-refs (then the first commit writes a loose file: watch the
    // directory, which cargo scans, but only then, so that commits on other branches do not
    // rebuild this one). A linked worktree keeps HEAD in its own git directory and the branches
    // in the common one, which --git-path resolves.
    let path = |name: &str| git(dir, &["rev-parse", "--git-path", name]).map(|p| dir.join(p));
    let mut watched = vec![path("HEAD"), path("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]).and_then(|b| path(&b)) {
        let parent = branch.parent().map(Path::to_path_buf);
        watched.push(if branch.exists() {
            Some(branch)
        } else {
            parent
        });
    }
    for file in watched.into_iter().flatten() {
        watch(&file);
    }
    git(dir, &["rev-parse", "--short=7", "HEAD"])
}

fn from_vcs_info(dir: &Path) -> Option<String> {
    let path = dir.join(".cargo_vcs_info.json");
    watch(&path);
    let text = std::fs::read_to_string(path).ok()?;
    // {"git": {"sha1": "<40 hex digits>"}, "path_in_vcs": ""}: the one sha1 is all we need, and
    // a build script of its own dependencies would cost every build more than this search.
    let after = &text[text.find("\"sha1\"")? + "\"sha1\"".len()..];
    let start = after.find('"')? + 1;
    let sha = after[start..].split('"').next()?;
    (sha.len() >= 7 && sha.chars().all(|c| c.is_ascii_hexdigit())).then(|| short(sha))
}
