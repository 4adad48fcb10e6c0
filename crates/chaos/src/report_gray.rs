//! The report's section on leaderless time and churn per kind of fault, with the bounds the gray
//! faults are checked against (docs/DESIGN.md, "Gray failures": one partly sick replica never costs
//! the group its leader).

use std::fmt::Write as _;

use crate::failover::Liveness;
use crate::kinds::GRAY_TERMS;
use crate::nemesis::Journal;
use crate::time;

/// Appends the section to `md`.
pub fn section(md: &mut String, liveness: &Liveness, journal: &Journal) {
    let _ = writeln!(md, "## Leaderless time and churn\n");
    let _ = writeln!(
        md,
        "*Leaderless time*: per fault, the longest stretch without a working leader between its injection and its recovery, from the moment the last working leader's term ended (the lease became unusable or free) to the next working leader. *Churn*: terms begun per minute over the same stretches. The gray faults (one replica partly sick for several lease durations, and a healthy leader leaving partway) are checked against bounds: leaderless time at most one lease duration for the unusable lease to run out (plus the fault's largest delay on a slow link) and two more within which a healthy replica leads (docs/DESIGN.md, \"Gray failures\"); at most {GRAY_TERMS} terms begun per fault (the sick leader's successor, the leaving leader's successor, one term of the sick replica before it sits out or backs off), shown as a rate over the same time. The whole faults' bound is the recovery bound of the failover table. Milliseconds.\n"
    );
    let _ = writeln!(
        md,
        "| kind | measured | leaderless p50 | p99 | max | bound | over | terms begun | churn /min | bound /min | over {GRAY_TERMS} terms |"
    );
    let _ = writeln!(
        md,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (kind, k) in liveness.kinds.iter().filter(|(_, k)| k.injected > 0) {
        let cell = |v: Option<time::Micros>| v.map_or("–".to_owned(), time::ms);
        let gray = |n: usize| {
            if kind.is_gray() {
                n.to_string()
            } else {
                "–".to_owned()
            }
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} |",
            kind.label(),
            k.injected - k.unmeasured,
            cell(k.leaderless.map(|s| s.p50)),
            cell(k.leaderless.map(|s| s.p99)),
            cell(k.leaderless.map(|s| s.max)),
            cell(k.leaderless_bound),
            gray(k.leaderless_over),
            k.terms_begun,
            k.churn_per_min,
            k.churn_bound_per_min
                .map_or("–".to_owned(), |b| format!("{b:.1}")),
            gray(k.churn_over)
        );
    }
    let over: Vec<String> = liveness
        .outcomes
        .iter()
        .filter(|o| o.kind.is_gray())
        .filter(|o| {
            let bound = liveness.kinds.get(&o.kind).and_then(|k| k.leaderless_bound);
            bound.is_some_and(|b| o.leaderless > b) || o.terms_begun > GRAY_TERMS
        })
        .map(|o| {
            let detail = journal
                .faults
                .iter()
                .find(|f| f.index == o.index)
                .and_then(|f| f.detail.clone())
                .unwrap_or_default();
            format!(
                "- fault #{} ({}): leaderless {} ms, {} terms begun; {detail}",
                o.index,
                o.kind.label(),
                time::ms(o.leaderless),
                o.terms_begun
            )
        })
        .collect();
    if over.is_empty() {
        let _ = writeln!(md, "\nNo gray fault went beyond either bound.\n");
    } else {
        let _ = writeln!(md, "\nGray faults beyond a bound:\n\n{}\n", over.join("\n"));
    }
}
