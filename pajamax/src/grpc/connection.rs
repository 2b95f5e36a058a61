//! gRPC calls on top of one HTTP/2 connection, sans I/O.
//!
//! [`GrpcConnection::recv`] takes the bytes of one read, runs the handler of
//! every request they complete, and leaves all the answers in
//! [`GrpcConnection::output`], to leave in one write.

use crate::fast_hash::BuildStreamIdHasher;
use crate::grpc::context::{Context, ResponseMetadata};
use crate::grpc::deferred::{Answer, Inbox};
use crate::grpc::metadata::Metadata;
use crate::grpc::router::{Route, Router};
use crate::grpc::service::Reply;
use crate::grpc::status::{Code, Status};
use crate::grpc::{percent, timeout};
use crate::h2::connection::{Connection, Event, Field};
use crate::h2::frame::Reason;
use crate::h2::Config as H2Config;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Limits of the gRPC layer, with the HTTP/2 ones beneath.
#[derive(Debug, Clone)]
pub struct GrpcConfig {
    /// The largest request message accepted; a larger one is answered with
    /// RESOURCE_EXHAUSTED. Default 4 MiB.
    pub max_recv_message_size: usize,
    /// Bytes of incomplete request messages one connection may buffer over
    /// all its calls; a call whose data would pass it is answered with
    /// RESOURCE_EXHAUSTED. Default 64 MiB.
    pub max_buffered_request_bytes: usize,
    /// HTTP/2 settings and limits.
    pub h2: H2Config,
}

impl Default for GrpcConfig {
    fn default() -> GrpcConfig {
        GrpcConfig {
            max_recv_message_size: 4 << 20,
            max_buffered_request_bytes: 64 << 20,
            h2: H2Config::default(),
        }
    }
}

/// Length of the Length-Prefixed-Message header: a compressed flag and a
/// 32-bit big-endian length.
const PREFIX_LEN: usize = 5;

/// The state of one request until its handler runs.
#[derive(Default)]
struct Call {
    /// `None` for a request that is not gRPC: its body is discarded and it
    /// gets an HTTP 415 once complete.
    route: Option<Route>,
    buf: Vec<u8>,
    metadata: Metadata,
    deadline: Option<Instant>,
}

/// The gRPC server side of one connection.
pub struct GrpcConnection {
    h2: Connection,
    router: Arc<Router>,
    max_message: usize,
    max_buffered: usize,
    /// Bytes in the calls' buffers now.
    buffered: usize,
    peer: Option<SocketAddr>,
    calls: HashMap<u32, Call, BuildStreamIdHasher>,
    spare: Vec<Call>,
    events: Vec<Event>,
    reply: Vec<u8>,
    response_metadata: ResponseMetadata,
    text: Vec<u8>,
    /// Where deferred answers come back, and this connection's id there.
    inbox: Option<(Arc<Inbox>, u64)>,
}

const NOT_GRPC_BODY: &[u8] = b"pajamax serves gRPC: send POST with content-type application/grpc\n";

impl GrpcConnection {
    /// A connection serving the routes of `router`, for a client at `peer`.
    pub fn new(
        router: Arc<Router>,
        config: &GrpcConfig,
        peer: Option<SocketAddr>,
    ) -> GrpcConnection {
        GrpcConnection {
            h2: Connection::new(config.h2.clone()),
            router,
            max_message: config.max_recv_message_size,
            max_buffered: config.max_buffered_request_bytes,
            buffered: 0,
            peer,
            calls: HashMap::default(),
            spare: Vec::new(),
            events: Vec::new(),
            reply: Vec::new(),
            response_metadata: ResponseMetadata::default(),
            text: Vec::new(),
            inbox: None,
        }
    }

    /// Lets handlers defer their answers: they come back through `inbox`
    /// tagged with `connection`, and are given to [`GrpcConnection::deliver`].
    pub fn set_inbox(&mut self, inbox: Arc<Inbox>, connection: u64) {
        self.inbox = Some((inbox, connection));
    }

    /// Sends a deferred answer; dropped if its stream is gone.
    pub(crate) fn deliver(&mut self, answer: Answer) {
        if !self.h2.is_stream_open(answer.stream) {
            return;
        }
        self.response_metadata.clear();
        self.response_metadata.trailers = answer.trailers;
        match answer.result {
            Ok(framed) => {
                // Send from the answer's buffer, keeping the reply buffer
                // (and its capacity) for the calls answered inline.
                let inline = std::mem::replace(&mut self.reply, framed);
                self.answer_message(answer.stream);
                self.reply = inline;
            }
            Err(status) => self.answer_status(answer.stream, &status),
        }
    }

    /// The HTTP/2 connection beneath.
    pub fn h2(&self) -> &Connection {
        &self.h2
    }

    /// Bytes waiting to be written to the socket.
    pub fn output(&self) -> &[u8] {
        self.h2.output()
    }

    /// Reports that the first `n` bytes of [`GrpcConnection::output`] were written.
    pub fn advance_output(&mut self, n: usize) {
        self.h2.advance_output(n);
    }

    /// Whether the connection is finished (see [`Connection::is_closed`]).
    pub fn is_closed(&self) -> bool {
        self.h2.is_closed()
    }

    /// Whether the client's preface and first SETTINGS have arrived.
    pub fn handshake_done(&self) -> bool {
        self.h2.handshake_done()
    }

    /// Whether no request is open: the connection is idle.
    pub fn is_idle(&self) -> bool {
        self.h2.open_streams() == 0
    }

    /// Starts a graceful shutdown: GOAWAY, then open calls finish.
    pub fn go_away(&mut self) {
        self.h2.go_away();
    }

    /// Closes the connection with a GOAWAY carrying `reason`.
    pub fn close(&mut self, reason: Reason, message: &'static str) {
        self.h2.close(reason, message);
    }

    /// Processes the complete frames at the start of `input`, runs every
    /// request they complete, and returns how many bytes it used. `now` is
    /// the time the bytes were read, for deadlines.
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        let used = self.h2.recv(input, &mut events);
        for event in events.drain(..) {
            match event {
                Event::Request {
                    stream,
                    fields,
                    end_stream,
                    too_large,
                } => self.on_request(stream, fields, end_stream, too_large, now),
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => self.on_data(stream, &input[data], end_stream, now),
                Event::Reset { stream } => {
                    if let Some(call) = self.take_call(stream) {
                        self.recycle(call);
                    }
                }
            }
        }
        self.events = events;
        used
    }

    fn on_request(
        &mut self,
        stream: u32,
        fields: std::ops::Range<usize>,
        end_stream: bool,
        too_large: bool,
        now: Instant,
    ) {
        if too_large {
            let status = Status::resource_exhausted("request header list too large");
            return self.answer_status(stream, &status);
        }
        let mut call = self.spare.pop().unwrap_or_default();
        let mut method_post = false;
        let mut is_grpc = false;
        let mut path: &[u8] = b"";
        let mut encoding_ok = true;
        for (name, value) in self.h2.fields().iter(fields) {
            match name {
                b":method" => method_post = value == b"POST",
                b":path" => path = value,
                b"content-type" => is_grpc = is_grpc_content_type(value),
                b"grpc-timeout" => {
                    call.deadline = timeout::parse(value).and_then(|d| now.checked_add(d))
                }
                b"grpc-encoding" => encoding_ok = value == b"identity",
                b"te" | b"grpc-accept-encoding" => {}
                _ if name.starts_with(b":") => {}
                _ => call.metadata.push(name, value),
            }
        }
        if !(method_post && is_grpc) {
            call.route = None;
        } else {
            match self.router.route(path) {
                Some(route) => call.route = Some(route),
                None => {
                    let status = unimplemented_status(&self.router, path);
                    self.recycle(call);
                    return self.answer_status(stream, &status);
                }
            }
            if !encoding_ok {
                self.recycle(call);
                let status =
                    Status::unimplemented("message compression is not supported; use identity");
                return self.answer_status(stream, &status);
            }
        }
        if end_stream {
            return self.finish(stream, call, now);
        }
        self.calls.insert(stream, call);
    }

    fn on_data(&mut self, stream: u32, data: &[u8], end_stream: bool, now: Instant) {
        let Some(call) = self.calls.get_mut(&stream) else {
            return;
        };
        if call.route.is_some() {
            if call.buf.is_empty()
                && end_stream
                && message_len(data) == Some(data.len())
                && check_buffered(data, self.max_message).is_none()
            {
                // The whole message is in this frame: no copy.
                let call = self.take_call(stream).expect("found above");
                self.run(stream, &call, &data[PREFIX_LEN..], now);
                return self.recycle(call);
            }
            if self.buffered + data.len() > self.max_buffered {
                let call = self.take_call(stream).expect("found above");
                self.recycle(call);
                let status = Status::resource_exhausted(
                    "the connection buffers too many incomplete requests",
                );
                return self.answer_status(stream, &status);
            }
            call.buf.extend_from_slice(data);
            self.buffered += data.len();
            if let Some(problem) = check_buffered(&call.buf, self.max_message) {
                let call = self.take_call(stream).expect("found above");
                self.recycle(call);
                return self.answer_status(stream, &problem);
            }
        }
        if end_stream {
            let call = self.take_call(stream).expect("found above");
            self.finish(stream, call, now);
        }
    }

    /// The client is done sending: answer with what it sent.
    fn finish(&mut self, stream: u32, call: Call, now: Instant) {
        if call.route.is_none() {
            self.answer_not_grpc(stream);
        } else if call.buf.is_empty() {
            self.answer_status(
                stream,
                &Status::internal("unary call without a request message"),
            );
        } else if message_len(&call.buf) == Some(call.buf.len()) {
            self.run(stream, &call, &call.buf[PREFIX_LEN..], now);
        } else {
            self.answer_status(stream, &Status::internal("request message truncated"));
        }
        self.recycle(call);
    }

    fn run(&mut self, stream: u32, call: &Call, message: &[u8], now: Instant) {
        let route = call.route.expect("only gRPC calls run");
        if call.deadline.is_some_and(|deadline| deadline <= now) {
            return self.answer_status(
                stream,
                &Status::deadline_exceeded("deadline passed before the call started"),
            );
        }
        self.response_metadata.clear();
        let service = self.router.service(route.service);
        let mut ctx = Context::new(
            &call.metadata,
            call.deadline,
            self.peer,
            &mut self.response_metadata,
        );
        if let Some((inbox, connection)) = &self.inbox {
            ctx = ctx.answer_to(inbox, *connection, stream);
        }
        let mut reply = Reply::with_prefix_room(&mut self.reply);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            service.call(route.method, &mut ctx, message, &mut reply)
        }));
        if ctx.is_deferred() && outcome.is_ok() {
            return;
        }
        let status = match outcome {
            Ok(Ok(())) => {
                let len = (self.reply.len() - PREFIX_LEN) as u32;
                self.reply[1..PREFIX_LEN].copy_from_slice(&len.to_be_bytes());
                return self.answer_message(stream);
            }
            Ok(Err(status)) => status,
            Err(_) => {
                log::error!("handler of stream {stream} panicked");
                Status::internal("handler panicked")
            }
        };
        self.answer_status(stream, &status);
    }

    fn answer_message(&mut self, stream: u32) {
        let md = &self.response_metadata;
        if md.headers.is_empty() {
            self.h2.send_headers(stream, &SUCCESS_HEADERS, false);
        } else {
            let mut fields = SUCCESS_HEADERS.to_vec();
            fields.extend(
                md.headers
                    .iter()
                    .map(|(name, value)| Field::literal(name.as_bytes(), value)),
            );
            self.h2.send_headers(stream, &fields, false);
        }
        self.h2.send_data(stream, &self.reply, false);
        if md.trailers.is_empty() {
            self.h2
                .send_trailers(stream, &[Field::indexed(b"grpc-status", b"0")]);
        } else {
            let mut fields = vec![Field::indexed(b"grpc-status", b"0")];
            fields.extend(
                md.trailers
                    .iter()
                    .map(|(name, value)| Field::literal(name.as_bytes(), value)),
            );
            self.h2.send_trailers(stream, &fields);
        }
    }

    /// A trailers-only answer carrying `status`, with any metadata the
    /// handler set.
    fn answer_status(&mut self, stream: u32, status: &Status) {
        self.text.clear();
        percent::encode(status.message(), &mut self.text);
        let mut fields = vec![
            SUCCESS_HEADERS[0],
            SUCCESS_HEADERS[1],
            Field::indexed(b"grpc-status", status.code().as_str().as_bytes()),
            Field::literal(b"grpc-message", &self.text),
        ];
        if status.code() == Code::Unimplemented {
            fields.push(Field::indexed(b"grpc-accept-encoding", b"identity"));
        }
        let md = &self.response_metadata;
        for (name, value) in md.headers.iter().chain(md.trailers.iter()) {
            fields.push(Field::literal(name.as_bytes(), value));
        }
        self.h2.send_headers(stream, &fields, true);
        self.response_metadata.clear();
    }

    fn answer_not_grpc(&mut self, stream: u32) {
        let headers = [
            Field::indexed(b":status", b"415"),
            Field::indexed(b"content-type", b"text/plain"),
        ];
        self.h2.send_headers(stream, &headers, false);
        self.h2.send_data(stream, NOT_GRPC_BODY, true);
    }

    /// Bytes of incomplete requests buffered now.
    pub fn buffered_request_bytes(&self) -> usize {
        self.buffered
    }

    fn take_call(&mut self, stream: u32) -> Option<Call> {
        let call = self.calls.remove(&stream)?;
        self.buffered -= call.buf.len();
        Some(call)
    }

    fn recycle(&mut self, mut call: Call) {
        if self.spare.len() < 64 && call.buf.capacity() <= 64 << 10 {
            call.buf.clear();
            call.metadata.clear();
            call.deadline = None;
            call.route = None;
            self.spare.push(call);
        }
    }
}

const SUCCESS_HEADERS: [Field<'static>; 2] = [
    Field {
        name: b":status",
        value: b"200",
        indexing: crate::h2::hpack::Indexing::Incremental,
    },
    Field {
        name: b"content-type",
        value: b"application/grpc",
        indexing: crate::h2::hpack::Indexing::Incremental,
    },
];

/// `application/grpc`, optionally followed by `+format` or `;parameters`.
fn is_grpc_content_type(value: &[u8]) -> bool {
    match value.strip_prefix(b"application/grpc") {
        Some(rest) => rest.is_empty() || rest[0] == b'+' || rest[0] == b';',
        None => false,
    }
}

/// The total length (prefix included) of the message that `buf` starts with.
fn message_len(buf: &[u8]) -> Option<usize> {
    let prefix = buf.get(..PREFIX_LEN)?;
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    Some(PREFIX_LEN + len)
}

/// What is wrong with a partly received unary request, if anything.
fn check_buffered(buf: &[u8], max_message: usize) -> Option<Status> {
    let total = message_len(buf)?;
    if buf[0] != 0 {
        return Some(Status::internal("compressed message without grpc-encoding"));
    }
    if total - PREFIX_LEN > max_message {
        return Some(Status::resource_exhausted(format!(
            "request message of {} bytes is larger than the limit of {max_message}",
            total - PREFIX_LEN
        )));
    }
    if buf.len() > total {
        return Some(Status::internal(
            "more than one request message in a unary call",
        ));
    }
    None
}

fn unimplemented_status(router: &Router, path: &[u8]) -> Status {
    // The path is the peer's: echo at most a short prefix of it, so a long
    // path (cheap to resend through the HPACK table) is not amplified.
    const ECHOED: usize = 128;
    let path = &path[..path.len().min(ECHOED)];
    let text = String::from_utf8_lossy(path);
    let service = path
        .strip_prefix(b"/")
        .and_then(|p| p.split(|&b| b == b'/').next())
        .unwrap_or(b"");
    if router.has_service(service) {
        Status::unimplemented(format!("unknown method {text}"))
    } else {
        Status::unimplemented(format!(
            "unknown service {}",
            String::from_utf8_lossy(service)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_are_echoed_short() {
        let router = Router::new();
        let long = format!("/{}/Method", "s".repeat(4000));
        let status = unimplemented_status(&router, long.as_bytes());
        assert_eq!(status.code(), Code::Unimplemented);
        assert!(status.message().len() < 160, "{}", status.message().len());
        let status = unimplemented_status(&router, b"/pkg.Svc/Do");
        assert_eq!(status.message(), "unknown service pkg.Svc");
    }
}
