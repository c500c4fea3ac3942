"""The Redis store's Lua scripts: each write is one of them, atomic in Redis.

Each write (put, delete) is one script (the puts of one write batch share
one, ``PUTS``, each put in it as atomic as alone): get or create the incarnation, check
the limits, take the namespace's next version (a counter starts at the floor,
and a namespace emptied raises the floor to its last version, as
:class:`~aiobootstrap.store.tables.Tables` does), write or delete the record,
keep the counts, bump ``seq`` and ``XADD`` the change to the feed (``MAXLEN
~``). A write that returned is on the feed.

Every key comes in ``KEYS`` (they share the ``{prefix}`` hash tag, so the
scripts stay valid on a cluster); ``store.redis.keys`` says what each key holds.
"""

from .lease_lua import ATTACH, NOW_MS

__all__ = ["DELETE", "END", "PUTS", "PUT_ARGS", "VERSION", "WATCH"]

GET_OR_CREATE_INCARNATION = """
local incarnation = redis.call('GET', KEYS[1])
if not incarnation then
  incarnation = ARGV[1]
  redis.call('SET', KEYS[1], incarnation)
end
"""

# Leases (``lease_lua``): what a write moves to its lease, or to none.
HOLDING = "local owners, prefix = KEYS[10], string.sub(KEYS[9], 1, -7)\n" + ATTACH

PUT_ARGS = 11
"""The arguments of each put in ``PUTS``."""

# The puts of one write batch, each as atomic as the whole script, in order.
# KEYS: incarnation seq floor versions counts feed roles leases owners, then each rank table written
# ARGV: new-incarnation max-ranks max-namespaces feed-length max-roles, then PUT_ARGS a put:
#       table (its index in KEYS) namespace kind role field (``keys.field``: the rank, or ':' and the name)
#       registered-at value lease ('' none)
#       target ('-' the record, '+MEMBER' / '-MEMBER' one member of a set record, added / removed)
#       expected-version ('' none; else the write happens only if the record's version is still this, -1 absent)
#       cap ('' none: max-ranks; else the kind's cap, ``StoreLimits.kind_caps``, in its place)
# -> {incarnation, status, held, ...}, a pair a put: status its version, or refused: -1 the rank (or kind) cap,
#    -2 the namespace cap, -3 not the expected version (held: the version seen), -4 the role cap, -5 no lease
PUTS = (
    GET_OR_CREATE_INCARNATION
    + "local owners, prefix = KEYS[9], string.sub(KEYS[8], 1, -7)\n"
    + ATTACH
    + """
local max_ranks, max_namespaces = tonumber(ARGV[2]), tonumber(ARGV[3])
local feed_length, max_roles = ARGV[4], tonumber(ARGV[5])
local function put(rows, namespace, kind, role, rank, at, value, lease, target, expected, cap)
  if expected ~= '' then
    local current = redis.call('HGET', rows, rank)
    local seen = -1
    if current then seen = tonumber(string.match(current, '^(%d+)')) end
    if seen ~= tonumber(expected) then return -3, seen end
  end
  if not lease_in(KEYS[8], lease, namespace) then return -5, 0 end
  if redis.call('HEXISTS', rows, rank) == 0 then
    if redis.call('HEXISTS', KEYS[5], namespace) == 0 then
      local held = redis.call('HLEN', KEYS[5])
      if max_namespaces >= 0 and held >= max_namespaces then return -2, held end
    else
      local held, limit = redis.call('HLEN', rows), max_ranks
      if cap ~= '' then limit = tonumber(cap) end
      if limit >= 0 and held > 0 and held >= limit then return -1, held end
    end
    if redis.call('EXISTS', rows) == 0 then
      -- A new role for this namespace and kind: counted, under the role cap.
      local group = namespace .. ':' .. kind
      local held = tonumber(redis.call('HGET', KEYS[7], group) or '0')
      if max_roles >= 0 and held >= max_roles then return -4, held end
      redis.call('HINCRBY', KEYS[7], group, 1)
    end
    redis.call('HINCRBY', KEYS[5], namespace, 1)
  end
  if redis.call('HEXISTS', KEYS[4], namespace) == 0 then
    redis.call('HSET', KEYS[4], namespace, redis.call('GET', KEYS[3]) or 0)
  end
  local version = redis.call('HINCRBY', KEYS[4], namespace, 1)
  redis.call('HSET', rows, rank, string.format('%d', version) .. ' ' .. at .. ' ' .. value)
  local seq = redis.call('INCR', KEYS[2])
  -- 'm': the set member added ('+URL') or removed ('-URL'), so every replica can tell the change ('-': none).
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', feed_length, '*',
    's', seq, 'n', namespace, 'k', kind, 'r', role, 'i', rank, 'v', version, 'o', 'put', 'm', target)
  local member = nil
  if target ~= '-' then member = string.sub(target, 2) end
  attach(target_of(namespace, kind, role, rank, member), lease)
  return version, 0
end
local replies = {incarnation}
for i = 6, #ARGV, 11 do
  local status, held = put(KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], ARGV[i + 10])
  replies[#replies + 1] = status
  replies[#replies + 1] = held
end
return replies
"""
)

# KEYS: incarnation seq floor versions counts table feed roles leases owners (``Keys.write``)
# ARGV: new-incarnation namespace kind role field feed-length
DELETE = (
    GET_OR_CREATE_INCARNATION
    + HOLDING
    + """
local namespace, rank = ARGV[2], ARGV[5]
local current = redis.call('HGET', KEYS[6], rank)
if not current then return {0, incarnation} end
redis.call('HDEL', KEYS[6], rank)
if redis.call('EXISTS', KEYS[6]) == 0 then
  local group = namespace .. ':' .. ARGV[3]
  if redis.call('HINCRBY', KEYS[8], group, -1) <= 0 then redis.call('HDEL', KEYS[8], group) end
end
if redis.call('HEXISTS', KEYS[4], namespace) == 0 then
  redis.call('HSET', KEYS[4], namespace, redis.call('GET', KEYS[3]) or 0)
end
local version = redis.call('HINCRBY', KEYS[4], namespace, 1)
if redis.call('HINCRBY', KEYS[5], namespace, -1) <= 0 then
  -- The namespace is empty: forget it; the floor keeps its versions from coming back.
  redis.call('HDEL', KEYS[5], namespace)
  redis.call('HDEL', KEYS[4], namespace)
  if version > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], version) end
end
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[6], '*',
  's', seq, 'n', namespace, 'k', ARGV[3], 'r', ARGV[4], 'i', rank, 'v', version, 'o', 'del')
attach(target_of(namespace, ARGV[3], ARGV[4], rank), '')
return {version, incarnation, current}
"""
)

# KEYS: incarnation seq floor versions counts held feed roles leases owners deadlines (as DELETE, with the
#       lease's held set for the table, and the deadlines)
# ARGV: new-incarnation feed-length id namespace ('' : expire, only if due; else revoke, in that namespace)
# -> {1, incarnation, "NS TTL", targets} ended; {0, incarnation} not due; {-5, incarnation} no such lease
END = (
    GET_OR_CREATE_INCARNATION
    + NOW_MS
    + """
local id = ARGV[3]
local info = redis.call('HGET', KEYS[9], id)
if not info then return {-5, incarnation} end
if ARGV[4] ~= '' then
  if string.match(info, '^(%S+)') ~= ARGV[4] then return {-5, incarnation} end
elseif tonumber(redis.call('ZSCORE', KEYS[11], id) or '0') > now then
  return {0, incarnation}
end
local prefix = string.sub(KEYS[9], 1, -7)
local function next_version(ns)
  if redis.call('HEXISTS', KEYS[4], ns) == 0 then
    redis.call('HSET', KEYS[4], ns, redis.call('GET', KEYS[3]) or 0)
  end
  return redis.call('HINCRBY', KEYS[4], ns, 1)
end
local function announce(t, version, op, member)
  local seq = redis.call('INCR', KEYS[2])
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[2], '*',
    's', seq, 'n', t[1], 'k', t[2], 'r', t[3], 'i', t[4], 'v', version, 'o', op, 'm', member)
end
local function delete_rank(t, rows)
  -- As DELETE does: the record, its role's and namespace's counts, the floor.
  redis.call('HDEL', rows, t[4])
  if redis.call('EXISTS', rows) == 0 then
    local group = t[1] .. ':' .. t[2]
    if redis.call('HINCRBY', KEYS[8], group, -1) <= 0 then redis.call('HDEL', KEYS[8], group) end
  end
  local version = next_version(t[1])
  if redis.call('HINCRBY', KEYS[5], t[1], -1) <= 0 then
    redis.call('HDEL', KEYS[5], t[1])
    redis.call('HDEL', KEYS[4], t[1])
    if version > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], version) end
  end
  announce(t, version, 'del', '-')
end
local function remove_member(t, rows, current)
  -- As a set member's removal does: a put of the list without it (an empty list stays).
  local value = cjson.decode(string.match(current, '^%d+ %S+ (.*)$'))
  local kept, found = {}, false
  for _, member in ipairs(value.members or {}) do
    if member == t[5] then found = true else kept[#kept + 1] = member end
  end
  if not found then return end
  local json = '{"members":[]}'
  if #kept > 0 then json = cjson.encode({members = kept}) end
  local version = next_version(t[1])
  local at = string.format('%d.%06d', clock[1], clock[2])
  redis.call('HSET', rows, t[4], string.format('%d', version) .. ' ' .. at .. ' ' .. json)
  announce(t, version, 'put', '-' .. t[5])
end
local targets = redis.call('SMEMBERS', KEYS[6])
for _, target in ipairs(targets) do
  redis.call('HDEL', KEYS[10], target)
  local t = cjson.decode(target)
  local rows = prefix .. 'records:' .. t[1] .. ':' .. t[2] .. ':' .. t[3]
  local current = redis.call('HGET', rows, t[4])
  if current then
    if t[5] then remove_member(t, rows, current) else delete_rank(t, rows) end
  end
end
redis.call('DEL', KEYS[6])
redis.call('HDEL', KEYS[9], id)
redis.call('ZREM', KEYS[11], id)
local owner = string.match(info, '^(%S+)')
if redis.call('HINCRBY', prefix .. 'lease_counts', owner, -1) <= 0 then
  redis.call('HDEL', prefix .. 'lease_counts', owner)
end
return {1, incarnation, info, targets}
"""
)

# KEYS: incarnation seq feed.  ARGV: new-incarnation.  The watcher's poll, and open's first read.
WATCH = (
    GET_OR_CREATE_INCARNATION
    + """
local tail = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
local last = '0-0'
if tail[1] then last = tail[1][1] end
return {incarnation, tonumber(redis.call('GET', KEYS[2]) or '0'), last}
"""
)

# KEYS: versions floor.  ARGV: namespace
VERSION = "return tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or redis.call('GET', KEYS[2]) or '0')"
