//! The report's latency sections: graceful handoff, crash failover, pause step-down.

use super::*;

pub(super) fn handoff_section(w: &mut String, r: &Results, plan: &Plan, svg: &str) {
    let _ = writeln!(w, "## 1. Graceful handoff\n");
    let _ = writeln!(
        w,
        "![Cumulative distributions of graceful handoff and crash failover latency, leasehold and the polling baseline]({svg})\n"
    );
    let _ = writeln!(
        w,
        "| measurement | n | min | p50 | p99 | max | above 50 ms |\n|---|---|---|---|---|---|---|"
    );
    let e2e: Vec<Duration> = r.handoff_processes.iter().map(|s| s.from_sigterm).collect();
    let e2e_step_down: Vec<Duration> = r
        .handoff_processes
        .iter()
        .map(|s| s.from_step_down)
        .collect();
    let exec: Vec<Duration> = r.handoff_exec.iter().map(|s| s.from_sigterm).collect();
    let exec_step_down: Vec<Duration> = r.handoff_exec.iter().map(|s| s.from_step_down).collect();
    let rows: [(&str, Vec<Duration>); 8] = [
        (
            "leasehold, in-process: release → successor's `Leadership`",
            r.handoff(LEASEHOLD),
        ),
        (
            "polling baseline, in-process: release → successor's `Leadership`",
            r.handoff(POLLING),
        ),
        (
            "leasehold, in-process: shutdown requested → successor's `Leadership`",
            r.handoff_from_shutdown(LEASEHOLD),
        ),
        (
            "polling baseline, in-process: shutdown requested → successor's `Leadership`",
            r.handoff_from_shutdown(POLLING),
        ),
        (
            "`leasehold run` processes: SIGTERM to the leader → successor logs `became leader`",
            e2e,
        ),
        (
            "`leasehold run` processes: old leader logs `stepped down` (it releases next) → successor logs `became leader`",
            e2e_step_down,
        ),
        (
            "`leasehold run -- sh -c 'sleep 1000 & wait'` (exec mode): SIGTERM to the leader → successor logs `became leader`",
            exec,
        ),
        (
            "exec mode: old leader logs `stepped down` (it stops the command's tree, then releases) → successor logs `became leader`",
            exec_step_down,
        ),
    ];
    for (what, samples) in &rows {
        let _ = writeln!(
            w,
            "| {what} | {} | {} |",
            cells(Summary::of(samples)),
            count_above(samples, FIFTY_MS)
        );
    }
    let hl = Summary::of(&r.handoff(LEASEHOLD));
    let hp = Summary::of(&r.handoff(POLLING));
    if let (Some(l), Some(k)) = (hl, hp) {
        let _ = writeln!(
            w,
            "\nPolling baseline ÷ leasehold: {} at p50, {} at p99.\n",
            ratio_d(k.p50, l.p50),
            ratio_d(k.p99, l.p99)
        );
    }
    let _ = writeln!(
        w,
        "How: {} handoffs in one lease with {} followers standing by, one after another; each round a \
         new follower joins, the harness waits until every follower follows the leader (with its \
         release channel subscribed), then shuts the leader down. The old leader's work notes the \
         boot-clock instant its term ended (its elector sends the release right after), the \
         successor's work notes the instant it is handed its `Leadership`; \"shutdown requested\" \
         starts at the cancellation of the old elector instead. The polling baseline \
         (`FollowerStrategy::Polling`: retry period with jitter 1.2, no release channel, no TTL \
         wake-up) ran {} groups of {} rounds side by side, each shutdown at a random point of the \
         followers' polling cycle. End to end, {} rounds of `leasehold run` processes \
         (`--kubernetes off`, no command): a new replica joins, follows and subscribes, then the \
         leader gets SIGTERM; the instants are the wall-clock time the harness sent the signal and the \
         timestamps of the replicas' JSON log events. Exec mode: {} more such rounds, every replica \
         running a shell that starts a worker while it leads, so that the old leader stops both \
         (SIGTERM to the group and each process, every one seen dead) before it releases.\n",
        r.handoff_notified.len(),
        plan.handoff_followers,
        plan.polling_groups,
        plan.polling_rounds,
        r.handoff_processes.len(),
        r.handoff_exec.len()
    );
}

pub(super) fn failover_section(w: &mut String, r: &Results, plan: &Plan) {
    let _ = writeln!(w, "## 2. Crash failover\n");
    let _ = writeln!(
        w,
        "| measurement | n | min | p50 | p99 | max |\n|---|---|---|---|---|---|"
    );
    for (what, strategy, after_kill) in [
        (
            "leasehold: lease expiry → successor's `Leadership`",
            LEASEHOLD,
            false,
        ),
        (
            "polling baseline: lease expiry → successor's `Leadership`",
            POLLING,
            false,
        ),
        (
            "leasehold: SIGKILL → successor's `Leadership`",
            LEASEHOLD,
            true,
        ),
        (
            "polling baseline: SIGKILL → successor's `Leadership`",
            POLLING,
            true,
        ),
    ] {
        let _ = writeln!(
            w,
            "| {what} | {} |",
            cells(Summary::of(&r.failover(strategy, after_kill)))
        );
    }
    let fl = Summary::of(&r.failover(LEASEHOLD, false));
    let fp = Summary::of(&r.failover(POLLING, false));
    if let (Some(l), Some(k)) = (fl, fp) {
        let _ = writeln!(
            w,
            "\nPolling baseline ÷ leasehold, past expiry: {} at p50, {} at p99. From SIGKILL both wait \
             for the TTL ({}), which dominates.\n",
            ratio_d(k.p50, l.p50),
            ratio_d(k.p99, l.p99),
            human(plan.timing.lease_duration)
        );
    }
    let _ = writeln!(
        w,
        "How: {} waves; in each, {} `leasehold run` leader processes on leases of their own, each \
         watched by one in-process follower (half leasehold's, half the polling baseline). Once every \
         follower follows, all leaders are SIGKILLed one after the other. Right after each kill the \
         harness reads the lease's `PTTL`; the key expires `PTTL` ms after Redis answered, and the \
         harness takes the instant just *before* it sent the `PTTL` as the expiry, the earliest it \
         can be: the figure errs against leasehold by up to a round trip plus Redis's millisecond \
         rounding. The successor's instant is when its work is handed its `Leadership`; both are on \
         the boot clock. leasehold's follower sleeps until the TTL it last saw runs out, plus 1 ms, \
         on tokio timers of 1 ms granularity, then acquires: a few milliseconds past the expiry as \
         measured here.\n",
        plan.crash_waves,
        plan.crash_per_strategy * 2
    );
}

pub(super) fn pause_section(w: &mut String, r: &Results, plan: &Plan) {
    let _ = writeln!(w, "## 3. Pause step-down\n");
    if r.pause.is_empty() {
        let _ = writeln!(w, "No samples.\n");
        return;
    }
    let frozen = Summary::of(&r.pause.iter().map(|s| s.frozen).collect::<Vec<_>>());
    let to_step = Summary::of(
        &r.pause
            .iter()
            .map(|s| s.resume_to_step_down)
            .collect::<Vec<_>>(),
    );
    let refusals: Vec<Duration> = r.pause.iter().filter_map(|s| s.resume_to_refusal).collect();
    let _ = writeln!(
        w,
        "| measurement | n | min | p50 | p99 | max |\n|---|---|---|---|---|---|"
    );
    let _ = writeln!(w, "| frozen for (SIGSTOP → SIGCONT) | {} |", cells(frozen));
    let _ = writeln!(
        w,
        "| SIGCONT → step-down (the term ends: guard revoked, work cancelled) | {} |",
        cells(to_step)
    );
    let _ = writeln!(
        w,
        "| SIGCONT → first refusal of `check()`, when the work asked before the watchdog stepped down | {} |",
        cells(Summary::of(&refusals))
    );
    let _ = writeln!(
        w,
        "| exec mode (`leasehold run -- sh -c 'sleep 1000 & wait'`): SIGCONT to leasehold → every process of its command gone | {} |",
        cells(Summary::of(
            &r.exec_pause
                .iter()
                .map(|s| s.resume_to_gone)
                .collect::<Vec<_>>()
        ))
    );
    let actions: u64 = r.pause.iter().map(|s| s.actions).sum();
    let late: u64 = r.pause.iter().map(|s| s.late_actions).sum();
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for s in &r.pause {
        match reasons.iter_mut().find(|(r, _)| *r == s.reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((s.reason.clone(), 1)),
        }
    }
    let reasons: Vec<String> = reasons
        .iter()
        .map(|(r, n)| format!("`{r}` × {n}"))
        .collect();
    let _ = writeln!(
        w,
        "\nActions through the guard: {} in all, **{late} at or after the validity deadline**. \
         Step-down reasons: {}.\n",
        count(actions as f64),
        reasons.join(", ")
    );
    let _ = writeln!(
        w,
        "How: {} waves of {} leader processes (this harness in its `pause-child` mode: an elector whose \
         work acts every millisecond, each action right after `Leadership::check()` said yes, and \
         notes whether the action's instant was at or past the deadline), each on its own lease with \
         an in-process follower, which takes the lease over while the leader is frozen. All are \
         SIGSTOPped together for the lease duration plus {}, then resumed {} apart. The child prints \
         the boot-clock instant its term ended; the harness compares it with the instant it sent \
         SIGCONT (one boot clock for the whole machine). Exec mode: as many waves of `leasehold run` \
         leaders on leases of their own, each running a shell that starts a worker; only leasehold \
         is frozen (its command runs on, as under a real freeze), and a pidfd of each process of the \
         command says when it has exited (no polling).\n",
        plan.pause_waves,
        plan.pause_per_wave,
        human(plan.pause_extra),
        human(plan.pause_stagger)
    );
}
