// The store's three writes, each one Lua script: Redis runs a script to the end before any other
// command, so a read and the write that depends on it can never be split by another client's
// claim. Every script touches one key (KEYS[1]), so it runs on Redis Cluster too.
//
// A key is a hash: `owner` and `claimedAt` while claimed, `confirmedAt` once confirmed. Times
// are the store's clock in epoch milliseconds, passed in as text and stored as given (Lua
// would print a number that large as 1.9e+12). Redis's own expiry only clears keys away after
// the store stops caring about them; every answer compares the stored times with `now`.

/**
 * KEYS[1] the id's key; ARGV: owner, now, claim timeout (ms), retention (ms), the key's expiry
 * once claimed (ms). Answers 'claimed', 'duplicate' or 'in_progress'.
 */
export const TRY_CLAIM = `
local entry = redis.call('HMGET', KEYS[1], 'claimedAt', 'confirmedAt')
local now = tonumber(ARGV[2])
if entry[2] then
  if tonumber(entry[2]) + tonumber(ARGV[4]) >= now then return 'duplicate' end
elseif entry[1] then
  if tonumber(entry[1]) + tonumber(ARGV[3]) >= now then return 'in_progress' end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'claimedAt', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 'claimed'
`

/**
 * KEYS[1] the id's key; ARGV: now, the key's expiry once confirmed (ms). Whoever holds the
 * claim now, the work is done: a confirm that comes after its lease was lost is still recorded.
 */
export const CONFIRM = `
redis.call('HSET', KEYS[1], 'confirmedAt', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`

/**
 * KEYS[1] the id's key; ARGV: owner. Frees the claim only while `owner` holds it and it is not
 * confirmed; answers 1 when it freed it.
 */
export const RELEASE = `
local entry = redis.call('HMGET', KEYS[1], 'owner', 'confirmedAt')
if entry[2] or entry[1] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`
