//! The Lua scripts behind the lease primitives. Each runs atomically inside Redis; all keys of a
//! lease share one hash tag, so each script touches a single Cluster slot.
//!
//! Numbers: tokens are microseconds since the epoch plus a count (about 1.8e15), below 2^53, so
//! Lua's doubles hold them exactly; they are still moved as strings or through `INCR`, because
//! Lua 5.1 prints large numbers in exponent form.

use std::sync::LazyLock;

use redis::Script;

/// Lua shared by the scripts that read the lease's state record (`KEYS[3]` of acquire and
/// observe, `KEYS[2]` of renew and release): its parser and writer, and the identity of the
/// Redis process and dataset that runs the script.
///
/// The record has no TTL and holds `<server> <cooldown_until_us> <term> <term_until_us>`:
/// - `server`: `run_id/master_replid` of the Redis that wrote it. It changes whenever Redis
///   restarts or another process (a promoted replica) answers, which is how data loss is noticed.
///   Read inside the script, on the node that runs it: never a value cached by a client.
/// - `cooldown_until_us`: the end of the data-loss cooldown on Redis's clock (`TIME`).
/// - `term`, `term_until_us`: the holder's term value (`<owner id>#<token>`, `-` for none) and
///   its expiry on Redis's clock. The lease key can vanish before its time without Redis losing
///   the record (eviction of keys with a TTL, an operator's `DEL`); then the record still names
///   the term, acquire refuses until its expiry, and the holder's renewal puts the key back.
///   Whatever removes keys without a TTL (`FLUSHDB`, `allkeys-*` eviction) removes the record
///   too, and the cooldown covers that.
///
/// Beside it, the key `:longest` (no TTL) holds `<ms> <claim_until_us> <loss_us>`: the longest
/// lease duration of the lease's recent terms, until when that claim stands, and when the last
/// data loss was found (0 for none); the cooldown covers the longest of the caller's own, the
/// one `RedisLease` remembers, and this key's (docs/DESIGN.md, "Mixed lease durations"). Each
/// acquire and renewal claims its own duration: it raises a shorter claim, and keeps an equal
/// one standing a lease duration ahead by writing it two lease durations ahead (about once per
/// lease duration). A longer claim stands until it runs out; then a shorter holder's replaces it.
///
/// The key `:protocol` (no TTL) holds `<version> <release>` ([`PROTOCOL`], and the release of
/// the last replica that won a term under it). Each win writes it when it differs; an acquire
/// that finds a higher version, or a value it cannot read, answers `NEWER` and writes nothing.
/// Every later protocol keeps the first two fields. Why it is a key of its own: docs/DESIGN.md,
/// "How it works", after the keys' hash tag.
const RECORD: &str = include_str!("scripts/record.lua");

/// The version of the protocol that the lease's keys are written in and these scripts speak.
/// Raise it when a change to the keys or scripts would mislead a replica of the version
/// before; replicas of a lower one then stay out while a higher one has won a term.
pub const PROTOCOL: u32 = 1;

/// Acquire.
///
/// KEYS: lease, fence, state record, handover reservation, longest, protocol. ARGV: owner id, ttl in ms,
/// `1` to cool down after data loss or `0` not to, the term value of a holder this follower saw
/// and whose TTL has not run out by the follower's own clock (empty for none): client-go's
/// observed-time rule, for what the record cannot show (the record gone with the key, or its
/// expiry passed early because the Redis host's clock stepped forward), our identity (a
/// reservation names one), the longest lease duration in ms that the caller knows a term of
/// this lease to run, the channel, and optionally the caller's probe channel and a probe
/// number, then our protocol version and release. A term that the record names is free only once the record says so (its release
/// clears it) or its expiry passed and nobody still observes it.
///
/// The probe is published first, whatever the reply (docs/DESIGN.md, "Followers"); empty or
/// absent: no probe. The call that finds a data loss announces it on the channel
/// (`data-loss <ms>`; docs/DESIGN.md, "Mixed lease durations").
///
/// Replies, each ending with Redis's `TIME` in microseconds (for the clock-rate bound, also
/// while following) and the longest lease duration of a live claim in ms (0 for none):
/// - `{"ACQUIRED", token, previous, time_us, longest}`; the lease then holds `<owner id>#<token>`, the
///   term value. `previous` says how the term before ended, for the log: `handed_over` (a
///   reservation named us), `data_loss` (the record was missing or another Redis's, without
///   the cooldown; with it, the elector saw the cooldown first), `expired` (the record still
///   names a term, or the key still holds an earlier term of ours: nobody released it),
///   `released` (an earlier term was released: a token was handed out before), else `none`.
/// - `{"HELD", term_value, pttl_ms, source, time_us, longest}` where `source` is `KEY`, or `RECORD` when
///   the lease key is gone before its time and the record still names an unexpired term.
/// - `{"COOLDOWN", remaining_ms, started, time_us, longest}` where `started` is 1 when this call found
///   the data loss and started the cooldown.
/// - `{"RESERVED", identity, pttl_ms, time_us, longest}`: the lease is free, but a handover reserved it
///   for `identity` for that long. The winner of a reserved term clears the reservation.
/// - `{"NEWER", version, release, time_us, 0}`: the keys are written in a higher protocol than ours
///   (`?` for a value that cannot be read), by that release; nothing was read or written.
const ACQUIRE: &str = include_str!("scripts/acquire.lua");

/// Renew: compare-and-PEXPIRE on the term value, and the record's expiry with it. A lease key
/// that vanished while the record, written by this very Redis, still names our term is put
/// back: nobody else can have acquired since, or the record would name them.
///
/// In the same step it reads the handover request: one that names this very term (and no
/// other: a request for an earlier term cannot end a later one) is answered with the renewal,
/// so that a request made while the leader's subscription is down is still seen at its next
/// renewal. It claims the term's lease duration in `:longest` (see above). A held term's reply
/// counts the listeners on the release channel (the leader's own among them while subscribed:
/// whether anyone else waits to take over) and carries Redis's `TIME` (for the clock-rate
/// bound), neither with a command of its own.
///
/// It also writes what the leader measured of Redis's clock rate into `:clock`, when the leader
/// passes it (about once per lease duration), with a TTL of three lease durations, for
/// `leasehold status`.
///
/// KEYS: lease, state record, handover request, longest, clock. ARGV: term value, ttl in ms,
/// channel, and optionally the rate's bound (`<low> <high>`) to note.
/// Reply: `{code, listeners, time_us}` when held, code 1, or 2 after putting the vanished key
/// back; `{code, listeners, time_us, to}` when held and a handover of this term was requested
/// (`to` an identity, or `-` for anyone); 0 not ours.
const RENEW: &str = include_str!("scripts/renew.lua");

/// Release: compare-and-DEL on the term value, clear the term from the record, then announce
/// the released term and the number of listeners (`<term> <subscribers>`) on the channel, so a
/// follower takes over at once. ARGV[3] `any` matches
/// every term of the owner id in ARGV[1] instead (at shutdown, when no later term can follow).
///
/// A release that ends a term clears the handover request of that term, and when ARGV[4] names
/// an identity, reserves the next term for it for ARGV[5] ms (before the announcement, so that
/// every follower it wakes sees the reservation).
///
/// KEYS: lease, state record, handover request, reservation. ARGV: term value (or owner id),
/// channel, `term` or `any`, the identity to reserve the next term for (empty for none), the
/// reservation in ms.
/// Reply: 1 released, 0 not ours.
const RELEASE: &str = include_str!("scripts/release.lua");

/// Observe, read-only. KEYS: lease, fence, state record, handover reservation, protocol, clock.
/// Reply: `{holder_or_nil, pttl_ms, token_or_nil, cooldown, source, reserved_or_nil,
/// reserved_pttl_ms, protocol_version, protocol_release, clock}` (the protocol's pair empty
/// without its key, `clock` the `:clock` key's value or empty) where cooldown is the ms left, 0 for none, or -1 when the next acquire
/// would start one (record missing or from another Redis), and source is `KEY`, or `RECORD`
/// when the key vanished before its time.
const OBSERVE: &str = include_str!("scripts/observe.lua");

/// Handover request: asks the leader of term ARGV[1] to step down, if the lease is still in
/// that term. The request is bound to that term (the leader's renewal compares it) and lives
/// ARGV[3] ms; a nudge on the channel makes the leader renew (and so read it) at once.
///
/// KEYS: lease, handover request. ARGV: term value, identity to hand to (`-` for anyone), ttl
/// in ms, channel. Reply: 1 requested, 0 the lease is not in that term.
const HANDOVER: &str = include_str!("scripts/handover.lua");

/// Removal of every key of the lease, for an uninstalled lease. Unless ARGV[1] is `force`, it
/// refuses while a term may be valid, in the same step as the deletes, so that no acquire can
/// slip in between a look and the delete: the lease key exists (a live term, or a value that
/// leasehold did not write), the state record names a term not yet expired (its key vanished
/// before its time), or a data-loss cooldown runs (a term Redis lost may still be valid).
///
/// KEYS: every key of the lease ([`LeaseKeys::written`](super::LeaseKeys::written)). Reply: `{1, key…}`
/// with the keys it deleted, or `{0, "HELD", term_value, pttl_ms}` / `{0, "COOLDOWN", "",
/// remaining_ms}`.
const REMOVE: &str = include_str!("scripts/remove.lua");

/// The body of the script behind primitive `op`, without the shared prelude.
fn body(op: &str) -> Option<&'static str> {
    match op {
        "acquire" => Some(ACQUIRE),
        "renew" => Some(RENEW),
        "release" => Some(RELEASE),
        "observe" => Some(OBSERVE),
        "handover" => Some(HANDOVER),
        "remove" => Some(REMOVE),
        _ => None,
    }
}

/// The full source of the script behind primitive `op` (`acquire`, `renew`, `release`,
/// `observe`): the record prelude, then the body. Public (hidden from the docs) for the
/// differential test of the model's mirror of these scripts; not a stable API.
#[doc(hidden)]
pub fn source(op: &str) -> Option<String> {
    Some(format!("\n{RECORD}\n{}", body(op)?))
}

/// Each command the script behind `op` calls, with the 1-based line of its full source that
/// calls it, named as ACL rules and `INFO commandstats` name it: `info|server` and
/// `pubsub|numsub` for the section or subcommand the call names. Empty for an unknown `op`.
pub fn calls(op: &str) -> Vec<(usize, String)> {
    let Some(source) = source(op) else {
        return Vec::new();
    };
    let mut calls = Vec::new();
    for (k, text) in source.split('\n').enumerate() {
        for call in text.split("redis.call('").skip(1) {
            let mut quoted = call.split('\'');
            let command = quoted.next().unwrap_or_default().to_ascii_lowercase();
            let part = quoted
                .nth(1)
                .filter(|_| matches!(command.as_str(), "info" | "pubsub"));
            calls.push((
                k + 1,
                match part {
                    Some(part) => format!("{command}|{}", part.to_ascii_lowercase()),
                    None => command,
                },
            ));
        }
    }
    calls
}

/// The Redis command that line `line` of `op`'s script calls, from an error such as
/// `… script: <sha>, on @user_script:4.`: so that a refused permission can be named.
pub(crate) fn command_at(op: &str, redis_message: &str) -> Option<String> {
    let line: usize = redis_message
        .split("@user_script:")
        .nth(1)?
        .trim_end_matches('.')
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    calls(op)
        .into_iter()
        .find(|(at, _)| *at == line)
        .map(|(_, command)| command)
}

fn script(op: &str) -> Script {
    Script::new(&source(op).unwrap_or_default())
}

pub(crate) static ACQUIRE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script("acquire"));
pub(crate) static RENEW_SCRIPT: LazyLock<Script> = LazyLock::new(|| script("renew"));
pub(crate) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script("release"));
pub(crate) static OBSERVE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script("observe"));
pub(crate) static HANDOVER_SCRIPT: LazyLock<Script> = LazyLock::new(|| script("handover"));
pub(crate) static REMOVE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script("remove"));

#[cfg(test)]
mod tests;
