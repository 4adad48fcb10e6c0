//! The benchmark harness (examples/bench/) in its tiny `--quick` mode: it runs every part
//! against its own redis-servers and writes a well-formed report and plot. No figure is checked
//! here; timed assertions do not belong in the test suite.

use std::process::Command;

#[test]
fn the_quick_benchmark_writes_a_report_with_every_section_and_a_plot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("BENCHMARKS.md");
    let svg = dir.path().join("bench").join("latency.svg");
    let run = Command::new(harness::example("bench"))
        .arg("--quick")
        .arg("--out")
        .arg(&out)
        .arg("--svg")
        .arg(&svg)
        .arg("--leasehold-bin")
        .arg(harness::leasehold_bin())
        .output()
        .expect("run the benchmark harness");
    assert!(
        run.status.success(),
        "the harness failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let report = std::fs::read_to_string(&out).expect("the report was written");
    for heading in [
        "# Benchmarks",
        "## Summary",
        "## Machine and versions",
        "## 1. Graceful handoff",
        "## 2. Crash failover",
        "## 3. Pause step-down",
        "## 4. Redis load",
        "## 5. Footprint",
        "## 6. Primitive cost",
        "## 7. Peers: the locks users would pick instead",
        "## The physical limit of this machine",
        "## The HTTP port under a flood",
        "## What was not measured, and caveats",
    ] {
        assert!(report.contains(heading), "no `{heading}` in:\n{report}");
    }
    assert!(report.contains("scripts/bench.sh"), "says how to reproduce");
    assert!(
        report.contains("| the Sentinel majority's cost, 1 client |")
            && report.contains("through 3 Sentinels (a majority must name the master)"),
        "the Sentinel rows are measured:\n{report}"
    );
    assert!(
        report.contains("| `leasehold run -- sh -c 'sleep 1000 & wait'` (exec mode): SIGTERM"),
        "the exec-mode handoff is measured:\n{report}"
    );
    assert!(
        report.contains("Not measured in this run (a quick run"),
        "the quick run leaves the peers out, and says so:\n{report}"
    );
    assert!(
        report.contains("| held (peak over 2 s) |") && report.contains("answered `200`"),
        "the HTTP flood is measured:\n{report}"
    );
    assert!(report.contains("](bench/latency.svg)"), "links the plot");
    // Every table row has as many cells as its header.
    let mut columns = None;
    for line in report.lines() {
        if !line.starts_with('|') {
            columns = None;
            continue;
        }
        let cells = line.matches('|').count();
        match columns {
            None => columns = Some(cells),
            Some(n) => assert_eq!(n, cells, "a ragged table row: {line}"),
        }
    }
    for row in [
        "| leasehold, in-process: release → successor's `Leadership` |",
        "| polling baseline: lease expiry → successor's `Leadership` |",
        "| rslock | 1 | `lock` |",
        "| leasehold | 4 |",
    ] {
        let line = report
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row `{row}` in:\n{report}"));
        assert!(!line.contains("| 0 | – |"), "a row without samples: {line}");
    }

    let plot = std::fs::read_to_string(&svg).expect("the plot was written");
    assert!(plot.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(plot.trim_end().ends_with("</svg>"));
    assert_eq!(
        plot.matches("<path ").count(),
        5,
        "three handoff and two failover curves"
    );
}

#[test]
fn the_herd_mode_prints_one_row_per_group_size() {
    let run = Command::new(harness::example("bench"))
        .args(["herd", "--contenders", "2,20", "--rounds", "3"])
        .output()
        .expect("run the bench's herd mode");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for size in ["| 2 | 3 |", "| 20 | 3 |"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(size)),
            "a row `{size}`:\n{stdout}"
        );
    }
}
