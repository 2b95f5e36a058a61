//! The interface between the server and generated service code.
//!
//! `pajamax-build` implements [`Service`] for every proto service; users
//! rarely implement it by hand.

use crate::grpc::context::Context;
use crate::grpc::status::Status;
use crate::grpc::streaming::{RawInbound, RawServerStream};

/// How a method's messages flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodKind {
    /// One request, one answer.
    Unary,
    /// One request, a stream of answers.
    ServerStreaming,
    /// A stream of requests, one answer.
    ClientStreaming,
    /// A stream each way.
    BidiStreaming,
}

/// A method of a service, as routed: `/{service}/{name}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Method {
    /// The proto name, such as `SayHello`.
    pub name: &'static str,
    /// How its messages flow; the server calls the [`Service`] entry point
    /// of that kind.
    pub kind: MethodKind,
}

impl Method {
    /// A unary method named `name`.
    pub const fn unary(name: &'static str) -> Method {
        Method {
            name,
            kind: MethodKind::Unary,
        }
    }
}

/// A gRPC service the server can route requests to.
///
/// Routes are `/{name}/{method}` for every entry of [`Service::methods`]; the
/// server resolves a request's `:path` to a method index once and passes that
/// index to the entry point of the method's kind. An entry point a service
/// does not override answers `UNIMPLEMENTED`.
///
/// `pajamax-build` implements it for every proto service (the generated
/// `GreeterServer<T>` wraps your `T: Greeter`), so an application usually
/// only passes one to [`Builder::add_service`](crate::Builder::add_service).
/// By hand, it looks like this: the entry points decode the request, run
/// the handler, and encode its answer.
///
/// ```
/// use pajamax::{Context, Method, MethodKind, RawServerStream, Reply, ServerStream};
/// use pajamax::{Service, Status};
///
/// /// `demo.Counter`: `Next(uint32) returns (uint32)` and
/// /// `UpTo(uint32) returns (stream uint32)`.
/// struct Counter;
///
/// const METHODS: &[Method] = &[
///     Method::unary("Next"),
///     Method { name: "UpTo", kind: MethodKind::ServerStreaming },
/// ];
///
/// impl Service for Counter {
///     fn name(&self) -> &'static str {
///         "demo.Counter"
///     }
///
///     fn methods(&self) -> &'static [Method] {
///         METHODS
///     }
///
///     fn unary(
///         &self,
///         method: usize,
///         _ctx: &mut Context<'_>,
///         request: &[u8],
///         reply: &mut Reply<'_>,
///     ) -> Result<(), Status> {
///         match method {
///             0 => {
///                 let n: u32 = pajamax::decode_request(request)?;
///                 let next = n.checked_add(1).ok_or_else(|| Status::out_of_range("no next"))?;
///                 reply.encode(&next);
///                 Ok(())
///             }
///             _ => Err(Status::unimplemented("no such method")),
///         }
///     }
///
///     fn server_streaming(
///         &self,
///         method: usize,
///         _ctx: &mut Context<'_>,
///         request: &[u8],
///     ) -> Result<RawServerStream, Status> {
///         match method {
///             1 => {
///                 let to: u32 = pajamax::decode_request(request)?;
///                 Ok(ServerStream::iter((1..=to).map(Ok)).into_raw())
///             }
///             _ => Err(Status::unimplemented("no such method")),
///         }
///     }
/// }
///
/// // Served as `/demo.Counter/Next` and `/demo.Counter/UpTo`:
/// let builder = pajamax::Server::builder().add_service(Counter);
/// assert_eq!(builder.service_names(), ["demo.Counter"]);
///
/// // The entry points can be called directly, as the server does.
/// let metadata = pajamax::Metadata::new();
/// let mut response = pajamax::ResponseMetadata::default();
/// let mut ctx = Context::new(&metadata, None, None, &mut response);
/// let mut answer = Vec::new();
/// Counter.unary(0, &mut ctx, &[0x08, 41], &mut Reply::new(&mut answer))?;
/// assert_eq!(answer, [0x08, 42]);
/// # Ok::<(), Status>(())
/// ```
pub trait Service: Send + Sync + 'static {
    /// The fully qualified service name, such as `helloworld.Greeter`.
    fn name(&self) -> &'static str;

    /// The methods; a method's index in this list is what the entry points
    /// receive.
    fn methods(&self) -> &'static [Method];

    /// Decodes `request` (one message, without its 5-byte prefix), runs the
    /// handler of unary method number `method` and encodes its answer into
    /// `reply`.
    fn unary(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        let _ = (ctx, request, reply);
        Err(no_entry(self.name(), method))
    }

    /// Decodes `request` and runs the handler of server-streaming method
    /// number `method`: the stream of answers.
    fn server_streaming(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let _ = (ctx, request);
        Err(no_entry(self.name(), method))
    }

    /// Runs the handler of client-streaming method number `method`, when
    /// the call starts: what takes the request messages.
    fn client_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        let _ = ctx;
        Err(no_entry(self.name(), method))
    }

    /// Runs the handler of bidirectional method number `method`, when the
    /// call starts: what takes the request messages and answers.
    fn bidi_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        let _ = ctx;
        Err(no_entry(self.name(), method))
    }
}

fn no_entry(service: &str, method: usize) -> Status {
    Status::unimplemented(format!("{service} has no such method (number {method})"))
}

/// Where a handler's answer message is encoded.
///
/// Generated code calls [`Reply::encode`] with the handler's result.
pub struct Reply<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> Reply<'a> {
    /// A reply that encodes into `buf`, replacing what it holds.
    pub fn new(buf: &'a mut Vec<u8>) -> Reply<'a> {
        buf.clear();
        Reply { buf, start: 0 }
    }

    /// A reply that goes after what `buf` holds, which ends with the room
    /// for the 5-byte message prefix: the framed message is contiguous.
    pub(crate) fn after_prefix_room(buf: &'a mut Vec<u8>) -> Reply<'a> {
        let start = buf.len();
        Reply { buf, start }
    }

    /// Encodes `message` as the call's answer, replacing an earlier one.
    ///
    /// ```
    /// let mut buf = Vec::new();
    /// let mut reply = pajamax::Reply::new(&mut buf);
    /// reply.encode(&42u32);
    /// assert_eq!(buf, [0x08, 42]);
    /// ```
    pub fn encode<M: prost::Message>(&mut self, message: &M) {
        self.buf.truncate(self.start);
        // No `encoded_len` to size the buffer first: it walks the whole
        // message, and the buffer is kept from call to call.
        message.encode_raw(self.buf);
    }
}

/// Decodes a request message, mapping a malformed one to `INTERNAL` (as
/// tonic and grpc-go answer a request that does not parse).
///
/// ```
/// let n: u32 = pajamax::decode_request(&[0x08, 7]).unwrap();
/// assert_eq!(n, 7);
/// let err = pajamax::decode_request::<u32>(&[0x08]).unwrap_err();
/// assert_eq!(err.code(), pajamax::Code::Internal);
/// ```
pub fn decode_request<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, Status> {
    let mut message = M::default();
    decode_request_into(&mut message, bytes)?;
    Ok(message)
}

/// Decodes a request message into `message` (a default one), mapping a
/// malformed one to `INTERNAL`: as [`decode_request`], but the
/// message is built where it is kept instead of being returned and moved
/// there (what generated code calls).
///
/// ```
/// let mut n = 0u32;
/// pajamax::decode_request_into(&mut n, &[0x08, 7]).unwrap();
/// assert_eq!(n, 7);
/// let mut m = 0u32;
/// let err = pajamax::decode_request_into(&mut m, &[0x08]).unwrap_err();
/// assert_eq!(err.code(), pajamax::Code::Internal);
/// ```
pub fn decode_request_into<M: prost::Message>(message: &mut M, bytes: &[u8]) -> Result<(), Status> {
    crate::grpc::decode::merge(message, bytes)
}
