//! Calls served on other threads: the handles a handler sends away
//! ([`Responder`], [`Sink`], [`Streaming`]), the state each call shares with
//! its worker, and the [`Inbox`] that carries answer parts back.
//!
//! Parts come back to the worker through its inbox: many parts of many
//! calls wake it once, and leave in one write. A sink waits for credit
//! before it sends, and the worker returns credit as the bytes leave for
//! the client, so no buffer grows without bound. Incoming messages wait in
//! a queue of bounded size; the worker stops taking the client's bytes in
//! while it is full, so the client's flow-control window closes.
//!
//! One idea a file: the worker's [`Inbox`], why a call ended
//! ([`CancelReason`]), the connection's answer credit shared by its sinks
//! ([`Lent`]) and its request bytes queued for threads ([`Queued`]), the
//! state a call shares with its worker ([`Shared`]), and the three handles
//! ([`Responder`], [`Sink`], [`Streaming`]).

mod cancel;
mod credit;
mod inbox;
mod queued;
mod responder;
mod shared;
mod sink;
mod streaming;
#[cfg(test)]
mod tests;

pub use cancel::{CancelReason, Cancelled, TrySendError};
pub(crate) use credit::Lent;
pub use inbox::Inbox;
pub(crate) use queued::{Offered, Queued};
pub use responder::Responder;
pub(crate) use shared::{Shared, Target};
pub use sink::Sink;
pub use streaming::Streaming;

use crate::grpc::metadata::Metadata;
use crate::grpc::status::Status;
use std::sync::{Mutex, MutexGuard};

/// A part of an answer on its way back to its call's worker.
pub(crate) struct Delivery {
    /// The connection, as its worker knows it.
    pub connection: u64,
    pub stream: u32,
    pub part: Part,
}

/// What a thread sends back for a call.
pub(crate) enum Part {
    /// Initial metadata, sent now.
    Headers(Metadata),
    /// One framed message (5-byte prefix included).
    Message(Vec<u8>),
    /// The end of a streamed answer.
    Finish {
        status: Option<Status>,
        trailers: Metadata,
    },
    /// The whole answer of a unary or client-streaming call.
    Answer {
        result: Result<Vec<u8>, Status>,
        headers: Metadata,
        trailers: Metadata,
    },
    /// The thread took incoming messages: the queue has room again.
    Resume,
    /// The threads of the connection's calls took incoming messages: the
    /// connection's share of queued request bytes has room again.
    Room,
}

/// Locks `mutex`, whatever a thread that panicked holding it left.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
