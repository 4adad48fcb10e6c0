local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- A replica holds no term and takes none of the lease's writes, also one that accepts writes
-- (`replica-read-only no`): what it keeps is its own, not the master's that the others read.
-- Refused as a read-only replica refuses (READONLY); nil on a master. The role is the section's
-- first field: a master's own lines name each replica by the address it announces, any text.
local function refuse_replica(replication)
  if string.match(replication, '^[^\n]*\nrole:(%w+)') == 'slave' then
    return redis.error_reply('READONLY leasehold: this redis is a replica that accepts writes (replica-read-only no), not the master')
  end
end
-- A Redis reached by its own address (ARGV `1` for it) that Sentinels watch (`watching`, the
-- listeners on their hello channel) would grant terms on a deposed master beside the new
-- master's, where no Sentinel is asked: refused (nil otherwise).
local function refuse_watched(single, watching)
  if single == '1' and watching > 0 then
    return redis.error_reply('FAILSOVER ' .. watching .. ' sentinels watch this redis: reached by its own address it would grant terms on a deposed master beside the new master\'s; name it through the Sentinels, redis+sentinel://host:26379,…/<master>')
  end
end
local function server_identity(replication, server)
  server = server or redis.call('INFO', 'server')
  replication = replication or redis.call('INFO', 'replication')
  -- Each field at the start of its line: a master's replica lines hold announced addresses.
  local run = string.match(server, '\nrun_id:(%w+)') or '?'
  local replid = string.match(replication, '\nmaster_replid:(%w+)') or '?'
  return run .. '/' .. replid
end
-- A whole number as leasehold writes them (below 2^53, which a double holds exactly and a
-- reply's integer carries); nil for anything larger, which it never wrote.
local function count(digits)
  if not digits or string.len(digits) > 16 or not string.match(digits, '^%d+$') then return nil end
  local n = tonumber(digits)
  if n >= 9007199254740992 then return nil end
  return n
end
local function read_record(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local server, cool, term, term_until = string.match(raw, '^(%S+) (%d+) (%S+) (%d+)$')
  cool, term_until = count(cool), count(term_until)
  if not (server and cool and term_until) then return nil end
  return {server = server, cool = cool, term = term, term_until = term_until}
end
local function write_record(key, r)
  redis.call('SET', key, r.server .. ' ' .. string.format('%d', r.cool) .. ' ' .. r.term .. ' ' .. string.format('%d', r.term_until))
end
local function read_longest(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local ms, claim_until, loss = string.match(raw, '^(%d+) (%d+) (%d+)$')
  ms, claim_until, loss = count(ms), count(claim_until), count(loss)
  -- No leasehold claims more than an hour (Timing::MAX): a longer claim is foreign.
  if not (ms and claim_until and loss) or ms > 3600000 then return nil end
  return {ms = ms, claim_until = claim_until, loss = loss}
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
