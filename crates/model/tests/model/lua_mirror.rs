//! The model's mirror of the lease scripts against the real scripts: many seeded random states
//! and arguments, set up directly on a real redis-server, run through both, and the replies
//! and resulting keys compared (instants within a tolerance, since Redis's clock moves on
//! between the set-up and the script).

mod compare;
mod dataset;
mod draw;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Script, Value};

use crate::mirror::{AcquireReply, Data, Handover, Name, RenewReply, Semantics, Successor, Term};
use crate::values::{identity, owner_id};
use testbed::RedisServer;

use compare::{SLACK_US, int, same_acquire, same_data, same_renew, source, text};
use dataset::{
    CHANNEL, CLOCK_KEY, FENCE, HANDOVER, LEASE, LONGEST, PROTOCOL_KEY, RECORD, RESERVED,
    identities, now_us, published, read_data, subscribe, write_data,
};
use draw::{random_data, random_duration, random_name, random_term};

const CASES: u64 = 600;

/// The cases in which the handover request, the reservation or the longest claim decided
/// something, by kind.
const REACHED: [&str; 11] = [
    "a renewal answered with a handover request",
    "a renewal past a request for another term or of another form",
    "an acquire refused for a reservation",
    "an acquire that took the term reserved for it",
    "a release that cleared a request",
    "a release that reserved the next term",
    "an acquire that found a data loss and announced it",
    "an acquire that extended a running cooldown to what it knows",
    "a claim raised or replaced (none, run out or shorter)",
    "an equal claim written a lease duration further ahead",
    "a claim left standing (longer, or equal and far enough ahead)",
];

/// What an acquire or renewal that claimed `ttl_ms` at `now_us` did to the claim it found:
/// the index into [`REACHED`].
fn claimed(before: &Data, after: &Data, ttl_ms: u64, now_us: u64) -> usize {
    match before.longest {
        _ if after.longest == before.longest => 10,
        Some(b) if b.ms == ttl_ms && b.claim_until_us > now_us => 9,
        _ => 8,
    }
}

/// Runs the random cases through the real scripts and the mirror under `sem`: the first
/// disagreement, or how often each script ran and how often each of [`REACHED`] happened.
fn run_cases(sem: Semantics) -> Result<([u32; 5], [u32; 11]), String> {
    let redis = RedisServer::start();
    let ids = identities(&redis);
    let mut conn = redis.connection();
    let mut listener = redis.connection();
    let mut channel = subscribe(&mut listener);
    let script = |op: &str| {
        Script::new(&leasehold_core::lease::script_source(op).expect("a script for each primitive"))
    };
    let (acquire, renew, release, observe, handover) = (
        script("acquire"),
        script("renew"),
        script("release"),
        script("observe"),
        script("handover"),
    );
    let mut seen = [0u32; 5];
    let mut reached = [0u32; 11];
    for seed in 0..CASES {
        let mut rng = StdRng::seed_from_u64(0x1ea5e + seed);
        let now = now_us(&redis);
        let before = random_data(&mut rng, now);
        write_data(&redis, &before, &ids);
        // A value of another form in `:longest`, or a claim of more than an hour, reads as
        // none, in the scripts as in the mirror.
        if before.longest.is_none() && rng.random_bool(0.3) {
            let foreign = ["5000 12 x", "3600001 12 0"][rng.random_range(0..2)];
            redis.cmd::<()>(&["SET", LONGEST, foreign]);
        }
        let mut mirror = before;
        let op = rng.random_range(0..5);
        seen[op] += 1;
        // What the mirror says the script publishes on the channel.
        let mut announced: Vec<String> = Vec::new();
        let at = now_us(&redis);
        let (agree, what) = match op {
            0 => {
                let owner = match before.reserved {
                    Some((Name::Replica(n), _)) if rng.random_bool(0.5) => n,
                    _ => rng.random_range(0..3),
                };
                let cool = rng.random_bool(0.5);
                let observed = rng.random_bool(0.4).then(|| random_term(&mut rng));
                let ttl = random_duration(&mut rng);
                // What the caller remembers: nothing, or one of the durations.
                let cover = if rng.random_bool(0.3) {
                    0
                } else {
                    random_duration(&mut rng)
                };
                let real: Value = acquire
                    .key(LEASE)
                    .key(FENCE)
                    .key(RECORD)
                    .key(RESERVED)
                    .key(LONGEST)
                    .key(PROTOCOL_KEY)
                    .key(HANDOVER)
                    .arg(owner_id(owner))
                    .arg(ttl)
                    .arg(if cool { "1" } else { "0" })
                    .arg(observed.map(|t| t.value()).unwrap_or_default())
                    .arg(identity(owner))
                    .arg(cover)
                    .arg(CHANNEL)
                    .arg("")
                    .arg("")
                    .arg(leasehold_core::lease::PROTOCOL)
                    .arg(env!("CARGO_PKG_VERSION"))
                    .invoke(&mut conn)
                    .expect("acquire runs");
                let want = mirror.acquire(sem, at, 0, owner, ttl, cool, observed, cover);
                if let Some(ms) = want.data_loss {
                    announced.push(format!("data-loss {ms}"));
                    reached[6] += 1;
                }
                match want.reply {
                    AcquireReply::Reserved { .. } => reached[2] += 1,
                    AcquireReply::Acquired { .. } => {
                        if before.reserved.is_some() {
                            reached[3] += 1;
                        }
                        // A reservation taken (its grant says `handed_over`; not one whose time
                        // ran out) is said, the term named as the reply names it, to the one
                        // listener (this test).
                        if let Value::Array(parts) = &real
                            && text(&parts[2]) == "handed_over"
                        {
                            announced.push(format!(
                                "taken {}#{} 1",
                                owner_id(owner),
                                text(&parts[1])
                            ));
                        }
                        reached[claimed(&before, &mirror, ttl, at)] += 1;
                    }
                    AcquireReply::Cooldown { started: false, .. }
                        if mirror.record != before.record =>
                    {
                        reached[7] += 1
                    }
                    _ => {}
                }
                (
                    same_acquire(&real, want),
                    format!(
                        "acquire({owner}, ttl {ttl}, cool {cool}, observed {observed:?}, cover {cover}): real {real:?}, mirror {want:?}"
                    ),
                )
            }
            1 => {
                let requested = match before.handover {
                    Some((Handover::Request { term, .. }, _)) => Some(term),
                    _ => None,
                };
                let term = match (before.lease, requested) {
                    (Some((t, _)), _) if rng.random_bool(0.5) => t,
                    (_, Some(t)) if rng.random_bool(0.5) => t,
                    _ => random_term(&mut rng),
                };
                let ttl = random_duration(&mut rng);
                let real: Value = renew
                    .key(LEASE)
                    .key(RECORD)
                    .key(HANDOVER)
                    .key(LONGEST)
                    .arg(term.value())
                    .arg(ttl)
                    .arg(CHANNEL)
                    .invoke(&mut conn)
                    .expect("renew runs");
                let want = mirror.renew(sem, at, 0, term, ttl);
                match want {
                    RenewReply::Held {
                        handover: Some(_), ..
                    } => reached[0] += 1,
                    RenewReply::Held { handover: None, .. } if mirror.handover.is_some() => {
                        reached[1] += 1
                    }
                    _ => {}
                }
                if let RenewReply::Held { .. } = want {
                    reached[claimed(&before, &mirror, ttl, at)] += 1;
                }
                (
                    same_renew(&real, want),
                    format!("renew({term:?}, ttl {ttl}): real {real:?}, mirror {want:?}"),
                )
            }
            2 => {
                let held = before
                    .lease
                    .map(|(t, _)| t)
                    .or(before.record.and_then(|r| r.term));
                let requested = match before.handover {
                    Some((Handover::Request { term, .. }, _)) => Some(term),
                    _ => None,
                };
                let term = match (requested, held) {
                    (Some(t), _) if rng.random_bool(0.3) => t,
                    (_, Some(t)) if rng.random_bool(0.6) => t,
                    _ => random_term(&mut rng),
                };
                let any = rng.random_bool(0.3);
                let reserve = rng
                    .random_bool(0.4)
                    .then(|| (random_name(&mut rng), rng.random_range(300..6_000)));
                let real: i64 = release
                    .key(LEASE)
                    .key(RECORD)
                    .key(HANDOVER)
                    .key(RESERVED)
                    .arg(if any {
                        owner_id(term.owner)
                    } else {
                        term.value()
                    })
                    .arg(CHANNEL)
                    .arg(if any { "any" } else { "term" })
                    .arg(reserve.map(|(name, _)| name.text()).unwrap_or_default())
                    .arg(reserve.map_or(1, |(_, ms)| ms))
                    .invoke(&mut conn)
                    .expect("release runs");
                let live_request = before
                    .handover
                    .is_some_and(|(_, expiry)| expiry > at / 1000);
                let want = mirror.release(sem, at, term, any, reserve);
                if let Some(released) = want {
                    // The release announces the term and how many listen: this test's one.
                    announced.push(format!("{} 1", released.value()));
                }
                if want.is_some() && live_request && mirror.handover.is_none() {
                    reached[4] += 1;
                }
                if want.is_some() && reserve.is_some() {
                    reached[5] += 1;
                }
                (
                    real == i64::from(want.is_some()),
                    format!(
                        "release({term:?}, any {any}, reserve {reserve:?}): real {real}, mirror {want:?}"
                    ),
                )
            }
            3 => {
                let term = match before.lease {
                    Some((t, _)) if rng.random_bool(0.6) => t,
                    _ => random_term(&mut rng),
                };
                let to = if rng.random_bool(0.4) {
                    Successor::Anyone
                } else {
                    Successor::Named(random_name(&mut rng))
                };
                let ttl_ms = rng.random_range(300..6_000);
                let real: i64 = handover
                    .key(LEASE)
                    .key(HANDOVER)
                    .arg(term.value())
                    .arg(to.text())
                    .arg(ttl_ms)
                    .arg(CHANNEL)
                    .invoke(&mut conn)
                    .expect("handover runs");
                let want = mirror.request_handover(at, term, to, ttl_ms);
                if want {
                    announced.push(format!("handover {}", term.value()));
                }
                (
                    real == i64::from(want),
                    format!("handover({term:?}, to {to:?}): real {real}, mirror {want}"),
                )
            }
            _ => {
                let real: Vec<Value> = observe
                    .key(LEASE)
                    .key(FENCE)
                    .key(RECORD)
                    .key(RESERVED)
                    .key(PROTOCOL_KEY)
                    .key(CLOCK_KEY)
                    .invoke(&mut conn)
                    .expect("observe runs");
                let want = mirror.observe(at, 0);
                let holder = match &real[0] {
                    Value::Nil => None,
                    v => Term::parse(&text(v)),
                };
                let fence = match &real[2] {
                    Value::Nil => None,
                    v => text(v).parse::<u64>().ok(),
                };
                let ms = SLACK_US as i64 / 1000;
                let agree = holder == want.holder
                    && (int(&real[1]) - want.pttl_ms).abs() <= ms
                    && fence == want.fence
                    && (int(&real[3]) - want.cooldown_ms).abs() <= ms
                    && source(&real[4]) == want.source
                    && match (&real[5], want.reserved) {
                        (Value::Nil, None) => true,
                        (name, Some((want_name, pttl))) => {
                            Name::parse(&text(name)) == want_name
                                && (int(&real[6]) - pttl).abs() <= ms
                        }
                        _ => false,
                    };
                (agree, format!("observe: real {real:?}, mirror {want:?}"))
            }
        };
        let after = read_data(&redis, &ids);
        let heard = published(&mut channel, &redis, seed);
        // A key whose TTL ran out is gone from Redis whether or not a script touched it.
        mirror.expire(at);
        if !agree {
            return Err(format!(
                "seed {seed}: replies differ: {what}\nbefore: {before:?}"
            ));
        }
        if heard != announced {
            return Err(format!(
                "seed {seed}: announcements differ after {what}: real {heard:?}, mirror {announced:?}\nbefore: {before:?}"
            ));
        }
        if !same_data(&after, &mirror) {
            return Err(format!(
                "seed {seed}: keys differ after {what}\nbefore: {before:?}\nreal:   {after:?}\nmirror: {mirror:?}"
            ));
        }
    }
    Ok((seen, reached))
}

#[test]
fn the_mirror_agrees_with_every_script_on_random_states() {
    let (seen, reached) = run_cases(Semantics::default()).unwrap_or_else(|e| panic!("{e}"));
    println!("{CASES} random cases agree (acquire, renew, release, handover, observe: {seen:?})");
    assert!(
        seen.iter().all(|n| *n > CASES as u32 / 8),
        "every script ran often: {seen:?}"
    );
    for (what, n) in REACHED.iter().zip(reached) {
        println!("  {what}: {n} cases");
    }
    for (what, n) in REACHED.iter().zip(reached) {
        assert!(n >= 3, "too few cases of {what}: {n}");
    }
}

#[test]
fn a_mirror_of_an_earlier_protocol_disagrees_with_the_scripts() {
    for sem in [
        Semantics {
            compare_owner_only: true,
            ..Semantics::default()
        },
        Semantics {
            record_without_term: true,
            ..Semantics::default()
        },
        // The mirror as it was before the handover: the drawn states must reach the keys.
        Semantics {
            before_handover: true,
            ..Semantics::default()
        },
        // The cooldown of the finder's own TTL, without `:longest`.
        Semantics {
            before_longest: true,
            ..Semantics::default()
        },
    ] {
        match run_cases(sem) {
            Ok(_) => panic!("{sem:?}: the random cases cannot tell this mirror from the scripts"),
            Err(first) => println!("{sem:?} disagrees, as it must: {first}"),
        }
    }
}
