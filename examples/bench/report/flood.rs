//! The report's section on the HTTP port under a flood: the leader's memory, open files, probes
//! and lease before, during and after.

use leasehold::http::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_EVENT_STREAMS, HEADER_READ_TIMEOUT, PROBE_RESERVE,
};

use super::*;
use crate::flood::{BACK_MARGIN, BACK_WITHIN, EVERY, Flood, REFUSED, View};
use crate::stats::group_thousands;

pub(super) fn flood_section(w: &mut String, r: &Results, plan: &Plan) {
    let _ = writeln!(w, "## The HTTP port under a flood\n");
    match &r.flood {
        Some(f) => {
            measured(w, r, plan, f);
            let _ = writeln!(w, "- {}\n", before_these_limits());
        }
        None => {
            let _ = writeln!(w, "Not measured in this run (`--flood false`).\n");
            let _ = writeln!(w, "{}\n", before_these_limits());
        }
    }
    how(w);
}

/// What the same flood did before the limits, for comparison.
fn before_these_limits() -> String {
    format!(
        "Before these limits (issue 36): {} such connections took a leader from 11 MiB to 149 MiB \
         and from 16 to {} open files, none closed, past the chart's 128 MiB memory limit.",
        group_thousands(6_000),
        group_thousands(6_016)
    )
}

fn measured(w: &mut String, r: &Results, plan: &Plan, f: &Flood) {
    let n = |v: usize| group_thousands(v as u64);
    let _ = writeln!(
        w,
        "Measured {} at commit `{}` by the harness, on this machine's {} cores. One `leasehold run` \
         (the leader, default limits: {DEFAULT_MAX_CONNECTIONS} connections, \
         {DEFAULT_MAX_EVENT_STREAMS} event streams, {PROBE_RESERVE} places for the probes, {} for \
         a request's head; {}) on its own redis-server, then {} connections, opened one after the other as \
         fast as it takes them: half ask for `/leader`'s event stream and never read, half send \
         half a request head and never finish it. `/healthz` and `/readyz` are asked every {} while \
         the connections are held ({}, {} probes in all).\n",
        humantime::format_rfc3339_seconds(r.date),
        r.versions.commit,
        r.machine.cores,
        human(HEADER_READ_TIMEOUT),
        timing_words(&plan.load_timing),
        n(f.count.tried),
        human(EVERY),
        human(f.hold),
        f.probes.len()
    );
    if let Some(limit) = f.count.limited_by {
        let _ = writeln!(
            w,
            "**Fewer connections than planned**: this process may hold only {limit} open files (its \
             hard limit), so {} of the {} planned were tried.\n",
            n(f.count.tried),
            n(f.count.asked)
        );
    }
    let bound = f.before.files + DEFAULT_MAX_CONNECTIONS + PROBE_RESERVE;
    let after = match f.back_after {
        Some(d) => format!(
            "after the clients closed (open files back within {})",
            ms(d)
        ),
        None => format!(
            "{} after the clients closed (open files not back)",
            human(BACK_WITHIN)
        ),
    };
    let _ = writeln!(
        w,
        "| | RSS | open files | leader (token) |\n|---|---|---|---|"
    );
    let rows = [
        ("before".to_owned(), f.before, leader(f.view_before, None)),
        (
            format!(
                "while they arrive (peak over {:.1} s)",
                f.opening.as_secs_f64()
            ),
            f.peak_opening,
            "not asked".to_owned(),
        ),
        (
            format!("held (peak over {})", human(f.hold)),
            f.peak_hold,
            leader(f.view_during, f.view_before),
        ),
        (after, f.after, leader(f.view_after, f.view_before)),
    ];
    for (i, (when, usage, leader)) in rows.into_iter().enumerate() {
        let files = if i == 2 {
            format!(
                "{} (bound: {} + {DEFAULT_MAX_CONNECTIONS} + {PROBE_RESERVE} = {bound})",
                usage.files, f.before.files
            )
        } else {
            usage.files.to_string()
        };
        let _ = writeln!(
            w,
            "| {when} | {} | {files} | {leader} |",
            mib(usage.rss_kib)
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "- Connections: {} made ({} failed) in {:.1} s, each kept open by the flood until the end of its hold.",
        n(f.opened),
        n(f.failed),
        f.opening.as_secs_f64()
    );
    if f.peak_opening.files > bound {
        let _ = writeln!(
            w,
            "- While the connections arrive, the open files pass the bound for moments ({} at the \
             peak): a connection the reserve sheds is closed by its own task a moment later, not \
             by the accept loop.",
            f.peak_opening.files
        );
    }
    let answered = f.answered();
    let times = Summary::of(&answered).map_or_else(String::new, |s| {
        format!("; p50 {}, max {}", ms(s.p50), ms(s.max))
    });
    let _ = writeln!(
        w,
        "- Probes: {} of {} answered `200`{times}{}.",
        answered.len(),
        f.probes.len(),
        others(f)
    );
    let refused: Vec<String> = REFUSED
        .iter()
        .zip(f.refused)
        .map(|(name, grown)| {
            let v = grown.map_or("–".to_owned(), |v| group_thousands(v as u64));
            format!("`{name}` {v}")
        })
        .collect();
    let lease = if f.kept_the_lease() {
        "no step-down, no transition".to_owned()
    } else {
        let t = |v: Option<View>| v.map_or("–".to_owned(), |v| v.transitions.to_string());
        format!(
            "**the lease did not stay with one term**: transitions {} before, {} after",
            t(f.view_before),
            t(f.view_after)
        )
    };
    let _ = writeln!(w, "- Refused: {}; {lease}.", refused.join(", "));
}

/// The leader cell: its role and token, compared with `before` when given.
fn leader(view: Option<View>, before: Option<View>) -> String {
    match view {
        None => "no answer (`/leader` shares the connections the flood takes)".to_owned(),
        Some(v) if !v.is_leader => "does not lead".to_owned(),
        Some(v) => {
            let token = v.token.map_or("–".to_owned(), |t| t.to_string());
            match before {
                Some(b) if b.token == v.token => "leads, same token".to_owned(),
                Some(_) => format!("leads, another token: {token}"),
                None => format!("leads, {token}"),
            }
        }
    }
}

/// The probes not answered `200`, by answer and path, as a clause (empty when there are none).
fn others(f: &Flood) -> String {
    let mut by_answer: Vec<(String, usize)> = Vec::new();
    for p in f.probes.iter().filter(|p| p.code != Some(200)) {
        let answer = match p.code {
            Some(code) => format!("`{code}` to `{}`", p.path),
            None => format!("no answer within 2 s to `{}`", p.path),
        };
        match by_answer.iter_mut().find(|(a, _)| *a == answer) {
            Some((_, count)) => *count += 1,
            None => by_answer.push((answer, 1)),
        }
    }
    if by_answer.is_empty() {
        return String::new();
    }
    let list: Vec<String> = by_answer
        .into_iter()
        .map(|(answer, count)| format!("{count} {answer}"))
        .collect();
    format!("; the others: {}", list.join(", "))
}

fn how(w: &mut String) {
    let quick = Plan::quick();
    let _ = writeln!(
        w,
        "How: `scripts/bench.sh` from the repository root regenerates this section with the rest \
         of the report (examples/bench/flood.rs); `--flood false` leaves it out, and `--quick` \
         floods with {} connections for {}. The harness raises its own open-files limit to its \
         hard limit when the connections need it (each is a file of the flooding process too), reads the \
         leader's `VmRSS` (/proc/PID/status) and open files (/proc/PID/fd) before, every {} while \
         the connections arrive and while they are held (the peaks) and once its open files are back within {BACK_MARGIN} of before (at \
         most {} after the clients closed), and the refused counters from `/metrics` before and \
         after.\n",
        group_thousands(quick.flood_connections as u64),
        human(quick.flood_hold),
        human(EVERY),
        human(BACK_WITHIN)
    );
}
