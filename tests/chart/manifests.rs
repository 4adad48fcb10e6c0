//! What is built from the chart and beside it: manifests/ equals the chart rendered with default
//! values, the rendered objects validate against offline Kubernetes schemas, the Dockerfile
//! passes hadolint, and the build context holds exactly what the Dockerfile copies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use harness::helm::{self, VALUE_SETS, render};

// ---------------------------------------------------------------------------------------------
// manifests/ and the offline Kubernetes schemas

#[test]
fn manifests_equal_the_chart_rendered_with_default_values() {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let chart = helm::chart();
    let out = helm::run(
        &helm::helm(),
        &[
            "template",
            helm::MANIFESTS_RELEASE,
            chart.to_str().expect("utf-8"),
            "--namespace",
            helm::MANIFESTS_NAMESPACE,
            "--output-dir",
            out_dir.path().to_str().expect("utf-8"),
        ],
    );
    assert!(out.ok(), "{}", out.stderr);
    let rendered_dir = out_dir.path().join("leasehold/templates");
    let read_dir = |dir: &Path| -> BTreeMap<String, String> {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("entry").path())
            .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
            .map(|p| {
                let name = p.file_name().expect("name").to_string_lossy().into_owned();
                (name, std::fs::read_to_string(&p).expect("read"))
            })
            .collect()
    };
    let rendered = read_dir(&rendered_dir);
    let manifests_dir = harness::repo().join("manifests");
    let committed = read_dir(&manifests_dir);
    let stale = "manifests/ is stale: run scripts/render-manifests.sh";
    assert_eq!(
        committed.keys().collect::<Vec<_>>(),
        rendered.keys().collect::<Vec<_>>(),
        "{stale}"
    );
    for (name, text) in &rendered {
        assert!(
            committed[name] == *text,
            "{stale} (manifests/{name} differs)"
        );
    }
    let kustomization: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(manifests_dir.join("kustomization.yaml")).expect("kustomization"),
    )
    .expect("kustomization.yaml parses");
    let resources: Vec<&str> = kustomization["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a file"))
        .collect();
    assert_eq!(
        resources,
        rendered.keys().map(String::as_str).collect::<Vec<_>>(),
        "{stale}"
    );
    assert_eq!(
        kustomization["namespace"].as_str(),
        Some(helm::MANIFESTS_NAMESPACE)
    );
}

#[test]
fn rendered_objects_validate_against_the_kubernetes_schemas() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, (name, values)) in VALUE_SETS.iter().enumerate() {
        let file = dir.path().join(format!("set-{i}.yaml"));
        helm::assert_valid_for_kubernetes(name, &render(values), &file);
    }
}

// ---------------------------------------------------------------------------------------------
// The image

#[test]
fn the_dockerfile_passes_hadolint() {
    let out = helm::run(
        &helm::hadolint(),
        &["--failure-threshold", "info", "Dockerfile"],
    );
    assert!(out.ok(), "hadolint:\n{}{}", out.stdout, out.stderr);
}

#[test]
fn the_build_context_keeps_what_the_dockerfile_copies_and_nothing_else() {
    let ignore =
        std::fs::read_to_string(harness::repo().join(".dockerignore")).expect(".dockerignore");
    let lines: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        lines.first(),
        Some(&"*"),
        "the context starts empty: {lines:?}"
    );
    let kept: BTreeSet<&str> = lines[1..]
        .iter()
        .map(|l| {
            l.strip_prefix('!')
                .unwrap_or_else(|| panic!("only re-inclusions after `*`: {l}"))
        })
        .map(|l| l.trim_end_matches('/'))
        .collect();
    let dockerfile =
        std::fs::read_to_string(harness::repo().join("Dockerfile")).expect("Dockerfile");
    let mut copied = BTreeSet::new();
    for line in dockerfile.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        let words: Vec<&str> = rest
            .split_whitespace()
            .filter(|w| !w.starts_with("--"))
            .collect();
        if rest.split_whitespace().any(|w| w.starts_with("--from")) {
            continue;
        }
        for src in &words[..words.len() - 1] {
            copied.insert(src.trim_end_matches('/'));
        }
    }
    assert_eq!(
        kept, copied,
        "the build context holds exactly what the Dockerfile copies"
    );
}

// ---------------------------------------------------------------------------------------------
// One version: Cargo.toml's

/// The version strings that follow each of `markers` in `text` (up to the first character that
/// cannot be part of a version), with the line each is on.
fn versions_after(text: &str, markers: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in text.lines() {
        for marker in markers {
            for (at, _) in line.match_indices(marker) {
                let rest = &line[at + marker.len()..];
                let version: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
                    .collect();
                if version.starts_with(|c: char| c.is_ascii_digit()) {
                    found.push((version, line.trim().to_owned()));
                }
            }
        }
    }
    found
}

#[test]
fn every_place_that_names_the_version_names_cargo_tomls() {
    let version = env!("CARGO_PKG_VERSION");
    let mut wrong = Vec::new();
    // The chart: its own version and the release it deploys are the crate's (one release).
    let chart: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(helm::chart().join("Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("Chart.yaml parses");
    for key in ["version", "appVersion"] {
        if chart[key].as_str() != Some(version) {
            wrong.push(format!("Chart.yaml {key}: {:?}", chart[key]));
        }
    }
    // The docs and the Dockerfile: image tags, `--set image.tag=`, kustomize's `newTag:`, and
    // the image's version label.
    let markers = [
        "leasehold:",
        "image.tag=",
        "newTag: ",
        "org.opencontainers.image.version=\"",
    ];
    for file in [
        "README.md",
        "docs/DEPLOY.md",
        "Dockerfile",
        "charts/leasehold/README.md",
    ] {
        let text = std::fs::read_to_string(harness::repo().join(file)).expect(file);
        let found = versions_after(&text, &markers);
        assert!(
            !found.is_empty(),
            "{file} names no version: the markers are {markers:?}"
        );
        for (v, line) in found {
            if v != version {
                wrong.push(format!("{file}: {v} in `{line}`"));
            }
        }
    }
    // What the chart renders with default values: the version label on every object, the
    // helm.sh/chart label, the image.
    let rendered = helm::template_as(helm::MANIFESTS_RELEASE, helm::MANIFESTS_NAMESPACE, "");
    assert!(rendered.ok(), "{}", rendered.stderr);
    let labels = versions_after(
        &rendered.stdout,
        &[
            "app.kubernetes.io/version: \"",
            "helm.sh/chart: leasehold-",
            "image: \"leasehold:",
        ],
    );
    assert!(
        labels.len() >= 3,
        "the rendered chart names its version: {labels:?}"
    );
    for (v, line) in labels {
        if v != version {
            wrong.push(format!("helm template: {v} in `{line}`"));
        }
    }
    assert!(
        wrong.is_empty(),
        "Cargo.toml says {version}; these places say otherwise:\n  {}",
        wrong.join("\n  ")
    );
}
