//! HTTP/2 frames as bytes (RFC 9113 section 4 and 6): the constants, a
//! [`Frame`] that is both what a test sends and what it reads back, and
//! the splitting of a byte stream into frames.
//!
//! Writers write what they are told: lengths, flags and stream ids are not
//! checked against the rules, so a test can send what no client would
//! (`Frame::new` takes any type, flags and payload).

use std::fmt;

/// The client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Length of a frame header.
pub const HEADER_LEN: usize = 9;

/// The largest frame payload a peer takes until it says otherwise
/// (SETTINGS_MAX_FRAME_SIZE's initial value).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 16_384;

/// The largest flow-control window, and the mask of a stream id's 31 bits.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Frame types (RFC 9113 section 6).
pub mod kind {
    /// DATA (6.1).
    pub const DATA: u8 = 0x0;
    /// HEADERS (6.2).
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY (6.3).
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM (6.4).
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS (6.5).
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE (6.6), which a client must not send.
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING (6.7).
    pub const PING: u8 = 0x6;
    /// GOAWAY (6.8).
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE (6.9).
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION (6.10).
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    /// END_STREAM, on DATA and HEADERS.
    pub const END_STREAM: u8 = 0x1;
    /// ACK, on SETTINGS and PING.
    pub const ACK: u8 = 0x1;
    /// END_HEADERS, on HEADERS and CONTINUATION.
    pub const END_HEADERS: u8 = 0x4;
    /// PADDED, on DATA and HEADERS.
    pub const PADDED: u8 = 0x8;
    /// PRIORITY, on HEADERS.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameters (RFC 9113 section 6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// An error code of RST_STREAM and GOAWAY (RFC 9113 section 7).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    /// Graceful shutdown, or a stream closed without error.
    pub const NO_ERROR: ErrorCode = ErrorCode(0x0);
    /// A protocol error.
    pub const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    /// An internal error of the sender.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    /// Flow control was violated.
    pub const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    /// SETTINGS were not acknowledged in time.
    pub const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    /// A frame on a half-closed stream.
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    /// A frame of the wrong size.
    pub const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    /// The stream was refused before any processing.
    pub const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    /// The stream is no longer needed.
    pub const CANCEL: ErrorCode = ErrorCode(0x8);
    /// The HPACK context cannot be maintained.
    pub const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    /// A CONNECT tunnel failed.
    pub const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    /// The peer generates excessive load.
    pub const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    /// The transport's security is inadequate.
    pub const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    /// HTTP/1.1 must be used instead.
    pub const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);

    /// The RFC's name of the code, or `"UNKNOWN"`.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied().unwrap_or("UNKNOWN")
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            "UNKNOWN" => write!(f, "ErrorCode({:#x})", self.0),
            name => f.write_str(name),
        }
    }
}

/// The 9-byte header of a frame (RFC 9113 section 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length (24 bits).
    pub len: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier, without the reserved bit.
    pub stream: u32,
}

impl FrameHeader {
    /// Reads the first 9 bytes of `buf`, or `None` if fewer are there. The
    /// reserved bit of the stream id is dropped, as a receiver must.
    pub fn parse(buf: &[u8]) -> Option<FrameHeader> {
        let head: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
        Some(FrameHeader {
            len: u32::from_be_bytes([0, head[0], head[1], head[2]]),
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & MAX_WINDOW,
        })
    }

    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Appends a frame header. The stream id is written as given, reserved bit
/// included, so a test can set it.
///
/// # Panics
///
/// If `len` does not fit in 24 bits.
pub fn write_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    assert!(len < 1 << 24, "a frame payload of {len} bytes");
    let len = (len as u32).to_be_bytes();
    let stream = stream.to_be_bytes();
    out.extend_from_slice(&[
        len[1], len[2], len[3], kind, flags, stream[0], stream[1], stream[2], stream[3],
    ]);
}

/// Appends a whole frame: header and payload.
pub fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    write_header(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

/// A frame as bytes: header and payload.
pub fn frame_bytes(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    write_frame(&mut out, kind, flags, stream, payload);
    out
}

/// The preface and a SETTINGS frame with `settings`: what a client sends
/// first.
pub fn handshake(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    Frame::settings(settings).write(&mut out);
    out
}

/// The priority fields of HEADERS and PRIORITY (RFC 9113 section 5.3.2,
/// deprecated but still parsed by servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// The stream this one depends on.
    pub dependency: u32,
    /// The E bit: an exclusive dependency.
    pub exclusive: bool,
    /// The weight field as sent: the weight minus one.
    pub weight: u8,
}

impl Priority {
    /// The 5 bytes of the fields.
    pub fn to_bytes(self) -> [u8; 5] {
        let e = if self.exclusive { 1 << 31 } else { 0 };
        let d = (self.dependency | e).to_be_bytes();
        [d[0], d[1], d[2], d[3], self.weight]
    }

    /// Reads the 5 bytes of the fields.
    pub fn parse(bytes: &[u8]) -> Option<Priority> {
        let b: &[u8; 5] = bytes.get(..5)?.try_into().ok()?;
        let d = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        Some(Priority {
            dependency: d & MAX_WINDOW,
            exclusive: d & (1 << 31) != 0,
            weight: b[4],
        })
    }
}

/// One frame: a header's fields and the payload as sent (padding and
/// priority fields included).
///
/// Built with the constructors named after the frame types, changed with
/// [`Frame::padded`], [`Frame::with_priority`], [`Frame::with_flags`] and
/// [`Frame::without_flags`], written with [`Frame::write`] or
/// [`Frame::to_bytes`]; read back with [`Frame::parse`] or
/// [`split_frames`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Frame type (see [`kind`]).
    pub kind: u8,
    /// Flags (see [`flag`]).
    pub flags: u8,
    /// Stream identifier.
    pub stream: u32,
    /// The payload, as on the wire.
    pub payload: Vec<u8>,
}

impl Frame {
    /// Any frame, of any type, including unknown ones.
    pub fn new(kind: u8, flags: u8, stream: u32, payload: impl Into<Vec<u8>>) -> Frame {
        Frame {
            kind,
            flags,
            stream,
            payload: payload.into(),
        }
    }

    /// DATA on `stream`, with END_STREAM if `end_stream`.
    pub fn data(stream: u32, data: &[u8], end_stream: bool) -> Frame {
        Frame::new(kind::DATA, end_flag(end_stream), stream, data)
    }

    /// HEADERS with a whole header block (END_HEADERS set), with
    /// END_STREAM if `end_stream`. Clear END_HEADERS with
    /// [`Frame::without_flags`] to continue the block in CONTINUATION
    /// frames.
    pub fn headers(stream: u32, block: &[u8], end_stream: bool) -> Frame {
        Frame::new(
            kind::HEADERS,
            flag::END_HEADERS | end_flag(end_stream),
            stream,
            block,
        )
    }

    /// CONTINUATION with a piece of a header block, with END_HEADERS if
    /// `end_headers`.
    pub fn continuation(stream: u32, fragment: &[u8], end_headers: bool) -> Frame {
        let flags = if end_headers { flag::END_HEADERS } else { 0 };
        Frame::new(kind::CONTINUATION, flags, stream, fragment)
    }

    /// PRIORITY on `stream`.
    pub fn priority(stream: u32, priority: Priority) -> Frame {
        Frame::new(kind::PRIORITY, 0, stream, priority.to_bytes())
    }

    /// RST_STREAM on `stream` with `code`.
    pub fn rst_stream(stream: u32, code: ErrorCode) -> Frame {
        Frame::new(kind::RST_STREAM, 0, stream, code.0.to_be_bytes())
    }

    /// SETTINGS with `(identifier, value)` parameters, in order.
    pub fn settings(params: &[(u16, u32)]) -> Frame {
        let mut payload = Vec::with_capacity(6 * params.len());
        for (id, value) in params {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        Frame::new(kind::SETTINGS, 0, 0, payload)
    }

    /// The acknowledgement of the peer's SETTINGS.
    pub fn settings_ack() -> Frame {
        Frame::new(kind::SETTINGS, flag::ACK, 0, Vec::new())
    }

    /// PING with `data`.
    pub fn ping(data: [u8; 8]) -> Frame {
        Frame::new(kind::PING, 0, 0, data)
    }

    /// The answer to a PING with `data`.
    pub fn ping_ack(data: [u8; 8]) -> Frame {
        Frame::new(kind::PING, flag::ACK, 0, data)
    }

    /// GOAWAY naming `last_stream`, with `code` and debug data.
    pub fn goaway(last_stream: u32, code: ErrorCode, debug: &[u8]) -> Frame {
        let mut payload = Vec::with_capacity(8 + debug.len());
        payload.extend_from_slice(&last_stream.to_be_bytes());
        payload.extend_from_slice(&code.0.to_be_bytes());
        payload.extend_from_slice(debug);
        Frame::new(kind::GOAWAY, 0, 0, payload)
    }

    /// WINDOW_UPDATE of `increment` on `stream` (0: the connection).
    pub fn window_update(stream: u32, increment: u32) -> Frame {
        Frame::new(kind::WINDOW_UPDATE, 0, stream, increment.to_be_bytes())
    }

    /// The frame with PADDED set and `pad_len` bytes of padding: the Pad
    /// Length byte goes first, zeros last.
    ///
    /// # Panics
    ///
    /// On a frame that is neither DATA nor HEADERS, or is padded already.
    pub fn padded(mut self, pad_len: u8) -> Frame {
        assert!(
            matches!(self.kind, kind::DATA | kind::HEADERS) && !self.has(flag::PADDED),
            "only an unpadded DATA or HEADERS frame can be padded: {self:?}"
        );
        self.flags |= flag::PADDED;
        self.payload.insert(0, pad_len);
        self.payload
            .resize(self.payload.len() + usize::from(pad_len), 0);
        self
    }

    /// The HEADERS frame with PRIORITY set and the priority fields (after
    /// the Pad Length byte, if padded).
    ///
    /// # Panics
    ///
    /// On a frame that is not HEADERS, or has the fields already.
    pub fn with_priority(mut self, priority: Priority) -> Frame {
        assert!(
            self.kind == kind::HEADERS && !self.has(flag::PRIORITY),
            "only HEADERS without priority can get it: {self:?}"
        );
        self.flags |= flag::PRIORITY;
        let at = usize::from(self.has(flag::PADDED));
        self.payload.splice(at..at, priority.to_bytes());
        self
    }

    /// The frame with `flags` set as well (the payload unchanged).
    pub fn with_flags(mut self, flags: u8) -> Frame {
        self.flags |= flags;
        self
    }

    /// The frame with `flags` cleared (the payload unchanged).
    pub fn without_flags(mut self, flags: u8) -> Frame {
        self.flags &= !flags;
        self
    }

    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The frame's header.
    pub fn header(&self) -> FrameHeader {
        FrameHeader {
            len: self.payload.len() as u32,
            kind: self.kind,
            flags: self.flags,
            stream: self.stream & MAX_WINDOW,
        }
    }

    /// Appends the frame's bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        write_frame(out, self.kind, self.flags, self.stream, &self.payload);
    }

    /// The frame's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        frame_bytes(self.kind, self.flags, self.stream, &self.payload)
    }

    /// The complete frame at the start of `bytes` and its length on the
    /// wire, or `None` if it has not all arrived.
    pub fn parse(bytes: &[u8]) -> Option<(Frame, usize)> {
        let head = FrameHeader::parse(bytes)?;
        let end = HEADER_LEN + head.len as usize;
        let payload = bytes.get(HEADER_LEN..end)?;
        let frame = Frame::new(head.kind, head.flags, head.stream, payload);
        Some((frame, end))
    }

    /// The payload without the padding, for a PADDED DATA or HEADERS frame
    /// (the whole payload otherwise); `None` when the Pad Length is more
    /// than the payload holds.
    pub fn unpadded(&self) -> Option<&[u8]> {
        if !(matches!(self.kind, kind::DATA | kind::HEADERS) && self.has(flag::PADDED)) {
            return Some(&self.payload);
        }
        let (&pad, rest) = self.payload.split_first()?;
        rest.len()
            .checked_sub(usize::from(pad))
            .map(|end| &rest[..end])
    }

    /// A DATA frame's data, padding removed.
    pub fn data_bytes(&self) -> Option<&[u8]> {
        (self.kind == kind::DATA).then(|| self.unpadded()).flatten()
    }

    /// The header block fragment of HEADERS (padding and priority fields
    /// removed) or CONTINUATION.
    pub fn fragment(&self) -> Option<&[u8]> {
        match self.kind {
            kind::CONTINUATION => Some(&self.payload),
            kind::HEADERS => {
                let rest = self.unpadded()?;
                if self.has(flag::PRIORITY) {
                    rest.get(5..)
                } else {
                    Some(rest)
                }
            }
            _ => None,
        }
    }

    /// The error code of RST_STREAM or GOAWAY.
    pub fn error_code(&self) -> Option<ErrorCode> {
        let at = match self.kind {
            kind::RST_STREAM => 0,
            kind::GOAWAY => 4,
            _ => return None,
        };
        be_u32(self.payload.get(at..at + 4)?).map(ErrorCode)
    }

    /// The last stream id of GOAWAY.
    pub fn last_stream(&self) -> Option<u32> {
        if self.kind != kind::GOAWAY {
            return None;
        }
        be_u32(self.payload.get(..4)?).map(|id| id & MAX_WINDOW)
    }

    /// The increment of WINDOW_UPDATE (reserved bit dropped).
    pub fn increment(&self) -> Option<u32> {
        if self.kind != kind::WINDOW_UPDATE || self.payload.len() != 4 {
            return None;
        }
        be_u32(&self.payload).map(|n| n & MAX_WINDOW)
    }

    /// The parameters of SETTINGS, in order; `None` for another frame or a
    /// payload that is not a multiple of 6 bytes.
    pub fn settings_params(&self) -> Option<Vec<(u16, u32)>> {
        if self.kind != kind::SETTINGS || !self.payload.len().is_multiple_of(6) {
            return None;
        }
        Some(
            self.payload
                .chunks_exact(6)
                .map(|c| {
                    (
                        u16::from_be_bytes([c[0], c[1]]),
                        u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                    )
                })
                .collect(),
        )
    }

    /// The 8 bytes of PING.
    pub fn ping_data(&self) -> Option<[u8; 8]> {
        if self.kind != kind::PING {
            return None;
        }
        self.payload.as_slice().try_into().ok()
    }
}

fn end_flag(end_stream: bool) -> u8 {
    if end_stream {
        flag::END_STREAM
    } else {
        0
    }
}

fn be_u32(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Splits `bytes` into its complete frames; returns them and what is left
/// (the start of a frame that has not all arrived).
pub fn split_frames(mut bytes: &[u8]) -> (Vec<Frame>, &[u8]) {
    let mut frames = Vec::new();
    while let Some((frame, len)) = Frame::parse(bytes) {
        frames.push(frame);
        bytes = &bytes[len..];
    }
    (frames, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_is_length_type_flags_stream() {
        // RFC 9113 section 4.1: 24-bit length, 8-bit type, 8-bit flags, R
        // bit and 31-bit stream id, all big-endian.
        let mut out = Vec::new();
        write_header(&mut out, 0x01_02_03, 0x8, 0x25, 0x0a0b_0c0d);
        assert_eq!(out, [1, 2, 3, 8, 0x25, 0x0a, 0x0b, 0x0c, 0x0d]);
        let head = FrameHeader::parse(&out).unwrap();
        assert_eq!(
            head,
            FrameHeader {
                len: 0x01_02_03,
                kind: 8,
                flags: 0x25,
                stream: 0x0a0b_0c0d
            }
        );
        assert!(head.has(0x20) && !head.has(0x2));
        assert_eq!(FrameHeader::parse(&out[..8]), None);
    }

    #[test]
    fn reserved_bit_is_written_as_given_and_dropped_when_read() {
        let bytes = frame_bytes(kind::WINDOW_UPDATE, 0, 0x8000_0001, &[0x80, 0, 0, 1]);
        assert_eq!(&bytes[5..9], &[0x80, 0, 0, 1]);
        let (frame, len) = Frame::parse(&bytes).unwrap();
        assert_eq!(len, 13);
        assert_eq!(frame.stream, 0x8000_0001 & MAX_WINDOW);
        assert_eq!(frame.increment(), Some(1));
    }

    #[test]
    #[should_panic(expected = "a frame payload of 16777216 bytes")]
    fn lengths_past_24_bits_are_refused() {
        write_header(&mut Vec::new(), 1 << 24, kind::DATA, 0, 1);
    }

    #[test]
    fn preface_and_settings() {
        // RFC 9113 section 3.4 and 6.5.1: 24 octets, then SETTINGS of 6
        // octets per parameter on stream 0.
        let bytes = handshake(&[(setting::INITIAL_WINDOW_SIZE, 0x0001_0000)]);
        assert_eq!(&bytes[..24], b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        assert_eq!(&bytes[24..], &[0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0]);
        let (frame, _) = Frame::parse(&bytes[24..]).unwrap();
        assert_eq!(
            frame.settings_params(),
            Some(vec![(setting::INITIAL_WINDOW_SIZE, 65_536)])
        );
        assert_eq!(
            Frame::settings_ack().to_bytes(),
            [0, 0, 0, 4, 1, 0, 0, 0, 0]
        );
        assert_eq!(
            Frame::new(kind::SETTINGS, 0, 0, [0; 5]).settings_params(),
            None
        );
    }

    #[test]
    fn control_frames() {
        // PING: 8 octets on stream 0 (6.7).
        let ping = Frame::ping(*b"abcdefgh");
        assert_eq!(ping.to_bytes(), b"\0\0\x08\x06\0\0\0\0\0abcdefgh".to_vec());
        assert_eq!(Frame::ping_ack([1; 8]).flags, flag::ACK);
        assert_eq!(ping.ping_data(), Some(*b"abcdefgh"));
        // RST_STREAM: a 32-bit error code (6.4).
        let rst = Frame::rst_stream(3, ErrorCode::CANCEL);
        assert_eq!(rst.to_bytes(), [0, 0, 4, 3, 0, 0, 0, 0, 3, 0, 0, 0, 8]);
        assert_eq!(rst.error_code(), Some(ErrorCode::CANCEL));
        // GOAWAY: last stream id, error code, debug data (6.8).
        let goaway = Frame::goaway(5, ErrorCode::ENHANCE_YOUR_CALM, b"calm");
        assert_eq!(
            goaway.to_bytes(),
            [0, 0, 12, 7, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0x0b, b'c', b'a', b'l', b'm']
        );
        assert_eq!(goaway.error_code(), Some(ErrorCode::ENHANCE_YOUR_CALM));
        assert_eq!(goaway.last_stream(), Some(5));
        // WINDOW_UPDATE: R bit and a 31-bit increment (6.9).
        let update = Frame::window_update(0, 1 << 20);
        assert_eq!(
            update.to_bytes(),
            [0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0x10, 0, 0]
        );
        assert_eq!(update.increment(), Some(1 << 20));
        // PRIORITY: E bit, 31-bit dependency, weight (6.3).
        let priority = Priority {
            dependency: 7,
            exclusive: true,
            weight: 15,
        };
        let frame = Frame::priority(9, priority);
        assert_eq!(
            frame.to_bytes(),
            [0, 0, 5, 2, 0, 0, 0, 0, 9, 0x80, 0, 0, 7, 15]
        );
        assert_eq!(Priority::parse(&frame.payload), Some(priority));
    }

    #[test]
    fn data_with_and_without_padding() {
        let data = Frame::data(1, b"hi", true);
        assert_eq!(data.to_bytes(), [0, 0, 2, 0, 1, 0, 0, 0, 1, b'h', b'i']);
        // 6.1: Pad Length, data, padding of zeros; PADDED is 0x8.
        let padded = Frame::data(1, b"ab", false).padded(2);
        assert_eq!(
            padded.to_bytes(),
            [0, 0, 5, 0, 0x8, 0, 0, 0, 1, 2, b'a', b'b', 0, 0]
        );
        assert_eq!(padded.data_bytes(), Some(&b"ab"[..]));
        let too_much = Frame::new(kind::DATA, flag::PADDED, 1, [5, 1, 2]);
        assert_eq!(too_much.data_bytes(), None);
    }

    #[test]
    fn headers_padding_priority_and_continuation() {
        // 6.2: Pad Length, E + dependency, weight, fragment, padding.
        let frame = Frame::headers(3, &[0x82, 0x86], true)
            .with_priority(Priority {
                dependency: 0,
                exclusive: false,
                weight: 16,
            })
            .padded(3);
        assert_eq!(
            frame.to_bytes(),
            [0, 0, 11, 1, 0x2d, 0, 0, 0, 3, 3, 0, 0, 0, 0, 16, 0x82, 0x86, 0, 0, 0]
        );
        assert_eq!(frame.fragment(), Some(&[0x82, 0x86][..]));
        // The same whichever is added first.
        let other = Frame::headers(3, &[0x82, 0x86], true)
            .padded(3)
            .with_priority(Priority {
                dependency: 0,
                exclusive: false,
                weight: 16,
            });
        assert_eq!(other, frame);
        // A block in two pieces: HEADERS without END_HEADERS, CONTINUATION
        // with it (6.10).
        let first = Frame::headers(1, &[0x82], false).without_flags(flag::END_HEADERS);
        assert_eq!(first.flags, 0);
        let rest = Frame::continuation(1, &[0x86], true);
        assert_eq!(rest.to_bytes(), [0, 0, 1, 9, 4, 0, 0, 0, 1, 0x86]);
        assert_eq!(rest.fragment(), Some(&[0x86][..]));
    }

    #[test]
    fn unknown_types_and_splitting() {
        let mut bytes = Frame::new(0x42, 0xff, 0, *b"whatever").to_bytes();
        Frame::ping([0; 8]).write(&mut bytes);
        let partial = Frame::data(1, b"abc", false).to_bytes();
        bytes.extend_from_slice(&partial[..10]);
        let (frames, rest) = split_frames(&bytes);
        assert_eq!(frames.len(), 2);
        assert_eq!(
            (frames[0].kind, frames[0].flags, &frames[0].payload[..]),
            (0x42, 0xff, &b"whatever"[..])
        );
        assert_eq!(frames[1], Frame::ping([0; 8]));
        assert_eq!(rest, &partial[..10]);
    }

    #[test]
    fn error_codes_print_their_names() {
        assert_eq!(format!("{:?}", ErrorCode::REFUSED_STREAM), "REFUSED_STREAM");
        assert_eq!(format!("{:?}", ErrorCode(0x77)), "ErrorCode(0x77)");
    }
}
