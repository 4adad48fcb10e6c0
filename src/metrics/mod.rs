//! Prometheus metrics: fed by the elector's term hooks, plus gauges read from the status at
//! scrape time (so `validity remaining` is exact when scraped, not when last renewed). Beside
//! leasehold's own names it exports client-go's `leader_election_master_status`, so that alerts
//! written for client-go's leader election work unchanged. Both expositions come from the one
//! registry through prometheus-client's encoders: OpenMetrics for a scraper that asks for it,
//! the Prometheus text format 0.0.4 for everyone else (`curl`, `promtool check metrics`).
//! The standard `process_*` metrics come from process.rs, read from `/proc` at each scrape;
//! what the term hooks record is in hooks.rs.

mod hooks;
mod process;

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use leasehold_core::locked::locked;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

use crate::board::{BlockingKey, Shown};
use crate::clock::{BootInstant, WallLead};
use crate::elector::{RenewalOutcome, Role, SitOutReason};
use crate::lease::FencingToken;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToLabel {
    to: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    op: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaderLabel {
    leader: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KeyLabel {
    key: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: String,
}

/// client-go's label: the lease.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    identity: String,
    lease: String,
    version: &'static str,
}

/// The two expositions `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0 (`application/openmetrics-text`): a counter's family is named without
    /// `_total`, and the body ends with `# EOF`.
    OpenMetrics,
    /// The Prometheus text format 0.0.4 (`text/plain`): a counter's `HELP` and `TYPE` name it
    /// with `_total`, as its series.
    Text,
}

impl Exposition {
    /// The exposition an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` without `q=0` (as Prometheus does when it scrapes), the
    /// text format otherwise, a missing header included.
    pub fn negotiate(accept: Option<&str>) -> Self {
        let asks = crate::accept::names(accept, "application/openmetrics-text");
        if asks { Self::OpenMetrics } else { Self::Text }
    }

    /// The `Content-Type` of this exposition.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::Text => prometheus_text::CONTENT_TYPE,
        }
    }
}

/// Every metric leasehold exports.
pub struct Metrics {
    registry: Registry,
    is_leader: Gauge,
    transitions: Family<ToLabel, Counter>,
    step_downs: Family<ReasonLabel, Counter>,
    renewals: Family<ResultLabel, Counter>,
    renewal_seconds: Histogram,
    validity_remaining: Gauge<f64, AtomicU64>,
    fencing_token: Gauge<f64, AtomicU64>,
    redis_up: Gauge,
    redis_errors: Family<ErrorLabels, Counter>,
    ready: Gauge,
    leader: Family<LeaderLabel, Gauge>,
    master_status: Gauge,
    eviction_possible: Family<PolicyLabel, Gauge>,
    candidate_unhealthy: Counter,
    lease_blocked: Family<KeyLabel, Gauge>,
    sitting_out: Family<ReasonLabel, Gauge>,
    cooldowns_started: Counter,
    http_connections_refused: Counter,
    http_event_streams_refused: Counter,
    redis_clock_rate: Gauge<f64, AtomicU64>,
    redis_clock_rate_width: Gauge<f64, AtomicU64>,
    local_clock_slew_ratio: Gauge<f64, AtomicU64>,
    /// Held while a family that holds one series at a time is rewritten (clear, then set) and
    /// while the exposition is encoded, so that a scrape never sees it empty in between: a
    /// series missing from one scrape is stale to Prometheus and resets an alert's `for`.
    rewrite: Mutex<()>,
}

impl Metrics {
    /// Registers every metric; `identity` and `lease` go into `leasehold_info`, and `lease` is
    /// the `name` of client-go's gauge.
    pub fn new(identity: &str, lease: &str) -> Self {
        let mut root = Registry::default();
        let master = Family::<NameLabel, Gauge>::default();
        // The family's one series; a clone of a gauge shares its value.
        let master_status = master
            .get_or_create(&NameLabel {
                name: lease.to_owned(),
            })
            .clone();
        root.register(
            "leader_election_master_status",
            "client-go's leader election gauge: 1 while this replica leads the lease `name` and \
             its validity deadline has not passed, else 0",
            master,
        );
        let r = root.sub_registry_with_prefix("leasehold");
        let info: Family<InfoLabels, Gauge> = Family::default();
        info.get_or_create(&InfoLabels {
            identity: identity.to_owned(),
            lease: lease.to_owned(),
            version: env!("CARGO_PKG_VERSION"),
        })
        .set(1);
        r.register("info", "Identity, lease and version of this replica", info);
        // Registered in the order of the fields below, which is the exposition's.
        let metrics = Self {
            is_leader: reg(
                r,
                "is_leader",
                "1 while this replica leads and its validity deadline has not passed",
            ),
            transitions: reg(
                r,
                "transitions",
                "Leadership transitions of this replica, by the role entered",
            ),
            step_downs: reg(r, "step_downs", "Step-downs by reason"),
            renewals: reg(r, "renewals", "Lease renewals by result"),
            // 0.1 ms to about 52 s: a renewal may take as long as the validity left, and the
            // alert on slow renewals compares a quantile with half of what one attempt may take.
            renewal_seconds: {
                let seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 20));
                let help = "Time one lease renewal took";
                r.register("renewal_duration_seconds", help, seconds.clone());
                seconds
            },
            validity_remaining: reg(
                r,
                "validity_remaining_seconds",
                "Time left before the leader's validity deadline (0 on followers)",
            ),
            fencing_token: reg(
                r,
                "fencing_token",
                "Fencing token of the current leadership as this replica knows it (0 if unknown)",
            ),
            redis_up: reg(r, "redis_up", "1 when the last Redis call got an answer"),
            redis_errors: reg(
                r,
                "redis_errors",
                "Failed Redis calls by operation and kind",
            ),
            ready: reg(
                r,
                "ready",
                "1 while /readyz answers 200 (in the readiness mode this replica runs in)",
            ),
            leader: reg(
                r,
                "leader",
                "1, labelled with the identity of the leader as this replica sees it (absent \
                 while it knows no leader)",
            ),
            eviction_possible: reg(
                r,
                "redis_eviction_possible",
                "1 when Redis has a maxmemory and a maxmemory-policy that may evict the lease, \
                 else 0 (labelled with the policy; absent until Redis's policy was read)",
            ),
            candidate_unhealthy: reg(
                r,
                "candidate_unhealthy",
                "Times the candidate check put this replica out of the election (a leader steps \
                 down)",
            ),
            lease_blocked: reg(
                r,
                "lease_blocked",
                "1 while a key of the lease that leasehold did not write and that never expires \
                 (the lease key, or the handover reservation: the label) keeps everyone from \
                 leading",
            ),
            sitting_out: reg(
                r,
                "sitting_out",
                "1 while this replica keeps itself out of the election (the label says why: \
                 slow_link, its round trips to Redis do not fit a lease; renew_refused, Redis \
                 refused its renewal and it backs off), else 0",
            ),
            cooldowns_started: reg(
                r,
                "cooldowns_started",
                "Data-loss cooldowns this replica started: its acquire found the lease's state \
                 record missing or written by another Redis process (a restart, FLUSHALL, a \
                 failover, allkeys-* eviction)",
            ),
            http_connections_refused: reg(
                r,
                "http_connections_refused",
                "HTTP connections beyond --http-max-connections turned away: closed by a newer \
                 one while waiting on a probe's place, or answered 503 there for anything but a \
                 probe",
            ),
            http_event_streams_refused: reg(
                r,
                "http_event_streams_refused",
                "Requests for /leader's event stream answered 503 because \
                 --http-max-event-streams clients held one",
            ),
            redis_clock_rate: reg(
                r,
                "redis_clock_rate",
                "Redis's clock against this replica's boot clock (Redis seconds per local \
                 second), the middle of the bound the leader's renewals give; 0 until two \
                 renewals of a term bounded it, and again once the term ended",
            ),
            redis_clock_rate_width: reg(
                r,
                "redis_clock_rate_width",
                "How wide that bound is (its high end less its low end)",
            ),
            local_clock_slew_ratio: reg(
                r,
                "local_clock_slew_ratio",
                "This host's boot clock against its oscillator (CLOCK_MONOTONIC_RAW): boot \
                 seconds per raw second, a suspend aside, over the leader's renewals; 0 until \
                 measured",
            ),
            master_status,
            rewrite: Mutex::new(()),
            // Last: `r` borrows it.
            registry: {
                root.register_collector(Box::new(process::Process));
                root
            },
        };
        // Every series of a label known in advance, from the first scrape on.
        for to in ["leader", "follower"] {
            let _ = metrics.transitions.get_or_create(&ToLabel { to });
        }
        for reason in crate::gates::STEP_DOWN_REASONS {
            let reason = reason.as_label();
            let _ = metrics.step_downs.get_or_create(&ReasonLabel { reason });
        }
        for outcome in [
            RenewalOutcome::Renewed,
            RenewalOutcome::Lost,
            RenewalOutcome::Failed,
        ] {
            let result = hooks::renewal_label(outcome);
            let _ = metrics.renewals.get_or_create(&ResultLabel { result });
        }
        for key in BlockingKey::ALL {
            let key = key.as_label();
            let _ = metrics.lease_blocked.get_or_create(&KeyLabel { key });
        }
        for reason in SitOutReason::ALL {
            let reason = reason.as_label();
            let _ = metrics.sitting_out.get_or_create(&ReasonLabel { reason });
        }
        metrics
    }

    /// The exposition in `format`, with the status-derived gauges read at `now` (`lead`: the
    /// wall clock's lead then); `ready` is the readiness verdict at `now`.
    pub fn render(
        &self,
        status: &Shown,
        now: BootInstant,
        lead: WallLead,
        ready: bool,
        format: Exposition,
    ) -> String {
        let _rewriting = locked(&self.rewrite);
        let leading = status.is_leading_at(now, lead);
        self.is_leader.set(i64::from(leading));
        self.master_status.set(i64::from(leading));
        self.ready.set(i64::from(ready));
        let remaining = status
            .leading_until(lead)
            .map_or(Duration::ZERO, |until| now.until(until));
        self.validity_remaining.set(remaining.as_secs_f64());
        self.fencing_token
            .set(status.token().map_or(0.0, |FencingToken(t)| t as f64));
        self.redis_up.set(i64::from(status.redis.reachable));
        for key in BlockingKey::ALL {
            let blocked = status.blocked.as_ref().is_some_and(|b| b.which == key);
            self.lease_blocked
                .get_or_create(&KeyLabel {
                    key: key.as_label(),
                })
                .set(i64::from(blocked));
        }
        for reason in SitOutReason::ALL {
            let sitting = status
                .sitting_out
                .as_ref()
                .is_some_and(|s| s.reason == reason);
            self.sitting_out
                .get_or_create(&ReasonLabel {
                    reason: reason.as_label(),
                })
                .set(i64::from(sitting));
        }
        self.leader.clear();
        if let Some(leader) = seen_leader(status, leading) {
            self.leader
                .get_or_create(&LeaderLabel {
                    leader: leader.to_owned(),
                })
                .set(1);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = match format {
            Exposition::OpenMetrics => text::encode(&mut out, &self.registry),
            Exposition::Text => prometheus_text::encode(&mut out, &self.registry),
        };
        out
    }

    /// The boot clock's rate against the oscillator, as last measured (0 until it was).
    pub fn local_clock_slew(&self, ratio: Option<f64>) {
        self.local_clock_slew_ratio.set(ratio.unwrap_or(0.0));
    }

    /// A connection beyond `--http-max-connections` was turned away.
    pub fn http_connection_refused(&self) {
        self.http_connections_refused.inc();
    }

    /// A request for the event stream was refused: every stream was taken.
    pub fn http_event_stream_refused(&self) {
        self.http_event_streams_refused.inc();
    }
}

/// The leader as this replica sees it: itself while it leads within its validity deadline (a
/// leader past it knows no longer who leads), else the holder it saw at its last look.
fn seen_leader(status: &crate::elector::Status, leading: bool) -> Option<&str> {
    match &status.role {
        Role::Leader { .. } if !leading => None,
        _ => status.leader_identity(),
    }
}

/// A new metric of type `M`, registered under `name` with `help`; the handle that updates it.
fn reg<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

#[cfg(test)]
mod tests;
