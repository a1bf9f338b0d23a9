//! Reference counts of blocking rules, recycled per thread.
//!
//! A [`BlockError`](crate::BlockError) holds the rule that refused the
//! entry. Cloning the rule's `Arc` and dropping it again with the error are
//! two locked instructions, a third of the block path. A blocked caller
//! usually drops its error on the thread that made it, so the error's drop
//! parks its `Arc` here instead of releasing it, and the thread's next block
//! by the same rule takes it back: no atomic operation either way.
//!
//! A thread parks at most [`SPARES`] rules; a parked rule stays allocated
//! (not its compiled state) until it is taken, evicted by another, or the
//! thread exits. A parked rule no longer loaded (its `Arc` held by the
//! parking alone) is the first evicted: a thread that blocks by the rules
//! of each new load keeps no more than the rules in force, and at most
//! [`SPARES`] replaced ones until its next block.

use std::cell::RefCell;
use std::sync::Arc;

use crate::Rule;

/// Rules parked per thread.
const SPARES: usize = 4;

struct Parked {
    rules: [Option<Arc<dyn Rule>>; SPARES],
    /// The slot to evict when every slot is taken.
    next: usize,
}

crate::sync::thread_local! {
    static PARKED: RefCell<Parked> = const {
        RefCell::new(Parked { rules: [None, None, None, None], next: 0 })
    };
}

/// Whether `parked` is a reference to `rule`'s allocation.
#[inline]
fn same<R: Rule>(parked: &Arc<dyn Rule>, rule: &Arc<R>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(parked), Arc::as_ptr(rule))
}

/// A reference to `rule` for an error: a parked one if this thread has it,
/// else a new one.
#[inline]
pub(crate) fn share<R: Rule>(rule: &Arc<R>) -> Arc<dyn Rule> {
    let parked = PARKED.try_with(|parked| {
        let mut parked = parked.try_borrow_mut().ok()?;
        parked
            .rules
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|p| same(p, rule)))?
            .take()
    });
    match parked {
        Ok(Some(rule)) => rule,
        _ => Arc::clone(rule) as Arc<dyn Rule>,
    }
}

/// Parks `rule` for this thread's next block by it (or releases it, when
/// the thread is exiting).
#[inline]
pub(crate) fn park(rule: Arc<dyn Rule>) {
    let evicted = PARKED.try_with(|parked| {
        let Ok(mut parked) = parked.try_borrow_mut() else {
            return Some(rule);
        };
        let parked = &mut *parked;
        // A free slot, or one whose rule was replaced by a load.
        let stale = |slot: &Option<Arc<dyn Rule>>| {
            slot.as_ref()
                .is_none_or(|rule| Arc::strong_count(rule) == 1)
        };
        let slot = match parked.rules.iter().position(stale) {
            Some(free) => free,
            None => {
                let evict = parked.next;
                parked.next = (evict + 1) % SPARES;
                evict
            }
        };
        // Stored before anything is released, so `rule` is written from
        // registers (a spill and a wider reload would stall the store).
        parked.rules[slot].replace(rule)
    });
    // An evicted rule (or this one, on an exiting thread) is released here.
    drop(evicted);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowRule;

    #[test]
    fn a_parked_reference_is_taken_back_without_a_new_count() {
        let rule = Arc::new(FlowRule::new("r", 1.0));
        let shared = share(&rule);
        assert_eq!(Arc::strong_count(&rule), 2);
        park(shared);
        assert_eq!(Arc::strong_count(&rule), 2, "parked, not released");
        let again = share(&rule);
        assert_eq!(Arc::strong_count(&rule), 2, "taken back");
        let second = share(&rule);
        assert_eq!(Arc::strong_count(&rule), 3, "nothing parked: a new count");
        drop((again, second));
        assert_eq!(Arc::strong_count(&rule), 1);
    }

    #[test]
    fn a_rule_no_longer_loaded_is_released_at_the_next_park() {
        let old = Arc::new(FlowRule::new("r", 1.0));
        let kept = Arc::new(FlowRule::new("k", 1.0));
        park(share(&old));
        park(share(&kept));
        let weak = Arc::downgrade(&old);
        // The load that replaced it dropped the rule set's reference.
        drop(old);
        assert_eq!(weak.strong_count(), 1, "parked, until the next park");
        let new = Arc::new(FlowRule::new("r", 2.0));
        park(share(&new));
        assert_eq!(weak.strong_count(), 0, "released for the new rule");
        assert_eq!(Arc::strong_count(&kept), 2, "a rule in force stays parked");
        assert_eq!(Arc::strong_count(&new), 2);
    }

    #[test]
    fn a_full_thread_evicts_its_oldest_rule() {
        let rules: Vec<_> = (0..=SPARES)
            .map(|i| Arc::new(FlowRule::new(format!("r{i}"), 1.0)))
            .collect();
        for rule in &rules {
            park(share(rule));
        }
        assert_eq!(Arc::strong_count(&rules[0]), 1, "evicted and released");
        for rule in &rules[1..] {
            assert_eq!(Arc::strong_count(rule), 2, "parked");
        }
        // Another thread has nothing parked.
        let other = Arc::clone(&rules[1]);
        std::thread::spawn(move || {
            let shared = share(&other);
            assert_eq!(Arc::strong_count(&other), 4);
            drop(shared);
        })
        .join()
        .unwrap();
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
