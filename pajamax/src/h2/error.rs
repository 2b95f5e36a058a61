//! What goes wrong on a connection: errors that end the whole connection
//! with a GOAWAY, and errors that end one stream with a RST_STREAM
//! (RFC 9113 section 5.4).

use crate::h2::frame::Reason;

/// A connection error: the GOAWAY code and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionError {
    /// The code sent in GOAWAY.
    pub reason: Reason,
    /// What the peer did wrong, also sent as GOAWAY debug data.
    pub message: &'static str,
}

/// A protocol error found while reading a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Error {
    /// The connection ends: GOAWAY with this code and debug text.
    GoAway(Reason, &'static str),
    /// One stream ends: RST_STREAM with this code.
    Reset(u32, Reason),
}
