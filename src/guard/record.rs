//! The guard record: one line of text, what it says, and whether it lets the caller act now.

use std::time::Duration;

use super::caller::CallerTerm;
use crate::clock::{BootInstant, WallLead};
use crate::lease::{FencingToken, LeaseName};

/// The first word of every record.
pub const MAGIC: &str = "leasehold-guard";
/// The format's version, the second word. Version 1 had no lease name, version 2 no deadline
/// on the wall clock.
pub const VERSION: &str = "3";
/// The longest decimal u64.
const U64_DIGITS: usize = 20;
/// No record is longer: the magic, the version, three 20-digit numbers and the longest lease
/// name, five spaces and the newline (399 bytes).
pub const MAX_LEN: usize =
    MAGIC.len() + 1 + VERSION.len() + 1 + 3 * (U64_DIGITS + 1) + LeaseName::MAX_LEN + 1;

/// What the guard file says: always the lease of the leasehold that owns the file, and its
/// current term if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardRecord {
    /// No term: leasehold has not led yet, or stepped down (the zeroed record, `… 0 0 0 <lease>`).
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
        /// The same deadline on the wall clock (`CLOCK_REALTIME`, nanoseconds since the epoch)
        /// as leasehold saw the two clocks when it wrote the record: time that passed without
        /// the boot clock counting it (a VM frozen or migrated) passes it all the same.
        wall_until: u64,
    },
}

/// The instant a check is made, on both clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedAt {
    /// The boot clock.
    pub boot: BootInstant,
    /// The wall clock, nanoseconds since the epoch.
    pub wall: u64,
}

impl CheckedAt {
    /// Now.
    pub fn now() -> Self {
        let boot = BootInstant::now();
        Self {
            boot,
            wall: WallLead::now().wall_at(boot),
        }
    }
}

/// Why a record does not let the caller act.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The record is another lease's than the caller's.
    #[error("the file is lease {lease}'s, not the caller's lease {mine}")]
    OtherLease {
        /// The record's lease.
        lease: LeaseName,
        /// The caller's.
        mine: LeaseName,
    },
    /// The record is zeroed: leasehold stepped down, or has not led yet.
    #[error("no term (leasehold stepped down, or has not led yet)")]
    NoTerm,
    /// The record holds another term than the caller's (a later one, or another process's).
    #[error(
        "the file holds term {token}, not the caller's term {mine} (a later term, or another process's)"
    )]
    OtherTerm {
        /// The record's term.
        token: FencingToken,
        /// The caller's.
        mine: FencingToken,
    },
    /// The validity deadline passed `late` ago (leasehold is frozen or gone, or could not renew).
    #[error("the validity deadline of term {token} passed {late:?} ago")]
    Expired {
        /// The term.
        token: FencingToken,
        /// How long ago.
        late: Duration,
    },
    /// Still valid, but for `left`, less than the `wanted` margin.
    #[error("term {token} is valid for {left:?} more, not the {wanted:?} asked for")]
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

    /// The time left on the record's term at `now` (zero without one): whichever clock says
    /// less, since the wall clock also counts what the boot clock did not see.
    pub fn left(&self, now: CheckedAt) -> Duration {
        match *self {
            GuardRecord::NoTerm { .. } => Duration::ZERO,
            GuardRecord::Term {
                valid_until,
                wall_until,
                ..
            } => (now.boot.until(valid_until))
                .min(Duration::from_nanos(wall_until.saturating_sub(now.wall))),
        }
    }

    /// The record's line: `leasehold-guard 3 <token> <valid_until_ns> <wall_until_ns> <lease>\n`,
    /// the numbers plain decimal without leading zeros, `0 0 0` for no term. The lease comes
    /// last: it is the only field of variable length, and a shell's `read` gives the last
    /// variable the rest.
    pub fn encode(&self) -> String {
        let (token, until, wall) = match self {
            GuardRecord::NoTerm { .. } => (0, 0, 0),
            GuardRecord::Term {
                token,
                valid_until,
                wall_until,
                ..
            } => (token.0, valid_until.as_nanos().max(1), (*wall_until).max(1)),
        };
        format!(
            "{MAGIC} {VERSION} {token} {until} {wall} {}\n",
            self.lease()
        )
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
        let [_, _, token, until, wall, lease] = fields[..] else {
            return Err(format!(
                "expected 6 fields `{MAGIC} {VERSION} <token> <deadline> <wall deadline> <lease>`, found {}",
                fields.len()
            ));
        };
        let token = number("token", token)?;
        let until = number("deadline", until)?;
        let wall = number("wall deadline", wall)?;
        let lease = LeaseName::new(lease).map_err(|e| format!("the lease: {e}"))?;
        match (token, until, wall) {
            (0, 0, 0) => Ok(GuardRecord::NoTerm { lease }),
            (0, _, _) | (_, 0, _) | (_, _, 0) => {
                Err("a token or a deadline of 0 without the others".into())
            }
            (token, until, wall) => Ok(GuardRecord::Term {
                lease,
                token: FencingToken(token),
                valid_until: BootInstant::from_since_boot(Duration::from_nanos(until)),
                wall_until: wall,
            }),
        }
    }

    /// `Ok(token)` when the record is of `caller`'s lease and term (as far as the caller knows
    /// them), valid at `now` on both clocks, and stays valid for `valid_for` more.
    pub fn verdict(
        &self,
        now: CheckedAt,
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
            token,
            valid_until,
            wall_until,
            ..
        } = *self
        else {
            return Err(Refusal::NoTerm);
        };
        if let Some(mine) = caller.token
            && mine != token
        {
            return Err(Refusal::OtherTerm { token, mine });
        }
        let left = self.left(now);
        if left.is_zero() {
            let late_wall = Duration::from_nanos(now.wall.saturating_sub(wall_until));
            return Err(Refusal::Expired {
                token,
                late: now
                    .boot
                    .saturating_duration_since(valid_until)
                    .max(late_wall),
            });
        }
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
mod tests;
