//! Counting the warnings `tracing` hears while a test runs, or reading
//! their messages.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// How many warnings were logged on this thread while `f` ran.
pub(crate) fn count_warnings(f: impl FnOnce()) -> usize {
    warnings(f).len()
}

/// The messages of the warnings logged on this thread while `f` ran, in
/// order.
pub(crate) fn warnings(f: impl FnOnce()) -> Vec<String> {
    let heard = Arc::default();
    tracing::subscriber::with_default(Warnings(Arc::clone(&heard)), f);
    heard.lock().clone()
}

/// Keeps warnings' messages.
struct Warnings(Arc<Mutex<Vec<String>>>);

/// Reads an event's `message` field.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

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
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().push(message.0);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
