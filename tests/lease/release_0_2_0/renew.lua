-- The renew script of leasehold 0.2.0 (commit 4ce6637), as that release runs it: the
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
local function answer(code)
  local request = redis.call('GET', KEYS[3])
  if request then
    local term, to = string.match(request, '^(%S+) (%S+)$')
    if term == ARGV[1] then return {code, to} end
  end
  return code
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
  return answer(1)
end
if current == false and record and record.term == ARGV[1] and record.server == server_identity() then
  local now = now_us()
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  record.term_until = now + tonumber(ARGV[2]) * 1000
  write_record(KEYS[2], record)
  claim_longest(KEYS[4], tonumber(ARGV[2]), now)
  return answer(2)
end
return 0
