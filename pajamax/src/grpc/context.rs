//! The per-call context a handler can reach: request metadata, deadline,
//! peer address, and the metadata to send back.

use crate::grpc::deferred::{Inbox, Responder};
use crate::grpc::metadata::Metadata;
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
    answer_to: Option<(&'a Arc<Inbox>, u64, u32)>,
    deferred: bool,
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
}

impl<'a> Context<'a> {
    /// A context over the given call facts.
    ///
    /// ```
    /// use pajamax::grpc::context::{Context, ResponseMetadata};
    /// use pajamax::grpc::metadata::Metadata;
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
        Context {
            request_metadata,
            deadline,
            peer,
            response,
            answer_to: None,
            deferred: false,
        }
    }

    /// Lets [`Context::defer`] send answers to `inbox`, for `stream` of
    /// `connection`.
    pub(crate) fn answer_to(mut self, inbox: &'a Arc<Inbox>, connection: u64, stream: u32) -> Self {
        self.answer_to = Some((inbox, connection, stream));
        self
    }

    /// Takes the call's [`Responder`], to answer later from any thread.
    ///
    /// Once deferred, what the handler returns is ignored: the call is
    /// answered by the responder, or with `INTERNAL` if the responder is
    /// dropped unused. Response metadata set on this context is not sent;
    /// set trailers on the responder instead. Outside a running server (a
    /// context made with [`Context::new`]) the responder's answer goes
    /// nowhere.
    pub fn defer(&mut self) -> Responder {
        self.deferred = true;
        match self.answer_to {
            Some((inbox, connection, stream)) => Responder::new(inbox.clone(), connection, stream),
            None => Responder::detached(),
        }
    }

    /// Whether [`Context::defer`] was called.
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// The request's custom headers (not the pseudo-headers, `content-type`,
    /// `te`, `grpc-timeout` or `grpc-encoding`).
    pub fn metadata(&self) -> &Metadata {
        self.request_metadata
    }

    /// When the client gives up, from its `grpc-timeout`.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The time left before the deadline, zero once it has passed.
    pub fn time_remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// The client's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Metadata sent with the response headers.
    pub fn headers_mut(&mut self) -> &mut Metadata {
        &mut self.response.headers
    }

    /// Metadata sent with the trailers, beside `grpc-status`.
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.response.trailers
    }
}
