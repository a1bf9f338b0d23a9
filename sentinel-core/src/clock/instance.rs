//! The instance's time: the system clock read directly, or a user's clock
//! (a `ManualClock` in tests) on a timeline that never goes backwards and
//! goes on at once when the clock does (see [`Clock`]).

use std::sync::Arc;
use std::time::Duration;

use crate::{Clock, MonotonicClock, SystemClock};

/// The instance's time. The system clock is monotonic already and read
/// without indirection; any other clock is read through [`MonotonicClock`].
pub(crate) enum InstanceClock {
    System(SystemClock),
    Custom(MonotonicClock<Arc<dyn Clock>>),
}

impl InstanceClock {
    /// The system clock, or `clock` made monotonic.
    pub(crate) fn new(clock: Option<Arc<dyn Clock>>) -> Self {
        match clock {
            None => InstanceClock::System(SystemClock),
            Some(clock) => InstanceClock::Custom(MonotonicClock::new(clock)),
        }
    }

    #[inline]
    pub(crate) fn now_ms(&self) -> u64 {
        match self {
            InstanceClock::System(clock) => clock.now_ms(),
            InstanceClock::Custom(clock) => custom_now_ms(clock),
        }
    }

    pub(crate) fn now_nanos(&self) -> u64 {
        match self {
            InstanceClock::System(clock) => clock.now_nanos(),
            InstanceClock::Custom(clock) => clock.now_nanos(),
        }
    }

    /// Waits `duration` of the instance's time (see [`Clock::sleep`]).
    pub(crate) fn sleep(&self, duration: Duration) {
        match self {
            InstanceClock::System(clock) => clock.sleep(duration),
            InstanceClock::Custom(clock) => clock.sleep(duration),
        }
    }
}

/// A user clock's reading, out of line: the system clock's arm stays one
/// load where the engine reads the time.
#[inline(never)]
fn custom_now_ms(clock: &MonotonicClock<Arc<dyn Clock>>) -> u64 {
    clock.now_ms()
}
