//! Ending a connection without losing requests: the server's two-step
//! GOAWAY, and the peer's GOAWAY.

use crate::h2::frame::{self, Reason, MAX_WINDOW};

/// The payload of the PING that follows the first GOAWAY of a graceful
/// shutdown: its ACK proves the client has seen the GOAWAY.
const SHUTDOWN_PING: [u8; 8] = *b"pjmx-bye";

/// Where the connection stands on GOAWAY, either way.
#[derive(Default)]
pub(crate) struct Shutdown {
    /// The first GOAWAY of a graceful shutdown is out and its PING
    /// unanswered.
    draining: bool,
    /// The last stream a GOAWAY named, once it is out: new streams are
    /// refused, and a GOAWAY after it names no later one (RFC 9113
    /// section 6.8).
    last_named: Option<u32>,
    /// A GOAWAY went either way, or the connection failed: one flag, so
    /// that the test of a connection's end, made several times a turn,
    /// is one load while none did.
    ending: bool,
}

impl Shutdown {
    /// Whether new streams are refused.
    pub(crate) fn goaway_sent(&self) -> bool {
        self.last_named.is_some()
    }

    /// The last stream id for a GOAWAY sent now, `highest` being the
    /// highest the peer opened: the one named before, if a GOAWAY named
    /// one, as streams opened after it were refused.
    pub(crate) fn last_stream(&self, highest: u32) -> u32 {
        self.last_named.unwrap_or(highest)
    }

    /// Whether either side has said GOAWAY, or the connection failed: the
    /// connection ends once its streams are done.
    #[inline]
    pub(crate) fn ending(&self) -> bool {
        self.ending
    }

    /// Notes the peer's GOAWAY.
    pub(crate) fn on_goaway(&mut self) {
        self.ending = true;
    }

    /// Notes that the connection failed (its GOAWAY is out).
    pub(crate) fn on_failure(&mut self) {
        self.ending = true;
    }

    /// The first step: a GOAWAY that still allows every stream, with a
    /// PING.
    pub(crate) fn begin(&mut self, out: &mut Vec<u8>) {
        if !self.draining && self.last_named.is_none() {
            frame::write_goaway(out, MAX_WINDOW, Reason::NO_ERROR, b"");
            frame::write_ping(out, &SHUTDOWN_PING);
            self.draining = true;
        }
    }

    /// Whether the first GOAWAY of a graceful shutdown is out and its PING
    /// unanswered.
    pub(crate) fn draining(&self) -> bool {
        self.draining
    }

    /// The second step without the PING's ACK, for a peer that does not
    /// answer it: a GOAWAY naming `last_stream`.
    pub(crate) fn end_draining(&mut self, last_stream: u32, out: &mut Vec<u8>) {
        if self.draining {
            self.draining = false;
            frame::write_goaway(out, last_stream, Reason::NO_ERROR, b"");
            self.last_named = Some(last_stream);
            self.ending = true;
        }
    }

    /// A PING ACK from the peer: if it answers the shutdown PING, the
    /// second step, a GOAWAY naming `last_stream`.
    pub(crate) fn on_ping_ack(&mut self, payload: &[u8; 8], last_stream: u32, out: &mut Vec<u8>) {
        if *payload == SHUTDOWN_PING {
            self.end_draining(last_stream, out);
        }
    }
}
