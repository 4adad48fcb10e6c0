//! Wall-clock instants as microseconds since the Unix epoch: the one time axis shared by the
//! harness's own records and the timestamps of leasehold's JSON logs (same machine, same clock).

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch (wall clock).
pub type Micros = i64;

/// One millisecond in [`Micros`].
pub const MS: Micros = 1_000;

/// One second in [`Micros`].
pub const SEC: Micros = 1_000_000;

/// Now, on the wall clock.
pub fn now() -> Micros {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// Parses the RFC 3339 timestamps of the JSON logs, `2026-11-29T22:03:54.483451Z` (UTC, any
/// number of fraction digits, or none).
pub fn parse_rfc3339(s: &str) -> Option<Micros> {
    let s = s.strip_suffix('Z')?;
    let (date, clock) = s.split_once('T')?;
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) => (hms, f),
        None => (clock, ""),
    };
    let mut t = hms.splitn(3, ':');
    let hour: i64 = t.next()?.parse().ok()?;
    let minute: i64 = t.next()?.parse().ok()?;
    let second: i64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let mut micros: i64 = 0;
    for (i, c) in fraction.chars().enumerate() {
        let digit = i64::from(c.to_digit(10)?);
        if i < 6 {
            micros = micros * 10 + digit;
        }
    }
    for _ in fraction.len()..6 {
        micros *= 10;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 86_400 + hour * 3_600 + minute * 60 + second) * SEC) + micros)
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Milliseconds, for reports: `1234.5`.
pub fn ms(us: Micros) -> String {
    format!("{:.1}", us as f64 / 1_000.0)
}

/// Seconds, for reports: `12.345`.
pub fn secs(us: Micros) -> String {
    format!("{:.3}", us as f64 / 1_000_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_timestamps_parse_to_epoch_micros() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:01.5Z"), Some(1_500_000));
        assert_eq!(
            parse_rfc3339("2026-11-29T22:03:54.483451Z"),
            Some(1_795_989_834_483_451)
        );
        assert_eq!(parse_rfc3339("2026-11-29 22:03:54Z"), None);
    }
}
