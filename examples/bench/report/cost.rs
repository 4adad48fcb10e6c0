//! The report's cost sections: Redis load by follower strategy, and the replicas' footprint.

use super::*;

pub(super) fn load_section(w: &mut String, r: &Results, plan: &Plan) {
    let lt = plan.load_timing;
    let _ = writeln!(w, "## 4. Redis load\n");
    let _ = writeln!(
        w,
        "| followers | contenders | window | commands/s, all | leader: commands/s | leader: per retry period | one idle follower: commands/s | one idle follower: per lease duration | Redis CPU |\n|---|---|---|---|---|---|---|---|---|"
    );
    for row in &r.load {
        let name = strategy_name(row.config.strategy);
        let per_s = row.per_follower_per_s();
        let _ = writeln!(
            w,
            "| {name} | {} | {:.1} s | {} | {} | {} | {} | {} | {:.2} % |",
            row.config.contenders,
            row.window.as_secs_f64(),
            count(row.total_per_s()),
            count(row.leader_per_s()),
            count(row.leader_per_s() * lt.retry_period.as_secs_f64()),
            per_s.map_or("–".into(), |v| format!("{v:.4}")),
            per_s.map_or("–".into(), |v| count(v * lt.lease_duration.as_secs_f64())),
            row.redis_cpu.as_secs_f64() / row.window.as_secs_f64() * 100.0
        );
    }
    let mut ratios = Vec::new();
    for &n in &plan.load_sizes {
        if let (Some(l), Some(k)) = (r.load_row(LEASEHOLD, n), r.load_row(POLLING, n))
            && let (Some(a), Some(b)) = (k.per_follower_per_s(), l.per_follower_per_s())
        {
            ratios.push(format!("{} with {n} contenders", ratio(a, b)));
        }
    }
    if !ratios.is_empty() {
        let _ = writeln!(
            w,
            "\nPolling baseline ÷ leasehold, commands of one idle follower: {}.\n",
            ratios.join(", ")
        );
    }
    let _ = writeln!(
        w,
        "| followers | contenders | commands sent during one graceful handoff | beyond the idle rate | shutdown → successor's `Leadership` |\n|---|---|---|---|---|"
    );
    for row in &r.load {
        if let Some(t) = &row.transition {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {:.0} | {} |",
                strategy_name(row.config.strategy),
                row.config.contenders,
                t.raw,
                t.excess,
                ms(t.handoff)
            );
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for row in &r.load {
        for cmd in row.sent.keys() {
            if !seen.contains(cmd) {
                seen.push(cmd.clone());
            }
        }
    }
    let _ = writeln!(
        w,
        "\nCommands the clients sent during the idle windows: {}.\n",
        seen.iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        w,
        "How: each configuration (follower strategy × contenders) ran on a dedicated redis-server, all \
         at once, as in-process electors of one lease, each with its own connection (leasehold's \
         followers also with their pub/sub connection). The leader was elected first; the followers \
         joined spread over one lease duration, as in a deployment that has run for a while. The \
         window is the delta of `INFO commandstats` between two snapshots (the first snapshot's own \
         `INFO` is taken off). Commands that the lease scripts run inside Redis (`GET`, `SET`, \
         `PEXPIRE`, `PTTL`, …) are counted there too but were never sent, so they are left out; the \
         leader's renewals are told from the followers' tries by the `PEXPIRE` that only a renewal \
         runs. `INFO commandstats` counts the acquire script's own `INFO server` and `INFO \
         replication`, and the renewal's `INFO replication`, as `info`, like the clients' `INFO \
         memory`; two per try and one per renewal are taken as the scripts' (no other script an \
         idle elector runs calls `INFO`), the rest as sent. A \
         follower's figure is (all sent − the leader's renewals) ÷ followers, everything else \
         counted, the leader's rare `INFO memory` too (it cannot be told apart, so the figure errs \
         high). Redis CPU is `used_cpu_user + \
         used_cpu_sys` over the window. The handoff is a shutdown of the leader, counted until {} \
         after the successor led; \"beyond the idle rate\" subtracts what the idle window's rate \
         predicts for that interval.\n",
        human(plan.transition_settle)
    );
    let _ = writeln!(
        w,
        "A graceful handoff wakes every leasehold follower at once: each tries the acquire once, \
         about one command per follower in a burst, and the winner's reply is handled among hundreds \
         of others (here all contenders share the harness's two cores; in a deployment each is its \
         own pod). The polling baseline's followers are not woken: a handoff costs it almost nothing \
         beyond its steady polling, and with hundreds of followers one of them happens to poll soon \
         after any release, which is what the steady cost above buys.\n"
    );
}

pub(super) fn strategy_name(s: FollowerStrategy) -> &'static str {
    match s {
        FollowerStrategy::Notified => "leasehold",
        FollowerStrategy::Polling => "polling baseline",
    }
}

pub(super) fn footprint_section(w: &mut String, r: &Results, plan: &Plan) {
    let _ = writeln!(w, "## 5. Footprint\n");
    let _ = writeln!(
        w,
        "| replica | RSS at the end | peak RSS | threads | CPU over the window | share of one core |\n|---|---|---|---|---|---|"
    );
    for f in &r.footprint {
        let _ = writeln!(
            w,
            "| `leasehold run`, {} | {} | {} | {} | {} ({} by utime + stime) | {:.3} % |",
            f.role,
            mib(f.end.rss_kib),
            mib(f.end.hwm_kib),
            f.end.threads,
            ms(f.cpu_used()),
            ms(f.cpu_used_ticks()),
            f.cpu_share() * 100.0
        );
    }
    if let Some(b) = r.binary {
        let stripped = b.stripped.map_or_else(
            || "`strip` not available".to_owned(),
            |s| format!("{:.1} MiB stripped", s as f64 / 1048576.0),
        );
        let _ = writeln!(
            w,
            "\nBinary `target/release/leasehold`: {:.1} MiB ({stripped}).\n",
            b.bytes as f64 / 1048576.0
        );
    }
    let _ = match &r.image {
        Ok(image) => writeln!(
            w,
            "Image (the Dockerfile's final stage, `FROM scratch`, built by buildah from the static \
             binary, its CA certificates and its user, as tests/ship/image.rs builds and runs it; \
             `podman image inspect`): {:.1} MiB, of which the static binary {:.1} MiB.\n",
            image.bytes as f64 / 1048576.0,
            image.binary_bytes as f64 / 1048576.0
        ),
        Err(why) => writeln!(w, "No image size: {why}.\n"),
    };
    let _ = writeln!(
        w,
        "How: two replicas (a leader and a follower, `--kubernetes off`, HTTP and metrics on, `/metrics` \
         and `/readyz` fetched every {} as a scraper would) on their own redis-server, measured over \
         the same window as the load benchmark, with the default timing. RSS, peak RSS and threads \
         from `/proc/PID/status`; CPU from the `schedstat` of every thread (nanoseconds), with \
         `utime + stime` from `/proc/PID/stat` as a cross-check in 10 ms ticks.\n",
        human(plan.scrape_every)
    );
}
