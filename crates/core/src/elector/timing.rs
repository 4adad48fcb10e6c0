//! The three durations of leader election and the drift margin, with the rule that ties them.

use std::time::Duration;

use crate::clock::shown;

/// The part of the drift margin that no rate covers: the time a reply takes to be acted on.
pub const FIXED_DRIFT: Duration = Duration::from_millis(2);

/// Lease duration, renew deadline, retry period and drift factor, as in client-go's leader
/// election (LeaseDuration / RenewDeadline / RetryPeriod), plus the drift margin of Redlock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// How long one acquire or renew keeps the lease alive in Redis (the TTL).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failing renewal before it steps down, counted from
    /// the last successful one.
    pub renew_deadline: Duration,
    /// The watchdog's renewal interval, and a follower's fallback retry interval.
    pub retry_period: Duration,
    /// Share of the TTL held back for clock-rate drift between this replica and Redis
    /// (2 ms are always added).
    pub drift_factor: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            drift_factor: 0.01,
        }
    }
}

/// The rule every combination must keep.
pub const TIMING_RULE: &str = "lease duration > renew deadline > retry period × 1.2";

/// A field of [`Timing`], for errors that name what is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingField {
    /// [`Timing::lease_duration`].
    LeaseDuration,
    /// [`Timing::renew_deadline`].
    RenewDeadline,
    /// [`Timing::retry_period`].
    RetryPeriod,
    /// [`Timing::drift_factor`].
    DriftFactor,
}

impl TimingField {
    /// The field's name, as in the struct (`lease_duration`).
    pub fn name(self) -> &'static str {
        match self {
            TimingField::LeaseDuration => "lease_duration",
            TimingField::RenewDeadline => "renew_deadline",
            TimingField::RetryPeriod => "retry_period",
            TimingField::DriftFactor => "drift_factor",
        }
    }
}

/// What a duration must exceed under the timing rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingBound {
    /// Another field.
    Field(TimingField),
    /// The retry period with its 20 % jitter.
    JitteredRetry,
    /// The drift margin plus the retry period.
    DriftAndRetry,
}

/// A refused combination of durations. Messages name the field, the value and the rule; the
/// command line names its flags instead through [`TimingError::describe`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.describe(|field| field.name().to_owned()))]
pub enum TimingError {
    /// A duration below the smallest one Redis can express usefully.
    TooShort {
        field: TimingField,
        value: Duration,
        min: Duration,
    },
    /// A duration beyond [`Timing::MAX`].
    TooLong {
        field: TimingField,
        value: Duration,
        max: Duration,
    },
    /// Two durations in the wrong order.
    Order {
        larger: TimingField,
        larger_value: Duration,
        than: TimingBound,
        smaller_value: Duration,
    },
    /// The drift factor outside [0, 0.5).
    DriftFactor { value: f64 },
}

impl TimingError {
    /// The message, with each field called what `name` calls it.
    pub fn describe(&self, name: impl Fn(TimingField) -> String) -> String {
        match self {
            TimingError::TooShort { field, value, min } => format!(
                "{} {} is too short: it must be at least {}",
                name(*field),
                shown(*value),
                shown(*min)
            ),
            TimingError::TooLong { field, value, max } => format!(
                "{} {} is too long: it must be at most {}",
                name(*field),
                shown(*value),
                shown(*max)
            ),
            TimingError::Order {
                larger,
                larger_value,
                than,
                smaller_value,
            } => {
                let what = match than {
                    TimingBound::Field(field) => name(*field),
                    TimingBound::JitteredRetry => {
                        format!("{} × 1.2", name(TimingField::RetryPeriod))
                    }
                    TimingBound::DriftAndRetry => {
                        format!("the drift margin plus {}", name(TimingField::RetryPeriod))
                    }
                };
                format!(
                    "{} {} must be greater than {what} {} (rule: {TIMING_RULE})",
                    name(*larger),
                    shown(*larger_value),
                    shown(*smaller_value)
                )
            }
            TimingError::DriftFactor { value } => format!(
                "{} {value} must be at least 0 and below 0.5 (share of the lease duration held back for clock drift)",
                name(TimingField::DriftFactor)
            ),
        }
    }
}

impl Timing {
    /// The smallest lease duration, renew deadline or retry period accepted.
    pub const MIN: Duration = Duration::from_millis(10);

    /// The longest: an hour. A dead leader holds the lease that long, and after a data loss every
    /// replica waits that long: an hour is far past any failover worth waiting for, and keeps
    /// every deadline computed from it far from the end of representable time.
    pub const MAX: Duration = Duration::from_secs(3600);

    /// Checks the rule; every failure names the field, the value and the rule.
    pub fn validate(&self) -> Result<(), TimingError> {
        for (field, value) in [
            (TimingField::LeaseDuration, self.lease_duration),
            (TimingField::RenewDeadline, self.renew_deadline),
            (TimingField::RetryPeriod, self.retry_period),
        ] {
            if value < Self::MIN {
                return Err(TimingError::TooShort {
                    field,
                    value,
                    min: Self::MIN,
                });
            }
            if value > Self::MAX {
                return Err(TimingError::TooLong {
                    field,
                    value,
                    max: Self::MAX,
                });
            }
        }
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(TimingError::DriftFactor {
                value: self.drift_factor,
            });
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(TimingError::Order {
                larger: TimingField::LeaseDuration,
                larger_value: self.lease_duration,
                than: TimingBound::Field(TimingField::RenewDeadline),
                smaller_value: self.renew_deadline,
            });
        }
        let retry_jittered = self.retry_period.mul_f64(1.2);
        if self.renew_deadline <= retry_jittered {
            return Err(TimingError::Order {
                larger: TimingField::RenewDeadline,
                larger_value: self.renew_deadline,
                than: TimingBound::JitteredRetry,
                smaller_value: retry_jittered,
            });
        }
        if self.validity() <= self.retry_period {
            return Err(TimingError::Order {
                larger: TimingField::LeaseDuration,
                larger_value: self.lease_duration,
                than: TimingBound::DriftAndRetry,
                smaller_value: self.drift() + self.retry_period,
            });
        }
        Ok(())
    }

    /// The margin held back for clock drift: `lease duration × drift factor + 2 ms`.
    pub fn drift(&self) -> Duration {
        self.lease_duration.mul_f64(self.drift_factor) + FIXED_DRIFT
    }

    /// How long after `t0` the leader may act: `lease duration − drift`.
    pub fn validity(&self) -> Duration {
        self.lease_duration.saturating_sub(self.drift())
    }

    /// The bound of one renewal attempt: the retry period, but at least a third of the renew
    /// deadline, so that a single stuck call (a blackholed link) cannot eat the whole deadline
    /// and at least three attempts fit in it. The deadlines cut it shorter when they are near.
    pub fn renew_attempt_timeout(&self) -> Duration {
        self.retry_period.max(self.renew_deadline / 3)
    }

    /// The bound of one acquire: no longer than a renewal attempt gets, since over a link too
    /// slow to renew in time a term would only end at the renew deadline. An acquire that runs
    /// out of it may still have won (docs/DESIGN.md, "Gray failures").
    pub fn acquire_timeout(&self) -> Duration {
        self.call_timeout().min(self.renew_attempt_timeout())
    }

    /// The bound of one Redis call outside the watchdog (acquire, release, subscribe): the retry
    /// period, but at least 1 s so that a slow link still gets answers, and never beyond the
    /// renew deadline.
    pub fn call_timeout(&self) -> Duration {
        self.retry_period
            .max(Duration::from_secs(1))
            .min(self.renew_deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(lease: u64, renew: u64, retry: u64) -> Timing {
        Timing {
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
            drift_factor: 0.01,
        }
    }

    #[test]
    fn defaults_follow_client_go() {
        let d = Timing::default();
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(d.drift(), Duration::from_millis(152));
        assert_eq!(d.validity(), Duration::from_millis(14_848));
        assert_eq!(d.call_timeout(), Duration::from_secs(2));
        assert_eq!(d.acquire_timeout(), Duration::from_secs(2));
        // Short timings: a renewal attempt gets 300 ms, so an acquire gets no more.
        let short = t(1_500, 900, 250);
        assert_eq!(short.call_timeout(), Duration::from_millis(900));
        assert_eq!(short.acquire_timeout(), Duration::from_millis(300));
        assert_eq!(
            d.renew_attempt_timeout(),
            Duration::from_millis(3_333) + Duration::from_nanos(333_333)
        );
    }

    #[test]
    fn every_broken_rule_names_its_field_and_the_rule() {
        let cases = [
            (
                t(10_000, 10_000, 2_000),
                "lease_duration 10s must be greater than renew_deadline 10s (rule: lease duration > renew deadline > retry period × 1.2)",
            ),
            (
                t(10_000, 12_000, 2_000),
                "lease_duration 10s must be greater than renew_deadline 12s",
            ),
            (
                t(15_000, 2_400, 2_000),
                "renew_deadline 2.4s must be greater than retry_period × 1.2 2.4s",
            ),
            (
                t(15_000, 10_000, 5),
                "retry_period 5ms is too short: it must be at least 10ms",
            ),
            (t(0, 10_000, 2_000), "lease_duration 0s is too short"),
            (
                t(3_600_001, 10_000, 2_000),
                "lease_duration 3600.001s is too long: it must be at most 3600s",
            ),
            (
                Timing {
                    retry_period: Duration::MAX,
                    ..Timing::default()
                },
                "retry_period 18446744073709551615.999999999s is too long",
            ),
            (
                Timing {
                    lease_duration: Duration::MAX,
                    ..Timing::default()
                },
                "lease_duration 18446744073709551615.999999999s is too long",
            ),
            (
                t(30, 24, 20),
                "renew_deadline 24ms must be greater than retry_period × 1.2 24ms",
            ),
        ];
        for (timing, want) in cases {
            let got = timing.validate().unwrap_err().to_string();
            assert!(
                got.starts_with(want),
                "{timing:?}\n got: {got}\nwant: {want}"
            );
        }
        let drift = |drift_factor| Timing {
            drift_factor,
            ..Timing::default()
        };
        let got = drift(0.5).validate().unwrap_err().to_string();
        assert!(got.starts_with("drift_factor 0.5 must be"), "{got}");
        assert!(drift(f64::NAN).validate().is_err(), "NaN is refused");
        assert!(drift(-0.1).validate().is_err());
    }

    #[test]
    fn a_drift_margin_that_eats_the_retry_period_is_refused() {
        let mut timing = t(100, 60, 49);
        timing.drift_factor = 0.49;
        let got = timing.validate().unwrap_err().to_string();
        assert!(got.contains("drift margin plus retry_period"), "{got}");
    }
}
