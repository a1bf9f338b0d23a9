//! Time read through `MonotonicClock` never goes backwards for any thread.
//! (The statistics engine under threads is tested inside the crate, which
//! alone writes counts: `node/statistic_threads_tests.rs`,
//! `stat/threads_tests.rs`.)

use std::sync::Barrier;

use sentinel_flow_core::{Clock, ManualClock, MonotonicClock};

const THREADS: usize = 4;
const T0: u64 = 1_700_000_000_000;

#[test]
fn monotonic_clock_never_goes_back_for_any_thread() {
    let manual = ManualClock::new(T0);
    let clock = MonotonicClock::new(manual.clone());
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                let mut last = 0;
                for _ in 0..50_000 {
                    let now = clock.now_ms();
                    assert!(now >= last, "{now} after {last}");
                    last = now;
                }
            });
        }
        s.spawn(|| {
            barrier.wait();
            for i in 0..2_000u64 {
                if i % 3 == 0 {
                    manual.set(T0 + i / 2);
                } else {
                    manual.advance_ms(2);
                }
            }
        });
    });
    // A reading set far back afterwards is the last time seen.
    let seen = clock.now_ms();
    assert!(seen > T0);
    manual.set(T0 - 60_000);
    assert_eq!(clock.now_ms(), seen);
}
