local counted
local function answer(code, now)
  local rate = ARGV[4] or ''
  if rate ~= '' then
    redis.call('SET', KEYS[5], ARGV[1] .. ' ' .. rate .. ' ' .. string.format('%d', now), 'PX', tonumber(ARGV[2]) * 3)
  end
  local listeners = counted[2]
  local request = redis.call('GET', KEYS[3])
  if request then
    local term, to = string.match(request, '^(%S+) (%S+)$')
    if term == ARGV[1] then return {code, listeners, now, to} end
  end
  return {code, listeners, now}
end
local replication = redis.call('INFO', 'replication')
local replica = refuse_replica(replication)
if replica then return replica end
-- The release channel's listeners, for the answer, and the Sentinels': ones that came to watch
-- a master this term was won on by its address end it here.
counted = redis.call('PUBSUB', 'NUMSUB', ARGV[3], '__sentinel__:hello')
local watched = refuse_watched(ARGV[5], counted[4])
if watched then return watched end
local current = redis.call('GET', KEYS[1])
local record = read_record(KEYS[2])
local now = now_us()
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if record then
    record.term = ARGV[1]
    record.term_until = now + tonumber(ARGV[2]) * 1000
    write_record(KEYS[2], record)
  end
  claim_longest(KEYS[4], tonumber(ARGV[2]), now)
  return answer(1, now)
end
-- Put back a key that vanished before its time (evicted, deleted, or lost with the data while a
-- follower named the term, its expiry unknown: 0), never one that expired: the holder of an
-- expired term is past its deadline, and the others may take the lease.
if current == false and record and record.term == ARGV[1] and record.server == server_identity(replication) and (record.term_until == 0 or now < record.term_until) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  record.term_until = now + tonumber(ARGV[2]) * 1000
  write_record(KEYS[2], record)
  claim_longest(KEYS[4], tonumber(ARGV[2]), now)
  return answer(2, now)
end
-- With the time: a step of Redis's clock past the lease's expiry is refused too, and shows.
return {0, now}
