//! The watcher thread's loop: wait for word of a change (or poll), read,
//! apply; on a failure reconnect after a wait that doubles up to a cap.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use sentinel_flow_core::Sentinel;

use super::shared::{Outcome, Shared};
use super::{RuleSource, SourceError};

/// How long one wait for word lasts: how soon a stop is seen.
const TICK: Duration = Duration::from_millis(100);

/// Connects (when `connect`), reads every key under the `known` lock and
/// takes the values; tells nothing (the caller does).
pub(super) fn read_and_take<R: RuleSource>(
    source: &mut R,
    shared: &Shared,
    sentinel: &Sentinel,
    keys: &[String],
    connect: bool,
) -> Result<Outcome, SourceError> {
    if connect {
        source.connect(keys)?;
    }
    let mut known = shared.known.lock();
    let values = source.read(keys, shared.options.get_max_size())?;
    shared.connected();
    Ok(shared.take(sentinel, &mut known, values, false))
}

/// The loop's memory: the source, whether it is connected, the next wait
/// before a reconnection.
pub(super) struct Runner<R> {
    source: R,
    keys: Vec<String>,
    connected: bool,
    backoff: Duration,
    min: Duration,
    max: Duration,
}

impl<R: RuleSource> Runner<R> {
    pub(super) fn new(
        source: R,
        keys: Vec<String>,
        connected: bool,
        (min, max): (Duration, Duration),
    ) -> Self {
        Runner {
            source,
            keys,
            connected,
            backoff: min,
            min,
            max,
        }
    }

    /// The pause before the first step: a poll interval, or the first
    /// backoff when the store was not reached at start.
    pub(super) fn first_pause(&self) -> Duration {
        if self.connected {
            self.source.poll_interval().unwrap_or(Duration::ZERO)
        } else {
            self.min
        }
    }

    /// One step: connected, wait for word (or poll) and take what
    /// changed; not, reconnect and read. Returns the pause before the
    /// next step.
    pub(super) fn step(&mut self, shared: &Shared, sentinel: &Sentinel) -> Duration {
        let poll = self.source.poll_interval();
        if self.connected {
            let timeout = if poll.is_some() { Duration::ZERO } else { TICK };
            let read = match self.source.wait(timeout) {
                Ok(false) => Ok(None),
                Ok(true) => read_and_take(&mut self.source, shared, sentinel, &self.keys, false),
                Err(error) => Err(error),
            };
            match read {
                Ok(outcome) => {
                    shared.tell(outcome);
                    poll.unwrap_or(Duration::ZERO)
                }
                Err(error) => {
                    shared.failed(&error);
                    self.connected = false;
                    self.backoff = self.min;
                    self.backoff
                }
            }
        } else {
            match read_and_take(&mut self.source, shared, sentinel, &self.keys, true) {
                Ok(outcome) => {
                    self.connected = true;
                    shared.tell(outcome);
                    poll.unwrap_or(Duration::ZERO)
                }
                Err(error) => {
                    shared.failed(&error);
                    self.backoff = (self.backoff * 2).min(self.max);
                    self.backoff
                }
            }
        }
    }
}

/// Steps until `stop` says so (a message or its sender dropped), pausing
/// as each step asks.
pub(super) fn run<R: RuleSource>(
    mut runner: Runner<R>,
    shared: &Shared,
    sentinel: &Sentinel,
    stop: &Receiver<()>,
) {
    let mut pause = runner.first_pause();
    loop {
        let go_on = if pause.is_zero() {
            matches!(stop.try_recv(), Err(TryRecvError::Empty))
        } else {
            matches!(stop.recv_timeout(pause), Err(RecvTimeoutError::Timeout))
        };
        if !go_on {
            return;
        }
        pause = runner.step(shared, sentinel);
    }
}
