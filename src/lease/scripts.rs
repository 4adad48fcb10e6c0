//! The Lua scripts behind the lease primitives. Each runs atomically inside Redis; all keys of a
//! lease share one hash tag, so each script touches a single Cluster slot.
//!
//! Numbers: tokens are microseconds since the epoch plus a count (about 1.8e15), below 2^53, so
//! Lua's doubles hold them exactly; they are still moved as strings or through `INCR`, because
//! Lua 5.1 prints large numbers in exponent form.

use std::sync::LazyLock;

use redis::Script;

/// Acquire.
///
/// KEYS: lease, fence, marker. ARGV: owner id, ttl in ms, run id of the Redis process as seen by
/// this connection, `1` to cool down after data loss or `0` not to.
///
/// Replies:
/// - `{"ACQUIRED", token}`
/// - `{"HELD", holder, pttl_ms, current_token_or_nil}`
/// - `{"COOLDOWN", remaining_ms, started}` where `started` is 1 when this call found the data
///   loss and started the cooldown.
const ACQUIRE: &str = r#"
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl_ms = tonumber(ARGV[2])

local marker = redis.call('GET', KEYS[3])
local marker_run, marker_until = nil, nil
if marker then
  local sep = string.find(marker, ' ', 1, true)
  if sep then
    marker_run = string.sub(marker, 1, sep - 1)
    marker_until = tonumber(string.sub(marker, sep + 1))
  end
end
if marker_run ~= ARGV[3] or marker_until == nil then
  -- The marker is missing, unreadable, or was written by another Redis process: this dataset
  -- may have lost a lease that an old leader still believes in.
  local cool_until = now_us
  if ARGV[4] == '1' then cool_until = now_us + ttl_ms * 1000 end
  redis.call('SET', KEYS[3], ARGV[3] .. ' ' .. string.format('%d', cool_until))
  if ARGV[4] == '1' then return {'COOLDOWN', ttl_ms, 1} end
elseif marker_until > now_us then
  return {'COOLDOWN', math.ceil((marker_until - now_us) / 1000), 0}
end

local current = redis.call('GET', KEYS[1])
if current == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
elseif current == ARGV[1] then
  -- Our own lease from an earlier term that Redis still keeps (restored from disk, say): we
  -- are not leading now, so taking it back under a new token is safe.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  return {'HELD', current, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
end

local fence = redis.call('GET', KEYS[2])
if fence then
  local n = tonumber(fence)
  if n == nil or n < 0 or n ~= math.floor(n) then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('LEASEHOLD fence key ' .. KEYS[2] .. ' holds ' .. fence .. ', not a token; delete it (the next token is floored at the server time)')
  end
  if n < now_us then fence = nil end
end
if not fence then
  redis.call('SET', KEYS[2], string.format('%d', now_us))
end
return {'ACQUIRED', redis.call('INCR', KEYS[2])}
"#;

/// Renew: compare-and-PEXPIRE. KEYS: lease. ARGV: owner id, ttl in ms. Reply: 1 held, 0 not.
const RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"#;

/// Release: compare-and-DEL, then announce on the channel so a follower takes over at once.
/// KEYS: lease. ARGV: owner id, channel. Reply: 1 released, 0 not ours.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
"#;

/// Observe, read-only. KEYS: lease, fence, marker. ARGV: run id.
/// Reply: `{holder_or_nil, pttl_ms, token_or_nil, cooldown}` where cooldown is the ms left,
/// 0 for none, or -1 when the next acquire would start one (marker missing or foreign).
const OBSERVE: &str = r#"
local holder = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local marker = redis.call('GET', KEYS[3])
local cooldown = -1
if marker then
  local sep = string.find(marker, ' ', 1, true)
  if sep and string.sub(marker, 1, sep - 1) == ARGV[1] then
    local marker_until = tonumber(string.sub(marker, sep + 1))
    if marker_until then
      local t = redis.call('TIME')
      local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
      cooldown = 0
      if marker_until > now_us then cooldown = math.ceil((marker_until - now_us) / 1000) end
    end
  end
end
return {holder, pttl, fence, cooldown}
"#;

/// The source of the script behind primitive `op`.
fn source(op: &str) -> Option<&'static str> {
    match op {
        "acquire" => Some(ACQUIRE),
        "renew" => Some(RENEW),
        "release" => Some(RELEASE),
        "observe" => Some(OBSERVE),
        _ => None,
    }
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
    let text = source(op)?.split('\n').nth(line.checked_sub(1)?)?;
    let call = text.split("redis.call('").nth(1)?;
    Some(call.split('\'').next()?.to_ascii_lowercase())
}

pub(crate) static ACQUIRE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE));
pub(crate) static RENEW_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW));
pub(crate) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE));
pub(crate) static OBSERVE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(OBSERVE));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_line_names_its_command() {
        let msg = "The user executing the script can't run this command or subcommand script: c9d4, on @user_script:4.";
        assert_eq!(command_at("release", msg).as_deref(), Some("publish"));
        assert_eq!(
            command_at("renew", "on @user_script:2.").as_deref(),
            Some("get")
        );
        assert_eq!(
            command_at("acquire", "on @user_script:2.").as_deref(),
            Some("time")
        );
        assert_eq!(command_at("release", "no line here"), None);
        assert_eq!(command_at("nope", "on @user_script:2."), None);
    }
}
