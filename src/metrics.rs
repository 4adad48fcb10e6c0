//! Prometheus metrics: fed by the elector's observer hooks, plus gauges read from the status at
//! scrape time (so `validity remaining` is exact when scraped, not when last renewed).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::clock::BootInstant;
use crate::elector::{Observer, RenewalOutcome, Role, Status, StepDownReason};
use crate::lease::{FencingToken, LeaseError};

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
struct InfoLabels {
    identity: String,
    lease: String,
    version: &'static str,
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
}

impl Metrics {
    /// Registers every metric; `identity` and `lease` go into `leasehold_info`.
    pub fn new(identity: &str, lease: &str) -> Self {
        let mut registry = Registry::with_prefix("leasehold");
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
        for reason in StepDownReason::ALL {
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
                result: result.as_label(),
            });
        }
        registry.register("renewals", "Lease renewals by result", renewals.clone());
        // 0.1 ms to about 3.3 s.
        let renewal_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
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
        Self {
            registry,
            is_leader,
            transitions,
            step_downs,
            renewals,
            renewal_seconds,
            validity_remaining,
            fencing_token,
            redis_up,
            redis_errors,
        }
    }

    /// The Prometheus text exposition, with the status-derived gauges read at `now`.
    pub fn render(&self, status: &Status, now: BootInstant) -> String {
        let leading = status.is_leading_at(now);
        self.is_leader.set(i64::from(leading));
        let remaining = match status.role {
            Role::Leader { valid_until, .. } => now.until(valid_until),
            _ => Duration::ZERO,
        };
        self.validity_remaining.set(remaining.as_secs_f64());
        self.fencing_token
            .set(status.token().map_or(0.0, |FencingToken(t)| t as f64));
        self.redis_up.set(i64::from(status.redis.reachable));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

impl Observer for Metrics {
    fn renewal(&self, outcome: RenewalOutcome, latency: Duration) {
        self.renewals
            .get_or_create(&ResultLabel {
                result: outcome.as_label(),
            })
            .inc();
        self.renewal_seconds.observe(latency.as_secs_f64());
    }

    fn acquired(&self, _token: FencingToken) {
        self.transitions
            .get_or_create(&ToLabel { to: "leader" })
            .inc();
    }

    fn stepped_down(&self, reason: StepDownReason) {
        self.transitions
            .get_or_create(&ToLabel { to: "follower" })
            .inc();
        self.step_downs
            .get_or_create(&ReasonLabel {
                reason: reason.as_label(),
            })
            .inc();
    }

    fn redis_error(&self, op: &'static str, error: &LeaseError) {
        self.redis_errors
            .get_or_create(&ErrorLabels {
                op,
                kind: error.kind(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::RedisHealth;

    fn status(role: Role) -> Status {
        Status {
            lease: "shop/web".into(),
            identity: "web-a".into(),
            owner: "web-a-x".into(),
            role,
            transitions: 1,
            last_step_down: None,
            redis: RedisHealth {
                reachable: true,
                last_error: None,
                subscribed: true,
                ..RedisHealth::default()
            },
        }
    }

    #[test]
    fn the_exposition_names_every_metric() {
        let m = Metrics::new("web-a", "shop/web");
        m.renewal(RenewalOutcome::Renewed, Duration::from_micros(300));
        m.acquired(FencingToken(7));
        m.stepped_down(StepDownReason::ValidityDeadlinePassed);
        let now = BootInstant::now();
        let text = m.render(
            &status(Role::Leader {
                token: FencingToken(7),
                acquired_at: std::time::SystemTime::now(),
                valid_until: now.saturating_add(Duration::from_secs(10)),
            }),
            now,
        );
        for line in [
            "leasehold_is_leader 1",
            "leasehold_transitions_total{to=\"leader\"} 1",
            "leasehold_step_downs_total{reason=\"validity_deadline_passed\"} 1",
            "leasehold_step_downs_total{reason=\"shutdown\"} 0",
            "leasehold_renewals_total{result=\"renewed\"} 1",
            "leasehold_renewal_duration_seconds_count 1",
            "leasehold_validity_remaining_seconds 10.0",
            "leasehold_fencing_token 7.0",
            "leasehold_redis_up 1",
            "leasehold_info{identity=\"web-a\",lease=\"shop/web\",version=",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn a_leader_past_its_deadline_is_not_counted_as_leader() {
        let m = Metrics::new("web-a", "shop/web");
        let now = BootInstant::now();
        let text = m.render(
            &status(Role::Leader {
                token: FencingToken(7),
                acquired_at: std::time::SystemTime::now(),
                valid_until: now,
            }),
            now,
        );
        assert!(text.contains("leasehold_is_leader 0"), "{text}");
        assert!(
            text.contains("leasehold_validity_remaining_seconds 0.0"),
            "{text}"
        );
    }
}
