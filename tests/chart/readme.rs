//! The chart's README.md against its values.yaml: bitnami's readme-generator-for-helm (the tool
//! scripts/render-chart-readme.sh runs) rewrites the Parameters section of a copy from the
//! `## @section` and `## @param` lines, and the copy must come out as the README is. The
//! generator also refuses a key of values.yaml that has no `## @param` line of its own.

use std::path::Path;

use harness::helm::{self, chart, readme_generator};

/// Runs the generator on `values` and a copy of the chart's README in `dir`; its outcome and the
/// copy as it left it.
fn generate(dir: &Path, values: &Path) -> (helm::Outcome, String) {
    let readme = dir.join("README.md");
    std::fs::copy(chart().join("README.md"), &readme).expect("copy the chart's README.md");
    let out = helm::run(
        &readme_generator(),
        &[
            "--values",
            values.to_str().expect("utf-8 path"),
            "--readme",
            readme.to_str().expect("utf-8 path"),
        ],
    );
    let text = std::fs::read_to_string(&readme).expect("read the generated README.md");
    (out, text)
}

#[test]
fn the_chart_readme_is_generated_from_the_current_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (out, generated) = generate(dir.path(), &chart().join("values.yaml"));
    assert!(
        out.ok(),
        "readme-generator refused charts/leasehold/values.yaml (exit {}):\n{}{}",
        out.code,
        out.stdout,
        out.stderr
    );
    let committed = std::fs::read_to_string(chart().join("README.md")).expect("README.md");
    if generated != committed {
        let first = generated
            .lines()
            .zip(committed.lines())
            .position(|(g, c)| g != c)
            .unwrap_or_else(|| generated.lines().count().min(committed.lines().count()));
        panic!(
            "charts/leasehold/README.md is stale: run scripts/render-chart-readme.sh. First \
             difference at line {}:\n  generated: {:?}\n  committed: {:?}",
            first + 1,
            generated.lines().nth(first).unwrap_or("<end>"),
            committed.lines().nth(first).unwrap_or("<end>")
        );
    }
    for section in ["## Install", "## Parameters", "### Election", "### Global"] {
        assert!(
            committed.lines().any(|l| l == section),
            "README.md lacks {section}"
        );
    }
}

#[test]
fn a_value_without_its_param_line_is_refused_by_the_generator() {
    let dir = tempfile::tempdir().expect("temp dir");
    let values = dir.path().join("values.yaml");
    let mut text = std::fs::read_to_string(chart().join("values.yaml")).expect("values.yaml");
    text.push_str("\nundocumented: 1\n");
    std::fs::write(&values, text).expect("write values");
    let (out, _) = generate(dir.path(), &values);
    assert!(!out.ok(), "the generator accepted a key without metadata");
    assert!(
        out.stdout
            .contains("Missing metadata for key: undocumented"),
        "{}{}",
        out.stdout,
        out.stderr
    );
}
