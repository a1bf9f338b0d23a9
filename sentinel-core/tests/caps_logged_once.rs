//! Issue 21: each cap is logged once, however often it refuses.
//!
//! Alone in its own test binary: `tracing` caches each call site's
//! interest process-wide, and the caps tests of `caps.rs` hit the same
//! warning call site on other threads with no subscriber, which can race
//! the scoped subscriber below out of its events.

use sentinel_core::{ManualClock, Sentinel};

const T0: u64 = 1_700_000_000_000;

/// Counts warnings, for "logged once per cap".
struct Warnings(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn each_cap_is_logged_once_however_often_it_refuses() {
    let warnings = std::sync::Arc::default();
    let subscriber = Warnings(std::sync::Arc::clone(&warnings));
    let sentinel = Sentinel::builder()
        .clock(ManualClock::new(T0))
        .max_resources(2)
        .max_contexts(1)
        .max_origins(1)
        .build();
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..100 {
            drop(sentinel.entry(&format!("r{i}")));
            drop(
                sentinel
                    .entry_builder("r0")
                    .context(&format!("c{i}"))
                    .enter(),
            );
            // Origins past the cap of two resources: one cap, one warning.
            drop(
                sentinel
                    .entry_builder("r0")
                    .origin(&format!("o{i}"))
                    .enter(),
            );
            drop(
                sentinel
                    .entry_builder("r1")
                    .origin(&format!("o{i}"))
                    .enter(),
            );
        }
        drop(sentinel.entry(&"x".repeat(2_000)));
    });
    let caps = sentinel.caps();
    assert_eq!(
        (
            caps.resources.refused,
            caps.contexts.refused,
            caps.origins.refused
        ),
        (99, 99, 198)
    );
    assert_eq!(warnings.load(std::sync::atomic::Ordering::Relaxed), 3);
}
