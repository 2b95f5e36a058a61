//! The messages of a streamed answer, from another thread.

use super::{CancelReason, Cancelled, Part, Shared, TrySendError};
use crate::grpc::framing::{self, framed};
use crate::grpc::metadata::Metadata;
use crate::grpc::status::Status;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

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

    /// Whether the call has ended, or its request stream has yielded an
    /// error (a message that did not decode); sends fail from then on,
    /// while [`finish`](Sink::finish) still ends a call that is open.
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
    /// [`Streaming`](super::Streaming) when a request message does not decode; this one when
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
    /// Never call it on the worker (in the handler that made the sink, or
    /// an `on_cancel` callback): the credit it waits for comes back through
    /// the worker, which would then wait for ever. Use
    /// [`try_send`](Sink::try_send) there.
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
