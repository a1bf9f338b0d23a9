//! Counting the warnings `tracing` hears while a test runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// How many warnings were logged on this thread while `f` ran.
pub(crate) fn count_warnings(f: impl FnOnce()) -> usize {
    let warnings = Arc::default();
    tracing::subscriber::with_default(Warnings(Arc::clone(&warnings)), f);
    warnings.load(Ordering::Relaxed)
}

/// Counts warnings.
struct Warnings(Arc<AtomicUsize>);

impl Subscriber for Warnings {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() == Level::WARN {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
