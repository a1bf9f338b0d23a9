//! What an entry holds from its checks until it exits, besides the exact
//! concurrency of its nodes (a hot-parameter rule's count for a value, a
//! half-open breaker's probe): each kind says what it holds (its
//! [`Holding::Held`], a [`Held`]), and
//! the list of kinds makes the one enum an entry's holds are kept in.

use std::cell::Cell;
use std::mem::ManuallyDrop;

use crate::engine::parts::Parts;

/// How an entry that holds something exited.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exited {
    /// When (instance clock, ms).
    pub(crate) now: u64,
    /// Its response time, ms.
    pub(crate) rt: u64,
    /// An error was recorded, or it exits as its thread unwinds.
    pub(crate) error: bool,
}

/// What an entry holds of one kind's rule, until it ends.
pub(crate) trait Held: Sized {
    /// Ends the hold of an entry that exited (a probe was reported with the
    /// entry's completion already): gives its counts back.
    fn finish(self);

    /// Ends the hold of an entry that exited as `exit` says: by default as
    /// [`finish`](Self::finish). A kind whose hold is all it hears of the
    /// exit (an adaptive rule's place, which takes the call's sample) reads
    /// `exit` here, with no exit hook of its own.
    #[inline(always)]
    fn finish_exited(self, exit: Exited) {
        let _ = exit;
        self.finish();
    }

    /// Gives back the hold of an entry that will not run (a later check
    /// refused it, or it was dropped before it was admitted).
    fn give_back(self, now: u64, parts: &Parts);
}

/// What a kind that holds nothing holds: no value.
#[derive(Debug)]
pub(crate) enum NoHold {}

impl Held for NoHold {
    fn finish(self) {
        match self {}
    }

    fn give_back(self, _: u64, _: &Parts) {
        match self {}
    }
}

/// What a kind's entries hold of its rules until they exit.
pub(crate) trait Holding {
    /// The hold ([`NoHold`] for a kind that holds nothing).
    type Held: Held;
}

/// A kind whose holds an entry can keep (every kind of the list).
pub(crate) trait HoldOf: Holding {
    /// `held` among an entry's holds.
    fn wrap(held: Self::Held) -> Hold;

    /// The kind's hold in `hold`, if it is one.
    fn unwrap(hold: &Hold) -> Option<&Self::Held>;
}

/// Makes [`Hold`] from the list of kinds.
macro_rules! holds {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// One thing held, of one kind.
        pub(crate) enum Hold {
            $($variant(<crate::$($kind)* as Holding>::Held),)*
        }

        impl Hold {
            #[cfg(test)]
            fn finish(self) {
                match self {
                    $(Hold::$variant(held) => held.finish(),)*
                }
            }

            fn finish_exited(self, exit: Exited) {
                match self {
                    $(Hold::$variant(held) => held.finish_exited(exit),)*
                }
            }

            fn give_back(self, now: u64, parts: &Parts) {
                match self {
                    $(Hold::$variant(held) => held.give_back(now, parts),)*
                }
            }
        }

        $(
            impl HoldOf for crate::$($kind)* {
                #[inline]
                fn wrap(held: Self::Held) -> Hold {
                    Hold::$variant(held)
                }

                #[inline]
                #[allow(unreachable_patterns)]
                fn unwrap(hold: &Hold) -> Option<&Self::Held> {
                    match hold {
                        Hold::$variant(held) => Some(held),
                        _ => None,
                    }
                }
            }
        )*
    };
}
rule_kinds!(holds);

/// What an entry holds: one word, empty for almost every entry, so that
/// entries move no more than that through the hot path. The list behind it
/// is recycled per thread, so holding allocates nothing once a thread has
/// held something before.
///
/// It has no drop glue (none on the hot path): every holder ends it, with
/// [`finish`](Self::finish) at the exit or [`give_back`](Self::give_back)
/// when the entry will not run, panics included (the statistic slot's
/// guard gives back the holds of checks that unwind). One dropped unended
/// would keep its counts.
#[derive(Default)]
#[allow(clippy::box_collection)] // one word: a `Vec` is three
pub(crate) struct Holds(ManuallyDrop<Option<Box<Vec<Hold>>>>);

thread_local! {
    /// An empty list, kept for this thread's next entry that holds.
    #[allow(clippy::box_collection)]
    static SPARE: Cell<Option<Box<Vec<Hold>>>> = const { Cell::new(None) };
}

impl Holds {
    fn list(&mut self) -> &mut Vec<Hold> {
        self.0.get_or_insert_with(|| {
            SPARE
                .try_with(Cell::take)
                .ok()
                .flatten()
                .unwrap_or_default()
        })
    }

    /// Holds `held`, of kind `K`, until the entry ends.
    pub(crate) fn hold<K: HoldOf>(&mut self, held: K::Held) {
        self.list().push(K::wrap(held));
    }

    /// The first hold of kind `K` that `pick` picks, if any.
    #[inline]
    pub(crate) fn find<K: HoldOf, T>(&self, pick: impl Fn(&K::Held) -> Option<T>) -> Option<T> {
        self.0
            .as_ref()?
            .iter()
            .find_map(|hold| pick(K::unwrap(hold)?))
    }

    /// Ends the holds of an entry that ended with no time told: gives the
    /// counts back.
    #[cfg(test)]
    pub(crate) fn finish(&mut self) {
        if self.0.is_some() {
            self.end(Hold::finish);
        }
    }

    /// Ends the holds of an entry that exited as `exit` says (made only
    /// when the entry holds something; its probes were reported to their
    /// breakers with its completion): gives the counts back.
    #[inline]
    pub(crate) fn finish_exited(&mut self, exit: impl FnOnce() -> Exited) {
        if self.0.is_some() {
            let exit = exit();
            self.end(|hold| hold.finish_exited(exit));
        }
    }

    /// Gives back everything of an entry that will not run (a later check
    /// refused it, or it was dropped before it was admitted): the counts,
    /// and the probes, whose breakers open again.
    pub(crate) fn give_back(&mut self, now: u64, parts: &Parts) {
        if self.0.is_some() {
            self.end(|hold| hold.give_back(now, parts));
        }
    }

    /// Ends every hold, the latest first (as the chain undoes its checks).
    #[cold]
    fn end(&mut self, mut end: impl FnMut(Hold)) {
        let Some(mut list) = Option::take(&mut self.0) else {
            return;
        };
        // Popped rather than drained: a drain's guard costs as much again
        // as ending one hold.
        while let Some(hold) = list.pop() {
            end(hold);
        }
        // Kept for the thread's next holder (one is enough; any other goes).
        let _ = SPARE.try_with(|spare| spare.set(Some(list)));
    }

    /// Where the list behind the holds is, if any (tests: its reuse).
    #[cfg(test)]
    pub(crate) fn list_address(&self) -> Option<*const Vec<Hold>> {
        self.0.as_deref().map(|list| list as *const Vec<Hold>)
    }
}
