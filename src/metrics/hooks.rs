//! What the elector's term hooks record: transitions, step-downs and their reasons, renewals,
//! Redis errors, the eviction policy, the candidate check, cooldowns and Redis's clock rate.

use std::time::Duration;

use super::{ErrorLabels, Metrics, PolicyLabel, ReasonLabel, ResultLabel, ToLabel};
use crate::board::GateHooks;
use crate::clock::{BootInstant, WallLead};
use crate::elector::{RateBound, RenewalOutcome, StepDownReason, TermHooks};
use crate::lease::{FencingToken, LeaseError};
use leasehold_core::locked::locked;

impl TermHooks for Metrics {
    fn renewal(&self, outcome: RenewalOutcome, latency: Duration) {
        self.renewals
            .get_or_create(&ResultLabel {
                result: renewal_label(outcome),
            })
            .inc();
        self.renewal_seconds.observe(latency.as_secs_f64());
    }

    fn began(&self, _token: FencingToken, _valid_until: BootInstant, _lead: WallLead) {
        self.transitions
            .get_or_create(&ToLabel { to: "leader" })
            .inc();
    }

    fn ending(&self, _token: FencingToken, reason: StepDownReason) -> bool {
        // A rate is a term's: a follower exports none, and an alert on it resolves.
        self.redis_clock_rate.set(0.0);
        self.redis_clock_rate_width.set(0.0);
        self.transitions
            .get_or_create(&ToLabel { to: "follower" })
            .inc();
        self.step_downs
            .get_or_create(&ReasonLabel {
                reason: reason.as_label(),
            })
            .inc();
        true
    }

    fn redis_error(&self, op: &'static str, error: &LeaseError) {
        self.redis_errors
            .get_or_create(&ErrorLabels {
                op,
                kind: error.kind(),
            })
            .inc();
    }

    fn cooldown_started(&self) {
        self.cooldowns_started.inc();
    }

    fn clock_rate(&self, bound: RateBound) {
        self.redis_clock_rate.set((bound.low + bound.high) / 2.0);
        self.redis_clock_rate_width.set(bound.width());
    }
}

impl GateHooks for Metrics {
    fn eviction_policy(&self, policy: &str, may_evict: bool) {
        let _rewriting = locked(&self.rewrite);
        self.eviction_possible.clear();
        self.eviction_possible
            .get_or_create(&PolicyLabel {
                policy: policy.to_owned(),
            })
            .set(i64::from(may_evict));
    }

    fn candidate_unhealthy(&self) {
        self.candidate_unhealthy.inc();
    }
}

/// The `result` label of a renewal.
pub(super) fn renewal_label(outcome: RenewalOutcome) -> &'static str {
    match outcome {
        RenewalOutcome::Renewed => "renewed",
        RenewalOutcome::Lost => "lost",
        RenewalOutcome::Failed => "failed",
    }
}
