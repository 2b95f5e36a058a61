//! The state a call served on another thread shares with its worker,
//! and where its parts go.

use super::cancel::{run_on_cancel, OnCancel};
use super::credit::Take;
use super::{lock, CancelReason, Cancelled, Delivery, Inbox, Lent, Offered, Part, Queued};
use crate::grpc::status::Status;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

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

/// The state a call served on another thread shares with its worker.
pub(crate) struct Shared {
    pub(super) target: Target,
    pub(super) deadline: Option<Instant>,
    pub(super) state: Mutex<State>,
    /// Signalled when credit comes back, a message comes in, or the call
    /// ends.
    pub(super) changed: Condvar,
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
pub(super) struct State {
    pub(super) cancelled: Option<CancelReason>,
    /// Answer bytes the sink may still send before it waits.
    pub(super) credit: i64,
    /// Request messages (prefix included) not yet taken by the thread.
    pub(super) incoming: VecDeque<Vec<u8>>,
    incoming_bytes: usize,
    /// The client finished sending: `Some(None)` cleanly, `Some(Some(s))`
    /// with an error to report after the queued messages.
    incoming_end: Option<Option<Status>>,
    /// The worker stopped delivering for lack of room.
    resume_wanted: bool,
    /// The worker stopped delivering for lack of room in the connection's
    /// share: it waits for a [`Part::Room`], or, once the thread lets go
    /// of its [`Streaming`](super::Streaming) or waits for a message, a [`Part::Resume`].
    room_wanted: bool,
    /// The thread waits for a request message (set only while it does not
    /// hold the lock, none being queued): the next one is queued whatever
    /// the connection's share holds.
    pub(super) reader_waiting: bool,
    /// The thread has asked for a request message at least once: it reads
    /// the call, and takes the next message once done with the last.
    reader_started: bool,
    /// The thread let go of its [`Streaming`](super::Streaming): what it did not take is
    /// dropped, and so is what comes after.
    pub(super) reader_gone: bool,
    /// Answer bytes taken from the connection's [`Lent`] credit and not
    /// given back yet.
    lent: usize,
    /// The sink waits for the connection's credit.
    pub(super) lent_waiting: bool,
    /// The sink was woken for the connection's credit ([`Lent::wake_one`])
    /// and has not come for it yet.
    pub(super) lent_woken: bool,
    /// Run once when the call ends ([`Sink::on_cancel`](super::Sink::on_cancel)).
    on_cancel: Option<OnCancel>,
}

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
                reader_started: false,
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
    pub(super) fn release_request(&self) {
        if self.held.load(Ordering::Relaxed) > 0 {
            let bytes = self.held.swap(0, Ordering::Relaxed);
            self.target.queued.release(bytes);
        }
    }

    pub(super) fn send(&self, part: Part) {
        self.target.inbox.push(Delivery {
            connection: self.target.connection,
            stream: self.target.stream,
            part,
        });
    }

    pub(super) fn cancelled(&self) -> Option<CancelReason> {
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
    pub(super) fn set_on_cancel(&self, f: OnCancel) {
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

    /// Whether the thread reads the call (it has asked for a request
    /// message, and has not let go of its [`Streaming`](super::Streaming))
    /// and none is queued: the next message is the one it takes next, once
    /// done with the last. Its bytes are kept on the worker past the
    /// connection's limit, and the message is queued whatever the
    /// connection's share holds once the thread waits for it (see
    /// [`Shared::offer`]).
    pub(crate) fn reads_on(&self) -> bool {
        let state = lock(&self.state);
        state.reader_started && !state.reader_gone && state.incoming.is_empty()
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
    pub(super) fn take_credit(self: &Arc<Self>, bytes: usize) -> Result<(), Cancelled> {
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
    pub(super) fn try_take_credit(&self, bytes: usize) -> Result<bool, Cancelled> {
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
    pub(super) fn has_credit(&self) -> Result<bool, Cancelled> {
        let state = lock(&self.state);
        if let Some(reason) = state.cancelled {
            return Err(Cancelled { reason });
        }
        Ok(state.credit > 0)
    }

    /// Waits for the next request message; `Ok(None)` once the client is
    /// done, unless the call was cancelled since (reset by the client, past
    /// its deadline, or its connection gone): the messages queued before
    /// come first, then the cancellation, as for a call cancelled while the
    /// client was still sending.
    pub(super) fn take_incoming(&self) -> Result<Option<Vec<u8>>, Status> {
        let mut state = lock(&self.state);
        state.reader_started = true;
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
                return match (end, state.cancelled) {
                    (Some(status), _) => Err(status.clone()),
                    (None, Some(reason)) if reason != CancelReason::Ended => {
                        Err(Cancelled { reason }.into())
                    }
                    (None, _) => Ok(None),
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

    /// The thread let go of its [`Streaming`](super::Streaming): the request messages it did
    /// not take leave the connection's share at once, not when the call
    /// ends (a bidirectional call may answer through its sink for long
    /// after), and those that come after are dropped as they arrive.
    pub(super) fn let_go_of_incoming(&self) {
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
