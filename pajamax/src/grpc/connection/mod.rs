//! gRPC calls on top of one HTTP/2 connection, sans I/O.
//!
//! [`GrpcConnection`] turns the HTTP/2 events of each read into call events
//! and coordinates the calls: a unary call whose request is complete runs
//! at once (its message decoded straight from the input when it came in one
//! frame); streaming calls keep their state ([`call`](super::call)) and are
//! served on the worker or on another thread. Running handler code is the
//! executor's part, framing the messages `framing`'s, encoding the answers
//! `response`'s.
//!
//! Call order, as the runtime drives it:
//! 1. [`GrpcConnection::recv`] with the bytes of a read;
//! 2. [`GrpcConnection::deliver`] for each answer part that came back from
//!    other threads, then [`GrpcConnection::settle`];
//! 3. [`GrpcConnection::handle_timeout`] once [`GrpcConnection::poll_timeout`]
//!    has come;
//! 4. write [`GrpcConnection::output`], report it with
//!    [`GrpcConnection::advance_output`], and call
//!    [`GrpcConnection::produce`] while [`GrpcConnection::wants_to_produce`]
//!    and the socket takes more.
//!
//! This file holds the connection's state and getters, the call table and
//! small helpers; each other kind of work is a file of its own (the tests
//! in `tests`): `input` (the reading of requests: each read's events turned
//! into calls), `single` (calls with one request message), `streamed` (calls with a stream of
//! them), `producers` (server streams pulled on the worker), `threads`
//! (answers from other threads, and the end of each step), `time`
//! (deadlines and pacing), `commands` (the runtime's: GOAWAY, closing, the
//! output written) and `answers` (unary answers and calls ended).

mod answers;
mod commands;
mod input;
mod producers;
mod single;
mod streamed;
mod threads;
mod time;

#[cfg(test)]
mod tests;

use crate::grpc::bodies::BodiesAhead;
use crate::grpc::call::{self, Call, RememberedHeads, RemoteCall, SharedHead, State, Waiting};
use crate::grpc::clock::Clock;
use crate::grpc::compression::{self, Encoding};
use crate::grpc::context::{AnswerTo, Context, PeerIdentity, ResponseMetadata};
use crate::grpc::executor;
use crate::grpc::framing::{self, PREFIX_LEN};
use crate::grpc::head;
use crate::grpc::intercept::FinishedCall;
use crate::grpc::metadata::Metadata;
use crate::grpc::remote::{CancelReason, Delivery, Inbox, Lent, Offered, Part, Queued};
use crate::grpc::response::{self, NotGrpc};
use crate::grpc::router::{Route, Router};
use crate::grpc::service::MethodKind;
use crate::grpc::status::{Code, Status};
use crate::grpc::streaming::{Inbound, Outgoing, Production, RawNext};
use crate::grpc::timers::Timers;
use crate::grpc::waiting::WaitingCalls;
use crate::h2::connection::{Connection, Event, MAX_EVENTS_PER_RECV};
use crate::h2::fields::FieldKind;
use crate::h2::frame::Reason;
use crate::h2::Config as H2Config;
use crate::stream_map::StreamMap;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Limits of the gRPC layer, with the HTTP/2 ones beneath.
#[derive(Debug, Clone)]
pub struct GrpcConfig {
    /// The largest request message accepted; a larger one is answered with
    /// RESOURCE_EXHAUSTED. Default 4 MiB.
    pub max_recv_message_size: usize,
    /// Bytes of request messages one connection may hold over all its
    /// calls (incomplete ones, and complete ones a handler has not taken
    /// yet); a call whose data would pass it is answered with
    /// RESOURCE_EXHAUSTED. The messages queued for handlers on other
    /// threads are bounded apart by as much (past it, the worker takes no
    /// more for them and their clients' windows stay shut). Default 64 MiB.
    pub max_buffered_request_bytes: usize,
    /// Bytes of request metadata (as HPACK counts a header list) the open
    /// calls of one connection may hold together; a request whose metadata
    /// would pass it is refused (RST_STREAM with REFUSED_STREAM, which a
    /// client may retry). Without it, thousands of half-open streams, each
    /// with a header list near `max_header_list_size` made of a few bytes
    /// that refer to the HPACK table, would hold that many times as much.
    /// Only the metadata a call holds of its own counts: a request whose
    /// header block repeats one the connection remembers (a few at a time)
    /// shares that block's decoded metadata and adds nothing to it.
    /// Default 16 MiB: 4 KiB for each of 4096 streams, so that calls with
    /// large tokens at the default `max_concurrent_streams` are not
    /// refused.
    pub max_request_metadata_bytes: usize,
    /// Answer bytes that may wait in the output before producers on the
    /// worker stop being pulled until it is written; four times it is the
    /// answer bytes the sinks of one connection's calls on other threads
    /// may have on their way together (at least a stream's send buffer).
    /// Default 1 MiB.
    pub produce_output_limit: usize,
    /// Answers are compressed when the client accepts gzip or deflate
    /// (with the request's own compression if the client accepts it, else
    /// gzip, else deflate), unless the handler decides otherwise
    /// ([`Context::compress_response`](crate::Context::compress_response)).
    /// Default `false`.
    pub send_compressed: bool,
    /// The longest deadline a unary or client-streaming call gets, and a
    /// server-streaming call until its request message is in: a request
    /// without `grpc-timeout` is given this one, a request with a longer
    /// one this one instead. Default `None`: only the client's.
    pub call_timeout: Option<Duration>,
    /// HTTP/2 settings and limits.
    pub h2: H2Config,
}

impl Default for GrpcConfig {
    fn default() -> GrpcConfig {
        GrpcConfig {
            max_recv_message_size: 4 << 20,
            max_buffered_request_bytes: 64 << 20,
            max_request_metadata_bytes: 16 << 20,
            produce_output_limit: 1 << 20,
            send_compressed: false,
            call_timeout: None,
            h2: H2Config::default(),
        }
    }
}

/// A unary call being run: in its box, or, for a repeated header block
/// whose whole body came at once, as its light record (a box is taken only
/// if the handler answers from another thread).
enum Running {
    Boxed(Box<Call>),
    Light(Waiting),
}

/// The most boxes of finished calls a connection keeps for the next ones:
/// enough for the calls that need a box at once (streams, and requests
/// whose header block is new), not for every stream a burst opened.
const MAX_SPARE_CALLS: usize = 64;

/// How many answer bytes a producer on the worker makes in one turn before
/// the next producer's turn.
const PRODUCE_CHUNK: usize = 16 << 10;

/// The payload of the server's keepalive PINGs.
const KEEPALIVE_PING: &[u8; 8] = b"pjmx-ka!";

/// The answer bytes the sinks of one connection's calls may have on their
/// way together, in units of `produce_output_limit`: with one unit, 256
/// sinks feeding a client that reads moved a GiB about 1.6 times slower
/// than with no limit; with four, as fast.
const LENT_PER_PRODUCE_LIMIT: usize = 4;

/// The most room a connection keeps between reads for inflating request
/// messages, deflating answers, and making a unary answer, streamed
/// messages or a streaming handler's answers apart from the output.
const KEPT_COMPRESSION_ROOM: usize = 64 << 10;

/// The most room the buffers of the boxes a connection keeps for the next
/// calls hold together after the worker's sweep.
const KEPT_SPARE_ROOM: usize = 64 << 10;

/// The most room a connection keeps after the worker's sweep for the
/// percent-encoded message and details of a status.
const KEPT_TEXT: usize = 4 << 10;

/// The most room a connection's own list of h2 events keeps between reads
/// ([`GrpcConnection::recv`]).
const KEPT_EVENTS: usize = 32;

/// Room that a caller serving many connections in turn lends to each while
/// it is served ([`GrpcConnection::lend_room`]): one large room for all of
/// them, instead of each growing in every burst and shrinking after it.
#[derive(Debug, Default)]
pub struct SpareRoom {
    output: Vec<u8>,
    /// The h2 events of one read, for every connection the worker serves
    /// (`GrpcConnection::recv_at`): a list that lives for the read only,
    /// never lent, never taken back.
    events: Vec<Event>,
}

impl SpareRoom {
    /// The list for the events of a read.
    pub(crate) fn events(&mut self) -> &mut Vec<Event> {
        &mut self.events
    }

    /// Lets go of room above `max` bytes of output, and of room for more
    /// events than one read makes in the usual way
    /// ([`MAX_EVENTS_PER_RECV`](crate::h2::connection::MAX_EVENTS_PER_RECV);
    /// a window opening for many blocked streams makes more): a busy caller
    /// grows it again at once, a quiet one does not hold its largest burst
    /// for good.
    pub fn trim(&mut self, max: usize) {
        if self.output.capacity() > max {
            self.output = Vec::new();
        }
        if self.events.capacity() > MAX_EVENTS_PER_RECV {
            self.events = Vec::new();
        }
    }
}

/// What the context of every call takes from its connection.
struct CallEnv {
    peer: Option<SocketAddr>,
    /// Over TLS, the certificates the client presented.
    peer_identity: PeerIdentity,
    /// Where answers from other threads come back.
    answer_to: AnswerTo,
}

impl CallEnv {
    /// The context of `call`, on `stream` (see [`CallEnv::context`]).
    #[inline]
    fn call_context<'a>(
        &'a self,
        stream: u32,
        call: &'a mut Call,
        remote: bool,
        compressed: bool,
    ) -> Context<'a> {
        let metadata = call::request_metadata(&call.shared, &call.metadata);
        self.context(
            stream,
            metadata,
            call.deadline,
            &mut call.response,
            remote,
            compressed,
        )
    }

    /// The context of the call on `stream`; with `remote` its handler may
    /// take the call to another thread. `compressed`: the request's message
    /// came compressed.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn context<'a>(
        &'a self,
        stream: u32,
        metadata: &'a Metadata,
        deadline: Option<Instant>,
        response: &'a mut ResponseMetadata,
        remote: bool,
        compressed: bool,
    ) -> Context<'a> {
        let answer_to =
            (remote && self.answer_to.inbox.is_some()).then_some((&self.answer_to, stream));
        Context::for_call(
            metadata,
            deadline,
            self.peer,
            &self.peer_identity,
            response,
            answer_to,
            compressed,
        )
    }
}

/// The gRPC server side of one connection.
pub struct GrpcConnection {
    h2: Connection,
    router: Arc<Router>,
    max_message: usize,
    max_buffered: usize,
    produce_limit: usize,
    /// Answers are compressed unless the handler says otherwise.
    send_compressed: bool,
    /// The longest deadline of a call ([`GrpcConfig::call_timeout`]).
    call_timeout: Option<Duration>,
    /// Room for an inflated request message, and for deflated answers.
    inflated: Vec<u8>,
    deflated: Vec<u8>,
    /// Answer bytes the connection may hold for the client's windows before
    /// producers stop being pulled: at least 1, so that producers are
    /// pulled while nothing is held.
    max_held: usize,
    /// Request bytes the calls hold now.
    buffered: usize,
    /// Request metadata bytes the open calls hold now, and their limit.
    metadata_bytes: usize,
    max_metadata: usize,
    /// What every call's context takes from the connection.
    env: CallEnv,
    /// What the deadlines of waiting calls count from.
    epoch: Instant,
    /// Boxed, so that a call moves as a pointer on the way from its
    /// headers to its answer.
    calls: StreamMap<Box<Call>>,
    /// Unary and server-streaming calls that repeat a remembered header
    /// block and wait for their body.
    /// (Found by the tag on their h2 stream.)
    waiting: WaitingCalls,
    /// Boxes of finished calls, kept to be handed out again as they are.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Call>>,
    max_spare: usize,
    /// The events of a read made by [`GrpcConnection::recv`] (the worker
    /// brings a list of its own).
    events: Vec<Event>,
    /// Calls that went to wait for their body in a table.
    #[cfg(test)]
    waits: usize,
    /// Calls parked while the held answers were past the limit.
    #[cfg(test)]
    parks: usize,
    /// Answers whose message was encoded straight into the output.
    #[cfg(test)]
    answered_in_place: usize,
    /// The framed answer of the unary call being answered.
    reply: Vec<u8>,
    /// The response metadata of the unary call being run.
    response_metadata: ResponseMetadata,
    /// Room for percent-encoded status messages; its room past
    /// [`KEPT_TEXT`] goes at the worker's sweep.
    text: Vec<u8>,
    /// The header blocks every answer repeats, as encoded.
    memos: response::Memos,
    /// The route of the last `:path` by its decoder id.
    last_route: Option<(u64, Route)>,
    /// The head of the last gRPC request whose header block the codec
    /// remembered, by the block's id.
    repeated: RememberedHeads,
    /// Calls answered (their status sent) since the runtime last asked.
    answered: u64,
    /// The server has interceptors, observers.
    intercepting: bool,
    observing: bool,
    /// The time of the step under way (a read, a pull of the producers, a
    /// timeout), for deadlines, producers and observers.
    clock: Clock,
    timers: Timers,
    /// Producers on the worker that may send now.
    ready: VecDeque<u32>,
    /// Unary and server-streaming calls whose request is complete, waiting
    /// to run while the answers held for the client's windows are past
    /// the limit ([`GrpcConnection::crowded`]), in arrival order; kept in
    /// `calls` with their request in their buffer.
    parked: VecDeque<u32>,
    /// Answer bytes of the producer being pulled.
    scratch: Vec<u8>,
    /// Answer parts of the handler being called.
    outgoing: Outgoing,
    /// Calls served on other threads that may be owed credit.
    touched: Vec<u32>,
    /// Calls whose response headers went without their metadata, past the
    /// client's header list size limit: they end `INTERNAL` once the batch
    /// is done ([`GrpcConnection::end_overlarge`]).
    overlarge: Vec<u32>,
    /// Credit of the connection's sinks whose calls ended, or answer bytes
    /// of other threads that did not wait for it: given back once the
    /// output and the held bytes are below their limits.
    lent_due: usize,
    /// Calls served on other threads whose request messages wait for room
    /// in the connection's share of queued bytes (a [`Part::Room`]).
    starved: Vec<u32>,
    /// Calls with a deadline opened in this read.
    new_deadlines: Vec<u32>,
    due: Vec<u32>,
}

impl GrpcConnection {
    /// A connection serving the routes of `router`, for a client at `peer`.
    pub fn new(
        router: Arc<Router>,
        config: &GrpcConfig,
        peer: Option<SocketAddr>,
    ) -> GrpcConnection {
        let intercepting = !router.hooks().interceptors.is_empty();
        let observing = !router.hooks().observers.is_empty();
        GrpcConnection {
            h2: Connection::new(config.h2.clone()),
            router,
            max_message: config.max_recv_message_size,
            max_buffered: config.max_buffered_request_bytes,
            produce_limit: config.produce_output_limit.max(1),
            send_compressed: config.send_compressed,
            call_timeout: config.call_timeout,
            inflated: Vec::new(),
            deflated: Vec::new(),
            max_held: config.h2.max_held_bytes.max(1),
            buffered: 0,
            metadata_bytes: 0,
            max_metadata: config.max_request_metadata_bytes,
            env: CallEnv {
                peer,
                peer_identity: PeerIdentity::default(),
                answer_to: AnswerTo {
                    inbox: None,
                    credit: config.h2.stream_send_buffer.max(1),
                    incoming_limit: (config.h2.initial_stream_window as usize).max(1),
                    queued: Queued::new(config.max_buffered_request_bytes),
                    lent: Lent::new(
                        config
                            .produce_output_limit
                            .saturating_mul(LENT_PER_PRODUCE_LIMIT)
                            .max(config.h2.stream_send_buffer),
                    ),
                },
            },
            epoch: Instant::now(),
            calls: StreamMap::default(),
            waiting: WaitingCalls::default(),
            spare: Vec::new(),
            max_spare: (config.h2.max_concurrent_streams as usize).min(MAX_SPARE_CALLS),
            events: Vec::new(),
            #[cfg(test)]
            waits: 0,
            #[cfg(test)]
            parks: 0,
            #[cfg(test)]
            answered_in_place: 0,
            reply: Vec::new(),
            response_metadata: ResponseMetadata::default(),
            text: Vec::new(),
            memos: response::Memos::default(),
            last_route: None,
            repeated: RememberedHeads::default(),
            answered: 0,
            intercepting,
            observing,
            clock: Clock::default(),
            timers: Timers::default(),
            ready: VecDeque::new(),
            parked: VecDeque::new(),
            scratch: Vec::new(),
            outgoing: Outgoing::default(),
            touched: Vec::new(),
            overlarge: Vec::new(),
            lent_due: 0,
            starved: Vec::new(),
            new_deadlines: Vec::new(),
            due: Vec::new(),
        }
    }

    /// The certificate chain the TLS client presented, for the calls'
    /// [`Context::peer_certificates`].
    #[cfg(feature = "tls")]
    pub(crate) fn set_peer_certificates(
        &mut self,
        certificates: Vec<rustls::pki_types::CertificateDer<'static>>,
    ) {
        self.env.peer_identity.certificates = Some(certificates.into_boxed_slice());
    }

    /// Lets handlers answer from other threads: the parts come back through
    /// `inbox` tagged with `connection`, and are given to
    /// [`GrpcConnection::deliver`].
    pub fn set_inbox(&mut self, inbox: Arc<Inbox>, connection: u64) {
        self.env.answer_to.inbox = Some((inbox, connection));
    }

    // ----- getters -----

    /// The HTTP/2 connection beneath.
    pub fn h2(&self) -> &Connection {
        &self.h2
    }

    /// Bytes waiting to be written to the socket.
    pub fn output(&self) -> &[u8] {
        self.h2.output()
    }

    /// How many bytes [`GrpcConnection::output`] holds.
    #[inline]
    pub fn output_len(&self) -> usize {
        self.h2.output_len()
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

    /// Whether a call served on another thread may still send answer
    /// parts without hearing from the client again: its request has ended
    /// and nothing of its answer waits for the client's windows. A request
    /// has ended once the client has ended it, even while its last
    /// messages wait on the worker for room in the thread's queue: the
    /// thread makes that room without the client. Once the client has shut
    /// its sending half, call [`GrpcConnection::end_calls_stuck_on_windows`]
    /// first: a call whose stream holds bytes for the client's windows
    /// waits for a WINDOW_UPDATE that cannot come.
    pub fn awaits_other_threads(&self) -> bool {
        self.calls.values().any(|call| {
            matches!(&call.state, State::Remote(remote)
                if (!remote.incoming || call.recv_done)
                    && remote.backlog.is_empty()
                    && remote.finish.is_none())
        })
    }

    /// Gives back the room of the tables of open calls and of open h2
    /// streams past what the calls open now need, and the room a burst
    /// left in the buffers of the boxes kept for the next calls, in the
    /// room for status messages and in the codec's rooms for header
    /// blocks: for the worker's sweep,
    /// so that a burst of streams does not leave it behind for as long as
    /// the connection lives, and so that no request pays for it. Call it
    /// between reads, as the sweep does.
    pub fn trim_tables(&mut self) {
        self.calls.trim();
        self.h2.trim_streams();
        self.h2.trim_header_rooms();
        self.trim_spares();
        if self.text.capacity() > KEPT_TEXT {
            // A handler's large status message.
            self.text = Vec::new();
        }
    }

    /// Lets go of the room of the buffers of the boxes kept for the next
    /// calls past [`KEPT_SPARE_ROOM`] over all of them: each may hold up to
    /// 64 KiB of a request gathered from several frames, and a burst of
    /// such calls would leave 64 of them (4 MiB) with the connection for
    /// as long as it lives. The boxes stay.
    fn trim_spares(&mut self) {
        let mut room = 0;
        for call in &mut self.spare {
            room += call.room();
            if room > KEPT_SPARE_ROOM {
                room -= call.room();
                call.let_go_room();
            }
        }
    }

    /// The room the buffers of the boxes kept for the next calls hold.
    #[cfg(test)]
    pub(crate) fn spare_room(&self) -> usize {
        self.spare.iter().map(|call| call.room()).sum()
    }

    /// How many places the tables of open calls and of open h2 streams
    /// have.
    #[cfg(test)]
    pub(crate) fn table_places(&self) -> (usize, usize) {
        (self.calls.places(), self.h2.stream_places())
    }

    /// Request bytes the calls hold now.
    pub fn buffered_request_bytes(&self) -> usize {
        self.buffered
    }

    /// Request bytes queued for handlers on other threads now.
    pub fn queued_request_bytes(&self) -> usize {
        self.env.answer_to.queued.bytes()
    }

    /// Calls answered (their status sent) since the last call of this
    /// method.
    pub fn take_answered(&mut self) -> u64 {
        std::mem::take(&mut self.answered)
    }

    /// The calls open now.
    pub fn open_calls(&self) -> usize {
        self.calls.len() + self.waiting.len()
    }

    /// Whether producers on the worker may send more: call
    /// [`GrpcConnection::produce`] once the output is written.
    pub fn wants_to_produce(&self) -> bool {
        // Held back by the client's windows, producers wait for a Writable
        // event (which comes with input), not for the socket.
        (!self.ready.is_empty() && self.h2.held_bytes() < self.max_held)
            // Threads owed credit wait for the output to be written.
            || self.credit_due()
    }

    /// Whether threads are owed credit and the output is small enough for
    /// it to go back: answer bytes of threads that went into the output are
    /// only as good as gone once the socket takes them, or a client that
    /// opens its windows and never reads would have the output grow without
    /// end. Nor does it go back while the connection holds
    /// [`h2::Config::max_held_bytes`](crate::h2::Config) for the client's
    /// windows, as producers on the worker are not pulled then.
    #[inline]
    fn credit_due(&self) -> bool {
        (!self.touched.is_empty() || self.lent_due > 0)
            && self.h2.output_len() < self.produce_limit
            && self.h2.held_bytes() < self.max_held
    }

    /// When the connection next needs [`GrpcConnection::handle_timeout`]: a
    /// deadline, or a paced producer's time.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    // ----- input -----

    /// The time of the step just done, if anything in it read the clock.
    #[inline(always)]
    pub(crate) fn step_time(&self) -> Option<Instant> {
        self.clock.peek()
    }

    // ----- the call table -----

    fn keep(&mut self, stream: u32, call: Box<Call>) {
        if call.deadline.is_some() {
            self.new_deadlines.push(stream);
        }
        self.calls.insert(stream, call);
        if !self.new_deadlines.is_empty() {
            self.arm_deadlines();
        }
    }

    /// A call in a box again, from what it held while waiting.
    fn resume(&mut self, waiting: Waiting) -> Box<Call> {
        let mut call = self.spare.pop().unwrap_or_default();
        call.resume(waiting, self.epoch);
        call
    }

    fn take_call(&mut self, stream: u32) -> Option<Box<Call>> {
        let call = self.calls.remove(stream)?;
        self.buffered -= call.inbound.len();
        Some(call)
    }

    /// Keeps a finished call's room for the next one, up to
    /// [`MAX_SPARE_CALLS`].
    fn recycle(&mut self, mut call: Box<Call>) {
        self.metadata_bytes = self.metadata_bytes.saturating_sub(call.metadata_counted);
        call.metadata_counted = 0;
        if let State::Remote(remote) = &call.state {
            // The connection's credit its sink held goes back once the
            // output allows, not at once: its bytes may still wait there.
            self.lent_due += remote.shared.take_lent();
        }
        // Reset by the client, or the connection failed: a panic as its
        // producer or handler is dropped has no call left to end.
        let _ = let_go(&mut call.state);
        if self.spare.len() < self.max_spare && call.inbound.capacity() <= 64 << 10 {
            call.reset();
            self.spare.push(call);
        }
    }
}

impl Drop for GrpcConnection {
    fn drop(&mut self) {
        // The connection went (the client closed it, or the server): the
        // calls still open end cancelled, their producers and handlers
        // dropped one by one, each panic in their `Drop` caught.
        self.end_all_calls();
    }
}

/// Drops the producer or handler that served a call on the worker, if
/// any, catching a panic in its `Drop` (the error). Every way a call ends
/// comes here (`end_call`, `recycle`, the connection's drop), except the
/// `on_end` of a handler, which drops it under its own catch.
#[inline]
fn let_go(state: &mut State) -> Result<(), Status> {
    match state {
        State::Producing { .. } | State::Handling { .. } => {
            executor::dispose(std::mem::take(state))
        }
        State::Collecting | State::Remote(_) => Ok(()),
    }
}

/// Sends a call's response headers with `metadata` unless they went
/// already (`sent`); a call whose metadata would pass the client's header
/// list size limit is listed in `overlarge`, to end `INTERNAL` once the
/// batch is done ([`GrpcConnection::end_overlarge`]).
fn send_headers_once(
    h2: &mut Connection,
    memos: &mut response::Memos,
    overlarge: &mut Vec<u32>,
    stream: u32,
    sent: &mut bool,
    metadata: &Metadata,
    encoding: Encoding,
) {
    if *sent {
        return;
    }
    *sent = true;
    if !response::send_headers(h2, memos, stream, metadata, encoding) {
        overlarge.push(stream);
    }
}

/// Sends the framed message `bytes` of a call served on another thread
/// (compressed with `encoding` unless that is identity or the message is
/// marked [`PLAIN`](framing::PLAIN)); returns whether the stream took it, all
/// or none. The bytes of a call that does not compress count as
/// unacknowledged until they leave the stream; those of one that does
/// (a message marked to go uncompressed among them) are owed to the
/// thread at once (the stream's
/// send buffer bounds what it holds). Either way their credit goes back
/// with the next credit returned: touch the stream.
fn send_remote(
    h2: &mut Connection,
    deflated: &mut Vec<u8>,
    stream: u32,
    remote: &mut RemoteCall,
    encoding: Encoding,
    bytes: &mut [u8],
) -> bool {
    if encoding == Encoding::Identity {
        framing::unmark_plain(bytes);
        if h2.send_data(stream, bytes, false) == 0 {
            return false;
        }
        remote.unacked += bytes.len();
        return true;
    }
    deflated.clear();
    compression::deflate_frames(bytes, encoding, deflated);
    let sent = h2.send_data(stream, deflated, false) != 0;
    fit_room(deflated);
    if !sent {
        return false;
    }
    remote.owed += bytes.len();
    true
}

/// Lets go of the room past [`KEPT_COMPRESSION_ROOM`] that a message took
/// to inflate or deflate, or an answer made apart from the output, once
/// it is through: a peer that sends one gzip message of a few KiB
/// inflating to the largest message allowed (or asks for a large answer)
/// on each of many connections would otherwise have each of them hold
/// that much (several MiB) until the room is next let go. Called where the
/// room is used, off the way of answers made in place in the output.
#[inline]
fn fit_room(room: &mut Vec<u8>) {
    if room.capacity() > KEPT_COMPRESSION_ROOM {
        shrink_room(room);
    }
}

#[cold]
#[inline(never)]
fn shrink_room(room: &mut Vec<u8>) {
    room.clear();
    room.shrink_to(KEPT_COMPRESSION_ROOM);
}

/// The client's own deadline of a call whose deadline `capped` was
/// `call_timeout`'s `longest` or the client's `asked` timeout, whichever
/// was shorter, counted from the same moment.
fn uncapped_deadline(
    capped: Option<Instant>,
    asked: Option<Duration>,
    longest: Duration,
) -> Option<Instant> {
    let asked = asked?;
    let arrived = capped?.checked_sub(asked.min(longest))?;
    arrived.checked_add(asked)
}

fn unimplemented_status(router: &Router, path: &[u8]) -> Status {
    // The path is the peer's: echo at most a short prefix of it, so a long
    // path (cheap to resend through the HPACK table) is not amplified.
    const ECHOED: usize = 128;
    let echoed =
        |bytes: &[u8]| String::from_utf8_lossy(&bytes[..bytes.len().min(ECHOED)]).into_owned();
    let text = echoed(path);
    // A gRPC path is `/{service}/{method}`, both parts non-empty: the
    // whole path, not only the part echoed.
    let service = path.strip_prefix(b"/").and_then(|rest| {
        let slash = rest.iter().position(|&b| b == b'/')?;
        let (service, method) = (&rest[..slash], &rest[slash + 1..]);
        let whole = !service.is_empty() && !method.is_empty() && !method.contains(&b'/');
        whole.then_some(service)
    });
    let Some(service) = service else {
        return Status::unimplemented(format!("malformed method name \"{text}\""));
    };
    if router.has_service(service) {
        Status::unimplemented(format!("unknown method {text}"))
    } else {
        Status::unimplemented(format!("unknown service {}", echoed(service)))
    }
}

/// The status of a call refused because the connection's requests waiting
/// for other threads take all the room `max_buffered_request_bytes` gives.
#[cold]
fn refused_for_room() -> Status {
    Status::resource_exhausted(
        "too many request bytes of this connection wait for other threads (max_buffered_request_bytes)",
    )
}
