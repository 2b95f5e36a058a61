//! What brings a worker to its sweep, once per tick.
//!
//! On Linux a periodic timerfd in the worker's epoll instance: its expiry
//! is one more readiness event, so a turn does not work out how long it may
//! sleep before the sweep (a clock subtraction and a conversion, 58
//! instructions per turn: `docs/decisions.md`, "The sweep's tick from a
//! timerfd"). Elsewhere the time of the next sweep, from which each wait's
//! timeout is worked out.

use mio::{Poll, Token};
use std::io;
use std::time::Duration;
#[cfg(not(target_os = "linux"))]
use std::time::Instant;

/// The tick of a worker's sweep.
pub(crate) struct Ticker {
    #[cfg(target_os = "linux")]
    timer: rustix::fd::OwnedFd,
    /// The timer expired since the last sweep.
    #[cfg(target_os = "linux")]
    fired: bool,
    #[cfg(not(target_os = "linux"))]
    tick: Duration,
    /// When the next sweep is due.
    #[cfg(not(target_os = "linux"))]
    next: Instant,
}

impl Ticker {
    /// A ticker for a sweep every `tick`, whose expiries `poll` reports
    /// with `token`.
    #[cfg(target_os = "linux")]
    pub fn new(poll: &Poll, token: Token, tick: Duration) -> io::Result<Ticker> {
        use rustix::event::epoll;
        use rustix::time::{
            timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags,
            TimerfdTimerFlags, Timespec,
        };
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let every = Timespec {
            tv_sec: i64::try_from(tick.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(tick.subsec_nanos()),
        };
        timerfd_settime(
            &timer,
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: every,
                it_value: every,
            },
        )?;
        // Edge-triggered, as mio registers the sockets: each expiry raises
        // an event, and the expiry count is read once it has.
        epoll::add(
            poll.registry(),
            &timer,
            epoll::EventData::new_u64(token.0 as u64),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )?;
        Ok(Ticker {
            timer,
            fired: false,
        })
    }

    /// A ticker for a sweep every `tick`.
    #[cfg(not(target_os = "linux"))]
    pub fn new(_: &Poll, _: Token, tick: Duration) -> io::Result<Ticker> {
        Ok(Ticker {
            tick,
            next: Instant::now() + tick,
        })
    }

    /// How long a wait that starts now may last for the sweep to come on
    /// time: no limit where the timer's expiry wakes the worker (and no
    /// clock is read).
    #[inline(always)]
    pub fn wait_limit(&self) -> Option<Duration> {
        #[cfg(target_os = "linux")]
        return None;
        #[cfg(not(target_os = "linux"))]
        Some(self.next.saturating_duration_since(Instant::now()))
    }

    /// The ticker's event came: the expiries are counted off.
    pub fn on_event(&mut self) {
        #[cfg(target_os = "linux")]
        {
            let mut expiries = [0u8; 8];
            // Nothing to read (WouldBlock) only if another read took it.
            let _ = rustix::io::read(&self.timer, &mut expiries);
            self.fired = true;
        }
    }

    /// Whether the sweep is due (the Linux ticker reads no clock for it);
    /// once it is, the next one is a tick later.
    #[inline(always)]
    pub fn take_due(&mut self) -> bool {
        #[cfg(target_os = "linux")]
        return std::mem::take(&mut self.fired);
        #[cfg(not(target_os = "linux"))]
        {
            let now = Instant::now();
            if now < self.next {
                return false;
            }
            self.next = now + self.tick;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::Events;
    use std::time::Instant;

    const TICK: Token = Token(7);

    /// Waits for the ticker's event, up to `limit`, and counts it off.
    fn expect_tick(poll: &mut Poll, ticker: &mut Ticker, limit: Duration) -> bool {
        let start = Instant::now();
        let mut events = Events::with_capacity(4);
        while start.elapsed() < limit {
            let left = limit.saturating_sub(start.elapsed());
            let wait = left.min(ticker.wait_limit().unwrap_or(left));
            poll.poll(&mut events, Some(wait)).unwrap();
            if events.iter().any(|event| event.token() == TICK) {
                ticker.on_event();
            }
            if ticker.take_due() {
                return true;
            }
        }
        false
    }

    #[test]
    fn the_sweep_comes_every_tick_and_once_per_tick() {
        let mut poll = Poll::new().unwrap();
        let mut ticker = Ticker::new(&poll, TICK, Duration::from_millis(20)).unwrap();
        // Not due before its first tick.
        assert!(!ticker.take_due());
        for _ in 0..3 {
            assert!(expect_tick(&mut poll, &mut ticker, Duration::from_secs(5)));
            // Counted off: not due again until the next tick.
            assert!(!ticker.take_due());
        }
    }
}
