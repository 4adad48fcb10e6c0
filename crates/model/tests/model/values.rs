//! The values the scripts store and compare: terms, identities, the handover request
//! (`<lease>:handover`) and reservation (`<lease>:reserved`) keys' values, and the longest lease
//! duration's claim (`<lease>:longest`), with their text, so that the mirror reads a value of
//! another form exactly as the Lua does.

/// One term: the lease's value `<owner>#<token>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Term {
    /// The replica (its owner id is [`owner_id`]).
    pub owner: u8,
    /// The fencing token of the term.
    pub token: u64,
}

/// The owner id of replica `owner`, as the scripts see it.
pub fn owner_id(owner: u8) -> String {
    format!("o{owner}")
}

impl Term {
    /// The term value stored in the lease key.
    pub fn value(&self) -> String {
        format!("{}#{}", owner_id(self.owner), self.token)
    }

    /// Parses a term value written by [`Term::value`].
    pub fn parse(value: &str) -> Option<Term> {
        let (owner, token) = value.strip_prefix('o')?.split_once('#')?;
        Some(Term {
            owner: owner.parse().ok()?,
            token: token.parse().ok()?,
        })
    }
}

/// The identity of replica `n`, as a reservation names it (ARGV[5] of acquire).
pub fn identity(n: u8) -> String {
    format!("r{n}")
}

/// An identity as the scripts compare it: one replica's, or one that no replica has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Name {
    Replica(u8),
    Stranger,
}

impl Name {
    pub fn text(&self) -> String {
        match self {
            Name::Replica(n) => identity(*n),
            Name::Stranger => "someone-else".into(),
        }
    }

    pub fn parse(text: &str) -> Name {
        text.strip_prefix('r')
            .and_then(|n| n.parse().ok())
            .filter(|n| identity(*n) == text)
            .map_or(Name::Stranger, Name::Replica)
    }
}

/// Whom a handover hands to: `-` for anyone, or an identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Successor {
    Anyone,
    Named(Name),
}

impl Successor {
    pub fn text(&self) -> String {
        match self {
            Successor::Anyone => "-".into(),
            Successor::Named(name) => name.text(),
        }
    }

    pub fn parse(text: &str) -> Successor {
        if text == "-" {
            Successor::Anyone
        } else {
            Successor::Named(Name::parse(text))
        }
    }
}

/// The value of the handover request key: what the handover script writes, or something else
/// found there (the scripts must not take that for a request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Handover {
    /// `<term> <to>`, as the handover script writes it.
    Request { term: Term, to: Successor },
    /// `<term> - x`: a third field.
    Extra { term: Term },
    /// `<term>`: no addressee.
    Bare { term: Term },
    /// `junk`.
    Junk,
}

impl Handover {
    /// Reads back a value written by [`Handover::text`].
    pub fn parse(text: &str) -> Option<Handover> {
        if text == "junk" {
            return Some(Handover::Junk);
        }
        if let Some(term) = text.strip_suffix(" - x") {
            return Some(Handover::Extra {
                term: Term::parse(term)?,
            });
        }
        match text.split_once(' ') {
            Some((term, to)) => Some(Handover::Request {
                term: Term::parse(term)?,
                to: Successor::parse(to),
            }),
            None => Some(Handover::Bare {
                term: Term::parse(text)?,
            }),
        }
    }

    pub fn text(&self) -> String {
        match self {
            Handover::Request { term, to } => format!("{} {}", term.value(), to.text()),
            Handover::Extra { term } => format!("{} - x", term.value()),
            Handover::Bare { term } => term.value(),
            Handover::Junk => "junk".into(),
        }
    }
}

/// `<lease>:longest` (no TTL): the longest lease duration of the lease's recent terms, until
/// when that claim stands, and when the last data loss was found (0 for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Longest {
    pub ms: u64,
    pub claim_until_us: u64,
    pub loss_us: u64,
}

impl Longest {
    /// `<ms> <claim_until_us> <loss_us>`, as `write_longest` writes it.
    pub fn text(&self) -> String {
        format!("{} {} {}", self.ms, self.claim_until_us, self.loss_us)
    }

    /// `read_longest`: Lua's `string.match(raw, '^(%d+) (%d+) (%d+)$')`, three runs of digits
    /// split by single spaces; anything else, or a claim of more than an hour (the longest lease
    /// duration), reads as no claim at all.
    pub fn parse(text: &str) -> Option<Longest> {
        let digits = |f: &str| {
            (!f.is_empty() && f.len() <= 16 && f.bytes().all(|b| b.is_ascii_digit()))
                .then(|| f.parse::<u64>().ok())
                .flatten()
                .filter(|n| *n < 1 << 53)
        };
        let mut fields = text.split(' ');
        let longest = Longest {
            ms: digits(fields.next()?)?,
            claim_until_us: digits(fields.next()?)?,
            loss_us: digits(fields.next()?)?,
        };
        let longest_lease = leasehold_core::elector::Timing::MAX.as_millis() as u64;
        (fields.next().is_none() && longest.ms <= longest_lease).then_some(longest)
    }
}

/// Lua's `string.match(s, '^(%S+) (%S+)$')`: two runs of non-space characters, one space.
pub fn two_fields(s: &str) -> Option<(&str, &str)> {
    // Lua's %s: space, \t, \n, \v, \f, \r.
    let space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r');
    let (a, b) = s.split_once(' ')?;
    let run = |f: &str| !f.is_empty() && !f.contains(space);
    (run(a) && run(b)).then_some((a, b))
}
