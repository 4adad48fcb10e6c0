//! A progress line a minute for the flagged runs, which take minutes to hours: how many states
//! so far and how much memory the search holds, so a run that will not fit shows it early.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use stateright::Model;
use stateright::report::{ReportData, ReportDiscovery, Reporter};

pub struct Progress {
    label: String,
    every: Duration,
    /// When the next line is due, from the start of the search.
    next: Duration,
}

impl Progress {
    pub fn new(label: String, every: Duration) -> Progress {
        Progress {
            label,
            every,
            next: Duration::ZERO,
        }
    }
}

impl<M: Model> Reporter<M> for Progress {
    fn report_checking(&mut self, data: ReportData) {
        // The closing figures are printed by the caller, with the search order.
        if !data.done && data.duration >= self.next {
            self.next += self.every;
            println!(
                "{}: {} states explored ({} unique), depth {}, after {:.0?}, {} resident",
                self.label,
                data.total_states,
                data.unique_states,
                data.max_depth,
                data.duration,
                resident().unwrap_or_else(|| "?".into()),
            );
        }
    }

    /// The caller prints each property's trace in its own readable form.
    fn report_discoveries(&mut self, _: &M, _: BTreeMap<&'static str, ReportDiscovery<M>>)
    where
        M::Action: Debug + PartialEq,
        M::State: Debug + Hash + PartialEq,
    {
    }

    /// The checker's threads are joined only after this reporter's sleep, so it sleeps briefly
    /// and prints only when a line is due.
    fn delay(&self) -> Duration {
        Duration::from_millis(200)
    }
}

/// This process's resident memory, from /proc (Linux), as "N MB".
pub fn resident() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(format!("{} MB", kb / 1024))
}
