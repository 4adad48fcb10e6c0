-- Fenced write: refuses a fencing token lower than the highest this resource has seen, else
-- performs the write and records the token, in one atomic step.
-- KEYS[1]   the resource's token key (keep it without TTL)
-- KEYS[2..] the keys the write touches (on a Cluster: with the token key's hash tag)
-- ARGV[1]   the fencing token, in decimal
-- ARGV[2..] the write: a command and its arguments
-- Reply: the write's reply, or the error "STALE seen=<highest> offered=<token>".
local offered = ARGV[1]
if not offered or not string.match(offered, '^[0-9]+$') then
  return redis.error_reply('ERR the fencing token must be decimal digits')
end
offered = string.match(offered, '^0*(.-.)$')
if #offered > 20 or (#offered == 20 and offered > '18446744073709551615') then
  return redis.error_reply('ERR the fencing token is past what 64 bits hold')
end
local seen = redis.call('GET', KEYS[1])
if seen then
  -- Decimal digits that 64 bits hold: a longer value was written by someone else.
  if (not string.match(seen, '^[1-9][0-9]*$') and seen ~= '0') or #seen > 20
      or (#seen == 20 and seen > '18446744073709551615') then
    return redis.error_reply('ERR the token key does not hold a fencing token')
  end
  -- Compared as digit strings: exact for any 64-bit token, where Lua's numbers are not.
  if #seen > #offered or (#seen == #offered and seen > offered) then
    return redis.error_reply('STALE seen=' .. seen .. ' offered=' .. offered)
  end
end
-- The write first: if it fails, the script stops before the token moves.
local reply = redis.call(unpack(ARGV, 2))
redis.call('SET', KEYS[1], offered)
return reply
