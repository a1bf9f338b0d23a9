//! The background worker: one thread with a single-threaded tokio runtime
//! that connects (with backoff), refills the leases entries ask for,
//! refunds what expired leases held, and keeps the instance registered.
//! At most one call per flow id is in flight (its `wanted` flag), plus one
//! heartbeat round, so nothing piles up while Redis is slow.
//!
//! Redis counts as up only after a write went through on a fresh
//! connection (a probe key with the instance's TTL), and a failed call is
//! followed by the backoff before the next connection: a Redis that takes
//! connections but answers writes with errors (out of memory, read-only
//! replica) keeps the client in fallback, switched once, not flapping.
//! The backoff goes back to its minimum only after a refill or a
//! registration went through.

use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::concurrency;
use crate::flow::Flow;
use crate::param::{self, ParamFlow};
use crate::script::{Grant, Scripts};
use crate::shared::{Shared, with_timeout};

/// Runs until `shared.stopping`.
pub(crate) fn run(shared: Arc<Shared>, client: redis::Client) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            shared.set_up(false, &format!("no runtime for the worker: {error}"));
            return;
        }
    };
    runtime.block_on(Worker::new(shared, client).run());
}

struct Worker {
    shared: Arc<Shared>,
    client: redis::Client,
    scripts: Arc<Scripts>,
    backoff: Duration,
    next_beat: Instant,
}

impl Worker {
    fn new(shared: Arc<Shared>, client: redis::Client) -> Self {
        let backoff = shared.config.backoff_range().0;
        Worker {
            shared,
            client,
            scripts: Arc::new(Scripts::new()),
            backoff,
            next_beat: Instant::now(),
        }
    }

    async fn run(mut self) {
        let mut connection: Option<ConnectionManager> = None;
        while !self.shared.stopping.load(Acquire) {
            if self.shared.answered.swap(false, AcqRel) {
                self.backoff = self.shared.config.backoff_range().0;
            }
            if self.shared.broken.swap(false, AcqRel) {
                // A call failed: the next connection only after the backoff.
                connection = None;
                self.back_off().await;
                continue;
            }
            let Some(conn) = &connection else {
                self.shared.counters.attempts.fetch_add(1, Relaxed);
                match self.connect().await {
                    Ok(conn) => {
                        self.shared.counters.connects.fetch_add(1, Relaxed);
                        self.shared.broken.store(false, Relaxed);
                        self.shared.set_up(true, "");
                        connection = Some(conn);
                    }
                    Err(why) => {
                        self.shared.set_up(false, &why);
                        self.back_off().await;
                    }
                }
                continue;
            };
            self.serve(conn);
            if Instant::now() >= self.next_beat {
                self.next_beat = Instant::now() + self.shared.config.ttl() / 3;
                self.heartbeat(conn);
            }
            let until_beat = self.next_beat.saturating_duration_since(Instant::now());
            self.pause(until_beat).await;
        }
    }

    /// Sleeps `duration`, or less when woken.
    async fn pause(&self, duration: Duration) {
        let _ = tokio::time::timeout(duration, self.shared.wake.notified()).await;
    }

    /// Sleeps the whole backoff (waking only to stop), then doubles it up
    /// to its maximum.
    async fn back_off(&mut self) {
        let until = Instant::now() + self.backoff;
        while !self.shared.stopping.load(Acquire) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.pause(left).await;
        }
        let max = self.shared.config.backoff_range().1;
        self.backoff = (self.backoff * 2).min(max);
    }

    async fn connect(&self) -> Result<ConnectionManager, String> {
        let (response, connect) = self.shared.config.timeouts();
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(response)
            .set_connection_timeout(connect)
            .set_number_of_retries(0);
        let made = tokio::time::timeout(
            connect * 2,
            ConnectionManager::new_with_config(self.client.clone(), config),
        )
        .await;
        let mut conn = match made {
            Ok(Ok(conn)) => conn,
            Ok(Err(error)) => return Err(format!("cannot connect: {error}")),
            Err(_) => return Err(format!("cannot connect within {:?}", connect * 2)),
        };
        // The scripts are loaded ahead, so the first entries do not pay for it.
        for script in self.scripts.all() {
            match tokio::time::timeout(response, script.prepare_invoke().load_async(&mut conn))
                .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Err(format!("cannot load a script: {error}")),
                Err(_) => return Err(format!("no answer within {response:?}")),
            }
        }
        // A write, as the scripts make: a Redis that takes connections but
        // refuses writes is not up.
        let probe = format!(
            "{}probe:{}",
            self.shared.config.prefix(),
            self.shared.instance
        );
        let ttl = self.shared.config.ttl().as_millis() as u64;
        let mut set = redis::cmd("SET");
        set.arg(&probe).arg(1).arg("PX").arg(ttl.max(1));
        let write = set.query_async::<()>(&mut conn);
        match tokio::time::timeout(response, write).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(format!("cannot write: {error}")),
            Err(_) => return Err(format!("no answer within {response:?}")),
        }
        Ok(conn)
    }

    /// Starts a call for each flow an entry asked for, each acquire of a
    /// concurrency token queued, and the queued releases.
    fn serve(&self, conn: &ConnectionManager) {
        let releases: Vec<_> = self.shared.releases.lock().drain(..).collect();
        if !releases.is_empty() {
            tokio::spawn(concurrency::calls::release(
                self.shared.clone(),
                self.scripts.clone(),
                releases,
                conn.clone(),
            ));
        }
        for flow in self.shared.param_flows.load().values() {
            let pending: Vec<_> = flow.pending.lock().drain(..).collect();
            for pending in pending {
                tokio::spawn(param::calls::acquire(
                    self.shared.clone(),
                    self.scripts.clone(),
                    flow.clone(),
                    pending,
                    conn.clone(),
                ));
            }
        }
        for flow in self.shared.flows.load().values() {
            let pending: Vec<_> = flow.concurrent.pending.lock().drain(..).collect();
            for pending in pending {
                tokio::spawn(concurrency::calls::acquire(
                    self.shared.clone(),
                    self.scripts.clone(),
                    flow.clone(),
                    pending,
                    conn.clone(),
                ));
            }
            if flow.lease.handshake.start() {
                let task = Refill {
                    shared: self.shared.clone(),
                    scripts: self.scripts.clone(),
                    flow: flow.clone(),
                    conn: conn.clone(),
                };
                tokio::spawn(task.run());
            }
        }
    }

    /// Registers this instance under every flow id it has seen.
    fn heartbeat(&self, conn: &ConnectionManager) {
        let flows: Vec<Arc<Flow>> = self.shared.flows.load().values().cloned().collect();
        let params: Vec<Arc<ParamFlow>> =
            self.shared.param_flows.load().values().cloned().collect();
        if flows.is_empty() && params.is_empty() {
            return;
        }
        let (shared, scripts, mut conn) = (self.shared.clone(), self.scripts.clone(), conn.clone());
        tokio::spawn(async move {
            let ttl = shared.config.ttl().as_millis() as u64;
            for flow in flows {
                let mut invocation = scripts.register.prepare_invoke();
                invocation
                    .key(&flow.keys.instances)
                    .arg(&shared.instance)
                    .arg(ttl);
                if flow.params.lock().concurrency {
                    // A sign of life, which keeps the instance's tokens.
                    invocation
                        .key(&flow.keys.seen)
                        .arg(concurrency::calls::keys_life_ms(&shared, &flow));
                }
                let call = invocation.invoke_async::<u64>(&mut conn);
                match with_timeout(&shared, call).await {
                    Ok(live) => {
                        flow.note_instances(live, shared.peak_memory_ms(), shared.config.now_ms());
                        shared.answered.store(true, Release);
                    }
                    Err(why) => {
                        shared.fail(&why);
                        return;
                    }
                }
            }
            for flow in params {
                let mut invocation = scripts.register.prepare_invoke();
                invocation
                    .key(&flow.keys.instances)
                    .arg(&shared.instance)
                    .arg(ttl);
                let call = invocation.invoke_async::<u64>(&mut conn);
                match with_timeout(&shared, call).await {
                    Ok(live) => {
                        flow.note_instances(live, shared.peak_memory_ms(), shared.config.now_ms());
                        shared.answered.store(true, Release);
                    }
                    Err(why) => {
                        shared.fail(&why);
                        return;
                    }
                }
            }
        });
    }
}

/// One refill of one flow's lease.
struct Refill {
    shared: Arc<Shared>,
    scripts: Arc<Scripts>,
    flow: Arc<Flow>,
    conn: ConnectionManager,
}

impl Refill {
    async fn run(mut self) {
        let (shared, flow) = (&*self.shared, &*self.flow);
        let asked_at = flow.lease.asked_at_ms.load(Relaxed);
        let need = flow.lease.need.swap(1, AcqRel);
        let mut refunds = Vec::new();
        // The retake first, then the settings: a reload stores its settings
        // before it asks for the retake, so a retake taken here comes with
        // the settings that asked for it.
        if flow.lease.handshake.take_retake() {
            flow.lease.take_all(&mut refunds);
        } else {
            flow.lease.drain_expired(asked_at, &mut refunds);
        }
        let params = *flow.params.lock();
        // The fallback's admissions of the window, charged before the grant.
        let (charged_at, charges) = {
            let mut ledger = flow.ledger.lock();
            ledger.reshape(params.window_ms, params.samples);
            let at = asked_at.max(ledger.latest_ms());
            (at, ledger.take_unreported(at))
        };
        let mut invocation = self.scripts.acquire.prepare_invoke();
        invocation
            .key(&flow.keys.window)
            .key(&flow.keys.instances)
            .key(&flow.keys.counts)
            .arg(need)
            .arg(params.count)
            .arg(u8::from(params.avg_local))
            .arg(params.window_ms)
            .arg(params.samples)
            .arg(shared.config.divisor())
            .arg(shared.config.lease_cap())
            .arg(&shared.instance)
            .arg(shared.config.ttl().as_millis() as u64);
        for (age, admitted) in &charges {
            invocation.arg(*age).arg(*admitted);
        }
        let call = invocation.invoke_async::<Vec<i64>>(&mut self.conn);
        let reply = with_timeout(shared, call).await;
        let grant = match reply.map(|r| Grant::from_reply(&r)) {
            Ok(Some(grant)) => grant,
            Ok(None) => {
                flow.ledger.lock().untake(&charges, charged_at);
                self.finish();
                self.shared
                    .fail("the acquire script answered an unexpected reply");
                return;
            }
            Err(why) => {
                flow.ledger.lock().untake(&charges, charged_at);
                self.finish();
                self.shared.fail(&why);
                return;
            }
        };
        shared.answered.store(true, Release);
        // The permits are the instance's until their bucket ends on the
        // server, measured from when the entry asked: never later.
        let expiry = asked_at + grant.bucket_end_ms.saturating_sub(grant.server_now_ms);
        {
            let mut last = flow.last.lock();
            last.round_trips += 1;
            last.granted += grant.granted;
            last.charged += charges.iter().map(|(_, n)| n).sum::<u64>();
            last.grant = Some(grant);
            last.remember(
                expiry,
                grant.bucket_start_ms(params.window_ms, params.samples),
            );
            flow.note_instances(
                grant.instances,
                shared.peak_memory_ms(),
                shared.config.now_ms(),
            );
            if grant.granted > 0 {
                flow.lease.fill(grant.granted, expiry, &mut refunds);
            } else {
                flow.lease.mark_full(expiry);
            }
            refunds.retain(|(left, _)| *left > 0);
        }
        if grant.granted > 0 {
            // Counted in the instance's bucket the permits expire with.
            flow.ledger
                .lock()
                .grant(grant.granted, expiry.saturating_sub(1));
        }
        self.finish();
        for (left, old_expiry) in refunds {
            let Some(bucket) = flow.last.lock().bucket_of(old_expiry) else {
                continue;
            };
            let mut invocation = self.scripts.refund.prepare_invoke();
            invocation.key(&flow.keys.window).arg(bucket).arg(left);
            let call = invocation.invoke_async::<u64>(&mut self.conn);
            match with_timeout(shared, call).await {
                Ok(back) => {
                    flow.last.lock().refunded += back;
                    flow.ledger
                        .lock()
                        .refund(back, old_expiry.saturating_sub(1));
                }
                Err(why) => {
                    shared.fail(&why);
                    return;
                }
            }
        }
    }

    /// Lets entries ask again and wakes those waiting.
    fn finish(&self) {
        if self.flow.lease.handshake.finish() {
            self.shared.wake.notify_one();
        }
        self.flow.answer();
    }
}
