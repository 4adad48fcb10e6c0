//! The peers' libraries, installed by the harness into a scratch folder at pinned versions
//! (every package, dependencies included, for Python; the two direct packages for Node), and
//! reinstalled only when the pins change.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// PyPI packages, each at its exact version, installed without dependency resolution.
pub const PYTHON: [(&str, &str); 5] = [
    ("redis", "8.1.0"),
    ("python-redis-lock", "4.0.1"),
    ("pottery", "3.0.1"),
    ("mmh3", "5.3.1"),
    ("typing_extensions", "4.16.0"),
];

/// npm packages: node-redlock 5 (still a beta on npm) and the client it drives.
pub const NODE: [(&str, &str); 2] = [("redlock", "5.0.0-beta.2"), ("ioredis", "5.9.3")];

/// Where the libraries are, and the interpreters' versions.
#[derive(Debug, Clone)]
pub struct Installed {
    /// `PYTHONPATH` of the Python drivers.
    pub python_path: PathBuf,
    /// `NODE_PATH` of the Node driver.
    pub node_path: PathBuf,
    pub python: String,
    pub node: String,
}

fn pins() -> String {
    let py: Vec<String> = PYTHON.iter().map(|(n, v)| format!("{n}=={v}")).collect();
    let js: Vec<String> = NODE.iter().map(|(n, v)| format!("{n}@{v}")).collect();
    format!("{}\n{}\n", py.join(" "), js.join(" "))
}

/// Runs `cmd`; its error output when it fails.
fn run(mut cmd: Command, what: &str) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("run {what} (is it installed?)"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last: Vec<&str> = err.lines().rev().take(3).collect();
        bail!("{what} failed: {}", last.join(" / "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Installs the pinned packages under `dir` (unless the same pins are there already).
pub fn install(dir: &Path) -> Result<Installed> {
    let python_path = dir.join("python");
    let node_prefix = dir.join("node");
    let stamp = dir.join("pins.txt");
    let want = pins();
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let mut pip = Command::new("python3");
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--timeout",
            "10",
            "--retries",
            "1",
            "--target",
        ])
        .arg(&python_path)
        .args(PYTHON.iter().map(|(n, v)| format!("{n}=={v}")));
        run(pip, "pip install")?;
        let mut npm = Command::new("npm");
        npm.args([
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--silent",
        ])
        .args([
            "--fetch-retries",
            "1",
            "--fetch-timeout",
            "10000",
            "--prefix",
        ])
        .arg(&node_prefix)
        .args(NODE.iter().map(|(n, v)| format!("{n}@{v}")));
        run(npm, "npm install")?;
        std::fs::write(&stamp, want).context("write the pins' stamp")?;
    }
    let mut python = Command::new("python3");
    python.arg("--version");
    let mut node = Command::new("node");
    node.arg("--version");
    Ok(Installed {
        python_path,
        node_path: node_prefix.join("node_modules"),
        python: run(python, "python3 --version")?,
        node: format!("Node {}", run(node, "node --version")?),
    })
}
