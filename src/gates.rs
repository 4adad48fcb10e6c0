//! The product's gates, which keep a replica out of the election from outside the core
//! ([`Elector::with_gate`](crate::elector::Elector::with_gate)): each is named here once, for
//! the step-down of a term it ends, and [`STEP_DOWN_REASONS`] lists them with the core's own.
//! [`TermBackoff`] is the gate of a trouble that only a term can try again.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::locked::locked;
use tokio::sync::watch;

use crate::elector::{Gate, Standing, StepDownReason, Timing, pause_after_term};

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

/// The guard file cannot be written (a full or read-only filesystem): the command's checks
/// refuse whatever its leader does ([`GuardHooks`](crate::guard::GuardHooks)).
pub const GUARD_FILE: Gate = Gate {
    label: "guard_file",
    says: "the guard file cannot be written",
};

/// Every reason a replica of this product steps down with: the core's own, then the gates', for
/// metrics that want all label values present from the start (docs/REFERENCE.md lists them).
pub const STEP_DOWN_REASONS: [StepDownReason; StepDownReason::ALL.len() + 4] = {
    let mut all = [StepDownReason::Lost; StepDownReason::ALL.len() + 4];
    let mut i = 0;
    while i < StepDownReason::ALL.len() {
        all[i] = StepDownReason::ALL[i];
        i += 1;
    }
    all[i] = StepDownReason::Gate(EVICTION);
    all[i + 1] = StepDownReason::Gate(CANDIDACY);
    all[i + 2] = StepDownReason::Gate(CLOCK_RATE);
    all[i + 3] = StepDownReason::Gate(GUARD_FILE);
    all
};

/// A gate closed by a trouble that a term meets and only a term can try again: out with its
/// reason, then, once that term's step-down has ended, out for a pause that doubles with each
/// such term in a row (from the retry period up to 30 s, [`pause_after_term`]), then in again.
pub struct TermBackoff {
    gate: Gate,
    timing: Timing,
    standing: watch::Sender<Standing>,
    /// Terms in a row that met the trouble.
    terms: AtomicU32,
    /// The pause to start when the step-down the gate asked for has ended.
    pending: Mutex<Option<Duration>>,
}

impl TermBackoff {
    /// The gate, open, and the standing it gives.
    pub fn new(gate: Gate, timing: Timing) -> (Arc<Self>, watch::Receiver<Standing>) {
        let (standing, said) = watch::channel(Standing::Stands);
        let backoff = Self {
            gate,
            timing,
            standing,
            terms: AtomicU32::new(0),
            pending: Mutex::new(None),
        };
        (Arc::new(backoff), said)
    }

    /// Closes the gate for a term that met the trouble, with the words `detail` gives for the
    /// pause: the number of such terms in a row (1: the first, said at warn) and the pause, or
    /// `None` when the gate is closed already.
    pub fn close(&self, detail: impl FnOnce(Duration) -> String) -> Option<(u32, Duration)> {
        if !self.standing.borrow().stands() {
            return None;
        }
        let terms = self.terms.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        let pause = pause_after_term(terms, &self.timing);
        *locked(&self.pending) = Some(pause);
        self.standing.send_replace(Standing::Out {
            gate: self.gate,
            detail: Some(detail(pause)),
        });
        Some((terms, pause))
    }

    /// The trouble is over: the count starts again. Whether it had counted any term.
    pub fn clear(&self) -> bool {
        self.terms.swap(0, Ordering::Relaxed) > 0
    }

    /// A term ended: the pause the gate asked for, if any, starts, and the gate opens after it
    /// (then `opened` says so).
    pub fn term_ended(self: &Arc<Self>, opened: impl FnOnce() + Send + 'static) {
        let Some(pause) = locked(&self.pending).take() else {
            return;
        };
        let gate = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(pause).await;
            gate.standing.send_replace(Standing::Stands);
            opened();
        });
    }
}
