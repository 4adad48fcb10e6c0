//! One run, start to end: draw the schedule, start the system under test, wait for the first leader,
//! let the nemesis loose, stop everything, then check and report. `check` does the second
//! half again on a saved run.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::checker;
use crate::config::{self, Gray, RunConfig, Topology};
use crate::dataset::{Dataset, RunInfo};
use crate::failover;
use crate::history;
use crate::nemesis::Nemesis;
use crate::report::{Inputs, Summary};
use crate::schedule::{self, FaultKind};
use crate::system::System;
use crate::termcheck;
use crate::time;
use crate::timeline::Picture;

/// Runs the harness; `Ok(true)` when the verdict is a pass. The processes it starts die with
/// the thread that calls it (their parent-death signal), so that thread must live until the
/// run ends: the main thread, or one the caller joins.
pub fn run(config: &RunConfig) -> anyhow::Result<bool> {
    let kinds = schedule::parse_kinds(&config.kinds)?;
    if config.topology != Topology::Single && config.gray == Gray::Only {
        bail!("--gray only: the gray faults need a single server (a link of its own per replica)");
    }
    let set = config::kinds(config.topology, config.gray);
    if let Some(k) = kinds.iter().find(|k| !set.contains(k)) {
        bail!(
            "--kinds {}: a {:?} run does not draw that kind",
            serde_json::to_string(k).unwrap_or_default(),
            config.topology
        );
    }
    let schedule = if kinds.is_empty() {
        schedule::generate_from(
            config.seed,
            config.faults,
            config.replicas,
            &config.timing,
            set,
        )
    } else {
        schedule::restricted(
            config.seed,
            config.faults,
            config.replicas,
            &config.timing,
            set,
            &kinds,
        )
    };
    if config.dry_run {
        for s in &schedule {
            println!(
                "{}",
                serde_json::to_string(s).context("cannot print the schedule")?
            );
        }
        return Ok(true);
    }
    std::fs::create_dir_all(&config.out)
        .with_context(|| format!("cannot create {}", config.out.display()))?;
    let work = config.out.join("raw");
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .with_context(|| format!("cannot clear {}", work.display()))?;
    }
    write_file(
        &config.out.join("schedule.json"),
        &serde_json::to_string_pretty(&schedule).context("cannot serialise the schedule")?,
    )?;
    let info = RunInfo::new(config, version(&config.leasehold)?);

    let started = time::now();
    let mut system = System::start(config, &work)?;
    let first_wait = FaultKind::RedisRestartLost.bound(&config.timing) + Duration::from_secs(10);
    let first = system
        .wait_for_leader(time::now(), first_wait)
        .with_context(|| {
            format!(
                "no replica became leader within {first_wait:?} of the start; logs in {}",
                work.display()
            )
        })?;
    eprintln!(
        "chaos: seed {}, {} faults; first leader r{} (token {})",
        config.seed, config.faults, first.0, first.1
    );
    let total = schedule.len();
    let mut done = 0;
    let (journal, error) = Nemesis::new(&mut system, config.timing).run(&schedule, |f| {
        done += 1;
        let target = f.target.map(|t| format!(" r{t}")).unwrap_or_default();
        let led = if f.target_led { " (leader)" } else { "" };
        let skipped = f
            .skipped
            .as_deref()
            .map(|s| format!(" skipped: {s}"))
            .unwrap_or_default();
        eprintln!(
            "chaos: [{done:>4}/{total}] #{} {}{target}{led} {} ms{skipped}",
            f.index,
            f.kind().label(),
            (f.clear - f.inject) / 1000
        );
    });
    let collected = system.finish(Duration::from_secs(10));
    let data = Dataset {
        info,
        started,
        ended: time::now(),
        journal,
        replicas: collected.replicas,
        writes: collected.writes,
        redis_starts: collected.redis_starts,
        error,
        pg: collected.pg,
    };
    let saved = work.join("collected.json");
    let keep = config.keep_logs || data.error.is_some();
    if keep {
        data.save(&saved)?;
    }
    let pass = report(&data, &config.out)?;
    if !keep && pass {
        std::fs::remove_dir_all(&work)
            .with_context(|| format!("cannot delete {}", work.display()))?;
    } else if !keep {
        data.save(&saved)?;
    }
    if let Some(e) = &data.error {
        bail!(
            "the schedule stopped early (the report covers what ran): {e}; raw data in {}",
            work.display()
        );
    }
    Ok(pass)
}

/// Checks and reports again on a saved run: `raw` is its `raw/` directory or its
/// `collected.json`.
pub fn check(raw: &Path, out: &Path) -> anyhow::Result<bool> {
    let file = if raw.is_dir() {
        raw.join("collected.json")
    } else {
        raw.to_owned()
    };
    let data = Dataset::load(&file)?;
    report(&data, out)
}

/// Checks a dataset and writes report.md, timeline.svg and summary.json into `out`.
fn report(data: &Dataset, out: &Path) -> anyhow::Result<bool> {
    let info = &data.info;
    let timing = info.timing();
    let (windows, oddities) = history::windows(&data.replicas);
    let mut safety = checker::check(&windows, &data.writes, &data.journal, &data.replicas);
    let more = termcheck::check(
        &windows,
        &data.writes,
        &data.journal,
        &data.replicas,
        data.pg.as_ref(),
        &mut safety,
    );
    let liveness = failover::analyse(&windows, &data.journal, &timing);
    let inputs = Inputs {
        info,
        journal: &data.journal,
        windows: &windows,
        safety: &safety,
        more: &more,
        liveness: &liveness,
        oddities: &oddities,
        started: data.started,
        ended: data.ended,
        redis_starts: data.redis_starts,
        replicas: &data.replicas,
        error: data.error.as_deref(),
    };
    let summary = inputs.summary();
    write_file(&out.join("report.md"), &inputs.markdown(&summary))?;
    let picture = Picture {
        replicas: info.replicas,
        windows: &windows,
        journal: &data.journal,
        writes: &data.writes,
        violations: &safety.violations,
        from: data.started,
        to: data.ended,
        title: format!(
            "leasehold chaos run, seed {}: {} faults, {} terms, {} safety violations{}",
            info.seed,
            summary.faults_injected,
            windows.len(),
            summary.safety_violations,
            if info.fencing {
                ""
            } else {
                " (negative control: fencing off)"
            }
        ),
    };
    write_file(&out.join("timeline.svg"), &picture.render())?;
    write_file(
        &out.join("summary.json"),
        &serde_json::to_string_pretty(&summary).context("cannot serialise the summary")?,
    )?;
    let faults: Vec<serde_json::Value> = data
        .journal
        .faults
        .iter()
        .map(|f| {
            let outcome = liveness.outcomes.iter().find(|o| o.index == f.index);
            serde_json::json!({ "fault": f, "outcome": outcome })
        })
        .collect();
    write_file(
        &out.join("violations.json"),
        &serde_json::to_string(&safety.violations).context("cannot serialise the violations")?,
    )?;
    write_file(
        &out.join("faults.json"),
        &serde_json::to_string(&faults).context("cannot serialise the faults")?,
    )?;
    print_summary(&summary, out);
    Ok(summary.pass)
}

fn version(leasehold: &Path) -> anyhow::Result<String> {
    let output = Command::new(leasehold)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {} --version", leasehold.display()))?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn print_summary(summary: &Summary, out: &Path) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "chaos: {} — seed {}, {} faults, {} safety violations, {} stale writes an unfenced resource would have accepted, {} recoveries over the bound, availability {:.2} % (report: {})",
        if summary.pass { "PASS" } else { "FAIL" },
        summary.seed,
        summary.faults_injected,
        summary.safety_violations,
        summary.counterfactual_stale,
        summary.over_bound,
        100.0 * summary.availability_held,
        out.join("report.md").display()
    );
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
