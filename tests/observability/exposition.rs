//! `/metrics` as its two kinds of reader read it, from a real leader on a real redis-server:
//! the Prometheus text format 0.0.4 for a request that does not ask for OpenMetrics (`curl`,
//! `promtool check metrics`), and OpenMetrics for one that does (Prometheus's scrape), each
//! checked by the real promtool's parser for that format; and the `process_*` metrics against
//! the kernel's own figures for the replica's process.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use testbed::http::{Answer, get_with};
use testbed::prometheus::run_promtool;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// What Prometheus 2 sends when it scrapes.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A leader that has renewed and seen a Redis error, so that counters, the histogram and
/// labelled families all hold series.
fn a_leader(redis: &RedisServer) -> Replica {
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    let replica = Replica::spawn(
        &redis.url(),
        &unique_lease("exposition"),
        "web-a",
        &args,
        &[],
    );
    wait_for("a renewal", Duration::from_secs(10), || {
        replica
            .metric("leasehold_renewals_total{result=\"renewed\"}")
            .filter(|n| *n >= 1.0)
    });
    replica
}

fn metrics(replica: &Replica, headers: &[(&str, &str)]) -> Answer {
    let answer = get_with(replica.http, "/metrics", headers).expect("/metrics answers");
    assert_eq!(answer.code, 200, "{answer:?}");
    answer
}

#[test]
fn the_text_format_is_served_unless_openmetrics_is_asked_for_and_promtool_accepts_it() {
    let redis = RedisServer::start();
    let leader = a_leader(&redis);
    for headers in [
        &[][..],
        &[("Accept", "text/plain")][..],
        &[("Accept", "*/*")][..],
    ] {
        let answer = metrics(&leader, headers);
        assert_eq!(
            answer.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8"),
            "{headers:?}"
        );
        for line in [
            "# HELP leasehold_transitions_total ",
            "# TYPE leasehold_transitions_total counter",
            "leasehold_transitions_total{to=\"leader\"} 1",
            "# TYPE leasehold_renewal_duration_seconds histogram",
        ] {
            assert!(
                answer.body.contains(line),
                "{headers:?}: no {line:?} in\n{}",
                answer.body
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let (code, out) = run_promtool(dir.path(), &["check", "metrics"], Some(&answer.body));
        assert_eq!(
            code, 0,
            "{headers:?}: promtool check metrics:\n{out}\non:\n{}",
            answer.body
        );
    }
}

#[test]
fn openmetrics_is_served_to_prometheus_and_promtool_parses_it_as_openmetrics() {
    let redis = RedisServer::start();
    let leader = a_leader(&redis);
    let answer = metrics(&leader, &[("Accept", PROMETHEUS_ACCEPT)]);
    assert_eq!(
        answer.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(answer.body.ends_with("# EOF\n"), "{}", answer.body);
    assert!(
        answer.body.contains("# TYPE leasehold_transitions counter"),
        "{}",
        answer.body
    );
    // promtool's OpenMetrics parser is the one behind `tsdb create-blocks-from openmetrics`,
    // which wants a timestamp on every sample (a backfill has no scrape time): the body gets
    // one, and nothing else is changed.
    let stamped: String = answer
        .body
        .lines()
        .map(|line| match line.starts_with('#') {
            true => format!("{line}\n"),
            false => format!("{line} 1700000000\n"),
        })
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("metrics.om"), &stamped).expect("write the exposition");
    let (code, out) = run_promtool(
        dir.path(),
        &[
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "metrics.om",
            "blocks",
        ],
        None,
    );
    assert_eq!(
        code, 0,
        "promtool's OpenMetrics parser:\n{out}\non:\n{stamped}"
    );
}

/// A value of `/proc/<pid>/<file>`'s row that starts with `row` (its first number).
fn proc_row(pid: i32, file: &str, row: &str) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).expect("read /proc");
    let line = text
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no {row} in /proc/{pid}/{file}"));
    line[row.len()..]
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

#[test]
fn the_process_metrics_describe_the_replicas_own_process() {
    let redis = RedisServer::start();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs_f64();
    let leader = a_leader(&redis);
    let pid = leader.pid().as_raw();
    let metric = |name: &str| {
        leader
            .metric(name)
            .unwrap_or_else(|| panic!("no {name} on /metrics"))
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs_f64();
    // /proc/stat's boot time has whole seconds, the start ticks hundredths.
    let started = metric("process_start_time_seconds");
    assert!(
        before - 2.0 <= started && started <= now + 1.0,
        "started at {started}, the test spawned it between {before} and {now}"
    );
    let cpu = metric("process_cpu_seconds_total");
    assert!(cpu > 0.0 && cpu < (now - before) * 4.0, "cpu {cpu} s");
    // The kernel's own figures for the same process, read beside the scrape.
    let rss = metric("process_resident_memory_bytes");
    let vm_rss = proc_row(pid, "status", "VmRSS:") * 1024.0;
    assert!(
        (rss - vm_rss).abs() < vm_rss / 2.0,
        "resident {rss} bytes, VmRSS {vm_rss}"
    );
    assert!(metric("process_virtual_memory_bytes") > rss);
    let limit = proc_row(pid, "limits", "Max open files");
    assert_eq!(metric("process_max_fds"), limit);
    let open = metric("process_open_fds");
    let fds = testbed::process_tree::open_files(pid).expect("read its fds") as f64;
    assert!(
        open >= 3.0 && (open - fds).abs() <= 4.0,
        "{open} open fds, /proc lists {fds}"
    );
}
