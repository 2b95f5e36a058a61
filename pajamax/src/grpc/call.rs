//! The state of one gRPC call on its worker, from its request headers to
//! its last answer part.

use crate::grpc::compression::Encoding;
use crate::grpc::context::ResponseMetadata;
use crate::grpc::framing::MessageBuf;
use crate::grpc::metadata::Metadata;
use crate::grpc::remote::Shared;
use crate::grpc::response::NotGrpc;
use crate::grpc::router::Route;
use crate::grpc::status::Status;
use crate::grpc::streaming::{RawHandler, RawProducer};
use crate::h2::REMEMBERED_BLOCKS;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One call, on the stream that carries it.
#[derive(Default)]
pub(crate) struct Call {
    /// The method; `None` for a request that is not gRPC: its body is
    /// discarded and it gets an HTTP 415 or 405 (`not_grpc`) once
    /// complete, or once its deadline passes.
    pub route: Option<Route>,
    /// Why a request is not gRPC, when it is not.
    pub not_grpc: NotGrpc,
    /// The request's custom headers.
    pub metadata: Metadata,
    /// The head of a request that repeats the header block of an earlier
    /// one, shared with the calls that do; `metadata` is then empty.
    pub shared: Option<Rc<SharedHead>>,
    /// When the client gives up, or earlier by the server's
    /// `call_timeout`.
    pub deadline: Option<Instant>,
    /// The client's own `grpc-timeout`, before `call_timeout` capped it:
    /// what a server stream runs to once its request is in. Written by
    /// every path that routes a call (the head's parse, a resumed head).
    pub asked_timeout: Option<Duration>,
    /// `deadline` is `call_timeout`'s cap, not the client's own: until a
    /// server stream's request is in. Written with `asked_timeout`.
    pub capped: bool,
    /// Request bytes not yet consumed.
    pub inbound: MessageBuf,
    /// Request bytes taken in that the client's window was not opened for.
    pub unreleased: usize,
    /// The client is done sending.
    pub recv_done: bool,
    /// The response headers are out.
    pub headers_sent: bool,
    /// Response metadata set by the handler.
    pub response: ResponseMetadata,
    /// Who serves the call now.
    pub state: State,
    /// In the queue of producers to pull.
    pub queued: bool,
    /// When the request's headers arrived, for the call observers (set
    /// only when the server has some).
    pub started: Option<Instant>,
    /// Request and answer message bytes so far, prefixes included.
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// How the request's messages may be compressed.
    pub encoding: Encoding,
    /// How the answer's messages go when they are compressed
    /// ([`Accepts::answer`](crate::grpc::compression::Accepts::answer));
    /// identity when the client accepts no compression.
    pub answer_compression: Encoding,
    /// The answer's messages are sent compressed (with
    /// `answer_compression`).
    pub compress: bool,
    /// The one request message came compressed.
    pub compressed_request: bool,
    /// The bytes of `metadata` counted in the connection's
    /// [`GrpcConfig::max_request_metadata_bytes`](crate::grpc::connection::GrpcConfig).
    pub metadata_counted: usize,
}

/// What a remembered request header block says about its calls, shared by
/// the calls that repeat it.
#[derive(Debug)]
pub(crate) struct SharedHead {
    /// The codec's id of the block.
    pub block_id: u64,
    pub route: Route,
    /// From `grpc-timeout`, capped by the server's `call_timeout` for the
    /// calls it caps.
    pub timeout: Option<Duration>,
    /// From `grpc-timeout`, as the client asked.
    pub asked_timeout: Option<Duration>,
    pub encoding: Encoding,
    pub answer_compression: Encoding,
    /// The custom headers.
    pub metadata: Metadata,
}

/// The heads of the last few remembered header blocks (as many as the
/// codec remembers), the most recently used first.
#[derive(Debug, Default)]
pub(crate) struct RememberedHeads {
    heads: [Option<Rc<SharedHead>>; REMEMBERED_BLOCKS],
}

impl RememberedHeads {
    /// The head of the codec's remembered block `block_id` (not 0).
    #[inline]
    pub(crate) fn find(&mut self, block_id: u64) -> Option<Rc<SharedHead>> {
        if block_id == 0 {
            return None;
        }
        let at = self
            .heads
            .iter()
            .position(|head| head.as_ref().is_some_and(|h| h.block_id == block_id))?;
        if at > 0 {
            self.heads[..=at].rotate_right(1);
        }
        self.heads[0].clone()
    }

    /// Remembers `head` in place of the least recently used one.
    pub(crate) fn insert(&mut self, head: SharedHead) {
        self.heads.rotate_right(1);
        self.heads[0] = Some(Rc::new(head));
    }
}

/// A unary or server-streaming call that repeats a remembered header block
/// and waits for its request body: all it holds until then, 16 bytes (a
/// connection with a thousand such calls holds a table of them).
#[derive(Debug)]
pub(crate) struct Waiting {
    pub head: Rc<SharedHead>,
    /// The deadline in nanoseconds after the connection's epoch, 0 for
    /// none: an `Option<Instant>` would take twice the room.
    deadline: u64,
}

impl Waiting {
    /// A waiting call whose times count from `epoch`, a time before any
    /// of its deadlines.
    #[inline]
    pub(crate) fn new(head: Rc<SharedHead>, deadline: Option<Instant>, epoch: Instant) -> Waiting {
        let deadline = deadline.map_or(0, |at| {
            let since = at.saturating_duration_since(epoch).as_nanos();
            u64::try_from(since).unwrap_or(u64::MAX).max(1)
        });
        Waiting { head, deadline }
    }

    /// The call's deadline; `epoch` as given to [`Waiting::new`].
    #[inline]
    pub(crate) fn deadline(&self, epoch: Instant) -> Option<Instant> {
        if self.deadline == 0 {
            return None;
        }
        epoch.checked_add(std::time::Duration::from_nanos(self.deadline))
    }

    /// Whether the call has a deadline.
    #[inline]
    pub(crate) fn has_deadline(&self) -> bool {
        self.deadline != 0
    }
}

impl Call {
    /// Fills a fresh call from what a waiting one holds; `epoch` as given
    /// to [`Waiting::new`].
    pub(crate) fn resume(&mut self, waiting: Waiting, epoch: Instant) {
        self.route = Some(waiting.head.route);
        self.deadline = waiting.deadline(epoch);
        self.asked_timeout = waiting.head.asked_timeout;
        self.capped = waiting.head.timeout != waiting.head.asked_timeout;
        self.encoding = waiting.head.encoding;
        self.answer_compression = waiting.head.answer_compression;
        self.shared = Some(waiting.head);
    }
}

/// Who serves a call.
#[derive(Default)]
pub(crate) enum State {
    /// A unary or server-streaming call gathering its one request message.
    #[default]
    Collecting,
    /// A client-streaming or bidirectional call whose messages go to a
    /// handler on the worker.
    Handling {
        handler: Box<dyn RawHandler>,
        /// The stream's send buffer is full: delivery waits for room.
        blocked: bool,
    },
    /// A server stream produced on the worker.
    Producing {
        producer: Box<dyn RawProducer>,
        /// The producer asked to be called again at this time.
        wake_at: Option<Instant>,
    },
    /// Served on another thread; its answer parts come through the inbox.
    Remote(Box<RemoteCall>),
}

/// A call served on another thread, as its worker sees it.
pub(crate) struct RemoteCall {
    pub shared: Arc<Shared>,
    /// Request messages go to the thread (client streaming and
    /// bidirectional calls).
    pub incoming: bool,
    /// The thread's queue was full: delivery waits for a resume.
    pub incoming_blocked: bool,
    /// Listed among the connection's calls that wait for room in its share
    /// of queued request bytes, until the next [`Part::Room`] takes the
    /// list: a call its thread resumes meanwhile (it waits for the message
    /// held back) and that is refused room again is not listed twice.
    ///
    /// [`Part::Room`]: crate::grpc::remote::Part::Room
    pub starved: bool,
    /// Answer bytes the stream took that credit was not returned for.
    pub unacked: usize,
    /// Credit owed to the thread for compressed answer bytes the stream
    /// took, returned with the next credit.
    pub owed: usize,
    /// Answer messages the stream could not take yet.
    pub backlog: VecDeque<Vec<u8>>,
    /// The end of the answer, once it came, waiting behind the backlog.
    pub finish: Option<Option<Status>>,
}

impl RemoteCall {
    pub(crate) fn new(shared: Arc<Shared>, incoming: bool) -> RemoteCall {
        RemoteCall {
            shared,
            incoming,
            incoming_blocked: false,
            starved: false,
            unacked: 0,
            owed: 0,
            backlog: VecDeque::new(),
            finish: None,
        }
    }
}

impl Call {
    /// The client accepts a compression for the answer.
    #[inline]
    pub(crate) fn accepts_compression(&self) -> bool {
        self.answer_compression != Encoding::Identity
    }

    /// How the answer's messages are sent: identity unless the answer is
    /// compressed.
    #[inline]
    pub(crate) fn answer_encoding(&self) -> Encoding {
        if self.compress {
            self.answer_compression
        } else {
            Encoding::Identity
        }
    }

    /// The request's custom headers.
    pub(crate) fn request_metadata(&self) -> &Metadata {
        request_metadata(&self.shared, &self.metadata)
    }

    /// Readies a finished call's room for the next one.
    pub(crate) fn reset(&mut self) {
        self.route = None;
        self.not_grpc = NotGrpc::ContentType;
        self.metadata.clear();
        self.shared = None;
        self.deadline = None;
        self.capped = false;
        self.inbound.clear();
        self.unreleased = 0;
        self.recv_done = false;
        self.headers_sent = false;
        self.response.clear();
        if !matches!(self.state, State::Collecting) {
            self.state = State::Collecting;
        }
        self.queued = false;
        self.started = None;
        self.request_bytes = 0;
        self.response_bytes = 0;
        self.encoding = Encoding::Identity;
        self.answer_compression = Encoding::Identity;
        self.compress = false;
        self.compressed_request = false;
    }
}

impl Call {
    /// The room a finished call's buffers hold, in bytes: its request
    /// bytes and metadata, and its response metadata.
    pub(crate) fn room(&self) -> usize {
        self.inbound.capacity()
            + self.metadata.room()
            + self.response.headers.room()
            + self.response.trailers.room()
    }

    /// Lets go of the room of a finished call's buffers.
    pub(crate) fn let_go_room(&mut self) {
        self.inbound.let_go_room();
        self.metadata.let_go_room();
        self.response.headers.let_go_room();
        self.response.trailers.let_go_room();
    }
}

/// A call's request metadata: the shared head's when it repeats a
/// remembered header block, else its own. A function of the two fields, so
/// that it can be borrowed beside the call's other fields.
pub(crate) fn request_metadata<'a>(
    shared: &'a Option<Rc<SharedHead>>,
    own: &'a Metadata,
) -> &'a Metadata {
    shared.as_deref().map_or(own, |head| &head.metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_call_takes_16_bytes() {
        // A table of a thousand of them per connection at 100 connections:
        // each byte here is about 200 KB of the server's peak memory.
        assert_eq!(std::mem::size_of::<Waiting>(), 16);
    }
}
