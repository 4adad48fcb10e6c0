//! The run's report: Markdown for people (fault counts, violations, failover times per kind,
//! availability, the negative control), and a JSON summary for the test that runs it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::checker::{Check, Safety};
use crate::dataset::RunInfo;
use crate::failover::{Liveness, Spread};
use crate::history::{Window, WindowEnd};
use crate::nemesis::Journal;
use crate::replica::Incarnation;
use crate::schedule::FaultKind;
use crate::time::{self, Micros};

/// The machine-readable outcome.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// The seed.
    pub seed: u64,
    /// Whether the resource fenced (false: negative control).
    pub fencing: bool,
    /// Faults planned.
    pub faults_planned: usize,
    /// Faults injected (not skipped).
    pub faults_injected: usize,
    /// Faults per kind.
    pub faults_by_kind: BTreeMap<FaultKind, usize>,
    /// Safety violations, all checks.
    pub safety_violations: usize,
    /// Per check.
    pub violations_by_check: BTreeMap<Check, usize>,
    /// Stale writes an unfenced resource would have accepted (counterfactual control).
    pub counterfactual_stale: usize,
    /// Recoveries beyond the bound.
    pub over_bound: usize,
    /// Gray faults beyond their bound on leaderless time or on churn.
    pub gray_over_bound: usize,
    /// Share of time a lease was held.
    pub availability_held: f64,
    /// Share of time a working leader existed.
    pub availability_working: f64,
    /// Terms.
    pub terms: usize,
    /// Writes accepted and refused.
    pub writes: (usize, usize),
    /// Run time in seconds.
    pub duration_s: f64,
    /// Whether the run passed: fencing on, no safety violation; fencing off, the checker
    /// reported stale writes.
    pub pass: bool,
    /// Oddities in the logs and the nemesis's notes.
    pub notes: Vec<String>,
    /// The figures of the checks by the logs, of late writes and of PostgreSQL.
    pub more: crate::termcheck::TermFigures,
    /// Per kind: terms begun between each fault's injection and the recovery (churn).
    pub churn_by_kind: BTreeMap<FaultKind, usize>,
    /// Violations by the kind of the fault last injected before each, and by check.
    pub violations_by_fault: BTreeMap<FaultKind, BTreeMap<Check, usize>>,
    /// Per kind: counts, failover and recovery spreads (µs), bound.
    pub kinds: BTreeMap<FaultKind, crate::failover::KindStats>,
    /// Per kind of key leasehold did not write: replicas that said it blocked the lease, of
    /// how many, over its faults; a replica that never said so fails its fault.
    pub said_by_kind: BTreeMap<FaultKind, (usize, usize)>,
}

/// All a report needs.
pub struct Inputs<'a> {
    /// The run's settings.
    pub info: &'a RunInfo,
    /// What the nemesis did.
    pub journal: &'a Journal,
    /// The terms.
    pub windows: &'a [Window],
    /// Safety results.
    pub safety: &'a Safety,
    /// The figures of the checks by the logs, of late writes and of PostgreSQL.
    pub more: &'a crate::termcheck::TermFigures,
    /// Liveness results.
    pub liveness: &'a Liveness,
    /// Log oddities.
    pub oddities: &'a [String],
    /// Run start and end.
    pub started: Micros,
    /// End.
    pub ended: Micros,
    /// redis-server processes started.
    pub redis_starts: u32,
    /// Every leasehold process, by replica.
    pub replicas: &'a [Vec<Incarnation>],
    /// The error that cut the run short, if any.
    pub error: Option<&'a str>,
}

impl Inputs<'_> {
    /// The summary.
    pub fn summary(&self) -> Summary {
        let mut faults_by_kind = BTreeMap::new();
        for f in self.journal.faults.iter().filter(|f| f.skipped.is_none()) {
            *faults_by_kind.entry(f.kind()).or_insert(0) += 1;
        }
        let mut violations_by_check = BTreeMap::new();
        for check in Check::ALL {
            violations_by_check.insert(check, self.safety.count(check));
        }
        let pass = self.error.is_none()
            && if self.info.fencing {
                self.safety.violations.is_empty()
            } else {
                self.safety.count(Check::StaleWriteAccepted) > 0
                    && (!self.more.pg || self.safety.count(Check::PgStaleWriteAccepted) > 0)
            };
        let mut notes: Vec<String> = self.oddities.to_vec();
        if let Some(e) = self.error {
            notes.push(format!("the schedule stopped early: {e}"));
        }
        notes.extend(self.journal.notes.iter().cloned());
        for (r, incs) in self.replicas.iter().enumerate() {
            for inc in incs {
                let expected = inc.end == "SIGKILL" || inc.end == "SIGTERM, exited";
                if !expected {
                    notes.push(format!(
                        "r{r}#{} (pid {}, started at {} s): {}",
                        inc.number,
                        inc.pid,
                        time::secs(inc.started - self.started),
                        inc.end
                    ));
                }
            }
        }
        Summary {
            seed: self.info.seed,
            fencing: self.info.fencing,
            faults_planned: self.info.faults,
            faults_injected: faults_by_kind.values().sum(),
            faults_by_kind,
            safety_violations: self.safety.violations.len(),
            violations_by_check,
            counterfactual_stale: self.safety.counterfactual_stale,
            over_bound: self.liveness.kinds.values().map(|k| k.over_bound).sum(),
            gray_over_bound: self.liveness.kinds.values().map(|k| k.gray_over()).sum(),
            availability_held: self.liveness.availability_held,
            availability_working: self.liveness.availability_working,
            terms: self.windows.len(),
            writes: (self.safety.accepted, self.safety.refused),
            duration_s: (self.ended - self.started) as f64 / 1e6,
            pass,
            notes,
            more: self.more.clone(),
            churn_by_kind: self
                .liveness
                .kinds
                .iter()
                .map(|(k, s)| (*k, s.terms_begun))
                .collect(),
            kinds: self.liveness.kinds.clone(),
            violations_by_fault: crate::report_terms::violations_by_fault(
                self.safety,
                self.journal,
            ),
            said_by_kind: crate::report_terms::said_by_kind(self.journal),
        }
    }

    /// The Markdown report.
    pub fn markdown(&self, summary: &Summary) -> String {
        let c = self.info;
        let t = c.timing();
        let mut md = String::new();
        let mode = if c.fencing {
            "fenced resource"
        } else {
            "NEGATIVE CONTROL: resource fencing off"
        };
        let _ = writeln!(
            md,
            "# Chaos run: seed {}, {} faults ({mode})\n",
            c.seed, summary.faults_injected
        );
        let verdict = match (c.fencing, summary.pass) {
            (true, true) => "**PASS**: no safety violation.".to_owned(),
            (true, false) => format!(
                "**FAIL**: {} safety violation(s), listed below.",
                summary.safety_violations
            ),
            (false, true) => format!(
                "**PASS** (negative control): the checker reported {} stale write(s) accepted by the unfenced resource, as it must.",
                self.safety.count(Check::StaleWriteAccepted)
            ),
            (false, false) => {
                "**FAIL** (negative control): with fencing off the checker saw no stale write; it proves nothing.".to_owned()
            }
        };
        let _ = writeln!(md, "{verdict}\n");
        let _ = writeln!(
            md,
            "Command (`{}`):\n\n```sh\n{}\n```\n",
            c.leasehold_version, c.command_line
        );
        let _ = writeln!(md, "## Setup\n");
        // Runs saved before the topology was recorded tell it by their faults.
        let drew = |k: FaultKind| self.journal.faults.iter().any(|f| f.kind() == k);
        let topology = match c.topology.as_str() {
            "" if drew(FaultKind::SentinelFailover) => "sentinel",
            "" if drew(FaultKind::ClusterFailover) => "cluster",
            t => t,
        };
        let redis = match topology {
            "sentinel" => "a real Sentinel set (a master, its replica, three Sentinels, the first behind a fault proxy; append-only, fsync always)".to_owned(),
            "cluster" => "a real Redis Cluster (three masters, three replicas; append-only, fsync always)".to_owned(),
            _ => format!(
                "each behind its own TCP fault proxy to one real `redis-server` (append-only, fsync always; {} processes started over the run)",
                self.redis_starts
            ),
        };
        let _ = writeln!(
            md,
            "- {} replicas of the real `leasehold` binary in exec mode (`leasehold run … -- chaos child`), {redis}.",
            c.replicas
        );
        let _ = writeln!(
            md,
            "- Timing: lease duration {} ms, renew deadline {} ms, retry period {} ms (drift margin 1 % + 2 ms).",
            t.lease_duration.as_millis(),
            t.renew_deadline.as_millis(),
            t.retry_period.as_millis()
        );
        let _ = writeln!(
            md,
            "- Each leader's command writes to the fenced resource every {} ms with its fencing token; the resource {}.",
            c.write_interval_ms,
            if c.fencing {
                "refuses tokens lower than the highest it accepted"
            } else {
                "accepts everything (fencing off)"
            }
        );
        let _ = writeln!(
            md,
            "- Run time {} s; {} terms; {} writes accepted, {} refused.\n",
            time::secs(self.ended - self.started),
            self.windows.len(),
            self.safety.accepted,
            self.safety.refused
        );

        let _ = writeln!(md, "## Processes\n");
        let _ = writeln!(
            md,
            "| replica | leasehold processes | ended by SIGKILL | ended by SIGTERM | other ends | non-JSON log lines |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
        for (r, incs) in self.replicas.iter().enumerate() {
            let killed = incs.iter().filter(|i| i.end == "SIGKILL").count();
            let termed = incs.iter().filter(|i| i.end.starts_with("SIGTERM")).count();
            let stray: usize = incs.iter().map(|i| i.stray_lines).sum();
            let _ = writeln!(
                md,
                "| r{r} | {} | {killed} | {termed} | {} | {stray} |",
                incs.len(),
                incs.len() - killed - termed
            );
        }
        let _ = writeln!(md);

        let _ = writeln!(md, "## Terms\n");
        let mut reasons: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for w in self.windows {
            let reason = w
                .reason
                .clone()
                .unwrap_or_else(|| "no step-down logged (process killed)".to_owned());
            let e = reasons.entry(reason).or_default();
            e.0 += 1;
            if w.ended == WindowEnd::Deadline {
                e.1 += 1;
            }
        }
        let _ = writeln!(
            md,
            "| how the term ended (`stepped down` reason) | terms | of which the validity deadline came first |"
        );
        let _ = writeln!(md, "|---|---:|---:|");
        for (reason, (n, deadline_first)) in &reasons {
            let _ = writeln!(md, "| {reason} | {n} | {deadline_first} |");
        }
        let _ = writeln!(md);

        let _ = writeln!(md, "## Faults\n");
        let _ = writeln!(
            md,
            "| kind | injected | hit the leader | leadership interrupted | new term after |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|");
        let mut totals = (0, 0, 0, 0);
        for (kind, k) in &self.liveness.kinds {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                kind.label(),
                k.injected,
                k.hit_leader,
                k.disrupted,
                k.leader_changes
            );
            totals.0 += k.injected;
            totals.1 += k.hit_leader;
            totals.2 += k.disrupted;
            totals.3 += k.leader_changes;
        }
        let _ = writeln!(
            md,
            "| **all** | **{}** | **{}** | **{}** | **{}** |\n",
            totals.0, totals.1, totals.2, totals.3
        );

        let _ = writeln!(md, "## Safety\n");
        let _ = writeln!(md, "| check | violations |");
        let _ = writeln!(md, "|---|---:|");
        for check in Check::ALL {
            let _ = writeln!(md, "| {} | {} |", check.label(), self.safety.count(check));
        }
        let _ = writeln!(md, "| **all** | **{}** |\n", self.safety.violations.len());
        let gap = |g: Option<Micros>| g.map_or("–".to_owned(), time::ms);
        let _ = writeln!(
            md,
            "Smallest gap between the end of every earlier validity window and the start of the next term: {} ms after a term that ran out (its lease had to expire in Redis; the drift margin is {} ms, less the time a log line takes to be stamped), {} ms after a term that stepped down and released its lease.\n",
            gap(self.safety.min_gap_after_deadline),
            t.lease_duration.as_millis() / 100 + 2,
            gap(self.safety.min_gap_after_step_down)
        );
        if !self.safety.violations.is_empty() {
            let _ = writeln!(md, "Violations (first 50):\n");
            for v in self.safety.violations.iter().take(50) {
                let _ = writeln!(
                    md,
                    "- `{:?}` at {} s: {}",
                    v.check,
                    time::secs(v.at - self.started),
                    v.detail
                );
            }
            let _ = writeln!(md);
        }

        crate::report_terms::section(
            &mut md,
            self.info,
            self.safety,
            self.more,
            self.liveness,
            self.journal,
        );
        let _ = writeln!(md, "## Writes\n");
        let _ = writeln!(
            md,
            "- Accepted: {}; refused: {}.",
            self.safety.accepted, self.safety.refused
        );
        for (cause, n) in &self.safety.refusals {
            let _ = writeln!(md, "- Refused, {}: {n}.", cause.label());
        }
        let _ = writeln!(
            md,
            "- Accepted after the writer's term had ended, before any newer token reached the resource (a paused leader's command; fencing allows it, no newer term had written yet): {} (latest {} ms after its term).\n",
            self.safety.late_accepted,
            time::ms(self.safety.late_max)
        );

        let _ = writeln!(md, "## Failover\n");
        let _ = writeln!(
            md,
            "A working leader is a replica inside its validity window whose leasehold runs and is not paused. *Failover* is the time without one, from the fault's injection until one exists again, over the faults that interrupted leadership. *Recovery* is measured from the fault's reference instant (the injection for process faults, the fault's end for Redis and link faults and for a rolling restart) and checked against the bound: TTL + retry period, plus one more TTL of cooldown after a Redis restart. Faults injected while no replica led (the previous fault's failover was not over) are not measured: their outage belongs to that fault. Milliseconds.\n"
        );
        let _ = writeln!(
            md,
            "| kind | measured | interrupted | failover min | p50 | p99 | max | recovery p50 | p99 | max | bound | over bound |"
        );
        let _ = writeln!(
            md,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for (kind, k) in &self.liveness.kinds {
            let o = spread_cells(k.outage, 4);
            let r = spread_cells(k.recovery, 4);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                kind.label(),
                k.injected - k.unmeasured,
                k.disrupted,
                o[0],
                o[1],
                o[2],
                o[3],
                r[1],
                r[2],
                r[3],
                time::ms(k.bound),
                k.over_bound
            );
        }
        let late: Vec<_> = self
            .liveness
            .outcomes
            .iter()
            .filter(|o| !o.within_bound())
            .collect();
        if !late.is_empty() {
            let _ = writeln!(md, "\nRecoveries beyond the bound:\n");
            for o in late.iter().take(50) {
                let _ = writeln!(
                    md,
                    "- fault #{} ({}): {} ms (bound {} ms)",
                    o.index,
                    o.kind.label(),
                    o.recovery.map_or("never".into(), time::ms),
                    time::ms(o.bound)
                );
            }
        }
        let _ = writeln!(md);
        crate::report_gray::section(&mut md, self.liveness, self.journal);
        let _ = writeln!(md, "## Availability\n");
        let _ = writeln!(
            md,
            "From the first election to the end of the schedule ({} s): a replica held a valid lease {:.2} % of the time; a working leader existed {:.2} % of the time.\n",
            time::secs(self.liveness.measured.1 - self.liveness.measured.0),
            100.0 * self.liveness.availability_held,
            100.0 * self.liveness.availability_working
        );

        let _ = writeln!(md, "## Negative control\n");
        if c.fencing {
            let _ = writeln!(
                md,
                "Counterfactual on this run's own writes: had the resource not fenced (accepted every write in the order they arrived), it would have accepted **{}** stale write(s), each one a `StaleWriteAccepted` violation for the same check. Run the same schedule with `--resource-fencing off` for the real control; it passes only when the checker reports violations.\n",
                self.safety.counterfactual_stale
            );
        } else {
            let _ = writeln!(
                md,
                "This is the control run: fencing was off at the resource, and the checker reported {} stale write(s) accepted.\n",
                self.safety.count(Check::StaleWriteAccepted)
            );
        }

        let _ = writeln!(md, "## Timeline\n");
        let _ = writeln!(md, "![timeline](timeline.svg)\n");
        if !summary.notes.is_empty() {
            let _ = writeln!(md, "## Notes\n");
            for n in summary.notes.iter().take(100) {
                let _ = writeln!(md, "- {n}");
            }
            let _ = writeln!(md);
        }
        md
    }
}

fn spread_cells(s: Option<Spread>, n: usize) -> Vec<String> {
    match s {
        Some(s) => [s.min, s.p50, s.p99, s.max]
            .into_iter()
            .map(|v| format!("{:.0}", v as f64 / 1000.0))
            .collect(),
        None => vec!["–".to_owned(); n],
    }
}
