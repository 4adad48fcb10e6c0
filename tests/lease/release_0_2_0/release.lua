-- The release script of leasehold 0.2.0 (commit 4ce6637), as that release runs it: the
-- record prelude, then the body. Kept unchanged to test that 0.2.0 and this release share a lease.
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
local function claim_longest(key, ttl_ms, now)
  local l = read_longest(key) or {ms = 0, claim_until = 0, loss = 0}
  if l.claim_until > now and (l.ms > ttl_ms or (l.ms == ttl_ms and l.claim_until >= now + ttl_ms * 1000)) then
    return
  end
  l.ms = ttl_ms
  l.claim_until = now + 2 * ttl_ms * 1000
  write_longest(key, l)
end
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
