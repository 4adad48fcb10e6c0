//! The crate as a crate user gets it, read through cargo itself: `rust-version` covers every
//! dependency's, the library without default features builds and leaves out the binary's
//! dependencies (kube, axum, clap and the rest), and the published package holds the license,
//! the readme and the sources, not the test kit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `cargo ARGS` in the repository; panics with its output when it fails.
fn cargo(args: &[&str]) -> String {
    let out = testbed::cargo::command(Path::new(env!("CARGO")))
        .args(args)
        .current_dir(harness::repo())
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {}: {}\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn host() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc names its host")
        .to_owned()
}

/// `cargo metadata` for this platform, with `features` (`--all-features` and the like).
fn metadata(features: &[&str]) -> Value {
    let host = host();
    let mut args = vec![
        "metadata",
        "--locked",
        "--format-version",
        "1",
        "--filter-platform",
        &host,
    ];
    args.extend(features);
    serde_json::from_str(&cargo(&args)).expect("cargo metadata's JSON")
}

/// The packages leasehold depends on in `meta`'s graph (normal and build dependencies,
/// transitively; not the dev-dependencies), names by package id.
fn dependencies(meta: &Value) -> BTreeMap<String, String> {
    let nodes: BTreeMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
        .iter()
        .map(|n| (n["id"].as_str().expect("id"), n))
        .collect();
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().expect("id"),
                p["name"].as_str().expect("name"),
            )
        })
        .collect();
    let root = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "leasehold")
        .and_then(|p| p["id"].as_str())
        .expect("the leasehold package");
    let mut seen = BTreeMap::new();
    let mut pending = vec![root];
    while let Some(id) = pending.pop() {
        for dep in nodes[id]["deps"].as_array().expect("deps") {
            let not_dev = dep["dep_kinds"]
                .as_array()
                .expect("dep_kinds")
                .iter()
                .any(|k| k["kind"].as_str() != Some("dev"));
            let dep_id = dep["pkg"].as_str().expect("pkg");
            if not_dev && !seen.contains_key(dep_id) && dep_id != root {
                seen.insert(dep_id.to_owned(), names[dep_id].to_owned());
                pending.push(dep_id);
            }
        }
    }
    seen
}

/// `1.89` or `1.89.0` as numbers, to compare.
fn version(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = text
        .split('.')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("a rust-version: {text}"))
        })
        .collect();
    parts.resize(3, 0);
    parts
}

#[test]
fn rust_version_is_at_least_every_dependencys_own() {
    let meta = metadata(&["--all-features"]);
    let packages = meta["packages"].as_array().expect("packages");
    let ours = packages
        .iter()
        .find(|p| p["name"] == "leasehold")
        .and_then(|p| p["rust_version"].as_str())
        .expect("Cargo.toml declares a rust-version");
    let deps = dependencies(&meta);
    assert!(
        deps.values().any(|n| n == "kube"),
        "the dependencies with every feature include kube: {deps:?}"
    );
    let needing_more: Vec<String> = packages
        .iter()
        .filter(|p| deps.contains_key(p["id"].as_str().expect("id")))
        .filter_map(|p| {
            let theirs = p["rust_version"].as_str()?;
            (version(theirs) > version(ours)).then(|| {
                format!(
                    "{} {} needs {theirs}",
                    p["name"].as_str().unwrap_or("?"),
                    p["version"].as_str().unwrap_or("?")
                )
            })
        })
        .collect();
    assert!(
        needing_more.is_empty(),
        "Cargo.toml's rust-version is {ours}, but:\n  {}",
        needing_more.join("\n  ")
    );
}

/// What only the binary (the `cli` feature) and the parts behind `kubernetes`, `http` and
/// `metrics` bring.
const BINARY_ONLY: [&str; 10] = [
    "kube",
    "k8s-openapi",
    "axum",
    "hyper",
    "clap",
    "prometheus-client",
    "tracing-subscriber",
    "tracing-appender",
    "serde_yaml",
    "anyhow",
];

/// The packages of leasehold's library and binary (normal and build dependencies, not the
/// dev-dependencies) with `features`, as cargo resolves them for a build (`cargo tree`; cargo
/// metadata's graph always unifies in the dev-dependencies' features).
fn tree(features: &[&str]) -> BTreeSet<String> {
    tree_of("leasehold", features)
}

/// [`tree`] of the workspace's `package`.
fn tree_of(package: &str, features: &[&str]) -> BTreeSet<String> {
    let mut args = vec![
        "tree",
        "--locked",
        "--edges",
        "normal,build",
        "--prefix",
        "none",
        "--format",
        "{p}",
        "--package",
        package,
    ];
    args.extend(features);
    cargo(&args)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_library_without_default_features_builds_without_the_binarys_dependencies() {
    let lean = tree(&["--no-default-features"]);
    let full = tree(&[]);
    for name in BINARY_ONLY {
        assert!(
            full.contains(name),
            "the default build has {name}: {full:?}"
        );
        assert!(
            !lean.contains(name),
            "without default features the library still depends on {name}: {lean:?}"
        );
    }
    // rustls needs a crypto provider for a `rediss://` lease: without one its first TLS
    // connection panics. kube's `ring` feature brings it to the default build; without kube
    // leasehold must bring it itself.
    for name in ["tokio", "redis", "rustls", "ring"] {
        assert!(lean.contains(name), "the lean library has {name}: {lean:?}");
    }
    // And it compiles: the `cfg`s leave no reference to a part that is not there. A check
    // says so without the code generation of every dependency a build would add to the run.
    cargo(&["check", "--locked", "--no-default-features", "--lib"]);
}

#[test]
fn the_core_depends_on_no_kubernetes_http_command_line_or_metrics_crate() {
    let core = tree_of("leasehold-core", &["--all-features"]);
    for name in BINARY_ONLY
        .iter()
        .chain(&["leasehold", "hyper-util", "tokio-postgres"])
    {
        assert!(
            !core.contains(*name),
            "the core depends on {name}: {core:?}"
        );
    }
    for name in ["tokio", "redis", "rustls", "ring"] {
        assert!(core.contains(name), "the core has {name}: {core:?}");
    }
}

#[test]
fn the_package_holds_the_license_the_readme_and_the_sources_and_not_the_test_kit() {
    let list = cargo(&["package", "--list", "--allow-dirty", "--locked"]);
    let files: BTreeSet<&str> = list.lines().collect();
    for file in [
        "LICENSE",
        "README.md",
        "Cargo.toml",
        "Cargo.lock",
        "src/lib.rs",
        "src/main.rs",
        "build.rs",
        "CHANGELOG.md",
        "src/fence/redis.lua",
        "docs/DESIGN.md",
    ] {
        assert!(files.contains(file), "the package lacks {file}:\n{list}");
    }
    let foreign: Vec<&&str> = files
        .iter()
        .filter(|f| {
            ["tests/", "crates/", "charts/", "examples/", "target/"]
                .iter()
                .any(|d| f.starts_with(d))
        })
        .collect();
    assert!(foreign.is_empty(), "the package holds {foreign:?}");
    let license = std::fs::read_to_string(harness::repo().join("LICENSE")).expect("LICENSE");
    let declared = cargo_toml_value("license");
    assert_eq!(declared, "Apache-2.0");
    assert!(
        license.contains("Apache License") && license.contains("Version 2.0, January 2004"),
        "LICENSE is the text of the declared license, {declared}"
    );
    for key in ["documentation", "readme", "description"] {
        assert!(!cargo_toml_value(key).is_empty(), "Cargo.toml sets {key}");
    }
    // No link that is not the project's: there is no public repository yet (set the real one
    // when there is, here and in Cargo.toml), and the chart names none either.
    assert_eq!(
        package_value("repository"),
        Value::Null,
        "Cargo.toml names a repository"
    );
    let chart = std::fs::read_to_string(harness::repo().join("charts/leasehold/Chart.yaml"))
        .expect("Chart.yaml");
    for key in ["home:", "sources:"] {
        assert!(!chart.contains(key), "Chart.yaml names a link ({key})");
    }
}

/// A key of Cargo.toml's `[package]`, as `cargo metadata` reads it (null when unset).
fn package_value(key: &str) -> Value {
    let meta = metadata(&[]);
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "leasehold")
        .expect("the leasehold package")[key]
        .clone()
}

/// A `key = "value"` of Cargo.toml's `[package]`.
fn cargo_toml_value(key: &str) -> String {
    match package_value(key) {
        Value::String(s) => s,
        other => panic!("Cargo.toml's {key}: {other}"),
    }
}
