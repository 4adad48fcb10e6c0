//! A replica's log, read line by line as leasehold writes it: every line kept raw on disk, the
//! lines the checker needs parsed into events, and the live view of leadership the nemesis
//! reads (the current term and its deadline, the command's pid).

use std::io::{BufRead, BufReader, LineWriter, Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::events::{Event, LogEvent, parse_event};
use crate::time::{MS, Micros};

/// The mutex's value, also after a panic of another holder.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the log says right now.
#[derive(Debug, Default)]
pub(crate) struct Live {
    /// The current term: token, validity deadline (log time + valid_for), and the time of its
    /// latest proof (the `became leader` or `renewed` line).
    pub(crate) leading: Option<(u64, Micros, Micros)>,
    /// The current command's process id.
    pub(crate) child: Option<u32>,
    pub(crate) events: Vec<LogEvent>,
    pub(crate) stray_lines: usize,
}

/// Reads one process's stderr to its end: every line goes to the raw log file; JSON lines
/// the checker needs become events, and update the live view.
pub(crate) fn read_logs(stderr: impl Read, live: Arc<Mutex<Live>>, path: PathBuf, header: String) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map(LineWriter::new)
        .ok();
    if let Some(f) = file.as_mut() {
        let _ = writeln!(f, "{header}");
    }
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if let Some(f) = file.as_mut() {
            let _ = writeln!(f, "{line}");
        }
        let parsed = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| parse_event(&v));
        let mut live = lock(&live);
        match parsed {
            Some(Some(e)) => {
                match &e.event {
                    Event::Became {
                        token,
                        valid_for_ms,
                    } => {
                        live.leading = Some((*token, deadline(e.at, *valid_for_ms), e.at));
                    }
                    Event::Renewed {
                        token,
                        valid_for_ms,
                    } => {
                        if let Some((t, d, proven)) = live.leading.as_mut()
                            && *t == *token
                        {
                            *d = (*d).max(deadline(e.at, *valid_for_ms));
                            *proven = e.at;
                        }
                    }
                    Event::SteppedDown { .. } => {
                        live.leading = None;
                        live.child = None;
                    }
                    Event::CommandStarted { pid } => live.child = Some(*pid),
                    _ => {}
                }
                live.events.push(e);
            }
            Some(None) => {}
            None => live.stray_lines += 1,
        }
    }
}

/// The validity deadline a log line implies: its time plus `valid_for_ms`, plus one
/// millisecond because leasehold truncates the remaining time to whole milliseconds (the
/// checker errs towards longer windows).
pub fn deadline(at: Micros, valid_for_ms: u64) -> Micros {
    at + (i64::try_from(valid_for_ms).unwrap_or(i64::MAX / 2) + 1) * MS
}
