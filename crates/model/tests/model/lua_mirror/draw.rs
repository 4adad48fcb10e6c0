//! Random states and arguments for the differential test: terms, identities, handover
//! requests (bound to the right term, a stale one, or of another form) and reservations,
//! present or already expired, and claims of the longest lease duration.

use rand::Rng;
use rand::rngs::StdRng;

use crate::mirror::{Data, Handover, Longest, Name, Record, Successor, Term};

/// The lease durations drawn, in ms: a caller's TTL, what it remembers, and a claim come from
/// these, so that shorter, equal and longer claims all meet.
pub const DURATIONS_MS: [u64; 3] = [3_000, 5_000, 7_000];

pub fn random_duration(rng: &mut StdRng) -> u64 {
    DURATIONS_MS[rng.random_range(0..DURATIONS_MS.len())]
}

/// An offset of at least 250 ms either side of now, so that no comparison sits on its edge.
fn offset_us(rng: &mut StdRng) -> i64 {
    let ms = rng.random_range(250..4_000) * 1_000;
    if rng.random_bool(0.5) { ms } else { -ms }
}

pub fn random_term(rng: &mut StdRng) -> Term {
    Term {
        owner: rng.random_range(0..3),
        token: rng.random_range(1..6),
    }
}

/// An identity: one of the three replicas', or one of none.
pub fn random_name(rng: &mut StdRng) -> Name {
    if rng.random_bool(0.8) {
        Name::Replica(rng.random_range(0..3))
    } else {
        Name::Stranger
    }
}

/// A handover request bound to the lease's term, the record's, or another (stale) one, or a
/// value of another form.
fn random_handover(rng: &mut StdRng, lease: Option<Term>, record: Option<Term>) -> Handover {
    let term = match rng.random_range(0..3) {
        0 => lease.unwrap_or_else(|| random_term(rng)),
        1 => record.unwrap_or_else(|| random_term(rng)),
        _ => random_term(rng),
    };
    match rng.random_range(0..10) {
        0 => Handover::Extra { term },
        1 => Handover::Bare { term },
        2 => Handover::Junk,
        _ => Handover::Request {
            term,
            to: if rng.random_bool(0.4) {
                Successor::Anyone
            } else {
                Successor::Named(random_name(rng))
            },
        },
    }
}

/// An expiry in ms that has passed (the key is gone) or lies 250 ms to 4 s ahead.
fn random_expiry_ms(rng: &mut StdRng, now: u64) -> u64 {
    if rng.random_bool(0.2) {
        now / 1000 - rng.random_range(1..4_000)
    } else {
        now / 1000 + rng.random_range(250..4_000)
    }
}

/// A claim of `:longest`: until 250 to 1750 ms either side of now, or of now plus one of
/// [`DURATIONS_MS`], so that it is never within 250 ms of now plus a caller's TTL (the edge
/// at which an equal claim is written again) nor of now; a data loss found 250 ms to 4 s
/// either side of now, or never.
fn random_longest(rng: &mut StdRng, now: u64) -> Longest {
    let ms = rng.random_range(250..1_750) * 1_000;
    let off = if rng.random_bool(0.5) { ms } else { -ms };
    let base = if rng.random_bool(0.3) {
        now
    } else {
        now + random_duration(rng) * 1000
    };
    Longest {
        ms: random_duration(rng),
        claim_until_us: base.saturating_add_signed(off),
        loss_us: if rng.random_bool(0.5) {
            0
        } else {
            now.saturating_add_signed(offset_us(rng))
        },
    }
}

pub fn random_data(rng: &mut StdRng, now: u64) -> Data {
    let at = |rng: &mut StdRng| now.saturating_add_signed(offset_us(rng));
    let mut data = Data {
        lease: rng.random_bool(0.6).then(|| {
            let ttl_ms = rng.random_range(300..5_000);
            (random_term(rng), now / 1000 + ttl_ms)
        }),
        fence: rng
            .random_bool(0.7)
            .then(|| if rng.random_bool(0.5) { at(rng) } else { 5 }),
        record: rng.random_bool(0.8).then(|| Record {
            server: rng.random_range(0..2),
            cool_until_us: at(rng),
            term: rng.random_bool(0.7).then(|| random_term(rng)),
            term_until_us: if rng.random_bool(0.9) { at(rng) } else { 0 },
        }),
        handover: None,
        reserved: None,
        longest: None,
    };
    let lease = data.lease.map(|(t, _)| t);
    let record = data.record.and_then(|r| r.term);
    data.handover = rng.random_bool(0.5).then(|| {
        (
            random_handover(rng, lease, record),
            random_expiry_ms(rng, now),
        )
    });
    data.reserved = rng
        .random_bool(0.4)
        .then(|| (random_name(rng), random_expiry_ms(rng, now)));
    data.longest = rng.random_bool(0.7).then(|| random_longest(rng, now));
    data
}
