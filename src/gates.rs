//! The product's gates, which keep a replica out of the election from outside the core
//! ([`Elector::with_gate`](crate::elector::Elector::with_gate)): each is named here once, for
//! the step-down of a term it ends, and [`STEP_DOWN_REASONS`] lists them with the core's own.

use crate::elector::{Gate, StepDownReason};

/// The eviction policy (`eviction`): Redis may evict the lease and `--redis-eviction refuse`
/// keeps this replica out (or it evicts the state record while the data-loss cooldown is off).
pub const EVICTION: Gate = Gate {
    label: "redis_may_evict",
    says: "redis may evict the lease",
};

/// The candidate check (`--candidate-check`) failed its failure threshold.
pub const CANDIDACY: Gate = Gate {
    label: "unhealthy",
    says: "the candidate check failed",
};

/// Redis's clock runs so far off this replica's that a renewal cannot keep a useful term
/// ([`clock_gate`](crate::clock_gate)).
pub const CLOCK_RATE: Gate = Gate {
    label: "clock_rate",
    says: "redis's clock runs too far off",
};

/// Every reason a replica of this product steps down with: the core's own, then the gates', for
/// metrics that want all label values present from the start (docs/REFERENCE.md lists them).
pub const STEP_DOWN_REASONS: [StepDownReason; StepDownReason::ALL.len() + 3] = {
    let mut all = [StepDownReason::Lost; StepDownReason::ALL.len() + 3];
    let mut i = 0;
    while i < StepDownReason::ALL.len() {
        all[i] = StepDownReason::ALL[i];
        i += 1;
    }
    all[i] = StepDownReason::Gate(EVICTION);
    all[i + 1] = StepDownReason::Gate(CANDIDACY);
    all[i + 2] = StepDownReason::Gate(CLOCK_RATE);
    all
};
