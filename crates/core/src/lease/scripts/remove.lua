local replication = redis.call('INFO', 'replication')
local replica = refuse_replica(replication)
if replica then return replica end
if ARGV[1] ~= 'force' then
  local now = now_us()
  local holder = redis.call('GET', KEYS[1])
  if holder then return {0, 'HELD', holder, redis.call('PTTL', KEYS[1])} end
  local record = read_record(KEYS[3])
  if record and record.term ~= '-' and record.term_until > now then
    return {0, 'HELD', record.term, math.ceil((record.term_until - now) / 1000)}
  end
  if record and record.cool > now and record.server == server_identity(replication) then
    return {0, 'COOLDOWN', '', math.ceil((record.cool - now) / 1000)}
  end
end
local removed = {1}
for _, key in ipairs(KEYS) do
  if redis.call('DEL', key) == 1 then table.insert(removed, key) end
end
return removed
