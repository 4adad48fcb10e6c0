//! The report's section on the checks beside the resource's: terms by the replicas' own logs,
//! writes after their term (the command's helpers included), churn per fault kind, whether
//! the replicas said that a key leasehold did not write blocked the lease, and PostgreSQL, the
//! second fenced resource.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::checker::{Check, Safety};
use crate::dataset::RunInfo;
use crate::failover::Liveness;
use crate::nemesis::Journal;
use crate::schedule::FaultKind;
use crate::termcheck::{LOG_SLACK, TermFigures, WRITE_SLACK};
use crate::time;

/// Appends the section to `md`.
pub fn section(
    md: &mut String,
    info: &RunInfo,
    safety: &Safety,
    m: &TermFigures,
    liveness: &Liveness,
    journal: &Journal,
) {
    let _ = writeln!(md, "## Terms by the logs, late writes, churn\n");
    let _ = writeln!(
        md,
        "- {} terms by the replicas' own `became leader` … `stepped down` lines ({} cut short at a SIGSTOP or SIGKILL of their process, which could not log); {} overlap(s) (`LogOverlap`); {} overlap(s) within the {} ms a log line may be stamped late (largest {} ms).",
        m.log_terms,
        m.log_cut,
        safety.count(Check::LogOverlap),
        m.log_late,
        time::ms(LOG_SLACK),
        time::ms(m.log_late_max)
    );
    let _ = writeln!(
        md,
        "- Writes after their term's validity deadline: {} by processes whose leasehold ran (`WriteAfterTerm`, one violation per process); {} in flight (within {} ms); {} while its leasehold was paused, killed or starved (only fencing can stop those).",
        safety.count(Check::WriteAfterTerm),
        m.after_deadline_in_flight,
        time::ms(WRITE_SLACK),
        m.after_deadline_impaired
    );
    let _ = writeln!(
        md,
        "- Writes by the command's helpers (setsid daemons, workers ignoring SIGTERM): {}, of which {} after their term's deadline.",
        m.helper_writes.0, m.helper_writes.1
    );
    let churn: Vec<String> = liveness
        .kinds
        .iter()
        .filter(|(_, k)| k.injected > 0)
        .map(|(kind, k)| {
            format!(
                "{}: {} terms begun over {} faults, leader changed after {}",
                kind.label(),
                k.terms_begun,
                k.injected,
                k.leader_changes
            )
        })
        .collect();
    let _ = writeln!(
        md,
        "- Churn (terms begun between each fault's injection and its recovery):\n  - {}",
        churn.join("\n  - ")
    );
    for (kind, (said, of)) in said_by_kind(journal) {
        let unsaid: Vec<String> = journal
            .faults
            .iter()
            .filter(|f| f.kind() == kind && f.said.is_some_and(|(s, n)| s < n))
            .map(|f| format!("#{}", f.index))
            .collect();
        let _ = writeln!(
            md,
            "- {}: said by {said} of {of} replicas (the error-level log line, before the key was deleted); faults in which a replica never said so: {}.",
            kind.label(),
            if unsaid.is_empty() {
                "none".to_owned()
            } else {
                unsaid.join(", ")
            }
        );
    }
    let _ = writeln!(md);
    let by_fault = violations_by_fault(safety, journal);
    if !by_fault.is_empty() {
        let _ = writeln!(
            md,
            "Violations by the fault last injected before each (the fault in progress, or the one whose aftermath it is):\n"
        );
        for (kind, checks) in &by_fault {
            let list: Vec<String> = checks.iter().map(|(c, n)| format!("{c:?} {n}")).collect();
            let _ = writeln!(md, "- {}: {}", kind.label(), list.join(", "));
        }
        let _ = writeln!(md);
    }
    if m.pg {
        let _ = writeln!(md, "## PostgreSQL\n");
        let _ = writeln!(
            md,
            "Each write of a leader's command (and of its helpers) also goes to PostgreSQL in one transaction that first advances the `leasehold_fence` row (the statements of `src/fence/postgres.sql`){}. Read back at the end: {} rows committed, {} refused as stale; {} committed with a token lower than one committed before (`PgStaleWriteAccepted`); {} untraced to a term (`PgUntraced`).{}\n",
            if info.fencing {
                ""
            } else {
                " — not in this run: the negative control skips the advance"
            },
            m.pg_committed,
            m.pg_refused,
            safety.count(Check::PgStaleWriteAccepted),
            safety.count(Check::PgUntraced),
            m.pg_error
                .as_deref()
                .map(|e| format!(" The tables could not be read: {e}."))
                .unwrap_or_default()
        );
    }
}

/// Per kind of key leasehold did not write: how many replicas said it blocked the lease, of how
/// many, summed over the kind's faults.
pub fn said_by_kind(journal: &Journal) -> BTreeMap<FaultKind, (usize, usize)> {
    let mut out: BTreeMap<FaultKind, (usize, usize)> = BTreeMap::new();
    for f in &journal.faults {
        if let Some((said, of)) = f.said {
            let e = out.entry(f.kind()).or_default();
            e.0 += said;
            e.1 += of;
        }
    }
    out
}

/// Violations by the kind of the fault last injected before each (the fault in progress, or
/// the one whose aftermath it is), and by check.
pub fn violations_by_fault(
    safety: &Safety,
    journal: &Journal,
) -> BTreeMap<FaultKind, BTreeMap<Check, usize>> {
    let mut out: BTreeMap<FaultKind, BTreeMap<Check, usize>> = BTreeMap::new();
    for v in &safety.violations {
        let i = journal.faults.partition_point(|f| f.inject <= v.at);
        if let Some(f) = i.checked_sub(1).map(|i| &journal.faults[i]) {
            *out.entry(f.kind()).or_default().entry(v.check).or_default() += 1;
        }
    }
    out
}
