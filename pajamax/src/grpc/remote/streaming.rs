//! The request messages of a client-streaming or bidirectional call, for
//! another thread.

use super::{CancelReason, Shared};
use crate::grpc::framing;
use crate::grpc::service::decode_request;
use crate::grpc::status::Status;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

/// The request messages of a client-streaming or bidirectional call, for
/// another thread: made with a stream's `channel`.
///
/// Iterating blocks until the next message arrives and ends when the client
/// is done. An item is an error when a message does not decode
/// (`INTERNAL`), when the server ended the call for a request message
/// (the status the client got, such as `RESOURCE_EXHAUSTED` for one past
/// the size limit), or when the call has ended otherwise
/// ([`Cancelled`](super::Cancelled) as a status),
/// also once the client is done if the call was cancelled since (reset,
/// past its deadline, its connection gone), as grpc-go's `Recv` returns
/// the call's cancellation (tonic drops the handler of a call reset);
/// nothing follows an error. Taking messages is what lets the client send
/// more: its flow-control window opens as the queue empties. Dropping it
/// lets go of the requests: those not taken yet, and those the client
/// sends after, are dropped (the client is not held back), while the call
/// goes on. It is read on another thread, never on the worker: the
/// messages it waits for come through the worker, which would then wait
/// for ever.
///
/// ```
/// use pajamax::{ClientStream, Context, Status};
///
/// // `rpc Sum (stream uint32) returns (uint64)`, read on a thread.
/// fn sum_with_context(ctx: &mut Context<'_>) -> Result<ClientStream<u32, u64>, Status> {
///     let (stream, numbers, responder) = ClientStream::channel(ctx);
///     std::thread::spawn(move || {
///         // Blocks for each message; the first error ends the sum.
///         let sum: Result<u64, Status> = numbers.map(|n| n.map(u64::from)).sum();
///         responder.respond(sum);
///     });
///     Ok(stream)
/// }
/// # let md = pajamax::Metadata::new();
/// # let mut response = pajamax::ResponseMetadata::default();
/// # let mut ctx = Context::new(&md, None, None, &mut response);
/// # sum_with_context(&mut ctx)?;
/// # Ok::<(), Status>(())
/// ```
pub struct Streaming<M> {
    shared: Option<Arc<Shared>>,
    done: bool,
    _message: PhantomData<fn() -> M>,
}

impl<M> fmt::Debug for Streaming<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streaming")
            .field("stream", &self.shared.as_ref().map(|s| s.target.stream))
            .field("done", &self.done)
            .finish()
    }
}

impl<M> Streaming<M> {
    pub(crate) fn new(shared: Option<Arc<Shared>>) -> Streaming<M> {
        Streaming {
            shared,
            done: false,
            _message: PhantomData,
        }
    }

    /// Whether the call has ended.
    pub fn is_cancelled(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.cancelled().is_some())
    }

    /// The call's deadline, as [`Context::deadline`](crate::Context::deadline).
    pub fn deadline(&self) -> Option<Instant> {
        self.shared.as_ref().and_then(|s| s.deadline)
    }
}

impl<M> Drop for Streaming<M> {
    /// What was queued for it and not taken leaves the connection's share.
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.let_go_of_incoming();
        }
    }
}

impl<M: prost::Message + Default> Iterator for Streaming<M> {
    type Item = Result<M, Status>;

    fn next(&mut self) -> Option<Result<M, Status>> {
        if self.done {
            return None;
        }
        let Some(shared) = &self.shared else {
            self.done = true;
            return None;
        };
        let item = match shared.take_incoming() {
            Ok(Some(bytes)) => decode_request(&bytes[framing::PREFIX_LEN..]),
            Ok(None) => {
                self.done = true;
                return None;
            }
            Err(status) => Err(status),
        };
        if item.is_err() {
            self.done = true;
            shared.cancel(CancelReason::Ended);
        }
        Some(item)
    }
}
