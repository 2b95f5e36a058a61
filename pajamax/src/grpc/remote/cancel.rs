//! Why a call ended before the thread serving it was done, and what a
//! send that could not go reports.

use crate::grpc::status::Status;
use std::fmt;

/// Runs an application's [`Sink::on_cancel`](super::Sink::on_cancel) callback; a panic in it is
/// logged and goes no further (it runs on a worker).
pub(super) fn run_on_cancel(f: OnCancel, reason: CancelReason) {
    let run = std::panic::AssertUnwindSafe(move || f(reason));
    if std::panic::catch_unwind(run).is_err() {
        log::error!("a sink's on_cancel callback panicked");
    }
}

/// What [`Sink::on_cancel`](super::Sink::on_cancel) runs.
pub(super) type OnCancel = Box<dyn FnOnce(CancelReason) + Send>;

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

/// The call a [`Sink`](super::Sink), [`Streaming`](super::Streaming) or
/// [`Responder`](super::Responder) belongs to has
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

/// Why [`Sink::try_send`](super::Sink::try_send) sent nothing.
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
