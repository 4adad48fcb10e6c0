//! Summaries of latency samples (n, min, p50, p99, max) and the way the report prints them.

use std::time::Duration;

/// The summary of one set of latency samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none. Percentiles are nearest-rank: p99 of
    /// 100 samples is the 99th smallest, of fewer than 100 it is the largest.
    pub fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort();
        Some(Self {
            n: sorted.len(),
            min: sorted[0],
            p50: nearest_rank(&sorted, 0.50),
            p99: nearest_rank(&sorted, 0.99),
            max: sorted[sorted.len() - 1],
        })
    }

    /// The cells `n | min | p50 | p99 | max` of a Markdown table row.
    pub fn cells(&self) -> String {
        format!(
            "{} | {} | {} | {} | {}",
            self.n,
            ms(self.min),
            ms(self.p50),
            ms(self.p99),
            ms(self.max)
        )
    }
}

/// The same cells for a possibly empty sample.
pub fn cells(summary: Option<Summary>) -> String {
    match summary {
        Some(s) => s.cells(),
        None => "0 | – | – | – | –".to_owned(),
    }
}

fn nearest_rank(sorted: &[Duration], q: f64) -> Duration {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// How many samples exceed `limit`.
pub fn count_above(samples: &[Duration], limit: Duration) -> usize {
    samples.iter().filter(|d| **d > limit).count()
}

/// A duration in milliseconds with about three significant digits (`0.412 ms`, `12.3 ms`,
/// `1 234 ms`).
pub fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v < 10.0 {
        format!("{v:.3} ms")
    } else if v < 100.0 {
        format!("{v:.2} ms")
    } else if v < 1000.0 {
        format!("{v:.1} ms")
    } else {
        format!("{} ms", group_thousands(v.round() as u64))
    }
}

/// A rate or count with thousands grouped by a thin space.
pub fn count(v: f64) -> String {
    if v >= 1000.0 {
        group_thousands(v.round() as u64)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A whole number with thousands grouped by a thin space (`10 000`).
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

/// `a / b` as a ratio (`×12.4`, `×0.81`); a dash when `b` is zero.
pub fn ratio(a: f64, b: f64) -> String {
    if b <= 0.0 || !a.is_finite() || !b.is_finite() {
        return "–".to_owned();
    }
    let r = a / b;
    if r >= 100.0 {
        format!("×{}", group_thousands(r.round() as u64))
    } else if r >= 10.0 {
        format!("×{r:.1}")
    } else {
        format!("×{r:.2}")
    }
}

/// The ratio of two durations, `a / b`.
pub fn ratio_d(a: Duration, b: Duration) -> String {
    ratio(a.as_secs_f64(), b.as_secs_f64())
}

/// A duration as a person writes it: `2 s`, `1.5 s`, `400 ms`.
pub fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else if d >= Duration::from_secs(1) {
        format!("{} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}
