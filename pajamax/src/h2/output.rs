//! The connection's output: the bytes waiting for the socket, and the
//! HPACK encoder that writes response header blocks into them.

use crate::h2::frame::{self, flag, kind};
use crate::h2::hpack::{Encoder, Indexing};
use crate::h2::send_flow;
use crate::h2::window::Window;

/// A header field to send.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The name, lower case.
    pub name: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Whether the field should enter the HPACK dynamic table.
    pub indexing: Indexing,
}

impl<'a> Field<'a> {
    /// A field that the encoder keeps in its dynamic table: for values
    /// repeated across responses.
    pub fn indexed(name: &'a [u8], value: &'a [u8]) -> Field<'a> {
        Field {
            name,
            value,
            indexing: Indexing::Incremental,
        }
    }

    /// A field sent as a literal, not kept in the dynamic table: for values
    /// that change from response to response.
    pub fn literal(name: &'a [u8], value: &'a [u8]) -> Field<'a> {
        Field {
            name,
            value,
            indexing: Indexing::None,
        }
    }
}

/// A header block kept as encoded, to be written again as it is while the
/// encoder's dynamic table stays the same: a steady-state answer's headers
/// or trailers cost a copy of a few bytes.
#[derive(Debug, Default, Clone)]
pub struct BlockMemo {
    /// The encoder state the bytes hold for; `None` before the first
    /// encoding that left the table alone.
    state: Option<u64>,
    /// The HEADERS frame (header, then the block), its flags and stream to
    /// be set on each copy.
    frame: Vec<u8>,
    /// `frame` padded with zeros, when it is at most [`SHORT_FRAME`] bytes
    /// long (a steady-state answer's headers or trailers, 10 to 20 bytes):
    /// copied with one fixed-size move instead of a call to `memcpy`.
    short: [u8; SHORT_FRAME],
}

/// The longest kept frame [`BlockMemo::short`] holds.
const SHORT_FRAME: usize = 32;

/// The most body bytes [`Output::begin_answer`] writes with an answer's
/// frames.
const MAX_BODY_ROOM: usize = 8;

impl BlockMemo {
    /// Whether the kept frame may be written again: the encoder is in the
    /// `state` it was made in, and the block fits a frame of `max_frame`.
    #[inline]
    fn holds(&self, state: u64, max_frame: usize) -> bool {
        self.state == Some(state) && self.frame.len() - frame::HEADER_LEN <= max_frame
    }

    /// Keeps `frame`, encoded in encoder state `state`.
    fn keep(&mut self, frame: &[u8], state: u64) {
        self.frame.clear();
        self.frame.extend_from_slice(frame);
        self.short = [0; SHORT_FRAME];
        if let Some(short) = self.short.get_mut(..frame.len()) {
            short.copy_from_slice(frame);
        }
        self.state = Some(state);
    }

    /// Appends the kept frame to `buf`, on `stream`, with END_HEADERS and,
    /// with `end_stream`, END_STREAM.
    #[inline(always)]
    fn copy_to(&self, buf: &mut Vec<u8>, stream: u32, end_stream: bool) {
        let at = buf.len();
        if self.frame.len() <= SHORT_FRAME {
            buf.extend_from_slice(&self.short_on(stream, end_stream));
            buf.truncate(at + self.frame.len());
            return;
        }
        buf.extend_from_slice(&self.frame);
        buf[at + 4] = flags(end_stream);
        buf[at + 5..at + 9].copy_from_slice(&stream.to_be_bytes());
    }

    /// The short kept frame, padded, set for `stream` (see
    /// [`BlockMemo::copy_to`]).
    #[inline(always)]
    fn short_on(&self, stream: u32, end_stream: bool) -> [u8; SHORT_FRAME] {
        let mut short = self.short;
        short[4] = flags(end_stream);
        short[5..9].copy_from_slice(&stream.to_be_bytes());
        short
    }
}

/// The flags of a kept HEADERS frame: END_HEADERS, and END_STREAM with
/// `end_stream`.
#[inline(always)]
fn flags(end_stream: bool) -> u8 {
    let end_flag = if end_stream { flag::END_STREAM } else { 0 };
    end_flag | flag::END_HEADERS
}

/// The most room an empty output keeps between turns
/// ([`Output::reclaim_room`]): enough for a few answers, little across many
/// quiet connections.
const KEPT_ROOM: usize = 4 << 10;

/// Bytes for the socket, written from the front.
pub(crate) struct Output {
    buf: Vec<u8>,
    /// How much of `buf` has been written.
    start: usize,
    encoder: Encoder,
    /// The peer's SETTINGS_MAX_FRAME_SIZE.
    max_frame: usize,
    /// Where the last DATA frame [`Output::write_data`] made begins
    /// (`usize::MAX`: none): more of its stream's bytes go into it while it
    /// ends the output, its header checked before each use.
    data_tail: usize,
}

impl Output {
    pub(crate) fn new() -> Output {
        Output {
            buf: Vec::with_capacity(4 << 10),
            start: 0,
            encoder: Encoder::new(),
            max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            data_tail: usize::MAX,
        }
    }

    /// Bytes waiting to be written.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// How many bytes wait to be written: [`Output::pending`]'s length,
    /// without taking the slice (`start` never passes the end).
    #[inline]
    pub(crate) fn pending_len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Where frames are appended.
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// The largest frame payload the peer accepts.
    pub(crate) fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Applies the peer's SETTINGS_MAX_FRAME_SIZE.
    pub(crate) fn set_max_frame(&mut self, size: usize) {
        self.max_frame = size;
    }

    /// Applies the peer's SETTINGS_HEADER_TABLE_SIZE.
    pub(crate) fn set_header_table_size(&mut self, size: usize) {
        self.encoder.set_max_table_size(size);
    }

    /// Reports that the first `n` pending bytes were written.
    pub(crate) fn advance(&mut self, n: usize) {
        self.start += n;
        if self.start >= self.buf.len() {
            self.buf.clear();
            self.start = 0;
            self.data_tail = usize::MAX;
        } else if self.start > 64 << 10 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
            self.data_tail = usize::MAX;
        }
    }

    /// Before the connection is served: an output with nothing pending
    /// takes `spare`'s room if it is larger.
    #[inline]
    pub(crate) fn lend_room(&mut self, spare: &mut Vec<u8>) {
        // The room first: it is not larger for most connections most of
        // the time, and that one test decides.
        if spare.capacity() > self.buf.capacity() && self.buf.is_empty() {
            std::mem::swap(&mut self.buf, spare);
            self.data_tail = usize::MAX;
        }
    }

    /// After the connection was served: an output holding more than
    /// [`KEPT_ROOM`] gives its room back, the larger of the two buffers to
    /// `spare`. With nothing pending it keeps [`KEPT_ROOM`]; with bytes
    /// waiting for the socket that fill a quarter of its room or less, they
    /// move to a buffer of their size (a slow reader does not hold on to
    /// the room of the worker's largest turn).
    #[inline]
    pub(crate) fn reclaim_room(&mut self, spare: &mut Vec<u8>) {
        let capacity = self.buf.capacity();
        if capacity <= KEPT_ROOM {
            return;
        }
        // Below, the bytes or the buffer may move.
        self.data_tail = usize::MAX;
        let pending = self.buf.len() - self.start;
        if pending == 0 {
            if spare.capacity() < capacity {
                std::mem::swap(&mut self.buf, spare);
            }
            self.buf.shrink_to(KEPT_ROOM);
        } else if pending <= capacity / 4 {
            let mut kept = Vec::with_capacity(pending.max(KEPT_ROOM));
            kept.extend_from_slice(&self.buf[self.start..]);
            let room = std::mem::replace(&mut self.buf, kept);
            self.start = 0;
            if spare.capacity() < room.capacity() {
                *spare = room;
                spare.clear();
            }
        }
    }

    /// Writes a whole answer from kept blocks when both still hold: the
    /// `headers` block, one DATA frame of `data` (which fits a frame) and
    /// the `trailers` block ending the stream. Returns `false`, having
    /// written nothing, when a memo does not hold.
    pub(crate) fn answer_from_memos(
        &mut self,
        stream: u32,
        headers: &BlockMemo,
        data: &[u8],
        trailers: &BlockMemo,
    ) -> bool {
        let state = self.encoder.state();
        if !headers.holds(state, self.max_frame)
            || !trailers.holds(state, self.max_frame)
            || data.len() > self.max_frame
        {
            return false;
        }
        let buf = &mut self.buf;
        // With room for the padding of short frames, which is cut off again.
        buf.reserve(
            headers.frame.len()
                + frame::HEADER_LEN
                + data.len()
                + trailers.frame.len()
                + SHORT_FRAME,
        );
        headers.copy_to(buf, stream, false);
        buf.extend_from_slice(&frame::header(data.len(), kind::DATA, 0, stream));
        buf.extend_from_slice(data);
        trailers.copy_to(buf, stream, true);
        true
    }

    /// Starts an answer whose body the caller appends straight to the
    /// output: the kept `headers` frame on `stream`, the header of the DATA
    /// frame, and the first `room` bytes of the body as zeros (for the
    /// caller to fill; at most [`MAX_BODY_ROOM`]), written as one
    /// fixed-size move. Returns where the body starts; `None`, with nothing
    /// written, when the memo does not hold or its frame is not short.
    pub(crate) fn begin_answer(
        &mut self,
        stream: u32,
        headers: &BlockMemo,
        room: usize,
    ) -> Option<usize> {
        let len = headers.frame.len();
        if len > SHORT_FRAME
            || room > MAX_BODY_ROOM
            || !headers.holds(self.encoder.state(), self.max_frame)
        {
            return None;
        }
        let mut bytes = [0; SHORT_FRAME + frame::HEADER_LEN + MAX_BODY_ROOM];
        bytes[..SHORT_FRAME].copy_from_slice(&headers.short_on(stream, false));
        // The DATA frame's length is set when the answer ends.
        bytes[len + 3] = kind::DATA;
        bytes[len + 5..len + 9].copy_from_slice(&stream.to_be_bytes());
        let at = self.buf.len();
        self.buf.extend_from_slice(&bytes);
        let body = at + len + frame::HEADER_LEN;
        self.buf.truncate(body + room);
        Some(body)
    }

    /// Ends an answer begun with [`Output::begin_answer`], whose body
    /// starts at `body`: the DATA frame's header (the body split into more
    /// DATA frames, moved in place, if it is larger than the peer's
    /// frames), then the kept `trailers` frame ending the stream. Returns
    /// `false`, having changed nothing, when the memo does not hold.
    pub(crate) fn end_answer(&mut self, stream: u32, body: usize, trailers: &BlockMemo) -> bool {
        if !trailers.holds(self.encoder.state(), self.max_frame) {
            return false;
        }
        let len = self.buf.len() - body;
        let header_at = body - frame::HEADER_LEN;
        if len <= self.max_frame {
            let len = (len as u32).to_be_bytes();
            self.buf[header_at..header_at + 3].copy_from_slice(&len[1..]);
        } else {
            send_flow::frame_in_place(&mut self.buf, header_at, stream, self.max_frame);
        }
        trailers.copy_to(&mut self.buf, stream, true);
        true
    }

    /// Writes as much of `data` as the windows allow, as DATA frames of
    /// `stream` (see [`send_flow::write_data_frames`]), and returns how
    /// much. While the last DATA frame this made for `stream` ends the
    /// output and is not full, the first bytes go into it: a stream whose
    /// messages come one at a time (a thread's sink) goes out in frames as
    /// large as the frame size allows, not a frame per message. h2's
    /// client counts unread DATA frames of under 256 bytes against a
    /// budget and closes the connection past it (tonic's client lagging
    /// about 10,000 small messages behind a stream).
    pub(crate) fn write_data(
        &mut self,
        stream: u32,
        data: &[u8],
        end_stream: bool,
        stream_window: &mut Window,
        conn_window: &mut Window,
    ) -> usize {
        let mut sent = 0;
        if !end_stream && !data.is_empty() {
            if let Some(len) = self.data_tail_len(stream) {
                let n = (self.max_frame - len)
                    .min(stream_window.available())
                    .min(conn_window.available())
                    .min(data.len());
                let at = self.data_tail;
                self.buf.extend_from_slice(&data[..n]);
                self.buf[at..at + 3].copy_from_slice(&((len + n) as u32).to_be_bytes()[1..]);
                stream_window.consume(n);
                conn_window.consume(n);
                sent = n;
            }
        }
        let frames_at = self.buf.len();
        let more = send_flow::write_data_frames(
            &mut self.buf,
            stream,
            &data[sent..],
            end_stream,
            stream_window,
            conn_window,
            self.max_frame,
        );
        if more > 0 && !end_stream {
            // Every frame but the last is full.
            let full = (more - 1) / self.max_frame;
            self.data_tail = frames_at + full * (frame::HEADER_LEN + self.max_frame);
        }
        sent + more
    }

    /// The payload length of the DATA frame at `data_tail`, if it is one
    /// of `stream`'s, without flags, not written to the socket yet, with
    /// room, and the last bytes of the output.
    fn data_tail_len(&self, stream: u32) -> Option<usize> {
        let at = self.data_tail;
        let header = self.buf.get(at..at.checked_add(frame::HEADER_LEN)?)?;
        let len =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let id = u32::from_be_bytes([header[5], header[6], header[7], header[8]]);
        let fits = at >= self.start
            && header[3] == kind::DATA
            && header[4] == 0
            && id == stream
            && at + frame::HEADER_LEN + len == self.buf.len()
            && len < self.max_frame;
        fits.then_some(len)
    }

    /// Takes back what was written from `start` on, and the body that
    /// starts at `body` moves to `back` (replacing what it held).
    pub(crate) fn take_back(&mut self, start: usize, body: usize, back: &mut Vec<u8>) {
        self.data_tail = usize::MAX;
        back.clear();
        back.extend_from_slice(&self.buf[body..]);
        self.buf.truncate(start);
    }

    /// As [`Output::header_block`] for `fields`, reusing the bytes kept in
    /// `memo` while the encoder's table is what it was when they were made.
    pub(crate) fn header_block_memo(
        &mut self,
        stream: u32,
        memo: &mut BlockMemo,
        fields: &[Field<'_>],
        end_stream: bool,
    ) {
        let state = self.encoder.state();
        if memo.holds(state, self.max_frame) {
            return memo.copy_to(&mut self.buf, stream, end_stream);
        }
        let start = self.buf.len();
        self.header_block(stream, fields.iter().copied(), end_stream);
        if self.encoder.state() == state
            && self.buf.len() - start <= self.max_frame + frame::HEADER_LEN
        {
            // Encoded without touching the table: the same bytes hold next
            // time.
            memo.keep(&self.buf[start..], state);
        }
    }

    /// Encodes a header block straight into the output behind a HEADERS
    /// frame header; only a block larger than the peer's frame size is
    /// moved out again and split over CONTINUATION frames.
    pub(crate) fn header_block<'f>(
        &mut self,
        stream: u32,
        fields: impl Iterator<Item = Field<'f>>,
        end_stream: bool,
    ) {
        let end_flag = if end_stream { flag::END_STREAM } else { 0 };
        let head = self.buf.len();
        frame::write_header(
            &mut self.buf,
            0,
            kind::HEADERS,
            end_flag | flag::END_HEADERS,
            stream,
        );
        let start = self.buf.len();
        self.encoder.begin_block(&mut self.buf);
        for field in fields {
            self.encoder
                .encode(field.name, field.value, field.indexing, &mut self.buf);
        }
        let len = self.buf.len() - start;
        if len <= self.max_frame {
            frame::patch_len(&mut self.buf, head, len);
            return;
        }
        let block: Vec<u8> = self.buf.split_off(start);
        self.buf.truncate(head);
        let mut chunks = block.chunks(self.max_frame);
        let first = chunks.next().unwrap_or(&[]);
        let rest = chunks.len();
        frame::write_header(&mut self.buf, first.len(), kind::HEADERS, end_flag, stream);
        self.buf.extend_from_slice(first);
        for (i, chunk) in chunks.enumerate() {
            let flags = if i + 1 == rest { flag::END_HEADERS } else { 0 };
            frame::write_header(
                &mut self.buf,
                chunk.len(),
                kind::CONTINUATION,
                flags,
                stream,
            );
            self.buf.extend_from_slice(chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::hpack::Decoder;

    fn headers(out: &mut Output) -> Vec<u8> {
        let bytes = out.pending().to_vec();
        out.advance(bytes.len());
        bytes
    }

    fn decoded(decoder: &mut Decoder, frame: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut fields = Vec::new();
        decoder
            .decode(&frame[frame::HEADER_LEN..], |n, v| {
                fields.push((n.to_vec(), v.to_vec()))
            })
            .unwrap();
        fields
    }

    #[test]
    fn a_burst_room_goes_to_the_spare_and_comes_back_from_it() {
        let mut spare = Vec::new();
        let mut a = Output::new();
        // A burst grows the output; written, it keeps its room until the
        // turn ends, then gives it to the spare and keeps little.
        a.buf().extend_from_slice(&[7; 100 << 10]);
        a.advance(60 << 10);
        a.reclaim_room(&mut spare);
        assert!(
            a.buf.capacity() >= 100 << 10,
            "nothing taken while bytes wait"
        );
        assert!(spare.capacity() == 0);
        a.advance(40 << 10);
        assert!(a.pending().is_empty() && a.buf.capacity() >= 100 << 10);
        a.reclaim_room(&mut spare);
        assert!(a.buf.capacity() <= KEPT_ROOM);
        assert!(spare.capacity() >= 100 << 10);
        // Another connection's output borrows it for its turn, and the
        // larger of two large buffers is the one kept.
        let mut b = Output::new();
        b.lend_room(&mut spare);
        assert!(b.buf.capacity() >= 100 << 10 && spare.capacity() <= KEPT_ROOM);
        a.buf().extend_from_slice(&[1; 200 << 10]);
        a.advance(200 << 10);
        b.reclaim_room(&mut spare);
        a.reclaim_room(&mut spare);
        assert!(spare.capacity() >= 200 << 10);
        assert!(a.buf.capacity() <= KEPT_ROOM && b.buf.capacity() <= KEPT_ROOM);
        // An output with bytes waiting keeps its own buffer.
        b.buf().extend_from_slice(b"waiting");
        b.lend_room(&mut spare);
        assert!(spare.capacity() >= 200 << 10);
        assert_eq!(b.pending(), b"waiting");
        // A connection that borrowed the large buffer and left a few bytes
        // for the socket keeps them, not the room.
        let mut c = Output::new();
        c.lend_room(&mut spare);
        assert!(c.buf.capacity() >= 200 << 10);
        c.buf().extend_from_slice(&[5; 50 << 10]);
        c.advance(30 << 10);
        c.reclaim_room(&mut spare);
        assert_eq!(c.pending(), &[5; 20 << 10][..]);
        assert!(c.buf.capacity() < 100 << 10);
        assert!(spare.capacity() >= 200 << 10 && spare.is_empty());
        // Many bytes waiting: the buffer stays where they are.
        c.buf().extend_from_slice(&[6; 500 << 10]);
        let room = c.buf.capacity();
        c.reclaim_room(&mut spare);
        assert_eq!(c.buf.capacity(), room);
        assert_eq!(c.pending().len(), (20 << 10) + (500 << 10));
    }

    /// The headers and trailers of a steady-state gRPC answer.
    fn answer_fields() -> ([Field<'static>; 2], [Field<'static>; 1]) {
        let headers = [
            Field::indexed(b":status", b"200"),
            Field::indexed(b"content-type", b"application/grpc"),
        ];
        (headers, [Field::indexed(b"grpc-status", b"0")])
    }

    #[test]
    fn an_answer_from_memos_is_the_same_bytes_as_its_three_parts() {
        let (headers, trailers) = answer_fields();
        let (mut head, mut tail) = (BlockMemo::default(), BlockMemo::default());
        let mut out = Output::new();
        // No memo yet: nothing written.
        assert!(!out.answer_from_memos(1, &head, b"hello", &tail));
        assert!(out.pending().is_empty());
        // The parts one by one, until both memos hold (the first block
        // adds content-type to the table).
        let mut parts = Vec::new();
        for stream in [1, 3] {
            out.header_block_memo(stream, &mut head, &headers, false);
            frame::write_header(out.buf(), 5, kind::DATA, 0, stream);
            out.buf().extend_from_slice(b"hello");
            out.header_block_memo(stream, &mut tail, &trailers, true);
            parts = out.pending().to_vec();
            out.advance(parts.len());
        }
        assert!(out.answer_from_memos(3, &head, b"hello", &tail));
        assert_eq!(out.pending(), &parts[..]);
        out.advance(parts.len());
        // A frame too large for the peer, or a table that changed: the
        // parts way again.
        out.set_max_frame(4);
        assert!(!out.answer_from_memos(5, &head, b"hello", &tail));
        out.set_max_frame(16_384);
        out.header_block(5, [Field::indexed(b"x-a", b"1")].into_iter(), false);
        out.advance(out.pending().len());
        assert!(!out.answer_from_memos(7, &head, b"hello", &tail));
        assert!(out.pending().is_empty());
    }

    #[test]
    fn an_answer_written_in_place_is_the_same_bytes_as_from_memos() {
        let (headers, trailers) = answer_fields();
        let (mut head, mut tail) = (BlockMemo::default(), BlockMemo::default());
        let mut out = Output::new();
        assert_eq!(out.begin_answer(1, &head, 5), None);
        for stream in [1, 3] {
            out.header_block_memo(stream, &mut head, &headers, false);
            out.header_block_memo(stream, &mut tail, &trailers, true);
            out.advance(out.pending().len());
        }
        let body = b"\0\0\0\0\x03abc";
        assert!(out.answer_from_memos(5, &head, body, &tail));
        let expected = out.pending().to_vec();
        out.advance(expected.len());
        // Begun with the body's first five bytes as room, filled after.
        let at = out.begin_answer(5, &head, 5).unwrap();
        assert_eq!(out.pending()[at - out.start..], [0; 5]);
        out.buf()[at + 4] = 3;
        out.buf().extend_from_slice(b"abc");
        assert!(out.end_answer(5, at, &tail));
        assert_eq!(out.pending(), &expected[..]);
        out.advance(expected.len());
        // Taken back: the output as it was, the body moved out.
        out.buf().extend_from_slice(b"before");
        let at = out.begin_answer(7, &head, 5).unwrap();
        out.buf().extend_from_slice(b"xyz");
        let mut back = vec![1, 2];
        out.take_back(at - frame::HEADER_LEN - head.frame.len(), at, &mut back);
        assert_eq!(out.pending(), b"before");
        assert_eq!(back, b"\0\0\0\0\0xyz");
        // A body larger than the peer's frames: split into DATA frames in
        // place, the trailers after them.
        out.advance(out.pending().len());
        let at = out.begin_answer(9, &head, 0).unwrap();
        let body: Vec<u8> = (0..100).collect();
        out.buf().extend_from_slice(&body);
        out.set_max_frame(64);
        assert!(out.end_answer(9, at, &tail));
        let sent = out.pending().to_vec();
        let mut frames = Vec::new();
        let mut rest = &sent[..];
        while let Some(head) = frame::FrameHeader::parse(rest) {
            let end = frame::HEADER_LEN + head.len as usize;
            frames.push((
                head.kind,
                head.flags,
                head.stream,
                rest[frame::HEADER_LEN..end].to_vec(),
            ));
            rest = &rest[end..];
        }
        assert!(rest.is_empty());
        let kinds: Vec<u8> = frames.iter().map(|f| f.0).collect();
        assert_eq!(
            kinds,
            [kind::HEADERS, kind::DATA, kind::DATA, kind::HEADERS]
        );
        assert!(frames.iter().all(|f| f.2 == 9));
        assert_eq!(frames[1].3, &body[..64]);
        assert_eq!(frames[2].3, &body[64..]);
        assert_eq!((frames[1].1, frames[2].1), (0, 0));
        assert_eq!(frames[3].1, flag::END_STREAM | flag::END_HEADERS);
        // A trailers block that no longer holds: not ended, nothing changed.
        out.advance(sent.len());
        out.set_max_frame(16_384);
        let at = out.begin_answer(11, &head, 0).unwrap();
        out.buf().extend_from_slice(b"abc");
        tail.state = None;
        let before = out.pending().to_vec();
        assert!(!out.end_answer(11, at, &tail));
        assert_eq!(out.pending(), &before[..]);
    }

    #[test]
    fn memos_short_and_long_repeat_their_whole_frame_on_each_stream() {
        let short = [Field::literal(b"grpc-status", b"0")];
        let long = [Field::literal(
            b"x-long",
            b"a value long enough that its frame passes thirty-two bytes",
        )];
        let mut out = Output::new();
        let mut decoder = Decoder::new(4096);
        for (fields, is_short) in [(&short, true), (&long, false)] {
            let mut memo = BlockMemo::default();
            let mut frames = Vec::new();
            for (stream, end_stream) in [(1, true), (3, false), (5, true)] {
                out.header_block_memo(stream, &mut memo, fields, end_stream);
                frames.push(out.pending().to_vec());
                out.advance(out.pending().len());
            }
            assert_eq!(memo.frame.len() <= SHORT_FRAME, is_short);
            for (frame, (stream, end_stream)) in
                frames.iter().zip([(1, true), (3, false), (5, true)])
            {
                let head = frame::FrameHeader::parse(frame).unwrap();
                assert_eq!(head.len as usize, frame.len() - frame::HEADER_LEN);
                assert_eq!((head.kind, head.stream), (kind::HEADERS, stream));
                let end = if end_stream { flag::END_STREAM } else { 0 };
                assert_eq!(head.flags, end | flag::END_HEADERS);
                let expected: Vec<(Vec<u8>, Vec<u8>)> = fields
                    .iter()
                    .map(|f| (f.name.to_vec(), f.value.to_vec()))
                    .collect();
                assert_eq!(decoded(&mut decoder, frame), expected);
            }
        }
    }

    #[test]
    fn a_memo_repeats_the_block_while_the_table_stays() {
        let fields = [
            Field::indexed(b":status", b"200"),
            Field::indexed(b"content-type", b"application/grpc"),
        ];
        let mut out = Output::new();
        let mut memo = BlockMemo::default();
        let mut decoder = Decoder::new(4096);
        let expected = vec![
            (b":status".to_vec(), b"200".to_vec()),
            (b"content-type".to_vec(), b"application/grpc".to_vec()),
        ];
        let mut blocks = Vec::new();
        for stream in [1, 3, 5, 7] {
            out.header_block_memo(stream, &mut memo, &fields, false);
            let frame = headers(&mut out);
            assert_eq!(decoded(&mut decoder, &frame), expected);
            blocks.push(frame[frame::HEADER_LEN..].to_vec());
        }
        // The first block adds content-type to the table; from the second
        // on, the block is the same two index bytes.
        assert!(blocks[0].len() > 2);
        assert_eq!(blocks[1].len(), 2);
        assert_eq!(memo.frame.len(), frame::HEADER_LEN + 2);
        assert_eq!(blocks[2], blocks[1]);
        assert_eq!(blocks[3], blocks[1]);
        assert_eq!(memo.state, Some(out.encoder.state()));

        // Another field enters the table: the positions move, the memo is
        // not used, and what is sent still decodes right.
        out.header_block(9, [Field::indexed(b"x-a", b"1")].into_iter(), false);
        assert_eq!(
            decoded(&mut decoder, &headers(&mut out)),
            vec![(b"x-a".to_vec(), b"1".to_vec())]
        );
        out.header_block_memo(11, &mut memo, &fields, false);
        assert_eq!(decoded(&mut decoder, &headers(&mut out)), expected);
        // A table size change from the peer starts the next block with an
        // update: the memo waits until it has been sent.
        out.set_header_table_size(1024);
        out.header_block_memo(13, &mut memo, &fields, false);
        assert_eq!(decoded(&mut decoder, &headers(&mut out)), expected);
        out.header_block_memo(15, &mut memo, &fields, false);
        assert_eq!(decoded(&mut decoder, &headers(&mut out)), expected);
    }
}
