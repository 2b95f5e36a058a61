//! The request bytes of one connection's calls waiting for their
//! threads, and their limit.

use super::lock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Request bytes waiting for the threads of one connection's calls, and the
/// most they may be: without it, each of thousands of streams could hold a
/// stream window (or one inflated message) in its thread's queue, and each
/// call sent to a thread its request. Streamed messages and the requests
/// of calls sent to threads each have the limit; a thread that waits for
/// the next message of its call gets it past the limit.
#[derive(Debug)]
pub(crate) struct Queued {
    limit: usize,
    state: Mutex<QueuedState>,
    /// Streamed and held bytes together, as last counted, read by the
    /// worker's peaks without taking the lock.
    bytes_now: AtomicUsize,
}

#[derive(Debug, Default)]
struct QueuedState {
    /// Request messages of streams queued and not yet taken.
    streamed: usize,
    /// The requests of calls sent to threads ([`Shared::hold_request`](super::Shared::hold_request)):
    /// they leave when the threads answer, not as the threads take
    /// streamed messages.
    held: usize,
    /// A streamed message was refused for lack of room: a [`Part::Room`](super::Part::Room)
    /// is owed once there is some.
    starved: bool,
}

impl QueuedState {
    fn total(&self) -> usize {
        self.streamed + self.held
    }
}

/// What became of a request message offered to a call's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Queued for the thread.
    Queued,
    /// The call's queue is full: a [`Part::Resume`](super::Part::Resume) comes once its thread
    /// has made room.
    CallFull,
    /// The connection's queues are full: a [`Part::Room`](super::Part::Room) comes once the
    /// threads have made room.
    ConnectionFull,
}

impl Queued {
    /// At most `limit` bytes of streamed messages (and at least one) and
    /// `limit` bytes of held requests (and at least one) at once.
    pub(crate) fn new(limit: usize) -> Arc<Queued> {
        Arc::new(Queued {
            limit: limit.max(1),
            state: Mutex::new(QueuedState::default()),
            bytes_now: AtomicUsize::new(0),
        })
    }

    /// The request bytes queued now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes_now.load(Ordering::Relaxed)
    }

    /// Counts `bytes` of a streamed message in if there is room: some is
    /// left, or no streamed message is queued (a message larger than the
    /// limit goes alone), or a thread waits for this very message
    /// (`awaited`): held back, it could wait for ever while the messages
    /// of calls queued behind it (to be read by the same thread, once it
    /// is done) hold the room. So the limit is passed by at most one
    /// message for each thread that waits for one, and only until it
    /// takes it.
    pub(super) fn add(&self, bytes: usize, awaited: bool) -> bool {
        let mut state = lock(&self.state);
        if !awaited && state.streamed > 0 && state.streamed + bytes > self.limit {
            state.starved = true;
            return false;
        }
        state.streamed += bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
        true
    }

    /// Counts `bytes` of streamed messages out; `true` when a refused call
    /// may be offered more now: the streamed messages are down to half
    /// the limit.
    pub(super) fn remove(&self, bytes: usize) -> bool {
        let mut state = lock(&self.state);
        state.streamed -= bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
        let room = state.starved && state.streamed <= self.limit / 2;
        if room {
            state.starved = false;
        }
        room
    }

    /// Counts in the `bytes` of a request a call goes to a thread with, if
    /// the held requests leave room for it within the limit (or none is
    /// held): a limit of their own, so that requests whose threads have not
    /// answered never hold streamed messages back (a deferred call that
    /// waits on a client stream of its connection would never be
    /// answered), nor streamed messages them. A request without room is
    /// refused; no call waits for room for it.
    pub(super) fn hold(&self, bytes: usize) -> bool {
        let mut state = lock(&self.state);
        if state.held > 0 && state.held + bytes > self.limit {
            return false;
        }
        state.held += bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
        true
    }

    /// Counts out the `bytes` of a request [`Queued::hold`] counted in.
    pub(super) fn release(&self, bytes: usize) {
        let mut state = lock(&self.state);
        state.held -= bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
    }
}
