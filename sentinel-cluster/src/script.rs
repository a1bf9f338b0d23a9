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
/// KEYS: the instances sorted set. ARGV: instance id, ttl ms. Returns the
/// live instances.
const REGISTER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local ttl = tonumber(ARGV[2])
-- The set lives as long as its longest-lived member.
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return redis.call('ZCARD', KEYS[1])
";

/// The three scripts, hashed once.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) refund: Script,
    pub(crate) register: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(ACQUIRE),
            refund: Script::new(REFUND),
            register: Script::new(REGISTER),
        }
    }
}

/// The keys of one flow id.
#[derive(Debug, Clone)]
pub(crate) struct FlowKeys {
    pub(crate) window: String,
    pub(crate) instances: String,
    pub(crate) counts: String,
}

impl FlowKeys {
    pub(crate) fn new(prefix: &str, flow_id: u64) -> Self {
        let tag = format!("{{{prefix}:flow:{flow_id}}}");
        FlowKeys {
            window: format!("{tag}:window"),
            instances: format!("{tag}:instances"),
            counts: format!("{tag}:counts"),
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
