//! The report's plot: cumulative distributions of handoff and failover latency.

use super::*;

/// The plot: handoff (release → `Leadership`) and crash failover (past expiry), leasehold and
/// the polling baseline.
pub fn plot(r: &Results, plan: &Plan) -> String {
    let handoff_l = r.handoff(LEASEHOLD);
    let handoff_p = r.handoff(POLLING);
    let e2e: Vec<Duration> = r.handoff_processes.iter().map(|s| s.from_sigterm).collect();
    let fail_l = r.failover(LEASEHOLD, false);
    let fail_p = r.failover(POLLING, false);
    let blue = "#1f5fbf";
    let orange = "#d9730d";
    let panels = [
        Panel {
            title: "Graceful handoff: release → successor leads".into(),
            series: vec![
                Series {
                    label: "leasehold".into(),
                    color: blue,
                    dashed: false,
                    samples: &handoff_l,
                },
                Series {
                    label: "leasehold run, SIGTERM → led".into(),
                    color: blue,
                    dashed: true,
                    samples: &e2e,
                },
                Series {
                    label: "polling baseline".into(),
                    color: orange,
                    dashed: false,
                    samples: &handoff_p,
                },
            ],
        },
        Panel {
            title: "Crash failover: lease expiry → successor leads".into(),
            series: vec![
                Series {
                    label: "leasehold".into(),
                    color: blue,
                    dashed: false,
                    samples: &fail_l,
                },
                Series {
                    label: "polling baseline".into(),
                    color: orange,
                    dashed: false,
                    samples: &fail_p,
                },
            ],
        },
    ];
    cdf_plot(
        "leasehold vs. a client-go-like polling baseline",
        &format!(
            "{}; {}",
            timing_words(&plan.timing),
            humantime::format_rfc3339_seconds(r.date)
        ),
        &panels,
    )
}
