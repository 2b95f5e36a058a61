//! Handlers called as a server calls them, without a server or a client:
//! for unit tests of methods of every kind, served on the worker or on
//! other threads.
//!
//! A [`TestCall`] holds what a request brings (metadata, a deadline, the
//! peer's address) and runs one handler with a [`Context`] that works as a
//! server's does: [`Context::defer`] and the streams' `channel`s hand the
//! call to another thread, whose [`Responder`](crate::Responder),
//! [`Sink`](crate::Sink) and [`Streaming`](crate::Streaming) reach the test
//! instead of a worker. What the call sent back comes as an [`Answer`]: the
//! response headers, the messages, the status and the trailers.
//!
//! ```
//! use pajamax::testing::TestCall;
//! use pajamax::{Context, ServerStream, Status};
//!
//! // `rpc Countdown (uint32) returns (stream uint32)`, sent from a thread.
//! fn countdown(ctx: &mut Context<'_>, from: u32) -> Result<ServerStream<u32>, Status> {
//!     let (stream, mut sink) = ServerStream::channel(ctx);
//!     std::thread::spawn(move || {
//!         for n in (1..=from).rev() {
//!             if sink.send(&n).is_err() {
//!                 return;
//!             }
//!         }
//!         sink.finish(Ok(()));
//!     });
//!     Ok(stream)
//! }
//!
//! let answer = TestCall::new().server_stream(|ctx| countdown(ctx, 3));
//! assert_eq!(answer.messages, [3, 2, 1]);
//! assert!(answer.result.is_ok());
//! ```
//!
//! The handler's own code runs on the test's thread; a panic in it is the
//! test's panic (a server would end the call with `INTERNAL`). Request
//! messages are handed over as fast as the handler takes them, and the
//! test takes every answer message at once, so flow control never holds a
//! handler back. A thread's requests are taken from their iterator as its
//! `Streaming` makes room for them, while its answer comes back, and no
//! more once the call has ended: an endless iterator does for a client
//! that sends until the call ends. The iterator runs on the test's thread:
//! a deadline that passes while it blocks is seen once it returns. A
//! ping-pong, whose next request depends on the answers so far, opens the
//! call instead and drives it a message at a time ([`TestCall::open_bidi`],
//! [`BidiCall`]).

mod open;

use crate::grpc::context::{AnswerTo, Context, ResponseMetadata, NO_IDENTITY};
use crate::grpc::framing;
use crate::grpc::metadata::Metadata;
use crate::grpc::remote::{CancelReason, Delivery, Inbox, Lent, Offered, Part, Queued, Shared};
use crate::grpc::status::Status;
use crate::grpc::streaming::{
    BidiStream, ClientStream, Inbound, Outgoing, Production, RawHandler, RawInbound, RawNext,
    ServerStream,
};
pub use open::BidiCall;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Why a stream sent to a thread cannot be followed.
const OTHER_CONTEXT: &str =
    "the stream's channel was opened with a context other than the TestCall's";

/// The stream id the test's calls go by.
const STREAM: u32 = 1;

/// Bytes a sink may have on their way: taken at once by the test, so this
/// only bounds one message's wait.
const CREDIT: usize = 64 * 1024;

/// No limit on the request bytes of the connection's calls queued for
/// threads (the call's own queue holds them back), nor on the answer bytes
/// its sinks have on their way (each stream's credit holds them back).
const UNBOUNDED: usize = usize::MAX;

/// Request bytes queued for a thread before the test waits for it to take
/// some (at least one message is queued, whatever its size).
const REQUESTS_QUEUED: usize = 64 * 1024;

/// Request messages offered to a thread at most before the test looks for
/// its answer again (when its `Streaming` was dropped, every offer is
/// taken).
const OFFERS_AT_ONCE: usize = 1024;

/// One call to run through a handler, and what its request brings.
///
/// Each run (`unary`, `server_stream`, `client_stream`, `bidi`) is a call
/// of its own with these request facts; a `TestCall` can run several.
///
/// ```
/// use pajamax::testing::TestCall;
/// use pajamax::{Context, Status};
///
/// fn whoami(ctx: &mut Context<'_>, _: ()) -> Result<String, Status> {
///     let user = ctx.metadata().get("x-user").unwrap_or("anonymous").to_owned();
///     ctx.trailers_mut().insert("x-seen", &user).unwrap();
///     Ok(user)
/// }
///
/// let mut call = TestCall::new();
/// call.metadata_mut().insert("x-user", "alice").unwrap();
/// let answer = call.unary(|ctx| whoami(ctx, ()));
/// assert_eq!(answer.messages, ["alice"]);
/// assert_eq!(answer.trailers.get("x-seen"), Some("alice"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct TestCall {
    metadata: Metadata,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    peer: Option<SocketAddr>,
    cancel_after: Option<usize>,
}

/// What a call sent back.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<M> {
    /// The response headers' metadata. Empty for a trailers-only answer
    /// (no message, and no headers sent on their own): its metadata, the
    /// headers' too, comes with the trailers, as a client gets it, whether
    /// the worker or a thread answered.
    pub headers: Metadata,
    /// The answer messages, in order.
    pub messages: Vec<M>,
    /// `Ok` for status `OK`, or the error status the call ended with.
    pub result: Result<(), Status>,
    /// The trailers' metadata.
    pub trailers: Metadata,
}

impl<M> Answer<M> {
    fn new() -> Answer<M> {
        Answer {
            headers: Metadata::new(),
            messages: Vec::new(),
            result: Ok(()),
            trailers: Metadata::new(),
        }
    }

    /// The status the call ended with, as a client sees it (`OK` too).
    pub fn status(&self) -> Status {
        match &self.result {
            Ok(()) => Status::new(crate::Code::Ok, ""),
            Err(status) => status.clone(),
        }
    }
}

impl TestCall {
    /// A call with no metadata, no deadline and no peer address.
    pub fn new() -> TestCall {
        TestCall::default()
    }

    /// The request's metadata, to fill before a run.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The request's metadata, given whole.
    pub fn metadata(mut self, metadata: Metadata) -> TestCall {
        self.metadata = metadata;
        self
    }

    /// The call's deadline: [`Context::deadline`]; once it passes, a call
    /// still going ends `DEADLINE_EXCEEDED` and its sink or streaming sees
    /// it cancelled, as on a server.
    pub fn deadline(mut self, deadline: Instant) -> TestCall {
        self.deadline = Some(deadline);
        self
    }

    /// A deadline `timeout` after each run starts (a request's
    /// `grpc-timeout`); with [`TestCall::deadline`] too, the sooner one.
    /// One too long to count from the run's start sets none.
    pub fn timeout(mut self, timeout: Duration) -> TestCall {
        self.timeout = Some(timeout);
        self
    }

    /// The peer's address: [`Context::peer_addr`].
    pub fn peer(mut self, addr: SocketAddr) -> TestCall {
        self.peer = Some(addr);
        self
    }

    /// The client cancels the call once it has received `messages` answer
    /// messages: the call ends `CANCELLED` there (with those messages, and
    /// whatever status the handler meant to end it with), a producer on
    /// the worker is dropped, and a sink's next `send` fails, as when a
    /// client resets its stream. (A unary or client-streaming call's one
    /// message ends it anyway; with `cancel_after(0)` the client cancels
    /// before it, as before any message of a stream.)
    pub fn cancel_after(mut self, messages: usize) -> TestCall {
        self.cancel_after = Some(messages);
        self
    }

    /// Runs a unary handler; an answer deferred to another thread
    /// ([`Context::defer`]) is waited for.
    pub fn unary<M, F>(&self, handler: F) -> Answer<M>
    where
        M: prost::Message + Default,
        F: FnOnce(&mut Context<'_>) -> Result<M, Status>,
    {
        let Begun {
            run,
            response,
            result,
            remote,
        } = match self.begin(handler) {
            Ok(begun) => begun,
            Err(expired) => return *expired,
        };
        if let Some(shared) = remote {
            return run.collect(&shared, Answer::new());
        }
        let answer = Answer::from_metadata(response);
        let result = match run.cancel_after {
            // The client cancels before the one message, whatever the
            // handler returned, as when a thread answers.
            Some(0) => Err(Status::cancelled("the client cancelled the call")),
            _ => result,
        };
        match result {
            Ok(message) => Answer {
                messages: vec![message],
                ..answer
            },
            Err(status) => Answer {
                result: Err(status),
                ..answer.trailers_only()
            },
        }
    }

    /// Runs a server-streaming handler, then pulls its messages (made on
    /// the worker, waiting out a producer's `Next::Wait`) or takes them
    /// from its sink until the end.
    pub fn server_stream<M, F>(&self, handler: F) -> Answer<M>
    where
        M: prost::Message + Default + 'static,
        F: FnOnce(&mut Context<'_>) -> Result<ServerStream<M>, Status>,
    {
        let Begun {
            run,
            response,
            result,
            remote,
        } = match self.begin(handler) {
            Ok(begun) => begun,
            Err(expired) => return *expired,
        };
        let stream = match result {
            Ok(stream) => stream,
            Err(status) => return run.refused(response, remote, status),
        };
        match (stream.into_raw().0, remote) {
            (Production::Local(mut producer), remote) => {
                end_unused(remote);
                let mut answer = Answer::from_metadata(response);
                let mut out = Vec::new();
                answer.result = loop {
                    if let Some(end) = run.stop(&answer) {
                        break Err(end);
                    }
                    out.clear();
                    match producer.next(Instant::now(), &mut out, false) {
                        RawNext::Message => answer.messages.extend(decode_all::<M>(&out)),
                        RawNext::Wait(until) => run.sleep_until(until),
                        RawNext::End(result) => break result,
                    }
                };
                let sent = !answer.messages.is_empty();
                answer.sent_headers(sent)
            }
            (Production::Remote, Some(shared)) => run.collect(&shared, Answer::new()),
            (Production::Remote, None) => panic!("{OTHER_CONTEXT}"),
        }
    }

    /// Runs a client-streaming handler and gives it `requests`, then the
    /// end; an answer made on another thread (the stream's `channel`, or
    /// `on_end` deferring it) is waited for.
    pub fn client_stream<Req, Resp, F, I>(&self, handler: F, requests: I) -> Answer<Resp>
    where
        Req: prost::Message + Default + 'static,
        Resp: prost::Message + Default + 'static,
        F: FnOnce(&mut Context<'_>) -> Result<ClientStream<Req, Resp>, Status>,
        I: IntoIterator<Item = Req>,
    {
        self.streamed(
            |ctx| handler(ctx).map(ClientStream::into_raw),
            requests,
            true,
        )
    }

    /// Runs a bidirectional handler and gives it `requests`, then the end,
    /// collecting what it sends back: on the worker, the messages of each
    /// of its calls; from another thread, every message until the end.
    pub fn bidi<Req, Resp, F, I>(&self, handler: F, requests: I) -> Answer<Resp>
    where
        Req: prost::Message + Default + 'static,
        Resp: prost::Message + Default + 'static,
        F: FnOnce(&mut Context<'_>) -> Result<BidiStream<Req, Resp>, Status>,
        I: IntoIterator<Item = Req>,
    {
        self.streamed(
            |ctx| handler(ctx).map(BidiStream::into_raw),
            requests,
            false,
        )
    }

    /// Runs a handler of a stream of requests, of either kind
    /// (`client_streaming`: its `on_end` may defer the answer).
    fn streamed<Req, Resp>(
        &self,
        handler: impl FnOnce(&mut Context<'_>) -> Result<RawInbound, Status>,
        requests: impl IntoIterator<Item = Req>,
        client_streaming: bool,
    ) -> Answer<Resp>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let Begun {
            run,
            response,
            result,
            remote,
        } = match self.begin(handler) {
            Ok(begun) => begun,
            Err(expired) => return *expired,
        };
        match result {
            Ok(stream) => run.inbound(self, stream.0, remote, response, requests, client_streaming),
            Err(status) => run.refused(response, remote, status),
        }
    }
}

impl TestCall {
    /// Starts a run: calls `handler` with a context of the call's, unless
    /// the call's deadline has passed already (then its answer, as a
    /// server gives it without running the handler).
    fn begin<T, M>(
        &self,
        handler: impl FnOnce(&mut Context<'_>) -> Result<T, Status>,
    ) -> Result<Begun<T>, Box<Answer<M>>> {
        let run = Run::new(self);
        if let Some(answer) = run.expired() {
            return Err(Box::new(answer));
        }
        let mut response = ResponseMetadata::default();
        let mut ctx = run.context(self, &mut response, true);
        let result = handler(&mut ctx);
        let remote = ctx.take_remote();
        drop(ctx);
        Ok(Begun {
            run,
            response,
            result,
            remote,
        })
    }
}

/// A handler called: the run it is in, the metadata it set, what it
/// returned, and the call's state shared with another thread, if it sent
/// the call to one.
struct Begun<T> {
    run: Run,
    response: ResponseMetadata,
    result: Result<T, Status>,
    remote: Option<Arc<Shared>>,
}

/// Ends a call's state shared with another thread that the answer does
/// not go through (a channel opened all the same, or a call refused): its
/// thread sees the call ended, as on a server.
fn end_unused(remote: Option<Arc<Shared>>) {
    if let Some(shared) = remote {
        shared.cancel(CancelReason::Ended);
    }
}

impl<M> Answer<M> {
    /// An answer from the worker: the metadata the handler set.
    fn from_metadata(response: ResponseMetadata) -> Answer<M> {
        Answer::from_metadata_and(response, Vec::new())
    }

    /// An answer from the worker: the metadata the handler set, and the
    /// messages it sent.
    fn from_metadata_and(response: ResponseMetadata, messages: Vec<M>) -> Answer<M> {
        Answer {
            headers: response.headers,
            messages,
            result: Ok(()),
            trailers: response.trailers,
        }
    }

    /// The answer, trailers-only unless the response headers were `sent`.
    fn sent_headers(self, sent: bool) -> Answer<M> {
        if sent {
            self
        } else {
            self.trailers_only()
        }
    }

    /// A trailers-only answer: the headers' metadata goes with the
    /// trailers, as a sink on a thread sends it.
    fn trailers_only(mut self) -> Answer<M> {
        let headers = std::mem::take(&mut self.headers);
        for (name, value) in headers.iter() {
            self.trailers.push(name.as_bytes(), value);
        }
        self
    }
}

/// Wakes the test when parts reach its inbox.
#[derive(Default)]
struct Signal {
    arrived: Mutex<bool>,
    changed: Condvar,
}

/// One run of a handler: the worker's side of the call.
struct Run {
    answer_to: AnswerTo,
    inbox: Arc<Inbox>,
    signal: Arc<Signal>,
    deadline: Option<Instant>,
    cancel_after: Option<usize>,
}

impl Run {
    fn new(call: &TestCall) -> Run {
        let signal = Arc::new(Signal::default());
        let wake = signal.clone();
        let inbox = Inbox::new(move || {
            *wake.arrived.lock().unwrap_or_else(|e| e.into_inner()) = true;
            wake.changed.notify_all();
        });
        Run {
            answer_to: AnswerTo {
                inbox: Some((inbox.clone(), 0)),
                credit: CREDIT,
                incoming_limit: REQUESTS_QUEUED,
                queued: Queued::new(UNBOUNDED),
                lent: Lent::new(UNBOUNDED),
            },
            inbox,
            signal,
            deadline: {
                // A timeout too long to count from now is none, as a
                // server takes a `grpc-timeout` past what it can count.
                let timed = call.timeout.and_then(|t| Instant::now().checked_add(t));
                match (call.deadline, timed) {
                    (Some(deadline), Some(timed)) => Some(deadline.min(timed)),
                    (deadline, timed) => deadline.or(timed),
                }
            },
            cancel_after: call.cancel_after,
        }
    }

    /// A context of the call's; with `remote` (where a server lets the
    /// handler hand the call to another thread) `defer` and `channel`
    /// reach the test, otherwise they go nowhere, as on a server.
    fn context<'a>(
        &'a self,
        call: &'a TestCall,
        response: &'a mut ResponseMetadata,
        remote: bool,
    ) -> Context<'a> {
        Context::for_call(
            &call.metadata,
            self.deadline,
            call.peer,
            &NO_IDENTITY,
            response,
            remote.then_some((&self.answer_to, STREAM)),
            false,
        )
    }

    /// The handler refused the call: its status, with the metadata it set
    /// (a thread it handed the call to first sees the call ended).
    fn refused<M>(
        &self,
        response: ResponseMetadata,
        remote: Option<Arc<Shared>>,
        status: Status,
    ) -> Answer<M> {
        end_unused(remote);
        Answer {
            result: Err(status),
            ..Answer::from_metadata(response).trailers_only()
        }
    }

    /// A call whose deadline has passed before its handler starts is
    /// answered `DEADLINE_EXCEEDED` without running it, as a server does.
    fn expired<M>(&self) -> Option<Answer<M>> {
        self.past_deadline().then(|| Answer {
            result: Err(Status::deadline_exceeded("the call's deadline passed")),
            ..Answer::new()
        })
    }

    /// Why the call ends before its handler ends it: the deadline passed,
    /// or the client has all the messages it was to take.
    fn stop<M>(&self, answer: &Answer<M>) -> Option<Status> {
        if self.past_deadline() {
            return Some(Status::deadline_exceeded("the call's deadline passed"));
        }
        if self
            .cancel_after
            .is_some_and(|n| answer.messages.len() >= n)
        {
            return Some(Status::cancelled("the client cancelled the call"));
        }
        None
    }

    /// Whether the call's deadline has passed.
    fn past_deadline(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// Whether the client has cancelled, taking its
    /// [`TestCall::cancel_after`] messages of `messages` (a handler call
    /// may send several): it then sees none of the rest, cut off here, nor
    /// the status. A client stream's one answer (`one_answer`) ends it
    /// anyway, as a unary call's does.
    fn cut_at_cancel<M>(&self, messages: &mut Vec<M>, one_answer: bool) -> bool {
        let Some(n) = self.cancel_after else {
            return false;
        };
        let cancelled = if one_answer {
            messages.len() > n
        } else {
            messages.len() >= n
        };
        if cancelled {
            messages.truncate(n);
        }
        cancelled
    }

    /// Sleeps until `until`, or the deadline if it is sooner.
    fn sleep_until(&self, until: Instant) {
        let until = self.deadline.map_or(until, |deadline| until.min(deadline));
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
    }

    /// Serves request messages to a client-streaming or bidirectional
    /// call, then collects its answer.
    fn inbound<Req, Resp>(
        &self,
        call: &TestCall,
        inbound: Inbound,
        remote: Option<Arc<Shared>>,
        response: ResponseMetadata,
        requests: impl IntoIterator<Item = Req>,
        client_streaming: bool,
    ) -> Answer<Resp>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        match (inbound, remote) {
            (Inbound::Local(mut handler), remote) => {
                end_unused(remote);
                self.on_worker(call, &mut *handler, response, requests, client_streaming)
            }
            (Inbound::Remote, Some(shared)) => {
                let mut requests = requests.into_iter();
                let mut refused: Option<Vec<u8>> = None;
                let mut ended = false;
                // Offers what the thread's queue takes, then the end; `true`
                // while more could be offered at once.
                let deadline = self.deadline;
                let mut feed = |shared: &Shared| {
                    for _ in 0..OFFERS_AT_ONCE {
                        // The deadline is looked at between requests: an
                        // iterator that blocks holds it back.
                        let passed = deadline.is_some_and(|deadline| Instant::now() >= deadline);
                        if ended || passed {
                            return false;
                        }
                        let message = match refused.take() {
                            Some(message) => message,
                            None => match requests.next() {
                                Some(request) => framing::framed(&request),
                                None => {
                                    shared.end_incoming(None);
                                    ended = true;
                                    return false;
                                }
                            },
                        };
                        if shared.offer(&message) != Offered::Queued {
                            // Offered again once the thread has taken some
                            // (a `Part::Resume` comes).
                            refused = Some(message);
                            return false;
                        }
                    }
                    true
                };
                self.collect_feeding(&shared, Answer::new(), &mut feed)
            }
            (Inbound::Remote, None) => panic!("{OTHER_CONTEXT}"),
        }
    }

    /// Hands each request to a handler on the worker, then the end. As on
    /// a server, only a client stream's `on_end` may hand the call to
    /// another thread: a `defer` or `channel` elsewhere goes nowhere.
    fn on_worker<Req, Resp>(
        &self,
        call: &TestCall,
        handler: &mut dyn RawHandler,
        mut response: ResponseMetadata,
        requests: impl IntoIterator<Item = Req>,
        client_streaming: bool,
    ) -> Answer<Resp>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let mut answer = Answer::new();
        let mut out = Outgoing::default();
        let mut result = Ok(());
        // Sent on their own (`Responses::send_headers`).
        let mut headers_sent = false;
        for request in requests {
            if let Some(end) = self.stop(&answer) {
                result = Err(end);
                break;
            }
            out.clear();
            let mut ctx = self.context(call, &mut response, false);
            let taken = handler.on_message(&mut ctx, &request.encode_to_vec(), &mut out);
            drop(ctx);
            headers_sent |= out.headers_now;
            answer.messages.extend(decode_all::<Resp>(&out.messages));
            if let Err(status) = taken {
                result = Err(status);
                break;
            }
        }
        if result.is_ok() {
            if let Some(end) = self.stop(&answer) {
                result = Err(end);
            }
        }
        if result.is_ok() {
            out.clear();
            let mut ctx = self.context(call, &mut response, client_streaming);
            result = handler.on_end(&mut ctx, &mut out);
            let remote = ctx.take_remote();
            drop(ctx);
            if let Some(shared) = remote {
                // `on_end` deferred the answer to another thread.
                return self.collect(&shared, answer);
            }
            headers_sent |= out.headers_now;
            answer.messages.extend(decode_all::<Resp>(&out.messages));
        }
        headers_sent |= !answer.messages.is_empty();
        if self.cut_at_cancel(&mut answer.messages, client_streaming) {
            result = Err(Status::cancelled("the client cancelled the call"));
        }
        Answer {
            result,
            ..Answer::from_metadata_and(response, answer.messages)
        }
        .sent_headers(headers_sent)
    }

    /// Takes the parts a thread sends for the call until its end (or the
    /// deadline, or the client's cancelling), giving back the credit of
    /// each message as it comes.
    fn collect<M: prost::Message + Default>(
        &self,
        shared: &Arc<Shared>,
        answer: Answer<M>,
    ) -> Answer<M> {
        self.collect_feeding(shared, answer, &mut |_| false)
    }

    /// As [`Run::collect`], offering the call's requests with `feed` while
    /// it goes on (`true`: more are ready to offer at once).
    fn collect_feeding<M: prost::Message + Default>(
        &self,
        shared: &Arc<Shared>,
        mut answer: Answer<M>,
        feed: &mut dyn FnMut(&Shared) -> bool,
    ) -> Answer<M> {
        loop {
            if let Some(end) = self.stop(&answer) {
                self.end_early(shared, &mut answer, end);
                return answer;
            }
            // The parts there are are taken before more is offered: the
            // `Resume` or `Room` a refused offer waits for comes after
            // them, and wakes the wait.
            self.expect_parts();
            if self.take_parts(shared, &mut answer) {
                return answer;
            }
            if self.stop(&answer).is_some() {
                continue;
            }
            if !feed(shared) {
                self.wait_for_parts();
            }
        }
    }

    /// Ends a call the thread has not ended, for `why` (what
    /// [`Run::stop`] says): the thread sees it cancelled or past its
    /// deadline.
    fn end_early<M>(&self, shared: &Shared, answer: &mut Answer<M>, why: Status) {
        let reason = if why.code() == crate::Code::DeadlineExceeded {
            CancelReason::DeadlineExceeded
        } else {
            CancelReason::Cancelled
        };
        shared.cancel(reason);
        answer.result = Err(why);
    }

    /// From now on, [`Run::wait_for_parts`] waits only for parts that
    /// arrive after this: call it before taking the parts there are, and
    /// take them before the offer whose `Resume` the wait is for (one
    /// taken with them wakes nothing).
    fn expect_parts(&self) {
        *self
            .signal
            .arrived
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = false;
    }

    /// Takes into `answer` the parts the thread has sent, giving back the
    /// credit of each message; `true` once the call has ended (its answer
    /// complete). Stops early, leaving the rest, once [`Run::stop`] says
    /// the call ends.
    fn take_parts<M: prost::Message + Default>(
        &self,
        shared: &Shared,
        answer: &mut Answer<M>,
    ) -> bool {
        let mut parts = Vec::new();
        self.inbox.drain(&mut parts);
        for Delivery { part, .. } in parts {
            match part {
                Part::Headers(headers) => answer.headers = headers,
                Part::Message(bytes) => {
                    shared.return_credit(bytes.len());
                    answer.messages.extend(decode_all::<M>(&bytes));
                    if self.stop(answer).is_some() {
                        return false;
                    }
                }
                Part::Finish { status, trailers } => {
                    answer.result = status.map_or(Ok(()), Err);
                    answer.trailers = trailers;
                    shared.cancel(CancelReason::Ended);
                    return true;
                }
                Part::Answer {
                    result,
                    headers,
                    trailers,
                } => {
                    answer.headers = headers;
                    answer.trailers = trailers;
                    shared.cancel(CancelReason::Ended);
                    match result {
                        Ok(bytes) => answer.messages.extend(decode_all::<M>(&bytes)),
                        Err(status) => {
                            answer.result = Err(status);
                            if answer.messages.is_empty() {
                                let ended = std::mem::replace(answer, Answer::new());
                                *answer = ended.trailers_only();
                            }
                        }
                    }
                    return true;
                }
                // The thread took requests: more can be offered.
                Part::Resume | Part::Room => {}
            }
        }
        false
    }

    /// Whether the thread has ended the call: its end is among the parts
    /// it has sent (taken, and dropped).
    fn ended_by_thread(&self) -> bool {
        let mut parts = Vec::new();
        self.inbox.drain(&mut parts);
        parts
            .iter()
            .any(|delivery| matches!(delivery.part, Part::Finish { .. } | Part::Answer { .. }))
    }

    /// Waits until parts arrive, or the deadline passes.
    fn wait_for_parts(&self) {
        let mut arrived = self
            .signal
            .arrived
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while !*arrived {
            let wait = match self.deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    left
                }
                None => Duration::from_secs(3600),
            };
            arrived = self
                .signal
                .changed
                .wait_timeout(arrived, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The messages framed one after the other in `bytes`.
fn decode_all<M: prost::Message + Default>(mut bytes: &[u8]) -> Vec<M> {
    let mut messages = Vec::new();
    while let Some(len) = framing::message_len(bytes) {
        let message = M::decode(&bytes[framing::PREFIX_LEN..len])
            .expect("a handler's answer message decodes as its type");
        messages.push(message);
        bytes = &bytes[len..];
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BidiHandler, ClientStreamHandler, Code, Next, Producer, Responses, ServerStream};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn unary_answers_from_the_worker_or_a_thread() {
        let mut call = TestCall::new();
        call.metadata_mut().insert("x-n", "4").unwrap();
        let double = |ctx: &mut Context<'_>| -> Result<u32, Status> {
            let n: u32 = ctx.metadata().get("x-n").unwrap().parse().unwrap();
            ctx.headers_mut().insert("x-h", "1").unwrap();
            ctx.trailers_mut().insert("x-t", "2").unwrap();
            Ok(2 * n)
        };
        let answer = call.unary(double);
        assert_eq!(answer.messages, [8]);
        assert!(answer.result.is_ok());
        assert_eq!(answer.status().code(), Code::Ok);
        assert_eq!(answer.headers.get("x-h"), Some("1"));
        assert_eq!(answer.trailers.get("x-t"), Some("2"));

        // Deferred: the responder's answer, with the metadata it carries.
        let answer = call.unary(|ctx| {
            ctx.headers_mut().insert("x-h", "moved").unwrap();
            let mut responder = ctx.defer();
            std::thread::spawn(move || {
                responder.trailers_mut().insert("x-t", "thread").unwrap();
                responder.respond(Ok(5u32));
            });
            Ok(0u32)
        });
        assert_eq!(answer.messages, [5], "the handler's return is ignored");
        assert_eq!(answer.headers.get("x-h"), Some("moved"));
        assert_eq!(answer.trailers.get("x-t"), Some("thread"));

        // A responder dropped unanswered ends the call INTERNAL.
        let answer = call.unary(|ctx| {
            let responder = ctx.defer();
            std::thread::spawn(move || drop(responder));
            Ok(0u32)
        });
        assert!(answer.messages.is_empty());
        assert_eq!(answer.status().code(), Code::Internal);

        // An error keeps the metadata set before it.
        let answer = call.unary(|ctx| -> Result<u32, Status> {
            ctx.trailers_mut().insert("x-why", "no").unwrap();
            Err(Status::not_found("none"))
        });
        assert_eq!(answer.status().code(), Code::NotFound);
        assert_eq!(answer.trailers.get("x-why"), Some("no"));
    }

    #[test]
    fn a_call_past_its_deadline_is_not_run() {
        let call = TestCall::new().deadline(Instant::now() - Duration::from_millis(1));
        let ran = AtomicBool::new(false);
        let answer = call.unary(|_| {
            ran.store(true, Ordering::SeqCst);
            Ok(1u32)
        });
        assert_eq!(answer.status().code(), Code::DeadlineExceeded);
        assert!(!ran.load(Ordering::SeqCst));

        // A timeout counts from each run's start; a deadline does not move.
        let call = TestCall::new().timeout(Duration::from_millis(50));
        let left = |ctx: &mut Context<'_>| Ok(ctx.time_remaining().unwrap().as_millis() as u32);
        std::thread::sleep(Duration::from_millis(60));
        let answer = call.unary(left);
        assert!(answer.result.is_ok());
        assert!(answer.messages[0] > 30, "{:?}", answer.messages);
        let soon = Instant::now() + Duration::from_millis(20);
        let answer = call.clone().deadline(soon).unary(left);
        assert!(answer.messages[0] <= 20, "the sooner of the two");
        // The call kept as it was: its timeout alone.
        let again = call.unary(left);
        assert!(again.messages[0] > 30, "{:?}", again.messages);
        assert_eq!(again.clone(), again);

        // A timeout past what an instant can hold is no deadline.
        let answer = TestCall::new()
            .timeout(Duration::MAX)
            .unary(|ctx| Ok(u32::from(ctx.deadline().is_none())));
        assert_eq!(answer.messages, [1]);
        let soon = Instant::now() + Duration::from_secs(60);
        let answer = TestCall::new()
            .deadline(soon)
            .timeout(Duration::MAX)
            .unary(|ctx| Ok(u32::from(ctx.deadline() == Some(soon))));
        assert_eq!(answer.messages, [1]);
    }

    /// Counts down from `left`, one message every `every`; counts its
    /// drops in `dropped`.
    struct Countdown {
        left: u32,
        every: Duration,
        due: Option<Instant>,
        dropped: Arc<AtomicUsize>,
    }

    impl Producer<u32> for Countdown {
        fn next(&mut self, now: Instant) -> Next<u32> {
            if self.left == 0 {
                return Next::End(Ok(()));
            }
            match self.due {
                Some(due) if due > now => Next::Wait(due),
                _ => {
                    self.due = Some(now + self.every);
                    self.left -= 1;
                    Next::Message(self.left)
                }
            }
        }
    }

    impl Drop for Countdown {
        fn drop(&mut self) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn server_streams_on_the_worker_end_as_their_producer_says() {
        let call = TestCall::new();
        let answer = call.server_stream(|ctx| {
            ctx.headers_mut().insert("x-h", "1").unwrap();
            Ok(ServerStream::iter([
                Ok(1u32),
                Ok(2),
                Err(Status::aborted("enough")),
            ]))
        });
        assert_eq!(answer.messages, [1, 2]);
        assert_eq!(answer.status().code(), Code::Aborted);
        assert_eq!(answer.headers.get("x-h"), Some("1"));

        // Paced: the waits are waited out.
        let dropped = Arc::new(AtomicUsize::new(0));
        let countdown = |left| Countdown {
            left,
            every: Duration::from_millis(20),
            due: None,
            dropped: dropped.clone(),
        };
        let started = Instant::now();
        let answer = call.server_stream(|_| Ok(ServerStream::from_producer(countdown(3))));
        assert_eq!(answer.messages, [2, 1, 0]);
        assert!(answer.result.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(40));
        assert_eq!(dropped.load(Ordering::SeqCst), 1);

        // The client cancels after two: the producer is dropped there.
        let answer = TestCall::new()
            .cancel_after(2)
            .server_stream(|_| Ok(ServerStream::from_producer(countdown(1000))));
        assert_eq!(answer.messages, [999, 998]);
        assert_eq!(answer.status().code(), Code::Cancelled);
        assert_eq!(dropped.load(Ordering::SeqCst), 2);

        // The deadline passes mid-stream.
        let answer = TestCall::new()
            .timeout(Duration::from_millis(50))
            .server_stream(|_| Ok(ServerStream::from_producer(countdown(1000))));
        assert_eq!(answer.status().code(), Code::DeadlineExceeded);
        assert!(!answer.messages.is_empty() && answer.messages.len() < 10);
        assert_eq!(dropped.load(Ordering::SeqCst), 3);

        // Refused before any message.
        let answer = call.server_stream(|_| -> Result<ServerStream<u32>, Status> {
            Err(Status::unavailable("later"))
        });
        assert_eq!(answer.status().code(), Code::Unavailable);
    }

    #[test]
    fn server_streams_from_a_thread_see_the_end_of_their_call() {
        let sends = |ctx: &mut Context<'_>, count: u32, failed: Arc<AtomicBool>| {
            let (stream, mut sink) = ServerStream::<u32>::channel(ctx);
            sink.trailers_mut().insert("x-t", "done").unwrap();
            std::thread::spawn(move || {
                for n in 0..count {
                    if sink.send(&n).is_err() {
                        failed.store(true, Ordering::SeqCst);
                        return;
                    }
                }
                sink.finish(Ok(()));
            });
            Ok(stream)
        };
        // Many more messages than a sink's credit: it is given back.
        let failed = Arc::new(AtomicBool::new(false));
        let answer = TestCall::new().server_stream(|ctx| sends(ctx, 20_000, failed.clone()));
        assert_eq!(answer.messages.len(), 20_000);
        assert!(answer.messages.iter().copied().eq(0..20_000));
        assert!(answer.result.is_ok());
        assert_eq!(answer.trailers.get("x-t"), Some("done"));
        assert!(!failed.load(Ordering::SeqCst));

        // Cancelled after three: the sink's sends fail.
        let failed = Arc::new(AtomicBool::new(false));
        let answer = TestCall::new()
            .cancel_after(3)
            .server_stream(|ctx| sends(ctx, u32::MAX, failed.clone()));
        assert_eq!(answer.messages, [0, 1, 2]);
        assert_eq!(answer.status().code(), Code::Cancelled);
        let until = Instant::now() + Duration::from_secs(5);
        while !failed.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(failed.load(Ordering::SeqCst), "the sender learns of it");

        // A sink that waits for the end of its call is told of the deadline.
        let (told, heard) = std::sync::mpsc::channel();
        let answer = TestCall::new()
            .timeout(Duration::from_millis(30))
            .server_stream(|ctx| {
                let (stream, mut sink) = ServerStream::<u32>::channel(ctx);
                sink.on_cancel(move |reason| told.send(reason).unwrap());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_secs(5));
                    drop(sink);
                });
                Ok(stream)
            });
        assert_eq!(answer.status().code(), Code::DeadlineExceeded);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)).unwrap(),
            CancelReason::DeadlineExceeded
        );
    }

    #[derive(Default)]
    struct Sum(u64);

    impl ClientStreamHandler<u32, u64> for Sum {
        fn on_message(&mut self, _ctx: &mut Context<'_>, n: u32) -> Result<(), Status> {
            if n == 13_000 {
                return Err(Status::invalid_argument("13000"));
            }
            self.0 += u64::from(n);
            Ok(())
        }

        fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<u64, Status> {
            if ctx.metadata().get("x-defer").is_some() {
                let sum = self.0;
                let responder = ctx.defer();
                std::thread::spawn(move || responder.respond(Ok(sum * 10)));
                return Ok(0);
            }
            Ok(self.0)
        }
    }

    #[test]
    fn client_streams_take_every_request_then_answer() {
        let call = TestCall::new();
        let answer = call.client_stream(|_| Ok(ClientStream::on_worker(Sum::default())), 1..=100);
        assert_eq!(answer.messages, [5050]);
        let answer = call.client_stream(
            |_| Ok(ClientStream::on_worker(Sum::default())),
            [1, 13_000, 2],
        );
        assert!(answer.messages.is_empty());
        assert_eq!(answer.status().code(), Code::InvalidArgument);
        // `on_end` defers the answer.
        let mut deferring = TestCall::new();
        deferring.metadata_mut().insert("x-defer", "1").unwrap();
        let answer =
            deferring.client_stream(|_| Ok(ClientStream::on_worker(Sum::default())), [1, 2]);
        assert_eq!(answer.messages, [30]);
        // Read on a thread of its own.
        let answer = call.client_stream(
            |ctx| {
                let (stream, requests, responder) = ClientStream::<u32, u64>::channel(ctx);
                std::thread::spawn(move || {
                    let sum: Result<u64, Status> = requests.map(|n| n.map(u64::from)).sum();
                    responder.respond(sum);
                });
                Ok(stream)
            },
            1..=4000,
        );
        assert_eq!(answer.messages, [8_002_000]);
    }

    struct Doubler;

    impl BidiHandler<u32, u32> for Doubler {
        fn on_message(
            &mut self,
            _ctx: &mut Context<'_>,
            n: u32,
            responses: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            responses.send(&(2 * n));
            Ok(())
        }

        fn on_end(
            &mut self,
            ctx: &mut Context<'_>,
            responses: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            ctx.trailers_mut().insert("x-end", "yes").unwrap();
            responses.send(&0);
            Ok(())
        }
    }

    /// Answers each request twice (`n`, `10 * n`), and the end with 7 and 8.
    struct Twice;

    impl BidiHandler<u32, u32> for Twice {
        fn on_message(
            &mut self,
            _ctx: &mut Context<'_>,
            n: u32,
            responses: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            responses.send(&n);
            responses.send(&(10 * n));
            Ok(())
        }

        fn on_end(
            &mut self,
            _ctx: &mut Context<'_>,
            responses: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            responses.send(&7);
            responses.send(&8);
            Ok(())
        }
    }

    #[test]
    fn a_client_that_cancels_before_any_message_ends_every_kind_of_call_cancelled() {
        let call = TestCall::new().cancel_after(0);
        let on_worker = call.unary(|ctx| {
            ctx.trailers_mut().insert("x-t", "1").unwrap();
            Ok(3u32)
        });
        assert!(on_worker.messages.is_empty());
        assert_eq!(on_worker.status().code(), Code::Cancelled);
        assert_eq!(on_worker.trailers.get("x-t"), Some("1"));
        let failed = call.unary(|_| -> Result<u32, Status> { Err(Status::aborted("no")) });
        assert_eq!(failed.status().code(), Code::Cancelled);
        let deferred = call.unary(|ctx| {
            let responder = ctx.defer();
            std::thread::spawn(move || responder.respond(Ok(3u32)));
            Ok(0u32)
        });
        assert!(deferred.messages.is_empty());
        assert_eq!(deferred.status().code(), Code::Cancelled);
        let streamed = call.client_stream(|_| Ok(ClientStream::on_worker(Sum(0))), [1u32, 2]);
        assert!(streamed.messages.is_empty());
        assert_eq!(streamed.status().code(), Code::Cancelled);
        // One message each, with `OK`, once the client takes one.
        let call = TestCall::new().cancel_after(1);
        assert_eq!(call.unary(|_| Ok(3u32)).result, Ok(()));
        let streamed = call.client_stream(|_| Ok(ClientStream::on_worker(Sum(0))), [1u32, 2]);
        assert_eq!(streamed.messages, [3]);
        assert_eq!(streamed.result, Ok(()));
    }

    #[test]
    fn bidirectional_calls_answer_as_they_go() {
        let call = TestCall::new();
        let answer = call.bidi(|_| Ok(BidiStream::on_worker(Doubler)), [1, 2, 3]);
        assert_eq!(answer.messages, [2, 4, 6, 0]);
        assert_eq!(answer.trailers.get("x-end"), Some("yes"));
        let answer = TestCall::new()
            .cancel_after(2)
            .bidi(|_| Ok(BidiStream::on_worker(Doubler)), 1..);
        assert_eq!(answer.messages, [2, 4]);
        assert_eq!(answer.status().code(), Code::Cancelled);
        // A client that cancels sees no more than it took, though a call
        // of the handler sent more.
        let answer = TestCall::new()
            .cancel_after(3)
            .bidi(|_| Ok(BidiStream::on_worker(Twice)), [1, 2, 3]);
        assert_eq!(answer.messages, [1, 10, 2]);
        assert_eq!(answer.status().code(), Code::Cancelled);
        let answer = TestCall::new()
            .cancel_after(1)
            .bidi(|_| Ok(BidiStream::on_worker(Twice)), []);
        assert_eq!(answer.messages, [7]);
        assert_eq!(answer.status().code(), Code::Cancelled);
        // Cancelled once it has its `n`, whatever came with the last of
        // them: here the end's `OK` and its trailer.
        let answer = TestCall::new()
            .cancel_after(3)
            .bidi(|_| Ok(BidiStream::on_worker(Doubler)), [1, 2]);
        assert_eq!(answer.messages, [2, 4, 0]);
        assert_eq!(answer.status().code(), Code::Cancelled);
        let answer = call.bidi(
            |ctx| {
                let (stream, requests, mut sink) = BidiStream::<u32, u32>::channel(ctx);
                std::thread::spawn(move || {
                    for n in requests {
                        let Ok(n) = n else { return };
                        if sink.send(&(n + 1)).is_err() {
                            return;
                        }
                    }
                    sink.finish(Err(Status::aborted("after the last")));
                });
                Ok(stream)
            },
            [10, 20],
        );
        assert_eq!(answer.messages, [11, 21]);
        assert_eq!(answer.status().code(), Code::Aborted);
    }

    /// The metadata of a trailers-only answer comes with its trailers,
    /// whether the worker or a thread answered.
    #[test]
    fn a_trailers_only_answer_has_no_headers() {
        let set = |ctx: &mut Context<'_>| {
            ctx.headers_mut().insert("x-h", "1").unwrap();
            ctx.trailers_mut().insert("x-t", "2").unwrap();
        };
        let only_trailers = |answer: &Answer<u32>, code| {
            assert!(answer.headers.is_empty(), "{answer:?}");
            assert_eq!(answer.trailers.get("x-h"), Some("1"), "{answer:?}");
            assert_eq!(answer.trailers.get("x-t"), Some("2"), "{answer:?}");
            assert_eq!(answer.status().code(), code);
        };
        let call = TestCall::new();
        let worker = call.unary(|ctx| -> Result<u32, Status> {
            set(ctx);
            Err(Status::not_found("none"))
        });
        only_trailers(&worker, Code::NotFound);
        let thread = call.unary(|ctx| {
            set(ctx);
            let responder = ctx.defer();
            std::thread::spawn(move || responder.respond::<u32>(Err(Status::not_found("none"))));
            Ok(0u32)
        });
        only_trailers(&thread, Code::NotFound);

        let worker = call.server_stream(|ctx| {
            set(ctx);
            Ok(ServerStream::iter([Err(Status::aborted("no"))]))
        });
        only_trailers(&worker, Code::Aborted);
        let thread = call.server_stream(|ctx| {
            set(ctx);
            let (stream, sink) = ServerStream::<u32>::channel(ctx);
            std::thread::spawn(move || sink.finish(Err(Status::aborted("no"))));
            Ok(stream)
        });
        only_trailers(&thread, Code::Aborted);
        let refused = call.server_stream(|ctx| -> Result<ServerStream<u32>, Status> {
            set(ctx);
            Err(Status::unavailable("later"))
        });
        only_trailers(&refused, Code::Unavailable);

        // No message, status OK: trailers-only too.
        let worker = call.server_stream(|ctx| {
            set(ctx);
            Ok(ServerStream::iter(std::iter::empty::<Result<u32, Status>>()))
        });
        only_trailers(&worker, Code::Ok);

        // Headers sent on their own, or with a message, stay headers.
        struct HeadersFirst;
        impl BidiHandler<u32, u32> for HeadersFirst {
            fn on_message(
                &mut self,
                _ctx: &mut Context<'_>,
                _n: u32,
                responses: &mut Responses<'_, u32>,
            ) -> Result<(), Status> {
                responses.send_headers();
                Ok(())
            }
        }
        let worker = call.bidi(
            |ctx| {
                set(ctx);
                Ok(BidiStream::on_worker(HeadersFirst))
            },
            [1],
        );
        assert_eq!(worker.headers.get("x-h"), Some("1"));
        assert_eq!(worker.trailers.get("x-h"), None);
        let worker = call.unary(|ctx| {
            set(ctx);
            Ok(1u32)
        });
        assert_eq!(worker.headers.get("x-h"), Some("1"));
        assert_eq!(worker.trailers.get("x-t"), Some("2"));
    }

    /// A handler that opens a channel and answers on the worker all the
    /// same: the channel's thread sees the call ended, as on a server.
    #[test]
    fn a_channel_left_unused_ends_with_the_call() {
        let (told, heard) = std::sync::mpsc::channel();
        let answer = TestCall::new().server_stream(|ctx| {
            let (_unused, mut sink) = ServerStream::<u32>::channel(ctx);
            sink.on_cancel(move |reason| told.send(reason).unwrap());
            std::thread::spawn(move || while sink.send(&0).is_ok() {});
            Ok(ServerStream::iter([Ok(1u32)]))
        });
        assert_eq!(answer.messages, [1]);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)),
            Ok(CancelReason::Ended)
        );
        let (told, heard) = std::sync::mpsc::channel();
        let answer = TestCall::new().bidi(
            |ctx| {
                let (_unused, _requests, mut sink) = BidiStream::<u32, u32>::channel(ctx);
                sink.on_cancel(move |reason| told.send(reason).unwrap());
                std::thread::spawn(move || drop(sink));
                Ok(BidiStream::on_worker(Doubler))
            },
            [1],
        );
        assert_eq!(answer.messages, [2, 0]);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)),
            Ok(CancelReason::Ended)
        );
    }

    /// As on a server, only a client stream's `on_end` hands the call to
    /// another thread: a `defer` in an `on_message`, or in a bidirectional
    /// call's `on_end`, goes nowhere.
    #[test]
    fn only_the_end_of_a_client_stream_defers() {
        struct DefersEach;
        impl ClientStreamHandler<u32, u64> for DefersEach {
            fn on_message(&mut self, ctx: &mut Context<'_>, n: u32) -> Result<(), Status> {
                ctx.defer().respond(Ok(u64::from(n)));
                Ok(())
            }

            fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<u64, Status> {
                let responder = ctx.defer();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    responder.respond(Ok(100u64));
                });
                Ok(0)
            }
        }
        let answer = ends(|| {
            TestCall::new().client_stream(|_| Ok(ClientStream::on_worker(DefersEach)), [1, 2])
        });
        assert_eq!(answer.messages, [100]);
        assert!(answer.result.is_ok());

        struct DefersAtTheEnd;
        impl BidiHandler<u32, u32> for DefersAtTheEnd {
            fn on_message(
                &mut self,
                _ctx: &mut Context<'_>,
                n: u32,
                responses: &mut Responses<'_, u32>,
            ) -> Result<(), Status> {
                responses.send(&n);
                Ok(())
            }

            fn on_end(
                &mut self,
                ctx: &mut Context<'_>,
                responses: &mut Responses<'_, u32>,
            ) -> Result<(), Status> {
                let responder = ctx.defer();
                std::thread::spawn(move || drop(responder));
                responses.send(&7);
                Ok(())
            }
        }
        let answer =
            ends(|| TestCall::new().bidi(|_| Ok(BidiStream::on_worker(DefersAtTheEnd)), [1, 2]));
        assert_eq!(answer.messages, [1, 2, 7]);
        assert!(answer.result.is_ok());
    }

    /// Runs `f` on a thread of its own; fails the test if it has not ended
    /// within five seconds.
    fn ends<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (done, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(f()).unwrap());
        ended
            .recv_timeout(Duration::from_secs(5))
            .expect("the call did not end")
    }

    /// Echoes each request from a thread until the requests end.
    fn echo_on_a_thread(ctx: &mut Context<'_>) -> Result<BidiStream<u32, u32>, Status> {
        let (stream, requests, mut sink) = BidiStream::<u32, u32>::channel(ctx);
        std::thread::spawn(move || {
            for n in requests {
                let Ok(n) = n else { return };
                if sink.send(&n).is_err() {
                    return;
                }
            }
            sink.finish(Ok(()));
        });
        Ok(stream)
    }

    #[test]
    fn endless_requests_to_a_thread_stop_with_the_call() {
        // The client cancels after three answers.
        let answer = ends(|| TestCall::new().cancel_after(3).bidi(echo_on_a_thread, 1..));
        assert_eq!(answer.messages, [1, 2, 3]);
        assert_eq!(answer.status().code(), Code::Cancelled);

        // The deadline passes.
        let answer = ends(|| {
            TestCall::new()
                .timeout(Duration::from_millis(50))
                .bidi(echo_on_a_thread, 1..)
        });
        assert_eq!(answer.status().code(), Code::DeadlineExceeded);
        // Requests that come slowly: the deadline ends the call before
        // they all came.
        let started = Instant::now();
        let slowly = (0..20).inspect(|_| std::thread::sleep(Duration::from_millis(50)));
        let answer = ends(move || {
            TestCall::new()
                .timeout(Duration::from_millis(100))
                .bidi(echo_on_a_thread, slowly)
        });
        assert_eq!(answer.status().code(), Code::DeadlineExceeded);
        assert!(started.elapsed() < Duration::from_millis(600));

        // The thread answers without reading them.
        let answer = ends(|| {
            TestCall::new().client_stream(
                |ctx| {
                    let (stream, requests, responder) = ClientStream::<u32, u64>::channel(ctx);
                    std::thread::spawn(move || {
                        responder.respond(Ok(7u64));
                        std::thread::sleep(Duration::from_millis(50));
                        drop(requests);
                    });
                    Ok(stream)
                },
                1..,
            )
        });
        assert_eq!(answer.messages, [7]);
        assert!(answer.result.is_ok());
    }
}
