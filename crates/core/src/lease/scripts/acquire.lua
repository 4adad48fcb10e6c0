local probe = ARGV[8] or ''
if probe ~= '' then redis.call('PUBLISH', probe, ARGV[9] or '') end
local replication = redis.call('INFO', 'replication')
local replica = refuse_replica(replication)
if replica then return replica end
-- A Redis that fails over, reached by its own address (ARGV[12] '1'): a master that Sentinels
-- watch, or a Cluster node, whose promoted replica may lack the last term, which only the
-- cooldown covers.
local server_info = nil
if ARGV[12] == '1' then
  local watched = refuse_watched(ARGV[12], redis.call('PUBSUB', 'NUMSUB', '__sentinel__:hello')[2])
  if watched then return watched end
  if ARGV[3] ~= '1' then server_info = redis.call('INFO', 'server') end
  if server_info and string.match(server_info, '\n%w+_mode:cluster') then
    return redis.error_reply('FAILSOVER this redis is a Cluster node: a replica it fails over to may lack the last term, which only the data-loss cooldown covers; drop --no-data-loss-cooldown (LeaseOptions::cooldown_on_data_loss), or name the cluster, redis+cluster://')
  end
end
local newer = newer_protocol(KEYS[6], tonumber(ARGV[10]))
if newer then return {'NEWER', newer[1], newer[2], now_us(), 0} end
local now = now_us()
local ttl_ms = tonumber(ARGV[2])
local server = server_identity(replication, server_info)
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
  -- Tokens stay below 2^53 (count's rule), and far below INCR's limit.
  local n = count(fence)
  if n == nil then
    return redis.error_reply('LEASEHOLD fence key ' .. KEYS[2] .. ' holds ' .. fence .. ', not a token; delete it (the next token is floored at the server time)')
  end
  if n < now then fence = nil end
end

-- Before the first write of a grant, each command a renewal adds, and its read of the handover
-- request: a user refused one (or a request key of another type) is refused the term too,
-- rather than winning it and being refused at its first renewal (the key is free or a term of
-- ours that the SET below replaces, so the PEXPIRE changes nothing).
local listening = redis.call('PUBSUB', 'NUMSUB', ARGV[7])[2]
redis.call('GET', KEYS[7])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if reserved then redis.call('DEL', KEYS[4]) end
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
-- The others read a reservation as a holder until its end: they learn now who took it. Read
-- as a release announcement of no term they saw, it wakes them to look at once.
if reserved then redis.call('PUBLISH', ARGV[7], 'taken ' .. term .. ' ' .. listening) end
local protocol = ARGV[10] .. ' ' .. ARGV[11]
if redis.call('GET', KEYS[6]) ~= protocol then redis.call('SET', KEYS[6], protocol) end
return {'ACQUIRED', token, previous, now, live}
