//! The per-call context a handler can reach: request metadata, deadline,
//! peer address (and, over TLS, the peer's certificates), and the metadata
//! to send back.

use crate::grpc::metadata::Metadata;
use crate::grpc::remote::{Inbox, Lent, Queued, Responder, Shared, Target};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a handler can learn about its call, and the response metadata it sets.
///
/// Handlers that take no context pay nothing for it: the request metadata is
/// collected only when the request carries some, and the response metadata
/// stays unallocated until a handler adds to it.
pub struct Context<'a> {
    request_metadata: &'a Metadata,
    deadline: Option<Instant>,
    peer: Option<SocketAddr>,
    response: &'a mut ResponseMetadata,
    /// Where the call's parts go back to if it goes to another thread,
    /// with its stream.
    answer_to: Option<(&'a AnswerTo, u32)>,
    /// The call's state shared with another thread, once it was sent
    /// there.
    remote: Option<Arc<Shared>>,
    /// The size of the call's one request message (a unary or
    /// server-streaming call on a connection), counted in the connection's
    /// requests held for threads while another thread holds the call.
    request_bytes: usize,
    /// The request's message was compressed.
    request_compressed: bool,
    /// The handler's choice of compression for the answer.
    compress: Option<bool>,
    /// The certificate chain the TLS client presented.
    #[cfg(feature = "tls")]
    peer_certificates: Option<&'a [rustls::pki_types::CertificateDer<'static>]>,
}

/// What the connection knows of its peer beyond its address: over TLS, the
/// certificates it presented (nothing at all without the `tls` feature).
#[derive(Debug, Default)]
pub(crate) struct PeerIdentity {
    #[cfg(feature = "tls")]
    pub certificates: Option<Box<[rustls::pki_types::CertificateDer<'static>]>>,
}

/// The identity of a peer that presented none.
pub(crate) static NO_IDENTITY: PeerIdentity = PeerIdentity {
    #[cfg(feature = "tls")]
    certificates: None,
};

/// Where the parts of a connection's calls served on other threads go
/// back to, and how much may be on the way.
pub(crate) struct AnswerTo {
    /// The worker's inbox and the connection's id there; `None` for a
    /// connection served without one (no call leaves it).
    pub inbox: Option<(Arc<Inbox>, u64)>,
    /// Answer bytes a sink may have on their way.
    pub credit: usize,
    /// Request bytes that may wait for the thread.
    pub incoming_limit: usize,
    /// The request bytes waiting for the threads of all the connection's
    /// calls, and their limit.
    pub queued: Arc<Queued>,
    /// The answer bytes the sinks of all the connection's calls may have
    /// on their way.
    pub lent: Arc<Lent>,
}

/// The metadata a handler sends back: initial (with the response headers)
/// and trailing (with `grpc-status`).
#[derive(Debug, Default, Clone)]
pub struct ResponseMetadata {
    /// Sent with the response headers.
    pub headers: Metadata,
    /// Sent with the trailers.
    pub trailers: Metadata,
}

impl ResponseMetadata {
    /// Empties both lists, keeping their room.
    pub fn clear(&mut self) {
        self.headers.clear();
        self.trailers.clear();
    }

    /// Whether both lists are empty.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.trailers.is_empty()
    }
}

impl<'a> Context<'a> {
    /// A context over the given call facts.
    ///
    /// ```
    /// use pajamax::{Context, Metadata, ResponseMetadata};
    /// let request = Metadata::new();
    /// let mut response = ResponseMetadata::default();
    /// let mut ctx = Context::new(&request, None, None, &mut response);
    /// ctx.trailers_mut().insert("x-served-by", "test").unwrap();
    /// assert!(ctx.deadline().is_none());
    /// assert_eq!(response.trailers.get("x-served-by"), Some("test"));
    /// ```
    pub fn new(
        request_metadata: &'a Metadata,
        deadline: Option<Instant>,
        peer: Option<SocketAddr>,
        response: &'a mut ResponseMetadata,
    ) -> Context<'a> {
        Context::for_call(
            request_metadata,
            deadline,
            peer,
            &NO_IDENTITY,
            response,
            None,
            false,
        )
    }

    /// A call's context as its connection makes it: every field written
    /// once, in place (a chain of builders that each take and return the
    /// context moves it whole at every step, once per request or message).
    /// `answer_to` lets the call be answered from another thread;
    /// `request_compressed` is for [`Context::request_compressed`].
    #[inline]
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
    pub(crate) fn for_call(
        request_metadata: &'a Metadata,
        deadline: Option<Instant>,
        peer: Option<SocketAddr>,
        identity: &'a PeerIdentity,
        response: &'a mut ResponseMetadata,
        answer_to: Option<(&'a AnswerTo, u32)>,
        request_compressed: bool,
    ) -> Context<'a> {
        Context {
            request_metadata,
            deadline,
            peer,
            response,
            answer_to,
            remote: None,
            request_bytes: 0,
            request_compressed,
            compress: None,
            #[cfg(feature = "tls")]
            peer_certificates: identity.certificates.as_deref(),
        }
    }

    /// Whether the request's message came compressed (`grpc-encoding`
    /// other than `identity`, and the message flagged so).
    pub fn request_compressed(&self) -> bool {
        self.request_compressed
    }

    /// Asks for the answer's messages to be compressed (`true`), or not
    /// (`false`), whatever the server's default
    /// ([`Builder::send_compressed`](crate::Builder::send_compressed)).
    /// Messages are compressed only if the client accepts gzip or deflate
    /// (`grpc-accept-encoding`): with the request's own compression if the
    /// client accepts it, else gzip, else deflate.
    pub fn compress_response(&mut self, compress: bool) {
        self.compress = Some(compress);
    }

    /// The handler's choice of compression, if it made one.
    pub(crate) fn compression_choice(&self) -> Option<bool> {
        self.compress
    }

    /// Takes the call's [`Responder`], to answer later from any thread.
    ///
    /// Once deferred, what the handler returns is ignored: the call is
    /// answered by the responder, or with `INTERNAL` if the responder is
    /// dropped unused. Response metadata set on this context so far moves
    /// to the responder; set more there. (A call refused at once, below,
    /// keeps it: its answer carries it.) Deferring applies to unary calls
    /// and to the end of a client stream ([`ClientStreamHandler::on_end`](
    /// crate::ClientStreamHandler::on_end)); elsewhere, and outside a
    /// running server (a context made with [`Context::new`]), the
    /// responder's answer goes nowhere.
    ///
    /// The request of a deferred unary call counts in its connection's
    /// request bytes waiting for other threads until the responder
    /// answers (or is dropped), up to
    /// [`Builder::max_buffered_request_bytes`](crate::Builder::max_buffered_request_bytes)
    /// (at least one request): past it the call is answered
    /// `RESOURCE_EXHAUSTED` at once, and the responder returned is already
    /// cancelled ([`Responder::is_cancelled`]), so the request need not be
    /// queued for the thread at all.
    ///
    /// # Panics
    ///
    /// If the call went to another thread already (an earlier `defer`, or
    /// a stream's `channel`): a call has one answer. On a server the panic
    /// ends the call with `INTERNAL`, and the first responder or sink sees
    /// it cancelled.
    pub fn defer(&mut self) -> Responder {
        let shared = self.open_remote();
        let mut responder = Responder::new(shared);
        let (headers, trailers) = self.metadata_for_thread();
        *responder.headers_mut() = headers;
        *responder.trailers_mut() = trailers;
        responder
    }

    /// The response metadata set so far, taken for the thread that answers
    /// the call once it went there ([`Context::open_remote`]). A call
    /// refused for lack of room is answered at once on the worker, with
    /// this metadata (an interceptor's, say): it stays, and the thread,
    /// whose answer goes nowhere, gets none.
    pub(crate) fn metadata_for_thread(&mut self) -> (Metadata, Metadata) {
        if self
            .remote
            .as_ref()
            .is_some_and(|shared| shared.is_refused())
        {
            return (Metadata::new(), Metadata::new());
        }
        (
            std::mem::take(&mut self.response.headers),
            std::mem::take(&mut self.response.trailers),
        )
    }

    /// Whether the call was sent to another thread ([`Context::defer`], or
    /// a stream's `channel`).
    pub fn is_deferred(&self) -> bool {
        self.remote.is_some()
    }

    /// The call's request message is `bytes` long: if the call goes to
    /// another thread, the request goes with it.
    #[inline(always)]
    pub(crate) fn set_request_bytes(&mut self, bytes: usize) {
        self.request_bytes = bytes;
    }

    /// Sends the call to another thread: the state it shares with its
    /// worker, or `None` where it cannot go. The request goes with it,
    /// counted in the connection's requests held for threads; without room
    /// there, the call is refused (answered `RESOURCE_EXHAUSTED`, and
    /// cancelled for the thread).
    pub(crate) fn open_remote(&mut self) -> Option<Arc<Shared>> {
        assert!(
            self.remote.is_none(),
            "the call went to another thread already: `defer` or `channel` once per call"
        );
        let (to, stream) = self.answer_to?;
        let (inbox, connection) = to.inbox.as_ref()?;
        let shared = Shared::new(
            Target {
                inbox: inbox.clone(),
                connection: *connection,
                stream,
                credit: to.credit,
                incoming_limit: to.incoming_limit,
                queued: to.queued.clone(),
                lent: to.lent.clone(),
            },
            self.deadline,
        );
        if self.request_bytes > 0 {
            shared.hold_request(self.request_bytes);
        }
        self.remote = Some(shared.clone());
        Some(shared)
    }

    /// The shared state, if the call was sent to another thread.
    pub(crate) fn take_remote(&mut self) -> Option<Arc<Shared>> {
        self.remote.take()
    }

    /// The request's custom headers (not the pseudo-headers, `content-type`,
    /// `content-length`, `te`, `grpc-timeout`, `grpc-encoding` or
    /// `grpc-accept-encoding`).
    ///
    /// They are borrowed for as long as the context lives, not from this
    /// call, so a handler can set response metadata from them without
    /// copying them first:
    ///
    /// ```
    /// use pajamax::{Context, Metadata, ResponseMetadata};
    ///
    /// fn echo_request_id(ctx: &mut Context<'_>) {
    ///     if let Some(id) = ctx.metadata().get("x-request-id") {
    ///         ctx.headers_mut().insert("x-request-id", id).unwrap();
    ///     }
    /// }
    ///
    /// let mut request = Metadata::new();
    /// request.insert("x-request-id", "r-7").unwrap();
    /// let mut response = ResponseMetadata::default();
    /// echo_request_id(&mut Context::new(&request, None, None, &mut response));
    /// assert_eq!(response.headers.get("x-request-id"), Some("r-7"));
    /// ```
    pub fn metadata(&self) -> &'a Metadata {
        self.request_metadata
    }

    /// When the call ends `DEADLINE_EXCEEDED`: the client's `grpc-timeout`,
    /// or the server's [`call_timeout`](crate::Builder::call_timeout) when
    /// that is sooner (a unary or client-streaming call).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The time left before the deadline, zero once it has passed.
    pub fn time_remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// The client's address; `None` for a call on a Unix socket
    /// ([`Builder::bind_unix`](crate::Builder::bind_unix)).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The certificate chain the client presented in the TLS handshake and
    /// the server verified against its client CAs (mutual TLS, see
    /// [`TlsConfig::client_ca_pem`](crate::TlsConfig::client_ca_pem)): the
    /// client's own certificate first, DER-encoded. `None` without TLS,
    /// without client CAs, or for a client that presented no certificate
    /// where that is allowed
    /// ([`TlsConfig::client_auth_optional`](crate::TlsConfig::client_auth_optional)).
    ///
    /// The chain is the one the verification accepted, so a handler can
    /// trust what it reads in it; to read the subject or the subject
    /// alternative names, parse the first certificate with an X.509
    /// crate such as `x509-parser`:
    ///
    /// ```
    /// use pajamax::{Context, Status};
    ///
    /// fn client_id(ctx: &Context<'_>) -> Result<Vec<u8>, Status> {
    ///     match ctx.peer_certificates() {
    ///         // The client's own certificate, DER (`x509_parser::parse_x509_certificate(..)`).
    ///         Some([client, ..]) => Ok(client.to_vec()),
    ///         _ => Err(Status::unauthenticated("a client certificate is required")),
    ///     }
    /// }
    /// ```
    #[cfg(feature = "tls")]
    pub fn peer_certificates(&self) -> Option<&[crate::CertificateDer<'static>]> {
        self.peer_certificates
    }

    /// Metadata sent with the response headers. Entries whose key starts
    /// with `grpc-` never go out: none can be inserted, and request
    /// metadata sent back whole (`ctx.metadata().clone()`) loses the ones
    /// the client sent.
    pub fn headers_mut(&mut self) -> &mut Metadata {
        &mut self.response.headers
    }

    /// Metadata sent with the trailers, beside `grpc-status`; entries
    /// whose key starts with `grpc-` never go out, as with
    /// [`Context::headers_mut`].
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.response.trailers
    }
}
