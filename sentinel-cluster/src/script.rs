//! The Lua scripts, one per operation, and the keys they touch. Every key
//! of one flow id carries the hash tag `{<prefix>:flow:<id>}`, so a flow's
//! keys sit in one slot and the scripts run on a Redis Cluster. Time is
//! the server's (`TIME`), never an instance's clock.

use redis::Script;

/// Charges this instance's fallback admissions to the flow's sliding
/// window, then grants up to a lease of permits within it.
///
/// KEYS: the window hash (field: bucket start ms, value: permits granted
/// in that bucket), the instances sorted set (member: instance id, score:
/// expiry ms), the counts hash (member: instance id, value: the count of
/// its rule). ARGV: permits needed, count, avg_local (0/1), window ms,
/// sample count, lease divisor, max lease, instance id, instance ttl ms,
/// then pairs of (age ms, admissions): fallback admissions of this
/// instance, each counted in the bucket that held `now - age`.
///
/// The threshold is the lowest count among the live instances' rules
/// (times the live instances for avg_local), the same for every
/// instance: during a rolling change of the count no instance is starved
/// by another's higher count.
///
/// Returns `{granted, window total after, threshold, server now ms,
/// bucket end ms, live instances}`. Grants nothing (0) when fewer than
/// `need` permits remain; otherwise at least `need`, at most `max lease`,
/// aiming at `remaining / (divisor x instances)`: leases shrink as the
/// window fills.
const ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local need = math.max(1, tonumber(ARGV[1]))
local count = tonumber(ARGV[2])
local window = tonumber(ARGV[4])
local samples = tonumber(ARGV[5])
local divisor = tonumber(ARGV[6])
local max_lease = tonumber(ARGV[7])
local ttl = tonumber(ARGV[9])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
local instances = math.max(1, redis.call('ZCARD', KEYS[2]))
redis.call('HSET', KEYS[3], ARGV[8], ARGV[2])
local lowest = count
local counts = redis.call('HGETALL', KEYS[3])
for i = 1, #counts, 2 do
  if redis.call('ZSCORE', KEYS[2], counts[i]) then
    local other = tonumber(counts[i + 1])
    if other < lowest then lowest = other end
  else
    redis.call('HDEL', KEYS[3], counts[i])
  end
end
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
local threshold = lowest
if ARGV[3] == '1' then threshold = lowest * instances end
threshold = math.floor(threshold)
local bucket = math.floor(window / samples)
local start = now - (now % bucket)
local oldest = start - (samples - 1) * bucket
for i = 10, #ARGV - 1, 2 do
  local at = now - tonumber(ARGV[i])
  local n = tonumber(ARGV[i + 1])
  at = at - (at % bucket)
  if at >= oldest and n > 0 then
    redis.call('HINCRBY', KEYS[1], at, n)
    redis.call('PEXPIRE', KEYS[1], window * 2)
  end
end
local fields = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 1, #fields, 2 do
  local at = tonumber(fields[i])
  if at < oldest then
    redis.call('HDEL', KEYS[1], fields[i])
  elseif at <= start then
    total = total + tonumber(fields[i + 1])
  end
end
local remaining = threshold - total
local granted = 0
if remaining >= need then
  granted = math.floor(remaining / (divisor * instances))
  if granted > max_lease then granted = max_lease end
  if granted < need then granted = need end
  if granted > remaining then granted = remaining end
  redis.call('HINCRBY', KEYS[1], start, granted)
  redis.call('PEXPIRE', KEYS[1], window * 2)
end
return {granted, total + granted, threshold, now, start + bucket, instances}
";

/// Gives back permits granted in a bucket and never spent.
///
/// KEYS: the window hash. ARGV: bucket start ms, permits. Returns the
/// permits taken back (never more than the bucket holds; none once the
/// bucket has left the window and its field is gone).
const REFUND: &str = r"
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local back = math.min(held, tonumber(ARGV[2]))
if back > 0 then redis.call('HINCRBY', KEYS[1], ARGV[1], -back) end
return back
";

/// Registers (or keeps alive) an instance of a flow id.
///
/// KEYS: the instances sorted set; for a concurrency flow, also its
/// signs-of-life sorted set (member: instance id, score: when last heard,
/// server ms). ARGV: instance id, ttl ms; with the second key, how long
/// it lives (ms). Returns the live instances.
const REGISTER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local ttl = tonumber(ARGV[2])
-- The set lives as long as its longest-lived member.
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
if KEYS[2] then
  redis.call('ZADD', KEYS[2], now, ARGV[1])
  local life = tonumber(ARGV[3])
  if redis.call('PTTL', KEYS[2]) < life then redis.call('PEXPIRE', KEYS[2], life) end
end
return redis.call('ZCARD', KEYS[1])
";

/// Takes a cluster concurrency token if the flow's tokens in use leave
/// room for it, after taking back the tokens past their deadline and
/// those of instances not heard from within the offline time.
///
/// KEYS: the tokens sorted set (member: `<instance>|<token id>|<permits>`,
/// score: the token's deadline, server ms), the held hash (field: an
/// instance id, value: the permits of its tokens in the set; field
/// `<instance>|fallback`: what its fallback admitted while it could not
/// reach Redis, as it last said), the signs-of-life sorted set, the
/// instances sorted set and the counts hash (as the acquire script).
/// ARGV: instance id, token member, permits, count, avg_local (0/1), hold
/// ms (the token's life), offline ms, instance ttl ms, the permits this
/// instance's fallback holds now.
///
/// The threshold is the lowest count among the live instances (times the
/// live instances for avg_local), as for QPS flows. A token is taken only
/// while the tokens in use, with it, stay within the threshold: the set
/// holds at most the threshold's permits (the highest in force while they
/// were taken). Returns `{taken (0/1), permits in use after, threshold,
/// server now ms, live instances}`.
const CONCURRENT_ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me = ARGV[1]
local permits = tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local hold = tonumber(ARGV[6])
local offline = tonumber(ARGV[7])
local ttl = tonumber(ARGV[8])
local fallback = tonumber(ARGV[9])
redis.call('ZADD', KEYS[4], now + ttl, me)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
if redis.call('PTTL', KEYS[4]) < ttl then redis.call('PEXPIRE', KEYS[4], ttl) end
local instances = math.max(1, redis.call('ZCARD', KEYS[4]))
redis.call('HSET', KEYS[5], me, ARGV[4])
local lowest = count
local counts = redis.call('HGETALL', KEYS[5])
for i = 1, #counts, 2 do
  if redis.call('ZSCORE', KEYS[4], counts[i]) then
    local other = tonumber(counts[i + 1])
    if other < lowest then lowest = other end
  else
    redis.call('HDEL', KEYS[5], counts[i])
  end
end
if redis.call('PTTL', KEYS[5]) < ttl then redis.call('PEXPIRE', KEYS[5], ttl) end
local threshold = lowest
if ARGV[5] == '1' then threshold = lowest * instances end
threshold = math.floor(threshold)
redis.call('ZADD', KEYS[3], now, me)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, token in ipairs(expired) do
  redis.call('ZREM', KEYS[1], token)
  local who, n = string.match(token, '^(.*)|[^|]*|([^|]*)$')
  if who then redis.call('HINCRBY', KEYS[2], who, -tonumber(n)) end
end
if fallback > 0 then
  redis.call('HSET', KEYS[2], me .. '|fallback', fallback)
else
  redis.call('HDEL', KEYS[2], me .. '|fallback')
end
local held = redis.call('HGETALL', KEYS[2])
local total = 0
local gone = {}
local any_gone = false
for i = 1, #held, 2 do
  local field = held[i]
  local n = tonumber(held[i + 1])
  local who = string.match(field, '^(.*)|fallback$') or field
  local seen = tonumber(redis.call('ZSCORE', KEYS[3], who) or '0')
  if now - seen > offline then
    redis.call('HDEL', KEYS[2], field)
    gone[who] = true
    any_gone = true
  elseif n <= 0 then
    redis.call('HDEL', KEYS[2], field)
  else
    total = total + n
  end
end
if any_gone then
  for _, token in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local who = string.match(token, '^(.*)|[^|]*|[^|]*$')
    if who and gone[who] then redis.call('ZREM', KEYS[1], token) end
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - offline - 1)
local taken = 0
if total + permits <= threshold then
  redis.call('ZADD', KEYS[1], now + hold, ARGV[2])
  redis.call('HINCRBY', KEYS[2], me, permits)
  total = total + permits
  taken = 1
end
local life = hold + offline + ttl
for i = 1, 3 do
  if redis.call('PTTL', KEYS[i]) < life then redis.call('PEXPIRE', KEYS[i], life) end
end
return {taken, total, threshold, now, instances}
";

/// Gives back a cluster concurrency token.
///
/// KEYS: the tokens sorted set, the held hash, the signs-of-life sorted
/// set. ARGV: token member, instance id, permits, how long the
/// signs-of-life set lives (ms). Returns 1 when the token was held, 0
/// when it was not (taken back already, or given back before).
const CONCURRENT_RELEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[3], now, ARGV[2])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[3], ARGV[4]) end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local left = redis.call('HINCRBY', KEYS[2], ARGV[2], -tonumber(ARGV[3]))
  if left <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
  return 1
end
return 0
";

/// The scripts, hashed once.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) refund: Script,
    pub(crate) register: Script,
    pub(crate) concurrent_acquire: Script,
    pub(crate) concurrent_release: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(ACQUIRE),
            refund: Script::new(REFUND),
            register: Script::new(REGISTER),
            concurrent_acquire: Script::new(CONCURRENT_ACQUIRE),
            concurrent_release: Script::new(CONCURRENT_RELEASE),
        }
    }

    /// Every script, to load ahead on a new connection.
    pub(crate) fn all(&self) -> [&Script; 5] {
        [
            &self.acquire,
            &self.refund,
            &self.register,
            &self.concurrent_acquire,
            &self.concurrent_release,
        ]
    }
}

/// The keys of one flow id.
#[derive(Debug, Clone)]
pub(crate) struct FlowKeys {
    pub(crate) window: String,
    pub(crate) instances: String,
    pub(crate) counts: String,
    /// Cluster concurrency: the tokens in use, by deadline.
    pub(crate) tokens: String,
    /// Cluster concurrency: the permits each instance holds.
    pub(crate) held: String,
    /// Cluster concurrency: when each instance was last heard from.
    pub(crate) seen: String,
}

impl FlowKeys {
    pub(crate) fn new(prefix: &str, flow_id: u64) -> Self {
        let tag = format!("{{{prefix}:flow:{flow_id}}}");
        FlowKeys {
            window: format!("{tag}:window"),
            instances: format!("{tag}:instances"),
            counts: format!("{tag}:counts"),
            tokens: format!("{tag}:tokens"),
            held: format!("{tag}:held"),
            seen: format!("{tag}:seen"),
        }
    }
}

/// What the acquire script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) granted: u64,
    pub(crate) total: u64,
    pub(crate) threshold: u64,
    pub(crate) server_now_ms: u64,
    pub(crate) bucket_end_ms: u64,
    pub(crate) instances: u64,
}

impl Grant {
    pub(crate) fn from_reply(reply: &[i64]) -> Option<Self> {
        let get = |i: usize| reply.get(i).map(|v| (*v).max(0) as u64);
        Some(Grant {
            granted: get(0)?,
            total: get(1)?,
            threshold: get(2)?,
            server_now_ms: get(3)?,
            bucket_end_ms: get(4)?,
            instances: get(5)?,
        })
    }

    /// What the concurrent acquire script answered (`granted`: the permits
    /// taken, `total`: the permits in use after, `bucket_end_ms`: the
    /// server's now), and whether the token was taken.
    pub(crate) fn from_concurrent_reply(reply: &[i64], permits: u32) -> Option<(Self, bool)> {
        let get = |i: usize| reply.get(i).map(|v| (*v).max(0) as u64);
        let taken = get(0)? == 1;
        let now = get(3)?;
        Some((
            Grant {
                granted: if taken { u64::from(permits) } else { 0 },
                total: get(1)?,
                threshold: get(2)?,
                server_now_ms: now,
                bucket_end_ms: now,
                instances: get(4)?,
            },
            taken,
        ))
    }

    /// The bucket the permits were counted in.
    pub(crate) fn bucket_start_ms(&self, window_ms: u64, samples: u32) -> u64 {
        self.bucket_end_ms
            .saturating_sub(window_ms / u64::from(samples.max(1)))
    }
}

#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod support;

#[cfg(test)]
#[path = "script_tests.rs"]
mod tests;
