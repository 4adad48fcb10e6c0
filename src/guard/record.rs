//! The guard record: one line of text, what it says, and whether it lets the caller act now.

use std::time::Duration;

use super::caller::CallerTerm;
use crate::clock::BootInstant;
use crate::lease::{FencingToken, LeaseName};

/// The first word of every record.
pub const MAGIC: &str = "leasehold-guard";
/// The format's version, the second word. Version 1 had no lease name.
pub const VERSION: &str = "2";
/// The longest decimal u64.
const U64_DIGITS: usize = 20;
/// No record is longer: the magic, the version, two 20-digit numbers and the longest lease name,
/// four spaces and the newline (378 bytes).
pub const MAX_LEN: usize =
    MAGIC.len() + 1 + VERSION.len() + 1 + U64_DIGITS + 1 + U64_DIGITS + 1 + LeaseName::MAX_LEN + 1;

/// What the guard file says: always the lease of the leasehold that owns the file, and its
/// current term if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardRecord {
    /// No term: leasehold has not led yet, or stepped down (the zeroed record, `… 0 0 <lease>`).
    NoTerm {
        /// The lease.
        lease: LeaseName,
    },
    /// A term and its validity deadline.
    Term {
        /// The lease.
        lease: LeaseName,
        /// The term's fencing token.
        token: FencingToken,
        /// The validity deadline on the boot clock (`CLOCK_BOOTTIME`).
        valid_until: BootInstant,
    },
}

/// Why a record does not let the caller act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The record is another lease's than the caller's.
    OtherLease {
        /// The record's lease.
        lease: LeaseName,
        /// The caller's.
        mine: LeaseName,
    },
    /// The record is zeroed.
    NoTerm,
    /// The record holds another term than the caller's (a later one, or another process's).
    OtherTerm {
        /// The record's term.
        token: FencingToken,
        /// The caller's.
        mine: FencingToken,
    },
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

impl GuardRecord {
    /// The lease of the leasehold that wrote the record.
    pub fn lease(&self) -> &LeaseName {
        match self {
            GuardRecord::NoTerm { lease } | GuardRecord::Term { lease, .. } => lease,
        }
    }

    /// The record's line: `leasehold-guard 2 <token> <valid_until_ns> <lease>\n`, both numbers
    /// plain decimal without leading zeros, `0 0` for no term. The lease comes last: it is the
    /// only field of variable length, and a shell's `read` gives the last variable the rest.
    pub fn encode(&self) -> String {
        let (token, until) = match self {
            GuardRecord::NoTerm { .. } => (0, 0),
            GuardRecord::Term {
                token, valid_until, ..
            } => (token.0, valid_until.as_nanos().max(1)),
        };
        format!("{MAGIC} {VERSION} {token} {until} {}\n", self.lease())
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
        if fields.first() != Some(&MAGIC) {
            return Err(format!("does not start with `{MAGIC}`"));
        }
        // Before the count of fields: a record of another version says so.
        if let Some(&version) = fields.get(1)
            && version != VERSION
        {
            return Err(format!(
                "format version `{version}`; this leasehold reads version {VERSION}"
            ));
        }
        let [_, _, token, until, lease] = fields[..] else {
            return Err(format!(
                "expected 5 fields `{MAGIC} {VERSION} <token> <deadline> <lease>`, found {}",
                fields.len()
            ));
        };
        let token = number("token", token)?;
        let until = number("deadline", until)?;
        let lease = LeaseName::new(lease).map_err(|e| format!("the lease: {e}"))?;
        match (token, until) {
            (0, 0) => Ok(GuardRecord::NoTerm { lease }),
            (0, _) | (_, 0) => Err("a token or a deadline of 0 without the other".into()),
            (token, until) => Ok(GuardRecord::Term {
                lease,
                token: FencingToken(token),
                valid_until: BootInstant::from_since_boot(Duration::from_nanos(until)),
            }),
        }
    }

    /// `Ok(token)` when the record is of `caller`'s lease and term (as far as the caller knows
    /// them), valid at `now`, and stays valid for `valid_for` more.
    pub fn verdict(
        &self,
        now: BootInstant,
        valid_for: Duration,
        caller: &CallerTerm,
    ) -> Result<FencingToken, Refusal> {
        if let Some(mine) = &caller.lease
            && mine != self.lease()
        {
            return Err(Refusal::OtherLease {
                lease: self.lease().clone(),
                mine: mine.clone(),
            });
        }
        let GuardRecord::Term {
            token, valid_until, ..
        } = *self
        else {
            return Err(Refusal::NoTerm);
        };
        if let Some(mine) = caller.token
            && mine != token
        {
            return Err(Refusal::OtherTerm { token, mine });
        }
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

    fn lease(name: &str) -> LeaseName {
        LeaseName::new(name).unwrap()
    }

    fn term(token: u64, until: u64) -> GuardRecord {
        GuardRecord::Term {
            lease: lease("shop/web"),
            token: FencingToken(token),
            valid_until: at(until),
        }
    }

    fn no_term() -> GuardRecord {
        GuardRecord::NoTerm {
            lease: lease("shop/web"),
        }
    }

    #[test]
    fn records_survive_a_round_trip() {
        let longest = lease(&"x".repeat(LeaseName::MAX_LEN));
        for record in [
            no_term(),
            term(1, 1),
            term(1_795_991_357_169_907, 4_958_421_484_236),
            term(u64::MAX, u64::MAX),
            GuardRecord::Term {
                lease: longest.clone(),
                token: FencingToken(u64::MAX),
                valid_until: at(u64::MAX),
            },
            GuardRecord::NoTerm {
                lease: lease("ns/caf\u{e9}"),
            },
        ] {
            let line = record.encode();
            assert!(line.len() <= MAX_LEN, "{line:?}");
            assert_eq!(GuardRecord::parse(line.as_bytes()), Ok(record), "{line:?}");
        }
        let line = GuardRecord::Term {
            lease: longest,
            token: FencingToken(u64::MAX),
            valid_until: at(u64::MAX),
        }
        .encode();
        assert_eq!(line.len(), MAX_LEN, "the longest record fills the limit");
        assert_eq!(no_term().encode(), "leasehold-guard 2 0 0 shop/web\n");
        assert_eq!(
            term(42, 1_000).encode(),
            "leasehold-guard 2 42 1000 shop/web\n"
        );
    }

    #[test]
    fn torn_or_garbled_records_are_refused() {
        let good = "leasehold-guard 2 42 1000 shop/web\n";
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("leasehold-guard 2 42 1000 shop/web", "newline"),
            ("leasehold-guard 2 42 1000 shop/w", "newline"),
            ("leasehold-gu", "newline"),
            ("leasehold-guard 2 42 1000\n", "5 fields"),
            ("leasehold-guard 2 42 1000 shop/web 7\n", "5 fields"),
            ("leasehold-guard  2 42 1000 shop/web\n", "format version ``"),
            ("leasehold-guard 2 42  1000 shop/web\n", "5 fields"),
            (
                "leasehold-guard 2 42 1000 shop/web\n\n",
                "more than one line",
            ),
            (
                "leasehold-guard 2 42 1000 shop/web\nleasehold-guard 2 42 1000 shop/web\n",
                "more than one line",
            ),
            ("leasehold-guarb 2 42 1000 shop/web\n", "does not start"),
            ("leasehold-guard\n", "5 fields"),
            ("leasehold-guard 1 42 1000\n", "version `1`"),
            ("leasehold-guard 3 42 1000 shop/web\n", "version `3`"),
            ("leasehold-guard 2 4x 1000 shop/web\n", "token `4x`"),
            ("leasehold-guard 2 42 0100 shop/web\n", "deadline `0100`"),
            ("leasehold-guard 2 42 +100 shop/web\n", "deadline `+100`"),
            ("leasehold-guard 2 42 -1 shop/web\n", "deadline `-1`"),
            (
                "leasehold-guard 2 42 99999999999999999999 shop/web\n",
                "64 bits",
            ),
            ("leasehold-guard 2 0 1000 shop/web\n", "without the other"),
            ("leasehold-guard 2 42 0 shop/web\n", "without the other"),
            ("leasehold-guard 2 42 1000 shop/web\r\n", "the lease"),
            ("leasehold-guard 2 42 1000 {shop}\n", "the lease"),
            ("leasehold-guard 2 \u{0}42 1000 shop/web\n", "token"),
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
                record.verdict(at(*now), *valid_for, &CallerTerm::default()),
                *want,
                "now {now}, valid for {valid_for:?}"
            );
        }
    }

    #[test]
    fn the_verdict_refuses_another_lease_or_term_than_the_callers() {
        let now = at(1);
        let record = term(42, 10_000_000_000);
        let caller = |lease_name: Option<&str>, token: Option<u64>| CallerTerm {
            lease: lease_name.map(lease),
            token: token.map(FencingToken),
        };
        let rows: &[(CallerTerm, &GuardRecord, Result<FencingToken, Refusal>)] = &[
            (caller(None, None), &record, Ok(FencingToken(42))),
            (
                caller(Some("shop/web"), Some(42)),
                &record,
                Ok(FencingToken(42)),
            ),
            (caller(None, Some(42)), &record, Ok(FencingToken(42))),
            (
                caller(None, Some(41)),
                &record,
                Err(Refusal::OtherTerm {
                    token: FencingToken(42),
                    mine: FencingToken(41),
                }),
            ),
            (
                caller(Some("shop/web"), Some(43)),
                &record,
                Err(Refusal::OtherTerm {
                    token: FencingToken(42),
                    mine: FencingToken(43),
                }),
            ),
            (
                caller(Some("shop/api"), Some(42)),
                &record,
                Err(Refusal::OtherLease {
                    lease: lease("shop/web"),
                    mine: lease("shop/api"),
                }),
            ),
            (
                caller(Some("shop/api"), None),
                &no_term(),
                Err(Refusal::OtherLease {
                    lease: lease("shop/web"),
                    mine: lease("shop/api"),
                }),
            ),
            (
                caller(Some("shop/web"), Some(42)),
                &no_term(),
                Err(Refusal::NoTerm),
            ),
        ];
        for (caller, record, want) in rows {
            assert_eq!(
                record.verdict(now, Duration::ZERO, caller),
                *want,
                "{caller:?} reading {record:?}"
            );
        }
    }

    #[test]
    fn a_zeroed_record_is_never_valid() {
        for now in [0, 1, u64::MAX] {
            assert_eq!(
                no_term().verdict(at(now), Duration::ZERO, &CallerTerm::default()),
                Err(Refusal::NoTerm)
            );
        }
    }
}
