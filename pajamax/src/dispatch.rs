//! Dispatch mode: requests travel from the worker to user-owned threads,
//! each owning a shard of state, and the answers come back through the
//! call's [`Responder`](crate::Responder).
//!
//! The queues are bounded: when a backend's queue is full the call is
//! answered `RESOURCE_EXHAUSTED` at once, and when the backend has stopped,
//! `UNAVAILABLE`; nothing is dropped silently.
//!
//! ```
//! let (sender, receiver) = pajamax::dispatch::channel::<u32>(2);
//! sender.try_dispatch(1).unwrap();
//! sender.try_dispatch(2).unwrap();
//! let (status, item) = sender.try_dispatch(3).unwrap_err();
//! assert_eq!(status.code(), pajamax::Code::ResourceExhausted);
//! assert_eq!(item, 3);
//! assert_eq!(receiver.recv().unwrap(), 1);
//! ```

use crate::grpc::status::Status;
use std::sync::mpsc;

/// The default capacity of a backend queue.
pub const DEFAULT_QUEUE_SIZE: usize = 1024;

/// The sending side of a backend's queue; cheap to clone.
#[derive(Debug)]
pub struct Sender<T> {
    inner: mpsc::SyncSender<T>,
    capacity: usize,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            inner: self.inner.clone(),
            capacity: self.capacity,
        }
    }
}

/// The receiving side, owned by the backend thread.
pub type Receiver<T> = mpsc::Receiver<T>;

/// A queue holding at most `capacity` items (at least 1); the room for
/// all of them is taken when it is made.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let capacity = capacity.max(1);
    let (inner, receiver) = mpsc::sync_channel(capacity);
    (Sender { inner, capacity }, receiver)
}

impl<T> Sender<T> {
    /// Queues `item` without blocking. When the queue is full or the
    /// backend is gone, gives the item back with the status to answer.
    pub fn try_dispatch(&self, item: T) -> Result<(), (Status, T)> {
        self.inner.try_send(item).map_err(|err| match err {
            mpsc::TrySendError::Full(item) => (
                Status::resource_exhausted(format!(
                    "the backend queue is full ({} calls waiting)",
                    self.capacity
                )),
                item,
            ),
            mpsc::TrySendError::Disconnected(item) => {
                (Status::unavailable("the backend has stopped"), item)
            }
        })
    }

    /// The queue's capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_backend_is_unavailable() {
        let (sender, receiver) = channel::<u8>(4);
        drop(receiver);
        let (status, item) = sender.try_dispatch(9).unwrap_err();
        assert_eq!(status.code(), crate::Code::Unavailable);
        assert_eq!(item, 9);
    }

    #[test]
    fn capacity_is_at_least_one() {
        let (sender, _receiver) = channel::<u8>(0);
        assert_eq!(sender.capacity(), 1);
        assert!(sender.try_dispatch(1).is_ok());
        assert!(sender.try_dispatch(2).is_err());
    }
}
