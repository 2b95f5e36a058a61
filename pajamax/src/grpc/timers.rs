//! When calls need the worker again: deadlines, and paced producers that
//! asked to be called later. Sans I/O: the runtime asks for the earliest
//! time ([`Timers::next`]) and hands the time in when it comes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Times at which streams need attention, earliest first. Entries are not
/// removed when a call ends or its time changes; whoever pops one checks
/// that it still applies.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u32)>>,
    /// How many entries the last prune kept: the next one waits until the
    /// heap has grown well past it, so that pruning stays cheap per entry
    /// even when the live streams have several entries each.
    kept: usize,
}

impl Timers {
    /// Asks for `stream` to be looked at once `at` has come.
    pub(crate) fn add(&mut self, at: Instant, stream: u32) {
        self.heap.push(Reverse((at, stream)));
    }

    /// The earliest time asked for.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Moves the streams whose time has come by `now` into `due`.
    pub(crate) fn expire(&mut self, now: Instant, due: &mut Vec<u32>) {
        while let Some(Reverse((at, stream))) = self.heap.peek() {
            if *at > now {
                break;
            }
            due.push(*stream);
            self.heap.pop();
        }
    }

    /// How many entries are kept, stale ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Drops the entries whose stream `keep` says is gone, once they
    /// outnumber `live` by far: ended calls' entries do not pile up.
    pub(crate) fn prune(&mut self, live: usize, keep: impl Fn(u32) -> bool) {
        if self.heap.len() > 2 * live.max(self.kept) + 64 {
            self.heap.retain(|Reverse((_, stream))| keep(*stream));
            self.kept = self.heap.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn expires_in_time_order() {
        let now = Instant::now();
        let mut timers = Timers::default();
        timers.add(now + Duration::from_secs(2), 3);
        timers.add(now + Duration::from_secs(1), 1);
        timers.add(now + Duration::from_secs(3), 5);
        assert_eq!(timers.next(), Some(now + Duration::from_secs(1)));
        let mut due = Vec::new();
        timers.expire(now + Duration::from_secs(2), &mut due);
        assert_eq!(due, vec![1, 3]);
        assert_eq!(timers.next(), Some(now + Duration::from_secs(3)));
        timers.prune(0, |_| false);
        assert_eq!(
            timers.next(),
            Some(now + Duration::from_secs(3)),
            "few: kept"
        );
    }
}
