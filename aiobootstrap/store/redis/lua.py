"""The Redis store's Lua scripts: each write is one of them, atomic in Redis.

Each write (put, delete) is one script: get or create the incarnation, check
the limits, take the namespace's next version (a counter starts at the floor,
and a namespace emptied raises the floor to its last version, as
:class:`~aiobootstrap.store.tables.Tables` does), write or delete the record,
keep the counts, bump ``seq`` and ``XADD`` the change to the feed (``MAXLEN
~``). A write that returned is on the feed.

Every key comes in ``KEYS`` (they share the ``{prefix}`` hash tag, so the
scripts stay valid on a cluster); ``store.redis.keys`` says what each key holds.
"""

__all__ = ["DELETE", "PUT", "VERSION", "WATCH"]

GET_OR_CREATE_INCARNATION = """
local incarnation = redis.call('GET', KEYS[1])
if not incarnation then
  incarnation = ARGV[1]
  redis.call('SET', KEYS[1], incarnation)
end
"""

# KEYS: incarnation seq floor versions counts table feed roles
# ARGV: new-incarnation namespace kind role rank registered-at value max-ranks max-namespaces feed-length
#       max-roles expected-version (optional: the write happens only if the record's version is still
#       this, -1 absent)
PUT = (
    GET_OR_CREATE_INCARNATION
    + """
local namespace, rank = ARGV[2], ARGV[5]
if ARGV[12] then
  local current = redis.call('HGET', KEYS[6], rank)
  local seen = -1
  if current then seen = tonumber(string.match(current, '^(%d+)')) end
  if seen ~= tonumber(ARGV[12]) then return {-3, seen, incarnation} end
end
if redis.call('HEXISTS', KEYS[6], rank) == 0 then
  if redis.call('HEXISTS', KEYS[5], namespace) == 0 then
    local limit, held = tonumber(ARGV[9]), redis.call('HLEN', KEYS[5])
    if limit >= 0 and held >= limit then return {-2, held, incarnation} end
  else
    local limit, held = tonumber(ARGV[8]), redis.call('HLEN', KEYS[6])
    if limit >= 0 and held > 0 and held >= limit then return {-1, held, incarnation} end
  end
  if redis.call('EXISTS', KEYS[6]) == 0 then
    -- A new role for this namespace and kind: counted, under the role cap.
    local group = namespace .. ':' .. ARGV[3]
    local limit, held = tonumber(ARGV[11]), tonumber(redis.call('HGET', KEYS[8], group) or '0')
    if limit >= 0 and held >= limit then return {-4, held, incarnation} end
    redis.call('HINCRBY', KEYS[8], group, 1)
  end
  redis.call('HINCRBY', KEYS[5], namespace, 1)
end
if redis.call('HEXISTS', KEYS[4], namespace) == 0 then
  redis.call('HSET', KEYS[4], namespace, redis.call('GET', KEYS[3]) or 0)
end
local version = redis.call('HINCRBY', KEYS[4], namespace, 1)
redis.call('HSET', KEYS[6], rank, string.format('%d', version) .. ' ' .. ARGV[6] .. ' ' .. ARGV[7])
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[10], '*',
  's', seq, 'n', namespace, 'k', ARGV[3], 'r', ARGV[4], 'i', rank, 'v', version, 'o', 'put')
return {version, 0, incarnation}
"""
)

# KEYS: as PUT.  ARGV: new-incarnation namespace kind role rank feed-length
DELETE = (
    GET_OR_CREATE_INCARNATION
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
return {version, incarnation, current}
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
