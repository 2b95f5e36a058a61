//! What streaming handlers return: server streams, client streams and
//! bidirectional streams, each served on the worker or on another thread.
//!
//! On the worker, nothing blocks: a [`ServerStream`] is an iterator (or a
//! [`Producer`], which may also ask to be called again later) that the
//! worker pulls from only as far as the client's flow-control windows
//! allow; a client stream or a bidirectional stream is a per-call object
//! whose `on_message` and `on_end` the worker calls as the messages
//! arrive ([`ClientStreamHandler`], [`BidiHandler`]).
//!
//! On another thread, `channel` gives the thread a [`Sink`] whose `send`
//! waits for flow-control credit, and a [`Streaming`] of the request
//! messages that it reads as a blocking iterator; both report when the call
//! has ended (the client cancelled, the deadline passed, the connection
//! closed). What the thread sends comes back through the worker's inbox,
//! many parts per wake-up, and leaves in one write.
//!
//! ```
//! use pajamax::{Context, ServerStream, Status};
//!
//! // On the worker: three numbers, pulled as the client's windows allow.
//! fn count(_ctx: &mut Context<'_>, to: u32) -> Result<ServerStream<u32>, Status> {
//!     Ok(ServerStream::iter((1..=to).map(Ok)))
//! }
//!
//! // On a thread of its own: the sink waits while the client is slow.
//! fn count_on_a_thread(ctx: &mut Context<'_>, to: u32) -> Result<ServerStream<u32>, Status> {
//!     let (stream, mut sink) = ServerStream::channel(ctx);
//!     std::thread::spawn(move || {
//!         for n in 1..=to {
//!             if sink.send(&n).is_err() {
//!                 return; // cancelled: stop working for it
//!             }
//!         }
//!         sink.finish(Ok(()));
//!     });
//!     Ok(stream)
//! }
//! # let md = pajamax::Metadata::new();
//! # let mut response = pajamax::ResponseMetadata::default();
//! # let mut ctx = Context::new(&md, None, None, &mut response);
//! # count(&mut ctx, 3).unwrap();
//! # count_on_a_thread(&mut ctx, 3).unwrap();
//! ```

use crate::grpc::compression;
use crate::grpc::context::Context;
use crate::grpc::decode;
use crate::grpc::framing;
use crate::grpc::remote::{Responder, Sink, Streaming};
use crate::grpc::status::Status;
use std::fmt;
use std::marker::PhantomData;
use std::time::Instant;

/// What a [`Producer`] gives when the worker asks for the next message.
#[derive(Debug)]
#[non_exhaustive]
pub enum Next<M> {
    /// The next message of the answer.
    Message(M),
    /// The next message of the answer, sent uncompressed even when the
    /// call's answers are compressed (say, a payload that is compressed
    /// already); otherwise as [`Next::Message`].
    Uncompressed(M),
    /// Nothing now: ask again at this time (a paced stream). The worker
    /// serves other calls meanwhile.
    Wait(Instant),
    /// The answer is complete: status `OK` or the error.
    End(Result<(), Status>),
}

/// A server stream produced on the worker, message by message.
///
/// The worker calls [`Producer::next`] only while the stream may send (the
/// client's windows and the stream's send buffer have room), so a slow
/// client slows the producer instead of filling memory. It is dropped when
/// the call ends, also when the client cancels or the deadline passes: that
/// is how a producer learns of a cancellation.
///
/// A panic in `next` ends the call with `INTERNAL`. So does one in its
/// `Drop` (or in that of what it holds, such as an iterator's remaining
/// items), when the producer ended the call with `OK`; a call ended
/// otherwise keeps its status. Either way the worker and its other calls
/// go on.
///
/// ```
/// use pajamax::{Next, Producer};
/// use std::time::{Duration, Instant};
///
/// /// One tick every 10 ms, five in all, without holding the worker.
/// struct Ticks {
///     left: u32,
///     due: Option<Instant>,
/// }
///
/// impl Producer<u32> for Ticks {
///     fn next(&mut self, now: Instant) -> Next<u32> {
///         if self.left == 0 {
///             return Next::End(Ok(()));
///         }
///         match self.due {
///             Some(due) if due > now => Next::Wait(due),
///             _ => {
///                 self.left -= 1;
///                 self.due = Some(now + Duration::from_millis(10));
///                 Next::Message(self.left)
///             }
///         }
///     }
/// }
/// ```
pub trait Producer<M>: 'static {
    /// The next step of the answer; `now` is the worker's time.
    fn next(&mut self, now: Instant) -> Next<M>;
}

/// A type-erased producer: encodes its message, prefix included, into
/// `out`. With `compressing` (the call's answers are compressed), a
/// message to go uncompressed is marked [`framing::PLAIN`].
pub(crate) trait RawProducer {
    fn next(&mut self, now: Instant, out: &mut Vec<u8>, compressing: bool) -> RawNext;
}

/// What a [`RawProducer`] did.
pub(crate) enum RawNext {
    /// One message appended to `out`.
    Message,
    Wait(Instant),
    End(Result<(), Status>),
}

struct Encoding<P, M> {
    producer: P,
    _message: PhantomData<fn() -> M>,
}

impl<P: Producer<M>, M: prost::Message + 'static> RawProducer for Encoding<P, M> {
    fn next(&mut self, now: Instant, out: &mut Vec<u8>, compressing: bool) -> RawNext {
        match self.producer.next(now) {
            Next::Message(message) => {
                framing::encode(&message, out);
                RawNext::Message
            }
            Next::Uncompressed(message) => {
                if compressing {
                    framing::encode_plain(&message, out);
                } else {
                    framing::encode(&message, out);
                }
                RawNext::Message
            }
            Next::Wait(at) => RawNext::Wait(at),
            Next::End(result) => RawNext::End(result),
        }
    }
}

/// An iterator as a producer.
struct IterProducer<I>(I);

impl<I, M> Producer<M> for IterProducer<I>
where
    I: Iterator<Item = Result<M, Status>> + 'static,
{
    fn next(&mut self, _now: Instant) -> Next<M> {
        match self.0.next() {
            Some(Ok(message)) => Next::Message(message),
            Some(Err(status)) => Next::End(Err(status)),
            None => Next::End(Ok(())),
        }
    }
}

/// How a streamed answer is produced, without its message type.
pub(crate) enum Production {
    /// On the worker.
    Local(Box<dyn RawProducer>),
    /// On another thread, through a [`Sink`].
    Remote,
}

/// The answer of a server-streaming handler: the messages to send, made
/// on the worker ([`ServerStream::iter`], [`ServerStream::from_producer`])
/// or on another thread ([`ServerStream::channel`]).
///
/// Response metadata set on the handler's [`Context`] goes with the first
/// message (headers) and the end (trailers).
///
/// ```
/// use pajamax::{ServerStream, Status};
///
/// // `rpc List (uint32) returns (stream string)`, made on the worker.
/// fn list(count: u32) -> Result<ServerStream<String>, Status> {
///     if count == 0 {
///         // Before any message: the call ends with this status alone.
///         return Err(Status::invalid_argument("ask for one name at least"));
///     }
///     let names = (1..=count).map(|i| Ok(format!("name {i}")));
///     // An `Err` item ends the stream with that status, after the messages
///     // before it.
///     let last = std::iter::once(Err(Status::aborted("that was all there is")));
///     Ok(ServerStream::iter(names.chain(last)))
/// }
/// # list(3)?;
/// # assert!(list(0).is_err());
/// # Ok::<(), Status>(())
/// ```
///
/// To send the messages from another thread, see [`ServerStream::channel`]
/// and [`Sink`]; to pace them on the worker, [`Producer`].
pub struct ServerStream<M> {
    production: Production,
    _message: PhantomData<fn() -> M>,
}

impl<M> fmt::Debug for ServerStream<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.production {
            Production::Local(_) => "on the worker",
            Production::Remote => "on another thread",
        };
        f.debug_tuple("ServerStream").field(&kind).finish()
    }
}

impl<M: prost::Message + 'static> ServerStream<M> {
    /// Messages from an iterator, pulled on the worker as the client's
    /// windows allow; an `Err` item ends the call with that status, the end
    /// of the iterator with `OK`.
    pub fn iter<I>(messages: I) -> ServerStream<M>
    where
        I: IntoIterator<Item = Result<M, Status>>,
        I::IntoIter: 'static,
    {
        ServerStream::from_producer(IterProducer(messages.into_iter()))
    }

    /// Messages from a [`Producer`], called on the worker.
    pub fn from_producer<P: Producer<M>>(producer: P) -> ServerStream<M> {
        ServerStream {
            production: Production::Local(Box::new(Encoding {
                producer,
                _message: PhantomData,
            })),
            _message: PhantomData,
        }
    }

    /// No message: the call ends with `OK` at once.
    pub fn empty() -> ServerStream<M> {
        ServerStream::iter(std::iter::empty())
    }

    /// Messages sent from another thread through the returned [`Sink`];
    /// return the stream from the handler and move the sink to the thread.
    /// The response metadata set on `ctx` so far moves to the sink, unless
    /// the call is refused at once for lack of room for its request (as for
    /// [`Context::defer`]): its answer carries it.
    ///
    /// # Panics
    ///
    /// If the call went to another thread already, as
    /// [`Context::defer`].
    pub fn channel(ctx: &mut Context<'_>) -> (ServerStream<M>, Sink<M>) {
        let shared = ctx.open_remote();
        let (headers, trailers) = ctx.metadata_for_thread();
        (
            ServerStream {
                production: Production::Remote,
                _message: PhantomData,
            },
            Sink::new(shared, headers, trailers),
        )
    }

    /// The stream without its message type, for generated code.
    #[doc(hidden)]
    pub fn into_raw(self) -> RawServerStream {
        RawServerStream(self.production)
    }
}

/// A [`ServerStream`] without its message type; generated code passes it
/// from a handler to the server.
pub struct RawServerStream(pub(crate) Production);

impl fmt::Debug for RawServerStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawServerStream").finish_non_exhaustive()
    }
}

/// A client-streaming call served on the worker: it sees each request
/// message as it arrives, and answers at the end.
///
/// The [`Context`] passed in is the call's: its request metadata and
/// deadline, and the response metadata to send (headers and trailers go
/// out with the answer). A panic ends the call with `INTERNAL`, as does a
/// panic in its `Drop` (it is dropped once `on_end` returns, or when the
/// call ends before) unless the call ends with an error anyway.
///
/// ```
/// use pajamax::{ClientStreamHandler, Context, Status};
///
/// #[derive(Default)]
/// struct Sum(u64);
///
/// impl ClientStreamHandler<u32, u64> for Sum {
///     fn on_message(&mut self, _ctx: &mut Context<'_>, n: u32) -> Result<(), Status> {
///         self.0 += u64::from(n);
///         Ok(())
///     }
///
///     fn on_end(&mut self, _ctx: &mut Context<'_>) -> Result<u64, Status> {
///         Ok(self.0)
///     }
/// }
/// ```
pub trait ClientStreamHandler<Req, Resp>: 'static {
    /// One request message. An error ends the call with that status; no
    /// more messages are delivered.
    fn on_message(&mut self, ctx: &mut Context<'_>, request: Req) -> Result<(), Status>;

    /// The client is done sending: the answer. The context can still
    /// [`defer`](Context::defer) it to another thread.
    fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<Resp, Status>;
}

/// A bidirectional call served on the worker: it sees each request message
/// as it arrives and may send answer messages at any of these calls.
///
/// While the stream's send buffer is full (the client does not read), the
/// worker stops delivering request messages, so the client is slowed in
/// turn. A panic ends the call with `INTERNAL`, as does a panic in its
/// `Drop` (it is dropped once `on_end` returns, or when the call ends
/// before) unless the call ends with an error anyway; the answers of an
/// `on_end` followed by such a panic do not go.
///
/// ```
/// use pajamax::{BidiHandler, Context, Responses, Status};
///
/// /// Answers every number with its double.
/// struct Doubler;
///
/// impl BidiHandler<u32, u32> for Doubler {
///     fn on_message(
///         &mut self,
///         _ctx: &mut Context<'_>,
///         n: u32,
///         responses: &mut Responses<'_, u32>,
///     ) -> Result<(), Status> {
///         responses.send(&(n * 2));
///         Ok(())
///     }
/// }
/// ```
pub trait BidiHandler<Req, Resp>: 'static {
    /// One request message. An error ends the call with that status.
    fn on_message(
        &mut self,
        ctx: &mut Context<'_>,
        request: Req,
        responses: &mut Responses<'_, Resp>,
    ) -> Result<(), Status>;

    /// The client is done sending; `Ok` ends the call with `OK`. The
    /// default does just that.
    fn on_end(
        &mut self,
        ctx: &mut Context<'_>,
        responses: &mut Responses<'_, Resp>,
    ) -> Result<(), Status> {
        let _ = (ctx, responses);
        Ok(())
    }
}

/// Where a [`BidiHandler`] sends its answer messages.
pub struct Responses<'a, M> {
    out: &'a mut Outgoing,
    _message: PhantomData<fn(M)>,
}

/// The answer parts a worker-side handler produced in one call.
#[derive(Debug, Default)]
pub(crate) struct Outgoing {
    /// Framed messages.
    pub messages: Vec<u8>,
    /// Send the response headers now, even without a message.
    pub headers_now: bool,
    /// Some of `messages` are marked [`framing::PLAIN`].
    pub plain: bool,
}

impl Outgoing {
    /// Empties it for the handler's next call.
    pub(crate) fn clear(&mut self) {
        self.messages.clear();
        self.headers_now = false;
        self.plain = false;
    }

    /// The messages as they go out: compressed with `encoding` into
    /// `deflated` unless that is identity, else as they are, with any
    /// [`framing::PLAIN`] mark written over.
    pub(crate) fn data<'a>(
        &'a mut self,
        encoding: compression::Encoding,
        deflated: &'a mut Vec<u8>,
    ) -> &'a [u8] {
        if encoding != compression::Encoding::Identity {
            deflated.clear();
            compression::deflate_frames(&self.messages, encoding, deflated);
            return deflated;
        }
        if self.plain {
            framing::unmark_plain(&mut self.messages);
            self.plain = false;
        }
        &self.messages
    }
}

impl<M: prost::Message> Responses<'_, M> {
    /// Sends one message (after the response headers, with the metadata set
    /// on the context). It leaves when this call returns to the worker.
    pub fn send(&mut self, message: &M) {
        framing::encode(message, &mut self.out.messages);
    }

    /// As [`Responses::send`], but the message goes uncompressed even when
    /// the call's answers are compressed (say, a payload that is
    /// compressed already).
    pub fn send_uncompressed(&mut self, message: &M) {
        framing::encode_plain(message, &mut self.out.messages);
        self.out.plain = true;
    }

    /// Sends the response headers now, even if no message follows yet.
    pub fn send_headers(&mut self) {
        self.out.headers_now = true;
    }
}

/// A type-erased handler of request messages: decodes each message, and
/// encodes answers into an [`Outgoing`].
pub(crate) trait RawHandler {
    fn on_message(
        &mut self,
        ctx: &mut Context<'_>,
        message: &[u8],
        out: &mut Outgoing,
    ) -> Result<(), Status>;

    fn on_end(&mut self, ctx: &mut Context<'_>, out: &mut Outgoing) -> Result<(), Status>;
}

struct ClientStreamAdapter<H, Req, Resp> {
    handler: H,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<H, Req, Resp> RawHandler for ClientStreamAdapter<H, Req, Resp>
where
    H: ClientStreamHandler<Req, Resp>,
    Req: prost::Message + Default,
    Resp: prost::Message,
{
    fn on_message(
        &mut self,
        ctx: &mut Context<'_>,
        message: &[u8],
        _out: &mut Outgoing,
    ) -> Result<(), Status> {
        // Built in place: cheaper than returned and moved.
        let mut request = Req::default();
        decode::merge(&mut request, message)?;
        self.handler.on_message(ctx, request)
    }

    fn on_end(&mut self, ctx: &mut Context<'_>, out: &mut Outgoing) -> Result<(), Status> {
        let answer = self.handler.on_end(ctx)?;
        framing::encode(&answer, &mut out.messages);
        Ok(())
    }
}

struct BidiAdapter<H, Req, Resp> {
    handler: H,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<H, Req, Resp> RawHandler for BidiAdapter<H, Req, Resp>
where
    H: BidiHandler<Req, Resp>,
    Req: prost::Message + Default,
    Resp: prost::Message,
{
    fn on_message(
        &mut self,
        ctx: &mut Context<'_>,
        message: &[u8],
        out: &mut Outgoing,
    ) -> Result<(), Status> {
        // Built in place: cheaper than returned and moved.
        let mut request = Req::default();
        decode::merge(&mut request, message)?;
        let mut responses = Responses {
            out,
            _message: PhantomData,
        };
        self.handler.on_message(ctx, request, &mut responses)
    }

    fn on_end(&mut self, ctx: &mut Context<'_>, out: &mut Outgoing) -> Result<(), Status> {
        let mut responses = Responses {
            out,
            _message: PhantomData,
        };
        self.handler.on_end(ctx, &mut responses)
    }
}

/// How request messages are taken in, without their types.
pub(crate) enum Inbound {
    /// By a handler on the worker.
    Local(Box<dyn RawHandler>),
    /// By another thread, through a [`Streaming`].
    Remote,
}

/// A client-streaming or bidirectional stream without its message types;
/// generated code passes it from a handler to the server.
pub struct RawInbound(pub(crate) Inbound);

impl fmt::Debug for RawInbound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawInbound").finish_non_exhaustive()
    }
}

/// What a client-streaming handler returns: who takes the request messages
/// and answers, on the worker ([`ClientStream::on_worker`]) or on another
/// thread ([`ClientStream::channel`]).
///
/// The handler runs when the call starts, before any request message;
/// what it returns takes the messages as they arrive.
///
/// ```
/// use pajamax::{ClientStream, ClientStreamHandler, Context, Status};
///
/// /// The longest of the strings sent.
/// #[derive(Default)]
/// struct Longest(String);
///
/// impl ClientStreamHandler<String, String> for Longest {
///     fn on_message(&mut self, _ctx: &mut Context<'_>, s: String) -> Result<(), Status> {
///         if s.len() > self.0.len() {
///             self.0 = s;
///         }
///         Ok(())
///     }
///
///     fn on_end(&mut self, _ctx: &mut Context<'_>) -> Result<String, Status> {
///         Ok(std::mem::take(&mut self.0))
///     }
/// }
///
/// // `rpc Longest (stream string) returns (string)`, on the worker.
/// fn longest() -> Result<ClientStream<String, String>, Status> {
///     Ok(ClientStream::on_worker(Longest::default()))
/// }
/// # longest()?;
/// # Ok::<(), Status>(())
/// ```
///
/// On a thread instead, see [`Streaming`].
pub struct ClientStream<Req, Resp> {
    inbound: Inbound,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<Req, Resp> fmt::Debug for ClientStream<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientStream").finish_non_exhaustive()
    }
}

impl<Req, Resp> ClientStream<Req, Resp>
where
    Req: prost::Message + Default + 'static,
    Resp: prost::Message + 'static,
{
    /// The messages go to `handler`, on the worker.
    pub fn on_worker<H: ClientStreamHandler<Req, Resp>>(handler: H) -> ClientStream<Req, Resp> {
        ClientStream {
            inbound: Inbound::Local(Box::new(ClientStreamAdapter {
                handler,
                _types: PhantomData,
            })),
            _types: PhantomData,
        }
    }

    /// The messages go to another thread, which reads them from the
    /// returned [`Streaming`] and answers with the [`Responder`]; return
    /// the stream from the handler and move the other two to the thread.
    /// The response metadata set on `ctx` so far moves to the responder.
    ///
    /// # Panics
    ///
    /// If the call went to another thread already, as
    /// [`Context::defer`].
    pub fn channel(ctx: &mut Context<'_>) -> (ClientStream<Req, Resp>, Streaming<Req>, Responder) {
        let shared = ctx.open_remote();
        let mut responder = Responder::new(shared.clone());
        let (headers, trailers) = ctx.metadata_for_thread();
        *responder.headers_mut() = headers;
        *responder.trailers_mut() = trailers;
        (
            ClientStream {
                inbound: Inbound::Remote,
                _types: PhantomData,
            },
            Streaming::new(shared),
            responder,
        )
    }

    /// The stream without its message types, for generated code.
    #[doc(hidden)]
    pub fn into_raw(self) -> RawInbound {
        RawInbound(self.inbound)
    }
}

/// What a bidirectional-streaming handler returns: who takes the request
/// messages and sends the answers, on the worker ([`BidiStream::on_worker`])
/// or on another thread ([`BidiStream::channel`]).
///
/// ```
/// use pajamax::{BidiHandler, BidiStream, Context, Responses, Status};
///
/// /// Answers each string with its upper case, on the worker.
/// struct Upper;
///
/// impl BidiHandler<String, String> for Upper {
///     fn on_message(
///         &mut self,
///         _ctx: &mut Context<'_>,
///         s: String,
///         responses: &mut Responses<'_, String>,
///     ) -> Result<(), Status> {
///         responses.send(&s.to_uppercase());
///         Ok(())
///     }
/// }
///
/// // `rpc Upper (stream string) returns (stream string)`.
/// fn upper() -> Result<BidiStream<String, String>, Status> {
///     Ok(BidiStream::on_worker(Upper))
/// }
///
/// // The same on a thread of its own, which may block.
/// fn upper_with_context(ctx: &mut Context<'_>) -> Result<BidiStream<String, String>, Status> {
///     let (stream, requests, mut sink) = BidiStream::<String, String>::channel(ctx);
///     std::thread::spawn(move || {
///         for s in requests {
///             let Ok(s) = s else { return }; // a bad message, or the call ended
///             if sink.send(&s.to_uppercase()).is_err() {
///                 return; // the client cancelled, or the deadline passed
///             }
///         }
///         sink.finish(Ok(()));
///     });
///     Ok(stream)
/// }
/// # upper()?;
/// # let md = pajamax::Metadata::new();
/// # let mut response = pajamax::ResponseMetadata::default();
/// # let mut ctx = Context::new(&md, None, None, &mut response);
/// # upper_with_context(&mut ctx)?;
/// # Ok::<(), Status>(())
/// ```
pub struct BidiStream<Req, Resp> {
    inbound: Inbound,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<Req, Resp> fmt::Debug for BidiStream<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BidiStream").finish_non_exhaustive()
    }
}

impl<Req, Resp> BidiStream<Req, Resp>
where
    Req: prost::Message + Default + 'static,
    Resp: prost::Message + 'static,
{
    /// The messages go to `handler`, on the worker.
    pub fn on_worker<H: BidiHandler<Req, Resp>>(handler: H) -> BidiStream<Req, Resp> {
        BidiStream {
            inbound: Inbound::Local(Box::new(BidiAdapter {
                handler,
                _types: PhantomData,
            })),
            _types: PhantomData,
        }
    }

    /// The messages go to another thread, which reads them from the
    /// returned [`Streaming`] and answers through the [`Sink`]; return the
    /// stream from the handler and move the other two to the thread. The
    /// response metadata set on `ctx` so far moves to the sink.
    ///
    /// # Panics
    ///
    /// If the call went to another thread already, as
    /// [`Context::defer`].
    pub fn channel(ctx: &mut Context<'_>) -> (BidiStream<Req, Resp>, Streaming<Req>, Sink<Resp>) {
        let shared = ctx.open_remote();
        let (headers, trailers) = ctx.metadata_for_thread();
        (
            BidiStream {
                inbound: Inbound::Remote,
                _types: PhantomData,
            },
            Streaming::new(shared.clone()),
            Sink::new(shared, headers, trailers),
        )
    }

    /// The stream without its message types, for generated code.
    #[doc(hidden)]
    pub fn into_raw(self) -> RawInbound {
        RawInbound(self.inbound)
    }
}
