//! Loom model of the engine's timeline over a clock set back while
//! threads read it (`RUSTFLAGS="--cfg loom" cargo test -p sentinel-flow-core
//! --lib --release loom_timeline`).
//!
//! The clock is one atomic, as `ManualClock` is. A setter sets it back and
//! moves it forward while two readers read twice each; every time read is
//! checked against the properties in `timeline.rs`.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};

use super::Timeline;

const START: u64 = 1_000;
const BACK_TO: u64 = 400;
const FORWARD: u64 = 5;

/// Every interleaving with at most three preemptions
/// (`LOOM_MAX_PREEMPTIONS` sets another bound).
fn model(f: impl Fn() + Sync + Send + 'static) {
    crate::sync::check(3, f);
}

/// The clock read through the timeline.
fn read(timeline: &Timeline, clock: &AtomicU64) -> u64 {
    timeline.now_ms(|| clock.load(Ordering::SeqCst))
}

#[test]
fn loom_timeline_never_decreases_never_outruns_the_clock_and_follows_it_after_a_set_back() {
    model(|| {
        let clock = Arc::new(AtomicU64::new(START));
        let timeline = Arc::new(Timeline::new());
        assert_eq!(read(&timeline, &clock), START);

        let setter = {
            let clock = Arc::clone(&clock);
            loom::thread::spawn(move || {
                clock.store(BACK_TO, Ordering::SeqCst);
                clock.fetch_add(FORWARD, Ordering::SeqCst);
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (clock, timeline) = (Arc::clone(&clock), Arc::clone(&timeline));
                loom::thread::spawn(move || {
                    let first = read(&timeline, &clock);
                    let second = read(&timeline, &clock);
                    assert!(second >= first, "{second} read after {first}");
                    second
                })
            })
            .collect();
        setter.join().unwrap();
        let latest_read = readers
            .into_iter()
            .map(|reader| reader.join().unwrap())
            .max()
            .unwrap();

        // After every thread: never earlier than any time read, and never
        // ahead of the start plus the clock's only forward step.
        let now = read(&timeline, &clock);
        assert!(now >= latest_read, "{now} after {latest_read}");
        assert!(
            (START..=START + FORWARD).contains(&now),
            "{now}: the set-back added time"
        );
        // Once the set-back is seen, the time follows the clock exactly.
        clock.fetch_add(7, Ordering::SeqCst);
        assert_eq!(read(&timeline, &clock), now + 7);
    });
}

#[test]
fn loom_timeline_two_readers_of_a_clock_moving_forward_see_no_set_back() {
    model(|| {
        let clock = Arc::new(AtomicU64::new(START));
        let timeline = Arc::new(Timeline::new());
        let ticker = {
            let clock = Arc::clone(&clock);
            loom::thread::spawn(move || {
                clock.fetch_add(1, Ordering::SeqCst);
                clock.fetch_add(1, Ordering::SeqCst);
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (clock, timeline) = (Arc::clone(&clock), Arc::clone(&timeline));
                loom::thread::spawn(move || {
                    let first = read(&timeline, &clock);
                    let second = read(&timeline, &clock);
                    assert!(second >= first);
                })
            })
            .collect();
        ticker.join().unwrap();
        for reader in readers {
            reader.join().unwrap();
        }
        // A clock that only moves forward is never taken for one set back:
        // racing readers never grow the offset.
        assert_eq!(timeline.offset_ms(), 0);
        assert_eq!(read(&timeline, &clock), START + 2);
    });
}
