if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
-- The nudge goes first: a user refused it stores no request (which the leader would act on).
redis.call('PUBLISH', ARGV[4], 'handover ' .. ARGV[1])
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
return 1
