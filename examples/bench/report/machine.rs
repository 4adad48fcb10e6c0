//! The report's section on the machine: its cores, load, versions and timings.

use super::*;

pub(super) fn machine(w: &mut String, r: &Results, plan: &Plan) {
    let m = &r.machine;
    let v = &r.versions;
    let _ = writeln!(w, "## Machine and versions\n");
    let _ = writeln!(w, "| | |\n|---|---|");
    let _ = writeln!(w, "| CPU | {} × {} |", m.cores, m.cpu);
    let _ = writeln!(w, "| memory | {:.1} GiB |", m.memory_gib);
    let _ = writeln!(w, "| OS, kernel | {}, Linux {} |", m.os, m.kernel);
    let _ = writeln!(
        w,
        "| load average (1, 5, 15 min) | {} before, {} after |",
        m.load_before, m.load_after
    );
    let _ = writeln!(
        w,
        "| compilers running at the start | {} |",
        if m.busy_before.is_empty() {
            "none".to_owned()
        } else {
            m.busy_before.join(", ")
        }
    );
    let _ = writeln!(
        w,
        "| CPU over the run, share of all {} cores | {:.1} % this benchmark (its own processes, redis-servers and replicas), {:.1} % every other process |",
        m.cores,
        m.cpu_share_self * 100.0,
        m.cpu_share_others * 100.0
    );
    let _ = writeln!(
        w,
        "| leasehold | {} (`{}`), release build |",
        v.leasehold, v.commit
    );
    let _ = writeln!(w, "| Rust | {} |", v.rustc);
    let _ = writeln!(w, "| Redis | {} |", v.redis_server);
    let _ = writeln!(w, "| redis-benchmark | {} |", v.redis_benchmark);
    for (name, version) in &v.crates {
        let _ = writeln!(w, "| crate `{name}` | {version} |");
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "The machine is shared (other engineers build and test here); the load average and the CPU \
         that other processes used during the run say how quiet it was. Handoff, failover and pause run with {} (the defaults scaled down five times, so a \
         failover sample costs seconds); the polling baseline's waits scale with the retry period \
         (five times longer at the default 2 s), leasehold's handoff and its failover past expiry do \
         not depend on the timing. Load and footprint run with the defaults: {}.\n",
        timing_words(&plan.timing),
        timing_words(&plan.load_timing)
    );
}
