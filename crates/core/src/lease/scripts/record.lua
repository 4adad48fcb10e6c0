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
