//! Instants and durations for the decisions' table tests (in each file beside them), in
//! milliseconds.

use std::time::Duration;

use crate::clock::BootInstant;
use crate::elector::Timing;

pub(super) fn at(ms: u64) -> BootInstant {
    BootInstant::from_since_boot(Duration::from_millis(ms))
}

pub(super) fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A timing of `lease` / `renew` / `retry` ms with the default drift factor.
pub(super) fn timing(lease: u64, renew: u64, retry: u64) -> Timing {
    Timing {
        lease_duration: ms(lease),
        renew_deadline: ms(renew),
        retry_period: ms(retry),
        drift_factor: 0.01,
    }
}
