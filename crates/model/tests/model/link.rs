//! A replica's link to Redis in the model: the connection it holds (the node it reaches, whether
//! its next request dials, the Sentinel it lists first), how the link fares (its health, which
//! goes with the replica under a renaming), and what the replica sends over it. How a request
//! is routed over the link is in connection.rs.

use crate::mirror::{Name, Term};

/// A replica's connection (`crates/core/src/lease/connection.rs`): none before its first call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Link {
    /// The node the connection reaches.
    pub node: u8,
    /// The connection was thrown away: the next request dials first.
    pub dial: bool,
    /// The Sentinel the replica lists first (what a pre-fix word takes).
    pub first: u8,
}

/// How a replica's link to Redis fares (docs/DESIGN.md, "Gray failures"); it goes
/// with the replica under a renaming.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Health {
    #[default]
    Healthy,
    /// Every reply arrives later than the attempt it answers is bound to: its requests run in
    /// Redis, and nothing it hears back counts.
    Late,
    /// Redis refuses its renewals, for a reason that does not pass by itself (a missing
    /// permission, a replica's READONLY); its acquires and releases run.
    Refused,
}

/// What a replica sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Request {
    /// `cover_ms`: the longest lease duration the replica knows (ARGV[6]).
    Acquire {
        observed: Option<Term>,
        cover_ms: u64,
    },
    Renew {
        term: Term,
    },
    /// The read-only `observe` of a replica sitting out.
    Observe,
    /// A release, reserving the next term for `reserve` after a handover to it.
    Release {
        term: Term,
        reserve: Option<Name>,
    },
}
