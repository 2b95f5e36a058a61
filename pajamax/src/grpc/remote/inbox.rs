//! The queue of answer parts a worker drains.

use super::{lock, Delivery};
use std::fmt;
use std::sync::{Arc, Mutex};

/// The queue of answer parts for one worker. Producers push from any
/// thread; the worker is woken once for however many parts arrive before
/// it drains.
///
/// Internal: the server's workers make and drain it; an application
/// reaches it only through a [`Responder`](super::Responder),
/// [`Sink`](super::Sink) or [`Streaming`](super::Streaming).
pub struct Inbox {
    parts: Mutex<Vec<Delivery>>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").finish_non_exhaustive()
    }
}

impl Inbox {
    /// An inbox that calls `wake` when its first part arrives after a
    /// drain.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Arc<Inbox> {
        Arc::new(Inbox {
            parts: Mutex::new(Vec::new()),
            wake: Box::new(wake),
        })
    }

    pub(crate) fn push(&self, delivery: Delivery) {
        let was_empty = {
            let mut parts = lock(&self.parts);
            parts.push(delivery);
            parts.len() == 1
        };
        if was_empty {
            (self.wake)();
        }
    }

    /// How many parts the inbox has room for now.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        lock(&self.parts).capacity()
    }

    /// Moves every waiting part into `into`, in the order they came.
    pub(crate) fn drain(&self, into: &mut Vec<Delivery>) {
        into.append(&mut lock(&self.parts));
    }

    /// Gives back the room past `kept` parts that a burst left (the room
    /// stays as the parts leave): for the worker's sweep.
    pub(crate) fn trim(&self, kept: usize) {
        let mut parts = lock(&self.parts);
        if parts.capacity() > kept {
            parts.shrink_to(kept);
        }
    }
}
