//! The checks beside `checker.rs`'s: terms by the replicas' own logs
//! (`became leader` … `stepped down`) never overlap while both processes ran; no process of the
//! leader's work (the command or any descendant: a daemon, a worker that ignores SIGTERM)
//! writes after its term's deadline unless its leasehold was paused, killed or starved (then
//! only fencing can stop it); and PostgreSQL, read back at the end, committed no token lower
//! than one it had committed, each traced to a term.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::checker::{Check, Safety, Unannounced, Violation};
use crate::history::{Term, Window};
use crate::intervals::overlapping_pairs;
use crate::nemesis::{Impairment, Journal, Span};
#[cfg(test)]
use crate::pg::PgWrite;
use crate::replica::{Event, Incarnation};
use crate::resource::Write;
use crate::system::PgCollected;
use crate::time::{self, MS, Micros};

/// A log line is stamped after the event it tells; a `stepped down` line this much later than
/// the next term's `became leader` is counted as late, not as an overlap.
pub const LOG_SLACK: Micros = 50 * MS;
/// A write sent just before its command was killed arrives this much later at most.
pub const WRITE_SLACK: Micros = 50 * MS;

/// The figures of these checks (the `more` of summary.json).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TermFigures {
    /// Terms by the logs.
    pub log_terms: usize,
    /// Of those, cut short at a SIGSTOP or SIGKILL of their process (it could not log).
    pub log_cut: usize,
    /// Overlaps by the logs within [`LOG_SLACK`], and the largest of them.
    pub log_late: usize,
    /// The largest of those.
    pub log_late_max: Micros,
    /// Writes after their term's deadline while its leasehold was paused, killed or starved.
    pub after_deadline_impaired: usize,
    /// Writes after their term's deadline by less than [`WRITE_SLACK`] (in flight).
    pub after_deadline_in_flight: usize,
    /// Writes by helpers (daemons, workers ignoring SIGTERM), and of those after the deadline.
    pub helper_writes: (usize, usize),
    /// PostgreSQL: writes committed, refused (stale), and why it could not be read.
    pub pg_committed: usize,
    /// Refused by the fence row.
    pub pg_refused: usize,
    /// Whether PostgreSQL took part.
    pub pg: bool,
    /// Why PostgreSQL's tables could not be read, if they could not.
    pub pg_error: Option<String>,
}

fn of(span: &Span, replica: usize, incarnation: usize) -> bool {
    span.replica == Some(replica) && span.incarnation == incarnation
}

/// The terms by their processes' own log lines, sorted by start.
fn stretches(
    replicas: &[Vec<Incarnation>],
    journal: &Journal,
    more: &mut TermFigures,
) -> Vec<Term> {
    let mut out = Vec::new();
    for (replica, incs) in replicas.iter().enumerate() {
        for inc in incs {
            let gone = journal
                .downs
                .iter()
                .filter(|d| of(d, replica, inc.number) && d.what == Impairment::Killed)
                .map(|d| d.from)
                .min()
                .or(inc.ended)
                .unwrap_or(journal.end);
            let mut open: Option<(u64, Micros)> = None;
            let mut close = |token: u64, start: Micros, end: Micros, more: &mut TermFigures| {
                let frozen = journal
                    .pauses
                    .iter()
                    .filter(|p| of(p, replica, inc.number) && p.from >= start && p.from < end)
                    .map(|p| p.from)
                    .min();
                let cut = frozen.unwrap_or(end).min(gone);
                if cut < end {
                    more.log_cut += 1;
                }
                out.push(Term {
                    replica,
                    incarnation: inc.number,
                    token,
                    start,
                    end: cut.min(end),
                });
            };
            for e in &inc.events {
                match &e.event {
                    Event::Became { token, .. } => {
                        if let Some((t, s)) = open.take() {
                            close(t, s, e.at, more);
                        }
                        open = Some((*token, e.at));
                    }
                    Event::SteppedDown { token, .. } => {
                        if let Some((t, s)) = open.take_if(|(t, _)| t == token) {
                            close(t, s, e.at, more);
                        }
                    }
                    _ => {}
                }
            }
            if let Some((t, s)) = open {
                close(t, s, gone, more);
            }
        }
    }
    out.sort_by_key(|s| (s.start, s.token));
    out
}

/// Runs the checks of this file; their violations go into `s`, and come out sorted with the
/// rest.
pub fn check(
    windows: &[Window],
    writes: &[Write],
    journal: &Journal,
    replicas: &[Vec<Incarnation>],
    pg: Option<&PgCollected>,
    s: &mut Safety,
) -> TermFigures {
    let mut more = TermFigures::default();
    let list = stretches(replicas, journal, &mut more);
    more.log_terms = list.len();
    for (a, w) in overlapping_pairs(&list, |w| (w.start, w.end)) {
        let by = a.end.min(w.end) - w.start;
        if by <= LOG_SLACK {
            more.log_late += 1;
            more.log_late_max = more.log_late_max.max(by);
            continue;
        }
        s.violations.push(Violation {
            check: Check::LogOverlap,
            at: w.start,
            detail: format!(
                "{} and {} from {} ({} ms overlap)",
                a.held("led by its log"),
                w.name(),
                w.start,
                time::ms(by)
            ),
        });
    }
    late_writes(windows, writes, journal, &mut more, s);
    if let Some(pg) = pg {
        pg_checks(windows, pg, &mut more, s);
    }
    s.violations.sort_by_key(|v| (v.at, v.check));
    more
}

/// A process that wrote after its term: its first such write, how many, how late at most, and
/// its role.
type Offender = (Micros, usize, Micros, char);

fn late_writes(
    windows: &[Window],
    writes: &[Write],
    journal: &Journal,
    more: &mut TermFigures,
    s: &mut Safety,
) {
    let by_term: HashMap<(String, u64), &Window> = windows
        .iter()
        .map(|w| ((format!("r{}", w.replica), w.token), w))
        .collect();
    // One violation per writing process, with its count and latest lateness.
    let mut offenders: BTreeMap<(String, u64, u32), Offender> = BTreeMap::new();
    for w in writes {
        if w.role != 'c' {
            more.helper_writes.0 += 1;
        }
        let Some(term) = by_term.get(&(w.identity.clone(), w.token)) else {
            continue;
        };
        if w.at <= term.deadline {
            continue;
        }
        if w.role != 'c' {
            more.helper_writes.1 += 1;
        }
        let impaired = journal
            .pauses
            .iter()
            .chain(
                journal
                    .downs
                    .iter()
                    .filter(|d| d.what == Impairment::Killed),
            )
            .chain(journal.starved.iter())
            .any(|p| of(p, term.replica, term.incarnation) && p.from <= w.at && p.to >= term.start);
        if impaired {
            more.after_deadline_impaired += 1;
        } else if w.at - term.deadline <= WRITE_SLACK {
            more.after_deadline_in_flight += 1;
        } else {
            let e = offenders
                .entry((w.identity.clone(), w.token, w.pid))
                .or_insert((w.at, 0, 0, w.role));
            e.1 += 1;
            e.2 = e.2.max(w.at - term.deadline);
        }
    }
    for ((identity, token, pid), (at, n, late, role)) in offenders {
        let what = match role {
            'd' => "a daemon (setsid grandchild)",
            's' => "a worker ignoring SIGTERM",
            _ => "the command",
        };
        s.violations.push(Violation {
            check: Check::WriteAfterTerm,
            at,
            detail: format!(
                "{n} write(s) of {identity} token {token} by {what}, pid {pid}, after the term's deadline (up to {} ms after it; first at {at}) while its leasehold ran",
                time::ms(late)
            ),
        });
    }
}

fn pg_checks(windows: &[Window], pg: &PgCollected, more: &mut TermFigures, s: &mut Safety) {
    more.pg = true;
    more.pg_committed = pg.writes.len();
    more.pg_refused = pg.refused.len();
    more.pg_error.clone_from(&pg.error);
    let terms: std::collections::HashSet<(String, u64)> = windows
        .iter()
        .map(|w| (format!("r{}", w.replica), w.token))
        .collect();
    let mut highest: Option<(u64, i64)> = None;
    let mut untraced = Unannounced::default();
    for w in &pg.writes {
        match highest {
            Some((h, id)) if w.token < h => s.violations.push(Violation {
                check: Check::PgStaleWriteAccepted,
                at: w.at,
                detail: format!(
                    "row {} ({} pid {} seq {}, token {}) committed after row {id} with token {h}",
                    w.id, w.identity, w.pid, w.seq, w.token
                ),
            }),
            Some((h, _)) if w.token == h => {}
            _ => highest = Some((w.token, w.id)),
        }
        if !terms.contains(&(w.identity.clone(), w.token)) {
            untraced.add(&w.identity, w.token, w.at);
        }
    }
    untraced.report(Check::PgUntraced, "PostgreSQL row(s) of", s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::WindowEnd;
    use crate::replica::LogEvent;

    fn incarnation(events: Vec<(Micros, Event)>) -> Incarnation {
        Incarnation {
            number: 0,
            pid: 1,
            started: 0,
            ended: Some(10_000 * MS),
            end: "SIGTERM, exited".into(),
            events: events
                .into_iter()
                .map(|(at, event)| LogEvent { at, event })
                .collect(),
            stray_lines: 0,
            notes: Vec::new(),
        }
    }

    fn became(token: u64) -> Event {
        Event::Became {
            token,
            valid_for_ms: 1_000,
        }
    }

    fn stepped(token: u64) -> Event {
        Event::SteppedDown {
            token,
            reason: "test".into(),
        }
    }

    #[test]
    fn terms_that_overlap_by_the_logs_are_caught_unless_a_pause_froze_the_first() {
        let replicas = vec![
            vec![incarnation(vec![(0, became(1)), (2_000 * MS, stepped(1))])],
            vec![incarnation(vec![
                (1_000 * MS, became(2)),
                (3_000 * MS, stepped(2)),
            ])],
        ];
        let mut journal = Journal::default();
        let mut s = Safety::default();
        check(&[], &[], &journal, &replicas, None, &mut s);
        assert_eq!(s.count(Check::LogOverlap), 1);
        journal.pauses.push(Span {
            replica: Some(0),
            incarnation: 0,
            from: 500 * MS,
            to: 2_000 * MS,
            what: Impairment::Paused,
        });
        let mut s = Safety::default();
        let more = check(&[], &[], &journal, &replicas, None, &mut s);
        assert_eq!(s.count(Check::LogOverlap), 0);
        assert_eq!(more.log_cut, 1);
    }

    #[test]
    fn a_helper_writing_after_its_terms_deadline_is_caught() {
        let window = Window {
            replica: 0,
            incarnation: 0,
            token: 7,
            start: 0,
            end: 1_000 * MS,
            deadline: 1_000 * MS,
            ended: WindowEnd::Deadline,
            stepped_down: None,
            reason: None,
        };
        let write = |at: Micros, role: char| Write {
            at,
            token: 7,
            identity: "r0".into(),
            pid: 42,
            seq: 1,
            accepted: false,
            role,
        };
        let writes = [
            write(900 * MS, 'd'),
            write(1_010 * MS, 'd'),
            write(1_500 * MS, 'd'),
            write(1_600 * MS, 'd'),
        ];
        let mut s = Safety::default();
        let more = check(
            std::slice::from_ref(&window),
            &writes,
            &Journal::default(),
            &[],
            None,
            &mut s,
        );
        assert_eq!(
            s.count(Check::WriteAfterTerm),
            1,
            "one violation per process"
        );
        assert_eq!(more.after_deadline_in_flight, 1);
        assert_eq!(more.helper_writes, (4, 3));
    }

    #[test]
    fn postgres_commits_out_of_token_order_are_caught() {
        let row = |id: i64, token: u64| PgWrite {
            id,
            at: id,
            token,
            identity: "r0".into(),
            pid: 1,
            seq: 1,
            role: "c".into(),
        };
        let pg = PgCollected {
            writes: vec![row(1, 5), row(2, 6), row(3, 5), row(4, 6)],
            refused: Vec::new(),
            error: None,
        };
        let mut s = Safety::default();
        check(&[], &[], &Journal::default(), &[], Some(&pg), &mut s);
        assert_eq!(s.count(Check::PgStaleWriteAccepted), 1);
        assert_eq!(
            s.count(Check::PgUntraced),
            2,
            "tokens 5 and 6 of r0 have no term"
        );
    }
}
