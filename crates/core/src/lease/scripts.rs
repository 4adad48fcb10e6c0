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
/// Redis process and dataset that runs the script. What each key is for: docs/DESIGN.md, "How
/// it works" and "Mixed lease durations". Their values, none with a TTL:
/// - the record: `<server> <cooldown_until_us> <term> <term_until_us>`, `server` the
///   `run_id/master_replid` read inside the script, the times on Redis's clock (`TIME`), and
///   `term` the holder's term value (`<owner id>#<token>`, `-` for none);
/// - `:longest`: `<ms> <claim_until_us> <loss_us>`, the longest lease duration of the recent
///   terms, until when that claim stands, and when the last data loss was found (0 for none);
/// - `:protocol`: `<version> <release>` ([`PROTOCOL`], and the release of the last replica that
///   won a term under it); every later protocol keeps the first two fields.
const RECORD: &str = include_str!("scripts/record.lua");

/// The version of the protocol that the lease's keys are written in and these scripts speak.
/// Raise it when a change to the keys or scripts would mislead a replica of the version
/// before; replicas of a lower one then stay out while a higher one has won a term.
pub const PROTOCOL: u32 = 1;

/// Acquire.
///
/// KEYS: lease, fence, state record, handover reservation, longest, protocol, handover request
/// (read as a renewal reads it, before the first write, and nothing more). ARGV: owner id,
/// ttl in ms, `1` to cool down after data loss or `0` not to, the term value of a holder this
/// follower saw and whose TTL has not run out by its own clock (empty for none; DESIGN,
/// "Followers keep what they saw"), our identity (a reservation names one), the longest lease
/// duration in ms that the caller knows a term of this lease to run, the channel, and
/// optionally the caller's probe channel and a probe number, then our protocol version and
/// release, and `1` when the target is one Redis named by its own address (no Sentinel, no
/// Cluster URL): a master that Sentinels watch is then refused, and so is a Cluster node
/// without the cooldown (an error reply `FAILSOVER <words>`).
///
/// The probe is published first, whatever the reply (docs/DESIGN.md, "Followers"); empty or
/// absent: no probe. The call that finds a data loss announces it on the channel
/// (`data-loss <ms>`; docs/DESIGN.md, "Mixed lease durations"), and the one that takes a
/// reserved term says so (`taken <term> <listeners>`).
///
/// Replies, each ending with Redis's `TIME` in microseconds (for the clock-rate bound, also
/// while following) and the longest lease duration of a live claim in ms (0 for none):
/// - `{"ACQUIRED", token, previous, time_us, longest}`; the lease then holds `<owner id>#<token>`, the
///   term value, and `previous` says how the term before ended ([`PreviousTerm`](super::PreviousTerm)).
/// - `{"HELD", term_value, pttl_ms, source, time_us, longest}` where `source` is `KEY`, or `RECORD` when
///   the lease key is gone before its time and the record still names an unexpired term.
/// - `{"COOLDOWN", remaining_ms, started, time_us, longest}` where `started` is 1 when this call found
///   the data loss and started the cooldown.
/// - `{"RESERVED", identity, pttl_ms, time_us, longest}`: the lease is free, but a handover reserved it
///   for `identity` for that long. The winner of a reserved term clears the reservation.
/// - `{"NEWER", version, release, time_us, 0}`: the keys are written in a higher protocol than ours
///   (`?` for a value that cannot be read), by that release; nothing was read or written.
const ACQUIRE: &str = include_str!("scripts/acquire.lua");

/// Renew: compare-and-PEXPIRE on the term value, and the record's expiry with it; a key that
/// vanished before the term's expiry while the record, written by this very Redis, still names
/// our term is put back.
/// In the same step it answers a handover request for this very term (and no other), claims
/// the term's duration in `:longest`, counts the listeners on the release channel (the
/// leader's own among them), and notes the leader's bound of Redis's clock rate in `:clock`
/// (TTL three lease durations) when the leader passes one.
///
/// KEYS: lease, state record, handover request, longest, clock. ARGV: term value, ttl in ms,
/// channel, the rate's bound (`<low> <high>`) to note or empty, and `1` when the target is one
/// Redis named by its own address: a master that Sentinels watch is then refused, as by
/// acquire (Sentinels that came to watch it since the term was won).
/// Reply: `{code, listeners, time_us}` when held, code 1, or 2 after putting the vanished key
/// back; `{code, listeners, time_us, to}` when held and a handover of this term was requested
/// (`to` an identity, or `-` for anyone); `{0, time_us}` not ours.
const RENEW: &str = include_str!("scripts/renew.lua");

/// Release: compare-and-DEL on the term value (ARGV[3] `any`: every term of the owner id in
/// ARGV[1], at shutdown), clear the term from the record and the term's handover request,
/// reserve the next term for the identity in ARGV[4] (if any) for ARGV[5] ms, then announce
/// `<term> <subscribers>` on the channel, so that every follower it wakes sees the reservation.
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
/// refuses in the same step as the deletes while a term may be valid ([`InForce`](super::InForce)).
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

/// The full source of the script behind primitive `op` (`acquire`, …, `remove`): the record
/// prelude, then the body. Public (hidden) for the model's differential test; not a stable API.
#[doc(hidden)]
pub fn source(op: &str) -> Option<String> {
    Some(format!("\n{RECORD}\n{}", body(op)?))
}

/// Each command the script behind `op` calls, with the 1-based line of its full source that
/// calls it, named as ACL rules and `INFO commandstats` name it: `info|server` and
/// `pubsub|numsub` for the section or subcommand the call names. Empty for an unknown `op`.
pub fn calls(op: &str) -> Vec<(usize, String)> {
    let source = source(op).unwrap_or_default();
    let mut calls = Vec::new();
    for (k, text) in source.split('\n').enumerate() {
        for call in text.split("redis.call('").skip(1) {
            let mut quoted = call.split('\'');
            let command = quoted.next().unwrap_or_default().to_ascii_lowercase();
            let part = quoted
                .nth(1)
                .filter(|_| matches!(command.as_str(), "info" | "pubsub"));
            let command = match part {
                Some(part) => format!("{command}|{}", part.to_ascii_lowercase()),
                None => command,
            };
            calls.push((k + 1, command));
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
