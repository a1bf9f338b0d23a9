//! Helpers shared by the benchmarks.
//!
//! [`Pool`] runs a measured loop on persistent worker threads. A node is
//! owned by the first thread that writes it (see `sentinel-flow-core`'s `stat`
//! module), as it is in a service whose worker threads live for the whole
//! process; spawning fresh threads for every sample would instead measure
//! ownership changing hands, and a thread's exit is only visible once its
//! thread-locals are gone, which a scoped spawn does not wait for.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() -> Duration + Send>;

/// Persistent worker threads for multi-threaded measurements.
#[derive(Debug)]
pub struct Pool {
    workers: Mutex<Vec<(Sender<Job>, Receiver<Duration>)>>,
}

impl Pool {
    /// Starts `threads` workers that live until the pool is dropped.
    pub fn new(threads: usize) -> Self {
        let workers = (0..threads)
            .map(|i| {
                let (jobs, inbox) = channel::<Job>();
                let (results, outbox) = channel();
                std::thread::Builder::new()
                    .name(format!("bench-worker-{i}"))
                    .spawn(move || {
                        for job in inbox {
                            if results.send(job()).is_err() {
                                break;
                            }
                        }
                    })
                    .expect("spawn bench worker");
                (jobs, outbox)
            })
            .collect();
        Pool {
            workers: Mutex::new(workers),
        }
    }

    /// Runs `op(worker)` `iters` times on each of the first `threads`
    /// workers, all starting together; returns the slowest worker's time.
    pub fn run<F>(&self, threads: usize, iters: u64, op: Arc<F>) -> Duration
    where
        F: Fn(usize) + Send + Sync + 'static,
    {
        let workers = self.workers.lock().expect("pool lock");
        assert!(threads <= workers.len(), "pool too small");
        let barrier = Arc::new(Barrier::new(threads));
        for (worker, (jobs, _)) in workers.iter().take(threads).enumerate() {
            let (barrier, op) = (Arc::clone(&barrier), Arc::clone(&op));
            jobs.send(Box::new(move || {
                barrier.wait();
                let start = Instant::now();
                for _ in 0..iters {
                    op(worker);
                }
                start.elapsed()
            }))
            .expect("bench worker alive");
        }
        workers
            .iter()
            .take(threads)
            .map(|(_, results)| results.recv().expect("bench worker alive"))
            .max()
            .unwrap_or_default()
    }
}
