//! The watcher thread's loop: wait for word of a change, read, apply;
//! on a failure reconnect after a wait that doubles up to a cap.

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

pub(super) fn run<R: RuleSource>(
    mut source: R,
    shared: &Shared,
    sentinel: &Sentinel,
    keys: &[String],
    (min, max): (Duration, Duration),
    stop: &Receiver<()>,
    mut connected: bool,
) {
    let mut backoff = min;
    loop {
        if connected {
            let read = match source.wait(TICK) {
                Ok(false) => Ok(None),
                Ok(true) => read_and_take(&mut source, shared, sentinel, keys, false),
                Err(error) => Err(error),
            };
            match read {
                Ok(outcome) => shared.tell(outcome),
                Err(error) => {
                    shared.failed(&error);
                    connected = false;
                    backoff = min;
                }
            }
            if !matches!(stop.try_recv(), Err(TryRecvError::Empty)) {
                return;
            }
        } else {
            if !matches!(stop.recv_timeout(backoff), Err(RecvTimeoutError::Timeout)) {
                return;
            }
            match read_and_take(&mut source, shared, sentinel, keys, true) {
                Ok(outcome) => {
                    connected = true;
                    shared.tell(outcome);
                }
                Err(error) => {
                    shared.failed(&error);
                    backoff = (backoff * 2).min(max);
                }
            }
        }
    }
}
