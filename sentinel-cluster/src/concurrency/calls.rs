//! The worker's calls for cluster concurrency: one acquire script call
//! per queued acquire, and the queued releases in order.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, Release};

use redis::aio::ConnectionManager;

use super::{MAX_PENDING_RELEASES, Pending, State, member, permits_of};
use crate::flow::Flow;
use crate::script::{Grant, Scripts};
use crate::shared::{Shared, with_timeout};

/// How long an instance goes unheard before its tokens are taken back:
/// the rule's `client_offline_time`, and never less than two heartbeat
/// intervals (a third of the instance TTL each), so that a live instance's
/// tokens stay.
fn offline_ms(shared: &Shared, rule_offline_ms: u64) -> u64 {
    let beat = (shared.config.ttl() / 3).as_millis() as u64;
    rule_offline_ms.max(2 * beat)
}

/// How long the keys of a concurrency flow live past their last use.
pub(crate) fn keys_life_ms(shared: &Shared, flow: &Flow) -> u64 {
    let params = *flow.params.lock();
    let ttl = shared.config.ttl().as_millis() as u64;
    params.hold_ms + offline_ms(shared, params.offline_ms) + ttl
}

/// Asks Redis for the token of `pending`, and answers its entry (or gives
/// the token back when the entry stopped waiting).
pub(crate) async fn acquire(
    shared: Arc<Shared>,
    scripts: Arc<Scripts>,
    flow: Arc<Flow>,
    pending: Arc<Pending>,
    mut conn: ConnectionManager,
) {
    if pending.is_abandoned() {
        return;
    }
    let params = *flow.params.lock();
    let fallback = flow.concurrent.held.lock().fallback;
    let permits = permits_of(pending.token);
    let mut invocation = scripts.concurrent_acquire.prepare_invoke();
    invocation
        .key(&flow.keys.tokens)
        .key(&flow.keys.held)
        .key(&flow.keys.seen)
        .key(&flow.keys.instances)
        .key(&flow.keys.counts)
        .arg(&shared.instance)
        .arg(member(&shared.instance, pending.token))
        .arg(permits)
        .arg(params.count)
        .arg(u8::from(params.avg_local))
        .arg(params.hold_ms)
        .arg(offline_ms(&shared, params.offline_ms))
        .arg(shared.config.ttl().as_millis() as u64)
        .arg(fallback);
    let call = invocation.invoke_async::<Vec<i64>>(&mut conn);
    let reply = with_timeout(&shared, call).await;
    let (grant, taken) = match reply.map(|r| Grant::from_concurrent_reply(&r, permits)) {
        Ok(Some(answer)) => answer,
        Ok(None) => {
            pending.answer(State::Failed);
            shared.fail("the concurrent acquire script answered an unexpected reply");
            return;
        }
        Err(why) => {
            pending.answer(State::Failed);
            shared.fail(&why);
            return;
        }
    };
    shared.answered.store(true, Release);
    {
        let mut last = flow.last.lock();
        last.round_trips += 1;
        last.granted += grant.granted;
        last.grant = Some(grant);
    }
    flow.note_instances(
        grant.instances,
        shared.peak_memory_ms(),
        shared.config.now_ms(),
    );
    let state = if taken { State::Taken } else { State::Refused };
    if pending.answer(state) {
        shared.queue_release(flow, pending.token);
    }
}

/// Sends the queued releases in order; on a failure, the rest go back to
/// the queue (within its bound) for the next connection.
pub(crate) async fn release(
    shared: Arc<Shared>,
    scripts: Arc<Scripts>,
    batch: Vec<(Arc<Flow>, u64)>,
    mut conn: ConnectionManager,
) {
    let mut batch = batch.into_iter();
    while let Some((flow, token)) = batch.next() {
        let mut invocation = scripts.concurrent_release.prepare_invoke();
        invocation
            .key(&flow.keys.tokens)
            .key(&flow.keys.held)
            .key(&flow.keys.seen)
            .arg(member(&shared.instance, token))
            .arg(&shared.instance)
            .arg(permits_of(token))
            .arg(keys_life_ms(&shared, &flow));
        let call = invocation.invoke_async::<u64>(&mut conn);
        match with_timeout(&shared, call).await {
            Ok(back) => {
                flow.last.lock().refunded += back;
            }
            Err(why) => {
                let mut queue = shared.releases.lock();
                for item in std::iter::once((flow, token)).chain(batch).rev() {
                    if queue.len() >= MAX_PENDING_RELEASES {
                        shared.counters.dropped_releases.fetch_add(1, Relaxed);
                    } else {
                        queue.push_front(item);
                    }
                }
                drop(queue);
                shared.fail(&why);
                return;
            }
        }
    }
}
