//! The worker's call for a cluster hot-parameter entry: one script call
//! per entry, and a second one charging the entry when the fallback
//! admitted it while the first was on its way and Redis did not count it.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, Release};

use redis::aio::ConnectionManager;

use super::{ParamFlow, ParamPending, State};
use crate::script::Scripts;
use crate::shared::{Shared, with_timeout};

/// What the script answered: `{verdict, instances, tracked, now}`.
fn verdict_of(reply: &[i64]) -> Option<(State, u64, u64)> {
    let state = match *reply.first()? {
        1 => State::Granted,
        0 => State::Refused,
        2 => State::Overflow,
        _ => return None,
    };
    let get = |i: usize| reply.get(i).map(|v| (*v).max(0) as u64);
    Some((state, get(1)?, get(2)?))
}

/// Asks Redis to count the values of `pending`, and answers its entry;
/// an entry the fallback admitted meanwhile is charged.
pub(crate) async fn acquire(
    shared: Arc<Shared>,
    scripts: Arc<Scripts>,
    flow: Arc<ParamFlow>,
    pending: Arc<ParamPending>,
    mut conn: ConnectionManager,
) {
    let force = match pending.abandoned() {
        Some(false) => return,
        Some(true) => true,
        None => false,
    };
    let state = match call(&shared, &scripts, &flow, &pending, force, &mut conn).await {
        Ok(state) => state,
        Err(why) => {
            pending.answer(State::Failed);
            shared.fail(&why);
            return;
        }
    };
    if force {
        flow.counters.charged.fetch_add(1, Relaxed);
        return;
    }
    match state {
        State::Granted => {
            flow.counters.granted.fetch_add(1, Relaxed);
            flow.note_granted(&pending.asked, shared.config.now_ms());
        }
        State::Refused => {
            flow.counters.refused.fetch_add(1, Relaxed);
        }
        State::Overflow | State::Failed => {}
    }
    let late = pending.answer(state);
    if late == Some(true) && state != State::Granted {
        // Admitted by the fallback, not counted by Redis: charged now.
        if call(&shared, &scripts, &flow, &pending, true, &mut conn)
            .await
            .is_ok()
        {
            flow.counters.charged.fetch_add(1, Relaxed);
        }
    }
}

/// One call of the script; the verdict.
async fn call(
    shared: &Shared,
    scripts: &Scripts,
    flow: &ParamFlow,
    pending: &ParamPending,
    force: bool,
    conn: &mut ConnectionManager,
) -> Result<State, String> {
    let settings = *flow.settings.lock();
    let mut invocation = scripts.param_acquire.prepare_invoke();
    invocation
        .key(&flow.keys.counts)
        .key(&flow.keys.recent)
        .key(&flow.keys.instances)
        .arg(&shared.instance)
        .arg(shared.config.ttl().as_millis() as u64)
        .arg(settings.window_ms)
        .arg(settings.samples)
        .arg(u8::from(settings.avg_local))
        .arg(shared.config.param_cap())
        .arg(u8::from(force));
    for asked in &pending.asked {
        invocation
            .arg(&asked.field)
            .arg(asked.threshold)
            .arg(asked.permits);
    }
    let call = invocation.invoke_async::<Vec<i64>>(conn);
    let reply = with_timeout(shared, call).await?;
    let (state, instances, tracked) = verdict_of(&reply)
        .ok_or_else(|| "the param acquire script answered an unexpected reply".to_owned())?;
    shared.answered.store(true, Release);
    flow.counters.round_trips.fetch_add(1, Relaxed);
    flow.counters.tracked.store(tracked, Relaxed);
    flow.note_instances(instances, shared.peak_memory_ms(), shared.config.now_ms());
    Ok(state)
}
