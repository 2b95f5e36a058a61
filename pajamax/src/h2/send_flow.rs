//! Send flow control (RFC 9113 section 6.9): response bytes go out as far
//! as the peer's windows allow; the rest waits per stream. A stream whose
//! own window is open waits in a queue for the connection's window, served
//! in turn as it opens; a stream whose own window is shut waits aside until
//! a WINDOW_UPDATE (or a larger SETTINGS_INITIAL_WINDOW_SIZE) opens it, so
//! that no frame makes the connection walk streams that cannot send.

use crate::h2::connection::Event;
use crate::h2::fields::Fields;
use crate::h2::frame::{self, flag, kind};
use crate::h2::output::{Field, Output};
use crate::h2::recv_flow::DEFAULT_WINDOW;
use crate::h2::streams::{SendHalf, Stream, Streams};
use crate::h2::window::Window;
use std::collections::VecDeque;

/// Response bytes waiting for the peer to open its windows.
#[derive(Default)]
pub(crate) struct PendingSend {
    data: Vec<u8>,
    sent: usize,
    end_stream: bool,
    trailers: Option<Fields>,
    /// In the queue of streams waiting for the connection's window (its
    /// own window was open when it was queued).
    queued: bool,
}

impl PendingSend {
    /// Bytes not yet sent.
    pub(crate) fn unsent(&self) -> usize {
        self.data.len() - self.sent
    }

    /// Whether this holds nothing and only waits for room in the windows
    /// ([`SendFlow::await_room`]).
    fn is_wait(&self) -> bool {
        self.data.is_empty() && !self.end_stream && self.trailers.is_none()
    }
}

/// What [`SendFlow::send_data`] did with the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Bytes taken: all of them or none.
    pub accepted: usize,
    /// END_STREAM went out: the sending half is done.
    pub closed: bool,
}

impl Sent {
    const REFUSED: Sent = Sent {
        accepted: 0,
        closed: false,
    };
}

/// The connection's send window, and the streams waiting for windows.
pub(crate) struct SendFlow {
    /// The connection-level send window.
    pub window: Window,
    blocked: VecDeque<u32>,
    /// Response bytes held back by flow control, over all streams.
    held: usize,
}

impl SendFlow {
    pub(crate) fn new() -> SendFlow {
        SendFlow {
            window: Window::new(DEFAULT_WINDOW),
            blocked: VecDeque::new(),
            held: 0,
        }
    }

    /// Response bytes held back, over all streams.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// How many stream ids wait in the queue for the connection's window.
    pub(crate) fn blocked_len(&self) -> usize {
        self.blocked.len()
    }

    /// Queues stream `id` for the connection's window if it holds bytes,
    /// waits aside for its own window, and that window is now open: after
    /// a WINDOW_UPDATE for the stream or a larger initial window.
    pub(crate) fn stream_window_opened(&mut self, streams: &mut Streams, id: u32) {
        let Some(state) = streams.get_mut(id) else {
            return;
        };
        if state.send_window.available() == 0 {
            return;
        }
        match state.pending.as_mut() {
            Some(pending) if !pending.queued => pending.queued = true,
            _ => return,
        }
        self.queue_blocked(streams, id);
    }

    /// [`SendFlow::stream_window_opened`] for every stream (after the
    /// initial window grew).
    pub(crate) fn stream_windows_opened(&mut self, streams: &mut Streams) {
        let mut opened = Vec::new();
        for (id, state) in streams.iter_mut() {
            if state.send_window.available() == 0 {
                continue;
            }
            if let Some(pending) = state.pending.as_mut().filter(|p| !p.queued) {
                pending.queued = true;
                opened.push(id);
            }
        }
        opened.sort_unstable();
        for id in opened {
            self.queue_blocked(streams, id);
        }
    }

    /// Forgets everything held (after a connection error).
    pub(crate) fn clear(&mut self) {
        self.blocked.clear();
        self.held = 0;
    }

    /// Forgets what a stream that is gone still held.
    pub(crate) fn release(&mut self, pending: &PendingSend) {
        self.held -= pending.unsent();
    }

    /// What the client's windows, the stream's and the connection's, let
    /// out at once on `state`'s stream.
    #[inline]
    pub(crate) fn room(&self, state: &Stream) -> usize {
        state.send_window.available().min(self.window.available())
    }

    /// How many body bytes stream `id` takes now: what the windows let
    /// out at once plus the room left in its buffer of `cap` bytes. Zero
    /// once its sending half is closing or gone.
    pub(crate) fn capacity(&self, streams: &Streams, id: u32, cap: usize) -> usize {
        let Some(state) = streams.get(id) else {
            return 0;
        };
        if state.send != SendHalf::Open {
            return 0;
        }
        match &state.pending {
            Some(pending) => cap.saturating_sub(pending.unsent()),
            None => self.room(state).saturating_add(cap),
        }
    }

    /// What the client's windows let out on stream `id` at once: zero when
    /// the stream holds bytes already or cannot send.
    pub(crate) fn window(&self, streams: &Streams, id: u32) -> usize {
        match streams.get(id) {
            Some(state) if state.send == SendHalf::Open && state.pending.is_none() => {
                self.room(state)
            }
            _ => 0,
        }
    }

    /// Sends body bytes on stream `id` as far as the windows allow and
    /// holds the rest, if the stream holds less than `cap` bytes already;
    /// otherwise takes nothing. A stream takes all of `data` or none of it.
    /// With `end_stream` its sending half closes (at once, or once the held
    /// bytes are out).
    pub(crate) fn send_data(
        &mut self,
        streams: &mut Streams,
        output: &mut Output,
        id: u32,
        data: &[u8],
        end_stream: bool,
        cap: usize,
    ) -> Sent {
        let Some(state) = streams.get_mut(id) else {
            return Sent::REFUSED;
        };
        if state.send != SendHalf::Open {
            return Sent::REFUSED;
        }
        if end_stream && data.is_empty() && state.pending.as_ref().is_some_and(|p| p.is_wait()) {
            // An empty frame that ends the stream takes no window: it does
            // not wait for room, and no more room is wanted. One that does
            // not end it leaves the wait as it is.
            state.pending = None;
        }
        if let Some(pending) = &mut state.pending {
            if pending.unsent() >= cap {
                return Sent::REFUSED;
            }
            pending.data.extend_from_slice(data);
            pending.end_stream = end_stream;
            if end_stream {
                state.send = SendHalf::Closing;
            }
            self.held += data.len();
            return Sent {
                accepted: data.len(),
                closed: false,
            };
        }
        let sent = output.write_data(
            id,
            data,
            end_stream,
            &mut state.send_window,
            &mut self.window,
        );
        if sent < data.len() {
            if self.hold_on(state, data[sent..].to_vec(), end_stream) {
                self.queue_blocked(streams, id);
            }
            Sent {
                accepted: data.len(),
                closed: false,
            }
        } else {
            Sent {
                accepted: data.len(),
                closed: end_stream,
            }
        }
    }

    /// Holds `data`, body bytes of stream `id` past what the windows let
    /// out, while the stream holds nothing else; the stream stays open.
    pub(crate) fn hold(&mut self, streams: &mut Streams, id: u32, data: Vec<u8>) {
        let Some(state) = streams.get_mut(id) else {
            return;
        };
        if self.hold_on(state, data, false) {
            self.queue_blocked(streams, id);
        }
    }

    /// Has stream `id`, which holds nothing and whose windows let nothing
    /// out, wait for them as a stream holding bytes does, without holding
    /// any: an [`Event::Writable`] comes once they let bytes out. Nothing
    /// is done if the stream holds bytes or waits already, cannot send, or
    /// has room in its windows.
    pub(crate) fn await_room(&mut self, streams: &mut Streams, id: u32) {
        let Some(state) = streams.get_mut(id) else {
            return;
        };
        if state.send != SendHalf::Open || state.pending.is_some() || self.room(state) > 0 {
            return;
        }
        if self.hold_on(state, Vec::new(), false) {
            self.queue_blocked(streams, id);
        }
    }

    /// Makes `data` the bytes `state` holds (it held none). Returns whether
    /// the stream is to wait in the queue for the connection's window:
    /// shut by that window it is queued for it; shut by its own, it waits
    /// aside until that opens.
    fn hold_on(&mut self, state: &mut Stream, data: Vec<u8>, end_stream: bool) -> bool {
        self.held += data.len();
        let queued = state.send_window.available() > 0;
        state.pending = Some(Box::new(PendingSend {
            data,
            sent: 0,
            end_stream,
            trailers: None,
            queued,
        }));
        if end_stream {
            state.send = SendHalf::Closing;
        }
        queued
    }

    /// Keeps trailers behind the data `state` holds; returns `false` when
    /// it holds none, so the trailers can go out now.
    pub(crate) fn hold_trailers(state: &mut Stream, fields: &[Field<'_>]) -> bool {
        let Some(pending) = state.pending.as_mut() else {
            return false;
        };
        if pending.is_wait() {
            // Nothing to send before them: no more room is wanted.
            state.pending = None;
            return false;
        }
        let mut owned = Fields::default();
        for field in fields {
            owned.push_with(field.name, field.value, field.indexing);
        }
        pending.trailers = Some(owned);
        state.send = SendHalf::Closing;
        true
    }

    /// Queues a stream that now waits for the connection's window. Streams
    /// reset while waiting leave their ids behind until a flush passes;
    /// dropping those whenever they outnumber the live ones keeps the queue
    /// bounded by the open streams even if the windows stay shut.
    fn queue_blocked(&mut self, streams: &Streams, id: u32) {
        if self.blocked.len() >= 2 * streams.len() + 16 {
            self.blocked.retain(|id| {
                streams
                    .get(*id)
                    .and_then(|s| s.pending.as_ref())
                    .is_some_and(|p| p.queued)
            });
        }
        self.blocked.push_back(id);
    }

    /// Sends what the windows now allow of the held responses, in order,
    /// visiting at most `rounds` queued streams (a stream whose own window
    /// is then shut leaves the queue until it opens); a stream that may send
    /// more and got bytes out is reported as [`Event::Writable`]. Stops
    /// early at a stream whose response is now complete and returns it, for
    /// the caller to close before calling again. A stream told writable
    /// is marked as having an event in input batch `batch`, so that a
    /// reset later in the batch takes the event back.
    pub(crate) fn flush(
        &mut self,
        streams: &mut Streams,
        output: &mut Output,
        rounds: &mut usize,
        events: &mut Vec<Event>,
        batch: u32,
    ) -> Option<u32> {
        while *rounds > 0 && self.window.available() > 0 {
            *rounds -= 1;
            let id = self.blocked.pop_front()?;
            let Some(state) = streams.get_mut(id) else {
                continue;
            };
            let Some(mut pending) = state.pending.take() else {
                continue;
            };
            if !pending.queued {
                // A stale id of a stream that has since waited aside.
                state.pending = Some(pending);
                continue;
            }
            if pending.is_wait() {
                if state.send_window.available() == 0 {
                    // Its own window shut while it waited (a smaller
                    // SETTINGS_INITIAL_WINDOW_SIZE): it waits aside for
                    // that, as held bytes do.
                    pending.queued = false;
                    state.pending = Some(pending);
                    continue;
                }
                // Its windows let bytes out now: its sender is told, and
                // sends them itself.
                state.event_batch = batch;
                events.push(Event::Writable { stream: id });
                continue;
            }
            let sent = output.write_data(
                id,
                &pending.data[pending.sent..],
                pending.end_stream && pending.trailers.is_none(),
                &mut state.send_window,
                &mut self.window,
            );
            pending.sent += sent;
            self.held -= sent;
            if sent > 0 && state.send == SendHalf::Open {
                // Room opened in a stream that may send more.
                state.event_batch = batch;
                events.push(Event::Writable { stream: id });
            }
            if pending.sent < pending.data.len() {
                if pending.sent >= pending.data.len() / 2 {
                    // Keep a long-lived stream's buffer from growing with
                    // what has already gone out.
                    pending.data.drain(..pending.sent);
                    pending.sent = 0;
                }
                pending.queued = state.send_window.available() > 0;
                let queued = pending.queued;
                state.pending = Some(pending);
                if queued {
                    self.blocked.push_back(id);
                }
                continue;
            }
            if let Some(trailers) = pending.trailers.take() {
                output.header_block(id, trailers.to_send(), true);
                return Some(id);
            } else if pending.end_stream {
                return Some(id);
            }
        }
        None
    }
}

/// Turns the bytes after `out[header_at..header_at + HEADER_LEN]` (a
/// header's room, reserved before they were written) into DATA frames of
/// `stream` without END_STREAM: that header is filled in, and one more goes
/// before each further `max_frame` bytes. The buffer grows once and each
/// chunk moves once, from the last to the first.
pub(crate) fn frame_in_place(out: &mut Vec<u8>, header_at: usize, stream: u32, max_frame: usize) {
    let start = header_at + frame::HEADER_LEN;
    let len = out.len() - start;
    let frames = len.div_ceil(max_frame).max(1);
    out.resize(out.len() + (frames - 1) * frame::HEADER_LEN, 0);
    for i in (0..frames).rev() {
        let from = start + i * max_frame;
        let n = (len - i * max_frame).min(max_frame);
        // Frame `i` starts `i` headers further on than its bytes did.
        let at = header_at + i * (frame::HEADER_LEN + max_frame);
        let to = at + frame::HEADER_LEN;
        out.copy_within(from..from + n, to);
        out[at..to].copy_from_slice(&frame::header(n, kind::DATA, 0, stream));
    }
}

/// Writes as much of `data` as the windows and the frame size allow, as
/// DATA frames; END_STREAM goes on the last one if all of `data` fits.
/// Returns the number of bytes of `data` written.
pub(crate) fn write_data_frames(
    out: &mut Vec<u8>,
    stream: u32,
    data: &[u8],
    end_stream: bool,
    stream_window: &mut Window,
    conn_window: &mut Window,
    max_frame: usize,
) -> usize {
    if data.is_empty() {
        if end_stream {
            frame::write_header(out, 0, kind::DATA, flag::END_STREAM, stream);
        }
        return 0;
    }
    let mut sent = 0;
    loop {
        let room = stream_window
            .available()
            .min(conn_window.available())
            .min(max_frame);
        let n = room.min(data.len() - sent);
        if n == 0 {
            return sent;
        }
        let last = sent + n == data.len();
        let flags = if last && end_stream {
            flag::END_STREAM
        } else {
            0
        };
        frame::write_header(out, n, kind::DATA, flags, stream);
        out.extend_from_slice(&data[sent..sent + n]);
        stream_window.consume(n);
        conn_window.consume(n);
        sent += n;
        if last {
            return sent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_made_in_place_are_the_frames_of_a_copy() {
        for max_frame in [1, 7, 16_384] {
            for len in [1, 6, 7, 8, 20, 21, 22, 100, 40_000, 1 << 20] {
                let data: Vec<u8> = (0..len as u32).map(|i| (i % 251) as u8).collect();
                let mut copied = b"before".to_vec();
                let (mut stream_window, mut conn_window) =
                    (Window::new(1 << 30), Window::new(1 << 30));
                let sent = write_data_frames(
                    &mut copied,
                    5,
                    &data,
                    false,
                    &mut stream_window,
                    &mut conn_window,
                    max_frame,
                );
                assert_eq!(sent, len);
                let mut in_place = b"before".to_vec();
                let header_at = in_place.len();
                in_place.extend_from_slice(&[0; frame::HEADER_LEN]);
                in_place.extend_from_slice(&data);
                frame_in_place(&mut in_place, header_at, 5, max_frame);
                assert!(in_place == copied, "max_frame {max_frame}, {len} bytes");
            }
        }
    }
}
