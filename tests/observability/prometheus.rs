//! End to end against the real thing: a real `prometheus` on a free loopback port scrapes three
//! real `leasehold run` replicas every 500 ms, with the chart's rules rendered by the real helm
//! for the same short timing (TTL 1 s, renew deadline 600 ms, retry period 200 ms) loaded and
//! evaluated every 500 ms. The test kills the leader, pauses the next one past its lease, stops
//! Redis, and reads each alert's state through Prometheus's HTTP API; then it runs every PromQL
//! expression of the chart's dashboard and requires each to return data. It prints, for each
//! alert, its expression and when it was first seen pending and firing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use harness::prometheus::{
    FAST_TIMING_VALUES, FLAPPING_AT_ONCE, alerts, dashboard_path, dashboard_queries, rule_spec,
    rule_values,
};
use harness::replica::Replica;
use testbed::prometheus::Prometheus;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// The lease the chart names after release `lh`'s Deployment in namespace `shop`.
const LEASE: &str = "shop/lh-leasehold";
/// The job the chart's ServiceMonitor gives the series, which the rules select by default.
const JOB: &str = "lh-leasehold-metrics";
const TIMING: [&str; 6] = [
    "--lease-duration",
    "1s",
    "--renew-deadline",
    "600ms",
    "--retry-period",
    "200ms",
];

/// For each (alert, state), every instant it began.
type Starts = BTreeMap<(String, String), Vec<Instant>>;

/// When each (alert, state) began, every time it began, polled every 100 ms in the background.
struct AlertWatch {
    seen: Arc<Mutex<Starts>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AlertWatch {
    fn start(prometheus: Arc<Prometheus>) -> Self {
        let seen: Arc<Mutex<Starts>> = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut before = BTreeSet::new();
            while !halt.load(Ordering::Relaxed) {
                let now = Instant::now();
                let active: BTreeSet<(String, String)> = prometheus.alerts().into_iter().collect();
                for key in active.difference(&before) {
                    s.lock().unwrap().entry(key.clone()).or_default().push(now);
                }
                before = active;
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Self {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// When `alert` first entered `state` at or after `since`.
    fn first_since(&self, alert: &str, state: &str, since: Instant) -> Option<Instant> {
        self.seen
            .lock()
            .unwrap()
            .get(&(alert.to_owned(), state.to_owned()))
            .and_then(|starts| starts.iter().find(|t| **t >= since).copied())
    }

    /// When `alert` first entered `state`, if ever.
    fn first(&self, alert: &str, state: &str) -> Option<Instant> {
        self.seen
            .lock()
            .unwrap()
            .get(&(alert.to_owned(), state.to_owned()))
            .and_then(|starts| starts.first().copied())
    }

    /// Waits until `alert` entered `state` at or after `since`.
    fn wait(&self, alert: &str, state: &str, since: Instant, timeout: Duration) -> Instant {
        wait_for(&format!("{alert} {state}"), timeout, || {
            self.first_since(alert, state, since)
        })
    }
}

impl Drop for AlertWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn scrape_config(replicas: &[Replica]) -> String {
    let mut targets = String::new();
    for r in replicas {
        // The labels the ServiceMonitor's target would carry: namespace and pod beside the job.
        targets.push_str(&format!(
            "      - targets: [\"{}\"]\n        labels:\n          namespace: shop\n          pod: {}\n",
            r.http, r.identity
        ));
    }
    format!(
        "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n  evaluation_interval: 500ms\nrule_files:\n  - rules.yaml\nscrape_configs:\n  - job_name: {JOB}\n    static_configs:\n{targets}"
    )
}

fn leader_index(replicas: &[Replica], skip: &[usize]) -> Option<usize> {
    (0..replicas.len()).find(|i| !skip.contains(i) && replicas[*i].is_ready())
}

fn secs(from: Instant, to: Option<Instant>) -> String {
    to.map_or("not seen".to_owned(), |t| {
        if t < from {
            "before".to_owned()
        } else {
            format!("{:.1} s", (t - from).as_secs_f64())
        }
    })
}

#[test]
fn prometheus_raises_the_charts_alerts_on_real_replicas_and_the_dashboard_has_data() {
    let began = Instant::now();
    // The same timing and scrape interval as the replicas'; every new leadership is flapping
    // here, so that the failover shows in that alert too.
    let values = rule_values(FLAPPING_AT_ONCE, FAST_TIMING_VALUES);
    let rendered = harness::helm::render(&values);
    let spec = rule_spec(&rendered);
    let rules = serde_yaml::to_string(&spec).expect("rules");

    let mut redis = RedisServer::start();
    let mut replicas: Vec<Replica> = ["web-a", "web-b", "web-c"]
        .iter()
        .map(|name| Replica::spawn(&redis.url(), LEASE, name, &TIMING, &[]))
        .collect();
    let first = wait_for("a first leader", Duration::from_secs(20), || {
        leader_index(&replicas, &[])
    });

    let prometheus = Arc::new(Prometheus::start(&scrape_config(&replicas), &rules));
    wait_for(
        "prometheus to scrape three replicas and see one leader, every rule evaluated",
        Duration::from_secs(20),
        || {
            let up = prometheus.query(&format!("sum(up{{job=\"{JOB}\"}})"));
            let leading = prometheus.query(&format!("sum(leasehold_is_leader{{job=\"{JOB}\"}})"));
            let value = |r: &[serde_json::Value]| {
                r.first()
                    .and_then(|s| s["value"][1].as_str())
                    .map(str::to_owned)
            };
            let healthy = prometheus
                .rule_health()
                .iter()
                .all(|(_, health, _)| health == "ok");
            (value(&up).as_deref() == Some("3")
                && value(&leading).as_deref() == Some("1")
                && healthy)
                .then_some(())
        },
    );
    let watch = AlertWatch::start(prometheus.clone());

    // Steady state: one leader, Redis up. Nothing fires for six evaluations.
    let quiet_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < quiet_until {
        let firing: Vec<_> = prometheus
            .alerts()
            .into_iter()
            .filter(|(_, state)| state == "firing")
            .collect();
        assert!(
            firing.is_empty(),
            "alerts fire in the steady state: {firing:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // 1. The leader dies. A follower leads one lease duration later; the new leadership is
    //    flapping (threshold 0 here); "no leader" may go pending but must not fire.
    let killed_at = Instant::now();
    replicas[first].signal(Signal::SIGKILL);
    let second = wait_for("a second leader", Duration::from_secs(20), || {
        leader_index(&replicas, &[first])
    });
    let second_leads_at = Instant::now();
    watch.wait(
        "LeaseholdLeadershipFlapping",
        "firing",
        killed_at,
        Duration::from_secs(20),
    );
    assert_eq!(watch.first("LeaseholdNoLeader", "firing"), None);

    // 2. The new leader freezes past its lease; the third leads; the frozen one resumes and
    //    steps down because its validity deadline passed.
    let paused_at = Instant::now();
    replicas[second].signal(Signal::SIGSTOP);
    wait_for("a third leader", Duration::from_secs(20), || {
        leader_index(&replicas, &[first, second])
    });
    replicas[second].signal(Signal::SIGCONT);
    wait_for(
        "the paused leader to step down past its deadline",
        Duration::from_secs(20),
        || {
            let seen = replicas[second].get("/leader")?.1;
            let json: serde_json::Value = serde_json::from_str(&seen).ok()?;
            (json["last_step_down"]["reason"] == "validity_deadline_passed").then_some(())
        },
    );
    watch.wait(
        "LeaseholdLeaderPaused",
        "firing",
        paused_at,
        Duration::from_secs(20),
    );
    assert_eq!(watch.first("LeaseholdNoLeader", "firing"), None);
    assert_eq!(watch.first("LeaseholdMultipleLeaders", "firing"), None);

    // 3. Redis stops. The leader steps down after the renew deadline; nobody can lead.
    let redis_stopped_at = Instant::now();
    redis.kill();
    for alert in ["LeaseholdRedisUnreachable", "LeaseholdNoLeader"] {
        watch.wait(alert, "firing", redis_stopped_at, Duration::from_secs(20));
    }
    assert_eq!(watch.first("LeaseholdMultipleLeaders", "firing"), None);
    assert_eq!(watch.first("LeaseholdRenewalSlow", "firing"), None);

    // Every rule still evaluates cleanly (no many-to-many matches, no type errors).
    for (name, health, error) in prometheus.rule_health() {
        assert_eq!(health, "ok", "{name}: {error}");
    }

    // 4. Every panel of the dashboard returns data over the run.
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard_path()).expect("dashboard"))
            .expect("dashboard JSON");
    let range = began.elapsed() + Duration::from_secs(5);
    let mut panels = Vec::new();
    for (title, expr) in dashboard_queries(&dashboard) {
        let promql = expr
            .replace("$namespace", "shop")
            .replace("$lease", LEASE)
            .replace("$__rate_interval", "5s");
        let result = prometheus.query_range(&promql, range, Duration::from_secs(1));
        let points = result
            .iter()
            .flat_map(|s| s["values"].as_array().cloned().unwrap_or_default())
            .filter(|v| v[1].as_str().is_some_and(|x| x != "NaN"))
            .count();
        assert!(
            points > 0,
            "dashboard panel {title:?} has no data:\n{promql}\n{result:?}"
        );
        panels.push((title, result.len(), points));
    }
    report(
        &watch,
        &spec,
        [
            ("the kill", killed_at),
            ("the pause", paused_at),
            ("redis's stop", redis_stopped_at),
        ],
        second_leads_at,
    );
    for (title, series, points) in panels {
        println!("panel {title:?}: {series} series, {points} points");
    }
    println!("the whole run took {:.1} s", began.elapsed().as_secs_f64());
    replicas.clear();
}

/// Prints every alert with its expression and when it was first seen pending and firing,
/// counted from the leader's kill, from the next leader's pause and from Redis's stop.
fn report(
    watch: &AlertWatch,
    spec: &serde_yaml::Value,
    events: [(&str, Instant); 3],
    second_leads_at: Instant,
) {
    let killed_at = events[0].1;
    println!(
        "after the leader's kill: the second leader in {}, the pause at {}, redis stopped at {}",
        secs(killed_at, Some(second_leads_at)),
        secs(killed_at, Some(events[1].1)),
        secs(killed_at, Some(events[2].1))
    );
    for (name, rule) in alerts(spec) {
        let expr = rule["expr"].as_str().unwrap_or_default();
        let wait = rule["for"].as_str().unwrap_or("0s");
        println!("{name} (for {wait})");
        for (event, at) in events {
            let first = |state: &str| secs(at, watch.first_since(&name, state, at));
            println!(
                "    after {event}: pending {}, firing {}",
                first("pending"),
                first("firing")
            );
        }
        println!("    {}", expr.replace('\n', "\n    "));
    }
}
