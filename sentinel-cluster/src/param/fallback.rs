//! The fallback's count per value on this instance: what it admitted and
//! what the cluster granted the instance for each value in the current
//! window (the client's clock, windows aligned on the rule's window), so
//! that its admissions stay within the instance's share with the grants.
//!
//! Bounded: at most [`MAX_FALLBACK_VALUES`] values; past it the values of
//! earlier windows are dropped, and if the current window alone holds
//! that many, an entry with a new value is left to the rule's local check
//! alone (bounded by the rule's own value table).

use std::collections::HashMap;

use super::Asked;

/// The most values the fallback counts at once per flow id (about 100
/// bytes each with their encodings).
pub(crate) const MAX_FALLBACK_VALUES: usize = 4_096;

#[derive(Debug, Default)]
pub(crate) struct FallbackCounts {
    /// The current window's index (`now_ms / window_ms`).
    window: u64,
    /// Each value's permits in the window, and the window they were in.
    counts: HashMap<String, (u64, u64), foldhash::fast::RandomState>,
}

impl FallbackCounts {
    /// Moves to the window of `now_ms`.
    fn advance(&mut self, window_ms: u64, now_ms: u64) {
        self.window = now_ms / window_ms.max(1);
    }

    /// The permits of `field` in the current window.
    fn of(&self, field: &str) -> u64 {
        match self.counts.get(field) {
            Some((window, n)) if *window == self.window => *n,
            _ => 0,
        }
    }

    /// Room for `fresh` more values, dropping earlier windows' if needed.
    fn room_for(&mut self, fresh: usize) -> bool {
        if self.counts.len() + fresh <= MAX_FALLBACK_VALUES {
            return true;
        }
        let window = self.window;
        self.counts.retain(|_, (w, _)| *w == window);
        self.counts.len() + fresh <= MAX_FALLBACK_VALUES
    }

    fn count(&mut self, asked: &[Asked]) {
        let window = self.window;
        for a in asked {
            let entry = self.counts.entry(a.field.clone()).or_insert((window, 0));
            if entry.0 != window {
                *entry = (window, 0);
            }
            entry.1 += a.permits;
        }
    }

    /// Counts `asked` at `now_ms` if each value stays within `share` of
    /// its threshold with them: `Some(true)` if it did, `Some(false)` if a
    /// value is past its share; `None` when a new value finds no room.
    pub(crate) fn admit(
        &mut self,
        asked: &[Asked],
        window_ms: u64,
        now_ms: u64,
        share: impl Fn(u64) -> u64,
    ) -> Option<bool> {
        self.advance(window_ms, now_ms);
        if asked
            .iter()
            .any(|a| self.of(&a.field) + a.permits > share(a.threshold))
        {
            return Some(false);
        }
        let fresh = asked
            .iter()
            .filter(|a| !self.counts.contains_key(&a.field))
            .count();
        if !self.room_for(fresh) {
            return None;
        }
        self.count(asked);
        Some(true)
    }

    /// Counts what the cluster granted, where there is room.
    pub(crate) fn add(&mut self, asked: &[Asked], window_ms: u64, now_ms: u64) {
        self.advance(window_ms, now_ms);
        let fresh = asked
            .iter()
            .filter(|a| !self.counts.contains_key(&a.field))
            .count();
        if self.room_for(fresh) {
            self.count(asked);
        }
    }

    /// Values counted now (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(field: &str, threshold: u64) -> Asked {
        Asked {
            field: field.into(),
            threshold,
            permits: 1,
        }
    }

    #[test]
    fn the_fallback_admits_each_value_within_its_share_less_what_was_granted() {
        let mut counts = FallbackCounts::default();
        let half = |t: u64| t.div_ceil(2);
        // Granted 3 of "a" in the window; the share of 10 is 5.
        counts.add(
            &[asked("s:a", 10), asked("s:a", 10), asked("s:a", 10)],
            1_000,
            5_100,
        );
        let a = [asked("s:a", 10)];
        let admitted = (0..10)
            .filter(|_| counts.admit(&a, 1_000, 5_200, half) == Some(true))
            .count();
        assert_eq!(admitted, 2);
        // Another value has its own share; all of an entry's or none.
        let both = [asked("s:b", 10), asked("s:a", 10)];
        assert_eq!(counts.admit(&both, 1_000, 5_300, half), Some(false));
        assert_eq!(counts.of("s:b"), 0, "nothing counted of a refused entry");
        // The next window starts afresh.
        assert_eq!(counts.admit(&a, 1_000, 6_000, half), Some(true));
    }

    #[test]
    fn the_fallback_counts_at_most_its_bound_of_values() {
        let mut counts = FallbackCounts::default();
        for i in 0..MAX_FALLBACK_VALUES {
            let value = [asked(&format!("i:{i}"), 5)];
            assert_eq!(counts.admit(&value, 1_000, 0, |t| t), Some(true));
        }
        let new = [asked("i:new", 5)];
        assert_eq!(counts.admit(&new, 1_000, 10, |t| t), None, "full");
        assert_eq!(counts.len(), MAX_FALLBACK_VALUES);
        // A window later, the earlier window's values make room.
        assert_eq!(counts.admit(&new, 1_000, 1_000, |t| t), Some(true));
        assert_eq!(counts.len(), 1);
    }
}
