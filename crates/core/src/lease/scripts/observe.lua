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
