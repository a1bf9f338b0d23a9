//! Entering without waiting: an entry that a rate limiter queues comes
//! back as a [`Queued`], for the caller to wait on with its own timer and
//! then admit. Middleware that must name its future type (a tower
//! service) enters this way: nothing here is on the path of an entry that
//! does not wait.

use std::fmt;
use std::time::Duration;

use super::guard::Entry;
use super::request::Request;
use crate::ParamValue;
use crate::engine::Engine;
use crate::slot::chain::{self, Checked, Unadmitted};

/// What [`EntryBuilder::enter_or_queue`](crate::EntryBuilder::enter_or_queue)
/// gives when no rule refused the entry.
#[derive(Debug)]
#[must_use = "an entry or a queued entry exits (or gives back its place) when dropped"]
pub enum Entering<'s> {
    /// Admitted now.
    Entered(Entry<'s>),
    /// A rate limiter queued the entry: wait [`Queued::wait`], then
    /// [`Queued::admit`].
    Queued(Queued<'s>),
}

/// An entry a rate limiter has queued: its checks passed and its place in
/// the queue is taken, but its pass is not counted yet.
///
/// Wait [`wait`](Self::wait) (with any timer), then [`admit`](Self::admit).
/// Dropped without being admitted (a cancelled request), it counts nothing
/// and gives back the concurrency its checks took; its place in the
/// queue stays taken (later entries are paced behind it), as with
/// [`EntryBuilder::enter_async`](crate::EntryBuilder::enter_async).
///
/// It owns a copy of the entry's origin and arguments, so it does not
/// borrow the request it was made from.
pub struct Queued<'s>(Box<Waiting<'s>>);

/// Boxed: a queued entry waits milliseconds, so an allocation is nothing
/// to it, and the boxed handle keeps `Entering` as small as an `Entry`.
struct Waiting<'s> {
    unadmitted: Unadmitted<'static, 's>,
    wait: Duration,
    entry_type: crate::EntryType,
    origin: Box<str>,
    args: Box<[ParamValue]>,
}

impl<'s> Queued<'s> {
    fn new(engine: &'s Engine, request: &Request<'_, 's>, checked: Checked<'_, 's>) -> Self {
        let wait = Duration::from_nanos(checked.outcome.wait_ns());
        let origin: Box<str> = checked.origin_name.into();
        Queued(Box::new(Waiting {
            unadmitted: Unadmitted {
                engine,
                batch: request.batch,
                checked: Some(checked.detached()),
            },
            wait,
            entry_type: request.entry_type,
            origin,
            args: request.args.into(),
        }))
    }

    /// How long to wait, from when the entry was checked, before
    /// [`admit`](Self::admit).
    pub fn wait(&self) -> Duration {
        self.0.wait
    }

    /// Counts the pass (at the clock's time, or the time the queue gave
    /// it, whichever is later) and hands out the entry.
    pub fn admit(self) -> Entry<'s> {
        let mut waiting = self.0;
        let engine = waiting.unadmitted.engine;
        let mut checked: Checked<'_, 's> = waiting
            .unadmitted
            .checked
            .take()
            .expect("admitted once: admit consumes the queued entry");
        checked.origin_name = &waiting.origin;
        let mut request = Request::new(checked.resource.name());
        request.resource = Some(Some(checked.resource));
        request.entry_type = waiting.entry_type;
        request.batch = waiting.unadmitted.batch;
        request.origin = &waiting.origin;
        request.args = &waiting.args;
        let now = engine.parts.clock.now_ms().max(checked.pass_ms);
        chain::admit(engine, &request, checked, now)
    }
}

impl fmt::Debug for Queued<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queued")
            .field("wait", &self.0.wait)
            .field("origin", &self.0.origin)
            .finish_non_exhaustive()
    }
}

/// Enters through `engine`'s chain without waiting: an entry a rate
/// limiter queues comes back queued.
// Inlined into the caller (one, the tower layer): what its request fixes
// (no arguments, a batch of one) is then folded away.
#[inline]
pub(crate) fn enter_or_queue<'s>(
    engine: &'s Engine,
    request: Request<'_, 's>,
) -> Result<Entering<'s>, crate::BlockError> {
    let Some(checked) = chain::check(engine, &request)? else {
        return Ok(Entering::Entered(Entry::pass_through()));
    };
    if checked.outcome.wait_ns() == 0 {
        let now = checked.pass_ms;
        return Ok(Entering::Entered(chain::admit(
            engine, &request, checked, now,
        )));
    }
    Ok(Entering::Queued(Queued::new(engine, &request, checked)))
}

#[cfg(test)]
mod tests {
    use crate::flow::{ControlBehavior, FlowRule};
    use crate::{ManualClock, Sentinel};

    use super::*;

    fn paced(clock: &ManualClock) -> Sentinel {
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        let mut rule = FlowRule::new("r", 10.0);
        rule.control_behavior = ControlBehavior::RateLimiter;
        rule.max_queueing_time_ms = 1_000;
        sentinel.flow_rules().load(vec![rule]).unwrap();
        sentinel
    }

    #[test]
    fn a_paced_entry_is_queued_then_admitted_by_the_caller() {
        let clock = ManualClock::new(10_000);
        let sentinel = paced(&clock);
        let first = match sentinel
            .entry_builder("r")
            .origin("o")
            .enter_or_queue()
            .unwrap()
        {
            Entering::Entered(entry) => entry,
            Entering::Queued(_) => panic!("the first entry of a rate limiter passes at once"),
        };
        let Entering::Queued(queued) = sentinel
            .entry_builder("r")
            .origin("o")
            .enter_or_queue()
            .unwrap()
        else {
            panic!("the second entry within 100 ms waits its turn");
        };
        assert_eq!(queued.wait(), Duration::from_millis(100));
        let node = sentinel.resource_node("r").unwrap();
        assert_eq!(
            node.stats().total_pass(sentinel.now_ms()),
            1,
            "not counted before admit"
        );
        clock.advance_ms(100);
        let second = queued.admit();
        assert_eq!(node.stats().total_pass(sentinel.now_ms()), 2);
        assert_eq!(
            node.find_origin("o")
                .unwrap()
                .stats()
                .total_pass(sentinel.now_ms()),
            2
        );
        assert_eq!(node.stats().cur_concurrency(), 2);
        drop((first, second));
        assert_eq!(node.stats().cur_concurrency(), 0);
    }

    #[test]
    fn a_queued_entry_dropped_counts_nothing_and_gives_back_its_concurrency() {
        let clock = ManualClock::new(10_000);
        let sentinel = paced(&clock);
        let first = sentinel.entry_builder("r").enter_or_queue().unwrap();
        let queued = sentinel.entry_builder("r").enter_or_queue().unwrap();
        assert!(matches!(queued, Entering::Queued(_)));
        drop(queued);
        let node = sentinel.resource_node("r").unwrap();
        assert_eq!(node.stats().total_pass(sentinel.now_ms()), 1);
        drop(first);
        assert_eq!(node.stats().cur_concurrency(), 0);
    }
}
