//! The Lua scripts, one per operation, and the keys they touch. Every key
//! of one flow id carries the hash tag `{<prefix>:flow:<id>}`, so a flow's
//! keys sit in one slot and the scripts run on a Redis Cluster. Time is
//! the server's (`TIME`), never an instance's clock.

use redis::Script;

/// Lua: `now`, the server's time in ms (scripts never read an instance's
/// clock).
macro_rules! server_now {
    () => {
        "local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"
    };
}

/// Lua: registers the instance `$me` in the instances sorted set `$set`
/// for `ttl` ms (a local the script sets first), drops the instances past
/// their expiry, keeps the set alive as long as its longest-lived member,
/// and sets `instances`, the live instances (at least 1).
macro_rules! live_instances {
    ($set:literal, $me:literal) => {
        concat!(
            "redis.call('ZADD', ",
            $set,
            ", now + ttl, ",
            $me,
            ")
redis.call('ZREMRANGEBYSCORE', ",
            $set,
            ", '-inf', now)
if redis.call('PTTL', ",
            $set,
            ") < ttl then redis.call('PEXPIRE', ",
            $set,
            ", ttl) end
local instances = math.max(1, redis.call('ZCARD', ",
            $set,
            "))
"
        )
    };
}

/// Lua: records `$count` as the count of `$me`'s rule in the counts hash
/// `$counts`, forgets the counts of instances no longer live in `$set`,
/// and sets `threshold`: the lowest count among the live instances (the
/// local `count` is this instance's), times the live instances when
/// `$avg_local` is `'1'`, rounded down. Every instance computes the same
/// threshold, so a rolling change of the count starves no instance.
macro_rules! lowest_live_threshold {
    ($counts:literal, $set:literal, $me:literal, $count:literal, $avg_local:literal) => {
        concat!(
            "redis.call('HSET', ",
            $counts,
            ", ",
            $me,
            ", ",
            $count,
            ")
local lowest = count
local counts = redis.call('HGETALL', ",
            $counts,
            ")
for i = 1, #counts, 2 do
  if redis.call('ZSCORE', ",
            $set,
            ", counts[i]) then
    local other = tonumber(counts[i + 1])
    if other < lowest then lowest = other end
  else
    redis.call('HDEL', ",
            $counts,
            ", counts[i])
  end
end
if redis.call('PTTL', ",
            $counts,
            ") < ttl then redis.call('PEXPIRE', ",
            $counts,
            ", ttl) end
local threshold = lowest
if ",
            $avg_local,
            " == '1' then threshold = lowest * instances end
threshold = math.floor(threshold)
"
        )
    };
}

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
const ACQUIRE: &str = concat!(
    server_now!(),
    "local need = math.max(1, tonumber(ARGV[1]))
local count = tonumber(ARGV[2])
local window = tonumber(ARGV[4])
local samples = tonumber(ARGV[5])
local divisor = tonumber(ARGV[6])
local max_lease = tonumber(ARGV[7])
local ttl = tonumber(ARGV[9])
",
    live_instances!("KEYS[2]", "ARGV[8]"),
    lowest_live_threshold!("KEYS[3]", "KEYS[2]", "ARGV[8]", "ARGV[2]", "ARGV[3]"),
    "local bucket = math.floor(window / samples)
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
"
);

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
const REGISTER: &str = concat!(
    server_now!(),
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
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
"
);

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
const CONCURRENT_ACQUIRE: &str = concat!(
    server_now!(),
    "local me = ARGV[1]
local permits = tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local hold = tonumber(ARGV[6])
local offline = tonumber(ARGV[7])
local ttl = tonumber(ARGV[8])
local fallback = tonumber(ARGV[9])
",
    live_instances!("KEYS[4]", "me"),
    lowest_live_threshold!("KEYS[5]", "KEYS[4]", "me", "ARGV[4]", "ARGV[5]"),
    "redis.call('ZADD', KEYS[3], now, me)
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
"
);

/// Gives back a cluster concurrency token.
///
/// KEYS: the tokens sorted set, the held hash, the signs-of-life sorted
/// set. ARGV: token member, instance id, permits, how long the
/// signs-of-life set lives (ms). Returns 1 when the token was held, 0
/// when it was not (taken back already, or given back before).
const CONCURRENT_RELEASE: &str = concat!(
    server_now!(),
    "redis.call('ZADD', KEYS[3], now, ARGV[2])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[3], ARGV[4]) end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local left = redis.call('HINCRBY', KEYS[2], ARGV[2], -tonumber(ARGV[3]))
  if left <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
  return 1
end
return 0
"
);

/// Counts an entry's parameter values of a cluster hot-parameter rule in
/// the flow id's sliding window, all or none.
///
/// KEYS: the counts hash (field: a value's encoding, value: its counts in
/// the window, `<bucket start ms>:<count>` joined by `,`), the recent
/// sorted set (member: a value's encoding, score: the start of the latest
/// bucket it was counted in), the instances sorted set. ARGV: instance
/// id, instance ttl ms, window ms, sample count, avg_local (0/1), the cap
/// on values tracked, force (0/1), then triples of (value, threshold,
/// permits).
///
/// Values with no count left in the window are forgotten first (at most
/// 1 000 a call; the rest at the next calls, and all of them when the
/// keys expire, a window after their last write). The threshold of each
/// value is its own (times the live instances for avg_local). Each value
/// is counted only if every one is within its threshold (`total +
/// permits <= threshold`); a value not tracked yet is taken only while
/// fewer than the cap are tracked. With force, the permits are counted
/// without a check (the instance admitted the entry on its own), for the
/// values tracked or with room. Returns `{verdict (1: counted, 0: refused,
/// 2: a new value past the cap), live instances, values tracked after,
/// server now ms}`.
const PARAM_ACQUIRE: &str = concat!(
    server_now!(),
    "local ttl = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local samples = tonumber(ARGV[4])
local cap = tonumber(ARGV[6])
local force = ARGV[7] == '1'
",
    live_instances!("KEYS[3]", "ARGV[1]"),
    "local bucket = math.floor(window / samples)
local start = now - (now % bucket)
local oldest = start - (samples - 1) * bucket
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', oldest - 1, 'LIMIT', 0, 1000)
if #stale > 0 then
  redis.call('HDEL', KEYS[1], unpack(stale))
  redis.call('ZREM', KEYS[2], unpack(stale))
end
local tracked = redis.call('ZCARD', KEYS[2])
local values = {}
local verdict = 1
local fresh = 0
for i = 8, #ARGV - 2, 3 do
  local value = ARGV[i]
  local threshold = tonumber(ARGV[i + 1])
  if ARGV[5] == '1' then threshold = threshold * instances end
  local need = tonumber(ARGV[i + 2])
  local raw = redis.call('HGET', KEYS[1], value)
  local kept = {}
  local total = 0
  if raw then
    for at, n in string.gmatch(raw, '(%d+):(%d+)') do
      at = tonumber(at)
      if at >= oldest then
        n = tonumber(n)
        total = total + n
        kept[#kept + 1] = {at, n}
      end
    end
  else
    fresh = fresh + 1
  end
  if total + need > threshold then verdict = 0 end
  values[#values + 1] = {value, kept, need, raw == false}
end
if verdict == 1 and fresh > 0 and tracked + fresh > cap then verdict = 2 end
if verdict == 1 or force then
  local room = cap - tracked
  for _, v in ipairs(values) do
    local is_new = v[4]
    if not is_new or room > 0 then
      if is_new then room = room - 1 end
      local kept = v[2]
      local last = kept[#kept]
      if last and last[1] == start then
        last[2] = last[2] + v[3]
      else
        kept[#kept + 1] = {start, v[3]}
      end
      local parts = {}
      for j, pair in ipairs(kept) do parts[j] = pair[1] .. ':' .. pair[2] end
      redis.call('HSET', KEYS[1], v[1], table.concat(parts, ','))
      redis.call('ZADD', KEYS[2], start, v[1])
    end
  end
  redis.call('PEXPIRE', KEYS[1], window + bucket)
  redis.call('PEXPIRE', KEYS[2], window + bucket)
end
return {verdict, instances, redis.call('ZCARD', KEYS[2]), now}
"
);

/// The scripts, hashed once.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) refund: Script,
    pub(crate) register: Script,
    pub(crate) concurrent_acquire: Script,
    pub(crate) concurrent_release: Script,
    pub(crate) param_acquire: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(ACQUIRE),
            refund: Script::new(REFUND),
            register: Script::new(REGISTER),
            concurrent_acquire: Script::new(CONCURRENT_ACQUIRE),
            concurrent_release: Script::new(CONCURRENT_RELEASE),
            param_acquire: Script::new(PARAM_ACQUIRE),
        }
    }

    /// Every script, to load ahead on a new connection.
    pub(crate) fn all(&self) -> [&Script; 6] {
        [
            &self.acquire,
            &self.refund,
            &self.register,
            &self.concurrent_acquire,
            &self.concurrent_release,
            &self.param_acquire,
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

/// The keys of one hot-parameter flow id: in the flow id's slot, apart
/// from a flow rule's of the same id (Sentinel keeps the two kinds' flow
/// ids apart).
#[derive(Debug, Clone)]
pub(crate) struct ParamKeys {
    /// Each value's counts in the window.
    pub(crate) counts: String,
    /// Each value by the latest bucket it was counted in.
    pub(crate) recent: String,
    /// The live instances of the flow id.
    pub(crate) instances: String,
}

impl ParamKeys {
    pub(crate) fn new(prefix: &str, flow_id: u64) -> Self {
        let tag = format!("{{{prefix}:flow:{flow_id}}}");
        ParamKeys {
            counts: format!("{tag}:param:counts"),
            recent: format!("{tag}:param:recent"),
            instances: format!("{tag}:param:instances"),
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

#[cfg(test)]
#[path = "script_param_tests.rs"]
mod param_tests;
