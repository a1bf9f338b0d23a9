//! Differential stress test of the pending call against a reference
//! ledger: entries on several threads wait for acquires with short
//! deadlines while two responders answer them in time or late, at random
//! (seeded), for about a second. Every token a responder hands out must be
//! taken by its entry (and released at the entry's exit) or given back by
//! the late answer, exactly once, and nothing stays held.
//!
//! Real threads and real deadlines: this is the race the loom models
//! (`loom_tests.rs`) check exhaustively on one call, run on many.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::concurrency::{Pending, State};

/// How long the entries keep calling.
const RUN: Duration = Duration::from_millis(1_000);
const ENTRIES: u64 = 4;

/// The reference: what was handed out, and where each token went.
#[derive(Debug, Default)]
struct Ledger {
    handed_out: u64,
    /// Taken by an entry and released at its exit.
    taken_and_released: u64,
    released_late: u64,
    /// Taken by an entry that has not exited yet.
    held: u64,
    gave_up: u64,
    refused: u64,
}

/// A seeded generator (splitmix64): the same seed, the same choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Queue {
    /// Each call with the channel its entry waits on for the responder to
    /// be done with it, so that each entry has one call out at a time.
    calls: Mutex<VecDeque<(Arc<Pending>, mpsc::Sender<()>)>>,
    queued: Condvar,
    done: AtomicBool,
}

fn respond(queue: &Queue, ledger: &Mutex<Ledger>, seed: u64) {
    let mut rng = Rng(seed);
    loop {
        let (pending, done) = {
            let mut calls = queue.calls.lock();
            loop {
                if let Some(call) = calls.pop_front() {
                    break call;
                }
                if queue.done.load(Relaxed) {
                    return;
                }
                queue.queued.wait_for(&mut calls, Duration::from_millis(10));
            }
        };
        // In time (at once) or late (past most entries' deadlines).
        if rng.below(2) == 0 {
            let until = Instant::now() + Duration::from_micros(rng.below(3_000));
            while Instant::now() < until {
                thread::yield_now();
            }
        }
        let verdict = if rng.below(4) == 0 {
            State::Refused
        } else {
            State::Taken
        };
        if verdict == State::Taken {
            ledger.lock().handed_out += 1;
        }
        if pending.answer(verdict) {
            ledger.lock().released_late += 1;
        }
        let _ = done.send(());
    }
}

fn enter(queue: &Queue, ledger: &Mutex<Ledger>, seed: u64, end: Instant) {
    let mut rng = Rng(seed);
    let (done, answered) = mpsc::channel();
    while Instant::now() < end {
        let pending = Arc::new(Pending::new(rng.next()));
        queue
            .calls
            .lock()
            .push_back((pending.clone(), done.clone()));
        queue.queued.notify_one();
        let deadline = Instant::now() + Duration::from_micros(200 + rng.below(1_800));
        match pending.wait(deadline) {
            Some(State::Taken) => {
                ledger.lock().held += 1;
                // The entry's work, then its exit releases the token.
                thread::yield_now();
                let mut ledger = ledger.lock();
                ledger.held -= 1;
                ledger.taken_and_released += 1;
            }
            Some(State::Refused | State::Failed) => ledger.lock().refused += 1,
            None => ledger.lock().gave_up += 1,
        }
        answered.recv().unwrap();
    }
}

#[test]
fn stress_every_grant_is_taken_or_given_back_exactly_once() {
    let queue = Arc::new(Queue::default());
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let end = Instant::now() + RUN;
    let responders: Vec<_> = (0..2)
        .map(|i| {
            let (queue, ledger) = (queue.clone(), ledger.clone());
            thread::spawn(move || respond(&queue, &ledger, 0xC0FFEE + i))
        })
        .collect();
    let entries: Vec<_> = (0..ENTRIES)
        .map(|i| {
            let (queue, ledger) = (queue.clone(), ledger.clone());
            thread::spawn(move || enter(&queue, &ledger, 0x5EED + i, end))
        })
        .collect();
    for entry in entries {
        entry.join().unwrap();
    }
    queue.done.store(true, Relaxed);
    queue.queued.notify_all();
    for responder in responders {
        responder.join().unwrap();
    }
    let ledger = ledger.lock();
    assert_eq!(
        ledger.handed_out,
        ledger.taken_and_released + ledger.released_late,
        "{ledger:?}"
    );
    assert_eq!(ledger.held, 0, "{ledger:?}");
    // Both sides of the race ran, or the test proves nothing.
    assert!(ledger.taken_and_released > 0, "{ledger:?}");
    assert!(ledger.released_late > 0 && ledger.gave_up > 0, "{ledger:?}");
}
