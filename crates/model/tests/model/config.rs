//! What one run of the model explores: how many replicas and terms, the timing each runs, how
//! far time goes, which faults and how many, and which protocol (the current one or a pre-fix
//! one).

use std::time::Duration;

use leasehold_core::clock::BootInstant;
use leasehold_core::elector::Timing;
use leasehold_core::elector::decide::RateBound;

use crate::link::Health;
use crate::mirror::Semantics;
use crate::sentinels::SentinelWord;

/// One model tick is one second of every clock.
pub const TICK_MS: u64 = 1_000;

/// The timing a replica runs (its `--lease-duration`, `--renew-deadline`, `--retry-period` and
/// drift factor), in whole ticks. Contenders of one lease may run different ones: a rolling
/// change of `--lease-duration`, a `leasehold lock` beside a Deployment configured otherwise.
/// Each drift margin covers a replica clock that falls one tick behind Redis's within a lease
/// duration (see [`Config::max_lag`]), and each passes the validation the binary applies to its
/// flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Timings {
    /// 5 s lease, 4 s renew deadline, 3 s retry period, drift factor 0.2 (margin 1.002 s).
    #[default]
    Standard,
    /// 3 s lease, 2 s renew deadline, 1 s retry period, drift factor 0.34 (margin 1.022 s).
    Short,
}

impl Timings {
    pub fn timing(self) -> Timing {
        match self {
            Timings::Standard => Timing {
                lease_duration: Duration::from_secs(5),
                renew_deadline: Duration::from_secs(4),
                retry_period: Duration::from_secs(3),
                drift_factor: 0.2,
            },
            Timings::Short => Timing {
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_secs(1),
                drift_factor: 0.34,
            },
        }
    }

    /// The lease duration in milliseconds, as the replica sends it.
    pub fn ttl_ms(self) -> u64 {
        self.timing().lease_duration.as_millis() as u64
    }
}

/// Ticks of the Sentinel configuration: 5 already reach a second term and a term on the
/// promoted node, but the pre-fix words need 6 for two guards to pass (a cooldown of one lease
/// duration on the promoted node, then an acquire), and the fix is checked where they break.
pub const HORIZON_SENTINEL: u16 = 6;

/// The boot-clock instant of local tick `tick`.
pub fn instant(tick: u16) -> BootInstant {
    BootInstant::from_since_boot(Duration::from_millis(u64::from(tick) * TICK_MS))
}

#[derive(Clone, Debug)]
pub struct Config {
    pub replicas: u8,
    /// Replicas, the last ones, that run [`Timings::Short`]; the others run the standard one.
    pub shorter: u8,
    /// Redis loses its data (a restart without it, a failover that misses a write) only once
    /// every replica still contending knows the longest lease duration granted so far: its
    /// own, or a live term of it that an acquire reply said was held. A replica that never saw
    /// a longer term, while that term's holder is frozen, cannot know it; the design accepts
    /// that (docs/MODEL.md).
    pub loss_after_following: bool,
    /// Terms a replica may begin; after its last one it stops contending.
    pub max_terms: u8,
    /// Ticks of model time.
    pub horizon: u16,
    /// Lease keys evicted (or deleted, or gone early) while Redis keeps its other keys.
    pub evictions: u8,
    /// Redis restarts that keep the data (the run id changes).
    pub restarts_keeping_data: u8,
    /// Redis restarts that lose every key.
    pub restarts_losing_data: u8,
    /// Failovers to a replica that missed the last write.
    pub failovers: u8,
    /// Ticks one replica's clock may fall behind Redis's, at most one per `lag_every` ticks.
    pub max_lag: u8,
    /// Ticks between two lags of one replica's clock: 5, one per standard lease duration, is
    /// what the drift margin covers; fewer is a Redis clock that runs faster than the margin
    /// (as NTP may slew it).
    pub lag_every: u16,
    /// Whether the replicas take their validity from how fast Redis's clock can run against
    /// theirs (`decide::validity_at` with the bound [`Config::rate`] gives, as the leader measures
    /// it from its replies), instead of from the configured drift alone.
    pub measured_rate: bool,
    /// Messages that may stay in flight across a tick (delayed, reordered, late).
    pub max_delayed: u8,
    /// Handover requests an operator may make (each bound to the term the lease holds then).
    pub handovers: u8,
    /// Whether the leader's work may fail (a short term, then the pause after it).
    pub work_failures: bool,
    /// Liveness runs: every replica acts as soon as it is due and the network delivers within
    /// the tick (no pauses, no delays, no loss); faults only before `faults_until`.
    pub eager: bool,
    pub faults_until: u16,
    pub sem: Semantics,
    /// Sentinel failovers in which the old master keeps running and writable beside the
    /// promoted node (`sentinels.rs`).
    pub sentinel_failovers: u8,
    /// How the replicas take the Sentinels' word (the current majority, or a pre-fix word).
    pub sentinel_word: SentinelWord,
    /// Replicas, the first ones, whose replies arrive later than their attempt's bound for
    /// ever ([`Health::Late`]).
    pub late: u8,
    /// Replicas, the next ones, whose renewals Redis refuses for ever ([`Health::Refused`]).
    pub refused: u8,
    /// The elector before the fix: after an acquire whose outcome is unknown, it acquires
    /// again after the retry period (and the script replaces its own running term).
    pub acquire_again_when_unknown: bool,
}

impl Config {
    /// The configuration `cargo test` checks: 2 replicas, 2 terms each, one of each fault. Its
    /// horizon is 5 s: since a replica resolves an unanswered acquire at once (gray failures), a
    /// horizon of 6 s holds 10.8 million unique states and takes eight minutes of CI's fifteen;
    /// 5 s holds 3.0 million and still reaches every run the faults promise (a term after the
    /// data loss's cooldown, the give-back). `LEASEHOLD_MODEL_WITH=horizon=6` checks 6 s.
    pub fn ci() -> Config {
        Config {
            replicas: 2,
            shorter: 0,
            loss_after_following: false,
            max_terms: 2,
            horizon: 5,
            evictions: 1,
            restarts_keeping_data: 0,
            restarts_losing_data: 1,
            failovers: 0,
            max_lag: 1,
            max_delayed: 2,
            handovers: 0,
            work_failures: false,
            eager: false,
            faults_until: u16::MAX,
            sem: Semantics::default(),
            sentinel_failovers: 0,
            sentinel_word: SentinelWord::Majority,
            late: 0,
            refused: 0,
            acquire_again_when_unknown: false,
            lag_every: 5,
            measured_rate: false,
        }
    }

    /// The bound of Redis's clock rate against a replica of `timings` that measures it: the
    /// most lags one lease duration holds, Redis's ticks per tick of the replica over it.
    /// `None` when the replicas do not measure.
    pub fn rate(&self, timings: Timings) -> Option<RateBound> {
        if !self.measured_rate {
            return None;
        }
        let ticks = timings.ttl_ms() / TICK_MS;
        let lags = u64::from(self.max_lag).min(ticks.div_ceil(u64::from(self.lag_every)));
        assert!(
            lags < ticks,
            "a replica clock that stands still for a whole lease duration"
        );
        // The worst case as a narrow bound: narrow enough to say something, as a long baseline
        // makes the leader's.
        let worst = ticks as f64 / (ticks - lags) as f64;
        Some(RateBound {
            low: worst,
            high: worst,
        })
    }

    /// Contenders of different lease durations: replica 0 runs the standard timing (5 s),
    /// replica 1 the short one (3 s), with the CI configuration's faults; Redis loses its data
    /// only once the short replica followed a live term of the longest duration granted.
    pub fn mixed() -> Config {
        Config {
            shorter: 1,
            loss_after_following: true,
            evictions: 0,
            max_terms: 1,
            max_delayed: 1,
            max_lag: 0,
            ..Config::ci()
        }
    }

    /// The longer configuration behind `LEASEHOLD_MODEL_FULL=1`: 3 replicas, every fault.
    pub fn full() -> Config {
        Config {
            replicas: 3,
            horizon: 5,
            restarts_keeping_data: 1,
            failovers: 1,
            max_delayed: 2,
            handovers: 1,
            work_failures: true,
            ..Config::ci()
        }
    }

    /// The CI configuration's faults with three replicas (`LEASEHOLD_MODEL_FULL=3`): one of the
    /// three-replica configurations that finish on a small machine (docs/CHAOS.md, "The model checker's sizes and times").
    pub fn three_replicas() -> Config {
        Config {
            replicas: 3,
            // The 6 s it was measured with (docs/CHAOS.md), not CI's shorter horizon.
            horizon: 6,
            ..Config::ci()
        }
    }

    /// Three replicas and more Redis faults than CI (`LEASEHOLD_MODEL_FULL=3f`): the CI
    /// configuration's, plus a Redis restart that keeps its data and a failover to a replica
    /// that missed the last write, over 5 s with one delayed message: CI's time and network
    /// before they grew to 6 s and two, which multiplied the states eighteenfold for three replicas
    /// (docs/CHAOS.md has the sizes).
    pub fn three_replicas_more_faults() -> Config {
        Config {
            restarts_keeping_data: 1,
            failovers: 1,
            horizon: 5,
            max_delayed: 1,
            ..Config::three_replicas()
        }
    }

    /// The Sentinel configuration with three replicas (`LEASEHOLD_MODEL_FULL=3s`): two of
    /// them may follow the old master while the third leads on the promoted one.
    pub fn sentinel_among_three() -> Config {
        Config {
            replicas: 3,
            ..Config::sentinel()
        }
    }

    /// The handover configuration with three replicas (`LEASEHOLD_MODEL_FULL=3h`), where a
    /// reservation for one keeps the third out.
    pub fn handover_among_three() -> Config {
        Config {
            replicas: 3,
            ..Config::handover()
        }
    }

    /// The handover: 2 replicas, an operator's request at any moment (to anyone or to the
    /// other replica), a delayed message around it; work failures on, Redis faults off (the
    /// full configuration has both).
    pub fn handover() -> Config {
        Config {
            handovers: 1,
            horizon: 5,
            max_delayed: 1,
            evictions: 0,
            restarts_losing_data: 0,
            max_lag: 0,
            work_failures: true,
            ..Config::ci()
        }
    }

    /// A Sentinel failover with the old master kept running and writable: 2 replicas, no other
    /// Redis fault, one delayed message, the horizon long enough for the promoted node's
    /// cooldown and a term there.
    pub fn sentinel() -> Config {
        Config {
            horizon: HORIZON_SENTINEL,
            evictions: 0,
            restarts_losing_data: 0,
            max_lag: 0,
            sentinel_failovers: 1,
            max_delayed: 1,
            ..Config::ci()
        }
    }

    /// Liveness: faults early, then a fair, fault-free stretch long enough for a cooldown
    /// (one lease duration) and an acquire.
    pub fn liveness() -> Config {
        Config {
            max_terms: 3,
            horizon: 16,
            max_lag: 0,
            max_delayed: 0,
            handovers: 0,
            work_failures: false,
            eager: true,
            faults_until: 4,
            failovers: 1,
            restarts_keeping_data: 1,
            ..Config::ci()
        }
    }
}

impl Config {
    /// Gray failures (docs/DESIGN.md): three replicas on the short timing, r0's
    /// replies later than its bound for ever, r1's renewals refused for ever, r2 healthy; fair
    /// and prompt as the liveness run, no other fault, no limit on terms. The short timing's
    /// acquire bound and retry (1 s + 1 s) fit inside its lease (3 s), as the timings
    /// do, so an acquire tried again after its bound lands inside its own term.
    pub fn gray() -> Config {
        Config {
            replicas: 3,
            shorter: 3,
            late: 1,
            refused: 1,
            max_terms: u8::MAX,
            horizon: 10,
            evictions: 0,
            restarts_losing_data: 0,
            max_lag: 0,
            max_delayed: 0,
            eager: true,
            faults_until: 0,
            ..Config::ci()
        }
    }

    /// How replica `id`'s link fares.
    pub fn health(&self, id: u8) -> Health {
        if id < self.late {
            Health::Late
        } else if id < self.late.saturating_add(self.refused) {
            Health::Refused
        } else {
            Health::Healthy
        }
    }

    /// Whether the replicas run different timings.
    pub fn timings_differ(&self) -> bool {
        self.shorter > 0 && self.shorter < self.replicas
    }

    /// The timing replica `id` runs.
    pub fn timings(&self, id: u8) -> Timings {
        if id + self.shorter >= self.replicas {
            Timings::Short
        } else {
            Timings::Standard
        }
    }

    /// This configuration with `overrides` applied: `field=value` pairs separated by commas, as
    /// `LEASEHOLD_MODEL_WITH` gives them (`horizon=6,max_delayed=2`). A field it does not know
    /// or a value that does not parse is an error naming both.
    pub fn with(mut self, overrides: &str) -> Result<Config, String> {
        for pair in overrides
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (field, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("LEASEHOLD_MODEL_WITH: {pair:?} is not field=value"))?;
            let bad = |rule: &str| {
                format!("LEASEHOLD_MODEL_WITH: {field}={value:?} is not valid: {rule}")
            };
            let count = || value.parse::<u8>().map_err(|_| bad("a whole number 0-255"));
            match field {
                "replicas" => self.replicas = count()?,
                "shorter" => self.shorter = count()?,
                "loss_after_following" => {
                    self.loss_after_following = value.parse().map_err(|_| bad("true or false"))?
                }
                "max_terms" => self.max_terms = count()?,
                "horizon" => {
                    self.horizon = value
                        .parse()
                        .map_err(|_| bad("a whole number of ticks 0-65535"))?
                }
                "evictions" => self.evictions = count()?,
                "restarts_keeping_data" => self.restarts_keeping_data = count()?,
                "restarts_losing_data" => self.restarts_losing_data = count()?,
                "failovers" => self.failovers = count()?,
                "max_lag" => self.max_lag = count()?,
                "max_delayed" => self.max_delayed = count()?,
                "handovers" => self.handovers = count()?,
                "work_failures" => {
                    self.work_failures = value.parse().map_err(|_| bad("true or false"))?
                }
                "sentinel_failovers" => self.sentinel_failovers = count()?,
                "late" => self.late = count()?,
                "refused" => self.refused = count()?,
                "acquire_again_when_unknown" => {
                    self.acquire_again_when_unknown =
                        value.parse().map_err(|_| bad("true or false"))?
                }
                "sentinel_word" => {
                    self.sentinel_word = SentinelWord::parse(value)
                        .ok_or_else(|| bad("majority, first-listed or unconfirmed"))?
                }
                _ => {
                    return Err(format!(
                        "LEASEHOLD_MODEL_WITH: no field {field:?}; the fields are replicas, \
                         shorter, loss_after_following, max_terms, horizon, evictions, restarts_keeping_data, \
                         restarts_losing_data, failovers, max_lag, max_delayed, handovers, \
                         work_failures, sentinel_failovers, sentinel_word, late, refused, \
                         acquire_again_when_unknown"
                    ));
                }
            }
        }
        if self.replicas == 0 {
            return Err("LEASEHOLD_MODEL_WITH: replicas=0 is not valid: at least 1".into());
        }
        if self.shorter > self.replicas {
            return Err(format!(
                "LEASEHOLD_MODEL_WITH: shorter={} is not valid: at most replicas ({})",
                self.shorter, self.replicas
            ));
        }
        Ok(self)
    }
}
