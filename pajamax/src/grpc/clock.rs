//! The time of one step of a connection: a read and the calls it runs, a
//! pull of the producers, a timeout.
//!
//! Most steps of a busy connection need no time at all: a request without
//! a deadline is read, run and answered without one. So the worker gives no
//! time, and it is read from the system clock the first time something in
//! the step asks for it; every later question in the step gets the same
//! answer (`docs/decisions.md`, "A read's time, taken when first needed").
//! A caller that has a time of its own (a test, a fuzz target) gives it.

use std::cell::Cell;
use std::time::Instant;

/// The time of one step: given, or read once when first asked for.
#[derive(Debug, Default)]
pub struct Clock {
    at: Cell<Option<Instant>>,
}

impl Clock {
    /// A step at `now`.
    #[inline(always)]
    pub fn at(now: Instant) -> Clock {
        Clock::new(Some(now))
    }

    /// A step at `at`, where the caller has a time; else one whose time is
    /// read when first needed.
    #[inline(always)]
    pub fn new(at: Option<Instant>) -> Clock {
        Clock { at: Cell::new(at) }
    }

    /// The step's time if it was given or read, without reading it.
    #[inline(always)]
    pub fn peek(&self) -> Option<Instant> {
        self.at.get()
    }

    /// The step's time: the same answer every time it is asked. Out of
    /// line: asked for only off the common path.
    #[inline(never)]
    pub fn now(&self) -> Instant {
        match self.at.get() {
            Some(now) => now,
            None => {
                let now = Instant::now();
                self.at.set(Some(now));
                now
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_given_time_is_the_answer() {
        let then = Instant::now() - Duration::from_secs(5);
        let clock = Clock::at(then);
        assert_eq!(clock.now(), then);
        assert_eq!(clock.now(), then);
    }

    #[test]
    fn an_unread_clock_is_read_once() {
        let before = Instant::now();
        let clock = Clock::new(None);
        let first = clock.now();
        assert!(first >= before);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.now(), first);
        assert!(Instant::now() > first);
    }
}
