//! Receive flow control (RFC 9113 section 6.9): how much the client may
//! send, on the connection and on each stream, and when the server opens
//! the windows again.

use crate::h2::error::Error;
use crate::h2::frame::{self, Reason};
use crate::h2::streams::{Stream, Streams};

/// The size of every window before SETTINGS change it.
pub(crate) const DEFAULT_WINDOW: u32 = 65_535;

/// The connection's receive window.
pub(crate) struct RecvFlow {
    /// The window the server opens at start.
    size: u32,
    /// How many bytes received make a WINDOW_UPDATE: a quarter of `size`,
    /// and never 0 (an increment of 0 is an error for the client).
    replenish_at: u32,
    /// Bytes the client may still send.
    window: i64,
    /// Bytes received since the last WINDOW_UPDATE.
    unacked: u32,
}

impl RecvFlow {
    /// A window of `size` bytes (at least the default), opened by
    /// [`RecvFlow::write_opening`].
    pub(crate) fn new(size: u32) -> RecvFlow {
        RecvFlow {
            size,
            replenish_at: (size / 4).max(1),
            window: i64::from(size.max(DEFAULT_WINDOW)),
            unacked: 0,
        }
    }

    /// Appends the WINDOW_UPDATE that opens the window past the default.
    pub(crate) fn write_opening(&self, out: &mut Vec<u8>) {
        if self.size > DEFAULT_WINDOW {
            frame::write_window_update(out, 0, self.size - DEFAULT_WINDOW);
        }
    }

    /// Takes a DATA frame of `len` bytes (padding included) from the window.
    pub(crate) fn take(&mut self, len: usize) -> Result<(), Error> {
        if len as i64 > self.window {
            return Err(Error::GoAway(
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.window -= len as i64;
        self.unacked += len as u32;
        Ok(())
    }

    /// Opens the window again once a quarter of it has been used: called
    /// once per batch of input, so that one WINDOW_UPDATE covers many
    /// frames.
    pub(crate) fn replenish(&mut self, out: &mut Vec<u8>) {
        if self.unacked >= self.replenish_at {
            frame::write_window_update(out, 0, self.unacked);
            self.window += i64::from(self.unacked);
            self.unacked = 0;
        }
    }
}

/// Takes a DATA frame of `len` bytes (padding included) carrying `body`
/// bytes from a stream's receive window. The body bytes stay unreleased
/// until the consumer releases them; padding is released at once.
pub(crate) fn take_stream(
    stream: &mut Stream,
    id: u32,
    len: usize,
    body: usize,
) -> Result<(), Error> {
    if len as i64 > i64::from(stream.recv_window) {
        return Err(Error::Reset(id, Reason::FLOW_CONTROL_ERROR));
    }
    // Both within the window, which fits an i32.
    stream.recv_window -= len as i32;
    stream.unreleased += body as u32;
    Ok(())
}

/// Opens a stream's window back to `initial`, less the bytes the consumer
/// still holds, once what the client may send and what is held are below
/// half of it (a window of one byte: once it is spent and released); one
/// WINDOW_UPDATE then covers many frames.
pub(crate) fn replenish_stream(stream: &mut Stream, id: u32, initial: u32, out: &mut Vec<u8>) {
    let initial = i64::from(initial);
    let committed = i64::from(stream.recv_window) + i64::from(stream.unreleased);
    if 2 * committed < initial {
        let increment = initial - committed;
        frame::write_window_update(out, id, increment as u32);
        // Up to the initial window at most, which fits an i32.
        stream.recv_window += increment as i32;
    }
}

/// The receive window of a stream the client opens before it acknowledged
/// the server's SETTINGS: it may still assume the default window, so a
/// lower `initial` holds only from then on (RFC 9113 section 6.9.3).
pub(crate) fn opening_window(initial: u32) -> u32 {
    initial.max(DEFAULT_WINDOW)
}

/// The client acknowledged the server's SETTINGS: the streams opened
/// before, with the default window, take the lower `initial` window from
/// now on (theirs may turn negative, as the client's view of it does).
/// Each is opened again at once as far as its consumer released its bytes:
/// no DATA or release may come to do it later.
pub(crate) fn settings_acked(streams: &mut Streams, initial: u32, out: &mut Vec<u8>) {
    if initial < DEFAULT_WINDOW {
        let lower = (DEFAULT_WINDOW - initial) as i32;
        for (id, stream) in streams.iter_mut() {
            stream.recv_window = stream.recv_window.saturating_sub(lower);
            if stream.recv_open() {
                replenish_stream(stream, id, initial, out);
            }
        }
    }
}
