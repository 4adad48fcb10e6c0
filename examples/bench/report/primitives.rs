//! The report's sections on the primitives: leasehold's calls beside rslock's, the physical floor, and the limits of the run.

use super::*;

pub(super) fn primitives_section(w: &mut String, r: &Results, plan: &Plan) {
    let _ = writeln!(w, "## 6. Primitive cost\n");
    let _ = writeln!(
        w,
        "| implementation | clients | operation | n | min | p50 | p99 | max | cycles/s, all clients |\n|---|---|---|---|---|---|---|---|---|"
    );
    for run in &r.primitives {
        for (i, (ours, theirs)) in OPS.iter().enumerate() {
            let op = if run.implementation.starts_with("leasehold") {
                ours
            } else {
                theirs
            };
            let _ = writeln!(
                w,
                "| {} | {} | `{op}` | {} | {} |",
                run.implementation,
                run.clients,
                cells(run.ops[i]),
                count(run.cycles_per_s)
            );
        }
    }
    let _ = writeln!(
        w,
        "\n| comparison | clients | rslock ÷ leasehold, p50 | rslock ÷ leasehold, p99 |\n|---|---|---|---|"
    );
    let mut clients: Vec<usize> = r
        .primitives
        .iter()
        .filter(|p| p.implementation == "leasehold")
        .map(|p| p.clients)
        .collect();
    clients.dedup();
    for c in &clients {
        let (Some(l), Some(k)) = (r.primitive("leasehold", *c), r.primitive("rslock", *c)) else {
            continue;
        };
        for (i, (ours, theirs)) in OPS.iter().enumerate() {
            let _ = writeln!(
                w,
                "| `{theirs}` vs `{ours}` | {c} | {} | {} |",
                opt_ratio(k.ops[i].map(|x| x.p50), l.ops[i].map(|x| x.p50)),
                opt_ratio(k.ops[i].map(|x| x.p99), l.ops[i].map(|x| x.p99))
            );
        }
        let _ = writeln!(
            w,
            "| cycles per second | {c} | {} (throughput; above 1 means rslock is faster) | |",
            ratio(k.cycles_per_s, l.cycles_per_s)
        );
    }
    if let (Some(d), Some(t)) = (
        r.primitive(SENTINEL_DIRECT, 1),
        r.primitive(SENTINEL_THROUGH, 1),
    ) {
        let _ = writeln!(
            w,
            "\n| the Sentinel majority's cost, 1 client | through 3 Sentinels ÷ directly, p50 | p99 |\n|---|---|---|"
        );
        for (i, (ours, _)) in OPS.iter().enumerate() {
            let _ = writeln!(
                w,
                "| `{ours}` | {} | {} |",
                opt_ratio(t.ops[i].map(|x| x.p50), d.ops[i].map(|x| x.p50)),
                opt_ratio(t.ops[i].map(|x| x.p99), d.ops[i].map(|x| x.p99))
            );
        }
    }
    let _ = writeln!(
        w,
        "\nHow: each client has its own connection and its own key and runs whole cycles (take, extend, \
         give back), so every call succeeds; 50 warm-up cycles per client and round are not counted. \
         One client runs a fixed number of cycles, many clients run for a fixed time, split into {} \
         rounds that alternate which implementation goes first, so that the drift of a shared \
         machine hits both alike. rslock runs one `LockManager` per client on the same \
         redis-server, with retries off. What each call does: \
         leasehold's acquire is one `EVALSHA` of a script that checks the data-loss marker, sets the \
         lease with `SET NX PX` and advances the fencing counter (floored at Redis's `TIME`); renew is \
         compare-and-`PEXPIRE`; release is compare-and-`DEL` plus a `PUBLISH` on the release channel. \
         rslock's lock is a bare `SET NX PX`, extend a compare-and-`SET PX` script, unlock a \
         compare-and-`DEL` script, each behind a `tokio::sync::Mutex` of its lock manager. \
         The Sentinel rows run one client against a master with one replica, all local: \
         directly on the URL of a master no Sentinel watches (one that Sentinels watch refuses a \
         term asked by its own address), and through the `redis+sentinel://` URL of three \
         Sentinels watching another, where \
         every acquire and renewal also asks all three Sentinels for the master, beside the \
         script, and needs a majority naming the node it ran on (release asks none); the two \
         alternate in the same rounds.\n",
        plan.prim_rounds
    );
}

pub(super) fn physical_section(w: &mut String, r: &Results) {
    let ph = &r.physical;
    let _ = writeln!(w, "## The physical limit of this machine\n");
    let _ = writeln!(
        w,
        "| measurement | clients | n | min | p50 | p99 | max | requests/s |\n|---|---|---|---|---|---|---|---|"
    );
    let _ = writeln!(
        w,
        "| loopback TCP round trip (1 byte, echo thread) | 1 | {} | – |",
        cells(ph.tcp_echo)
    );
    let _ = writeln!(
        w,
        "| Redis `PING` through redis-rs (leasehold's client) | 1 | {} | – |",
        cells(ph.redis_ping)
    );
    for b in &ph.benchmark {
        let _ = writeln!(
            w,
            "| redis-benchmark `{}` | {} | {} | {} | {} | {} | {} | {} |",
            b.what,
            b.clients,
            b.requests,
            ms(b.min),
            ms(b.p50),
            ms(b.p99),
            ms(b.max),
            count(b.rps)
        );
    }
    let bench_p50 = |what: &str, clients: usize| {
        ph.benchmark
            .iter()
            .find(|b| b.what.starts_with(what) && b.clients == clients)
            .map(|b| b.p50)
    };
    let one = r.primitive("leasehold", 1);
    let acquire = one.and_then(|p| p.ops[0]).map(|x| x.p50);
    let renew = one.and_then(|p| p.ops[1]).map(|x| x.p50);
    let handoff = Summary::of(&r.handoff(LEASEHOLD)).map(|x| x.p50);
    let ping = ph.redis_ping.map(|x| x.p50);
    let _ = writeln!(
        w,
        "\nleasehold ÷ the limit, p50 with one client: `acquire` ÷ redis-benchmark `SET NX PX` {}, \
         `renew` ÷ redis-benchmark `EVALSHA` {}, `acquire` ÷ redis-rs `PING` {}; the in-process \
         graceful handoff (release → `Leadership`) is {} redis-rs `PING` round trips.\n",
        opt_ratio(acquire, bench_p50("SET", 1)),
        opt_ratio(renew, bench_p50("EVALSHA", 1)),
        opt_ratio(acquire, ping),
        opt_ratio(handoff, ping),
    );
    let _ = writeln!(
        w,
        "redis-benchmark reports latencies with a resolution of about 8 µs (its histogram) and runs \
         without a client library; redis-rs adds its own cost to every round trip, which is why the \
         `PING` line is the fairer floor for leasehold. The `EVALSHA` script compares the value of a \
         held key and `PEXPIRE`s it, like a renewal. One-client round trips on this virtual machine \
         move a lot between runs (the bare TCP echo's p50 was anywhere from 16 µs to 66 µs in \
         trial runs, lower when the machine was busy, which fits idle virtual CPUs that are slow to \
         wake); compare them only within one run.\n"
    );
}

pub(super) fn limits_section(w: &mut String, r: &Results, plan: &Plan) {
    let _ = writeln!(w, "## What was not measured, and caveats\n");
    let _ = writeln!(
        w,
        "- **Container image**: only its final stage is built here (no base image can be pulled); \
         the build stage on `rust:1.95-bookworm` is replayed, and its static binary built on this \
         machine, which runs the same Debian release.\n\
         - **Kubernetes**: no API server can run here, so every replica ran with `--kubernetes off`; \
         the leader label, the Lease mirror and the Events are not in these figures (they run beside \
         the term and never delay the release).\n\
         - **Networks**: everything ran on loopback. On a real network each step of a handoff (the \
         release, the notification, the acquire) costs a network round trip instead of a loopback \
         one; a crash failover still waits for the TTL, and the polling baseline for its next poll.\n\
         - **Shared runtime**: in-process electors share the harness's tokio runtime ({} cores); the \
         process-level rows (`leasehold run`, SIGKILL, SIGSTOP) do not.\n\
         - **Samples**: p99 of fewer than 100 samples is the maximum; the crash-failover and pause \
         rows have {} and {} samples.\n\
         - **Polling at the default timing**: not run (each sample would take up to {}); it scales with \
         the retry period.",
        r.machine.cores,
        r.failover.len() / 2,
        r.pause.len(),
        human(plan.load_timing.retry_period.mul_f64(2.2))
    );
    let _ = writeln!(w);
}
