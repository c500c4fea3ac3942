"""The Redis store's lease scripts: grant, keepalive, read, attach, and the end of a lease.

A lease is a field of ``{P}:leases`` (``ID -> "NS TTL"``: its count is the
``--max-leases`` count; ``{P}:lease_counts`` counts each namespace's, for its
share) and a member of ``{P}:deadlines`` (score: its
deadline in milliseconds on Redis' own clock, ``TIME`` in the script, so the
replicas' clocks never matter). What it holds is the set ``{P}:held:ID`` of
*targets*, and ``{P}:owners`` says whose each target is (``target -> ID``):
a target is ``cjson.encode({NS, KIND, ROLE, FIELD})`` for a per-rank record
(``FIELD``: its rank's field, or its name's, ``:NAME``, as ``keys.field``
spells it; cjson escapes whatever a name holds), with a fifth element, the
member, for one member of a set record. Only the
scripts build targets, so one encoding holds everywhere.

:data:`ATTACH` (spliced into the PUT and DELETE scripts, and alone in
:data:`HOLD`) moves a target to a lease or to none in the same script as the
write. ``lua.END`` deletes a lease's records exactly as DELETE (or a set
member's removal) does, each a change with its own version on the feed, then
the lease: atomic, so when two replicas run it for one lease, the second
finds nothing to do. Two kinds of key are named inside the scripts rather
than in ``KEYS`` (a previous owner's ``held`` set, a target's rank table):
they share the ``{prefix}`` hash tag, so they live in the scripts' slot.
"""

__all__ = ["ATTACH", "DUE", "GRANT", "HOLD", "HOLDERS", "KEEPALIVE", "NOW_MS", "READ"]

NOW_MS = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

# Needs locals: `owners` (the owners hash) and `prefix` ("{P}:").
ATTACH = """
local function target_of(ns, kind, role, rank, member)
  if member then return cjson.encode({ns, kind, role, rank, member}) end
  return cjson.encode({ns, kind, role, rank})
end
local function attach(target, lease)
  local old = redis.call('HGET', owners, target)
  if old == lease then return end
  if old then redis.call('SREM', prefix .. 'held:' .. old, target) end
  if lease ~= '' then
    redis.call('HSET', owners, target, lease)
    redis.call('SADD', prefix .. 'held:' .. lease, target)
  elseif old then
    redis.call('HDEL', owners, target)
  end
end
local function lease_in(leases, lease, ns)
  if lease == '' then return true end
  local info = redis.call('HGET', leases, lease)
  return info and string.match(info, '^(%S+)') == ns
end
"""

# KEYS: leases deadlines.  ARGV: id namespace ttl max-leases
# -> {0, held} granted; {-1, held} past max-leases; {-2, held} the id taken; {-3, held, here, share} past the
# namespace's share (``limits.lease_share``), counted in ``{P}:lease_counts`` (namespace -> leases).
GRANT = (
    NOW_MS
    + """
local held, limit = redis.call('HLEN', KEYS[1]), tonumber(ARGV[4])
local counts = string.sub(KEYS[1], 1, -7) .. 'lease_counts'
if limit >= 0 then
  if held >= limit then return {-1, held} end
  local here = tonumber(redis.call('HGET', counts, ARGV[2]) or '0')
  local share = math.max(1, math.floor((limit - (held - here)) / 2))
  if here >= share then return {-3, held, here, share} end
end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3]) == 0 then return {-2, held} end
redis.call('HINCRBY', counts, ARGV[2], 1)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]) * 1000, ARGV[1])
return {0, held + 1}
"""
)

# KEYS[1] leases, ARGV[1] id, ARGV[2] namespace: the lease's `ttl`, or 0 when it is not in that namespace.
FIND = """
local info = redis.call('HGET', KEYS[1], ARGV[1])
if not info then return 0 end
local ns, ttl = string.match(info, '^(%S+) (%S+)$')
if ns ~= ARGV[2] then return 0 end
"""

# KEYS: leases deadlines.  ARGV: id namespace.  A lease lives until a reaper ends it, as in a local store:
# past its deadline, a keepalive that reaches it first keeps it (one a replica's held loop kept in
# its socket while its reaper waited, store.leases.grace_after_held_loop).
KEEPALIVE = (
    NOW_MS
    + FIND
    + """
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], now + tonumber(ttl) * 1000, ARGV[1])
return ttl
"""
)

# KEYS: leases deadlines held.  ARGV: id namespace.  -> {ttl, remaining-ms, targets}
READ = (
    NOW_MS
    + FIND
    + """
local remaining = math.max(0, tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0') - now)
return {ttl, remaining, redis.call('SMEMBERS', KEYS[3])}
"""
)

# KEYS: table leases owners.  ARGV: namespace kind role rank member lease expected-version
# A set member already listed, moved to a lease or to none, if the record is still at that version.
HOLD = (
    "local owners, prefix = KEYS[3], string.sub(KEYS[2], 1, -7)\n"
    + ATTACH
    + """
local current = redis.call('HGET', KEYS[1], ARGV[4])
if not current or tonumber(string.match(current, '^(%d+)')) ~= tonumber(ARGV[7]) then return -3 end
if not lease_in(KEYS[2], ARGV[6], ARGV[1]) then return -5 end
attach(target_of(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]), ARGV[6])
return 0
"""
)

# KEYS: owners deadlines leases.  ARGV: namespace kind role rank...  -> {lease or '', remaining-ms, ttl} per rank
HOLDERS = (
    NOW_MS
    + "local owners, prefix = KEYS[1], ''\n"
    + ATTACH
    + """
local out = {}
for i = 4, #ARGV do
  local lease = redis.call('HGET', owners, target_of(ARGV[1], ARGV[2], ARGV[3], ARGV[i]))
  local deadline = lease and redis.call('ZSCORE', KEYS[2], lease)
  local info = deadline and redis.call('HGET', KEYS[3], lease)
  if info then
    out[#out + 1] = lease
    out[#out + 1] = math.max(0, tonumber(deadline) - now)
    out[#out + 1] = string.match(info, '(%S+)$')
  else
    out[#out + 1] = ''
    out[#out + 1] = 0
    out[#out + 1] = '0'
  end
end
return out
"""
)

# KEYS: deadlines leases.  ARGV: at-most.  -> {leases held, ids due, ms until the next deadline (-1: none)}
DUE = (
    NOW_MS
    + """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
local next = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local wait = -1
if next[2] then wait = math.ceil(tonumber(next[2]) - now) end
return {redis.call('HLEN', KEYS[2]), due, wait}
"""
)
