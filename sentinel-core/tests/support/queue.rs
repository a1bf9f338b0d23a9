//! Driving entries that wait in a rate limiter's queue (`enter_async`) on
//! tokio's paused clock, one poll at a time, so a test sees when each one
//! is let through.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use sentinel_flow_core::{BlockError, Entry};

/// An entry on its way through `enter_async`.
pub(crate) type Entering<'s> = Pin<Box<dyn Future<Output = Result<Entry<'s>, BlockError>> + 's>>;

/// Polls each future once, in order, at one instant: each runs its checks
/// and takes its place in the queue. The results of those that finished at
/// once; `None` for those that wait.
pub(crate) async fn start<'s>(
    futures: &mut [Entering<'s>],
) -> Vec<Option<Result<Entry<'s>, BlockError>>> {
    std::future::poll_fn(|cx| {
        Poll::Ready(
            futures
                .iter_mut()
                .map(|f| match f.as_mut().poll(cx) {
                    Poll::Ready(result) => Some(result),
                    Poll::Pending => None,
                })
                .collect(),
        )
    })
    .await
}

/// Moves tokio's paused time by `step` at a time, `steps` times (time is
/// driven by hand, never read), and after each step polls the futures in
/// `waiting` that still wait. Returns, for each that was let through, its
/// index, the time driven when it was, and its entry; panics if one of
/// them was refused or never let through.
pub(crate) async fn drive<'s>(
    futures: &mut [Entering<'s>],
    waiting: &[usize],
    step: Duration,
    steps: u32,
) -> Vec<(usize, Duration, Entry<'s>)> {
    let mut driven = Duration::ZERO;
    let mut through = Vec::new();
    let mut pending: Vec<usize> = waiting.to_vec();
    for _ in 0..steps {
        tokio::time::advance(step).await;
        driven += step;
        let ready: Vec<(usize, Result<Entry<'s>, BlockError>)> = std::future::poll_fn(|cx| {
            let mut ready = Vec::new();
            pending.retain(|&k| match futures[k].as_mut().poll(cx) {
                Poll::Ready(result) => {
                    ready.push((k, result));
                    false
                }
                Poll::Pending => true,
            });
            Poll::Ready(ready)
        })
        .await;
        for (k, result) in ready {
            through.push((k, driven, result.expect("a queued entry passes")));
        }
    }
    assert!(pending.is_empty(), "entries {pending:?} never got through");
    through
}
