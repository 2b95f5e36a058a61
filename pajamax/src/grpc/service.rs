//! The interface between the server and generated service code.
//!
//! `pajamax-build` implements [`Service`] for every proto service; users
//! rarely implement it by hand.

use crate::grpc::context::Context;
use crate::grpc::status::Status;

/// A gRPC service the server can route requests to.
///
/// Routes are `/{name}/{method}` for every entry of [`Service::methods`]; the
/// server resolves a request's `:path` to a method index once and passes that
/// index to [`Service::call`].
pub trait Service: Send + Sync + 'static {
    /// The fully qualified service name, such as `helloworld.Greeter`.
    fn name(&self) -> &'static str;

    /// The method names, such as `["SayHello"]`; a method's index in this list
    /// is what [`Service::call`] receives.
    fn methods(&self) -> &'static [&'static str];

    /// Decodes `request` (one message, without its 5-byte prefix), runs the
    /// handler of method number `method` and encodes its answer into `reply`.
    fn call(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status>;
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

    /// A reply that leaves room for the 5-byte message prefix at the front
    /// of `buf`, so the framed message is contiguous.
    pub(crate) fn with_prefix_room(buf: &'a mut Vec<u8>) -> Reply<'a> {
        buf.clear();
        buf.extend_from_slice(&[0; 5]);
        Reply { buf, start: 5 }
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
        self.buf.reserve(message.encoded_len());
        message.encode_raw(self.buf);
    }
}

/// Decodes a request message, mapping a malformed one to `INVALID_ARGUMENT`.
///
/// ```
/// let n: u32 = pajamax::decode_request(&[0x08, 7]).unwrap();
/// assert_eq!(n, 7);
/// let err = pajamax::decode_request::<u32>(&[0x08]).unwrap_err();
/// assert_eq!(err.code(), pajamax::Code::InvalidArgument);
/// ```
pub fn decode_request<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, Status> {
    M::decode(bytes).map_err(Status::from)
}
