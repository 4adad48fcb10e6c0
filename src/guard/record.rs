//! The guard record: one line of text, what it says, and whether it lets the command act now.

use std::time::Duration;

use crate::clock::BootInstant;
use crate::lease::FencingToken;

/// The first word of every record.
pub const MAGIC: &str = "leasehold-guard";
/// The format's version, the second word.
pub const VERSION: &str = "1";
/// No record is longer (the longest, two 20-digit numbers, is 59 bytes).
pub const MAX_LEN: usize = 64;

/// What the guard file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardRecord {
    /// No term: leasehold has not led yet, or stepped down (the zeroed record, `… 0 0`).
    NoTerm,
    /// A term and its validity deadline.
    Term {
        /// The term's fencing token.
        token: FencingToken,
        /// The validity deadline on the boot clock (`CLOCK_BOOTTIME`).
        valid_until: BootInstant,
    },
}

/// Why a record does not let the command act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The record is zeroed.
    NoTerm,
    /// The validity deadline passed `late` ago.
    Expired {
        /// The term.
        token: FencingToken,
        /// How long ago.
        late: Duration,
    },
    /// Still valid, but for `left`, less than the `wanted` margin.
    TooShort {
        /// The term.
        token: FencingToken,
        /// Time left before the deadline.
        left: Duration,
        /// The margin asked for.
        wanted: Duration,
    },
}

fn nanos(t: BootInstant) -> u64 {
    u64::try_from(t.since_boot().as_nanos()).unwrap_or(u64::MAX)
}

impl GuardRecord {
    /// The record's line: `leasehold-guard 1 <token> <valid_until_ns>\n`, both numbers plain
    /// decimal without leading zeros; `0 0` for no term.
    pub fn encode(&self) -> String {
        let (token, until) = match self {
            GuardRecord::NoTerm => (0, 0),
            GuardRecord::Term { token, valid_until } => (token.0, nanos(*valid_until).max(1)),
        };
        format!("{MAGIC} {VERSION} {token} {until}\n")
    }

    /// Reads a record, refusing anything that is not exactly one well-formed line.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.is_empty() {
            return Err("the file is empty".into());
        }
        if bytes.len() > MAX_LEN {
            return Err(format!(
                "longer than a record ({} bytes, at most {MAX_LEN})",
                bytes.len()
            ));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| "not text".to_owned())?;
        let line = text
            .strip_suffix('\n')
            .ok_or_else(|| "the record does not end with a newline".to_owned())?;
        if line.contains('\n') {
            return Err("more than one line".into());
        }
        let fields: Vec<&str> = line.split(' ').collect();
        let [magic, version, token, until] = fields[..] else {
            return Err(format!(
                "expected 4 fields `{MAGIC} {VERSION} <token> <deadline>`, found {}",
                fields.len()
            ));
        };
        if magic != MAGIC {
            return Err(format!("does not start with `{MAGIC}`"));
        }
        if version != VERSION {
            return Err(format!(
                "format version `{version}`; this leasehold reads version {VERSION}"
            ));
        }
        let token = number("token", token)?;
        let until = number("deadline", until)?;
        match (token, until) {
            (0, 0) => Ok(GuardRecord::NoTerm),
            (0, _) | (_, 0) => Err("a token or a deadline of 0 without the other".into()),
            (token, until) => Ok(GuardRecord::Term {
                token: FencingToken(token),
                valid_until: BootInstant::from_since_boot(Duration::from_nanos(until)),
            }),
        }
    }

    /// `Ok(token)` when the term is valid at `now` and stays valid for `valid_for` more.
    pub fn verdict(&self, now: BootInstant, valid_for: Duration) -> Result<FencingToken, Refusal> {
        let GuardRecord::Term { token, valid_until } = *self else {
            return Err(Refusal::NoTerm);
        };
        if now >= valid_until {
            return Err(Refusal::Expired {
                token,
                late: now.saturating_duration_since(valid_until),
            });
        }
        let left = now.until(valid_until);
        if left <= valid_for && !valid_for.is_zero() {
            return Err(Refusal::TooShort {
                token,
                left,
                wanted: valid_for,
            });
        }
        Ok(token)
    }
}

/// A decimal u64 without sign, spaces or leading zeros.
fn number(what: &str, digits: &str) -> Result<u64, String> {
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !plain {
        return Err(format!(
            "the {what} `{digits}` is not a plain decimal number"
        ));
    }
    digits
        .parse()
        .map_err(|_| format!("the {what} `{digits}` does not fit 64 bits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(nanos: u64) -> BootInstant {
        BootInstant::from_since_boot(Duration::from_nanos(nanos))
    }

    fn term(token: u64, until: u64) -> GuardRecord {
        GuardRecord::Term {
            token: FencingToken(token),
            valid_until: at(until),
        }
    }

    #[test]
    fn records_survive_a_round_trip() {
        for record in [
            GuardRecord::NoTerm,
            term(1, 1),
            term(1_795_991_357_169_907, 4_958_421_484_236),
            term(u64::MAX, u64::MAX),
        ] {
            let line = record.encode();
            assert!(line.len() <= MAX_LEN, "{line:?}");
            assert_eq!(GuardRecord::parse(line.as_bytes()), Ok(record), "{line:?}");
        }
        assert_eq!(GuardRecord::NoTerm.encode(), "leasehold-guard 1 0 0\n");
        assert_eq!(term(42, 1_000).encode(), "leasehold-guard 1 42 1000\n");
    }

    #[test]
    fn torn_or_garbled_records_are_refused() {
        let good = "leasehold-guard 1 42 1000\n";
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("leasehold-guard 1 42 1000", "newline"),
            ("leasehold-guard 1 42 10", "newline"),
            ("leasehold-gu", "newline"),
            ("leasehold-guard 1 42\n", "4 fields"),
            ("leasehold-guard 1 42 1000 7\n", "4 fields"),
            ("leasehold-guard  1 42 1000\n", "4 fields"),
            ("leasehold-guard 1 42 1000\n\n", "more than one line"),
            (
                "leasehold-guard 1 42 1000\nleasehold-guard 1 42 1000\n",
                "more than one line",
            ),
            ("leasehold-guarb 1 42 1000\n", "does not start"),
            ("leasehold-guard 2 42 1000\n", "version `2`"),
            ("leasehold-guard 1 4x 1000\n", "token `4x`"),
            ("leasehold-guard 1 42 0100\n", "deadline `0100`"),
            ("leasehold-guard 1 42 +100\n", "deadline `+100`"),
            ("leasehold-guard 1 42 -1\n", "deadline `-1`"),
            ("leasehold-guard 1 42 99999999999999999999\n", "64 bits"),
            ("leasehold-guard 1 0 1000\n", "without the other"),
            ("leasehold-guard 1 42 0\n", "without the other"),
            ("leasehold-guard 1 42 1000\r\n", "deadline `1000\r`"),
            ("leasehold-guard 1 \u{0}42 1000\n", "token"),
        ];
        for (text, rule) in cases {
            let err = GuardRecord::parse(text.as_bytes()).expect_err(text);
            assert!(err.contains(rule), "{text:?}: {err}");
        }
        assert!(GuardRecord::parse(&[0xff; 10]).is_err());
        assert!(
            GuardRecord::parse(&[b'1'; MAX_LEN + 1])
                .unwrap_err()
                .contains("longer")
        );
        // Every prefix of a good record (a short read) is refused.
        for end in 0..good.len() {
            assert!(
                GuardRecord::parse(&good.as_bytes()[..end]).is_err(),
                "{:?}",
                &good[..end]
            );
        }
    }

    #[test]
    fn the_verdict_follows_the_deadline_and_the_margin() {
        let ms = |n: u64| Duration::from_millis(n);
        let t = FencingToken(42);
        let record = term(42, 10_000_000_000);
        let rows: &[(u64, Duration, Result<FencingToken, Refusal>)] = &[
            (9_000_000_000, Duration::ZERO, Ok(t)),
            (9_999_999_999, Duration::ZERO, Ok(t)),
            (
                10_000_000_000,
                Duration::ZERO,
                Err(Refusal::Expired {
                    token: t,
                    late: Duration::ZERO,
                }),
            ),
            (
                10_500_000_000,
                Duration::ZERO,
                Err(Refusal::Expired {
                    token: t,
                    late: ms(500),
                }),
            ),
            (9_000_000_000, ms(999), Ok(t)),
            (
                9_000_000_000,
                ms(1000),
                Err(Refusal::TooShort {
                    token: t,
                    left: ms(1000),
                    wanted: ms(1000),
                }),
            ),
            (
                10_000_000_000,
                ms(1),
                Err(Refusal::Expired {
                    token: t,
                    late: Duration::ZERO,
                }),
            ),
        ];
        for (now, valid_for, want) in rows {
            assert_eq!(
                record.verdict(at(*now), *valid_for),
                *want,
                "now {now}, valid for {valid_for:?}"
            );
        }
    }

    #[test]
    fn a_zeroed_record_is_never_valid() {
        for now in [0, 1, u64::MAX] {
            assert_eq!(
                GuardRecord::NoTerm.verdict(at(now), Duration::ZERO),
                Err(Refusal::NoTerm)
            );
        }
    }
}
