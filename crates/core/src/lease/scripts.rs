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
/// data loss was found (0 for none). Contenders may run different lease durations (a rolling
/// change of `--lease-duration`, a `leasehold lock` beside a Deployment configured longer), and
/// a term of the longest may be valid when the loss is found, so the cooldown covers the longest
/// duration known: the caller's own, the one it remembers (`RedisLease` keeps the longest it
/// was told), and this key's. Each acquire and renewal claims its own duration: it raises a
/// shorter claim, and keeps an equal one standing a lease duration ahead by writing it two lease
/// durations ahead, so a holder writes it about once per lease duration, not at every renewal.
/// A longer claim stands until it runs out; then a shorter holder's replaces it, so a change to
/// a shorter duration takes effect.
///
/// The key `:protocol` (no TTL) holds `<version> <release>`: the protocol of these keys and
/// scripts ([`PROTOCOL`]) and the leasehold release of the last replica that won a term under
/// it. Each win writes it when it differs; an acquire that finds a higher version, or a value it
/// cannot read, answers `NEWER` and writes nothing, so that a replica never reads or writes keys
/// in a format it does not know. Every later protocol keeps the first two fields. It is a key of
/// its own, not a field of the record, because replicas of 0.2.0 (protocol 1, which never
/// wrote it) would read a record with a field more as lost data.
const RECORD: &str = r#"
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function server_identity()
  local server = redis.call('INFO', 'server')
  local replication = redis.call('INFO', 'replication')
  local run = string.match(server, 'run_id:(%w+)') or '?'
  local replid = string.match(replication, 'master_replid:(%w+)') or '?'
  return run .. '/' .. replid
end
local function read_record(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local server, cool, term, term_until = string.match(raw, '^(%S+) (%d+) (%S+) (%d+)$')
  if not server then return nil end
  return {server = server, cool = tonumber(cool), term = term, term_until = tonumber(term_until)}
end
local function write_record(key, r)
  redis.call('SET', key, r.server .. ' ' .. string.format('%d', r.cool) .. ' ' .. r.term .. ' ' .. string.format('%d', r.term_until))
end
local function read_longest(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local ms, claim_until, loss = string.match(raw, '^(%d+) (%d+) (%d+)$')
  if not ms then return nil end
  return {ms = tonumber(ms), claim_until = tonumber(claim_until), loss = tonumber(loss)}
end
local function write_longest(key, l)
  redis.call('SET', key, string.format('%d', l.ms) .. ' ' .. string.format('%d', l.claim_until) .. ' ' .. string.format('%d', l.loss))
end
local function read_protocol(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local version, release = string.match(raw, '^(%d+) (%S+)')
  return {version or '?', release or raw}
end
local function newer_protocol(key, mine)
  local p = read_protocol(key)
  if p and p[1] ~= '?' and tonumber(p[1]) <= mine then return nil end
  return p
end
local function claim_longest(key, ttl_ms, now)
  local l = read_longest(key) or {ms = 0, claim_until = 0, loss = 0}
  if l.claim_until > now and (l.ms > ttl_ms or (l.ms == ttl_ms and l.claim_until >= now + ttl_ms * 1000)) then
    return
  end
  l.ms = ttl_ms
  l.claim_until = now + 2 * ttl_ms * 1000
  write_longest(key, l)
end
"#;

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
/// The probe is published first, whatever the reply: a follower subscribed to its own probe
/// channel hears it on its subscription, which proves that link with the try it sends anyway
/// (instead of a keepalive `PING` of its own). Empty or absent: no probe.
///
/// The cooldown after a data loss covers the longest lease duration known (see `:longest`
/// above). The call that finds the loss announces it on the channel (`data-loss <ms>`): a
/// leader renews at once (and so finds its lease gone), and every follower tries at once, so
/// that one that knows a longer duration than the finder makes the cooldown cover it, counted
/// from the instant of the loss.
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
const ACQUIRE: &str = r#"
local probe = ARGV[8] or ''
if probe ~= '' then redis.call('PUBLISH', probe, ARGV[9] or '') end
local newer = newer_protocol(KEYS[6], tonumber(ARGV[10]))
if newer then return {'NEWER', newer[1], newer[2], now_us(), 0} end
local now = now_us()
local ttl_ms = tonumber(ARGV[2])
local server = server_identity()
local record = read_record(KEYS[3])
local observed = ARGV[4]
local longest = read_longest(KEYS[5])
local cover = math.max(ttl_ms, tonumber(ARGV[6]) or 0)
local live = 0
local lost = false
if longest then
  cover = math.max(cover, longest.ms)
  if longest.claim_until > now then live = longest.ms end
end
if record == nil or record.server ~= server then
  -- The record is missing, unreadable, or was written by another Redis process or dataset: a
  -- lease that an old leader still believes in may have been lost. A term the record names
  -- stays covered until its expiry; a term this follower still observes is named in its place
  -- (expiry unknown), so that its holder's renewal can put the key back.
  local r = record or {term = '-', term_until = 0}
  if record == nil and observed ~= '' then r.term = observed end
  r.server = server
  r.cool = now
  if ARGV[3] == '1' then r.cool = now + cover * 1000 end
  write_record(KEYS[3], r)
  if ARGV[3] == '1' then
    local l = longest or {ms = 0, claim_until = 0}
    l.loss = now
    write_longest(KEYS[5], l)
    redis.call('PUBLISH', ARGV[7], 'data-loss ' .. string.format('%d', cover))
    return {'COOLDOWN', cover, 1, now, live}
  end
  lost = true
  record = r
else
  if ARGV[3] == '1' then
    -- The cooldown covers the longest duration this caller knows too, counted from the
    -- instant of the loss, also when a shorter one has ended already. Without a usable
    -- instant while a cooldown runs (the key gone, or written by an older version), now
    -- stands for it, written once, so that later callers cannot push the end on and on.
    local l = longest or {ms = 0, claim_until = 0, loss = 0}
    if (l.loss == 0 or l.loss > now) and record.cool > now then
      l.loss = now
      write_longest(KEYS[5], l)
    end
    if l.loss > 0 and l.loss <= now and l.loss + cover * 1000 > record.cool then
      record.cool = l.loss + cover * 1000
      write_record(KEYS[3], record)
    end
  end
  if record.cool > now then
    return {'COOLDOWN', math.ceil((record.cool - now) / 1000), 0, now, live}
  end
end

local mine = ARGV[1] .. '#'
local function ours(value)
  return string.sub(value, 1, string.len(mine)) == mine
end
local current = redis.call('GET', KEYS[1])
if current and not ours(current) then
  return {'HELD', current, redis.call('PTTL', KEYS[1]), 'KEY', now, live}
end
if not current and record.term ~= '-' and not ours(record.term) then
  if record.term_until > now then
    return {'HELD', record.term, math.ceil((record.term_until - now) / 1000), 'RECORD', now, live}
  elseif record.term == observed then
    return {'HELD', record.term, -2, 'RECORD', now, live}
  end
end

-- A handover reserved the next term for one identity (ARGV[5] is ours): nobody else takes it
-- until the reservation runs out.
local reserved = redis.call('GET', KEYS[4])
if reserved and reserved ~= ARGV[5] then
  return {'RESERVED', reserved, redis.call('PTTL', KEYS[4]), now, live}
end

-- Free, or an earlier term of our own that Redis still keeps (a release that never landed):
-- we are not leading now, so a new term under a new token is safe, and the new term value
-- makes every late message of the old term miss.
local fence = redis.call('GET', KEYS[2])
local previous = 'none'
if reserved then previous = 'handed_over'
elseif lost then previous = 'data_loss'
elseif current or record.term ~= '-' then previous = 'expired'
elseif fence then previous = 'released'
end
if fence then
  local n = tonumber(fence)
  -- Tokens stay below 2^53, which Lua's numbers hold exactly (and far below INCR's limit).
  if n == nil or n < 0 or n ~= math.floor(n) or n >= 9007199254740992 then
    return redis.error_reply('LEASEHOLD fence key ' .. KEYS[2] .. ' holds ' .. fence .. ', not a token; delete it (the next token is floored at the server time)')
  end
  if n < now then fence = nil end
end
if not fence then
  redis.call('SET', KEYS[2], string.format('%d', now))
end
redis.call('INCR', KEYS[2])
local token = redis.call('GET', KEYS[2])
local term = mine .. token
redis.call('SET', KEYS[1], term, 'PX', ARGV[2])
record.term = term
record.term_until = now + ttl_ms * 1000
write_record(KEYS[3], record)
claim_longest(KEYS[5], ttl_ms, now)
local protocol = ARGV[10] .. ' ' .. ARGV[11]
if redis.call('GET', KEYS[6]) ~= protocol then redis.call('SET', KEYS[6], protocol) end
if reserved then redis.call('DEL', KEYS[4]) end
return {'ACQUIRED', token, previous, now, live}
"#;

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
const RENEW: &str = r#"
local function answer(code, now)
  local rate = ARGV[4] or ''
  if rate ~= '' then
    redis.call('SET', KEYS[5], ARGV[1] .. ' ' .. rate .. ' ' .. string.format('%d', now), 'PX', tonumber(ARGV[2]) * 3)
  end
  local listeners = redis.call('PUBSUB', 'NUMSUB', ARGV[3])[2]
  local request = redis.call('GET', KEYS[3])
  if request then
    local term, to = string.match(request, '^(%S+) (%S+)$')
    if term == ARGV[1] then return {code, listeners, now, to} end
  end
  return {code, listeners, now}
end
local current = redis.call('GET', KEYS[1])
local record = read_record(KEYS[2])
if current == ARGV[1] then
  local now = now_us()
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if record then
    record.term = ARGV[1]
    record.term_until = now + tonumber(ARGV[2]) * 1000
    write_record(KEYS[2], record)
  end
  claim_longest(KEYS[4], tonumber(ARGV[2]), now)
  return answer(1, now)
end
if current == false and record and record.term == ARGV[1] and record.server == server_identity() then
  local now = now_us()
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  record.term_until = now + tonumber(ARGV[2]) * 1000
  write_record(KEYS[2], record)
  claim_longest(KEYS[4], tonumber(ARGV[2]), now)
  return answer(2, now)
end
return 0
"#;

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
const RELEASE: &str = r#"
local function matches(value)
  if ARGV[3] == 'any' then
    return string.sub(value, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. '#'
  end
  return value == ARGV[1]
end
local current = redis.call('GET', KEYS[1])
local released = nil
if current and matches(current) then
  redis.call('DEL', KEYS[1])
  released = current
end
local record = read_record(KEYS[2])
if record and record.term ~= '-' and matches(record.term) and (released or not current) then
  released = released or record.term
  record.term = '-'
  record.term_until = 0
  write_record(KEYS[2], record)
end
if released then
  local request = redis.call('GET', KEYS[3])
  if request and string.sub(request, 1, string.len(released) + 1) == released .. ' ' then
    redis.call('DEL', KEYS[3])
  end
  if ARGV[4] ~= '' then
    redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[5])
  end
  -- The message carries how many followers listen, so that a large herd can thin itself.
  local subscribers = redis.call('PUBSUB', 'NUMSUB', ARGV[2])[2]
  redis.call('PUBLISH', ARGV[2], released .. ' ' .. subscribers)
  return 1
end
return 0
"#;

/// Observe, read-only. KEYS: lease, fence, state record, handover reservation, protocol, clock.
/// Reply: `{holder_or_nil, pttl_ms, token_or_nil, cooldown, source, reserved_or_nil,
/// reserved_pttl_ms, protocol_version, protocol_release, clock}` (the protocol's pair empty
/// without its key, `clock` the `:clock` key's value or empty) where cooldown is the ms left, 0 for none, or -1 when the next acquire
/// would start one (record missing or from another Redis), and source is `KEY`, or `RECORD`
/// when the key vanished before its time.
const OBSERVE: &str = r#"
local holder = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local record = read_record(KEYS[3])
local now = now_us()
local source = 'KEY'
local cooldown = -1
if record and record.server == server_identity() then
  cooldown = 0
  if record.cool > now then cooldown = math.ceil((record.cool - now) / 1000) end
end
if not holder and record and record.term ~= '-' and record.term_until > now then
  holder = record.term
  pttl = math.ceil((record.term_until - now) / 1000)
  source = 'RECORD'
end
local reserved = redis.call('GET', KEYS[4])
local protocol = read_protocol(KEYS[5]) or {'', ''}
return {holder, pttl, fence, cooldown, source, reserved, redis.call('PTTL', KEYS[4]), protocol[1], protocol[2], redis.call('GET', KEYS[6]) or ''}
"#;

/// Handover request: asks the leader of term ARGV[1] to step down, if the lease is still in
/// that term. The request is bound to that term (the leader's renewal compares it) and lives
/// ARGV[3] ms; a nudge on the channel makes the leader renew (and so read it) at once.
///
/// KEYS: lease, handover request. ARGV: term value, identity to hand to (`-` for anyone), ttl
/// in ms, channel. Reply: 1 requested, 0 the lease is not in that term.
const HANDOVER: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[4], 'handover ' .. ARGV[1])
return 1
"#;

/// Removal of every key of the lease, for an uninstalled lease. Unless ARGV[1] is `force`, it
/// refuses while a term may be valid, in the same step as the deletes, so that no acquire can
/// slip in between a look and the delete: the lease key exists (a live term, or a value that
/// leasehold did not write), the state record names a term not yet expired (its key vanished
/// before its time), or a data-loss cooldown runs (a term Redis lost may still be valid).
///
/// KEYS: every key of the lease ([`LeaseKeys::written`](super::LeaseKeys::written)). Reply: `{1, key…}`
/// with the keys it deleted, or `{0, "HELD", term_value, pttl_ms}` / `{0, "COOLDOWN", "",
/// remaining_ms}`.
const REMOVE: &str = r#"
if ARGV[1] ~= 'force' then
  local now = now_us()
  local holder = redis.call('GET', KEYS[1])
  if holder then return {0, 'HELD', holder, redis.call('PTTL', KEYS[1])} end
  local record = read_record(KEYS[3])
  if record and record.term ~= '-' and record.term_until > now then
    return {0, 'HELD', record.term, math.ceil((record.term_until - now) / 1000)}
  end
  if record and record.cool > now and record.server == server_identity() then
    return {0, 'COOLDOWN', '', math.ceil((record.cool - now) / 1000)}
  end
end
local removed = {1}
for _, key in ipairs(KEYS) do
  if redis.call('DEL', key) == 1 then table.insert(removed, key) end
end
return removed
"#;

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
    Some(format!("{RECORD}{}", body(op)?))
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
    let source = source(op)?;
    let text = source.split('\n').nth(line.checked_sub(1)?)?;
    let call = text.split("redis.call('").nth(1)?;
    let command = call.split('\'').next()?.to_ascii_lowercase();
    // `INFO` is allowed per section: name the one that line asks for.
    let section = call.split('\'').nth(2).filter(|_| command == "info");
    Some(match section {
        Some(section) => format!("{command}|{}", section.to_ascii_lowercase()),
        None => command,
    })
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
