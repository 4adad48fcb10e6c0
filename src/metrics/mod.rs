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
use prometheus_client::registry::Registry;

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
        let registry = root.sub_registry_with_prefix("leasehold");
        let info: Family<InfoLabels, Gauge> = Family::default();
        info.get_or_create(&InfoLabels {
            identity: identity.to_owned(),
            lease: lease.to_owned(),
            version: env!("CARGO_PKG_VERSION"),
        })
        .set(1);
        registry.register("info", "Identity, lease and version of this replica", info);

        let is_leader = Gauge::default();
        registry.register(
            "is_leader",
            "1 while this replica leads and its validity deadline has not passed",
            is_leader.clone(),
        );
        let transitions = Family::<ToLabel, Counter>::default();
        for to in ["leader", "follower"] {
            let _ = transitions.get_or_create(&ToLabel { to });
        }
        registry.register(
            "transitions",
            "Leadership transitions of this replica, by the role entered",
            transitions.clone(),
        );
        let step_downs = Family::<ReasonLabel, Counter>::default();
        for reason in crate::gates::STEP_DOWN_REASONS {
            let _ = step_downs.get_or_create(&ReasonLabel {
                reason: reason.as_label(),
            });
        }
        registry.register("step_downs", "Step-downs by reason", step_downs.clone());
        let renewals = Family::<ResultLabel, Counter>::default();
        for result in [
            RenewalOutcome::Renewed,
            RenewalOutcome::Lost,
            RenewalOutcome::Failed,
        ] {
            let _ = renewals.get_or_create(&ResultLabel {
                result: hooks::renewal_label(result),
            });
        }
        registry.register("renewals", "Lease renewals by result", renewals.clone());
        // 0.1 ms to about 52 s: a renewal may take as long as the validity left, and the alert on
        // slow renewals compares a quantile with half of what one attempt may take.
        let renewal_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 20));
        registry.register(
            "renewal_duration_seconds",
            "Time one lease renewal took",
            renewal_seconds.clone(),
        );
        let validity_remaining = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "validity_remaining_seconds",
            "Time left before the leader's validity deadline (0 on followers)",
            validity_remaining.clone(),
        );
        let fencing_token = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "fencing_token",
            "Fencing token of the current leadership as this replica knows it (0 if unknown)",
            fencing_token.clone(),
        );
        let redis_up = Gauge::default();
        registry.register(
            "redis_up",
            "1 when the last Redis call got an answer",
            redis_up.clone(),
        );
        let redis_errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "redis_errors",
            "Failed Redis calls by operation and kind",
            redis_errors.clone(),
        );
        let ready = Gauge::default();
        registry.register(
            "ready",
            "1 while /readyz answers 200 (in the readiness mode this replica runs in)",
            ready.clone(),
        );
        let leader = Family::<LeaderLabel, Gauge>::default();
        registry.register(
            "leader",
            "1, labelled with the identity of the leader as this replica sees it (absent while \
             it knows no leader)",
            leader.clone(),
        );
        let eviction_possible = Family::<PolicyLabel, Gauge>::default();
        registry.register(
            "redis_eviction_possible",
            "1 when Redis has a maxmemory and a maxmemory-policy that may evict the lease, else 0 \
             (labelled with the policy; absent until Redis's policy was read)",
            eviction_possible.clone(),
        );
        let candidate_unhealthy = Counter::default();
        registry.register(
            "candidate_unhealthy",
            "Times the candidate check put this replica out of the election (a leader steps down)",
            candidate_unhealthy.clone(),
        );
        let lease_blocked = Family::<KeyLabel, Gauge>::default();
        for key in BlockingKey::ALL {
            let _ = lease_blocked.get_or_create(&KeyLabel {
                key: key.as_label(),
            });
        }
        registry.register(
            "lease_blocked",
            "1 while a key of the lease that leasehold did not write and that never expires (the \
             lease key, or the handover reservation: the label) keeps everyone from leading",
            lease_blocked.clone(),
        );
        let sitting_out = Family::<ReasonLabel, Gauge>::default();
        for reason in SitOutReason::ALL {
            let _ = sitting_out.get_or_create(&ReasonLabel {
                reason: reason.as_label(),
            });
        }
        registry.register(
            "sitting_out",
            "1 while this replica keeps itself out of the election (the label says why: \
             slow_link, its round trips to Redis do not fit a lease; renew_refused, Redis refused \
             its renewal and it backs off), else 0",
            sitting_out.clone(),
        );
        let cooldowns_started = Counter::default();
        registry.register(
            "cooldowns_started",
            "Data-loss cooldowns this replica started: its acquire found the lease's state record \
             missing or written by another Redis process (a restart, FLUSHALL, a failover, \
             allkeys-* eviction)",
            cooldowns_started.clone(),
        );
        let http_connections_refused = Counter::default();
        registry.register(
            "http_connections_refused",
            "HTTP connections beyond --http-max-connections turned away: closed by a newer one \
             while waiting on a probe's place, or answered 503 there for anything but a probe",
            http_connections_refused.clone(),
        );
        let http_event_streams_refused = Counter::default();
        registry.register(
            "http_event_streams_refused",
            "Requests for /leader's event stream answered 503 because --http-max-event-streams \
             clients held one",
            http_event_streams_refused.clone(),
        );
        let redis_clock_rate = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "redis_clock_rate",
            "Redis's clock against this replica's boot clock (Redis seconds per local second), \
             the middle of the bound the leader's renewals give; 0 until two renewals of a term \
             bounded it, and again once the term ended",
            redis_clock_rate.clone(),
        );
        let redis_clock_rate_width = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "redis_clock_rate_width",
            "How wide that bound is (its high end less its low end)",
            redis_clock_rate_width.clone(),
        );
        let local_clock_slew_ratio = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "local_clock_slew_ratio",
            "This host's boot clock against its oscillator (CLOCK_MONOTONIC_RAW): boot seconds \
             per raw second, a suspend aside, over the leader's renewals; 0 until measured",
            local_clock_slew_ratio.clone(),
        );
        root.register_collector(Box::new(process::Process));
        Self {
            registry: root,
            is_leader,
            transitions,
            step_downs,
            renewals,
            renewal_seconds,
            validity_remaining,
            fencing_token,
            redis_up,
            redis_errors,
            ready,
            leader,
            master_status,
            eviction_possible,
            candidate_unhealthy,
            lease_blocked,
            sitting_out,
            cooldowns_started,
            http_connections_refused,
            http_event_streams_refused,
            redis_clock_rate,
            redis_clock_rate_width,
            local_clock_slew_ratio,
            rewrite: Mutex::new(()),
        }
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
        let _rewriting = self.lock_rewrite();
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

    fn lock_rewrite(&self) -> std::sync::MutexGuard<'_, ()> {
        // The lock guards no data, so a panic while it was held left nothing half-done.
        locked(&self.rewrite)
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

#[cfg(test)]
mod tests;
