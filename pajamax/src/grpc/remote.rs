//! Calls served on other threads: the handles a handler sends away
//! ([`Responder`], [`Sink`], [`Streaming`]), the state each call shares with
//! its worker, and the [`Inbox`] that carries answer parts back.
//!
//! Parts come back to the worker through its inbox: many parts of many
//! calls wake it once, and leave in one write. A sink waits for credit
//! before it sends, and the worker returns credit as the bytes leave for
//! the client, so no buffer grows without bound. Incoming messages wait in
//! a queue of bounded size; the worker stops taking the client's bytes in
//! while it is full, so the client's flow-control window closes.

use crate::grpc::framing;
use crate::grpc::metadata::Metadata;
use crate::grpc::service::decode_request;
use crate::grpc::status::Status;
use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Instant;

/// A part of an answer on its way back to its call's worker.
pub(crate) struct Delivery {
    /// The connection, as its worker knows it.
    pub connection: u64,
    pub stream: u32,
    pub part: Part,
}

/// What a thread sends back for a call.
pub(crate) enum Part {
    /// Initial metadata, sent now.
    Headers(Metadata),
    /// One framed message (5-byte prefix included).
    Message(Vec<u8>),
    /// The end of a streamed answer.
    Finish {
        status: Option<Status>,
        trailers: Metadata,
    },
    /// The whole answer of a unary or client-streaming call.
    Answer {
        result: Result<Vec<u8>, Status>,
        headers: Metadata,
        trailers: Metadata,
    },
    /// The thread took incoming messages: the queue has room again.
    Resume,
    /// The threads of the connection's calls took incoming messages: the
    /// connection's share of queued request bytes has room again.
    Room,
}

/// The queue of answer parts for one worker. Producers push from any
/// thread; the worker is woken once for however many parts arrive before
/// it drains.
///
/// Internal: the server's workers make and drain it; an application
/// reaches it only through a [`Responder`], [`Sink`] or [`Streaming`].
pub struct Inbox {
    parts: Mutex<Vec<Delivery>>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").finish_non_exhaustive()
    }
}

impl Inbox {
    /// An inbox that calls `wake` when its first part arrives after a
    /// drain.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Arc<Inbox> {
        Arc::new(Inbox {
            parts: Mutex::new(Vec::new()),
            wake: Box::new(wake),
        })
    }

    pub(crate) fn push(&self, delivery: Delivery) {
        let was_empty = {
            let mut parts = lock(&self.parts);
            parts.push(delivery);
            parts.len() == 1
        };
        if was_empty {
            (self.wake)();
        }
    }

    /// Moves every waiting part into `into`, in the order they came.
    pub(crate) fn drain(&self, into: &mut Vec<Delivery>) {
        into.append(&mut lock(&self.parts));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs an application's [`Sink::on_cancel`] callback; a panic in it is
/// logged and goes no further (it runs on a worker).
fn run_on_cancel(f: OnCancel, reason: CancelReason) {
    let run = std::panic::AssertUnwindSafe(move || f(reason));
    if std::panic::catch_unwind(run).is_err() {
        log::error!("a sink's on_cancel callback panicked");
    }
}

/// Why a call ended before the thread serving it was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The client cancelled the call (RST_STREAM).
    Cancelled,
    /// The call's deadline passed.
    DeadlineExceeded,
    /// The connection closed, or the server shut down.
    ConnectionClosed,
    /// The call was ended otherwise: its answer is complete, or a request
    /// message was invalid.
    Ended,
}

/// The call a [`Sink`], [`Streaming`] or [`Responder`] belongs to has
/// ended: stop working for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cancelled {
    /// Why.
    pub reason: CancelReason,
}

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.reason {
            CancelReason::Cancelled => "the client cancelled the call",
            CancelReason::DeadlineExceeded => "the call's deadline passed",
            CancelReason::ConnectionClosed => "the connection closed",
            CancelReason::Ended => "the call has ended",
        })
    }
}

impl std::error::Error for Cancelled {}

impl From<Cancelled> for Status {
    /// `CANCELLED`, `DEADLINE_EXCEEDED` or `UNAVAILABLE`, for a handler that
    /// ends with `?`.
    fn from(cancelled: Cancelled) -> Status {
        let text = cancelled.to_string();
        match cancelled.reason {
            CancelReason::DeadlineExceeded => Status::deadline_exceeded(text),
            CancelReason::ConnectionClosed => Status::unavailable(text),
            CancelReason::Cancelled | CancelReason::Ended => Status::cancelled(text),
        }
    }
}

/// Why [`Sink::try_send`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TrySendError {
    /// No room now: the stream has as many answer bytes on their way as
    /// its send buffer holds (the client has not read them), or the
    /// connection's sinks as many as they may have together. The message
    /// was not sent; the call goes on.
    Full,
    /// The call has ended; stop producing.
    Cancelled(Cancelled),
}

impl fmt::Display for TrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full => f.write_str("no room for the message: the client reads slower"),
            TrySendError::Cancelled(cancelled) => cancelled.fmt(f),
        }
    }
}

impl std::error::Error for TrySendError {}

impl From<Cancelled> for TrySendError {
    fn from(cancelled: Cancelled) -> TrySendError {
        TrySendError::Cancelled(cancelled)
    }
}

impl From<TrySendError> for Status {
    /// `RESOURCE_EXHAUSTED` for a client that does not keep up (the status
    /// a fan-out may end such a call with), else as [`Cancelled`]'s.
    fn from(error: TrySendError) -> Status {
        match error {
            TrySendError::Full => Status::resource_exhausted(error.to_string()),
            TrySendError::Cancelled(cancelled) => cancelled.into(),
        }
    }
}

/// Where a call's parts go, and the limits of what may be in flight.
#[derive(Clone)]
pub(crate) struct Target {
    pub inbox: Arc<Inbox>,
    pub connection: u64,
    pub stream: u32,
    /// Answer bytes a sink may have on their way before it waits.
    pub credit: usize,
    /// Request bytes that may wait for the thread before the worker stops
    /// taking more from the client.
    pub incoming_limit: usize,
    /// The request bytes all the connection's calls have waiting for their
    /// threads.
    pub queued: Arc<Queued>,
    /// The answer bytes all the connection's sinks may have on their way.
    pub lent: Arc<Lent>,
}

/// Answer bytes the sinks of one connection's calls may have on their way
/// together, on top of each stream's own credit: without it, each of
/// thousands of streams could fill the output with a send buffer's worth
/// for a client that opens its windows and never reads. The worker gives
/// it back as it gives back the streams' credit (as the bytes leave for
/// the output, while the output and the held bytes are below their
/// limits), and for a call that ended, once they are; a sink with nothing
/// to send holds none of it.
pub(crate) struct Lent {
    state: Mutex<LentState>,
}

struct LentState {
    /// What the sinks may still take; below zero while answers from other
    /// threads that do not wait (a [`Responder`]'s) are on their way.
    credit: i64,
    /// Sinks waiting for credit to come back, first come first woken.
    waiting: VecDeque<Weak<Shared>>,
    /// The length at which `waiting` is rid of sinks that are gone: calls
    /// that end while their sinks wait do not pile up.
    prune_at: usize,
    /// Sinks taken off `waiting` and woken that have not come for the
    /// credit yet: still waiting, as far as [`Lent::try_take`] goes.
    woken: usize,
}

/// What became of a sink's claim on its connection's credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    /// Taken; `more`: some is left for a sink that waits, to be woken.
    Taken { more: bool },
    /// The sink waits in line; `wake`: credit is there that no sink was
    /// woken for, so the first in line is to be woken (once the caller
    /// holds no sink's lock).
    Queued { wake: bool },
}

/// The shortest list of waiting sinks that [`Lent`] prunes.
const MIN_PRUNE: usize = 16;

impl Lent {
    /// `credit` bytes for the sinks of a connection.
    pub(crate) fn new(credit: usize) -> Arc<Lent> {
        Arc::new(Lent {
            state: Mutex::new(LentState {
                credit: i64::try_from(credit.max(1)).unwrap_or(i64::MAX),
                waiting: VecDeque::new(),
                prune_at: MIN_PRUNE,
                woken: 0,
            }),
        })
    }

    /// Takes `bytes` if any credit is left and it is `sink`'s turn: a sink
    /// that comes afresh does not pass those that wait, nor one woken for
    /// the credit that has not come for it yet. Otherwise `sink` joins the
    /// queue, to be woken. `woken`: the sink comes after [`Lent::wake_one`]
    /// woke it; if the credit is gone by then (answers that do not wait
    /// took it), it waits first in line again.
    fn take(&self, bytes: usize, sink: &Arc<Shared>, woken: bool) -> Take {
        let mut state = lock(&self.state);
        if woken {
            state.woken -= 1;
        }
        let its_turn = woken || (state.waiting.is_empty() && state.woken == 0);
        if state.credit > 0 && its_turn {
            state.credit -= bytes as i64;
            return Take::Taken {
                more: state.credit > 0 && !state.waiting.is_empty(),
            };
        }
        if state.waiting.len() >= state.prune_at {
            state.waiting.retain(|sink| sink.strong_count() > 0);
            state.prune_at = 2 * state.waiting.len() + MIN_PRUNE;
        }
        if woken {
            state.waiting.push_front(Arc::downgrade(sink));
        } else {
            state.waiting.push_back(Arc::downgrade(sink));
        }
        Take::Queued {
            // Credit nobody was woken for: the first in line is to be.
            wake: state.credit > 0 && state.woken == 0,
        }
    }

    /// Takes `bytes` if any credit is left and no sink waits for it, nor
    /// was woken for it and has not taken it yet (a sink that does not
    /// wait does not pass those that do); `false` otherwise.
    fn try_take(&self, bytes: usize) -> bool {
        let mut state = lock(&self.state);
        let room = state.credit > 0 && state.waiting.is_empty() && state.woken == 0;
        if room {
            state.credit -= bytes as i64;
        }
        room
    }

    /// What the sinks may still take.
    #[cfg(test)]
    fn credit(&self) -> i64 {
        lock(&self.state).credit
    }

    /// Counts answer bytes that did not wait for credit: sinks wait until
    /// they are given back.
    pub(crate) fn spend(&self, bytes: usize) {
        lock(&self.state).credit -= bytes as i64;
    }

    /// Gives back `bytes`, and wakes the first sink that waited.
    pub(crate) fn give(&self, bytes: usize) {
        lock(&self.state).credit += bytes as i64;
        self.wake_one();
    }

    /// Wakes the first sink that waits and is still in its call, if credit
    /// is left and no sink was woken for it that has not come for it yet.
    /// One at a time, not all at once: each sink that takes credit wakes
    /// the next one while some is left (and one that does not take it
    /// passes it on), so a sink that comes while one was woken does not
    /// pass those that wait before it.
    fn wake_one(&self) {
        loop {
            let next = {
                let mut state = lock(&self.state);
                if state.credit <= 0 || state.woken > 0 {
                    return;
                }
                let Some(next) = state.waiting.pop_front() else {
                    return;
                };
                // Counted as woken as it leaves the queue: no try comes
                // between.
                state.woken += 1;
                next
            };
            let woken = next.upgrade().is_some_and(|sink| {
                // Under the sink's lock: it waits already, or sees the
                // credit.
                let mut state = lock(&sink.state);
                if state.cancelled.is_some() {
                    return false;
                }
                state.lent_waiting = false;
                state.lent_woken = true;
                drop(state);
                sink.changed.notify_all();
                true
            });
            if woken {
                return;
            }
            lock(&self.state).woken -= 1;
        }
    }

    /// A woken sink does not take the credit (its call ended): the next
    /// one is woken instead.
    fn pass_on(&self) {
        lock(&self.state).woken -= 1;
        self.wake_one();
    }
}

/// Request bytes waiting for the threads of one connection's calls, and the
/// most they may be: without it, each of thousands of streams could hold a
/// stream window (or one inflated message) in its thread's queue, and each
/// call sent to a thread its request. Streamed messages and the requests
/// of calls sent to threads each have the limit; a thread that waits for
/// the next message of its call gets it past the limit.
#[derive(Debug)]
pub(crate) struct Queued {
    limit: usize,
    state: Mutex<QueuedState>,
    /// Streamed and held bytes together, as last counted, read by the
    /// worker's peaks without taking the lock.
    bytes_now: AtomicUsize,
}

#[derive(Debug, Default)]
struct QueuedState {
    /// Request messages of streams queued and not yet taken.
    streamed: usize,
    /// The requests of calls sent to threads ([`Shared::hold_request`]):
    /// they leave when the threads answer, not as the threads take
    /// streamed messages.
    held: usize,
    /// A streamed message was refused for lack of room: a [`Part::Room`]
    /// is owed once there is some.
    starved: bool,
}

impl QueuedState {
    fn total(&self) -> usize {
        self.streamed + self.held
    }
}

/// What became of a request message offered to a call's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Queued for the thread.
    Queued,
    /// The call's queue is full: a [`Part::Resume`] comes once its thread
    /// has made room.
    CallFull,
    /// The connection's queues are full: a [`Part::Room`] comes once the
    /// threads have made room.
    ConnectionFull,
}

impl Queued {
    /// At most `limit` bytes of streamed messages (and at least one) and
    /// `limit` bytes of held requests (and at least one) at once.
    pub(crate) fn new(limit: usize) -> Arc<Queued> {
        Arc::new(Queued {
            limit: limit.max(1),
            state: Mutex::new(QueuedState::default()),
            bytes_now: AtomicUsize::new(0),
        })
    }

    /// The request bytes queued now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes_now.load(Ordering::Relaxed)
    }

    /// Counts `bytes` of a streamed message in if there is room: some is
    /// left, or no streamed message is queued (a message larger than the
    /// limit goes alone), or a thread waits for this very message
    /// (`awaited`): held back, it could wait for ever while the messages
    /// of calls queued behind it (to be read by the same thread, once it
    /// is done) hold the room. So the limit is passed by at most one
    /// message for each thread that waits for one, and only until it
    /// takes it.
    fn add(&self, bytes: usize, awaited: bool) -> bool {
        let mut state = lock(&self.state);
        if !awaited && state.streamed > 0 && state.streamed + bytes > self.limit {
            state.starved = true;
            return false;
        }
        state.streamed += bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
        true
    }

    /// Counts `bytes` of streamed messages out; `true` when a refused call
    /// may be offered more now: the streamed messages are down to half
    /// the limit.
    fn remove(&self, bytes: usize) -> bool {
        let mut state = lock(&self.state);
        state.streamed -= bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
        let room = state.starved && state.streamed <= self.limit / 2;
        if room {
            state.starved = false;
        }
        room
    }

    /// Counts in the `bytes` of a request a call goes to a thread with, if
    /// the held requests leave room for it within the limit (or none is
    /// held): a limit of their own, so that requests whose threads have not
    /// answered never hold streamed messages back (a deferred call that
    /// waits on a client stream of its connection would never be
    /// answered), nor streamed messages them. A request without room is
    /// refused; no call waits for room for it.
    fn hold(&self, bytes: usize) -> bool {
        let mut state = lock(&self.state);
        if state.held > 0 && state.held + bytes > self.limit {
            return false;
        }
        state.held += bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
        true
    }

    /// Counts out the `bytes` of a request [`Queued::hold`] counted in.
    fn release(&self, bytes: usize) {
        let mut state = lock(&self.state);
        state.held -= bytes;
        self.bytes_now.store(state.total(), Ordering::Relaxed);
    }
}

/// The state a call served on another thread shares with its worker.
pub(crate) struct Shared {
    target: Target,
    deadline: Option<Instant>,
    state: Mutex<State>,
    /// Signalled when credit comes back, a message comes in, or the call
    /// ends.
    changed: Condvar,
    /// The size of the request the call went to the thread with (a unary
    /// or server-streaming call), counted in the connection's requests
    /// held for threads ([`Queued`]) until the thread answers or starts to
    /// ([`Shared::hold_request`]).
    held: AtomicUsize,
    /// The requests held for threads had no room for that request: the
    /// call is answered `RESOURCE_EXHAUSTED` at once, and its thread sees
    /// it cancelled.
    refused: AtomicBool,
}

struct State {
    cancelled: Option<CancelReason>,
    /// Answer bytes the sink may still send before it waits.
    credit: i64,
    /// Request messages (prefix included) not yet taken by the thread.
    incoming: VecDeque<Vec<u8>>,
    incoming_bytes: usize,
    /// The client finished sending: `Some(None)` cleanly, `Some(Some(s))`
    /// with an error to report after the queued messages.
    incoming_end: Option<Option<Status>>,
    /// The worker stopped delivering for lack of room.
    resume_wanted: bool,
    /// The worker stopped delivering for lack of room in the connection's
    /// share: it waits for a [`Part::Room`], or, once the thread lets go
    /// of its [`Streaming`] or waits for a message, a [`Part::Resume`].
    room_wanted: bool,
    /// The thread waits for a request message (set only while it does not
    /// hold the lock, none being queued): the next one is queued whatever
    /// the connection's share holds.
    reader_waiting: bool,
    /// The thread let go of its [`Streaming`]: what it did not take is
    /// dropped, and so is what comes after.
    reader_gone: bool,
    /// Answer bytes taken from the connection's [`Lent`] credit and not
    /// given back yet.
    lent: usize,
    /// The sink waits for the connection's credit.
    lent_waiting: bool,
    /// The sink was woken for the connection's credit ([`Lent::wake_one`])
    /// and has not come for it yet.
    lent_woken: bool,
    /// Run once when the call ends ([`Sink::on_cancel`]).
    on_cancel: Option<OnCancel>,
}

/// What [`Sink::on_cancel`] runs.
type OnCancel = Box<dyn FnOnce(CancelReason) + Send>;

impl Shared {
    pub(crate) fn new(target: Target, deadline: Option<Instant>) -> Arc<Shared> {
        let credit = i64::try_from(target.credit).unwrap_or(i64::MAX);
        Arc::new(Shared {
            target,
            deadline,
            state: Mutex::new(State {
                cancelled: None,
                credit,
                incoming: VecDeque::new(),
                incoming_bytes: 0,
                incoming_end: None,
                resume_wanted: false,
                room_wanted: false,
                reader_waiting: false,
                reader_gone: false,
                lent: 0,
                lent_waiting: false,
                lent_woken: false,
                on_cancel: None,
            }),
            changed: Condvar::new(),
            held: AtomicUsize::new(0),
            refused: AtomicBool::new(false),
        })
    }

    /// Counts the `bytes` of the request the call goes to the thread with
    /// in the connection's requests held for threads, if there is room (or
    /// none is held); otherwise the call is refused: cancelled at once, for
    /// the worker to answer `RESOURCE_EXHAUSTED`. A thread's queue
    /// (dispatch mode, or the application's own channel) then never holds
    /// more requests of one connection than the limit allows.
    pub(crate) fn hold_request(&self, bytes: usize) {
        if self.target.queued.hold(bytes) {
            self.held.store(bytes, Ordering::Relaxed);
        } else {
            self.refused.store(true, Ordering::Relaxed);
            self.cancel(CancelReason::Ended);
        }
    }

    /// Whether the call was refused for lack of room for its request
    /// ([`Shared::hold_request`]).
    pub(crate) fn is_refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The thread answers, or starts to: the request it was sent with
    /// leaves the connection's requests held for threads.
    fn release_request(&self) {
        if self.held.load(Ordering::Relaxed) > 0 {
            let bytes = self.held.swap(0, Ordering::Relaxed);
            self.target.queued.release(bytes);
        }
    }

    fn send(&self, part: Part) {
        self.target.inbox.push(Delivery {
            connection: self.target.connection,
            stream: self.target.stream,
            part,
        });
    }

    fn cancelled(&self) -> Option<CancelReason> {
        lock(&self.state).cancelled
    }

    // ----- worker side -----

    /// Ends the call for the thread: sends and receives fail from now on.
    pub(crate) fn cancel(&self, reason: CancelReason) {
        let mut state = lock(&self.state);
        if state.cancelled.is_none() {
            state.cancelled = Some(reason);
        }
        let on_cancel = state.on_cancel.take();
        drop(state);
        self.changed.notify_all();
        if let Some(on_cancel) = on_cancel {
            run_on_cancel(on_cancel, reason);
        }
    }

    /// Keeps `f` to run when the call ends, or runs it now if it has.
    fn set_on_cancel(&self, f: OnCancel) {
        let mut state = lock(&self.state);
        match state.cancelled {
            Some(reason) => {
                drop(state);
                run_on_cancel(f, reason);
            }
            None => {
                let replaced = state.on_cancel.replace(f);
                drop(state);
                // The application's: dropped without the call's lock held
                // (what it holds may take that lock, or another the worker
                // waits for).
                drop(replaced);
            }
        }
    }

    /// Gives back credit for answer bytes that left for the client, to
    /// the call and to the connection.
    pub(crate) fn return_credit(&self, bytes: usize) {
        let mut state = lock(&self.state);
        state.credit += bytes as i64;
        let lent = bytes.min(state.lent);
        state.lent -= lent;
        drop(state);
        self.changed.notify_all();
        if lent > 0 {
            self.target.lent.give(lent);
        }
    }

    /// The connection's credit this call's sink holds, taken back from it
    /// (the call has ended, or ends): the caller gives it back once the
    /// bytes are out.
    pub(crate) fn take_lent(&self) -> usize {
        std::mem::take(&mut lock(&self.state).lent)
    }

    /// Queues a request message for the thread, if the call's queue and
    /// the connection's share have room, or the thread waits for it;
    /// otherwise nothing is queued, and a [`Part::Resume`] or
    /// [`Part::Room`] comes once there is room.
    pub(crate) fn offer(&self, message: &[u8]) -> Offered {
        let mut state = lock(&self.state);
        if state.reader_gone {
            // Taken, and dropped: no one reads them.
            return Offered::Queued;
        }
        if state.incoming_bytes >= self.target.incoming_limit {
            state.resume_wanted = true;
            return Offered::CallFull;
        }
        let awaited = state.reader_waiting && state.incoming.is_empty();
        if !self.target.queued.add(message.len(), awaited) {
            state.room_wanted = true;
            return Offered::ConnectionFull;
        }
        state.room_wanted = false;
        state.incoming_bytes += message.len();
        state.incoming.push_back(message.to_vec());
        drop(state);
        self.changed.notify_all();
        Offered::Queued
    }

    /// The client has sent everything (`None`), or its stream failed.
    pub(crate) fn end_incoming(&self, error: Option<Status>) {
        let mut state = lock(&self.state);
        if state.incoming_end.is_none() {
            state.incoming_end = Some(error);
        }
        drop(state);
        self.changed.notify_all();
    }

    // ----- thread side -----

    /// Waits for `bytes` of credit, the call's and the connection's, or
    /// the end of the call.
    fn take_credit(self: &Arc<Self>, bytes: usize) -> Result<(), Cancelled> {
        let mut state = lock(&self.state);
        let mut waited = false;
        loop {
            if let Some(reason) = state.cancelled {
                let woken = std::mem::take(&mut state.lent_woken);
                drop(state);
                if woken {
                    // Woken for credit it does not take: the next sink is.
                    self.target.lent.pass_on();
                } else if waited {
                    self.target.lent.wake_one();
                }
                return Err(Cancelled { reason });
            }
            if state.credit > 0 && !state.lent_waiting {
                let woken = std::mem::take(&mut state.lent_woken);
                match self.target.lent.take(bytes, self, woken) {
                    Take::Taken { more } => {
                        state.credit -= bytes as i64;
                        state.lent += bytes;
                        drop(state);
                        if more {
                            self.target.lent.wake_one();
                        }
                        return Ok(());
                    }
                    Take::Queued { wake } => {
                        state.lent_waiting = true;
                        waited = true;
                        if wake {
                            // Perhaps this sink itself: look again.
                            drop(state);
                            self.target.lent.wake_one();
                            state = lock(&self.state);
                            continue;
                        }
                    }
                }
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Takes the credit for `bytes` if it is there now, without waiting:
    /// `Ok(false)` when it is not. (The sink is not waiting in
    /// [`Sink::send`] meanwhile: both take it by `&mut`.)
    fn try_take_credit(&self, bytes: usize) -> Result<bool, Cancelled> {
        let mut state = lock(&self.state);
        if let Some(reason) = state.cancelled {
            return Err(Cancelled { reason });
        }
        if state.credit <= 0 || !self.target.lent.try_take(bytes) {
            return Ok(false);
        }
        state.credit -= bytes as i64;
        state.lent += bytes;
        Ok(true)
    }

    /// Whether credit for a message is there now (it may be gone by the
    /// time the message is encoded), or the call has ended.
    fn has_credit(&self) -> Result<bool, Cancelled> {
        let state = lock(&self.state);
        if let Some(reason) = state.cancelled {
            return Err(Cancelled { reason });
        }
        Ok(state.credit > 0)
    }

    /// Waits for the next request message; `Ok(None)` once the client is
    /// done.
    fn take_incoming(&self) -> Result<Option<Vec<u8>>, Status> {
        let mut state = lock(&self.state);
        loop {
            if let Some(message) = state.incoming.pop_front() {
                state.incoming_bytes -= message.len();
                let resume =
                    state.resume_wanted && state.incoming_bytes <= self.target.incoming_limit / 2;
                if resume {
                    state.resume_wanted = false;
                }
                drop(state);
                if resume {
                    self.send(Part::Resume);
                }
                self.leave_share(message.len());
                return Ok(Some(message));
            }
            if let Some(end) = &state.incoming_end {
                return match end {
                    None => Ok(None),
                    Some(status) => Err(status.clone()),
                };
            }
            if let Some(reason) = state.cancelled {
                return Err(Cancelled { reason }.into());
            }
            // While the thread waits, the next message is queued whatever
            // the connection's share holds: calls queued behind this
            // thread, which it reads once it is done with this one, may
            // hold all of it.
            state.reader_waiting = true;
            if std::mem::take(&mut state.room_wanted) {
                // Held back for room in that share: offered again.
                drop(state);
                self.send(Part::Resume);
                state = lock(&self.state);
            } else {
                state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.reader_waiting = false;
        }
    }

    /// The thread let go of its [`Streaming`]: the request messages it did
    /// not take leave the connection's share at once, not when the call
    /// ends (a bidirectional call may answer through its sink for long
    /// after), and those that come after are dropped as they arrive.
    fn let_go_of_incoming(&self) {
        let mut state = lock(&self.state);
        state.reader_gone = true;
        state.incoming.clear();
        let left = std::mem::take(&mut state.incoming_bytes);
        // A call held back for its full queue, or for the connection's,
        // takes messages again (to drop them).
        let resume =
            std::mem::take(&mut state.resume_wanted) | std::mem::take(&mut state.room_wanted);
        drop(state);
        if resume {
            self.send(Part::Resume);
        }
        self.leave_share(left);
    }

    /// Counts `bytes` of request messages out of the connection's share,
    /// and says so to the worker when calls wait for room there.
    fn leave_share(&self, bytes: usize) {
        if bytes > 0 && self.target.queued.remove(bytes) {
            self.send(Part::Room);
        }
    }
}

impl Drop for Shared {
    /// Request messages the thread never took, and the request it held,
    /// leave the connection's share.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let left = std::mem::take(&mut state.incoming_bytes);
        self.leave_share(left);
        self.release_request();
    }
}

/// Frames `message` with its 5-byte prefix into a buffer of its own.
fn framed<M: prost::Message>(message: &M) -> Vec<u8> {
    let len = message.encoded_len();
    let mut buf = Vec::with_capacity(framing::PREFIX_LEN + len);
    buf.push(0);
    buf.extend_from_slice(&(len as u32).to_be_bytes());
    message.encode_raw(&mut buf);
    buf
}

/// Where a unary (or client-streaming) call's answer goes: taken with
/// [`Context::defer`](crate::Context::defer), or made with a stream's
/// `channel`.
///
/// Send it to any thread and call [`Responder::respond`] there. A responder
/// dropped without an answer answers the call with `INTERNAL`, so the client
/// never hangs; an answer for a call that has ended (the client cancelled,
/// the deadline passed, the connection closed) is dropped, and
/// [`Responder::is_cancelled`] tells so beforehand.
///
/// A handler whose answer needs slow work (a database, a file, another
/// service) hands the call to a thread of the application's, and the
/// worker serves other calls meanwhile:
///
/// ```
/// use pajamax::{Context, Responder, Status};
/// use std::sync::mpsc;
///
/// struct Lookup {
///     jobs: mpsc::Sender<(String, Responder)>,
/// }
///
/// impl Lookup {
///     /// As in a generated trait: `rpc Lookup (string) returns (string)`.
///     fn lookup_with_context(&self, ctx: &mut Context<'_>, key: String) -> Result<String, Status> {
///         let responder = ctx.defer();
///         if let Err(mpsc::SendError((_, responder))) = self.jobs.send((key, responder)) {
///             responder.respond::<String>(Err(Status::unavailable("the lookup thread stopped")));
///         }
///         Ok(String::new()) // ignored: the responder answers
///     }
/// }
///
/// // The application's thread, which may block.
/// let (jobs, queue) = mpsc::channel::<(String, Responder)>();
/// std::thread::spawn(move || {
///     for (key, mut responder) in queue {
///         if responder.is_cancelled() {
///             continue; // the client has gone, or its deadline passed
///         }
///         let value = format!("the value of {key}"); // the slow part
///         responder.trailers_mut().insert("x-source", "store").unwrap();
///         responder.respond(Ok(value));
///     }
/// });
///
/// let service = Lookup { jobs };
/// # let md = pajamax::Metadata::new();
/// # let mut response = pajamax::ResponseMetadata::default();
/// # let mut ctx = Context::new(&md, None, None, &mut response);
/// # service.lookup_with_context(&mut ctx, "k".into())?;
/// # Ok::<(), Status>(())
/// ```
pub struct Responder {
    shared: Option<Arc<Shared>>,
    headers: Metadata,
    trailers: Metadata,
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("stream", &self.shared.as_ref().map(|s| s.target.stream))
            .finish()
    }
}

impl Responder {
    pub(crate) fn new(shared: Option<Arc<Shared>>) -> Responder {
        Responder {
            shared,
            headers: Metadata::new(),
            trailers: Metadata::new(),
        }
    }

    /// Metadata sent with the response headers.
    pub fn headers_mut(&mut self) -> &mut Metadata {
        &mut self.headers
    }

    /// Metadata sent with the trailers of the answer.
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.trailers
    }

    /// Whether the call has ended without this answer; an answer sent now
    /// is dropped.
    pub fn is_cancelled(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.cancelled().is_some())
    }

    /// The call's deadline, as [`Context::deadline`](crate::Context::deadline).
    pub fn deadline(&self) -> Option<Instant> {
        self.shared.as_ref().and_then(|s| s.deadline)
    }

    /// Answers the call with `result`. The message is encoded here, on the
    /// calling thread.
    pub fn respond<M: prost::Message>(mut self, result: Result<M, Status>) {
        let framed = result.map(|message| framed(&message));
        self.send(framed);
    }

    fn send(&mut self, result: Result<Vec<u8>, Status>) {
        if let Some(shared) = self.shared.take() {
            shared.release_request();
            shared.send(Part::Answer {
                result,
                headers: std::mem::take(&mut self.headers),
                trailers: std::mem::take(&mut self.trailers),
            });
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.send(Err(Status::internal(
            "the handler dropped its responder without answering",
        )));
    }
}

/// The sending side of a streamed answer, for another thread: made with
/// [`ServerStream::channel`](crate::ServerStream::channel) or
/// [`BidiStream::channel`](crate::BidiStream::channel).
///
/// [`Sink::send`] waits while the answer bytes already on their way reach
/// the stream's send buffer size and the client has not read them, or
/// while the sinks of the connection's calls together have four times
/// `produce_output_limit` bytes on their way, so a slow client slows the
/// sender instead of filling memory; it fails once
/// the call has ended (the client cancelled, the deadline passed, the
/// connection closed). End with [`Sink::finish`]; a sink dropped without
/// it ends the call with `INTERNAL`.
///
/// [`Cancelled`] converts to the matching [`Status`], so a sending loop can
/// use `?` and hand its result to `finish`:
///
/// ```
/// use pajamax::{Context, ServerStream, Sink, Status};
///
/// // `rpc Tail (uint64) returns (stream uint64)`, served on a thread.
/// fn tail_with_context(ctx: &mut Context<'_>, from: u64) -> Result<ServerStream<u64>, Status> {
///     let (stream, mut sink) = ServerStream::channel(ctx);
///     std::thread::spawn(move || {
///         let result = follow(&mut sink, from);
///         sink.finish(result);
///     });
///     Ok(stream)
/// }
///
/// fn follow(sink: &mut Sink<u64>, from: u64) -> Result<(), Status> {
///     sink.headers_mut().insert("x-from", &from.to_string()).unwrap();
///     sink.send_headers()?; // the client sees the headers before any message
///     for n in from..from + 100 {
///         sink.send(&n)?; // waits while the client does not read
///     }
///     Ok(())
/// }
/// # let md = pajamax::Metadata::new();
/// # let mut response = pajamax::ResponseMetadata::default();
/// # let mut ctx = Context::new(&md, None, None, &mut response);
/// # tail_with_context(&mut ctx, 7)?;
/// # Ok::<(), Status>(())
/// ```
pub struct Sink<M> {
    shared: Option<Arc<Shared>>,
    headers: Metadata,
    headers_sent: bool,
    trailers: Metadata,
    finished: bool,
    _message: PhantomData<fn(M)>,
}

impl<M> fmt::Debug for Sink<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sink")
            .field("stream", &self.shared.as_ref().map(|s| s.target.stream))
            .field("headers_sent", &self.headers_sent)
            .finish()
    }
}

impl<M: prost::Message> Sink<M> {
    pub(crate) fn new(
        shared: Option<Arc<Shared>>,
        headers: Metadata,
        trailers: Metadata,
    ) -> Sink<M> {
        Sink {
            shared,
            headers,
            headers_sent: false,
            trailers,
            finished: false,
            _message: PhantomData,
        }
    }

    /// Metadata sent with the response headers: set it before the first
    /// message or [`Sink::send_headers`].
    pub fn headers_mut(&mut self) -> &mut Metadata {
        &mut self.headers
    }

    /// Metadata sent with the trailers.
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.trailers
    }

    /// Whether the call has ended; sends fail from then on.
    pub fn is_cancelled(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.cancelled().is_some())
    }

    /// Runs `f` once, with the reason, when the call ends: the client
    /// cancels, the deadline passes, the connection closes, or the answer
    /// is complete (`CancelReason::Ended`, after [`Sink::finish`]); at once,
    /// on this thread, if it has ended already. A later `on_cancel`
    /// replaces an earlier one not run yet.
    ///
    /// For a thread that waits on something of its own (a channel, a
    /// condition variable) rather than in [`Sink::send`]: `f` wakes it, so
    /// it learns of the end without polling [`Sink::is_cancelled`]. `f`
    /// runs on the thread that ends the call: usually a worker, which
    /// serves other connections meanwhile; the thread reading the call's
    /// [`Streaming`] when a request message does not decode; this one when
    /// the call has ended already. So it must only wake (send on a channel,
    /// notify), never block or work, nor take a lock a thread may hold
    /// while it reads the call's requests. A panic in it is logged and goes
    /// no further.
    ///
    /// ```
    /// use pajamax::{Context, ServerStream, Status};
    /// use std::sync::mpsc;
    ///
    /// enum Event { Tick(u64), Ended }
    ///
    /// // `rpc Ticks (Empty) returns (stream uint64)`, fed from a channel.
    /// fn ticks_with_context(
    ///     ctx: &mut Context<'_>,
    ///     events: mpsc::Receiver<Event>,
    ///     wake: mpsc::Sender<Event>,
    /// ) -> Result<ServerStream<u64>, Status> {
    ///     let (stream, mut sink) = ServerStream::channel(ctx);
    ///     sink.on_cancel(move |_| {
    ///         let _ = wake.send(Event::Ended);
    ///     });
    ///     std::thread::spawn(move || {
    ///         // Waits for the next tick or the end of the call, whichever
    ///         // comes first.
    ///         while let Ok(Event::Tick(n)) = events.recv() {
    ///             if sink.send(&n).is_err() {
    ///                 return;
    ///             }
    ///         }
    ///         sink.finish(Ok(()));
    ///     });
    ///     Ok(stream)
    /// }
    /// # let md = pajamax::Metadata::new();
    /// # let mut response = pajamax::ResponseMetadata::default();
    /// # let mut ctx = Context::new(&md, None, None, &mut response);
    /// # let (tx, rx) = mpsc::channel();
    /// # ticks_with_context(&mut ctx, rx, tx.clone())?;
    /// # tx.send(Event::Ended).unwrap();
    /// # Ok::<(), Status>(())
    /// ```
    pub fn on_cancel(&mut self, f: impl FnOnce(CancelReason) + Send + 'static) {
        if let Some(shared) = &self.shared {
            shared.set_on_cancel(Box::new(f));
        }
    }

    /// The call's deadline, as [`Context::deadline`](crate::Context::deadline).
    pub fn deadline(&self) -> Option<Instant> {
        self.shared.as_ref().and_then(|s| s.deadline)
    }

    /// Sends the response headers now, without waiting for a message.
    ///
    /// # Errors
    ///
    /// [`Cancelled`] once the call has ended.
    pub fn send_headers(&mut self) -> Result<(), Cancelled> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        shared.release_request();
        if let Some(reason) = shared.cancelled() {
            return Err(Cancelled { reason });
        }
        if !self.headers_sent {
            self.headers_sent = true;
            shared.send(Part::Headers(std::mem::take(&mut self.headers)));
        }
        Ok(())
    }

    /// Sends one message, waiting first while the stream has as many bytes
    /// on their way as its send buffer holds, or the connection's sinks as
    /// many as they may have together. The message is encoded here, on the
    /// calling thread.
    ///
    /// # Errors
    ///
    /// [`Cancelled`] once the call has ended; stop producing then.
    pub fn send(&mut self, message: &M) -> Result<(), Cancelled> {
        self.send_message(message, false)
    }

    /// As [`Sink::send`], but the message goes uncompressed even when the
    /// call's answers are compressed (say, a payload that is compressed
    /// already).
    ///
    /// # Errors
    ///
    /// [`Cancelled`] once the call has ended; stop producing then.
    pub fn send_uncompressed(&mut self, message: &M) -> Result<(), Cancelled> {
        self.send_message(message, true)
    }

    /// Sends one message if there is room for it now, without waiting:
    /// for a thread that feeds many calls (a fan-out to subscribers), where
    /// one client that stops reading must not hold up the others. On
    /// [`TrySendError::Full`] nothing was sent and the call goes on: try
    /// again later, skip the message, or end the call (`?` makes the error
    /// `RESOURCE_EXHAUSTED`).
    ///
    /// ```
    /// use pajamax::{Sink, Status, TrySendError};
    ///
    /// /// Sends `event` to every subscriber that keeps up; ends the calls of
    /// /// those that do not, and forgets the calls that ended.
    /// fn publish(subscribers: &mut Vec<Sink<u64>>, event: u64) {
    ///     let mut kept = Vec::new();
    ///     for mut sink in subscribers.drain(..) {
    ///         match sink.try_send(&event) {
    ///             Ok(()) => kept.push(sink),
    ///             Err(TrySendError::Full) => sink.finish(Err(Status::resource_exhausted("too slow"))),
    ///             Err(ended) => sink.finish(Err(ended.into())),
    ///         }
    ///     }
    ///     *subscribers = kept;
    /// }
    /// # let md = pajamax::Metadata::new();
    /// # let mut response = pajamax::ResponseMetadata::default();
    /// # let mut ctx = pajamax::Context::new(&md, None, None, &mut response);
    /// # let (_stream, sink) = pajamax::ServerStream::<u64>::channel(&mut ctx);
    /// # let mut subscribers = vec![sink];
    /// # publish(&mut subscribers, 7);
    /// # assert_eq!(subscribers.len(), 1);
    /// ```
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] when there is no room now;
    /// [`TrySendError::Cancelled`] once the call has ended.
    pub fn try_send(&mut self, message: &M) -> Result<(), TrySendError> {
        let Some(shared) = self.shared.clone() else {
            return Ok(());
        };
        if !self.headers_sent {
            // The first part of the answer, as in `send`: the request goes
            // whether there is room or not.
            shared.release_request();
        }
        // Not encoded for nothing when there is no room (the usual case
        // for a client that stopped reading).
        if !shared.has_credit()? {
            return Err(TrySendError::Full);
        }
        let bytes = framed(message);
        if !shared.try_take_credit(bytes.len())? {
            return Err(TrySendError::Full);
        }
        if !self.headers_sent {
            self.headers_sent = true;
            shared.send(Part::Headers(std::mem::take(&mut self.headers)));
        }
        shared.send(Part::Message(bytes));
        Ok(())
    }

    /// Sends one message, marked [`framing::PLAIN`] when `plain` (the
    /// worker writes 0 over the mark before it leaves), once the credit
    /// for it is there.
    fn send_message(&mut self, message: &M, plain: bool) -> Result<(), Cancelled> {
        let Some(shared) = self.shared.clone() else {
            return Ok(());
        };
        if !self.headers_sent {
            // The first part of the answer: the request goes (whatever
            // the wait below).
            shared.release_request();
        }
        let mut bytes = framed(message);
        if plain {
            bytes[0] = framing::PLAIN;
        }
        shared.take_credit(bytes.len())?;
        if !self.headers_sent {
            self.headers_sent = true;
            shared.send(Part::Headers(std::mem::take(&mut self.headers)));
        }
        shared.send(Part::Message(bytes));
        Ok(())
    }

    /// Ends the answer: `Ok(())` for status `OK`, or the error status, with
    /// the trailers set on the sink.
    pub fn finish(mut self, result: Result<(), Status>) {
        self.end(result.err());
    }

    fn end(&mut self, status: Option<Status>) {
        if self.finished {
            return;
        }
        self.finished = true;
        if let Some(shared) = &self.shared {
            shared.release_request();
            let mut trailers = std::mem::take(&mut self.trailers);
            if !self.headers_sent {
                // Never sent: the headers' metadata goes with the trailers.
                for (name, value) in self.headers.iter() {
                    trailers.push(name.as_bytes(), value);
                }
            }
            shared.send(Part::Finish { status, trailers });
        }
    }
}

impl<M> Drop for Sink<M> {
    fn drop(&mut self) {
        if !self.finished {
            self.finished = true;
            if let Some(shared) = &self.shared {
                shared.release_request();
                shared.send(Part::Finish {
                    status: Some(Status::internal(
                        "the handler dropped its sink without finishing",
                    )),
                    trailers: std::mem::take(&mut self.trailers),
                });
            }
        }
    }
}

/// The request messages of a client-streaming or bidirectional call, for
/// another thread: made with a stream's `channel`.
///
/// Iterating blocks until the next message arrives and ends when the client
/// is done. An item is an error when a message does not decode
/// (`INTERNAL`) or the call has ended ([`Cancelled`] as a status);
/// nothing follows an error. Taking messages is what lets the client send
/// more: its flow-control window opens as the queue empties. Dropping it
/// lets go of the requests: those not taken yet, and those the client
/// sends after, are dropped (the client is not held back), while the call
/// goes on.
///
/// ```
/// use pajamax::{ClientStream, Context, Status};
///
/// // `rpc Sum (stream uint32) returns (uint64)`, read on a thread.
/// fn sum_with_context(ctx: &mut Context<'_>) -> Result<ClientStream<u32, u64>, Status> {
///     let (stream, numbers, responder) = ClientStream::channel(ctx);
///     std::thread::spawn(move || {
///         // Blocks for each message; the first error ends the sum.
///         let sum: Result<u64, Status> = numbers.map(|n| n.map(u64::from)).sum();
///         responder.respond(sum);
///     });
///     Ok(stream)
/// }
/// # let md = pajamax::Metadata::new();
/// # let mut response = pajamax::ResponseMetadata::default();
/// # let mut ctx = Context::new(&md, None, None, &mut response);
/// # sum_with_context(&mut ctx)?;
/// # Ok::<(), Status>(())
/// ```
pub struct Streaming<M> {
    shared: Option<Arc<Shared>>,
    done: bool,
    _message: PhantomData<fn() -> M>,
}

impl<M> fmt::Debug for Streaming<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streaming")
            .field("stream", &self.shared.as_ref().map(|s| s.target.stream))
            .field("done", &self.done)
            .finish()
    }
}

impl<M> Streaming<M> {
    pub(crate) fn new(shared: Option<Arc<Shared>>) -> Streaming<M> {
        Streaming {
            shared,
            done: false,
            _message: PhantomData,
        }
    }

    /// Whether the call has ended.
    pub fn is_cancelled(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.cancelled().is_some())
    }

    /// The call's deadline, as [`Context::deadline`](crate::Context::deadline).
    pub fn deadline(&self) -> Option<Instant> {
        self.shared.as_ref().and_then(|s| s.deadline)
    }
}

impl<M> Drop for Streaming<M> {
    /// What was queued for it and not taken leaves the connection's share.
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.let_go_of_incoming();
        }
    }
}

impl<M: prost::Message + Default> Iterator for Streaming<M> {
    type Item = Result<M, Status>;

    fn next(&mut self) -> Option<Result<M, Status>> {
        if self.done {
            return None;
        }
        let Some(shared) = &self.shared else {
            self.done = true;
            return None;
        };
        let item = match shared.take_incoming() {
            Ok(Some(bytes)) => decode_request(&bytes[framing::PREFIX_LEN..]),
            Ok(None) => {
                self.done = true;
                return None;
            }
            Err(status) => Err(status),
        };
        if item.is_err() {
            self.done = true;
            shared.cancel(CancelReason::Ended);
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting_inbox() -> (Arc<Inbox>, Arc<AtomicUsize>) {
        let wakes = Arc::new(AtomicUsize::new(0));
        let counter = wakes.clone();
        let inbox = Inbox::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        (inbox, wakes)
    }

    /// Stream `stream` of connection 7, whose parts go to `inbox`: credit
    /// of 100 bytes, 10 bytes of requests queued for the call and 1 MiB
    /// for the connection, a pool of 1 MiB for its sinks. Tests change
    /// what they need with `..target(..)`.
    fn target(inbox: &Arc<Inbox>, stream: u32) -> Target {
        Target {
            inbox: inbox.clone(),
            connection: 7,
            stream,
            credit: 100,
            incoming_limit: 10,
            queued: Queued::new(1 << 20),
            lent: Lent::new(1 << 20),
        }
    }

    fn shared(inbox: &Arc<Inbox>, stream: u32, credit: usize) -> Arc<Shared> {
        Shared::new(
            Target {
                credit,
                ..target(inbox, stream)
            },
            None,
        )
    }

    /// The queue of a connection's request bytes waiting for threads,
    /// `share` bytes at most, and a maker of its calls by stream, each of
    /// which queues `per_call` bytes at most.
    fn sharing_a_queue(
        inbox: &Arc<Inbox>,
        share: usize,
        per_call: usize,
    ) -> (Arc<Queued>, impl Fn(u32) -> Arc<Shared>) {
        let queued = Queued::new(share);
        let inbox = inbox.clone();
        let shared = queued.clone();
        let call = move |stream| {
            let target = Target {
                incoming_limit: per_call,
                queued: shared.clone(),
                ..target(&inbox, stream)
            };
            Shared::new(target, None)
        };
        (queued, call)
    }

    /// Three calls (streams 1, 3 and 5) of one connection whose sinks
    /// share a pool of 8 bytes.
    fn three_sharing_eight(inbox: &Arc<Inbox>) -> (Arc<Lent>, [Arc<Shared>; 3]) {
        let lent = Lent::new(8);
        let call = |stream| {
            let target = Target {
                lent: lent.clone(),
                ..target(inbox, stream)
            };
            Shared::new(target, None)
        };
        let calls = [call(1), call(3), call(5)];
        (lent, calls)
    }

    fn drain(inbox: &Inbox) -> Vec<Delivery> {
        let mut parts = Vec::new();
        inbox.drain(&mut parts);
        parts
    }

    #[test]
    fn many_answers_wake_once_until_drained() {
        let (inbox, wakes) = counting_inbox();
        for stream in [1, 3, 5] {
            Responder::new(Some(shared(&inbox, stream, 10))).respond(Ok(42u32));
        }
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        let parts = drain(&inbox);
        assert_eq!(parts.len(), 3);
        let Part::Answer { result, .. } = &parts[0].part else {
            panic!("an answer")
        };
        assert_eq!(result.as_ref().unwrap(), &[0, 0, 0, 0, 2, 0x08, 42]);
        Responder::new(Some(shared(&inbox, 7, 10))).respond(Ok(1u32));
        assert_eq!(wakes.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn dropped_responder_answers_internal() {
        let (inbox, _) = counting_inbox();
        let mut responder = Responder::new(Some(shared(&inbox, 9, 10)));
        responder.trailers_mut().insert("x-why", "dropped").unwrap();
        drop(responder);
        let parts = drain(&inbox);
        let Part::Answer {
            result, trailers, ..
        } = &parts[0].part
        else {
            panic!("an answer")
        };
        assert_eq!(result.as_ref().unwrap_err().code(), crate::Code::Internal);
        assert_eq!(trailers.get("x-why"), Some("dropped"));
    }

    #[test]
    fn a_sink_waits_for_credit_and_sends_headers_first() {
        let (inbox, _) = counting_inbox();
        let shared = shared(&inbox, 1, 8);
        let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
        sink.headers_mut().insert("x-a", "1").unwrap();
        sink.send(&300).unwrap();
        let parts = drain(&inbox);
        assert!(matches!(&parts[0].part, Part::Headers(md) if md.get("x-a") == Some("1")));
        assert!(matches!(&parts[1].part, Part::Message(m) if m.len() == 8));
        let sender = std::thread::spawn(move || {
            sink.send(&1).unwrap();
            sink.finish(Ok(()));
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(drain(&inbox).is_empty(), "no credit left: the sink waits");
        shared.return_credit(8);
        sender.join().unwrap();
        let parts = drain(&inbox);
        assert!(matches!(&parts[0].part, Part::Message(_)));
        assert!(matches!(&parts[1].part, Part::Finish { status: None, .. }));
    }

    #[test]
    fn sinks_of_one_connection_share_its_credit_and_wake_in_turn() {
        let (inbox, _) = counting_inbox();
        let (_, [first, second, third]) = three_sharing_eight(&inbox);
        let mut sink = Sink::<u32>::new(Some(first.clone()), Metadata::new(), Metadata::new());
        sink.send(&300).unwrap();
        assert_eq!(drain(&inbox).len(), 2, "headers and a message of 8 bytes");
        let waiters: Vec<_> = [second.clone(), third.clone()]
            .into_iter()
            .map(|shared| {
                std::thread::spawn(move || {
                    let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
                    sink.send(&300)
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            drain(&inbox).is_empty(),
            "each stream has credit, the connection has none left"
        );
        // The second call ends: its waiting sink does not hold up the third.
        second.cancel(CancelReason::Cancelled);
        // Credit back for the first sink's bytes: one of the two wakes.
        first.return_credit(8);
        assert_eq!(first.take_lent(), 0);
        let results: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        assert!(results[0].is_err());
        assert!(results[1].is_ok());
        let sent: Vec<_> = drain(&inbox)
            .into_iter()
            .filter(|part| matches!(part.part, Part::Message(_)))
            .collect();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].stream, 5);
        assert_eq!(third.take_lent(), 8, "held until given back");
    }

    #[test]
    fn a_sink_that_comes_afresh_does_not_pass_one_that_waits() {
        let (inbox, _) = counting_inbox();
        let (pool, [first, second, third]) = three_sharing_eight(&inbox);
        let mut sink = Sink::<u32>::new(Some(first.clone()), Metadata::new(), Metadata::new());
        sink.send(&300).unwrap();
        drain(&inbox);
        let send = |shared: Arc<Shared>| {
            std::thread::spawn(move || {
                let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
                sink.send(&300).unwrap();
                sink
            })
        };
        let waiter = send(second.clone());
        while lock(&pool.state).waiting.is_empty() {
            std::thread::yield_now();
        }
        // Credit comes back before anyone is woken for it (the moment
        // between a stream's credit and the connection's coming back),
        // and another sink sends then: it waits its turn and wakes the
        // sink that waited first.
        lock(&pool.state).credit += 8;
        let late = send(third.clone());
        let messages = || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                let sent: Vec<u32> = drain(&inbox)
                    .into_iter()
                    .filter(|part| matches!(part.part, Part::Message(_)))
                    .map(|part| part.stream)
                    .collect();
                if !sent.is_empty() || std::time::Instant::now() > until {
                    return sent;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        assert_eq!(messages(), [3], "the sink that waited sends first");
        let _waiter = waiter.join().unwrap();
        second.return_credit(8);
        assert_eq!(messages(), [5]);
        let _late = late.join().unwrap();
        // A woken sink that finds the credit gone waits first in line.
        let pool = Lent::new(8);
        assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
        assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
        assert_eq!(pool.take(8, &third, false), Take::Queued { wake: false });
        lock(&pool.state).waiting.pop_front();
        lock(&pool.state).woken += 1;
        assert_eq!(pool.take(8, &second, true), Take::Queued { wake: false });
        let front = lock(&pool.state).waiting.front().and_then(Weak::upgrade);
        assert!(front.is_some_and(|front| Arc::ptr_eq(&front, &second)));
        drop(sink);
    }

    #[test]
    fn a_sink_that_comes_while_credit_is_given_back_does_not_pass_one_that_waits() {
        let (inbox, _) = counting_inbox();
        let (pool, [first, second, third]) = three_sharing_eight(&inbox);
        // The first holds all of it; the second waits for it, as a send
        // does (queued, and waiting on its condition variable).
        assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
        assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
        lock(&second.state).lent_waiting = true;
        // The credit comes back (`give`: the credit first, then the wake),
        // and the third comes to send in between: it queues behind the
        // second, and wakes the first in line, as its send does.
        lock(&pool.state).credit += 8;
        assert_eq!(pool.take(8, &third, false), Take::Queued { wake: true });
        lock(&third.state).lent_waiting = true;
        pool.wake_one();
        assert!(!lock(&second.state).lent_waiting, "the second is woken");
        // The wake of the `give` comes after: one sink is woken for the
        // credit already, the third waits its turn.
        pool.wake_one();
        assert!(lock(&third.state).lent_waiting, "the third still waits");
        assert_eq!(lock(&pool.state).woken, 1);
        second.take_credit(8).unwrap();
        assert_eq!(lock(&pool.state).woken, 0);
        // Its turn comes as the credit does.
        pool.give(8);
        assert!(!lock(&third.state).lent_waiting, "the third is woken");
        third.take_credit(8).unwrap();
        assert_eq!(lock(&pool.state).woken, 0);
        assert_eq!(pool.credit(), 0);
    }

    #[test]
    fn try_send_sends_while_there_is_credit_and_never_waits() {
        let (inbox, _) = counting_inbox();
        let shared = shared(&inbox, 1, 8);
        let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
        // Nothing was sent yet: the first message goes, headers first.
        sink.try_send(&300).unwrap();
        let parts = drain(&inbox);
        assert!(matches!(&parts[0].part, Part::Headers(_)));
        assert!(matches!(&parts[1].part, Part::Message(m) if m.len() == 8));
        // The stream's credit is spent: full, at once, and nothing sent.
        assert_eq!(sink.try_send(&1), Err(TrySendError::Full));
        assert!(drain(&inbox).is_empty());
        // Credit back: it sends again.
        shared.return_credit(8);
        sink.try_send(&1).unwrap();
        assert!(matches!(&drain(&inbox)[0].part, Part::Message(m) if m.len() == 7));
        // An ended call: cancelled, not full.
        shared.return_credit(7);
        shared.cancel(CancelReason::Cancelled);
        let error = sink.try_send(&1).unwrap_err();
        assert_eq!(
            error,
            TrySendError::Cancelled(Cancelled {
                reason: CancelReason::Cancelled
            })
        );
        assert_eq!(Status::from(error).code(), crate::Code::Cancelled);
        assert_eq!(
            Status::from(TrySendError::Full).code(),
            crate::Code::ResourceExhausted
        );
    }

    #[test]
    fn try_send_does_not_pass_a_sink_that_waits_for_the_connections_credit() {
        let (inbox, _) = counting_inbox();
        let (_, [first, second, third]) = three_sharing_eight(&inbox);
        let mut sink = Sink::<u32>::new(Some(first.clone()), Metadata::new(), Metadata::new());
        sink.try_send(&300).unwrap();
        drain(&inbox);
        // The connection's credit is spent: full for another call too,
        // though its own stream has credit.
        let mut other = Sink::<u32>::new(Some(third.clone()), Metadata::new(), Metadata::new());
        assert_eq!(other.try_send(&300), Err(TrySendError::Full));
        let waiter = std::thread::spawn(move || {
            let mut sink = Sink::<u32>::new(Some(second), Metadata::new(), Metadata::new());
            sink.send(&300)
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Credit back: the sink that waited takes it, not the one that
        // tries.
        first.return_credit(8);
        waiter.join().unwrap().unwrap();
        assert_eq!(other.try_send(&300), Err(TrySendError::Full));
        let sent: Vec<u32> = drain(&inbox)
            .into_iter()
            .filter(|part| matches!(part.part, Part::Message(_)))
            .map(|part| part.stream)
            .collect();
        assert_eq!(sent, [3]);
        // While a sink waits for the connection's credit, a try takes none
        // of it, even when some is there before the waiter has woken.
        let pool = Lent::new(8);
        assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
        assert_eq!(
            pool.take(8, &third, false),
            Take::Queued { wake: false },
            "the third waits"
        );
        lock(&pool.state).credit += 8;
        assert!(!pool.try_take(1));
        lock(&pool.state).waiting.clear();
        assert!(pool.try_take(1));
    }

    #[test]
    fn try_send_does_not_take_the_credit_a_woken_sink_is_to_take() {
        let (inbox, _) = counting_inbox();
        let (pool, [first, second, third]) = three_sharing_eight(&inbox);
        // The first takes all of it; the second waits for it, as a send
        // does (queued, and waiting on its condition variable).
        assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
        assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
        lock(&second.state).lent_waiting = true;
        // Credit back: the second is woken, and has not taken it yet.
        pool.give(8);
        assert!(!lock(&second.state).lent_waiting, "woken");
        // A try in that moment leaves it to the sink that waited.
        let mut other = Sink::<u32>::new(Some(third.clone()), Metadata::new(), Metadata::new());
        assert_eq!(other.try_send(&300), Err(TrySendError::Full));
        assert!(!pool.try_take(1));
        // The woken sink takes it, as its send does once it runs; then
        // tries take what comes back.
        second.take_credit(8).unwrap();
        pool.give(8);
        assert!(pool.try_take(8));
        // A woken sink that finds its call ended passes it on: to no one
        // here, so tries take the credit again.
        assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
        lock(&second.state).lent_waiting = true;
        pool.give(8);
        assert!(!pool.try_take(1));
        second.cancel(CancelReason::Cancelled);
        assert!(second.take_credit(8).is_err());
        assert!(pool.try_take(1));
        drop(other);
    }

    #[test]
    fn try_send_lets_go_of_the_request_as_send_does_with_room_or_without() {
        let (inbox, _) = counting_inbox();
        let queued = Queued::new(1 << 20);
        let pool = Lent::new(8);
        let target = |stream| Target {
            queued: queued.clone(),
            lent: pool.clone(),
            ..target(&inbox, stream)
        };
        // Another call holds all of the connection's credit.
        let other = Shared::new(target(1), None);
        assert_eq!(pool.take(8, &other, false), Take::Taken { more: false });
        for try_it in [true, false] {
            let shared = Shared::new(target(3), None);
            shared.hold_request(100);
            assert_eq!(queued.bytes(), 100);
            let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
            if try_it {
                assert_eq!(sink.try_send(&300), Err(TrySendError::Full));
            } else {
                // A send that waits: its call ends meanwhile.
                let ender = shared.clone();
                let end = std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    ender.cancel(CancelReason::Cancelled);
                });
                assert!(sink.send(&300).is_err());
                end.join().unwrap();
            }
            // The thread has started to answer: the request is its own.
            assert_eq!(queued.bytes(), 0, "try: {try_it}");
            drop(sink);
        }
    }

    #[test]
    fn a_replaced_on_cancel_is_dropped_outside_the_calls_lock() {
        let (inbox, _) = counting_inbox();
        let shared = shared(&inbox, 1, 8);
        let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
        // The first callback holds what takes the call's lock as it goes:
        // here the call's own request stream.
        let requests = Streaming::<u32>::new(Some(shared.clone()));
        sink.on_cancel(move |_| drop(requests));
        let (done, replaced) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            sink.on_cancel(|_| {});
            done.send(sink).unwrap();
        });
        let sink = replaced
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the replaced callback dropped without a deadlock");
        assert!(lock(&shared.state).reader_gone, "dropped with its callback");
        sink.finish(Ok(()));
    }

    #[test]
    fn on_cancel_runs_once_with_the_reason_or_at_once_after_the_end() {
        let (inbox, _) = counting_inbox();
        let shared = shared(&inbox, 1, 8);
        let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let first = tx.clone();
        sink.on_cancel(move |_| first.send("replaced").unwrap());
        let second = tx.clone();
        sink.on_cancel(move |reason| second.send(format!("{reason:?}").leak()).unwrap());
        assert!(rx.try_recv().is_err(), "not before the call ends");
        shared.cancel(CancelReason::DeadlineExceeded);
        shared.cancel(CancelReason::Cancelled);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["DeadlineExceeded"]);
        // Set after the end: run at once, with the first reason.
        sink.on_cancel(move |reason| tx.send(format!("late {reason:?}").leak()).unwrap());
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["late DeadlineExceeded"]);
        // A panic in one stays in it.
        sink.on_cancel(|_| panic!("on purpose"));
        let other = super::tests::shared(&inbox, 3, 8);
        let mut sink = Sink::<u32>::new(Some(other.clone()), Metadata::new(), Metadata::new());
        sink.on_cancel(|_| panic!("on purpose"));
        other.cancel(CancelReason::Cancelled);
        assert!(sink.is_cancelled());
    }

    /// A small generator of pseudo-random numbers, seeded: the stress
    /// tests below take the same turns each run.
    struct Turns(u64);

    impl Turns {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    /// Many sinks share a small pool; a stand-in for the worker gives
    /// credit back late and in random batches, and cancels a third of
    /// the calls at random moments, often while their sinks wait for the
    /// pool. Every sink that is not cancelled sends all of its messages
    /// (none waits forever for credit that is there), and once all have
    /// ended the pool holds all of its credit again.
    #[test]
    fn many_sinks_some_cancelled_while_they_wait_never_lose_the_pool() {
        const SINKS: u32 = 24;
        const MESSAGES: u32 = 300;
        const POOL: usize = 40;
        let (inbox, _) = counting_inbox();
        let lent = Lent::new(POOL);
        let calls: Vec<Arc<Shared>> = (0..SINKS)
            .map(|i| {
                Shared::new(
                    Target {
                        credit: 24,
                        lent: lent.clone(),
                        ..target(&inbox, 2 * i + 1)
                    },
                    None,
                )
            })
            .collect();
        let threads: Vec<_> = calls
            .iter()
            .map(|shared| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
                    for n in 0..MESSAGES {
                        // 6 to 10 bytes framed.
                        sink.send(&(n * 997 % 100_000_000))?;
                    }
                    sink.finish(Ok(()));
                    Ok::<(), Cancelled>(())
                })
            })
            .collect();
        let mut turns = Turns(0x9e37_79b9_7f4a_7c15);
        let mut ended = vec![false; SINKS as usize];
        let mut finished = 0;
        // Answer bytes in the stand-in's output: their credit goes back
        // once they are written.
        let mut held: Vec<(usize, usize)> = Vec::new();
        let mut parts = Vec::new();
        let give_up = Instant::now() + std::time::Duration::from_secs(120);
        while finished < SINKS {
            assert!(
                Instant::now() < give_up,
                "sinks wait for ever: {finished} of {SINKS} ended, pool {}",
                lent.credit()
            );
            inbox.drain(&mut parts);
            for delivery in parts.drain(..) {
                let index = (delivery.stream / 2) as usize;
                match delivery.part {
                    Part::Message(bytes) if !ended[index] => held.push((index, bytes.len())),
                    Part::Finish { .. } => finished += 1,
                    _ => {}
                }
            }
            // Some of the held bytes leave.
            let leaving = turns.next(held.len() as u64 + 1) as usize;
            for (index, bytes) in held.drain(..leaving) {
                calls[index].return_credit(bytes);
            }
            // Now and then a call ends: as the worker does, its sink's
            // credit goes back once its bytes are out.
            if turns.next(40) == 0 {
                let index = turns.next(u64::from(SINKS)) as usize;
                if index.is_multiple_of(3) && !ended[index] {
                    ended[index] = true;
                    calls[index].cancel(CancelReason::Cancelled);
                    held.retain(|&(i, _)| i != index);
                    lent.give(calls[index].take_lent());
                }
            }
            std::thread::yield_now();
        }
        for (index, bytes) in held.drain(..) {
            calls[index].return_credit(bytes);
        }
        for (index, thread) in threads.into_iter().enumerate() {
            let result = thread.join().unwrap();
            if !ended[index] {
                assert!(result.is_ok(), "sink {index} not cancelled but failed");
            }
        }
        for (index, shared) in calls.iter().enumerate() {
            if !ended[index] {
                lent.give(shared.take_lent());
            }
        }
        assert_eq!(
            lent.credit(),
            POOL as i64,
            "the pool has all its credit back"
        );
        assert_eq!(lock(&lent.state).woken, 0, "no sink still counted as woken");
        assert!(lent.try_take(1), "a try takes the credit back");
    }

    /// A thread that lets go of its `Streaming` without reading it leaves
    /// nothing counted in the connection's share of queued request bytes
    /// (while its call goes on, answering through its sink), and a call
    /// refused for lack of room is told there is some.
    #[test]
    fn messages_of_a_streaming_let_go_of_leave_the_connections_share() {
        let (inbox, _) = counting_inbox();
        let (queued, call) = sharing_a_queue(&inbox, 16, 100);
        let deaf = call(1);
        let other = call(3);
        let requests = Streaming::<u32>::new(Some(deaf.clone()));
        let _sink = Sink::<u32>::new(Some(deaf.clone()), Metadata::new(), Metadata::new());
        let message = [0, 0, 0, 0, 2, 0x08, 5];
        assert_eq!(deaf.offer(&message), Offered::Queued);
        assert_eq!(deaf.offer(&message), Offered::Queued);
        assert_eq!(other.offer(&message), Offered::ConnectionFull);
        drop(requests);
        assert_eq!(
            queued.bytes(),
            0,
            "nothing waits for a thread that cannot read"
        );
        assert!(drain(&inbox)
            .iter()
            .any(|part| matches!(part.part, Part::Room)));
        assert_eq!(other.offer(&message), Offered::Queued);
        assert_eq!(deaf.offer(&message), Offered::Queued, "taken, and dropped");
        assert_eq!(queued.bytes(), 7, "only the other call's message waits");
    }

    /// Requests of calls sent to threads and streamed messages each have
    /// the limit: requests held until their threads answer never hold a
    /// streamed message back (a deferred call waiting on a client stream
    /// of its connection would never be answered), nor do streamed
    /// messages refuse a request; each is refused only past its own limit.
    #[test]
    fn held_requests_and_streamed_messages_each_have_the_limit() {
        let (inbox, _) = counting_inbox();
        let (queued, call) = sharing_a_queue(&inbox, 100, 1000);
        // A deferred call holds a request of 90 bytes.
        let deferred = call(1);
        deferred.hold_request(90);
        assert!(!deferred.is_refused());
        let responder = Responder::new(Some(deferred.clone()));
        drop(deferred);
        // A streaming call still queues up to the limit beside it.
        let streamed = call(3);
        assert_eq!(streamed.offer(&[1; 60]), Offered::Queued);
        assert_eq!(streamed.offer(&[2; 40]), Offered::Queued);
        assert_eq!(streamed.offer(&[3; 10]), Offered::ConnectionFull);
        assert_eq!(queued.bytes(), 190);
        // A second request does not fit beside the first: refused, and
        // owed no room.
        let second = call(5);
        second.hold_request(20);
        assert!(second.is_refused());
        assert_eq!(second.cancelled(), Some(CancelReason::Ended));
        // The stream's thread takes the first message: down to half the
        // limit, the refused message is offered again.
        assert_eq!(streamed.take_incoming().unwrap().unwrap().len(), 60);
        assert!(
            drain(&inbox)
                .iter()
                .any(|part| matches!(part.part, Part::Room)),
            "the call waiting for room is told there is some"
        );
        assert_eq!(streamed.offer(&[3; 10]), Offered::Queued);
        // Answered, the deferred call's request leaves: another fits.
        responder.respond(Ok(1u32));
        assert_eq!(queued.bytes(), 50);
        let third = call(7);
        third.hold_request(20);
        assert!(!third.is_refused());
        drop(third);
        assert_eq!(queued.bytes(), 50);
    }

    /// Credit set as large as it goes (`usize::MAX` for no limit) is not
    /// read as none: the sink sends.
    #[test]
    fn credit_without_limit_lets_a_sink_send() {
        let (inbox, _) = counting_inbox();
        let lent = Lent::new(usize::MAX);
        assert!(lent.credit() > 0, "the connection's");
        let shared = Shared::new(
            Target {
                credit: usize::MAX,
                queued: Queued::new(usize::MAX),
                lent,
                ..target(&inbox, 1)
            },
            None,
        );
        assert!(lock(&shared.state).credit > 0, "the stream's");
        let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
        sink.send(&300).unwrap();
        sink.finish(Ok(()));
        assert_eq!(drain(&inbox).len(), 3, "headers, the message, the end");
    }

    /// A call held back because the connection's queued bytes left no
    /// room for its message is let go on too once its thread drops its
    /// `Streaming`, without waiting for the other calls' threads to make
    /// room: what its client sends then is taken and dropped.
    #[test]
    fn a_call_without_room_in_the_connections_share_let_go_of_resumes() {
        let (inbox, _) = counting_inbox();
        let (queued, call) = sharing_a_queue(&inbox, 10, 100);
        let hoarder = call(1);
        let deaf = call(3);
        let requests = Streaming::<u32>::new(Some(deaf.clone()));
        let message = [0, 0, 0, 0, 2, 0x08, 5];
        assert_eq!(hoarder.offer(&message), Offered::Queued);
        assert_eq!(deaf.offer(&message), Offered::ConnectionFull);
        drop(requests);
        let parts = drain(&inbox);
        assert!(
            parts
                .iter()
                .any(|part| part.stream == 3 && matches!(part.part, Part::Resume)),
            "the call is told to take its messages again"
        );
        assert_eq!(deaf.offer(&message), Offered::Queued, "taken, and dropped");
        assert_eq!(queued.bytes(), 7, "only the hoarder's message waits");
    }

    /// A thread that waits for the next message of its call gets it even
    /// when the connection's share is full of other calls' messages (in
    /// dispatch mode, those of calls queued behind it for the same thread,
    /// which it reads only once done with this one): held back, it would
    /// wait for ever. A message refused before the thread waited is asked
    /// for again as it starts to; one for a thread that does not wait
    /// still waits for room.
    #[test]
    fn a_thread_waiting_for_a_message_gets_it_past_a_full_share() {
        let (inbox, _) = counting_inbox();
        let (queued, call) = sharing_a_queue(&inbox, 10, 100);
        let read = call(1);
        let behind = call(3);
        let message = [0, 0, 0, 0, 2, 0x08, 5];
        assert_eq!(behind.offer(&message), Offered::Queued);
        assert_eq!(read.offer(&message), Offered::ConnectionFull);
        let mut requests = Streaming::<u32>::new(Some(read.clone()));
        let reader = std::thread::spawn(move || {
            let first = requests.next().unwrap().unwrap();
            let second = requests.next().unwrap().unwrap();
            (first, second, requests)
        });
        let give_up = Instant::now() + std::time::Duration::from_secs(10);
        // Refused before the thread waited: it asks for the message again.
        while !drain(&inbox)
            .iter()
            .any(|part| part.stream == 1 && matches!(part.part, Part::Resume))
        {
            assert!(Instant::now() < give_up, "no Resume");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(read.offer(&message), Offered::Queued);
        // Offered while the thread waits for the next one.
        loop {
            let state = lock(&read.state);
            if state.reader_waiting && state.incoming.is_empty() {
                break;
            }
            drop(state);
            assert!(Instant::now() < give_up, "the thread never waited");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(read.offer(&message), Offered::Queued);
        let (first, second, requests) = reader.join().unwrap();
        assert_eq!((first, second), (5, 5));
        assert_eq!(queued.bytes(), 7, "only the message of the call behind");
        // The thread does not wait now: the share holds.
        assert_eq!(read.offer(&message), Offered::ConnectionFull);
        drop(requests);
    }

    /// A call held back because its thread's queue was full is let go on
    /// once the thread drops its `Streaming`: what the client sends then
    /// is taken and dropped, not held with the client's window shut.
    #[test]
    fn a_full_queue_let_go_of_resumes_its_call() {
        let (inbox, _) = counting_inbox();
        let shared = shared(&inbox, 1, 0);
        let requests = Streaming::<u32>::new(Some(shared.clone()));
        let message = [0, 0, 0, 0, 2, 0x08, 5];
        assert_eq!(shared.offer(&message), Offered::Queued);
        assert_eq!(shared.offer(&message), Offered::Queued);
        assert_eq!(shared.offer(&message), Offered::CallFull);
        drop(requests);
        let parts = drain(&inbox);
        assert_eq!(parts.len(), 1);
        assert!(matches!(parts[0].part, Part::Resume));
        assert_eq!(
            shared.offer(&message),
            Offered::Queued,
            "taken, and dropped"
        );
        assert_eq!(shared.target.queued.bytes(), 0);
    }

    #[test]
    fn a_cancelled_call_fails_its_sink_and_stream() {
        let (inbox, _) = counting_inbox();
        let shared = shared(&inbox, 1, 0);
        let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
        let mut requests = Streaming::<u32>::new(Some(shared.clone()));
        let waiter = std::thread::spawn(move || sink.send(&1));
        std::thread::sleep(std::time::Duration::from_millis(20));
        shared.cancel(CancelReason::DeadlineExceeded);
        let err = waiter.join().unwrap().unwrap_err();
        assert_eq!(err.reason, CancelReason::DeadlineExceeded);
        let status = requests.next().unwrap().unwrap_err();
        assert_eq!(status.code(), crate::Code::DeadlineExceeded);
        assert!(requests.next().is_none());
    }

    #[test]
    fn incoming_messages_are_bounded_and_resume_when_taken() {
        let (inbox, _) = counting_inbox();
        let shared = shared(&inbox, 1, 0);
        let message = [0, 0, 0, 0, 2, 0x08, 5];
        assert_eq!(shared.offer(&message), Offered::Queued);
        assert_eq!(shared.offer(&message), Offered::Queued);
        assert_eq!(
            shared.offer(&message),
            Offered::CallFull,
            "14 bytes queued, limit 10"
        );
        let mut requests = Streaming::<u32>::new(Some(shared.clone()));
        assert_eq!(requests.next().unwrap().unwrap(), 5);
        assert!(drain(&inbox).is_empty(), "7 bytes left: above half");
        assert_eq!(requests.next().unwrap().unwrap(), 5);
        let parts = drain(&inbox);
        assert!(matches!(parts[0].part, Part::Resume));
        shared.end_incoming(None);
        assert!(requests.next().is_none());
    }
}
