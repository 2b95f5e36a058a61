//! Waiting for readiness: the one call where a worker sleeps.
//!
//! On Linux the wait is `epoll_wait` on the epoll instance of the worker's
//! `mio::Poll`, made through rustix, which enters the kernel without libc's
//! wrapper and its thread-cancellation bookkeeping (`docs/decisions.md`,
//! "The worker's system calls without libc's wrappers"). Elsewhere it is
//! mio's own `Poll::poll`. Sockets are registered through mio either way.

use mio::{Poll, Token};
use std::io;
use std::time::Duration;

/// A socket or waker that is ready: which one, and whether the peer
/// closed its sending half.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ready {
    pub token: Token,
    pub read_closed: bool,
}

/// The events of one wait.
pub(crate) struct Readiness {
    #[cfg(target_os = "linux")]
    events: Vec<rustix::event::epoll::Event>,
    #[cfg(not(target_os = "linux"))]
    events: mio::Events,
}

impl Readiness {
    /// Room for `capacity` events per wait.
    pub fn with_capacity(capacity: usize) -> Readiness {
        Readiness {
            #[cfg(target_os = "linux")]
            events: Vec::with_capacity(capacity),
            #[cfg(not(target_os = "linux"))]
            events: mio::Events::with_capacity(capacity),
        }
    }

    /// Waits up to `timeout` (rounded up to a millisecond; `None`: no
    /// limit) for the sources registered with `poll` to become ready.
    #[cfg(target_os = "linux")]
    pub fn wait(&mut self, poll: &mut Poll, timeout: Option<Duration>) -> io::Result<()> {
        use rustix::buffer::spare_capacity;
        use rustix::event::{epoll, Timespec};
        self.events.clear();
        let timeout = timeout.map(|timeout| Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        });
        epoll::wait(
            poll.registry(),
            spare_capacity(&mut self.events),
            timeout.as_ref(),
        )?;
        Ok(())
    }

    /// Waits up to `timeout` (`None`: no limit) for the sources registered
    /// with `poll` to become ready.
    #[cfg(not(target_os = "linux"))]
    pub fn wait(&mut self, poll: &mut Poll, timeout: Option<Duration>) -> io::Result<()> {
        poll.poll(&mut self.events, timeout)
    }

    /// What the last wait found ready.
    pub fn iter(&self) -> impl Iterator<Item = Ready> + '_ {
        #[cfg(target_os = "linux")]
        return self.events.iter().map(|event| {
            use rustix::event::epoll::EventFlags;
            let flags = event.flags;
            Ready {
                // mio registers each source with its token as the event's
                // data.
                token: Token(event.data.u64() as usize),
                // As mio reads the flags: a hang-up, or input that ends.
                // (The first test alone decides for most events.)
                read_closed: flags.intersects(EventFlags::HUP | EventFlags::RDHUP)
                    && (flags.contains(EventFlags::HUP)
                        || flags.contains(EventFlags::IN | EventFlags::RDHUP)),
            }
        });
        #[cfg(not(target_os = "linux"))]
        return self.events.iter().map(|event| Ready {
            token: event.token(),
            read_closed: event.is_read_closed(),
        });
    }
}
