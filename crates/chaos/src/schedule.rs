//! The nemesis's schedule, drawn from a seed before the run starts: the same seed gives the
//! same list of faults with the same parameters. Which replica "the leader" is gets resolved
//! when the fault is injected.

use std::ops::RangeInclusive;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use clap::ValueEnum;

pub use crate::kinds::{FaultKind, FaultSpec};
use crate::params::gray_delays;
pub use crate::params::{DataLoss, EvictionPolicy, Target, TermEnd, VanishHow};
use leasehold::elector::Timing;

/// A fault in the schedule, with the quiet time before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scheduled {
    /// Its place in the schedule, from 0.
    pub index: usize,
    /// Quiet time between "a leader exists" and the injection.
    pub quiet_ms: u64,
    /// The fault.
    pub fault: FaultSpec,
}

/// `count` faults for `replicas` replicas, from `seed`. The kinds come in rounds, each round
/// every kind once in a shuffled order, so that every kind gets its share however short the
/// run.
#[cfg(test)]
pub fn generate(seed: u64, count: usize, replicas: usize, timing: &Timing) -> Vec<Scheduled> {
    generate_from(seed, count, replicas, timing, &FaultKind::SINGLE_GRAY)
}

/// The same, drawing from `kinds` (a topology's set).
pub fn generate_from(
    seed: u64,
    count: usize,
    replicas: usize,
    timing: &Timing,
    kinds: &[FaultKind],
) -> Vec<Scheduled> {
    let mut rng = StdRng::seed_from_u64(seed);
    let ttl = u64::try_from(timing.lease_duration.as_millis()).unwrap_or(u64::MAX);
    let call = u64::try_from(timing.call_timeout().as_millis()).unwrap_or(u64::MAX);
    let times = Times {
        ttl,
        call,
        delays: gray_delays(timing),
    };
    let mut round: Vec<FaultKind> = Vec::new();
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        if round.is_empty() {
            round = kinds.to_vec();
            round.shuffle(&mut rng);
        }
        let kind = round.pop().unwrap_or(FaultKind::PauseReplica);
        let quiet_ms = rng.random_range(200..=1_000);
        let fault = draw(&mut rng, kind, replicas, &times);
        out.push(Scheduled {
            index,
            quiet_ms,
            fault,
        });
    }
    out
}

fn target(rng: &mut StdRng, replicas: usize, leader_share: f64) -> Target {
    if replicas == 0 || rng.random_bool(leader_share) {
        Target::Leader
    } else {
        Target::Replica(rng.random_range(0..replicas))
    }
}

/// The kinds named in `--kinds` (their names in schedule.json, as `eviction` or
/// `late-delivery`).
pub fn parse_kinds(names: &[String]) -> anyhow::Result<Vec<FaultKind>> {
    names
        .iter()
        .map(|name| {
            FaultKind::from_str(name.trim(), true).map_err(|_| {
                let known: Vec<String> = FaultKind::ALL
                    .iter()
                    .filter_map(|k| k.to_possible_value().map(|v| v.get_name().to_owned()))
                    .collect();
                anyhow::anyhow!(
                    "--kinds {name:?}: not a fault kind; the kinds are {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// The faults of `kinds` in the schedule `seed` draws when it is `count` long, with their
/// indices and parameters as in the full schedule: a long run's fault of those kinds, replayed
/// without the rest.
pub fn restricted(
    seed: u64,
    count: usize,
    replicas: usize,
    timing: &Timing,
    set: &[FaultKind],
    kinds: &[FaultKind],
) -> Vec<Scheduled> {
    generate_from(seed, count, replicas, timing, set)
        .into_iter()
        .filter(|s| kinds.contains(&s.fault.kind()))
        .collect()
}

fn term_end(rng: &mut StdRng) -> TermEnd {
    if rng.random_bool(0.5) {
        TermEnd::Terminate
    } else {
        TermEnd::LinkDrop
    }
}

/// The kinds whose one parameter is a time in milliseconds: the range it is drawn from, and the
/// fault made of the draw.
type OneTime = (FaultKind, RangeInclusive<u64>, fn(u64) -> FaultSpec);

const ONE_TIME: [OneTime; 10] = [
    (FaultKind::RollingRestart, 50..=400, |gap_ms| {
        FaultSpec::RollingRestart { gap_ms }
    }),
    (FaultKind::RedisRestartKept, 100..=2_000, |down_ms| {
        FaultSpec::RedisRestartKept { down_ms }
    }),
    (FaultKind::RedisRestartLost, 100..=2_000, |down_ms| {
        FaultSpec::RedisRestartLost { down_ms }
    }),
    (FaultKind::RedisPause, 100..=1_500, |pause_ms| {
        FaultSpec::RedisPause { pause_ms }
    }),
    (FaultKind::FailingWork, 1_000..=3_000, |hold_ms| {
        FaultSpec::FailingWork { hold_ms }
    }),
    (FaultKind::ForeignLease, 0..=500, |hold_ms| {
        FaultSpec::ForeignLease { hold_ms }
    }),
    (FaultKind::ForeignReservation, 0..=500, |hold_ms| {
        FaultSpec::ForeignReservation { hold_ms }
    }),
    (FaultKind::MuteSentinel, 2_000..=5_000, |hold_ms| {
        FaultSpec::MuteSentinel { hold_ms }
    }),
    (FaultKind::ClusterFailover, 0..=1_000, |settle_ms| {
        FaultSpec::ClusterFailover { settle_ms }
    }),
    (FaultKind::SlotMigration, 0..=1_000, |settle_ms| {
        FaultSpec::SlotMigration { settle_ms }
    }),
];

/// The times the draws scale with, in milliseconds.
struct Times {
    /// The lease duration.
    ttl: u64,
    /// leasehold's call timeout.
    call: u64,
    /// The delays of a gray slow link: around the acquire bound.
    delays: RangeInclusive<u64>,
}

/// A gray fault's common draws: the sick replica (the leader one time in two), how long it
/// stays sick (three to four lease durations), and when, into that, a healthy leader leaves
/// (after one to two).
fn gray(rng: &mut StdRng, replicas: usize, ttl: u64) -> (Target, u64, u64) {
    (
        target(rng, replicas, 0.5),
        rng.random_range(3 * ttl..=4 * ttl),
        rng.random_range(ttl..=2 * ttl),
    )
}

fn draw(rng: &mut StdRng, kind: FaultKind, replicas: usize, times: &Times) -> FaultSpec {
    let Times { ttl, call, .. } = *times;
    if let Some((_, range, fault)) = ONE_TIME.iter().find(|(k, _, _)| *k == kind) {
        return fault(rng.random_range(range.clone()));
    }
    if kind.is_gray() {
        return draw_gray(rng, kind, replicas, times);
    }
    match kind {
        FaultKind::PauseReplica => FaultSpec::PauseReplica {
            target: target(rng, replicas, 0.75),
            pause_ms: ttl + rng.random_range(200..=1_500),
        },
        FaultKind::PauseChild => FaultSpec::PauseChild {
            pause_ms: ttl + rng.random_range(200..=1_500),
        },
        FaultKind::KillReplica => FaultSpec::KillReplica {
            target: target(rng, replicas, 0.75),
            down_ms: rng.random_range(0..=1_000),
        },
        FaultKind::LinkDelay => FaultSpec::LinkDelay {
            target: target(rng, replicas, 0.6),
            delay_ms: rng.random_range(20..=400),
            hold_ms: rng.random_range(500..=3_000),
        },
        FaultKind::LinkDrop => FaultSpec::LinkDrop {
            target: target(rng, replicas, 0.6),
            hold_ms: rng.random_range(300..=2_500),
        },
        FaultKind::LinkBlackhole => FaultSpec::LinkBlackhole {
            target: target(rng, replicas, 0.6),
            hold_ms: rng.random_range(300..=2_500),
        },
        FaultKind::SlowRedis => FaultSpec::SlowRedis {
            delay_ms: rng.random_range(20..=300),
            hold_ms: rng.random_range(500..=2_500),
        },
        FaultKind::Eviction => FaultSpec::Eviction {
            policy: match rng.random_range(0..3) {
                0 => EvictionPolicy::VolatileTtl,
                1 => EvictionPolicy::VolatileLru,
                _ => EvictionPolicy::AllkeysLru,
            },
            flood_keys: rng.random_range(3_000..=6_000),
            hold_ms: rng.random_range(500..=2_500),
        },
        FaultKind::Vanish => FaultSpec::Vanish {
            how: match rng.random_range(0..3) {
                0 => VanishHow::Del,
                1 => VanishHow::Flushdb,
                _ => VanishHow::Flushall,
            },
            follower: Target::Replica(rng.random_range(0..replicas.max(1))),
            wakes: rng.random_bool(0.5),
            down_ms: rng.random_range(0..=1_000),
        },
        FaultKind::LateDelivery => FaultSpec::LateDelivery {
            delay_ms: call + rng.random_range(100..=1_500),
            hold_ms: rng.random_range(1_000..=3_000),
            one_connection: rng.random_bool(0.3),
        },
        FaultKind::Daemonize => FaultSpec::Daemonize {
            hold_ms: rng.random_range(200..=1_000),
            end: term_end(rng),
        },
        FaultKind::IgnoreSigterm => FaultSpec::IgnoreSigterm {
            hold_ms: rng.random_range(200..=1_000),
            end: term_end(rng),
        },
        FaultKind::CpuStarve => FaultSpec::CpuStarve {
            target: target(rng, replicas, 0.75),
            quota_pct: rng.random_range(2..=10),
            hold_ms: rng.random_range(1_000..=4_000),
        },
        FaultKind::DeadSubscription => FaultSpec::DeadSubscription {
            follower: Target::Replica(rng.random_range(0..replicas.max(1))),
            hold_ms: rng.random_range(1_500..=4_000),
            release_after_ms: rng.random_range(200..=1_000),
        },
        FaultKind::MixedDurations => FaultSpec::MixedDurations {
            // At most all but two: the lease is handed to one of the run's timing that does
            // not lead yet.
            short: rng.random_range(1..=replicas.saturating_sub(2).clamp(1, 3)),
            first: rng.random_range(0..replicas.max(1)),
            loss: if rng.random_bool(0.5) {
                DataLoss::Flushall
            } else {
                DataLoss::RestartEmpty
            },
            after_ms: rng.random_range(0..=400),
            down_ms: rng.random_range(100..=1_000),
        },
        FaultKind::SentinelFailover => FaultSpec::SentinelFailover {
            via: rng.random_range(1..=2),
        },
        FaultKind::RollingRestart
        | FaultKind::RedisRestartKept
        | FaultKind::RedisRestartLost
        | FaultKind::RedisPause
        | FaultKind::FailingWork
        | FaultKind::ForeignLease
        | FaultKind::ForeignReservation
        | FaultKind::MuteSentinel
        | FaultKind::ClusterFailover
        | FaultKind::SlotMigration => unreachable!("{kind:?} is drawn from ONE_TIME"),
        _ => unreachable!("{kind:?} is gray"),
    }
}

fn draw_gray(rng: &mut StdRng, kind: FaultKind, replicas: usize, times: &Times) -> FaultSpec {
    let (target, hold_ms, leave_after_ms) = gray(rng, replicas, times.ttl);
    match kind {
        FaultKind::GraySlowRequests => FaultSpec::GraySlowRequests {
            target,
            delay_ms: rng.random_range(times.delays.clone()),
            hold_ms,
            leave_after_ms,
        },
        FaultKind::GraySlowReplies => FaultSpec::GraySlowReplies {
            target,
            delay_ms: rng.random_range(times.delays.clone()),
            hold_ms,
            leave_after_ms,
        },
        FaultKind::GrayResetReplies => FaultSpec::GrayResetReplies {
            target,
            hold_ms,
            leave_after_ms,
        },
        FaultKind::GrayNoPermission => FaultSpec::GrayNoPermission {
            target,
            hold_ms,
            leave_after_ms,
        },
        _ => FaultSpec::GrayStarved {
            target,
            quota_pct: rng.random_range(2..=10),
            hold_ms,
            leave_after_ms,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timing() -> Timing {
        Timing {
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_millis(900),
            retry_period: Duration::from_millis(250),
            ..Timing::default()
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        assert_eq!(generate(7, 40, 5, &timing()), generate(7, 40, 5, &timing()));
        assert_ne!(generate(7, 40, 5, &timing()), generate(8, 40, 5, &timing()));
    }

    #[test]
    fn a_restricted_schedule_keeps_the_full_schedules_faults_of_those_kinds() {
        let full = generate(3, 4 * FaultKind::SINGLE_GRAY.len(), 5, &timing());
        let kinds = [FaultKind::Eviction, FaultKind::Vanish];
        let some = restricted(
            3,
            4 * FaultKind::SINGLE_GRAY.len(),
            5,
            &timing(),
            &FaultKind::SINGLE_GRAY,
            &kinds,
        );
        assert_eq!(some.len(), 8);
        for s in &some {
            assert!(kinds.contains(&s.fault.kind()));
            assert_eq!(&full[s.index], s);
        }
    }

    #[test]
    fn every_kind_can_be_drawn_and_is_the_kind_asked_for() {
        let mut rng = StdRng::seed_from_u64(5);
        let times = Times {
            ttl: 1_500,
            call: 900,
            delays: 150..=600,
        };
        for kind in FaultKind::ALL {
            assert_eq!(draw(&mut rng, kind, 5, &times).kind(), kind);
        }
    }

    #[test]
    fn every_kind_gets_its_share() {
        let schedule = generate(1, 2 * FaultKind::SINGLE_GRAY.len(), 5, &timing());
        for kind in FaultKind::SINGLE_GRAY {
            let n = schedule.iter().filter(|s| s.fault.kind() == kind).count();
            assert_eq!(n, 2, "{kind:?}");
        }
    }
}
