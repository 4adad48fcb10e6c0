//! The peers' section of the report: one table, a row per kind, and how it was measured.

use std::fmt::Write;
use std::time::Duration;

use super::install::{NODE, PYTHON};
use super::{Outcome, Peers, Run};
use crate::Plan;
use crate::stats::{Summary, count, ms};

fn pair(samples: &[Duration]) -> String {
    match Summary::of(samples) {
        Some(s) => format!("{} / {}", ms(s.p50), ms(s.p99)),
        None => "–".to_owned(),
    }
}

fn row(w: &mut String, run: &Run, observe: Duration) {
    let sigterm: Vec<Duration> = run.handoffs.iter().map(|h| h.from_sigterm).collect();
    let release: Vec<Duration> = run.handoffs.iter().map(|h| h.from_release).collect();
    let stale: u64 = run.pauses.iter().map(|p| p.stale_writes).sum();
    let with_stale = run.pauses.iter().filter(|p| p.stale_writes > 0).count();
    let kept: Vec<Duration> = run.pauses.iter().map(|p| p.kept_writing).collect();
    let still = run.pauses.iter().filter(|p| p.still_writing).count();
    let kept = match Summary::of(&kept) {
        Some(_) if still > 0 => format!(
            "still writing {} after the resume in {still} of {}",
            crate::stats::human(observe),
            run.pauses.len()
        ),
        Some(s) => format!("{} / {}", ms(s.p50), ms(s.max)),
        None => "–".to_owned(),
    };
    let idle = run.idle.as_ref().map_or("–".to_owned(), |i| {
        format!(
            "{} ({} inside scripts)",
            count(i.sent_per_s()),
            count(i.inside_per_s())
        )
    });
    let _ = writeln!(
        w,
        "| {} | {} | {} | {} | {stale} in {with_stale} of {} | {kept} | {idle} |",
        run.kind.label(),
        pair(&sigterm),
        pair(&release),
        pair(&run.failovers),
        run.pauses.len(),
    );
}

/// `## 7. Peers`: the table, or why there is none.
pub fn section(w: &mut String, outcome: &Outcome, plan: &Plan) {
    let _ = writeln!(w, "## 7. Peers: the locks users would pick instead\n");
    let p: &Peers = match outcome {
        Outcome::NotRun => {
            let _ = writeln!(
                w,
                "Not measured in this run ({}; `--peers` measures them).\n",
                if plan.quick {
                    "a quick run"
                } else {
                    "`--peers false`"
                }
            );
            return;
        }
        Outcome::Unavailable(why) => {
            let _ = writeln!(
                w,
                "Not measured: the peers' packages could not be installed ({why}).\n"
            );
            return;
        }
        Outcome::Failed(why) => {
            let _ = writeln!(w, "Not measured: the peers' rounds failed ({why}).\n");
            return;
        }
        Outcome::Measured(p) => p,
    };
    let _ = writeln!(
        w,
        "| contender | graceful handoff: SIGTERM → successor acquired, p50 / p99 | release → successor acquired, p50 / p99 | crash failover: key's expiry → successor acquired, p50 / p99 | paused 2 × TTL: stale writes after the successor's first (in pauses) | resumed holder's last write after SIGCONT, p50 / max | idle round trips per second, 1 holder + 2 waiters |\n|---|---|---|---|---|---|---|"
    );
    for run in &p.runs {
        row(w, run, p.observe);
    }
    let py: Vec<String> = PYTHON.iter().map(|(n, v)| format!("`{n}=={v}`")).collect();
    let js: Vec<String> = NODE.iter().map(|(n, v)| format!("`{n}@{v}`")).collect();
    let n = |f: fn(&Run) -> usize| p.runs.first().map_or(0, f);
    let _ = writeln!(
        w,
        "\nTTL {} for every kind (leasehold: lease duration {}, renew deadline two thirds of it, \
         retry period two fifteenths, the defaults' proportions). {} handoffs, {} crashes and {} \
         pauses per kind, on one shared redis-server, each round taking every kind in turn (a \
         different one first each round); the idle figures come from a redis-server per kind, \
         watched for {:.0} s by `MONITOR` (which tells a client's commands from those a script runs \
         inside Redis). The harness installs the packages itself, pinned, into a scratch folder: {} \
         ({}) and {} ({}).\n",
        crate::stats::human(p.ttl),
        crate::stats::human(p.ttl),
        n(|r| r.handoffs.len()),
        n(|r| r.failovers.len()),
        n(|r| r.pauses.len()),
        p.runs
            .iter()
            .find_map(|r| r.idle.as_ref())
            .map_or(0.0, |i| i.window.as_secs_f64()),
        py.join(", "),
        p.installed.python,
        js.join(", "),
        p.installed.node,
    );
    let _ = writeln!(
        w,
        "Each contender is a process of its own (examples/bench/peers/), written as the library's \
         users write it: block until the lock is ours, then work, appending a line with its \
         identity to a shared file every millisecond (the file's order is the order the writes \
         arrived in), until SIGTERM, then release. redis-py's `Lock` and pottery's `Redlock` are \
         kept by a watchdog thread that extends them every third of the TTL and stops the work when \
         an extension fails; python-redis-lock's own `auto_renewal` thread has no way to tell the \
         work that the lock is gone; node-redlock's `using()` extends by itself and aborts the \
         routine's signal when an extension fails; leasehold's work asks `Leadership::check()` \
         before each write, and in exec mode the command is the work (the table's figure is its \
         first write). Instants are the wall clock of this machine, read by each contender. A crash \
         is SIGKILL (in exec mode to leasehold and its command), measured from the key's expiry (a \
         `PTTL` right after the kill). A pause is SIGSTOP for twice the TTL (in exec mode leasehold \
         and its command, and the command resumed first, which errs against leasehold); a stale \
         write is one of the paused holder's lines that reached the file after the successor's \
         first, with no fencing token to turn it away.\n"
    );
}
