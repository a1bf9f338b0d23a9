//! What happens to names past a cap: counted, and logged once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The most of a refused name a log line shows: names past the length
/// limit may be megabytes long.
const LOGGED_NAME_BYTES: usize = 128;

/// The refusals of one registry. Registries of one kind may share the
/// warning and a total (the origin registries of an instance's resources),
/// so that one cap is logged once and counted once however many resources
/// reach it.
#[derive(Debug)]
pub(crate) struct Overflow {
    what: &'static str,
    refused: AtomicU64,
    warned: Arc<AtomicBool>,
    total: Option<Arc<AtomicU64>>,
}

impl Overflow {
    /// Refusals of `what` (`resources`, `contexts`...), warned of once.
    pub(crate) fn new(what: &'static str) -> Self {
        Overflow {
            what,
            refused: AtomicU64::new(0),
            warned: Arc::default(),
            total: None,
        }
    }

    /// As [`new`](Self::new), warning once through `warned` and adding
    /// every refusal to `total` as well.
    pub(crate) fn shared(
        what: &'static str,
        warned: &Arc<AtomicBool>,
        total: &Arc<AtomicU64>,
    ) -> Self {
        Overflow {
            what,
            refused: AtomicU64::new(0),
            warned: Arc::clone(warned),
            total: Some(Arc::clone(total)),
        }
    }

    #[cold]
    pub(crate) fn record(&self, cap: usize, max_name_len: usize, name: &str) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(total) = &self.total {
            total.fetch_add(1, Ordering::Relaxed);
        }
        if !self.warned.swap(true, Ordering::Relaxed) {
            let what = self.what;
            tracing::warn!(
                cap,
                max_name_len,
                name = shortened(name),
                name_len = name.len(),
                "sentinel: more than {cap} {what} (or a name over {max_name_len} bytes); \
                 entries for new {what} that no rule names are not counted per {what} \
                 (see the refused counts); names that rules mention always are"
            );
        }
    }

    /// Refusals recorded here.
    pub(crate) fn count(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// The origin cap of an instance, shared by its resources: each resource
/// holds at most `max` origins made by entries, and every refusal adds to
/// one total, warned of once.
#[derive(Debug)]
pub(crate) struct OriginCap {
    pub(crate) max: usize,
    pub(crate) max_name_len: usize,
    warned: Arc<AtomicBool>,
    total: Arc<AtomicU64>,
}

impl OriginCap {
    pub(crate) fn new(max: usize, max_name_len: usize) -> Self {
        OriginCap {
            max,
            max_name_len,
            warned: Arc::default(),
            total: Arc::default(),
        }
    }

    /// The overflow of one resource's origins.
    pub(crate) fn overflow(&self) -> Overflow {
        Overflow::shared("origins of a resource", &self.warned, &self.total)
    }

    /// Origins refused over every resource.
    pub(crate) fn refused(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// At most the first [`LOGGED_NAME_BYTES`] of `name`, cut on a character
/// boundary.
fn shortened(name: &str) -> &str {
    if name.len() <= LOGGED_NAME_BYTES {
        return name;
    }
    let mut end = LOGGED_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        assert_eq!(shortened("abc"), "abc");
        let long = "é".repeat(100);
        let cut = shortened(&long);
        assert!(cut.len() <= LOGGED_NAME_BYTES && cut.len() >= LOGGED_NAME_BYTES - 1);
        assert!(long.starts_with(cut));
    }

    #[test]
    fn shared_refusals_add_to_the_total() {
        let warned = Arc::default();
        let total = Arc::default();
        let a = Overflow::shared("origins", &warned, &total);
        let b = Overflow::shared("origins", &warned, &total);
        a.record(1, 8, "x");
        b.record(1, 8, "y");
        b.record(1, 8, "z");
        assert_eq!((a.count(), b.count()), (1, 2));
        assert_eq!(total.load(Ordering::Relaxed), 3);
        assert!(warned.load(Ordering::Relaxed));
    }
}
