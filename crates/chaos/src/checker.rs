//! The safety checks, on what the logs and the resource recorded, with nothing taken from
//! leasehold's code: validity windows never overlap and their tokens only grow; the resource
//! accepted no token lower than one it had accepted; every write carries a token some
//! replica's log gave it; every refused write came from a replica whose term had ended.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::history::{Window, WindowEnd};
use crate::intervals::overlapping_pairs;
use crate::nemesis::{Impairment, Journal};
use crate::replica::Incarnation;
use crate::resource::Write;
use crate::time::{self, Micros};

/// Which promise a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// Two validity windows overlap in real time.
    Overlap,
    /// A later term has a token no higher than an earlier one (or a token is used twice).
    TokenOrder,
    /// The resource accepted a token lower than one it had accepted before.
    StaleWriteAccepted,
    /// A write carries a token no replica's log shows for that replica.
    UnknownToken,
    /// A write was refused while its replica's term was still valid: someone else had
    /// written with a higher token during that term.
    RefusedWhileValid,
    /// A leader's command still ran after its leasehold process was gone.
    CommandOutlivedLeasehold,
    /// Two terms' `became leader` … `stepped down` stretches overlap by the replicas' own logs
    /// while both processes ran.
    LogOverlap,
    /// A write arrived after its term's validity deadline from a process (the command or a
    /// descendant) whose leasehold ran unimpeded: leasehold let its work outlive the term.
    WriteAfterTerm,
    /// PostgreSQL committed a write whose token was lower than one it had committed before.
    PgStaleWriteAccepted,
    /// PostgreSQL committed a write whose token no `became leader` line of its replica
    /// announced.
    PgUntraced,
}

impl Check {
    /// Every check, in report order.
    pub const ALL: [Check; 10] = [
        Check::Overlap,
        Check::TokenOrder,
        Check::StaleWriteAccepted,
        Check::UnknownToken,
        Check::RefusedWhileValid,
        Check::CommandOutlivedLeasehold,
        Check::LogOverlap,
        Check::WriteAfterTerm,
        Check::PgStaleWriteAccepted,
        Check::PgUntraced,
    ];

    /// What it checks, for the report.
    pub fn label(self) -> &'static str {
        match self {
            Check::Overlap => "no two validity windows overlap in real time",
            Check::TokenOrder => "each new term has a higher token than every earlier term",
            Check::StaleWriteAccepted => {
                "the resource accepted no token lower than one it had accepted"
            }
            Check::UnknownToken => "every write's token is one its replica's log announced",
            Check::RefusedWhileValid => {
                "every refused write came from a replica whose term had ended (stepped down, paused past its deadline, or killed)"
            }
            Check::CommandOutlivedLeasehold => "no command outlived its leasehold process",
            Check::LogOverlap => {
                "no two terms' `became leader` … `stepped down` overlap by the replicas' own logs (while both ran)"
            }
            Check::WriteAfterTerm => {
                "no write after its term's deadline by a process (command or descendant) whose leasehold ran"
            }
            Check::PgStaleWriteAccepted => {
                "PostgreSQL committed no token lower than one it had committed"
            }
            Check::PgUntraced => {
                "every PostgreSQL write's token is one its replica's log announced"
            }
        }
    }
}

/// One broken promise.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    /// Which.
    pub check: Check,
    /// When.
    pub at: Micros,
    /// The evidence.
    pub detail: String,
}

/// Why a refused write was refused, traced to its replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// Its leasehold was SIGSTOPped past the deadline (the command ran on).
    ReplicaPaused,
    /// Its command was SIGSTOPped, and wrote when it continued.
    CommandPaused,
    /// Its leasehold was killed (the write was in flight).
    ReplicaKilled,
    /// After the replica logged its step-down.
    AfterStepDown,
    /// After the validity deadline, with no other explanation.
    AfterDeadline,
}

impl Refusal {
    /// For the report.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::ReplicaPaused => "its leasehold was paused (SIGSTOP) past its deadline",
            Refusal::CommandPaused => "its command was paused (SIGSTOP) and wrote on resuming",
            Refusal::ReplicaKilled => "its leasehold had been killed",
            Refusal::AfterStepDown => "after its replica stepped down",
            Refusal::AfterDeadline => "after its term's validity deadline",
        }
    }
}

/// The outcome of the safety checks.
#[derive(Debug, Default, Serialize)]
pub struct Safety {
    /// Every violation.
    pub violations: Vec<Violation>,
    /// Number of terms.
    pub terms: usize,
    /// The smallest gap between the end of all earlier windows and the start of the next,
    /// when the window that ended last had stepped down (the lease was released at once).
    pub min_gap_after_step_down: Option<Micros>,
    /// The same, when it ended at its deadline (the lease had to run out in Redis).
    pub min_gap_after_deadline: Option<Micros>,
    /// Writes accepted.
    pub accepted: usize,
    /// Writes refused.
    pub refused: usize,
    /// Refused writes by cause.
    pub refusals: BTreeMap<Refusal, usize>,
    /// Accepted writes that arrived after their term's validity ended, before any higher
    /// token reached the resource (allowed by fencing; a paused leader's command).
    pub late_accepted: usize,
    /// The latest of those, after its term's end.
    pub late_max: Micros,
    /// Stale writes an unfenced resource would have accepted in this run (the
    /// counterfactual negative control: the same check on every write, as if all had been
    /// accepted).
    pub counterfactual_stale: usize,
}

impl Safety {
    /// Violations of `check`.
    pub fn count(&self, check: Check) -> usize {
        self.violations.iter().filter(|v| v.check == check).count()
    }
}

/// Runs every check.
pub fn check(
    windows: &[Window],
    writes: &[Write],
    journal: &Journal,
    replicas: &[Vec<Incarnation>],
) -> Safety {
    let mut s = Safety {
        terms: windows.len(),
        ..Safety::default()
    };
    check_windows(windows, &mut s);
    for ((_, highest), w) in stale_writes(writes.iter().filter(|w| w.accepted)) {
        s.violations.push(Violation {
            check: Check::StaleWriteAccepted,
            at: w.at,
            detail: format!(
                "write from {} (pid {}, seq {}) with token {} accepted at {} after token {highest} had been accepted",
                w.identity, w.pid, w.seq, w.token, w.at
            ),
        });
    }
    s.counterfactual_stale = stale_writes(writes.iter()).len();
    check_writes(windows, writes, journal, &mut s);
    for (r, incs) in replicas.iter().enumerate() {
        for inc in incs {
            for note in &inc.notes {
                s.violations.push(Violation {
                    check: Check::CommandOutlivedLeasehold,
                    at: inc.ended.unwrap_or_default(),
                    detail: format!("r{r}#{}: {note}", inc.number),
                });
            }
        }
    }
    s.violations.sort_by_key(|v| (v.at, v.check));
    s
}

fn check_windows(windows: &[Window], s: &mut Safety) {
    for (a, w) in overlapping_pairs(windows, |w| (w.start, w.end)) {
        s.violations.push(Violation {
            check: Check::Overlap,
            at: w.start,
            detail: format!(
                "{} overlaps {} by {} ms",
                a.term().held("valid"),
                w.term().held("valid"),
                time::ms(a.end.min(w.end) - w.start)
            ),
        });
    }
    let mut latest: Option<&Window> = None;
    let mut highest: Option<&Window> = None;
    for w in windows {
        if let Some(l) = latest {
            let gap = w.start - l.end;
            let min = match l.ended {
                WindowEnd::SteppedDown(_) => &mut s.min_gap_after_step_down,
                WindowEnd::Deadline => &mut s.min_gap_after_deadline,
            };
            *min = Some(min.map_or(gap, |g| g.min(gap)));
        }
        if let Some(h) = highest
            && w.token <= h.token
        {
            s.violations.push(Violation {
                check: Check::TokenOrder,
                at: w.start,
                detail: format!(
                    "r{}#{} began a term with token {} after r{}#{} had token {}",
                    w.replica, w.incarnation, w.token, h.replica, h.incarnation, h.token
                ),
            });
        }
        if highest.is_none_or(|h| w.token > h.token) {
            highest = Some(w);
        }
        if latest.is_none_or(|l| w.end > l.end) {
            latest = Some(w);
        }
    }
}

/// The writes whose token is lower than the highest among the writes before them, with
/// their position and that highest token.
pub fn stale_writes<'a>(writes: impl Iterator<Item = &'a Write>) -> Vec<((usize, u64), &'a Write)> {
    let mut highest: Option<u64> = None;
    let mut out = Vec::new();
    for (i, w) in writes.enumerate() {
        match highest {
            Some(h) if w.token < h => out.push(((i, h), w)),
            _ => highest = Some(highest.map_or(w.token, |h| h.max(w.token))),
        }
    }
    out
}

fn check_writes(windows: &[Window], writes: &[Write], journal: &Journal, s: &mut Safety) {
    let by_term: HashMap<(String, u64), &Window> = windows
        .iter()
        .map(|w| ((format!("r{}", w.replica), w.token), w))
        .collect();
    let mut unknown = Unannounced::default();
    for w in writes {
        if w.accepted {
            s.accepted += 1;
        } else {
            s.refused += 1;
        }
        let Some(term) = by_term.get(&(w.identity.clone(), w.token)) else {
            unknown.add(&w.identity, w.token, w.at);
            continue;
        };
        if w.accepted {
            if w.at >= term.end {
                s.late_accepted += 1;
                s.late_max = s.late_max.max(w.at - term.end);
            }
            continue;
        }
        if w.at < term.end {
            s.violations.push(Violation {
                check: Check::RefusedWhileValid,
                at: w.at,
                detail: format!(
                    "{} token {} (pid {}, seq {}) refused at {}, {} ms before its term's end",
                    w.identity,
                    w.token,
                    w.pid,
                    w.seq,
                    w.at,
                    time::ms(term.end - w.at)
                ),
            });
            continue;
        }
        *s.refusals.entry(trace(term, w.at, journal)).or_default() += 1;
    }
    unknown.report(Check::UnknownToken, "write(s) from", s);
}

/// Writes whose token no `became leader` line of their replica announced, counted by replica
/// and token, with the time of the first.
#[derive(Default)]
pub(crate) struct Unannounced(BTreeMap<(String, u64), (Micros, usize)>);

impl Unannounced {
    /// One more such write, by `identity` with `token` at `at`.
    pub(crate) fn add(&mut self, identity: &str, token: u64, at: Micros) {
        self.0
            .entry((identity.to_owned(), token))
            .or_insert((at, 0))
            .1 += 1;
    }

    /// One violation of `check` for each replica and token, at its first write; `what` names
    /// the writes (`write(s) from`).
    pub(crate) fn report(self, check: Check, what: &str, s: &mut Safety) {
        for ((identity, token), (at, n)) in self.0 {
            s.violations.push(Violation {
                check,
                at,
                detail: format!(
                    "{n} {what} {identity} with token {token}, which no `became leader` line of {identity} announced"
                ),
            });
        }
    }
}

/// Why a write of `term` arriving at `at` (after the term ended) was refused.
fn trace(term: &Window, at: Micros, journal: &Journal) -> Refusal {
    let mine = |s: &&crate::nemesis::Span| {
        s.replica == Some(term.replica) && s.incarnation == term.incarnation
    };
    if journal
        .pauses
        .iter()
        .filter(mine)
        .any(|p| p.from <= term.end && p.to >= term.start && p.from <= at)
    {
        return Refusal::ReplicaPaused;
    }
    if journal
        .child_pauses
        .iter()
        .filter(mine)
        .any(|p| p.from <= at && p.to >= term.start)
    {
        return Refusal::CommandPaused;
    }
    if journal
        .downs
        .iter()
        .filter(mine)
        .any(|d| d.what == Impairment::Killed && d.from <= at)
    {
        return Refusal::ReplicaKilled;
    }
    match (&term.ended, term.stepped_down) {
        (WindowEnd::SteppedDown(_), _) => Refusal::AfterStepDown,
        (WindowEnd::Deadline, Some(stepped)) if stepped <= at => Refusal::AfterStepDown,
        _ => Refusal::AfterDeadline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(at: Micros, token: u64, accepted: bool) -> Write {
        Write {
            at,
            token,
            identity: "r0".into(),
            pid: 1,
            seq: 1,
            accepted,
            role: 'c',
        }
    }

    #[test]
    fn a_lower_token_after_a_higher_one_is_stale() {
        let writes = [
            write(1, 5, true),
            write(2, 7, true),
            write(3, 5, true),
            write(4, 7, true),
            write(5, 6, true),
        ];
        let stale: Vec<u64> = stale_writes(writes.iter())
            .into_iter()
            .map(|(_, w)| w.token)
            .collect();
        assert_eq!(stale, vec![5, 6]);
    }

    fn term(replica: usize, token: u64, start: Micros, end: Micros) -> Window {
        Window {
            replica,
            incarnation: 0,
            token,
            start,
            end,
            deadline: end,
            ended: WindowEnd::Deadline,
            stepped_down: None,
            reason: None,
        }
    }

    #[test]
    fn overlapping_windows_and_backward_tokens_are_caught() {
        let mut s = Safety::default();
        check_windows(
            &[
                term(0, 1, 0, 100),
                term(1, 2, 120, 200),
                term(2, 3, 150, 300),
            ],
            &mut s,
        );
        assert_eq!(s.count(Check::Overlap), 1);
        assert_eq!(s.count(Check::TokenOrder), 0);
        let mut s = Safety::default();
        check_windows(&[term(0, 5, 0, 100), term(1, 4, 120, 200)], &mut s);
        assert_eq!(s.count(Check::TokenOrder), 1);
        assert_eq!(s.count(Check::Overlap), 0);
        assert_eq!(s.min_gap_after_deadline, Some(20));
    }
}
