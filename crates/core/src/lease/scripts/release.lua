local function matches(value)
  if ARGV[3] == 'any' then
    return string.sub(value, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. '#'
  end
  return value == ARGV[1]
end
local current = redis.call('GET', KEYS[1])
local released = nil
if current and matches(current) then released = current end
local record = read_record(KEYS[2])
local ends_record = record and record.term ~= '-' and matches(record.term) and (released or not current)
if ends_record then released = released or record.term end
if not released then return 0 end
-- The announcement goes first: a user refused it is refused the release before any write.
-- The message carries how many followers listen, so that a large herd can thin itself.
local subscribers = redis.call('PUBSUB', 'NUMSUB', ARGV[2])[2]
redis.call('PUBLISH', ARGV[2], released .. ' ' .. subscribers)
if current == released then redis.call('DEL', KEYS[1]) end
if ends_record then
  record.term = '-'
  record.term_until = 0
  write_record(KEYS[2], record)
end
local request = redis.call('GET', KEYS[3])
if request and string.sub(request, 1, string.len(released) + 1) == released .. ' ' then
  redis.call('DEL', KEYS[3])
end
-- A reservation key without expiry is not leasehold's: it is never written over.
if ARGV[4] ~= '' and redis.call('PTTL', KEYS[4]) ~= -1 then
  redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[5])
end
return 1
