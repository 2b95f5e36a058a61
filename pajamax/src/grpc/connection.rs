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

/// A new request, once its headers are read.
enum Opened {
    /// Answered, started, or kept: nothing more to do now.
    Done,
    /// Waits for its body.
    Full(Box<Call>),
    /// Waits for its body, as a light record.
    Light(Waiting),
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
/// messages and deflating answers.
const KEPT_COMPRESSION_ROOM: usize = 64 << 10;

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
    /// Room for percent-encoded status messages.
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
    /// thread makes that room without the client.
    pub fn awaits_other_threads(&self) -> bool {
        self.calls.values().any(|call| {
            matches!(&call.state, State::Remote(remote)
                if (!remote.incoming || call.recv_done)
                    && remote.backlog.is_empty()
                    && remote.finish.is_none())
        })
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

    /// Processes the complete frames at the start of `input`, runs every
    /// request they complete, and returns how many bytes it used. `now` is
    /// the time the bytes were read, for deadlines.
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        let mut events = std::mem::take(&mut self.events);
        let used = self.recv_at(input, Some(now), &mut events);
        self.tidy();
        events.clear();
        if events.capacity() > KEPT_EVENTS {
            // Many connections that each once read a hundred requests at a
            // time would hold 8 KiB apiece.
            events.shrink_to(KEPT_EVENTS);
        }
        self.events = events;
        used
    }

    /// As [`GrpcConnection::recv`]; with no time given (`None`), the system
    /// clock is read when a request first needs the time (a deadline, a
    /// producer), or at once on a connection with observers, which time
    /// each call from the read that brought it. `events` is room for the
    /// read's h2 events, emptied first: the worker's one list for every
    /// connection, instead of a list each connection takes out of itself
    /// and puts back at every read.
    pub(crate) fn recv_at(
        &mut self,
        input: &[u8],
        now: Option<Instant>,
        events: &mut Vec<Event>,
    ) -> usize {
        self.clock = Clock::new(now);
        if self.observing {
            self.clock.now();
        }
        events.clear();
        let used = self.h2.recv(input, events);
        if self.h2.error().is_some() {
            // The connection has failed: its streams are gone, and so are
            // the calls, whatever the batch held.
            events.clear();
            self.end_all_calls();
        }
        let mut bodies = BodiesAhead::default();
        for (at, event) in events.iter().enumerate() {
            match *event {
                Event::Request {
                    stream,
                    ref fields,
                    end_stream,
                    too_large,
                    block_id,
                } => {
                    let fields = fields.clone();
                    let opened = self.on_request(stream, fields, end_stream, too_large, block_id);
                    if let Opened::Done = opened {
                        continue;
                    }
                    // The body that ends the request in this same read is
                    // taken without a trip through a table.
                    let body = bodies.find(events, at, stream);
                    match (opened, body) {
                        (Opened::Full(call), Some(data))
                            if self.is_whole_request(&call, &input[data.clone()]) =>
                        {
                            bodies.take();
                            self.run_single(stream, call, &input[data][PREFIX_LEN..]);
                        }
                        (Opened::Light(waiting), Some(data))
                            if self.is_whole_message(&input[data.clone()]) =>
                        {
                            bodies.take();
                            self.run_light(stream, waiting, &input[data][PREFIX_LEN..]);
                        }
                        (Opened::Full(call), _) => self.wait_for_body(stream, call),
                        (Opened::Light(waiting), _) => {
                            if waiting.has_deadline() {
                                self.new_deadlines.push(stream);
                            }
                            #[cfg(test)]
                            {
                                self.waits += 1;
                            }
                            let tag = self.waiting.insert(stream, waiting);
                            self.h2.set_tag(stream, tag);
                        }
                        (Opened::Done, _) => {}
                    }
                }
                Event::Data {
                    stream,
                    ref data,
                    end_stream,
                } => {
                    if !bodies.taken(at) {
                        self.on_data(stream, &input[data.clone()], end_stream);
                    }
                }
                Event::Reset { stream, tag } => self.on_reset(stream, tag),
                Event::Writable { stream } => self.on_writable(stream),
            }
        }
        self.settle_step();
        used
    }

    /// Answers a request whose header list is past the limit.
    #[cold]
    #[inline(never)]
    fn refuse_too_large(&mut self, stream: u32) -> Opened {
        let status = Status::resource_exhausted("request header list too large");
        self.answer_status(stream, &status);
        Opened::Done
    }

    /// A new request: answered at once, started, or returned to wait for
    /// its body.
    #[allow(clippy::too_many_arguments)]
    fn on_request(
        &mut self,
        stream: u32,
        fields: std::ops::Range<usize>,
        end_stream: bool,
        too_large: bool,
        block_id: u64,
    ) -> Opened {
        if too_large {
            return self.refuse_too_large(stream);
        }
        let repeated = self.repeated.find(block_id);
        if let Some(head) = &repeated {
            if !end_stream
                && matches!(
                    head.route.kind,
                    MethodKind::Unary | MethodKind::ServerStreaming
                )
            {
                // Until its body comes, the call is its head and deadline.
                let deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
                return Opened::Light(Waiting::new(
                    repeated.expect("matched"),
                    deadline,
                    self.epoch,
                ));
            }
        }
        self.open_call(stream, fields, end_stream, block_id, repeated)
    }

    /// A new request that needs a call of its own at once: a head not seen
    /// before, or one that ends the request or opens a stream of requests.
    // Not inlined: in `recv`'s loop, this path kept values at hand for
    // every read of a repeated head (`docs/benchmarks.md`).
    #[inline(never)]
    fn open_call(
        &mut self,
        stream: u32,
        fields: std::ops::Range<usize>,
        end_stream: bool,
        block_id: u64,
        repeated: Option<std::rc::Rc<SharedHead>>,
    ) -> Opened {
        let mut call = self.spare.pop().unwrap_or_default();
        call.recv_done = end_stream;
        let route = match repeated {
            // The same header block as a call before: the same route,
            // timeout and metadata.
            Some(head) => {
                let route = head.route;
                let deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
                call.resume(Waiting::new(head, deadline, self.epoch), self.epoch);
                Some(route)
            }
            None => match self.read_head(&mut call, fields, block_id) {
                Ok(route) => {
                    if !self.count_metadata(&mut call) {
                        self.recycle(call);
                        self.h2.reset_stream(stream, Reason::REFUSED_STREAM);
                        return Opened::Done;
                    }
                    route
                }
                Err(status) => {
                    self.recycle(call);
                    self.answer_status(stream, &status);
                    return Opened::Done;
                }
            },
        };
        if let Some(route) = route {
            call.route = Some(route);
            if matches!(
                route.kind,
                MethodKind::ClientStreaming | MethodKind::BidiStreaming
            ) {
                if self.crowded() {
                    // Its messages would wait with it; refused, as the
                    // request was not looked at (the client may retry).
                    self.recycle(call);
                    self.h2.reset_stream(stream, Reason::REFUSED_STREAM);
                    return Opened::Done;
                }
                self.start_inbound(stream, call, route);
                return Opened::Done;
            }
        }
        if end_stream {
            self.finish_collecting(stream, call);
            return Opened::Done;
        }
        Opened::Full(call)
    }

    /// Counts the request metadata `call` holds of its own in the
    /// connection's; `false` (nothing counted) past the limit.
    fn count_metadata(&mut self, call: &mut Call) -> bool {
        let size = call.metadata.list_size();
        if size > 0 && self.metadata_bytes + size > self.max_metadata {
            return false;
        }
        self.metadata_bytes += size;
        call.metadata_counted = size;
        true
    }

    /// A call in a box again, from what it held while waiting.
    fn resume(&mut self, waiting: Waiting) -> Box<Call> {
        let mut call = self.spare.pop().unwrap_or_default();
        call.resume(waiting, self.epoch);
        call
    }

    /// Keeps a call until its request body arrives.
    // Not inlined, as `on_data`, `on_reset` and `on_writable`: in `recv`'s
    // loop, paths a read of whole requests does not take made every read
    // set up their state (18 instructions per request at M=1).
    #[inline(never)]
    fn wait_for_body(&mut self, stream: u32, call: Box<Call>) {
        #[cfg(test)]
        {
            self.waits += 1;
        }
        if call.deadline.is_some() {
            self.new_deadlines.push(stream);
        }
        self.calls.insert(stream, call);
    }

    /// Whether `data`, the body that ends a new call's request, is its one
    /// whole message, to be run without a copy.
    #[inline]
    fn is_whole_request(&self, call: &Call, data: &[u8]) -> bool {
        call.inbound.is_empty()
            && matches!(call.state, State::Collecting)
            && call.route.is_some()
            && self.is_whole_message(data)
    }

    /// Whether `data` is one whole uncompressed message within the limit.
    #[inline]
    fn is_whole_message(&self, data: &[u8]) -> bool {
        framing::message_len(data) == Some(data.len())
            && framing::check_prefix(data, self.max_message, false).is_ok()
    }

    /// Reads a request's head into `call`: its route (`None` for a request
    /// that is not gRPC), deadline and metadata, or the status that answers
    /// it. Remembers a gRPC head by its block id.
    fn read_head(
        &mut self,
        call: &mut Call,
        fields: std::ops::Range<usize>,
        block_id: u64,
    ) -> Result<Option<Route>, Status> {
        let (list, fields) = self.h2.request_fields(fields, block_id);
        let mut head = head::parse(list.classified(fields.clone()), &mut call.metadata);
        call.answer_compression = head.answer_compression();
        if !head.is_grpc {
            // Its method decides its answer (405 or 415): looked up here,
            // off the way of gRPC requests.
            let method = list
                .classified(fields)
                .find(|field| matches!(field.kind, FieldKind::Method))
                .map_or(&b""[..], |field| field.value);
            call.not_grpc = NotGrpc::of(method);
            call.deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
            return Ok(None);
        }
        let route = match self.last_route {
            // The same table entry or remembered literal: the same path.
            Some((id, route)) if id == head.path_id && id != 0 => Some(route),
            _ => {
                let route = self.router.route(head.path);
                if let Some(route) = route {
                    self.last_route = Some((head.path_id, route));
                }
                route
            }
        };
        let problem = match route {
            None => Some(unimplemented_status(&self.router, head.path)),
            Some(_) if head.encoding.is_none() => Some(Status::unimplemented(
                "the request's grpc-encoding is not supported; use gzip, deflate or identity",
            )),
            Some(_) => None,
        };
        if let Some(status) = problem {
            if self.observing {
                let path = String::from_utf8_lossy(head.path);
                let (service, method) = path
                    .trim_start_matches('/')
                    .split_once('/')
                    .unwrap_or((&path, ""));
                executor::observe(
                    self.router.hooks(),
                    &FinishedCall {
                        service,
                        method,
                        code: status.code(),
                        duration: self.clock.now().elapsed(),
                        request_bytes: 0,
                        response_bytes: 0,
                    },
                );
            }
            return Err(status);
        }
        let route = route.expect("checked above");
        let asked_timeout = head.timeout;
        if let Some(longest) = self.call_timeout {
            // Kept with the head for the requests that repeat its block. A
            // server stream is capped only until its request is in
            // (`run_single`).
            if route.kind != MethodKind::BidiStreaming {
                head.timeout = Some(head.timeout.map_or(longest, |asked| asked.min(longest)));
            }
        }
        call.deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
        call.asked_timeout = asked_timeout;
        call.capped = head.timeout != asked_timeout;
        call.encoding = head.encoding.expect("checked above");
        if block_id != 0 {
            self.repeated.insert(SharedHead {
                block_id,
                route,
                timeout: head.timeout,
                asked_timeout,
                encoding: call.encoding,
                answer_compression: call.answer_compression,
                metadata: call.metadata.clone(),
            });
        }
        Ok(Some(route))
    }

    #[inline(never)]
    fn on_data(&mut self, stream: u32, data: &[u8], end_stream: bool) {
        if !self.waiting.is_empty() {
            let tag = self.h2.take_tag(stream);
            if let Some(waiting) = self.waiting.take(tag, stream) {
                if end_stream && self.is_whole_message(data) {
                    return self.run_light(stream, waiting, &data[PREFIX_LEN..]);
                }
                let call = self.resume(waiting);
                self.calls.insert(stream, call);
            }
        }
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        if call.inbound.is_empty()
            && end_stream
            && matches!(call.state, State::Collecting)
            && call.route.is_some()
            && framing::message_len(data) == Some(data.len())
            && framing::check_prefix(data, self.max_message, false).is_ok()
        {
            // The whole message is in this frame: no copy, and one look-up
            // of the call.
            let call = self.calls.remove(stream).expect("found above");
            return self.run_single(stream, call, &data[PREFIX_LEN..]);
        }
        if end_stream {
            call.recv_done = true;
        }
        match &call.state {
            State::Collecting => {}
            State::Handling { .. } => return self.take_in(stream, data),
            State::Remote(remote) if remote.incoming => return self.take_in(stream, data),
            // The request is complete; what follows is not the handler's.
            State::Producing { .. } | State::Remote(_) => {
                return self.h2.release_capacity(stream, data.len())
            }
        }
        if call.route.is_none() {
            // Not gRPC: the body is discarded.
            if !end_stream {
                self.h2.release_capacity(stream, data.len());
                return;
            }
            let call = self.take_call(stream).expect("found above");
            return self.finish_collecting(stream, call);
        }
        if self.buffered + data.len() > self.max_buffered {
            let call = self.take_call(stream).expect("found above");
            let status =
                Status::resource_exhausted("the connection buffers too many incomplete requests");
            return self.refuse(stream, call, &status);
        }
        call.inbound.extend(data);
        self.buffered += data.len();
        let bytes = call.inbound.bytes();
        let compressed_ok = call.encoding != Encoding::Identity;
        let problem = match framing::check_prefix(bytes, self.max_message, compressed_ok) {
            Err(status) => Some(status),
            Ok(()) if framing::message_len(bytes).is_some_and(|total| bytes.len() > total) => Some(
                Status::internal("more than one request message in a unary call"),
            ),
            Ok(()) => None,
        };
        if let Some(status) = problem {
            let call = self.take_call(stream).expect("found above");
            return self.refuse(stream, call, &status);
        }
        if end_stream {
            let call = self.take_call(stream).expect("found above");
            self.finish_collecting(stream, call);
        } else {
            // Bounded by the message size limit: let the client go on.
            self.h2.release_capacity(stream, data.len());
        }
    }

    #[inline(never)]
    fn on_reset(&mut self, stream: u32, tag: u32) {
        if let Some(waiting) = self.waiting.take(tag, stream) {
            self.observe_waiting_cancelled(&waiting);
            return;
        }
        if let Some(call) = self.take_call(stream) {
            self.end_cancelled(call, CancelReason::Cancelled);
        }
    }

    /// Lets go of a call the client reset, or whose connection closed: its
    /// thread, if any, learns why, and observers see it `CANCELLED`.
    fn end_cancelled(&mut self, call: Box<Call>, reason: CancelReason) {
        if let State::Remote(remote) = &call.state {
            remote.shared.cancel(reason);
        }
        if let (true, Some(route)) = (self.observing, call.route) {
            // A call reset before its handler ran has no start.
            let started = call.started.unwrap_or_else(Instant::now);
            let (request, response) = (call.request_bytes, call.response_bytes);
            self.observe(route, Code::Cancelled, started, request, response);
        }
        self.recycle(call);
    }

    /// Observers see a call that waited for its body as a light record,
    /// reset or left by its connection, `CANCELLED`, with no start.
    fn observe_waiting_cancelled(&self, waiting: &Waiting) {
        if self.observing {
            self.observe(waiting.head.route, Code::Cancelled, Instant::now(), 0, 0);
        }
    }

    #[inline(never)]
    fn on_writable(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        match &mut call.state {
            State::Collecting => {}
            State::Producing { wake_at, .. } => {
                if wake_at.is_none() && !call.queued {
                    call.queued = true;
                    self.ready.push_back(stream);
                }
            }
            State::Handling { blocked, .. } => {
                if *blocked {
                    *blocked = false;
                    self.pump(stream);
                }
            }
            State::Remote(_) => {
                self.drain_backlog(stream);
                self.touch(stream);
            }
        }
    }

    // ----- calls with one request message -----

    /// The client is done sending a unary or server-streaming request (or
    /// a request that is not gRPC): answer with what it sent.
    fn finish_collecting(&mut self, stream: u32, call: Box<Call>) {
        if call.route.is_none() {
            let why = call.not_grpc;
            self.recycle(call);
            self.answered += 1;
            return response::send_not_grpc(&mut self.h2, stream, why);
        }
        let bytes = call.inbound.bytes();
        if bytes.is_empty() {
            let status = Status::internal("call without a request message");
            return self.refuse(stream, call, &status);
        }
        if framing::message_len(bytes) != Some(bytes.len()) {
            let status = Status::internal("request message truncated");
            return self.refuse(stream, call, &status);
        }
        if framing::is_compressed(bytes) {
            return self.run_compressed(stream, call);
        }
        // The message is borrowed from the call's buffer while the call is
        // run; move the buffer out for that.
        let mut call = call;
        let inbound = std::mem::take(&mut call.inbound);
        self.run_single(stream, call, &inbound.bytes()[PREFIX_LEN..]);
        // The call took another buffer if it lives on; keep this one.
        let mut inbound = inbound;
        inbound.clear();
        if inbound.capacity() <= 64 << 10 {
            if let Some(spare) = self.spare.last_mut() {
                if spare.inbound.capacity() == 0 {
                    spare.inbound = inbound;
                }
            }
        }
    }

    /// Runs a call whose one request message, held in its buffer, is
    /// compressed.
    #[cold]
    fn run_compressed(&mut self, stream: u32, mut call: Box<Call>) {
        let mut inflated = std::mem::take(&mut self.inflated);
        let result = compression::inflate_framed(
            call.inbound.bytes(),
            call.encoding,
            self.max_message,
            &mut inflated,
        );
        call.inbound.clear();
        match result {
            Ok(()) => {
                call.compressed_request = true;
                self.run_single(stream, call, &inflated[PREFIX_LEN..]);
            }
            Err(status) => self.refuse(stream, call, &status),
        }
        fit_room(&mut inflated);
        self.inflated = inflated;
    }

    /// Whether the answer to a call is compressed: the client accepts a
    /// compression, and the handler's `choice`, or else the server's
    /// default, says so.
    #[inline]
    fn compress_answer(&self, call: &Call, choice: Option<bool>) -> bool {
        call.accepts_compression() && choice.unwrap_or(self.send_compressed)
    }

    /// Whether `deadline` has passed before the call to `route` on
    /// `stream` could start; if so the call is answered with
    /// DEADLINE_EXCEEDED, and observed with its `request` bytes.
    #[inline(always)]
    fn started_too_late(
        &mut self,
        stream: u32,
        route: Route,
        deadline: Option<Instant>,
        request: u64,
    ) -> bool {
        match deadline {
            Some(deadline) => self.passed_before_start(stream, route, deadline, request),
            None => false,
        }
    }

    /// [`GrpcConnection::started_too_late`] for a call with a deadline:
    /// apart, so that a call without one reads no clock.
    #[inline(never)]
    fn passed_before_start(
        &mut self,
        stream: u32,
        route: Route,
        deadline: Instant,
        request: u64,
    ) -> bool {
        let now = self.clock.now();
        if deadline > now {
            return false;
        }
        let status = Status::deadline_exceeded("deadline passed before the call started");
        if self.observing {
            self.observe(route, status.code(), now, request, 0);
        }
        self.answer_status(stream, &status);
        true
    }

    /// Answers a routed call with `status` before its handler ran (its
    /// request broke a limit or the protocol), and shows it to the
    /// observers.
    #[cold]
    fn refuse(&mut self, stream: u32, call: Box<Call>, status: &Status) {
        if let (true, Some(route)) = (self.observing, call.route) {
            let started = call.started.unwrap_or_else(|| self.clock.now());
            self.observe(route, status.code(), started, call.request_bytes, 0);
        }
        self.recycle(call);
        self.answer_status(stream, status);
    }

    /// Runs the handler of a call whose one request message is `message`.
    fn run_single(&mut self, stream: u32, mut call: Box<Call>, message: &[u8]) {
        let route = call.route.expect("only gRPC calls run");
        let request = (message.len() + PREFIX_LEN) as u64;
        if self.started_too_late(stream, route, call.deadline, request) {
            return self.recycle(call);
        }
        if call.capped && route.kind == MethodKind::ServerStreaming {
            // The cap held while the request was awaited; the stream runs
            // (or waits to run) to the client's own deadline, much as with
            // tonic's timeout.
            let longest = self.call_timeout.expect("a capped call");
            call.deadline = uncapped_deadline(call.deadline, call.asked_timeout, longest);
            call.capped = false;
        }
        if self.waits_to_run() {
            return self.park(stream, call, message);
        }
        match route.kind {
            MethodKind::ServerStreaming => self.start_server_stream(stream, call, route, message),
            _ => self.run_unary(stream, Running::Boxed(call), route, message),
        }
    }

    /// As [`GrpcConnection::run_single`] for a call still in its light
    /// record: a unary call runs without a box. Inlined into its two
    /// callers: passing the record to it cost 21 instructions per request.
    #[inline(always)]
    fn run_light(&mut self, stream: u32, waiting: Waiting, message: &[u8]) {
        let route = waiting.head.route;
        if route.kind != MethodKind::Unary {
            let call = self.resume(waiting);
            return self.run_single(stream, call, message);
        }
        let request = (message.len() + PREFIX_LEN) as u64;
        if self.started_too_late(stream, route, waiting.deadline(self.epoch), request) {
            return;
        }
        if self.waits_to_run() {
            // Behind the calls that wait already.
            let call = self.resume(waiting);
            return self.park(stream, call, message);
        }
        self.run_unary(stream, Running::Light(waiting), route, message)
    }

    /// Whether the answers held for the client's flow-control windows are
    /// past [`h2::Config::max_held_bytes`](crate::h2::Config): new calls
    /// then wait to run, or are refused (a stream of requests), until the
    /// client reads.
    #[inline(always)]
    fn crowded(&self) -> bool {
        self.h2.held_bytes() > self.max_held
    }

    /// Whether a call ready to run waits instead: the connection is
    /// [`crowded`](GrpcConnection::crowded), or other calls wait already
    /// (it goes behind them).
    #[inline(always)]
    fn waits_to_run(&self) -> bool {
        self.crowded() || !self.parked.is_empty()
    }

    /// Keeps a call whose request `message` is complete until the client
    /// has read enough of the answers held for it ([`GrpcConnection::crowded`]):
    /// a client that sends many calls at once and reads their answers is
    /// served in turn, not refused, and one that never reads holds its
    /// requests (within `max_buffered_request_bytes`), not their answers.
    #[cold]
    #[inline(never)]
    fn park(&mut self, stream: u32, mut call: Box<Call>, message: &[u8]) {
        let framed = PREFIX_LEN + message.len();
        if self.buffered + framed > self.max_buffered {
            let status =
                Status::resource_exhausted("the connection buffers too many incomplete requests");
            return self.refuse(stream, call, &status);
        }
        call.inbound.clear();
        call.inbound.extend(&framing::prefix(message.len()));
        call.inbound.extend(message);
        call.recv_done = true;
        self.buffered += framed;
        if self.parked.len() > 2 * self.calls.len() {
            // Calls that ended while they waited (their deadline passed,
            // the client reset them) left their stream here; while the
            // client does not read, none is taken out.
            let calls = &self.calls;
            self.parked.retain(|&stream| calls.contains_key(stream));
        }
        self.parked.push_back(stream);
        #[cfg(test)]
        {
            self.parks += 1;
        }
        self.keep(stream, call);
    }

    /// Runs the parked calls, in order, while the held answers are within
    /// the limit; a call reset or ended meanwhile is gone from the table.
    #[cold]
    #[inline(never)]
    fn run_parked(&mut self) {
        // Taken out while they run, so that none waits behind the others
        // again; calls parked meanwhile (the limit reached again) go after
        // those still waiting.
        let mut parked = std::mem::take(&mut self.parked);
        while !self.crowded() {
            let Some(stream) = parked.pop_front() else {
                break;
            };
            // Gone if it ended meanwhile (reset, deadline): this runs after
            // a read's events, so a reset in that read was seen.
            if let Some(call) = self.take_call(stream) {
                self.finish_collecting(stream, call);
            }
        }
        parked.append(&mut self.parked);
        self.parked = parked;
    }

    fn run_unary(&mut self, stream: u32, running: Running, route: Route, message: &[u8]) {
        // Every answer empties it once sent (`answer_message`,
        // `answer_status`), as does a call that goes to another thread: no
        // call finds another's metadata, and none pays to empty it first.
        debug_assert!(self.response_metadata.is_empty());
        let service = self.router.service(route.service);
        let (metadata, deadline, compressed, compression) = match &running {
            Running::Boxed(call) => (
                call.request_metadata(),
                call.deadline,
                call.compressed_request,
                call.answer_compression,
            ),
            Running::Light(waiting) => (
                &waiting.head.metadata,
                waiting.deadline(self.epoch),
                false,
                waiting.head.answer_compression,
            ),
        };
        // While the kept blocks hold, the message is encoded straight into
        // the output behind its HEADERS frame instead of being copied there.
        // Not for answers that are compressed unless the handler says
        // otherwise: they would be taken back every time.
        let in_place =
            if self.observing || (self.send_compressed && compression != Encoding::Identity) {
                None
            } else {
                self.h2
                    .begin_answer(stream, &self.memos.headers, PREFIX_LEN)
            };
        let reply = if in_place.is_some() {
            self.h2.answer_body()
        } else {
            self.reply.clear();
            self.reply.extend_from_slice(&[0; PREFIX_LEN]);
            &mut self.reply
        };
        let mut ctx = self.env.context(
            stream,
            metadata,
            deadline,
            &mut self.response_metadata,
            true,
            compressed,
        );
        let intercepted = if self.intercepting {
            let info = self.router.call_info(route);
            executor::intercept(self.router.hooks(), &info, &mut ctx)
        } else {
            Ok(())
        };
        ctx.set_request_bytes(message.len());
        let mut outcome = match intercepted {
            Ok(()) => executor::unary(service, route.method as usize, &mut ctx, message, reply),
            Err(status) => Ok(Err(status)),
        };
        let compress = compression != Encoding::Identity
            && ctx.compression_choice().unwrap_or(self.send_compressed);
        let remote = ctx.take_remote();
        if let Some(answer) = in_place {
            // An answer to send, not a status or a deferral.
            let answer_due = matches!(outcome, Ok(Ok(()))) && remote.is_none();
            let plain = answer_due && !compress && self.response_metadata.is_empty();
            let answer = if plain {
                self.h2.finish_answer(answer, &self.memos.ok_trailers)
            } else {
                Err(answer)
            };
            match answer {
                Ok(()) => {
                    self.answered += 1;
                    #[cfg(test)]
                    {
                        self.answered_in_place += 1;
                    }
                    if let Running::Boxed(call) = running {
                        self.recycle(call);
                    }
                    // `Ok(Ok(()))` (`answer_due`): nothing to drop, and the
                    // status's drop glue, called for it, costs 11
                    // instructions per call.
                    std::mem::forget(outcome);
                    return;
                }
                // An answer that did not go goes the general way, from
                // `self.reply`; what else was written is dropped.
                Err(answer) if answer_due => self.h2.take_back_answer(answer, &mut self.reply),
                Err(answer) => self.h2.drop_answer(answer),
            }
        }
        if let Some(shared) = remote {
            if shared.is_refused() {
                outcome = Ok(Err(refused_for_room()));
            } else if outcome.is_ok() {
                // Deferred: the answer comes back through the inbox; what
                // the handler returned does not count.
                let mut call = match running {
                    Running::Boxed(call) => call,
                    Running::Light(waiting) => self.resume(waiting),
                };
                call.compress = compress;
                call.state = State::Remote(Box::new(RemoteCall::new(shared, false)));
                if self.observing {
                    call.started = Some(self.clock.now());
                    call.request_bytes = (message.len() + PREFIX_LEN) as u64;
                }
                // The answer brings its own metadata when it comes back.
                self.response_metadata.clear();
                return self.keep(stream, call);
            }
            shared.cancel(CancelReason::Ended);
        }
        if let Running::Boxed(call) = running {
            self.recycle(call);
        }
        let outcome = outcome.and_then(|inner| inner);
        if self.observing {
            let (code, sent) = match &outcome {
                Ok(()) => (Code::Ok, self.reply.len() as u64),
                Err(status) => (status.code(), 0),
            };
            let request = (message.len() + PREFIX_LEN) as u64;
            self.observe_from_read(route, code, request, sent);
        }
        match outcome {
            Ok(()) => {
                let encoding = if compress {
                    compression
                } else {
                    Encoding::Identity
                };
                self.answer_message(stream, encoding)
            }
            Err(status) => self.answer_status(stream, &status),
        }
    }

    /// Shows the observers a call that ran from the read under way (the
    /// step's time) to now.
    #[inline(never)]
    fn observe_from_read(&self, route: Route, code: Code, request: u64, response: u64) {
        self.observe(route, code, self.clock.now(), request, response);
    }

    /// Shows a finished call to the observers.
    fn observe(&self, route: Route, code: Code, started: Instant, request: u64, response: u64) {
        let info = self.router.call_info(route);
        executor::observe(
            self.router.hooks(),
            &FinishedCall {
                service: info.service,
                method: info.method,
                code,
                duration: started.elapsed(),
                request_bytes: request,
                response_bytes: response,
            },
        );
    }

    fn start_server_stream(
        &mut self,
        stream: u32,
        mut call: Box<Call>,
        route: Route,
        message: &[u8],
    ) {
        if self.observing {
            call.started = Some(self.clock.now());
            call.request_bytes = (message.len() + PREFIX_LEN) as u64;
        }
        debug_assert!(!call.capped, "lifted as the request came in");
        let service = self.router.service(route.service);
        let compressed = call.compressed_request;
        let mut ctx = self.env.call_context(stream, &mut call, true, compressed);
        ctx.set_request_bytes(message.len());
        let outcome = if self.intercepting {
            let info = self.router.call_info(route);
            executor::intercept(self.router.hooks(), &info, &mut ctx)
        } else {
            Ok(())
        }
        .and_then(|()| executor::server_stream(service, route.method as usize, &mut ctx, message));
        let choice = ctx.compression_choice();
        let remote = ctx.take_remote();
        call.compress = self.compress_answer(&call, choice);
        match (outcome, remote) {
            (Ok(Production::Local(producer)), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                call.state = State::Producing {
                    producer,
                    wake_at: None,
                };
                call.queued = true;
                self.ready.push_back(stream);
                self.keep(stream, call);
            }
            (Ok(Production::Remote), Some(shared)) if shared.is_refused() => {
                self.end_call(stream, call, Some(refused_for_room()));
            }
            (Ok(Production::Remote), Some(shared)) => {
                call.state = State::Remote(Box::new(RemoteCall::new(shared, false)));
                self.keep(stream, call);
            }
            (Ok(Production::Remote), None) => {
                // A channel made outside a server: nothing will answer.
                self.end_call(
                    stream,
                    call,
                    Some(Status::internal("the stream's sink goes nowhere")),
                );
            }
            (Err(status), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                self.end_call(stream, call, Some(status));
            }
        }
    }

    // ----- calls with a stream of request messages -----

    /// Starts a client-streaming or bidirectional call: its handler runs
    /// as the request headers arrive.
    fn start_inbound(&mut self, stream: u32, mut call: Box<Call>, route: Route) {
        if self.started_too_late(stream, route, call.deadline, 0) {
            return self.recycle(call);
        }
        if self.observing {
            call.started = Some(self.clock.now());
        }
        let service = self.router.service(route.service);
        let mut ctx = self.env.call_context(stream, &mut call, true, false);
        let outcome = if self.intercepting {
            let info = self.router.call_info(route);
            executor::intercept(self.router.hooks(), &info, &mut ctx)
        } else {
            Ok(())
        }
        .and_then(|()| executor::inbound(service, route.kind, route.method as usize, &mut ctx));
        let choice = ctx.compression_choice();
        let remote = ctx.take_remote();
        call.compress = self.compress_answer(&call, choice);
        match (outcome, remote) {
            (Ok(Inbound::Local(handler)), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                call.state = State::Handling {
                    handler,
                    blocked: false,
                };
            }
            (Ok(Inbound::Remote), Some(shared)) => {
                call.state = State::Remote(Box::new(RemoteCall::new(shared, true)));
            }
            (Ok(Inbound::Remote), None) => {
                let status = Status::internal("the stream's channel goes nowhere");
                return self.end_call(stream, call, Some(status));
            }
            (Err(status), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                return self.end_call(stream, call, Some(status));
            }
        }
        if call.deadline.is_some() {
            self.new_deadlines.push(stream);
        }
        let recv_done = call.recv_done;
        self.calls.insert(stream, call);
        if recv_done {
            self.pump(stream);
        }
    }

    /// Request bytes of a streaming call: kept, then handed on as complete
    /// messages.
    fn take_in(&mut self, stream: u32, data: &[u8]) {
        if self.buffered + data.len() > self.max_buffered {
            let call = self.take_call(stream).expect("checked by the caller");
            let status =
                Status::resource_exhausted("the connection buffers too many request messages");
            return self.end_call(stream, call, Some(status));
        }
        let call = self.calls.get_mut(stream).expect("checked by the caller");
        call.inbound.extend(data);
        call.unreleased += data.len();
        self.buffered += data.len();
        self.pump(stream);
    }

    /// Hands the complete request messages of a streaming call to whoever
    /// takes them, as far as they take them; then opens the client's window
    /// for what was taken, and ends the request side once the client is
    /// done.
    fn pump(&mut self, stream: u32) {
        // What a handler answers to the messages of one read leaves
        // together, in as few DATA frames as it fills.
        self.outgoing.clear();
        loop {
            let Some(call) = self.calls.get_mut(stream) else {
                return;
            };
            let compressed_ok = call.encoding != Encoding::Identity;
            // Messages are taken until none is complete or the taker holds
            // them back (`Ok(false)`), or until the answers so far are to
            // go out first (`Ok(true)`: then the call is looked up again);
            // an error ends the call.
            let stop: Result<bool, Status> = loop {
                let range = match call.inbound.next_message(self.max_message, compressed_ok) {
                    Ok(Some(range)) => range,
                    Ok(None) => break Ok(false),
                    Err(status) => break Err(status),
                };
                let mut framed = &call.inbound.bytes()[range.clone()];
                let compressed = framing::is_compressed(framed);
                if compressed {
                    let inflated = &mut self.inflated;
                    if let Err(status) = compression::inflate_framed(
                        framed,
                        call.encoding,
                        self.max_message,
                        inflated,
                    ) {
                        break Err(status);
                    }
                    framed = inflated;
                }
                // The message as the handler takes it, inflated: as a unary
                // call's request counts.
                let message_len = framed.len() as u64;
                let taken = match &mut call.state {
                    State::Handling { handler, blocked } => {
                        if *blocked {
                            break Ok(false);
                        }
                        let out = &mut self.outgoing;
                        let metadata = call::request_metadata(&call.shared, &call.metadata);
                        let mut ctx = self.env.context(
                            stream,
                            metadata,
                            call.deadline,
                            &mut call.response,
                            false,
                            compressed,
                        );
                        let message = &framed[PREFIX_LEN..];
                        let outcome =
                            executor::on_message(handler.as_mut(), &mut ctx, message, out);
                        if let Some(choice) = ctx.compression_choice() {
                            if !call.headers_sent {
                                call.compress = call.accepts_compression() && choice;
                            }
                        }
                        if let Err(status) = outcome {
                            break Err(status);
                        }
                        true
                    }
                    State::Remote(remote) => {
                        if remote.incoming_blocked {
                            break Ok(false);
                        }
                        match remote.shared.offer(framed) {
                            Offered::Queued => false,
                            Offered::CallFull => {
                                remote.incoming_blocked = true;
                                break Ok(false);
                            }
                            Offered::ConnectionFull => {
                                remote.incoming_blocked = true;
                                if std::mem::replace(&mut remote.starved, true) {
                                    // Listed already, and resumed by its
                                    // thread since.
                                    break Ok(false);
                                }
                                if self.starved.len() > self.calls.len() {
                                    // Rid of calls that ended while they waited.
                                    let calls = &self.calls;
                                    self.starved.retain(|&s| calls.get(s).is_some());
                                }
                                self.starved.push(stream);
                                break Ok(false);
                            }
                        }
                    }
                    _ => return,
                };
                call.inbound.consume(range.len());
                call.request_bytes += message_len;
                self.buffered -= range.len();
                if taken
                    && (self.outgoing.messages.len() >= PRODUCE_CHUNK || self.outgoing.headers_now)
                {
                    break Ok(true);
                }
            };
            fit_room(&mut self.inflated);
            match stop {
                Ok(true) => self.send_outgoing(stream),
                Ok(false) => break,
                Err(status) => {
                    // The answers to the messages before it go first.
                    let mut call = self.take_call(stream).expect("found above");
                    self.flush_outgoing(stream, &mut call);
                    return self.end_call(stream, call, Some(status));
                }
            }
        }
        if !self.outgoing.messages.is_empty() || self.outgoing.headers_now {
            self.send_outgoing(stream);
        }
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let blocked = match &call.state {
            State::Handling { blocked, .. } => *blocked,
            State::Remote(remote) => remote.incoming_blocked,
            _ => false,
        };
        if blocked {
            return;
        }
        // Taken in: what remains is at most one incomplete message, bounded
        // by the message size limit.
        if call.unreleased > 0 {
            let unreleased = std::mem::take(&mut call.unreleased);
            self.h2.release_capacity(stream, unreleased);
        }
        let call = self.calls.get_mut(stream).expect("found above");
        if !call.recv_done {
            return;
        }
        if !call.inbound.is_empty() {
            let call = self.take_call(stream).expect("found above");
            let status = Status::internal("request message truncated");
            return self.end_call(stream, call, Some(status));
        }
        match &mut call.state {
            State::Handling { .. } => {
                // The handler's last turn: `on_end` drops it.
                let State::Handling { handler, .. } = std::mem::take(&mut call.state) else {
                    unreachable!("matched above")
                };
                let out = &mut self.outgoing;
                out.clear();
                // A client-streaming handler may answer from a thread.
                let client_streaming = call
                    .route
                    .is_some_and(|r| r.kind == MethodKind::ClientStreaming);
                let mut ctx = self.env.call_context(stream, call, client_streaming, false);
                let outcome = executor::on_end(handler, &mut ctx, out);
                let choice = ctx.compression_choice();
                let remote = ctx.take_remote();
                let mut call = self.take_call(stream).expect("found above");
                if let (Some(choice), false) = (choice, call.headers_sent) {
                    call.compress = call.accepts_compression() && choice;
                }
                if let Some(shared) = remote {
                    if outcome.is_ok() {
                        call.state = State::Remote(Box::new(RemoteCall::new(shared, false)));
                        return self.keep(stream, call);
                    }
                    shared.cancel(CancelReason::Ended);
                }
                // What the handler sent goes before its status, also
                // before an error it returned (as from `on_message`); not
                // after a panic.
                if outcome.is_ok() {
                    self.flush_outgoing(stream, &mut call);
                }
                let outcome = outcome.and_then(|inner| inner);
                self.end_call(stream, call, outcome.err());
            }
            State::Remote(remote) if remote.incoming => {
                remote.incoming = false;
                remote.shared.end_incoming(None);
            }
            _ => {}
        }
    }

    /// Sends what the handler just produced; marks it blocked when the
    /// stream's send buffer is full.
    fn send_outgoing(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let out = &mut self.outgoing;
        let encoding = call.answer_encoding();
        if out.headers_now || !out.messages.is_empty() {
            send_headers_once(
                &mut self.h2,
                &mut self.memos,
                &mut self.overlarge,
                stream,
                &mut call.headers_sent,
                &call.response.headers,
                encoding,
            );
        }
        if !out.messages.is_empty() {
            call.response_bytes += out.messages.len() as u64;
            let data = out.data(encoding, &mut self.deflated);
            let sent = self.h2.send_data(stream, data, false);
            debug_assert!(
                sent == data.len() || self.h2.error().is_some(),
                "delivery waits for room"
            );
            fit_room(&mut self.deflated);
        }
        if let State::Handling { blocked, .. } = &mut call.state {
            *blocked = call.headers_sent && self.h2.send_capacity(stream) == 0;
        }
        self.outgoing.clear();
    }

    /// Sends what the handler produced on a call already taken out of the
    /// table.
    fn flush_outgoing(&mut self, stream: u32, call: &mut Call) {
        let out = &mut self.outgoing;
        if out.messages.is_empty() && !out.headers_now {
            return;
        }
        let encoding = call.answer_encoding();
        send_headers_once(
            &mut self.h2,
            &mut self.memos,
            &mut self.overlarge,
            stream,
            &mut call.headers_sent,
            &call.response.headers,
            encoding,
        );
        if !out.messages.is_empty() {
            call.response_bytes += out.messages.len() as u64;
            let data = out.data(encoding, &mut self.deflated);
            self.h2.send_data(stream, data, false);
            fit_room(&mut self.deflated);
        }
    }

    // ----- producers on the worker -----

    /// Pulls the producers that may send, each in turn, until they wait,
    /// the output holds [`GrpcConfig::produce_output_limit`] bytes, or the
    /// connection holds [`h2::Config::max_held_bytes`](crate::h2::Config)
    /// for the client's windows; call again after writing while
    /// [`GrpcConnection::wants_to_produce`].
    pub fn produce(&mut self, now: Instant) {
        self.produce_at(Some(now));
    }

    /// As [`GrpcConnection::produce`]; with no time given (`None`), the
    /// system clock is read if a producer needs the time.
    pub(crate) fn produce_at(&mut self, now: Option<Instant>) {
        self.clock = Clock::new(now);
        self.run_producers();
    }

    /// [`GrpcConnection::produce`] at the time of `self.clock`.
    fn run_producers(&mut self) {
        if self.credit_due() {
            self.return_credit();
        }
        let mut turns = self.ready.len();
        while turns > 0 {
            turns -= 1;
            if self.h2.output_len() >= self.produce_limit || self.h2.held_bytes() >= self.max_held {
                // Again once the socket took the output, or the client's
                // windows let held bytes out (a Writable event).
                break;
            }
            let Some(stream) = self.ready.pop_front() else {
                break;
            };
            let Some(call) = self.calls.get_mut(stream) else {
                continue;
            };
            call.queued = false;
            let State::Producing { producer, wake_at } = &mut call.state else {
                continue;
            };
            let room = if !call.headers_sent {
                PRODUCE_CHUNK
            } else if self.h2.buffered(stream) > 0 {
                // Its held bytes go first; a Writable event brings it back
                // when they go out.
                0
            } else {
                // As much as the windows let out now, so that the messages
                // go straight into the output. A stream whose windows are
                // shut makes nothing: it waits for the Writable event that
                // says they opened, and then makes its messages into the
                // output (not into its send buffer, to be copied from there
                // later).
                match self.h2.send_window(stream) {
                    0 => {
                        self.h2.await_room(stream);
                        0
                    }
                    open => open,
                }
            };
            let budget = room.min(PRODUCE_CHUNK);
            if budget == 0 {
                continue;
            }
            let mut end = None;
            let timers = &mut self.timers;
            // Read once for the producer's turn, not for each message.
            let now = self.clock.now();
            let compress = call.compress;
            let mut pull = |out: &mut Vec<u8>| {
                let start = out.len();
                while out.len() - start < budget {
                    match executor::pull(producer.as_mut(), now, out, compress) {
                        RawNext::Message => {}
                        RawNext::Wait(at) => {
                            *wake_at = Some(at);
                            timers.add(at, stream);
                            break;
                        }
                        RawNext::End(result) => {
                            end = Some(result.err());
                            break;
                        }
                    }
                }
            };
            // With the headers out and the windows open, the messages are
            // encoded straight into the output.
            let in_place = if call.headers_sent && !call.compress {
                self.h2.send_data_in_place(stream, &mut pull)
            } else {
                None
            };
            if in_place.is_none() {
                self.scratch.clear();
                pull(&mut self.scratch);
            }
            let waiting = wake_at.is_some();
            if let Some(made) = in_place {
                call.response_bytes += made as u64;
            } else if !self.scratch.is_empty() {
                let encoding = call.answer_encoding();
                send_headers_once(
                    &mut self.h2,
                    &mut self.memos,
                    &mut self.overlarge,
                    stream,
                    &mut call.headers_sent,
                    &call.response.headers,
                    encoding,
                );
                call.response_bytes += self.scratch.len() as u64;
                let data = if call.compress {
                    self.deflated.clear();
                    compression::deflate_frames(&self.scratch, encoding, &mut self.deflated);
                    &self.deflated
                } else {
                    &self.scratch
                };
                let sent = self.h2.send_data(stream, data, false);
                debug_assert!(
                    sent == data.len() || self.h2.error().is_some(),
                    "pulled within capacity"
                );
            }
            if let Some(status) = end {
                let call = self.take_call(stream).expect("found above");
                self.end_call(stream, call, status);
                continue;
            }
            if !waiting && self.h2.send_capacity(stream) > 0 {
                let call = self.calls.get_mut(stream).expect("found above");
                call.queued = true;
                self.ready.push_back(stream);
            }
        }
        fit_room(&mut self.deflated);
        if !self.overlarge.is_empty() {
            self.end_overlarge();
        }
    }

    // ----- answers from other threads -----

    /// Takes one answer part that came back from another thread; dropped if
    /// its call has ended. Call [`GrpcConnection::settle`] after a batch.
    pub(crate) fn deliver(&mut self, delivery: Delivery) {
        let stream = delivery.stream;
        if let Part::Room = delivery.part {
            return self.feed_starved();
        }
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let encoding = call.answer_encoding();
        let State::Remote(remote) = &mut call.state else {
            return;
        };
        match delivery.part {
            Part::Headers(metadata) => {
                send_headers_once(
                    &mut self.h2,
                    &mut self.memos,
                    &mut self.overlarge,
                    stream,
                    &mut call.headers_sent,
                    &metadata,
                    encoding,
                );
            }
            Part::Message(mut bytes) => {
                send_headers_once(
                    &mut self.h2,
                    &mut self.memos,
                    &mut self.overlarge,
                    stream,
                    &mut call.headers_sent,
                    &call.response.headers,
                    encoding,
                );
                call.response_bytes += bytes.len() as u64;
                if remote.backlog.is_empty()
                    && send_remote(
                        &mut self.h2,
                        &mut self.deflated,
                        stream,
                        remote,
                        encoding,
                        &mut bytes,
                    )
                {
                    self.touch(stream);
                } else {
                    remote.backlog.push_back(bytes);
                }
            }
            Part::Finish { status, trailers } => {
                call.response.trailers = trailers;
                if remote.backlog.is_empty() {
                    let call = self.take_call(stream).expect("found above");
                    self.end_call(stream, call, status);
                } else {
                    remote.finish = Some(status);
                }
            }
            Part::Answer {
                result,
                headers,
                trailers,
            } => {
                let call = self.take_call(stream).expect("found above");
                if let State::Remote(remote) = &call.state {
                    // Answered: a thread that still reads the requests of
                    // a client stream learns that they end here.
                    remote.shared.cancel(CancelReason::Ended);
                }
                if let (true, Some(started), Some(route)) =
                    (self.observing, call.started, call.route)
                {
                    let (code, sent) = match &result {
                        Ok(framed) => (Code::Ok, framed.len() as u64),
                        Err(status) => (status.code(), 0),
                    };
                    self.observe(route, code, started, call.request_bytes, sent);
                }
                self.recycle(call);
                self.response_metadata.clear();
                self.response_metadata.headers = headers;
                self.response_metadata.trailers = trailers;
                match result {
                    Ok(framed) => {
                        // It did not wait: the connection's sinks wait
                        // for it instead.
                        self.env.answer_to.lent.spend(framed.len());
                        self.lent_due += framed.len();
                        // Send from the answer's buffer, keeping the reply
                        // buffer (and its room) for the calls answered
                        // inline.
                        let inline = std::mem::replace(&mut self.reply, framed);
                        self.answer_message(stream, encoding);
                        self.reply = inline;
                    }
                    Err(status) => self.answer_status(stream, &status),
                }
            }
            Part::Resume => {
                remote.incoming_blocked = false;
                self.pump(stream);
            }
            Part::Room => unreachable!("taken above"),
        }
    }

    /// Offers their request messages again to the threads of the calls
    /// that waited for room in the connection's share.
    fn feed_starved(&mut self) {
        let starved = std::mem::take(&mut self.starved);
        for &stream in &starved {
            let Some(call) = self.calls.get_mut(stream) else {
                continue;
            };
            let State::Remote(remote) = &mut call.state else {
                continue;
            };
            remote.starved = false;
            if remote.incoming_blocked {
                remote.incoming_blocked = false;
                self.pump(stream);
            }
        }
        if self.starved.is_empty() {
            // Keep the room.
            self.starved = starved;
            self.starved.clear();
        }
    }

    /// Sends what a remote call's stream could not take before, and its
    /// end once all of it is out.
    fn drain_backlog(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let encoding = call.answer_encoding();
        let State::Remote(remote) = &mut call.state else {
            return;
        };
        while let Some(mut bytes) = remote.backlog.pop_front() {
            if !send_remote(
                &mut self.h2,
                &mut self.deflated,
                stream,
                remote,
                encoding,
                &mut bytes,
            ) {
                remote.backlog.push_front(bytes);
                return;
            }
        }
        if let Some(status) = remote.finish.take() {
            let call = self.take_call(stream).expect("found above");
            self.end_call(stream, call, status);
        }
    }

    fn touch(&mut self, stream: u32) {
        if !self.touched.contains(&stream) {
            self.touched.push(stream);
        }
    }

    /// Does what deliveries and events left to do: returns credit to the
    /// threads whose answer bytes left for the client, and pulls the
    /// producers that may send.
    pub fn settle(&mut self, now: Instant) {
        self.settle_at(Some(now));
    }

    /// As [`GrpcConnection::settle`]; with no time given (`None`), the
    /// system clock is read if a producer needs the time.
    pub(crate) fn settle_at(&mut self, now: Option<Instant>) {
        self.clock = Clock::new(now);
        self.settle_step();
    }

    /// [`GrpcConnection::settle`] at the time of `self.clock`.
    #[inline]
    fn settle_step(&mut self) {
        // What a step may leave to do is nearly always nothing: one test
        // of the lengths together, not a branch for each (-4 instructions
        // per read, docs/benchmarks.md).
        let pending = self.new_deadlines.len()
            | self.parked.len()
            | self.touched.len()
            | self.ready.len()
            | self.lent_due
            | self.overlarge.len();
        if pending != 0 {
            self.settle_pending();
        }
        debug_assert!(
            !self.calls.is_empty() || self.metadata_bytes == 0,
            "every call gives back the metadata it counted"
        );
    }

    /// Puts the deadlines of the calls opened since on the timer, runs the
    /// calls that wait for room and the producers, and ends the calls
    /// whose response headers were too large. Out of line: inlined, the
    /// test above kept the lengths it loaded for it.
    #[inline(never)]
    fn settle_pending(&mut self) {
        if !self.new_deadlines.is_empty() {
            self.arm_deadlines();
        }
        if !self.parked.is_empty() {
            self.run_parked();
        }
        if !self.touched.is_empty() || !self.ready.is_empty() || self.lent_due > 0 {
            self.run_producers();
        }
        if !self.overlarge.is_empty() {
            self.end_overlarge();
        }
    }

    /// Puts right a count that only a fault could leave wrong: called now
    /// and then (the worker's sweep; [`GrpcConnection::recv`] after every
    /// read) rather than at every read of the worker's. (The room to
    /// inflate or deflate a large message goes as soon as the message is
    /// through: [`fit_room`].)
    pub(crate) fn tidy(&mut self) {
        if self.calls.is_empty() {
            // No call holds metadata of its own now, whatever the count
            // (`settle_step` asserts that the count agrees).
            self.metadata_bytes = 0;
        }
    }

    /// Ends with `INTERNAL` the calls whose response headers went without
    /// their metadata, which the client's header list size limit would
    /// have refused (a call that ended meanwhile kept its status). Their
    /// producers are dropped, their threads see the call cancelled.
    #[cold]
    fn end_overlarge(&mut self) {
        for stream in std::mem::take(&mut self.overlarge) {
            if let Some(call) = self.take_call(stream) {
                let status = Status::internal(
                    "the response headers are larger than the client's header list size limit",
                );
                self.end_call(stream, call, Some(status));
            }
        }
    }

    /// Returns credit to the threads whose answer bytes left their stream
    /// for the output.
    fn return_credit(&mut self) {
        for stream in self.touched.drain(..) {
            let Some(call) = self.calls.get_mut(stream) else {
                continue;
            };
            let State::Remote(remote) = &mut call.state else {
                continue;
            };
            let gone = remote.unacked.saturating_sub(self.h2.buffered(stream));
            remote.unacked -= gone;
            let credit = gone + std::mem::take(&mut remote.owed);
            if credit > 0 {
                remote.shared.return_credit(credit);
            }
        }
        if self.lent_due > 0 {
            self.env
                .answer_to
                .lent
                .give(std::mem::take(&mut self.lent_due));
        }
    }

    // ----- time -----

    /// Ends the calls whose deadline has passed by `now`
    /// (`DEADLINE_EXCEEDED`), and wakes the producers whose time has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = Clock::at(now);
        let mut due = std::mem::take(&mut self.due);
        self.timers.expire(now, &mut due);
        for stream in due.drain(..) {
            let Some(call) = self.calls.get_mut(stream) else {
                let tag = self.h2.tag(stream);
                let passed = match self.waiting.get(tag, stream) {
                    Some(waiting) => waiting
                        .deadline(self.epoch)
                        .is_some_and(|deadline| deadline <= now),
                    None => false,
                };
                if passed {
                    let waiting = self.waiting.take(tag, stream).expect("found above");
                    let call = self.resume(waiting);
                    let status = Status::deadline_exceeded("the call's deadline passed");
                    self.end_call(stream, call, Some(status));
                }
                continue;
            };
            if call.deadline.is_some_and(|deadline| deadline <= now) {
                let call = self.take_call(stream).expect("found above");
                if let State::Remote(remote) = &call.state {
                    remote.shared.cancel(CancelReason::DeadlineExceeded);
                }
                let status = Status::deadline_exceeded("the call's deadline passed");
                self.end_call(stream, call, Some(status));
                continue;
            }
            if let State::Producing { wake_at, .. } = &mut call.state {
                if wake_at.is_some_and(|at| at <= now) {
                    *wake_at = None;
                    if !call.queued {
                        call.queued = true;
                        self.ready.push_back(stream);
                    }
                }
            }
        }
        self.due = due;
        self.prune_timers();
        self.settle_step();
    }

    /// Drops the timer entries of ended calls once they outnumber the live
    /// ones by far. Called as deadlines are armed too, not only when a time
    /// comes: calls that end long before their deadline would otherwise
    /// pile their entries up until it.
    #[inline]
    fn prune_timers(&mut self) {
        let (calls, waiting, h2) = (&self.calls, &self.waiting, &self.h2);
        self.timers.prune(calls.len() + waiting.len(), |stream| {
            calls.contains_key(stream) || waiting.get(h2.tag(stream), stream).is_some()
        });
    }

    /// Puts the deadlines of the calls opened in this read that are still
    /// open on the timer.
    fn arm_deadlines(&mut self) {
        for stream in self.new_deadlines.drain(..) {
            let deadline = match self.calls.get(stream) {
                Some(call) => call.deadline,
                None => self
                    .waiting
                    .get(self.h2.tag(stream), stream)
                    .and_then(|w| w.deadline(self.epoch)),
            };
            if let Some(deadline) = deadline {
                self.timers.add(deadline, stream);
            }
        }
        self.prune_timers();
    }

    // ----- commands -----

    /// Sends a keepalive PING: the peer's answer, as any bytes it sends,
    /// shows it is still there.
    pub fn ping(&mut self) {
        self.h2.ping(KEEPALIVE_PING);
    }

    /// Starts a graceful shutdown: GOAWAY, then open calls finish.
    pub fn go_away(&mut self) {
        self.h2.go_away();
    }

    /// Whether the first GOAWAY of [`GrpcConnection::go_away`] is out and
    /// its PING unanswered.
    pub fn is_draining(&self) -> bool {
        self.h2.is_draining()
    }

    /// Sends the second GOAWAY of [`GrpcConnection::go_away`] without the
    /// PING's answer (see
    /// [`h2::Connection::end_draining`](crate::h2::Connection::end_draining)).
    pub fn end_draining(&mut self) {
        self.h2.end_draining();
    }

    /// Closes the connection with a GOAWAY carrying `reason`; calls still
    /// served elsewhere learn that it closed.
    pub fn close(&mut self, reason: Reason, message: &'static str) {
        self.h2.close(reason, message);
        self.cancel_all();
    }

    /// Ends every open call with `status` (its trailers, or a trailers-only
    /// answer), then closes the connection with a GOAWAY(NO_ERROR) carrying
    /// `message`: for the end of a shutdown's grace period, with
    /// `UNAVAILABLE`, so that clients learn why their calls ended. Calls
    /// served on other threads learn that the connection closed.
    pub fn close_with_status(&mut self, status: &Status, message: &'static str) {
        self.cancel_all();
        for (stream, waiting) in self.waiting.take_all() {
            let call = self.resume(waiting);
            self.end_call(stream, call, Some(status.clone()));
        }
        let streams: Vec<u32> = self.calls.keys().collect();
        for stream in streams {
            if let Some(call) = self.take_call(stream) {
                self.end_call(stream, call, Some(status.clone()));
            }
        }
        self.ready.clear();
        self.h2.close(Reason::NO_ERROR, message);
    }

    /// Reports that the first `n` bytes of [`GrpcConnection::output`] were
    /// written.
    pub fn advance_output(&mut self, n: usize) {
        self.h2.advance_output(n);
    }

    /// Before the connection is served: lends it `spare`'s room for its
    /// output, where `spare`'s is the larger (as
    /// [`h2::Connection::lend_output_room`](crate::h2::Connection::lend_output_room)).
    /// With [`GrpcConnection::reclaim_room`] after, a caller serving many
    /// connections in turn keeps one large room for all of them.
    #[inline]
    pub fn lend_room(&mut self, spare: &mut SpareRoom) {
        self.h2.lend_output_room(&mut spare.output);
    }

    /// After the connection was served: gives output room above what one
    /// connection keeps back to `spare`, the larger of two buffers going
    /// there (as [`h2::Connection::reclaim_output_room`](crate::h2::Connection::reclaim_output_room)).
    #[inline]
    pub fn reclaim_room(&mut self, spare: &mut SpareRoom) {
        self.h2.reclaim_output_room(&mut spare.output);
    }

    /// Starts the connection's count of frames that moved no request
    /// forward again (as
    /// [`h2::Connection::forgive_unproductive`](crate::h2::Connection::forgive_unproductive)):
    /// call it once a minute or so, or a connection whose streams live
    /// longer than its client takes to send `max_unproductive_frames`
    /// keepalive PINGs is closed with ENHANCE_YOUR_CALM.
    pub fn forgive_unproductive(&mut self) {
        self.h2.forgive_unproductive();
    }

    /// Forgets every call, each ended cancelled (its thread told the
    /// connection closed): the connection has failed, or goes.
    #[cold]
    #[inline(never)]
    fn end_all_calls(&mut self) {
        for (_, waiting) in self.waiting.take_all() {
            self.observe_waiting_cancelled(&waiting);
        }
        let streams: Vec<u32> = self.calls.keys().collect();
        for stream in streams {
            if let Some(call) = self.take_call(stream) {
                self.end_cancelled(call, CancelReason::ConnectionClosed);
            }
        }
        self.ready.clear();
    }

    fn cancel_all(&mut self) {
        for call in self.calls.values() {
            if let State::Remote(remote) = &call.state {
                remote.shared.cancel(CancelReason::ConnectionClosed);
            }
        }
    }

    // ----- answers -----

    /// The unary answer in `self.reply`, with `self.response_metadata`;
    /// its message compressed with `encoding` unless that is identity.
    fn answer_message(&mut self, stream: u32, encoding: Encoding) {
        self.answered += 1;
        let md = &self.response_metadata;
        if encoding != Encoding::Identity {
            self.deflated.clear();
            compression::deflate_frames(&self.reply, encoding, &mut self.deflated);
            response::send_answer_with(
                &mut self.h2,
                &mut self.memos,
                stream,
                encoding,
                &self.deflated,
                &md.headers,
                &md.trailers,
                &mut self.text,
            );
            fit_room(&mut self.deflated);
            self.response_metadata.clear();
            return;
        }
        response::send_answer(
            &mut self.h2,
            &mut self.memos,
            stream,
            &self.reply,
            &md.headers,
            &md.trailers,
            &mut self.text,
        );
        // Sent: none of it may go with another call's answer.
        self.response_metadata.clear();
    }

    /// A trailers-only answer carrying `status`, with any metadata the
    /// handler set.
    fn answer_status(&mut self, stream: u32, status: &Status) {
        self.answered += 1;
        let md = &self.response_metadata;
        response::send_status_only(
            &mut self.h2,
            stream,
            Some(status),
            &md.headers,
            &md.trailers,
            &mut self.text,
        );
        self.response_metadata.clear();
    }

    /// Ends a call taken out of the table: its trailers (or a trailers-only
    /// answer) with `status` (`None` for `OK`), and the thread serving it,
    /// if any, learns that it ended. A request that is not gRPC gets its
    /// HTTP 415 (or 405) instead.
    fn end_call(&mut self, stream: u32, mut call: Box<Call>, mut status: Option<Status>) {
        // Its producer or handler goes first: a panic as it is dropped ends
        // a call that has not failed otherwise `INTERNAL`.
        if let Err(panic) = let_go(&mut call.state) {
            status.get_or_insert(panic);
        }
        self.answered += 1;
        if call.route.is_none() {
            // A request that is not gRPC, ended before its body did (its
            // deadline passed): still HTTP 415 (or 405). A gRPC status goes
            // with HTTP 200, which an HTTP client takes for a success.
            let why = call.not_grpc;
            self.recycle(call);
            return response::send_not_grpc(&mut self.h2, stream, why);
        }
        if let (true, Some(route)) = (self.observing, call.route) {
            // A call ended before its handler ran (its deadline passed, or
            // the server stopped, while its body was awaited) has no start:
            // its duration is zero.
            let started = call.started.unwrap_or_else(Instant::now);
            let code = status.as_ref().map_or(Code::Ok, Status::code);
            self.observe(
                route,
                code,
                started,
                call.request_bytes,
                call.response_bytes,
            );
        }
        if let State::Remote(remote) = &call.state {
            remote.shared.cancel(CancelReason::Ended);
        }
        let md = &call.response;
        if call.headers_sent {
            response::send_trailers(
                &mut self.h2,
                &mut self.memos,
                stream,
                status.as_ref(),
                &md.trailers,
                &mut self.text,
            );
        } else {
            response::send_status_only(
                &mut self.h2,
                stream,
                status.as_ref(),
                &md.headers,
                &md.trailers,
                &mut self.text,
            );
        }
        self.recycle(call);
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
/// to inflate or deflate, once it is through: a peer that sends one gzip
/// message of a few KiB inflating to the largest message allowed (or asks
/// for a large answer) on each of many connections would otherwise have
/// each of them hold that much (several MiB) until the room is next let
/// go. Called where the room is used, off the way of uncompressed calls.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::service::{Method, Service};
    use crate::grpc::status::Code;
    use crate::grpc::streaming::{RawInbound, RawServerStream};
    use crate::{BidiHandler, BidiStream, Responses, ServerStream};
    use pajamax_test_peer::{Client, ErrorCode, Frame};
    use std::time::Duration;

    thread_local! {
        static FIRST_RESPONDER: std::cell::RefCell<Option<crate::Responder>> =
            const { std::cell::RefCell::new(None) };
    }

    /// A handler that defers its call twice fails it with `INTERNAL` (the
    /// second `defer` panics), and the first responder sees the call
    /// ended: the call has one answer, and no thread waits for good.
    #[test]
    fn a_call_deferred_twice_ends_internal_and_its_first_responder_with_it() {
        let mut conn = connection();
        let inbox = Inbox::new(|| {});
        conn.set_inbox(inbox.clone(), 7);
        let mut client = Client::new();
        let mut input = Client::handshake(&[]);
        input.extend(client.request(
            1,
            "/test.S/Echo",
            &prost::Message::encode_to_vec(&b"2".to_vec()),
        ));
        conn.recv(&input, Instant::now());
        hear(&mut conn, &mut client);
        assert_eq!(client.heard().status(1), Some("13"));
        let first = FIRST_RESPONDER
            .with(|kept| kept.borrow_mut().take())
            .expect("kept");
        assert!(first.is_cancelled());
        // Its answer goes nowhere.
        first.respond(Ok(b"late".to_vec()));
        let mut deliveries = Vec::new();
        inbox.drain(&mut deliveries);
        for delivery in deliveries {
            conn.deliver(delivery);
        }
        hear(&mut conn, &mut client);
        assert!(client.heard().messages_on(1).is_empty());
        assert_eq!(conn.open_calls(), 0);
    }

    /// `test.S/Split` (server streaming: the request's bytes one by one)
    /// and `test.S/Chat` (bidi on the worker: each message back; after a
    /// message `bye`, the end sends `bye!` and fails with ABORTED).
    struct Split;

    #[derive(Default)]
    struct Back {
        parting: bool,
    }

    impl BidiHandler<Vec<u8>, Vec<u8>> for Back {
        fn on_message(
            &mut self,
            _: &mut Context<'_>,
            message: Vec<u8>,
            responses: &mut Responses<'_, Vec<u8>>,
        ) -> Result<(), Status> {
            self.parting = message == b"bye";
            responses.send(&message);
            Ok(())
        }

        fn on_end(
            &mut self,
            _: &mut Context<'_>,
            responses: &mut Responses<'_, Vec<u8>>,
        ) -> Result<(), Status> {
            if self.parting {
                responses.send(&b"bye!".to_vec());
                return Err(Status::aborted("parted"));
            }
            Ok(())
        }
    }

    impl Service for Split {
        fn name(&self) -> &'static str {
            "test.S"
        }

        fn methods(&self) -> &'static [Method] {
            const METHODS: [Method; 3] = [
                Method {
                    name: "Split",
                    kind: MethodKind::ServerStreaming,
                },
                Method {
                    name: "Chat",
                    kind: MethodKind::BidiStreaming,
                },
                Method::unary("Echo"),
            ];
            &METHODS
        }

        /// `Echo`: the request's bytes, then the `x-tag` metadata. A request
        /// of one letter asks for something else: `E` an error, `M` response
        /// metadata, `P` a panic, `B` an answer of 100,000 bytes, `H` one of
        /// 16,000 bytes, `L` one of 40,000 bytes, `Z` a compressed answer, `X` an error after an
        /// answer was encoded, `T` trailing metadata only, `D` an answer
        /// deferred (given at once, `D!`, before encoding another), `2` two
        /// deferrals (the first responder kept in `FIRST_RESPONDER`).
        fn unary(
            &self,
            _: usize,
            ctx: &mut Context<'_>,
            request: &[u8],
            reply: &mut crate::Reply<'_>,
        ) -> Result<(), Status> {
            let mut bytes: Vec<u8> = crate::decode_request(request)?;
            match &bytes[..] {
                b"E" => return Err(Status::invalid_argument("asked for")),
                b"M" => {
                    ctx.headers_mut().insert("x-head", "h").unwrap();
                    ctx.trailers_mut().insert("x-tail", "t").unwrap();
                }
                b"P" => panic!("asked for"),
                b"B" => bytes = vec![b'B'; 100_000],
                b"H" => bytes = vec![b'H'; 16_000],
                b"L" => bytes = vec![b'L'; 40_000],
                b"Z" => ctx.compress_response(true),
                b"X" => {
                    reply.encode(&bytes);
                    return Err(Status::invalid_argument("after encoding"));
                }
                b"T" => {
                    ctx.trailers_mut().insert("x-tail", "t").unwrap();
                }
                b"D" => ctx.defer().respond(Ok(b"D!".to_vec())),
                b"2" => {
                    let first = ctx.defer();
                    FIRST_RESPONDER.with(|kept| *kept.borrow_mut() = Some(first));
                    let _second = ctx.defer();
                }
                _ => {}
            }
            bytes.extend(ctx.metadata().get("x-tag").unwrap_or("").as_bytes());
            reply.encode(&bytes);
            Ok(())
        }

        fn server_streaming(
            &self,
            _: usize,
            _: &mut Context<'_>,
            request: &[u8],
        ) -> Result<RawServerStream, Status> {
            let bytes: Vec<u8> = crate::decode_request(request)?;
            Ok(ServerStream::iter(bytes.into_iter().map(|b| Ok(vec![b]))).into_raw())
        }

        fn bidi_streaming(&self, _: usize, _: &mut Context<'_>) -> Result<RawInbound, Status> {
            Ok(BidiStream::<Vec<u8>, Vec<u8>>::on_worker(Back::default()).into_raw())
        }
    }

    fn connection() -> GrpcConnection {
        let mut router = Router::new();
        router.add(Arc::new(Split));
        GrpcConnection::new(Arc::new(router), &GrpcConfig::default(), None)
    }

    #[test]
    fn a_server_stream_gets_back_the_deadline_its_client_asked_for() {
        let arrived = Instant::now();
        let ms = Duration::from_millis;
        let capped = |asked: Option<Duration>, longest: Duration| {
            Some(arrived + asked.map_or(longest, |asked| asked.min(longest)))
        };
        // Asked for more than the cap: the client's own, from arrival.
        let own = uncapped_deadline(capped(Some(ms(10_000)), ms(300)), Some(ms(10_000)), ms(300));
        assert_eq!(own, Some(arrived + ms(10_000)));
        // Asked for less: as capped.
        let own = uncapped_deadline(capped(Some(ms(100)), ms(300)), Some(ms(100)), ms(300));
        assert_eq!(own, Some(arrived + ms(100)));
        // Asked for nothing: none.
        assert_eq!(
            uncapped_deadline(capped(None, ms(300)), None, ms(300)),
            None
        );
        // Asked for more than the clock holds: none, as without a cap.
        let huge = Some(Duration::MAX);
        assert_eq!(
            uncapped_deadline(capped(huge, ms(300)), huge, ms(300)),
            None
        );
    }

    /// A graceful shutdown whose PING goes unanswered (`end_draining`),
    /// then a request, refused, and a connection error: the error's GOAWAY
    /// names the stream the second GOAWAY named, not the refused one
    /// (RFC 9113 section 6.8: the id never grows).
    #[test]
    fn the_goaway_of_an_error_after_a_drain_names_no_refused_stream() {
        let mut conn = connection();
        let now = Instant::now();
        conn.recv(&Client::handshake(&[]), now);
        conn.go_away();
        conn.end_draining();
        // HEADERS on stream 1 with an empty block and END_STREAM, then
        // DATA on stream 0.
        let input = [0, 0, 0, 1, 5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(conn.recv(&input, now), input.len());
        assert!(conn.is_closed());
        let mut client = Client::new();
        let received = client.receive(conn.output()).expect("frames");
        let named: Vec<u32> = received
            .iter()
            .filter_map(|r| r.frame.last_stream())
            .collect();
        assert_eq!(named, [0x7fff_ffff, 0, 0], "{received:?}");
    }

    /// A client that sends many calls at once and reads their answers
    /// slowly is served in turn: once the answers held for its windows pass
    /// the limit, the calls that come after wait with their requests (none
    /// is refused), and run in order as it reads. A waiting call the client
    /// resets is let go, one whose deadline passes ends DEADLINE_EXCEEDED,
    /// and a stream of requests, whose messages would wait with it, is
    /// refused meanwhile.
    #[test]
    fn calls_past_the_held_limit_wait_for_the_client_to_read() {
        let (mut conn, mut client, mut input) = held_past_two_answers();
        let big = big_answer();
        for stream in [1, 3, 5, 7, 9] {
            input.extend(client.request(stream, "/test.S/Echo", &big));
        }
        let now = Instant::now();
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        // 1 and 3 ran (200,000 bytes held); 5, 7 and 9 wait.
        assert_eq!(conn.parks, 3);
        // Each answer: 100,000 bytes in a field (4 bytes of tag and length),
        // framed (5).
        assert_eq!(conn.h2().held_bytes(), 2 * 100_009);
        assert_eq!(client.heard().blocks.len(), 2, "headers of 1 and 3 only");
        assert!(client.heard().resets.is_empty());
        // Meanwhile: 5 is reset, a call with a deadline waits, a stream of
        // requests is refused.
        let mut input = Frame::rst_stream(5, ErrorCode::CANCEL).to_bytes();
        let deadline = client.request_block("/test.S/Echo", &[("grpc-timeout", "10m")]);
        Frame::headers(11, &deadline, false).write(&mut input);
        Frame::data(11, &pajamax_test_peer::grpc::message(&big), true).write(&mut input);
        input.extend(client.request(13, "/test.S/Chat", &big));
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        assert_eq!(conn.parks, 4);
        assert_eq!(client.heard().resets, [(13, ErrorCode::REFUSED_STREAM)]);
        let later = now + Duration::from_millis(20);
        conn.handle_timeout(later);
        hear(&mut conn, &mut client);
        assert_eq!(client.heard().status(11), Some("4"));
        // The client reads 1 and 3: 7 and 9 run, in order; 5 is gone.
        let mut input = Frame::window_update(0, 1 << 24).to_bytes();
        for stream in [1, 3] {
            Frame::window_update(stream, 200_000).write(&mut input);
        }
        conn.recv(&input, later);
        hear(&mut conn, &mut client);
        assert_eq!(client.heard().status(1), Some("0"));
        assert_eq!(client.heard().status(3), Some("0"));
        let answered: Vec<u32> = client
            .heard()
            .blocks
            .iter()
            .map(|block| block.stream)
            .filter(|&stream| stream == 7 || stream == 9)
            .collect();
        assert_eq!(answered, [7, 9], "headers of 7 then 9");
        assert!(client.heard().status(5).is_none());
        let mut input = Vec::new();
        for stream in [7, 9] {
            Frame::window_update(stream, 200_000).write(&mut input);
        }
        conn.recv(&input, later);
        client.receive(conn.output()).unwrap();
        assert_eq!(client.heard().status(7), Some("0"));
        assert_eq!(client.heard().status(9), Some("0"));
        assert_eq!(conn.open_calls(), 0);
        assert_eq!(conn.buffered_request_bytes(), 0);
    }

    /// A call that waits for the client to read runs before the calls that
    /// come after it, even those that come in the read that lets it run: a
    /// client whose every read both opens its windows and sends a new call
    /// would otherwise have the new calls served and the waiting one wait
    /// for good.
    #[test]
    fn a_waiting_call_runs_before_calls_that_come_with_the_windows_it_waits_for() {
        let (mut conn, mut client, mut input) = held_past_two_answers();
        let big = big_answer();
        Frame::window_update(0, 1 << 30).write(&mut input);
        // 1 and 3 run (200,018 bytes held), 5 waits.
        for stream in [1, 3, 5] {
            input.extend(client.request(stream, "/test.S/Echo", &big));
        }
        let now = Instant::now();
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        assert_eq!(conn.parks, 1);
        // Each read lets one answer out and brings a new call.
        for (read, (opened, new)) in [(1, 7), (3, 9), (7, 11)].into_iter().enumerate() {
            let mut input = Frame::window_update(opened, 200_000).to_bytes();
            input.extend(client.request(new, "/test.S/Echo", &big));
            conn.recv(&input, now);
            hear(&mut conn, &mut client);
            let heads: Vec<u32> = client
                .heard()
                .blocks
                .iter()
                .map(|block| block.stream)
                .filter(|&stream| stream > 3)
                .collect();
            assert_eq!(heads.first(), Some(&5), "read {read}: {heads:?}");
        }
        // 11 waits; a read that resets it and lets 5 out does not run it.
        conn.take_answered();
        let mut input = Frame::rst_stream(11, ErrorCode::CANCEL).to_bytes();
        Frame::window_update(5, 200_000).write(&mut input);
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        assert_eq!(client.heard().status(5), Some("0"));
        assert!(client.heard().blocks.iter().all(|block| block.stream != 11));
        assert_eq!(conn.take_answered(), 0, "11's handler did not run");
        assert_eq!(conn.open_calls(), 0);
        assert_eq!(conn.buffered_request_bytes(), 0);
    }

    /// Calls that end while they wait for the client to read (their
    /// deadline passes, or the client resets them) leave no trace: a client
    /// that never reads and sends call after call with a short deadline
    /// does not grow the list of waiting calls without end.
    #[test]
    fn calls_that_end_while_waiting_do_not_pile_up() {
        let (mut conn, mut client, mut input) = held_past_two_answers();
        let big = big_answer();
        for stream in [1, 3] {
            input.extend(client.request(stream, "/test.S/Echo", &big));
        }
        let mut now = Instant::now();
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        let small = prost::Message::encode_to_vec(&b"s".to_vec());
        let body = pajamax_test_peer::grpc::message(&small);
        let mut stream = 5;
        for round in 0..100 {
            let mut input = Vec::new();
            for _ in 0..10 {
                let block = client.request_block("/test.S/Echo", &[("grpc-timeout", "1m")]);
                Frame::headers(stream, &block, false).write(&mut input);
                Frame::data(stream, &body, true).write(&mut input);
                stream += 2;
            }
            // One in ten is reset instead.
            Frame::rst_stream(stream - 2, ErrorCode::CANCEL).write(&mut input);
            conn.recv(&input, now);
            now += Duration::from_millis(2);
            conn.handle_timeout(now);
            hear(&mut conn, &mut client);
            assert_eq!(conn.open_calls(), 0, "round {round}");
            assert!(
                conn.parked.len() <= 20,
                "round {round}: {}",
                conn.parked.len()
            );
        }
        // The reset ones never ran nor waited: reset in the read that
        // opened them.
        assert_eq!(conn.parks, 900);
        assert_eq!(client.heard().status(stream - 4), Some("4"));
        assert_eq!(conn.buffered_request_bytes(), 0);
    }

    #[test]
    fn producers_held_back_by_the_clients_windows_do_not_ask_for_turns() {
        let mut router = Router::new();
        router.add(Arc::new(Split));
        let mut config = GrpcConfig::default();
        config.h2.max_held_bytes = 100;
        let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
        let mut client = Client::new();
        // The client's streams may take one byte each.
        let mut input = Client::handshake(&[(0x4, 1)]);
        let request = prost::Message::encode_to_vec(&vec![7u8; 200]);
        for stream in [1, 3, 5] {
            input.extend(client.request(stream, "/test.S/Split", &request));
        }
        let now = Instant::now();
        conn.recv(&input, now);
        conn.produce(now);
        assert!(conn.h2().held_bytes() >= 100);
        assert!(
            !conn.wants_to_produce(),
            "held back by the windows: nothing to do until they open"
        );
    }

    /// A producer whose windows are shut makes nothing until they open:
    /// a stream holds no more than the part of a message past the window,
    /// not a send buffer full of messages to be copied out later, even when
    /// another stream used up the connection's window.
    #[test]
    fn producers_wait_for_the_windows_without_filling_their_send_buffer() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        let mut input = Client::handshake(&[]);
        // 10,000 messages of 8 bytes framed on each of two streams: more
        // than the windows' 65,535 bytes.
        let request = prost::Message::encode_to_vec(&vec![7u8; 10_000]);
        for stream in [1, 3] {
            input.extend(client.request(stream, "/test.S/Split", &request));
        }
        conn.recv(&input, now);
        let mut rounds = 0;
        while client.heard().status(1).is_none() || client.heard().status(3).is_none() {
            rounds += 1;
            assert!(rounds < 100, "the streams should end");
            while conn.wants_to_produce() {
                conn.produce(now);
                hear(&mut conn, &mut client);
            }
            // A wait holds less than one message per stream.
            assert!(
                conn.h2().held_bytes() < 2 * 8,
                "{} bytes held while the windows are shut",
                conn.h2().held_bytes()
            );
            let mut updates = Vec::new();
            for stream in [0, 1, 3] {
                Frame::window_update(stream, 20_000).write(&mut updates);
            }
            conn.recv(&updates, now);
            hear(&mut conn, &mut client);
        }
        let heard = client.take_heard();
        for stream in [1, 3] {
            assert_eq!(heard.status(stream), Some("0"));
            let messages = heard.messages_on(stream);
            assert_eq!(messages.len(), 10_000);
            assert!(messages.iter().all(|m| *m == [0x0a, 1, 7]));
        }
    }

    /// What a bidirectional handler sends in its `on_end` goes out before
    /// the status it ends with, as what it sends before an error from
    /// `on_message` does.
    #[test]
    fn messages_sent_at_the_end_go_before_the_error_it_returns() {
        let mut conn = connection();
        let mut client = Client::new();
        let mut input = Client::handshake(&[]);
        let request = prost::Message::encode_to_vec(&b"bye".to_vec());
        input.extend(client.request(1, "/test.S/Chat", &request));
        conn.recv(&input, Instant::now());
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(1), Some("10"), "ABORTED");
        let bye = prost::Message::encode_to_vec(&b"bye".to_vec());
        let parting = prost::Message::encode_to_vec(&b"bye!".to_vec());
        assert_eq!(heard.messages_on(1), vec![&bye[..], &parting[..]]);
    }

    /// Answers to the messages of a read go out before the status of a
    /// message after them that the call cannot take (too large, or not
    /// inflating): a bad message ends the call, it does not take back what
    /// was answered already.
    #[test]
    fn answers_before_a_bad_message_go_before_its_status() {
        let good = |m: &[u8]| {
            pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&m.to_vec()))
        };
        // Past the message size limit; and compressed, but not gzip.
        let too_large = [0, 0xff, 0xff, 0xff, 0xff];
        let bad_gzip = [1, 0, 0, 0, 3, 1, 2, 3];
        for (bad, encoding, code) in [
            (&too_large[..], "identity", "8"),
            (&bad_gzip[..], "gzip", "13"),
        ] {
            let mut conn = connection();
            let mut client = Client::new();
            let mut input = Client::handshake(&[]);
            client
                .request_headers(1, "/test.S/Chat", &[("grpc-encoding", encoding)], false)
                .write(&mut input);
            let mut body = good(b"a");
            body.extend(good(b"b"));
            body.extend(bad);
            Frame::data(1, &body, false).write(&mut input);
            conn.recv(&input, Instant::now());
            hear(&mut conn, &mut client);
            let heard = client.take_heard();
            assert_eq!(heard.status(1), Some(code), "{encoding}");
            let a = prost::Message::encode_to_vec(&b"a".to_vec());
            let b = prost::Message::encode_to_vec(&b"b".to_vec());
            assert_eq!(heard.messages_on(1), vec![&a[..], &b[..]], "{encoding}");
        }
    }

    #[test]
    fn a_connection_error_in_the_read_of_a_request_ends_its_calls_quietly() {
        for path in ["/test.S/Split", "/test.S/Chat"] {
            let mut conn = connection();
            let mut client = Client::new();
            let mut input = Client::handshake(&[]);
            let request = prost::Message::encode_to_vec(&b"abc".to_vec());
            input.extend(client.request(1, path, &request));
            // A PING of 7 bytes: a connection error in the same read.
            input.extend(pajamax_test_peer::frame_bytes(6, 0, 0, &[0; 7]));
            let now = Instant::now();
            assert_eq!(conn.recv(&input, now), input.len());
            conn.produce(now);
            assert!(conn.is_closed());
            assert_eq!(conn.open_calls(), 0);
            assert!(!conn.wants_to_produce());
            let out = conn.output().to_vec();
            let frames: Vec<_> = std::iter::successors(Frame::parse(&out), |(_, used)| {
                let rest = &out[*used..];
                Frame::parse(rest).map(|(f, n)| (f, used + n))
            })
            .map(|(f, _)| f)
            .collect();
            assert!(frames.iter().any(|f| f.header().kind == 7), "a GOAWAY");
        }
    }

    /// A connection whose answers may hold 150,000 bytes for the client's
    /// windows before new calls wait (two answers of [`big_answer`]), its
    /// client, and the client's first bytes: a handshake that gives every
    /// stream a window of nothing, so that every answer waits.
    fn held_past_two_answers() -> (GrpcConnection, Client, Vec<u8>) {
        let mut router = Router::new();
        router.add(Arc::new(Split));
        let mut config = GrpcConfig::default();
        config.h2.max_held_bytes = 150_000;
        let conn = GrpcConnection::new(Arc::new(router), &config, None);
        (conn, Client::new(), Client::handshake(&[(0x4, 0)]))
    }

    /// The request of an `Echo` answered with 100,000 bytes.
    fn big_answer() -> Vec<u8> {
        prost::Message::encode_to_vec(&b"B".to_vec())
    }

    /// Writes out what `conn` has to send, into what `client` heard.
    fn hear(conn: &mut GrpcConnection, client: &mut Client) {
        let out = conn.output().to_vec();
        conn.advance_output(out.len());
        client.receive(&out).unwrap();
    }

    /// The HEADERS of an `Echo` with `x-tag: !` on each of `streams`, with
    /// no body yet.
    fn tagged_heads(client: &mut Client, streams: &[u32], input: &mut Vec<u8>) {
        for &stream in streams {
            let block = client.request_block("/test.S/Echo", &[("x-tag", "!")]);
            Frame::headers(stream, &block, false).write(input);
        }
    }

    /// Each stream's whole request body: one message, the stream's number
    /// as a byte.
    fn own_number_bodies(streams: &[u32]) -> Vec<u8> {
        let mut input = Vec::new();
        for &stream in streams {
            let message = prost::Message::encode_to_vec(&vec![stream as u8]);
            let body = pajamax_test_peer::grpc::message(&message);
            Frame::data(stream, &body, true).write(&mut input);
        }
        input
    }

    #[test]
    fn calls_whose_body_comes_later_wait_as_their_head() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        let mut input = Client::handshake(&[]);
        // The first block adds its fields to the table, the second refers to
        // them, and the ones after repeat the second: those calls wait as
        // their shared head.
        let streams = [1, 3, 5, 7, 9];
        tagged_heads(&mut client, &streams, &mut input);
        conn.recv(&input, now);
        assert_eq!(conn.open_calls(), 5);
        assert!(conn.waiting.len() >= 3, "{}", conn.waiting.len());
        assert!(conn.calls.len() <= 2);
        // A reset call is forgotten.
        let rst = Frame::rst_stream(9, pajamax_test_peer::ErrorCode::CANCEL).to_bytes();
        conn.recv(&rst, now);
        assert_eq!(conn.open_calls(), 4);
        conn.recv(&own_number_bodies(&[1, 3, 5, 7]), now);
        assert_eq!(conn.open_calls(), 0);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        for stream in [1, 3, 5, 7] {
            assert_eq!(heard.status(stream), Some("0"), "stream {stream}");
            let reply: Vec<u8> = prost::Message::decode(heard.messages_on(stream)[0]).unwrap();
            assert_eq!(reply, [stream as u8, b'!'], "its own body and metadata");
        }
        assert_eq!(heard.status(9), None);
    }

    #[test]
    fn bodies_that_follow_all_the_heads_of_a_read_each_reach_their_own_call() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        let mut input = Client::handshake(&[]);
        let streams = [1, 3, 5, 7, 9, 11];
        tagged_heads(&mut client, &streams, &mut input);
        // Bodies after every head, in another order for some, and stream
        // 11's in two DATA frames.
        input.extend(own_number_bodies(&[1, 3, 7, 5, 9]));
        let message = prost::Message::encode_to_vec(&vec![11u8]);
        let body = pajamax_test_peer::grpc::message(&message);
        Frame::data(11, &body[..3], false).write(&mut input);
        Frame::data(11, &body[3..], true).write(&mut input);
        conn.recv(&input, now);
        assert_eq!(conn.open_calls(), 0);
        assert_eq!(conn.waiting.len(), 0);
        // Streams 1, 3 and 7 found their body ahead; 5 and 9 came after 7's
        // where they looked, and 11's first DATA does not end it.
        assert_eq!(conn.waits, 3);
        hear(&mut conn, &mut client);
        let expected: Vec<(u32, &str)> = streams.iter().map(|&s| (s, "0")).collect();
        assert_own_replies(&client.take_heard(), &expected);
    }

    #[test]
    fn bodies_found_ahead_that_cannot_run_at_once_still_reach_their_call() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        let mut input = Client::handshake(&[]);
        let body =
            |n: u8| pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![n]));
        let two = |n: u8| [body(n), body(n)].concat();
        let mut head = |input: &mut Vec<u8>, stream: u32, gzip: bool| {
            let extra: &[(&str, &str)] = if gzip {
                &[("x-tag", "!"), ("grpc-encoding", "gzip")]
            } else {
                &[("x-tag", "!")]
            };
            let block = client.request_block("/test.S/Echo", extra);
            Frame::headers(stream, &block, false).write(input);
        };
        // 1: a compressed message (a call in a box).
        head(&mut input, 1, true);
        let mut deflated = Vec::new();
        compression::deflate_frames(&body(1), Encoding::Gzip, &mut deflated);
        Frame::data(1, &deflated, true).write(&mut input);
        // 3: the first plain head (a call in a box), its whole body.
        head(&mut input, 3, false);
        Frame::data(3, &body(3), true).write(&mut input);
        // 5, 7, 9: repeated heads (light records): two messages; a message,
        // then an empty DATA that ends the stream; a cut message.
        head(&mut input, 5, false);
        Frame::data(5, &two(5), true).write(&mut input);
        head(&mut input, 7, false);
        Frame::data(7, &body(7), false).write(&mut input);
        Frame::data(7, &[], true).write(&mut input);
        head(&mut input, 9, false);
        Frame::data(9, &body(9)[..6], true).write(&mut input);
        // 11, 13: both heads first, then their bodies.
        head(&mut input, 11, false);
        head(&mut input, 13, false);
        Frame::data(11, &body(11), true).write(&mut input);
        Frame::data(13, &two(13), true).write(&mut input);
        conn.recv(&input, now);
        assert_eq!(conn.open_calls(), 0);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        let expected = [
            (1, "0"),
            (3, "0"),
            (5, "13"),
            (7, "0"),
            (9, "13"),
            (11, "0"),
            (13, "13"),
        ];
        assert_own_replies(&heard, &expected);
    }

    /// Each `(stream, grpc-status)` was heard, and each call that ended
    /// OK answered with its own body: the stream's number, then `!`.
    fn assert_own_replies(heard: &pajamax_test_peer::Heard, expected: &[(u32, &str)]) {
        for &(stream, status) in expected {
            assert_eq!(heard.status(stream), Some(status), "stream {stream}");
            if status == "0" {
                let reply: Vec<u8> = prost::Message::decode(heard.messages_on(stream)[0]).unwrap();
                assert_eq!(reply, [stream as u8, b'!'], "stream {stream}'s own body");
            }
        }
    }

    #[test]
    fn answers_of_every_kind_follow_answers_written_in_place() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        conn.recv(&Client::handshake(&[]), now);
        hear(&mut conn, &mut client);
        // From the second answer on, the kept blocks hold and a plain
        // answer's message is encoded straight into the output; the other
        // kinds are taken back from there.
        let asks: [&[u8]; 14] = [
            b"a", b"b", b"c", b"E", b"d", b"M", b"e", b"P", b"f", b"B", b"g", b"h", b"L", b"i",
        ];
        for (i, ask) in asks.into_iter().enumerate() {
            let stream = 1 + 2 * i as u32;
            let message = prost::Message::encode_to_vec(&ask.to_vec());
            let in_place_before = conn.answered_in_place;
            conn.recv(&client.request(stream, "/test.S/Echo", &message), now);
            hear(&mut conn, &mut client);
            if ask == b"L" {
                // Larger than a frame, within the windows: in place, in
                // three DATA frames.
                assert_eq!(conn.answered_in_place, in_place_before + 1);
                assert_eq!(client.heard().data_frames, 3);
            }
            if ask == b"B" {
                // Held for the client's windows, then sent on.
                assert_eq!(client.heard().status(stream), None);
                let mut more = Frame::window_update(0, 1 << 20).to_bytes();
                Frame::window_update(stream, 1 << 20).write(&mut more);
                conn.recv(&more, now);
                hear(&mut conn, &mut client);
            }
            let heard = client.take_heard();
            let status = match ask {
                b"E" => "3",
                b"P" => "13",
                _ => "0",
            };
            assert_eq!(heard.status(stream), Some(status), "{ask:?}");
            let replies: Vec<Vec<u8>> = heard
                .messages_on(stream)
                .into_iter()
                .map(|m| prost::Message::decode(m).unwrap())
                .collect();
            let expected = match ask {
                b"E" | b"P" => vec![],
                b"B" => vec![vec![b'B'; 100_000]],
                b"L" => vec![vec![b'L'; 40_000]],
                _ => vec![ask.to_vec()],
            };
            assert_eq!(replies, expected, "{ask:?}");
            let field = |name: &str| heard.blocks.iter().find_map(|block| block.value(name));
            // Headers and trailers, or a trailers-only answer: nothing
            // left over from an answer taken back.
            let blocks = heard.blocks.iter().filter(|b| b.stream == stream).count();
            let trailers_only = matches!(ask, b"E" | b"P");
            assert_eq!(blocks, if trailers_only { 1 } else { 2 }, "{ask:?}");
            let metadata = ask == b"M";
            assert_eq!(field("x-head").is_some(), metadata, "{ask:?}");
            assert_eq!(field("x-tail").is_some(), metadata, "{ask:?}");
        }
        assert_eq!(conn.open_calls(), 0);
        assert_eq!(conn.h2().open_streams(), 0);
        // Of the eight plain answers, those after the first two and after
        // the first one following a change of the HPACK table went in
        // place.
        assert!(conn.answered_in_place >= 3, "{}", conn.answered_in_place);
    }

    /// Sends a unary `Echo` of `ask` on `stream` with the `extra` fields,
    /// and returns what was heard; `in_place` says whether the answer was
    /// written in place.
    fn echo(
        conn: &mut GrpcConnection,
        client: &mut Client,
        stream: u32,
        ask: &[u8],
        extra: &[(&str, &str)],
    ) -> (pajamax_test_peer::Heard, bool) {
        let before = conn.answered_in_place;
        let message = prost::Message::encode_to_vec(&ask.to_vec());
        let mut input = client
            .request_headers(stream, "/test.S/Echo", extra, false)
            .to_bytes();
        let body = pajamax_test_peer::grpc::message(&message);
        Frame::data(stream, &body, true).write(&mut input);
        conn.recv(&input, Instant::now());
        hear(conn, client);
        (client.take_heard(), conn.answered_in_place > before)
    }

    /// The one reply on `stream`, decoded, with its status.
    fn reply_on(heard: &pajamax_test_peer::Heard, stream: u32) -> (Option<&str>, Vec<Vec<u8>>) {
        let replies = heard
            .messages_on(stream)
            .into_iter()
            .map(|m| prost::Message::decode(m).unwrap())
            .collect();
        (heard.status(stream), replies)
    }

    #[test]
    fn answers_begun_in_place_and_taken_back_go_the_general_way() {
        // Each kind that must be taken back comes right after a plain
        // answer that went in place: the kept blocks hold when it begins.
        let mut router = Router::new();
        router.add(Arc::new(Split));
        let deny = |_: &crate::grpc::intercept::CallInfo<'_>, ctx: &mut Context<'_>| match ctx
            .metadata()
            .get("x-deny")
        {
            Some(_) => Err(Status::permission_denied("denied")),
            None => Ok(()),
        };
        router.hooks_mut().interceptors.push(Arc::new(deny));
        let mut conn = GrpcConnection::new(Arc::new(router), &GrpcConfig::default(), None);
        let inbox = Inbox::new(|| {});
        conn.set_inbox(inbox.clone(), 7);
        let mut client = Client::new();
        conn.recv(&Client::handshake(&[]), Instant::now());
        hear(&mut conn, &mut client);
        let mut stream = 1;
        // Plain answers until one goes in place again.
        let warm = |conn: &mut GrpcConnection, client: &mut Client, stream: &mut u32| {
            for _ in 0..3 {
                *stream += 2;
                let (heard, in_place) = echo(conn, client, *stream, b"w", &[]);
                assert_eq!(reply_on(&heard, *stream), (Some("0"), vec![b"w".to_vec()]));
                if in_place {
                    *stream += 2;
                    return *stream;
                }
            }
            panic!("no answer in place");
        };

        // An empty message, in place.
        let s = warm(&mut conn, &mut client, &mut stream);
        let (heard, in_place) = echo(&mut conn, &mut client, s, b"", &[]);
        assert!(in_place);
        assert_eq!(reply_on(&heard, s), (Some("0"), vec![vec![]]));

        // Compression the handler asks for, the client accepting gzip.
        let s = warm(&mut conn, &mut client, &mut stream);
        let (heard, in_place) = echo(
            &mut conn,
            &mut client,
            s,
            b"Z",
            &[("grpc-accept-encoding", "gzip")],
        );
        assert!(!in_place);
        assert_eq!(heard.status(s), Some("0"));
        let encoding = heard.blocks.iter().find_map(|b| b.value("grpc-encoding"));
        assert_eq!(encoding.as_deref(), Some("gzip"), "compressed as asked");
        let message = heard.messages_on(s)[0];
        assert_eq!(&message[..2], &[0x1f, 0x8b], "a gzip member");

        // An error after an answer was encoded: trailers only.
        let s = warm(&mut conn, &mut client, &mut stream);
        let (heard, in_place) = echo(&mut conn, &mut client, s, b"X", &[]);
        assert!(!in_place);
        assert_eq!(reply_on(&heard, s), (Some("3"), vec![]));
        assert_eq!(heard.blocks.len(), 1);

        // A call an interceptor turns away.
        let s = warm(&mut conn, &mut client, &mut stream);
        let (heard, in_place) = echo(&mut conn, &mut client, s, b"a", &[("x-deny", "1")]);
        assert!(!in_place);
        assert_eq!(reply_on(&heard, s), (Some("7"), vec![]));
        assert_eq!(heard.blocks.len(), 1);

        // A deferred call: nothing until its answer comes back, and then
        // the answer given, not what the handler encoded.
        let s = warm(&mut conn, &mut client, &mut stream);
        let (heard, in_place) = echo(&mut conn, &mut client, s, b"D", &[]);
        assert!(!in_place);
        assert_eq!(heard.frames, 0, "{heard:?}");
        assert_eq!(conn.open_calls(), 1);
        let mut deliveries = Vec::new();
        inbox.drain(&mut deliveries);
        for delivery in deliveries {
            conn.deliver(delivery);
        }
        conn.settle(Instant::now());
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"D!".to_vec()]));

        // The kept headers hold but the kept trailers do not: an error with
        // a status not sent before changes the table, and an answer with
        // trailing metadata only keeps the headers again but not
        // `grpc-status: 0`.
        let s = warm(&mut conn, &mut client, &mut stream);
        assert_eq!(
            reply_on(&echo(&mut conn, &mut client, s, b"P", &[]).0, s).0,
            Some("13")
        );
        stream += 2;
        let s = stream;
        let (heard, _) = echo(&mut conn, &mut client, s, b"T", &[]);
        assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"T".to_vec()]));
        stream += 2;
        let s = stream;
        let (heard, in_place) = echo(&mut conn, &mut client, s, b"a", &[]);
        assert!(!in_place, "the trailers' memo is stale");
        assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"a".to_vec()]));
        assert_eq!(heard.blocks.len(), 2);
        let s = s + 2;
        let (heard, in_place) = echo(&mut conn, &mut client, s, b"b", &[]);
        assert!(in_place);
        assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"b".to_vec()]));

        // In one read, behind a PING's answer and answers in place: answers
        // taken back leave what came before them as it was.
        let asks: [&[u8]; 6] = [b"c", b"X", b"d", b"Z", b"e", b"f"];
        let mut input = Frame::ping([9; 8]).to_bytes();
        let first = s + 2;
        for (i, ask) in asks.iter().enumerate() {
            let stream = first + 2 * i as u32;
            let message = prost::Message::encode_to_vec(&ask.to_vec());
            let extra: &[(&str, &str)] = &[("grpc-accept-encoding", "gzip")];
            Frame::headers(stream, &client.request_block("/test.S/Echo", extra), false)
                .write(&mut input);
            let body = pajamax_test_peer::grpc::message(&message);
            Frame::data(stream, &body, true).write(&mut input);
        }
        let before = conn.answered_in_place;
        conn.recv(&input, Instant::now());
        assert!(conn.answered_in_place > before);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        for (i, ask) in asks.iter().enumerate() {
            let stream = first + 2 * i as u32;
            match *ask {
                b"X" => assert_eq!(reply_on(&heard, stream), (Some("3"), vec![])),
                b"Z" => assert_eq!(heard.status(stream), Some("0")),
                _ => assert_eq!(reply_on(&heard, stream), (Some("0"), vec![ask.to_vec()])),
            }
        }

        assert_eq!(conn.open_calls(), 0);
        assert_eq!(conn.h2().open_streams(), 0);
    }

    #[test]
    fn answers_in_place_use_up_the_connection_window() {
        let mut conn = connection();
        let mut client = Client::new();
        conn.recv(&Client::handshake(&[]), Instant::now());
        hear(&mut conn, &mut client);
        // Two small answers, then answers of 16,008 bytes in one frame each,
        // every stream with a fresh window of 65,535: the fifth large one
        // finds the connection's window used up.
        let mut left = 65_535usize;
        for (stream, ask) in [(1, &b"a"[..]), (3, b"b")] {
            let (heard, _) = echo(&mut conn, &mut client, stream, ask, &[]);
            assert_eq!(heard.status(stream), Some("0"));
            left -= heard.data_bytes;
        }
        for stream in [5, 7, 9, 11] {
            let (heard, in_place) = echo(&mut conn, &mut client, stream, b"H", &[]);
            assert!(in_place);
            assert_eq!(heard.status(stream), Some("0"));
            left -= heard.data_bytes;
        }
        assert!(left < 16_000, "{left}");
        let (heard, in_place) = echo(&mut conn, &mut client, 13, b"H", &[]);
        assert!(!in_place);
        assert_eq!(heard.status(13), None, "held for the connection's window");
        assert_eq!(
            heard.data_bytes, left,
            "what the connection's window lets out"
        );
        conn.recv(&Frame::window_update(0, 1 << 20).to_bytes(), Instant::now());
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(13), Some("0"));
    }

    #[test]
    fn calls_of_blocks_that_take_turns_wait_as_their_own_heads() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        let mut input = Client::handshake(&[]);
        // Two header blocks in turn (as a client calling with two tags):
        // once each is in the HPACK table, both are remembered.
        let streams: Vec<u32> = (0..12).map(|i| 1 + 2 * i).collect();
        let tag = |stream: u32| if stream % 4 == 1 { "a" } else { "b" };
        for &stream in &streams {
            Frame::headers(
                stream,
                &client.request_block("/test.S/Echo", &[("x-tag", tag(stream))]),
                false,
            )
            .write(&mut input);
        }
        conn.recv(&input, now);
        assert_eq!(conn.open_calls(), 12);
        assert!(conn.waiting.len() >= 8, "{}", conn.waiting.len());
        conn.recv(&own_number_bodies(&streams), now);
        assert_eq!(conn.open_calls(), 0);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        for &stream in &streams {
            assert_eq!(heard.status(stream), Some("0"), "stream {stream}");
            let reply: Vec<u8> = prost::Message::decode(heard.messages_on(stream)[0]).unwrap();
            assert_eq!(
                reply,
                [stream as u8, tag(stream).as_bytes()[0]],
                "its own body and metadata"
            );
        }
    }

    #[test]
    fn waiting_calls_end_at_their_deadline() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        let mut input = Client::handshake(&[]);
        for stream in [1, 3, 5, 7] {
            Frame::headers(
                stream,
                &client.request_block("/test.S/Split", &[("grpc-timeout", "10m")]),
                false,
            )
            .write(&mut input);
        }
        conn.recv(&input, now);
        assert!(conn.waiting.len() >= 2);
        let due = conn.poll_timeout().expect("deadlines armed");
        assert!(due <= now + Duration::from_millis(10));
        conn.handle_timeout(now + Duration::from_millis(11));
        assert_eq!(conn.open_calls(), 0);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        for stream in [1, 3, 5, 7] {
            assert_eq!(
                heard.status(stream),
                Some("4"),
                "DEADLINE_EXCEEDED on {stream}"
            );
        }
    }

    /// Calls with a long `grpc-timeout` that end long before it (here
    /// server streams, each one message) leave their deadline on the
    /// timer. A client that keeps making such calls on one connection must
    /// not grow the timer heap without bound while no deadline comes.
    #[test]
    fn ended_calls_with_distant_deadlines_do_not_pile_up_on_the_timer() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        conn.recv(&Client::handshake(&[]), now);
        hear(&mut conn, &mut client);
        let request = pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![7u8]));
        let mut stream = 1;
        for _ in 0..50 {
            let mut input = Vec::new();
            for _ in 0..100 {
                Frame::headers(
                    stream,
                    &client.request_block("/test.S/Split", &[("grpc-timeout", "1H")]),
                    false,
                )
                .write(&mut input);
                Frame::data(stream, &request, true).write(&mut input);
                stream += 2;
            }
            assert_eq!(conn.recv(&input, now), input.len());
            conn.produce(now);
            hear(&mut conn, &mut client);
        }
        let heard = client.take_heard();
        assert_eq!(heard.status(1), Some("0"));
        assert_eq!(heard.status(stream - 2), Some("0"));
        assert_eq!(conn.open_calls(), 0);
        // 5,000 calls ended, at most 100 open at once; the hour has not
        // passed. What is kept is bounded by the calls open at once, not by
        // all the calls made.
        assert!(
            conn.timers.len() <= 4 * 100,
            "{} timer entries kept for 0 open calls",
            conn.timers.len()
        );
    }

    /// One gRPC message flagged compressed: `payload` gzipped.
    fn gzipped(payload: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(payload).unwrap();
        let payload = gz.finish().unwrap();
        let mut message = vec![1];
        message.extend((payload.len() as u32).to_be_bytes());
        message.extend(payload);
        message
    }

    #[test]
    fn a_connection_does_not_keep_the_room_a_gzip_bomb_inflated_into() {
        let mut conn = connection();
        let mut client = Client::new();
        let now = Instant::now();
        // Nearly the largest message once inflated: a field the request
        // type does not know, of zeros, from a few KiB on the wire.
        let mut request = vec![0x12];
        let size = (4 << 20) - 1024;
        prost::encoding::encode_varint(size as u64, &mut request);
        request.resize(request.len() + size, 0);
        let bomb = gzipped(&request);
        assert!(bomb.len() < 16 << 10, "{}", bomb.len());
        let gzip = [("grpc-encoding", "gzip")];
        let mut input = Client::handshake(&[]);
        // A unary call, and a message of a bidirectional one.
        client
            .request_headers(1, "/test.S/Echo", &gzip, false)
            .write(&mut input);
        Frame::data(1, &bomb, true).write(&mut input);
        client
            .request_headers(3, "/test.S/Chat", &gzip, false)
            .write(&mut input);
        Frame::data(3, &bomb, true).write(&mut input);
        // The worker's way in, which tidies only at its sweep: the room is
        // let go as the message is through, not a second later (a peer
        // that sent one such message on each of many connections every
        // second would have each of them hold the room all along).
        let mut events = Vec::new();
        let used = conn.recv_at(&input, Some(now), &mut events);
        assert_eq!(used, input.len());
        assert!(
            conn.inflated.capacity() <= KEPT_COMPRESSION_ROOM,
            "{} bytes kept",
            conn.inflated.capacity()
        );
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(1), Some("0"));
        assert_eq!(heard.status(3), Some("0"));
        assert_eq!(heard.messages_on(3).len(), 1, "the message went through");
        // The public way in.
        let mut input = Vec::new();
        client
            .request_headers(5, "/test.S/Echo", &gzip, false)
            .write(&mut input);
        Frame::data(5, &bomb, true).write(&mut input);
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        assert_eq!(client.take_heard().status(5), Some("0"));
        assert!(
            conn.inflated.capacity() <= KEPT_COMPRESSION_ROOM,
            "{} bytes kept",
            conn.inflated.capacity()
        );
    }

    /// Answers that deflate to more than the room a connection keeps, on a
    /// unary call and on a bidirectional one: the room goes as soon as they
    /// are sent, also on the worker's way in, which tidies only at its
    /// sweep.
    #[test]
    fn a_connection_does_not_keep_the_room_a_large_answer_deflated_into() {
        let config = GrpcConfig {
            send_compressed: true,
            ..GrpcConfig::default()
        };
        let mut router = Router::new();
        router.add(Arc::new(Split));
        let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
        let mut client = Client::new();
        let now = Instant::now();
        let mut events = Vec::new();
        let mut handshake =
            Client::handshake(&[(pajamax_test_peer::setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
        Frame::window_update(0, 1 << 30).write(&mut handshake);
        conn.recv_at(&handshake, Some(now), &mut events);
        hear(&mut conn, &mut client);
        // Bytes that do not deflate: the answers echo them.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..(KEPT_COMPRESSION_ROOM + (8 << 10)) / 8)
            .flat_map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed.to_le_bytes()
            })
            .collect();
        let accept = [("grpc-accept-encoding", "gzip")];
        for (stream, path) in [(1, "/test.S/Echo"), (3, "/test.S/Chat")] {
            let message = prost::Message::encode_to_vec(&noise);
            let body = pajamax_test_peer::grpc::message(&message);
            let mut input = client
                .request_headers(stream, path, &accept, false)
                .to_bytes();
            let chunks = body.chunks(16 << 10).count();
            for (at, chunk) in body.chunks(16 << 10).enumerate() {
                Frame::data(stream, chunk, at + 1 == chunks).write(&mut input);
            }
            let used = conn.recv_at(&input, Some(now), &mut events);
            assert_eq!(used, input.len());
            assert!(
                conn.deflated.capacity() <= KEPT_COMPRESSION_ROOM,
                "{} bytes kept after {path}",
                conn.deflated.capacity()
            );
            hear(&mut conn, &mut client);
            let heard = client.take_heard();
            assert_eq!(heard.status(stream), Some("0"), "{path}");
            assert_eq!(heard.messages_on(stream).len(), 1, "{path}");
        }
    }

    /// `test.H/Hold` (server streaming): notes the deadline its context
    /// shows, then waits without end. `test.H/Probe` (unary): notes it too.
    struct Hold;

    thread_local! {
        static SEEN: std::cell::RefCell<Vec<(u8, Option<Instant>)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    struct Forever;

    impl crate::Producer<Vec<u8>> for Forever {
        fn next(&mut self, now: Instant) -> crate::Next<Vec<u8>> {
            crate::Next::Wait(now + Duration::from_secs(3600))
        }
    }

    impl Service for Hold {
        fn name(&self) -> &'static str {
            "test.H"
        }

        fn methods(&self) -> &'static [Method] {
            const METHODS: [Method; 2] = [
                Method {
                    name: "Hold",
                    kind: MethodKind::ServerStreaming,
                },
                Method::unary("Probe"),
            ];
            &METHODS
        }

        fn unary(
            &self,
            _: usize,
            ctx: &mut Context<'_>,
            request: &[u8],
            reply: &mut crate::Reply<'_>,
        ) -> Result<(), Status> {
            let bytes: Vec<u8> = crate::decode_request(request)?;
            SEEN.with(|seen| seen.borrow_mut().push((bytes[0], ctx.deadline())));
            reply.encode(&bytes);
            Ok(())
        }

        fn server_streaming(
            &self,
            _: usize,
            ctx: &mut Context<'_>,
            request: &[u8],
        ) -> Result<RawServerStream, Status> {
            let bytes: Vec<u8> = crate::decode_request(request)?;
            SEEN.with(|seen| seen.borrow_mut().push((bytes[0], ctx.deadline())));
            Ok(ServerStream::from_producer(Forever).into_raw())
        }
    }

    fn capped_connection(cap: Duration) -> GrpcConnection {
        let mut router = Router::new();
        router.add(Arc::new(Hold));
        let config = GrpcConfig {
            call_timeout: Some(cap),
            ..GrpcConfig::default()
        };
        GrpcConnection::new(Arc::new(router), &config, None)
    }

    /// The request message of a `Hold` or `Probe` on `stream`: its number.
    fn numbered(stream: u32) -> Vec<u8> {
        pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![stream as u8]))
    }

    /// Every way a server stream's request reaches it under `call_timeout`
    /// (a new head or a repeated one, its body in the same read or a later
    /// one, whole or in pieces, compressed): the handler sees the client's
    /// own deadline, the stream outlives the cap and ends at that deadline.
    #[test]
    fn a_server_stream_runs_to_its_clients_deadline_on_every_path() {
        let cap = Duration::from_millis(100);
        let asked = Duration::from_secs(10);
        let mut conn = capped_connection(cap);
        let mut client = Client::new();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(50);
        let timeout = [("grpc-timeout", "10S")];
        let mut input = Client::handshake(&[]);
        // Streams 1 to 11 share one head; the first ones read it anew,
        // the later ones repeat it.
        for stream in [1, 3, 5, 7, 9, 11] {
            let block = client.request_block("/test.H/Hold", &timeout);
            Frame::headers(stream, &block, false).write(&mut input);
        }
        Frame::data(1, &numbered(1), true).write(&mut input);
        Frame::data(9, &numbered(9), true).write(&mut input);
        Frame::data(11, &numbered(11)[..3], false).write(&mut input);
        conn.recv(&input, t0);
        let mut input = Vec::new();
        for stream in [3, 5, 7] {
            Frame::data(stream, &numbered(stream), true).write(&mut input);
        }
        Frame::data(11, &numbered(11)[3..], true).write(&mut input);
        // A compressed request, its head at t1.
        let gzip = [("grpc-timeout", "10S"), ("grpc-encoding", "gzip")];
        client
            .request_headers(13, "/test.H/Hold", &gzip, false)
            .write(&mut input);
        Frame::data(
            13,
            &gzipped(&prost::Message::encode_to_vec(&vec![13u8])),
            true,
        )
        .write(&mut input);
        // Without a deadline of its own, and with one shorter than the cap.
        client
            .request_headers(15, "/test.H/Hold", &[], false)
            .write(&mut input);
        Frame::data(15, &numbered(15), true).write(&mut input);
        client
            .request_headers(17, "/test.H/Hold", &[("grpc-timeout", "80m")], false)
            .write(&mut input);
        Frame::data(17, &numbered(17), true).write(&mut input);
        // A unary call keeps the cap.
        client
            .request_headers(19, "/test.H/Probe", &timeout, false)
            .write(&mut input);
        Frame::data(19, &numbered(19), true).write(&mut input);
        conn.recv(&input, t1);
        conn.produce(t1);

        let mut seen = SEEN.with(|seen| std::mem::take(&mut *seen.borrow_mut()));
        seen.sort();
        let expected = vec![
            (1, Some(t0 + asked)),
            (3, Some(t0 + asked)),
            (5, Some(t0 + asked)),
            (7, Some(t0 + asked)),
            (9, Some(t0 + asked)),
            (11, Some(t0 + asked)),
            (13, Some(t1 + asked)),
            (15, None),
            (17, Some(t1 + Duration::from_millis(80))),
            (19, Some(t1 + cap)),
        ];
        assert_eq!(seen, expected);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(19), Some("0"));

        // Past the cap: the streams go on; the one that asked for less ends.
        conn.handle_timeout(t0 + cap * 2);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(17), Some("4"));
        for stream in [1, 3, 5, 7, 9, 11, 13, 15] {
            assert_eq!(
                heard.status(stream),
                None,
                "stream {stream} ended at the cap"
            );
        }
        assert_eq!(conn.open_calls(), 8);
        // At the client's deadline they end, but the one without any.
        let due = conn.poll_timeout().expect("the clients' deadlines armed");
        assert!(due <= t0 + asked, "{:?}", due - t0);
        conn.handle_timeout(t1 + asked);
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        for stream in [1, 3, 5, 7, 9, 11, 13] {
            assert_eq!(heard.status(stream), Some("4"), "stream {stream}");
        }
        assert_eq!(heard.status(15), None);
        assert_eq!(conn.open_calls(), 1);
    }

    /// A server stream whose request is in but waits for the client to
    /// read (the answers held for its windows past the limit) is no longer
    /// under `call_timeout`'s cap: it waits, then runs, to the client's own
    /// deadline, as it would had it run at once.
    #[test]
    fn a_waiting_server_stream_is_not_held_to_the_cap() {
        let cap = Duration::from_millis(100);
        let mut router = Router::new();
        router.add(Arc::new(Hold));
        let mut config = GrpcConfig {
            call_timeout: Some(cap),
            ..GrpcConfig::default()
        };
        config.h2.max_held_bytes = 1_000;
        let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
        let mut client = Client::new();
        // Windows of 0: every answer byte is held.
        let mut input = Client::handshake(&[(0x4, 0)]);
        let big =
            pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![1u8; 2_000]));
        input.extend(client.request(1, "/test.H/Probe", &big[5..]));
        let timeout = [("grpc-timeout", "10S")];
        client
            .request_headers(3, "/test.H/Hold", &timeout, false)
            .write(&mut input);
        Frame::data(3, &numbered(3), true).write(&mut input);
        let t0 = Instant::now();
        conn.recv(&input, t0);
        hear(&mut conn, &mut client);
        assert_eq!(conn.parks, 1, "the server stream waits");
        // Past the cap, it still waits.
        conn.handle_timeout(t0 + cap * 2);
        hear(&mut conn, &mut client);
        assert_eq!(client.heard().status(3), None, "ended at the cap");
        // The client reads: it runs, with the client's deadline.
        SEEN.with(|seen| seen.borrow_mut().clear());
        let mut input = Frame::window_update(0, 1 << 20).to_bytes();
        Frame::window_update(1, 1 << 20).write(&mut input);
        conn.recv(&input, t0 + cap * 2);
        hear(&mut conn, &mut client);
        assert_eq!(client.heard().status(1), Some("0"));
        let seen = SEEN.with(|seen| std::mem::take(&mut *seen.borrow_mut()));
        assert_eq!(seen, [(3, Some(t0 + Duration::from_secs(10)))]);
        assert_eq!(conn.open_calls(), 1);
    }

    #[test]
    fn unknown_paths_are_echoed_short() {
        let router = Router::new();
        let long = format!("/{}/Method", "s".repeat(4000));
        let status = unimplemented_status(&router, long.as_bytes());
        assert_eq!(status.code(), Code::Unimplemented);
        assert!(status.message().len() < 160, "{}", status.message().len());
        let status = unimplemented_status(&router, b"/pkg.Svc/Do");
        assert_eq!(status.message(), "unknown service pkg.Svc");
        // A path not of the form `/{service}/{method}` is named as such,
        // not as a service with an empty or odd name.
        for malformed in [
            "/",
            "/pkg.Svc",
            "/pkg.Svc/",
            "//Do",
            "pkg.Svc/Do",
            "*",
            "/a/b/c",
        ] {
            let status = unimplemented_status(&router, malformed.as_bytes());
            assert_eq!(status.code(), Code::Unimplemented);
            assert_eq!(
                status.message(),
                format!("malformed method name \"{malformed}\"")
            );
        }
        // A long path is whole or malformed as a whole, not as the part
        // of it echoed.
        let status = unimplemented_status(&router, long.as_bytes());
        assert!(
            status.message().starts_with("unknown service sss"),
            "{}",
            status.message()
        );
        assert!(status.message().len() < 160, "{}", status.message().len());
        let malformed = format!("/pkg.Svc/{}/Do", "m".repeat(200));
        let status = unimplemented_status(&router, malformed.as_bytes());
        assert!(
            status.message().starts_with("malformed method name"),
            "{}",
            status.message()
        );
        struct Long;
        impl Service for Long {
            fn name(&self) -> &'static str {
                const NAME: &str = concat!(
                    "pkg.AServiceWhoseNameIsLongerThanTheEchoedPartOfAPath",
                    "AServiceWhoseNameIsLongerThanTheEchoedPartOfAPath",
                    "AServiceWhoseNameIsLongerThanTheEchoedPartOfAPath"
                );
                NAME
            }

            fn methods(&self) -> &'static [Method] {
                &[]
            }
        }
        let mut router = Router::new();
        router.add(Arc::new(Long));
        let path = format!("/{}/Missing", Long.name());
        let status = unimplemented_status(&router, path.as_bytes());
        assert!(
            status.message().starts_with("unknown method /pkg.AService"),
            "{}",
            status.message()
        );
    }

    #[test]
    fn answers_decode_right_while_the_client_changes_its_header_table_size() {
        use pajamax_test_peer::setting::HEADER_TABLE_SIZE;
        let mut conn = connection();
        let mut client = Client::new();
        let mut input =
            Client::handshake(&[(pajamax_test_peer::setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
        Frame::window_update(0, 1 << 30).write(&mut input);
        conn.recv(&input, Instant::now());
        hear(&mut conn, &mut client);
        client.take_heard();
        // Table sizes the client asks for between calls; some SETTINGS carry
        // two values (the smallest must be announced, then the last).
        let sizes: [&[u32]; 12] = [
            &[0],
            &[4096],
            &[40],
            &[0, 4096],
            &[64],
            &[100],
            &[4096],
            &[30, 200],
            &[1 << 20],
            &[0],
            &[0],
            &[4096],
        ];
        let asks: [&[u8]; 9] = [b"a", b"b", b"E", b"M", b"T", b"c", b"L", b"X", b"d"];
        let mut stream = 1u32;
        for (round, size) in sizes.iter().enumerate() {
            for ask in asks {
                let (heard, _) = echo(&mut conn, &mut client, stream, ask, &[("x-tag", "!")]);
                let status = match ask {
                    b"E" | b"X" => "3",
                    _ => "0",
                };
                assert_eq!(heard.status(stream), Some(status), "round {round} {ask:?}");
                let blocks: Vec<_> = heard.blocks.iter().filter(|b| b.stream == stream).collect();
                let first = blocks[0];
                assert_eq!(
                    first.value(":status").as_deref(),
                    Some("200"),
                    "round {round}"
                );
                assert_eq!(
                    first.value("content-type").as_deref(),
                    Some("application/grpc"),
                    "round {round} {ask:?}"
                );
                if status == "0" {
                    let mut expected = ask.to_vec();
                    if ask.len() == 1 && ask[0] == b'L' {
                        expected = vec![b'L'; 40_000];
                    }
                    expected.extend_from_slice(b"!");
                    assert_eq!(reply_on(&heard, stream).1, vec![expected], "round {round}");
                    assert_eq!(blocks.len(), 2);
                    let trailers = blocks[1];
                    assert_eq!(
                        trailers.fields.len(),
                        if ask == b"M" || ask == b"T" { 2 } else { 1 },
                        "{:?}",
                        trailers.strings()
                    );
                } else {
                    assert_eq!(
                        first.value("grpc-message").as_deref(),
                        Some(if ask == b"E" {
                            "asked for"
                        } else {
                            "after encoding"
                        })
                    );
                }
                if ask == b"M" {
                    assert_eq!(first.value("x-head").as_deref(), Some("h"));
                    assert_eq!(blocks[1].value("x-tail").as_deref(), Some("t"));
                }
                stream += 2;
            }
            // Server streaming too.
            let message = prost::Message::encode_to_vec(&b"xyz".to_vec());
            conn.recv(
                &client.request(stream, "/test.S/Split", &message),
                Instant::now(),
            );
            hear(&mut conn, &mut client);
            let heard = client.take_heard();
            assert_eq!(heard.status(stream), Some("0"), "round {round} split");
            assert_eq!(heard.messages_on(stream).len(), 3);
            stream += 2;
            // The client changes its table size.
            let params: Vec<(u16, u32)> = size.iter().map(|&s| (HEADER_TABLE_SIZE, s)).collect();
            for &s in size.iter() {
                client.reader().decoder_mut().set_max_table_size(s as usize);
            }
            conn.recv(&Frame::settings(&params).to_bytes(), Instant::now());
            hear(&mut conn, &mut client);
            client.take_heard();
        }
    }

    #[test]
    fn an_answer_with_metadata_leaves_none_to_the_next_calls_error() {
        let mut conn = connection();
        let mut client = Client::new();
        conn.recv(&Client::handshake(&[]), Instant::now());
        hear(&mut conn, &mut client);
        // A unary answer with response metadata, sent whole.
        let (heard, _) = echo(&mut conn, &mut client, 1, b"M", &[]);
        assert_eq!(heard.status(1), Some("0"));
        let field = |heard: &pajamax_test_peer::Heard, name: &str| {
            heard.blocks.iter().find_map(|block| block.value(name))
        };
        assert_eq!(field(&heard, "x-head").as_deref(), Some("h"));
        // Then calls answered with a status before any handler runs: an
        // unknown method, and a deadline already passed. Neither may carry
        // the metadata of the call before.
        let message = prost::Message::encode_to_vec(&b"a".to_vec());
        conn.recv(&client.request(3, "/test.S/Nope", &message), Instant::now());
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(3), Some("12"));
        assert_eq!(field(&heard, "x-head"), None, "{:?}", heard.blocks);
        assert_eq!(field(&heard, "x-tail"), None, "{:?}", heard.blocks);
        let (heard, _) = echo(&mut conn, &mut client, 5, b"a", &[("grpc-timeout", "0n")]);
        assert_eq!(heard.status(5), Some("4"));
        assert_eq!(field(&heard, "x-head"), None, "{:?}", heard.blocks);
        assert_eq!(field(&heard, "x-tail"), None, "{:?}", heard.blocks);
    }

    /// A compressed answer's headers carry `grpc-encoding` besides the
    /// fields of a plain one: metadata that fits beside the plain ones but
    /// not beside those is not dropped while the call still succeeds.
    #[test]
    fn compressed_answers_count_grpc_encoding_in_the_header_list_limit() {
        const MAX_HEADER_LIST_SIZE: u16 = 0x6;
        let config = GrpcConfig {
            send_compressed: true,
            ..GrpcConfig::default()
        };
        let mut router = Router::new();
        router.add(Arc::new(Split));
        let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
        let mut client = Client::new();
        // `:status`, `content-type` and `x-head: h` come to 141 bytes;
        // with `grpc-encoding: gzip`, 190.
        let handshake = Client::handshake(&[(MAX_HEADER_LIST_SIZE, 150)]);
        conn.recv(&handshake, Instant::now());
        hear(&mut conn, &mut client);
        let accept = [("grpc-accept-encoding", "gzip")];
        let (heard, _) = echo(&mut conn, &mut client, 1, b"M", &accept);
        let head = heard.blocks.iter().find_map(|block| block.value("x-head"));
        assert!(
            heard.status(1) != Some("0") || head.as_deref() == Some("h"),
            "a success without its metadata: {:?}",
            heard.blocks
        );
        assert_eq!(heard.status(1), Some("13"));
    }

    /// `test.T/Take` (client streaming): its messages go to another thread;
    /// the call's `Streaming` and `Responder` wait in `TAKEN` for the test.
    struct Take;

    thread_local! {
        static TAKEN: std::cell::RefCell<Vec<(crate::Streaming<Vec<u8>>, crate::Responder)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    impl Service for Take {
        fn name(&self) -> &'static str {
            "test.T"
        }

        fn methods(&self) -> &'static [Method] {
            const METHODS: [Method; 1] = [Method {
                name: "Take",
                kind: MethodKind::ClientStreaming,
            }];
            &METHODS
        }

        fn client_streaming(&self, _: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
            let (stream, requests, responder) =
                crate::ClientStream::<Vec<u8>, Vec<u8>>::channel(ctx);
            TAKEN.with(|taken| taken.borrow_mut().push((requests, responder)));
            Ok(stream.into_raw())
        }
    }

    /// A call whose thread reads each message as it comes, while another
    /// call's unread message holds the connection's share: each message
    /// refused for lack of room is let through once the thread waits for
    /// it, and the call is listed once among those waiting for room, however
    /// many times that happens.
    #[test]
    fn a_call_refused_room_again_and_again_is_listed_once_among_the_starved() {
        let mut router = Router::new();
        router.add(Arc::new(Take));
        let config = GrpcConfig {
            max_buffered_request_bytes: 100,
            ..GrpcConfig::default()
        };
        let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
        let inbox = Inbox::new(|| {});
        conn.set_inbox(inbox.clone(), 7);
        let mut client = Client::new();
        let now = Instant::now();
        let message = |len: usize| {
            pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![b'm'; len]))
        };
        let mut input = Client::handshake(&[]);
        for stream in [1, 3] {
            client
                .request_headers(stream, "/test.T/Take", &[], false)
                .write(&mut input);
        }
        // The hoarder's message, never read, holds most of the share.
        Frame::data(1, &message(80), false).write(&mut input);
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        let mut taken = TAKEN.with(|taken| std::mem::take(&mut *taken.borrow_mut()));
        assert_eq!(taken.len(), 2);
        let (mut requests, _responder) = taken.pop().unwrap();
        let (read_tx, read) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for message in requests.by_ref() {
                read_tx.send(message.unwrap().len()).unwrap();
            }
        });
        let deliver = |conn: &mut GrpcConnection| {
            let mut deliveries = Vec::new();
            inbox.drain(&mut deliveries);
            for delivery in deliveries {
                conn.deliver(delivery);
            }
            conn.settle(Instant::now());
        };
        for _ in 0..50 {
            // Two in one read: the second is refused, the thread not
            // waiting for it (the first waits to be taken, or was refused).
            let mut input = Vec::new();
            Frame::data(3, &message(1), false).write(&mut input);
            Frame::data(3, &message(1), false).write(&mut input);
            conn.recv(&input, Instant::now());
            for _ in 0..2 {
                let give_up = Instant::now() + Duration::from_secs(10);
                loop {
                    deliver(&mut conn);
                    match read.recv_timeout(Duration::from_millis(1)) {
                        Ok(len) => break assert_eq!(len, 1),
                        Err(_) => assert!(Instant::now() < give_up, "a message never came"),
                    }
                }
            }
            hear(&mut conn, &mut client);
        }
        assert!(conn.starved.len() <= 1, "{} listed", conn.starved.len());
        // The client is done: the thread reads to the end.
        let mut input = Vec::new();
        Frame::data(3, &[], true).write(&mut input);
        conn.recv(&input, Instant::now());
        reader.join().unwrap();
        drop(taken);
    }
}
