//! Leadership as the logs tell it: one validity window per term, from the `became leader`
//! line to `min(stepped down, last (acquire or renew) line + valid_for_ms)`. A process that
//! died without stepping down keeps its window to that deadline, as the lease would.

use serde::Serialize;

use crate::replica::{Event, Incarnation, deadline};
use crate::time::Micros;

/// How a window ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WindowEnd {
    /// A `stepped down` line, with its reason, came before the deadline.
    SteppedDown(String),
    /// The deadline came first (paused, killed, or stepped down late).
    Deadline,
}

/// One term of one replica, in wall-clock time.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// The replica's index.
    pub replica: usize,
    /// Which of its processes.
    pub incarnation: usize,
    /// The fencing token of the term.
    pub token: u64,
    /// The `became leader` line.
    pub start: Micros,
    /// Where its validity ended.
    pub end: Micros,
    /// Its validity deadline by the logs (the latest proof plus `valid_for_ms`), whether or not
    /// it stepped down before: the command may run until then.
    pub deadline: Micros,
    /// Why it ended there.
    pub ended: WindowEnd,
    /// When the `stepped down` line came, if it did.
    pub stepped_down: Option<Micros>,
    /// The step-down reason, if any.
    pub reason: Option<String>,
}

impl Window {
    /// Its term, as the overlap checks see it.
    pub fn term(&self) -> Term {
        Term {
            replica: self.replica,
            incarnation: self.incarnation,
            token: self.token,
            start: self.start,
            end: self.end,
        }
    }
}

/// A term as the overlap checks see it, by its window or by its log lines: whose it was, its
/// token, and from when to when.
pub struct Term {
    /// The replica's index.
    pub replica: usize,
    /// Which of its processes.
    pub incarnation: usize,
    /// The fencing token of the term.
    pub token: u64,
    /// When it began.
    pub start: Micros,
    /// When it ended.
    pub end: Micros,
}

impl Term {
    /// How the reports name a term: `r<replica>#<incarnation> token <token>`.
    pub fn name(&self) -> String {
        format!(
            "r{}#{} token {}",
            self.replica, self.incarnation, self.token
        )
    }

    /// Its name and its span, worded by `how`: `r0#1 token 5 valid 10..20`.
    pub fn held(&self, how: &str) -> String {
        format!("{} {how} {}..{}", self.name(), self.start, self.end)
    }
}

/// The windows of every replica, sorted by start, and anything in the logs that does not fit
/// the story (a renewal for a term never begun, two terms at once in one process).
pub fn windows(replicas: &[Vec<Incarnation>]) -> (Vec<Window>, Vec<String>) {
    let mut out = Vec::new();
    let mut oddities = Vec::new();
    for (replica, incarnations) in replicas.iter().enumerate() {
        for inc in incarnations {
            let mut open: Option<(u64, Micros, Micros)> = None; // token, start, deadline
            for e in &inc.events {
                match &e.event {
                    Event::Became {
                        token,
                        valid_for_ms,
                    } => {
                        if let Some((t, start, dl)) = open.take() {
                            oddities.push(format!(
                                "r{replica}#{}: became leader (token {token}) while term {t} was open",
                                inc.number
                            ));
                            out.push(window(replica, inc.number, t, start, dl, None));
                        }
                        open = Some((*token, e.at, deadline(e.at, *valid_for_ms)));
                    }
                    Event::Renewed {
                        token,
                        valid_for_ms,
                    } => match open.as_mut() {
                        Some((t, _, dl)) if t == token => {
                            *dl = (*dl).max(deadline(e.at, *valid_for_ms));
                        }
                        _ => oddities.push(format!(
                            "r{replica}#{}: renewed token {token} outside its term",
                            inc.number
                        )),
                    },
                    Event::SteppedDown { token, reason } => match open.take() {
                        Some((t, start, dl)) if t == *token => {
                            out.push(window(
                                replica,
                                inc.number,
                                t,
                                start,
                                dl,
                                Some((e.at, reason.clone())),
                            ));
                        }
                        other => {
                            open = other;
                            oddities.push(format!(
                                "r{replica}#{}: stepped down from token {token} outside its term",
                                inc.number
                            ));
                        }
                    },
                    _ => {}
                }
            }
            if let Some((t, start, dl)) = open {
                out.push(window(replica, inc.number, t, start, dl, None));
            }
        }
    }
    out.sort_by_key(|w| (w.start, w.token));
    (out, oddities)
}

fn window(
    replica: usize,
    incarnation: usize,
    token: u64,
    start: Micros,
    deadline: Micros,
    stepped: Option<(Micros, String)>,
) -> Window {
    let (end, ended) = match &stepped {
        Some((at, reason)) if *at < deadline => (*at, WindowEnd::SteppedDown(reason.clone())),
        _ => (deadline, WindowEnd::Deadline),
    };
    Window {
        replica,
        incarnation,
        token,
        start,
        end,
        deadline,
        ended,
        stepped_down: stepped.as_ref().map(|(at, _)| *at),
        reason: stepped.map(|(_, r)| r),
    }
}
