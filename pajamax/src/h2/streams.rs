//! The stream table: the streams open now, and what is remembered of the
//! ones that closed, to tell a late frame on a closed stream from a frame
//! on a stream that was never opened (RFC 9113 section 5.1).

use crate::h2::error::Error;
use crate::h2::frame::{Reason, MAX_WINDOW};
use crate::h2::send_flow::PendingSend;
use crate::h2::window::Window;
use crate::stream_map::StreamMap;

/// The receiving half of a stream: whether the client may still send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvHalf {
    /// DATA and trailers may still arrive.
    Open,
    /// The client sent END_STREAM.
    Closed,
}

/// The sending half of a stream. A stream whose sending half is done is
/// removed from the table (after a RST_STREAM(NO_ERROR) if the client is
/// still sending, RFC 9113 section 8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendHalf {
    /// No response HEADERS yet.
    Idle,
    /// Response HEADERS sent; DATA and trailers may follow.
    Open,
    /// END_STREAM (with the last DATA or the trailers) waits behind data
    /// held for the peer's windows; nothing more may be added.
    Closing,
}

/// [`Stream::content_left`] of a request without `content-length`.
pub(crate) const NO_LENGTH: u64 = u64::MAX;

/// One open stream; kept small, as a connection may have thousands open.
pub(crate) struct Stream {
    /// Whether the client may still send.
    pub recv: RecvHalf,
    /// Whether the server may still send.
    pub send: SendHalf,
    /// Bytes the client may still send before the server replenishes
    /// (never more than 2^31 - 1, never negative).
    pub recv_window: i32,
    /// Body bytes received that the consumer has not released yet
    /// ([`Connection::release_capacity`](crate::h2::Connection::release_capacity)):
    /// the window is not opened again for them. With `recv_window`, at most
    /// the initial window.
    pub unreleased: u32,
    /// Bytes the server may still send.
    pub send_window: Window,
    /// Body bytes the request's `content-length` still allows;
    /// [`NO_LENGTH`] when it gave none.
    pub content_left: u64,
    /// Response bytes waiting for the peer's windows.
    pub pending: Option<Box<PendingSend>>,
    /// The input batch in which an event for this stream was last
    /// reported: a reset in the same batch takes those events back.
    pub event_batch: u32,
    /// What the consumer attached to the stream
    /// ([`Connection::set_tag`](crate::h2::Connection::set_tag)); 0 for
    /// nothing. (It fits in what would be padding.)
    pub tag: u32,
}

impl Stream {
    /// A stream just opened by request headers.
    pub(crate) fn new(end_stream: bool, recv_window: u32, send_window: u32, batch: u32) -> Stream {
        Stream {
            recv: if end_stream {
                RecvHalf::Closed
            } else {
                RecvHalf::Open
            },
            send: SendHalf::Idle,
            recv_window: recv_window.min(MAX_WINDOW) as i32,
            unreleased: 0,
            send_window: Window::new(send_window),
            content_left: NO_LENGTH,
            pending: None,
            event_batch: batch,
            tag: 0,
        }
    }

    /// Whether the client may still send.
    pub(crate) fn recv_open(&self) -> bool {
        self.recv == RecvHalf::Open
    }

    /// Response bytes held for the peer's windows.
    pub(crate) fn buffered(&self) -> usize {
        self.pending.as_ref().map_or(0, |p| p.unsent())
    }
}

/// How many closed stream ids are remembered to tell "closed" from "idle".
const CLOSED_MEMORY: usize = 256;

/// The open streams of a connection, by id, and the recently closed ones.
pub(crate) struct Streams {
    open: StreamMap<Stream>,
    /// The highest stream id the client has opened (or that was reset
    /// while idle): ids at or below it are no longer idle.
    last: u32,
    /// Recently closed ids, with whether the server reset them: a ring,
    /// each new id written over the oldest (0: no stream).
    recently_closed: Box<[(u32, bool); CLOSED_MEMORY]>,
    /// How many ids were remembered; the next goes at this count modulo
    /// [`CLOSED_MEMORY`].
    closed_count: usize,
}

impl Streams {
    pub(crate) fn new() -> Streams {
        Streams {
            open: StreamMap::default(),
            last: 0,
            recently_closed: Box::new([(0, false); CLOSED_MEMORY]),
            closed_count: 0,
        }
    }

    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&Stream> {
        self.open.get(id)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut Stream> {
        self.open.get_mut(id)
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        self.open.contains_key(id)
    }

    /// Adds a stream just opened by the client.
    #[inline]
    pub(crate) fn insert(&mut self, id: u32, stream: Stream) {
        self.open.insert(id, stream);
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<Stream> {
        self.open.remove(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    /// Gives back the room the table of open streams no longer needs
    /// ([`StreamMap::trim`]).
    pub(crate) fn trim(&mut self) {
        self.open.trim();
    }

    /// How many places the table of open streams has.
    #[cfg(test)]
    pub(crate) fn places(&self) -> usize {
        self.open.places()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.open.values_mut()
    }

    /// The open streams with their ids.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Stream)> {
        self.open.iter_mut()
    }

    /// Forgets every open stream (after a connection error).
    pub(crate) fn clear(&mut self) {
        self.open.clear();
    }

    /// The highest stream id no longer idle.
    pub(crate) fn last(&self) -> u32 {
        self.last
    }

    /// Marks every id up to `id` as no longer idle.
    pub(crate) fn pass(&mut self, id: u32) {
        self.last = self.last.max(id);
    }

    /// Remembers a closed stream; `server_reset` when the server reset it
    /// while the client could still be sending, so that frames the client
    /// sent before it saw the reset are ignored.
    #[inline]
    pub(crate) fn remember_closed(&mut self, id: u32, server_reset: bool) {
        self.recently_closed[self.closed_count % CLOSED_MEMORY] = (id, server_reset);
        self.closed_count = self.closed_count.wrapping_add(1);
    }

    /// Whether `id` is among the recently closed streams.
    #[cfg(test)]
    pub(crate) fn recently_closed(&self, id: u32) -> bool {
        self.closed_entry(id).is_some()
    }

    /// What is remembered of `id`, if it closed recently: whether the
    /// server reset it.
    pub(crate) fn closed_entry(&self, id: u32) -> Option<bool> {
        if id == 0 {
            return None;
        }
        self.recently_closed
            .iter()
            .find(|(closed, _)| *closed == id)
            .map(|&(_, server_reset)| server_reset)
    }

    /// Whether `id` is idle: above every stream the client opened, or even
    /// (the server's to open, and it opens none).
    pub(crate) fn is_idle(&self, id: u32) -> bool {
        id > self.last || id.is_multiple_of(2)
    }

    /// Judges a frame other than HEADERS or PRIORITY on a stream not in the
    /// table: idle streams are a connection error, closed ones a stream
    /// error, except right after the server reset them (ignored).
    pub(crate) fn frame_on_unknown(&self, id: u32) -> Result<(), Error> {
        if self.is_idle(id) {
            return Err(Error::GoAway(
                Reason::PROTOCOL_ERROR,
                "frame on an idle stream",
            ));
        }
        match self.closed_entry(id) {
            Some(true) => Ok(()),
            _ => Err(Error::Reset(id, Reason::STREAM_CLOSED)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_closed_streams_are_remembered() {
        let mut streams = Streams::new();
        streams.pass(2 * 300 + 1);
        // Stream 0 is never a stream, even before the ring is full.
        assert!(!streams.recently_closed(0));
        for i in 0..300u32 {
            streams.remember_closed(2 * i + 1, i % 2 == 0);
        }
        // The oldest 44 fell out of the ring of 256.
        assert!(!streams.recently_closed(1));
        assert!(!streams.recently_closed(2 * 43 + 1));
        assert!(streams.recently_closed(2 * 44 + 1));
        assert!(streams.recently_closed(2 * 299 + 1));
        // A late frame is ignored on a stream the server reset, a stream
        // error on one that closed otherwise or was forgotten, and a
        // connection error on an idle one.
        assert!(streams.frame_on_unknown(2 * 298 + 1).is_ok());
        assert!(matches!(
            streams.frame_on_unknown(2 * 299 + 1),
            Err(Error::Reset(599, Reason::STREAM_CLOSED))
        ));
        assert!(matches!(
            streams.frame_on_unknown(1),
            Err(Error::Reset(1, Reason::STREAM_CLOSED))
        ));
        assert!(matches!(
            streams.frame_on_unknown(603),
            Err(Error::GoAway(Reason::PROTOCOL_ERROR, _))
        ));
    }

    #[test]
    fn a_stream_stays_small() {
        // Thousands per connection: every byte counts.
        assert!(
            std::mem::size_of::<Stream>() <= 40,
            "{}",
            std::mem::size_of::<Stream>()
        );
    }
}
