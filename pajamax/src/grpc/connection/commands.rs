//! Commands from the runtime: pings, GOAWAY and draining, closing, the
//! output written and the room lent for a turn, the count of unproductive
//! frames forgiven, and the end of every call when the connection goes.

use super::*;

impl GrpcConnection {
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

    /// Once the client has shut its sending half: ends the calls served on
    /// other threads whose streams hold answer bytes for its windows, which
    /// it can no longer open (their threads learn the connection closed,
    /// the client gets RST_STREAM(CANCEL)), and gives the connection's
    /// credit their sinks held to the others, which may still finish.
    /// Returns whether it ended any.
    pub fn end_calls_stuck_on_windows(&mut self) -> bool {
        let stuck: Vec<u32> = self
            .calls
            .iter()
            .filter(|&(stream, call)| {
                matches!(call.state, State::Remote(_)) && self.h2.buffered(stream) != 0
            })
            .map(|(stream, _)| stream)
            .collect();
        for &stream in &stuck {
            let call = self.take_call(stream).expect("listed above");
            self.h2.reset_stream(stream, Reason::CANCEL);
            self.end_cancelled(call, CancelReason::ConnectionClosed);
        }
        if !stuck.is_empty() {
            self.settle_at(None);
        }
        !stuck.is_empty()
    }

    /// Forgets every call, each ended cancelled (its thread told the
    /// connection closed): the connection has failed, or goes.
    #[cold]
    #[inline(never)]
    pub(super) fn end_all_calls(&mut self) {
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

    pub(super) fn cancel_all(&mut self) {
        for call in self.calls.values() {
            if let State::Remote(remote) = &call.state {
                remote.shared.cancel(CancelReason::ConnectionClosed);
            }
        }
    }
}
