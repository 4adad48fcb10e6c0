//! Liveness: after each fault, how long until a replica leads again, against the bound the
//! configuration implies; and the share of time with a leader.
//!
//! A *working* leader is a replica inside its validity window whose leasehold process runs and
//! is not paused: a SIGSTOPped leader still holds its lease until the deadline, but leads
//! nothing. The *outage* of a fault is the time without a working leader from its injection
//! until leadership is back; the *recovery* is the time from the fault's reference instant
//! (its injection for process faults, its end for Redis and link faults) to a working leader.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::history::Window;
use crate::intervals::IntervalSet;
use crate::kinds::GRAY_TERMS;
use crate::nemesis::{Impairment, Journal};
use crate::schedule::FaultKind;
use crate::time::Micros;
use leasehold::elector::Timing;

/// The outcome of one fault.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The fault's index.
    pub index: usize,
    /// Its kind.
    pub kind: FaultKind,
    /// Time without a working leader, from the injection to recovery.
    pub outage: Micros,
    /// From the reference instant to a working leader; `None`: never.
    pub recovery: Option<Micros>,
    /// The bound on `recovery`.
    pub bound: Micros,
    /// Whether another term (token) leads after recovery than before the fault.
    pub leader_changed: bool,
    /// Terms begun from the injection to the recovery (churn).
    pub terms_begun: usize,
    /// The longest stretch without a working leader from the injection to the recovery: from
    /// the moment the lease became unusable (the last working leader's term ended) or free, to
    /// the next working leader.
    pub leaderless: Micros,
    /// From the injection to the recovery (or the end of the record): the time churn is
    /// counted over.
    pub span: Micros,
}

impl Outcome {
    /// Whether leadership was interrupted at all.
    pub fn disrupted(&self) -> bool {
        self.outage > 0
    }

    /// Whether recovery came within the bound.
    pub fn within_bound(&self) -> bool {
        self.recovery.is_some_and(|r| r <= self.bound)
    }
}

/// Min, median, 99th percentile and max (nearest rank).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    /// How many values.
    pub n: usize,
    /// Smallest.
    pub min: Micros,
    /// Median.
    pub p50: Micros,
    /// 99th percentile.
    pub p99: Micros,
    /// Largest.
    pub max: Micros,
}

impl Spread {
    /// Of `values` (`None` when empty).
    pub fn of(mut values: Vec<Micros>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let rank = |p: f64| {
            let r = (p * values.len() as f64).ceil() as usize;
            values[r.clamp(1, values.len()) - 1]
        };
        Some(Spread {
            n: values.len(),
            min: values[0],
            p50: rank(0.50),
            p99: rank(0.99),
            max: values[values.len() - 1],
        })
    }
}

/// Per kind of fault.
#[derive(Debug, Clone, Serialize)]
pub struct KindStats {
    /// Faults injected.
    pub injected: usize,
    /// Faults skipped (nothing to hit).
    pub skipped: usize,
    /// Faults injected while no replica led (the previous fault's failover was not over):
    /// not measured, since their outage belongs to that fault.
    pub unmeasured: usize,
    /// Faults that hit the leader.
    pub hit_leader: usize,
    /// Faults after which another term led.
    pub leader_changes: usize,
    /// Faults that interrupted leadership.
    pub disrupted: usize,
    /// Outage of the disrupted ones (the failover time).
    pub outage: Option<Spread>,
    /// Recovery of all.
    pub recovery: Option<Spread>,
    /// The bound on recovery.
    pub bound: Micros,
    /// Recoveries beyond the bound (or never).
    pub over_bound: usize,
    /// Terms begun from the injections to the recoveries (churn).
    pub terms_begun: usize,
    /// The longest stretch without a working leader, per fault.
    pub leaderless: Option<Spread>,
    /// The bound on it (gray faults: [`FaultKind::leaderless_bound`]).
    pub leaderless_bound: Option<Micros>,
    /// Faults whose longest leaderless stretch went beyond its bound.
    pub leaderless_over: usize,
    /// Terms begun per minute, from the injections to the recoveries.
    pub churn_per_min: f64,
    /// The bound on it (gray faults: [`GRAY_TERMS`] per fault over the same time).
    pub churn_bound_per_min: Option<f64>,
    /// Faults that began more terms than [`GRAY_TERMS`].
    pub churn_over: usize,
}

impl KindStats {
    /// Gray faults beyond either of their bounds (leaderless time, churn).
    pub fn gray_over(&self) -> usize {
        self.leaderless_over + self.churn_over
    }
}

/// Liveness results.
#[derive(Debug, Serialize)]
pub struct Liveness {
    /// Per fault.
    pub outcomes: Vec<Outcome>,
    /// Per kind.
    pub kinds: BTreeMap<FaultKind, KindStats>,
    /// Share of [first election, end] in which some replica held a valid lease.
    pub availability_held: f64,
    /// Share of the same time in which a working leader existed.
    pub availability_working: f64,
    /// The measured stretch.
    pub measured: (Micros, Micros),
}

/// The set of instants at which some replica was a working leader.
pub fn working(windows: &[Window], journal: &Journal) -> IntervalSet {
    let mut spans = Vec::new();
    for w in windows {
        let impaired = IntervalSet::from_spans(
            journal
                .pauses
                .iter()
                .chain(journal.downs.iter())
                .filter(|s| s.replica == Some(w.replica) && s.incarnation == w.incarnation)
                .map(|s| {
                    // A process taken down never comes back as the same incarnation.
                    if s.what == Impairment::Paused {
                        (s.from, s.to)
                    } else {
                        (s.from, Micros::MAX)
                    }
                }),
        );
        let term = IntervalSet::from_spans([(w.start, w.end)]);
        spans.extend_from_slice(term.minus(&impaired).spans());
    }
    IntervalSet::from_spans(spans)
}

/// Measures every fault and the availability.
pub fn analyse(windows: &[Window], journal: &Journal, timing: &Timing) -> Liveness {
    let held = IntervalSet::from_spans(windows.iter().map(|w| (w.start, w.end)));
    let working = working(windows, journal);
    let token_at = |t: Micros| {
        windows
            .iter()
            .filter(|w| w.start <= t && t < w.end)
            .map(|w| w.token)
            .max()
    };
    let mut outcomes = Vec::new();
    let mut kinds: BTreeMap<FaultKind, KindStats> = BTreeMap::new();
    for kind in FaultKind::ALL {
        kinds.insert(
            kind,
            KindStats {
                injected: 0,
                skipped: 0,
                unmeasured: 0,
                hit_leader: 0,
                leader_changes: 0,
                disrupted: 0,
                outage: None,
                recovery: None,
                bound: micros(kind.bound(timing)),
                over_bound: 0,
                terms_begun: 0,
                leaderless: None,
                leaderless_bound: kind.leaderless_bound(timing).map(micros),
                leaderless_over: 0,
                churn_per_min: 0.0,
                churn_bound_per_min: None,
                churn_over: 0,
            },
        );
    }
    for f in &journal.faults {
        let kind = f.kind();
        let stats = kinds.get_mut(&kind).expect("every kind has stats");
        if f.skipped.is_some() {
            stats.skipped += 1;
            continue;
        }
        stats.injected += 1;
        if f.target_led {
            stats.hit_leader += 1;
        }
        if f.leader_before.is_none() {
            stats.unmeasured += 1;
            continue;
        }
        let reference = if kind.counts_from_injection() {
            f.inject
        } else {
            f.clear
        };
        let back = working.next_covered(reference);
        let until = back.unwrap_or(journal.end);
        let led = working.clip(f.inject, until);
        let outage = (until - f.inject) - led.measure();
        let leaderless = IntervalSet::from_spans([(f.inject, until)])
            .minus(&led)
            .spans()
            .iter()
            .map(|(a, b)| b - a)
            .max()
            .unwrap_or(0);
        let before = f.leader_before.map(|(_, t)| t);
        let outcome = Outcome {
            index: f.index,
            kind,
            outage,
            recovery: back.map(|b| b - reference),
            bound: stats.bound,
            leader_changed: back.and_then(token_at) != before,
            terms_begun: windows
                .iter()
                .filter(|w| w.start >= f.inject && w.start <= until)
                .count(),
            leaderless,
            span: until - f.inject,
        };
        if stats.leaderless_bound.is_some_and(|b| leaderless > b) {
            stats.leaderless_over += 1;
        }
        if kind.is_gray() && outcome.terms_begun > GRAY_TERMS {
            stats.churn_over += 1;
        }
        stats.terms_begun += outcome.terms_begun;
        if outcome.leader_changed {
            stats.leader_changes += 1;
        }
        if outcome.disrupted() {
            stats.disrupted += 1;
        }
        if !outcome.within_bound() {
            stats.over_bound += 1;
        }
        outcomes.push(outcome);
    }
    for (kind, stats) in &mut kinds {
        let mine = || outcomes.iter().filter(|o| o.kind == *kind);
        stats.outage = Spread::of(mine().filter(|o| o.disrupted()).map(|o| o.outage).collect());
        stats.recovery = Spread::of(mine().filter_map(|o| o.recovery).collect());
        stats.leaderless = Spread::of(mine().map(|o| o.leaderless).collect());
        let minutes = mine().map(|o| o.span).sum::<Micros>() as f64 / 60e6;
        let measured = mine().count();
        if minutes > 0.0 {
            stats.churn_per_min = mine().map(|o| o.terms_begun).sum::<usize>() as f64 / minutes;
            if kind.is_gray() {
                stats.churn_bound_per_min = Some((GRAY_TERMS * measured) as f64 / minutes);
            }
        }
    }
    let from = windows.iter().map(|w| w.start).min().unwrap_or(journal.end);
    let to = journal.end.max(from + 1);
    let span = (to - from) as f64;
    Liveness {
        outcomes,
        kinds,
        availability_held: held.clip(from, to).measure() as f64 / span,
        availability_working: working.clip(from, to).measure() as f64 / span,
        measured: (from, to),
    }
}

fn micros(d: std::time::Duration) -> Micros {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::history::WindowEnd;
    use crate::nemesis::FaultRecord;
    use crate::schedule::{FaultSpec, Target};
    use crate::time::MS;

    fn term(replica: usize, token: u64, from_ms: Micros, to_ms: Micros) -> Window {
        Window {
            replica,
            incarnation: 0,
            token,
            start: from_ms * MS,
            end: to_ms * MS,
            deadline: to_ms * MS,
            ended: WindowEnd::Deadline,
            stepped_down: None,
            reason: None,
        }
    }

    /// A gray fault (replies reset) from 1 s to 6 s, with r0 leading before it.
    fn gray_fault() -> Journal {
        Journal {
            faults: vec![FaultRecord {
                index: 0,
                spec: FaultSpec::GrayResetReplies {
                    target: Target::Leader,
                    hold_ms: 5_000,
                    leave_after_ms: 1_500,
                },
                target: Some(0),
                target_led: true,
                leader_before: Some((0, 1)),
                inject: 1_000 * MS,
                clear: 6_000 * MS,
                skipped: None,
                detail: None,
                said: None,
            }],
            end: 20_000 * MS,
            ..Journal::default()
        }
    }

    #[test]
    fn a_gray_faults_leaderless_time_is_its_longest_stretch_and_its_churn_is_checked_per_fault() {
        let timing = Timing {
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_millis(900),
            retry_period: Duration::from_millis(250),
            ..Timing::default()
        };
        // (terms, longest stretch without a leader in ms, terms begun, over the leaderless
        // bound, over the churn bound)
        let cases: [(Vec<Window>, Micros, usize, usize, usize); 3] = [
            // The sick leader's term ends at 2 s; a healthy one leads from 2.5 s, leaves at
            // 4 s, the next leads from 4.1 s: two stretches, the longest 500 ms.
            (
                vec![
                    term(0, 1, 0, 2_000),
                    term(1, 2, 2_500, 4_000),
                    term(2, 3, 4_100, 20_000),
                ],
                500,
                2,
                0,
                0,
            ),
            // Nobody leads from 2 s to 7 s: past three lease durations (4.5 s).
            (
                vec![term(0, 1, 0, 2_000), term(1, 2, 7_000, 20_000)],
                5_000,
                1,
                1,
                0,
            ),
            // Four terms in the fault: one more than a gray fault may begin.
            (
                vec![
                    term(0, 1, 0, 1_500),
                    term(3, 2, 1_600, 2_000),
                    term(3, 3, 2_100, 2_500),
                    term(3, 4, 2_600, 3_000),
                    term(1, 5, 3_100, 20_000),
                ],
                100,
                4,
                0,
                1,
            ),
        ];
        for (windows, longest_ms, begun, leaderless_over, churn_over) in cases {
            let live = analyse(&windows, &gray_fault(), &timing);
            let o = &live.outcomes[0];
            assert_eq!(o.leaderless, longest_ms * MS, "{windows:?}");
            assert_eq!(o.terms_begun, begun, "{windows:?}");
            let k = &live.kinds[&FaultKind::GrayResetReplies];
            assert_eq!(k.leaderless_bound, Some(4_500 * MS));
            assert_eq!(k.leaderless_over, leaderless_over, "{windows:?}");
            assert_eq!(k.churn_over, churn_over, "{windows:?}");
            let minutes = o.span as f64 / 60e6;
            assert_eq!(k.churn_bound_per_min, Some(3.0 / minutes));
            assert!((k.churn_per_min - begun as f64 / minutes).abs() < 1e-9);
        }
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let s = Spread::of((1..=200).collect()).expect("values");
        assert_eq!((s.min, s.p50, s.p99, s.max), (1, 100, 198, 200));
        let one = Spread::of(vec![7]).expect("one value");
        assert_eq!((one.min, one.p50, one.p99, one.max), (7, 7, 7, 7));
        assert!(Spread::of(Vec::new()).is_none());
    }
}
