//! HTTP/2 frame layout (RFC 9113 section 4 and 6): the 9-byte frame header,
//! frame types, flags and error codes here; each frame type's payload, read
//! and written, in a file of its own.

use std::fmt;

pub(crate) mod data;
pub(crate) mod goaway;
pub(crate) mod headers;
pub(crate) mod ping;
pub(crate) mod priority;
pub(crate) mod rst_stream;
pub(crate) mod settings;
pub(crate) mod window_update;

pub use goaway::write_goaway;
pub use ping::{write_ping, write_ping_ack};
pub use rst_stream::write_rst_stream;
pub use settings::{write_settings, write_settings_ack};
pub use window_update::write_window_update;

/// Length of the frame header that precedes every payload.
pub const HEADER_LEN: usize = 9;

/// The client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// The default and smallest SETTINGS_MAX_FRAME_SIZE.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// The largest allowed SETTINGS_MAX_FRAME_SIZE.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// Frame type codes.
pub mod kind {
    /// DATA
    pub const DATA: u8 = 0x0;
    /// HEADERS
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING
    pub const PING: u8 = 0x6;
    /// GOAWAY
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flag bits.
pub mod flag {
    /// END_STREAM on DATA and HEADERS.
    pub const END_STREAM: u8 = 0x1;
    /// ACK on SETTINGS and PING.
    pub const ACK: u8 = 0x1;
    /// END_HEADERS on HEADERS and CONTINUATION.
    pub const END_HEADERS: u8 = 0x4;
    /// PADDED on DATA and HEADERS.
    pub const PADDED: u8 = 0x8;
    /// PRIORITY on HEADERS.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameter identifiers.
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// An HTTP/2 error code (RFC 9113 section 7).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    /// NO_ERROR
    pub const NO_ERROR: Reason = Reason(0x0);
    /// PROTOCOL_ERROR
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    /// INTERNAL_ERROR
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    /// FLOW_CONTROL_ERROR
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    /// SETTINGS_TIMEOUT
    pub const SETTINGS_TIMEOUT: Reason = Reason(0x4);
    /// STREAM_CLOSED
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    /// FRAME_SIZE_ERROR
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    /// REFUSED_STREAM
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    /// CANCEL
    pub const CANCEL: Reason = Reason(0x8);
    /// COMPRESSION_ERROR
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    /// CONNECT_ERROR
    pub const CONNECT_ERROR: Reason = Reason(0xa);
    /// ENHANCE_YOUR_CALM
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
    /// INADEQUATE_SECURITY
    pub const INADEQUATE_SECURITY: Reason = Reason(0xc);
    /// HTTP_1_1_REQUIRED
    pub const HTTP_1_1_REQUIRED: Reason = Reason(0xd);

    /// The code's name from RFC 9113, or `UNKNOWN`.
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

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({:#x})", self.name(), self.0)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length.
    pub len: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier, without the reserved bit.
    pub stream: u32,
}

impl FrameHeader {
    /// Parses the first 9 bytes of `buf`, or `None` if fewer are there.
    ///
    /// ```
    /// use pajamax::h2::frame::FrameHeader;
    /// let head = FrameHeader::parse(&[0, 0, 4, 8, 0, 0x80, 0, 0, 1]).unwrap();
    /// assert_eq!((head.len, head.kind, head.flags, head.stream), (4, 8, 0, 1));
    /// ```
    pub fn parse(buf: &[u8]) -> Option<FrameHeader> {
        let head: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
        // Two loads: bytes 0-7 (length, type, flags) and 5-8 (stream).
        let [front @ .., _] = *head;
        let [.., s0, s1, s2, s3] = *head;
        let front = u64::from_be_bytes(front);
        Some(FrameHeader {
            len: (front >> 40) as u32,
            kind: (front >> 32) as u8,
            flags: (front >> 24) as u8,
            stream: u32::from_be_bytes([s0, s1, s2, s3]) & MAX_WINDOW,
        })
    }

    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Appends a frame header.
pub fn write_header(dst: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    dst.extend_from_slice(&header(len, kind, flags, stream));
}

/// The bytes of a frame header.
pub fn header(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEADER_LEN] {
    debug_assert!(len < 1 << 24);
    let len = (len as u32).to_be_bytes();
    let stream = (stream & MAX_WINDOW).to_be_bytes();
    [
        len[1], len[2], len[3], kind, flags, stream[0], stream[1], stream[2], stream[3],
    ]
}

/// Overwrites the 24-bit length of the frame header at `dst[at..]`.
pub fn patch_len(dst: &mut [u8], at: usize, len: usize) {
    let len = (len as u32).to_be_bytes();
    dst[at..at + 3].copy_from_slice(&len[1..]);
}

/// Removes the padding of a PADDED frame's payload (`pad_len` byte first).
///
/// Returns `None` when the padding is longer than the payload allows, which
/// RFC 9113 section 6.1 makes a PROTOCOL_ERROR.
pub fn strip_padding(payload: &[u8]) -> Option<(&[u8], usize)> {
    let (&pad, rest) = payload.split_first()?;
    let pad = pad as usize;
    if pad > rest.len() {
        return None;
    }
    Some((&rest[..rest.len() - pad], 1 + pad))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_ignores_reserved_bit() {
        let mut buf = Vec::new();
        write_header(&mut buf, 0x123456, kind::HEADERS, 0x25, 0x8000_0007);
        assert_eq!(buf, [0x12, 0x34, 0x56, 1, 0x25, 0, 0, 0, 7]);
        let mut with_reserved = buf.clone();
        with_reserved[5] |= 0x80;
        let head = FrameHeader::parse(&with_reserved).unwrap();
        assert_eq!(head.len, 0x123456);
        assert_eq!(head.stream, 7);
        assert!(head.has(flag::END_HEADERS) && head.has(flag::PRIORITY));
        assert!(!head.has(flag::PADDED));
        assert_eq!(FrameHeader::parse(&buf[..8]), None);
    }

    #[test]
    fn control_frames_have_their_layout() {
        let mut buf = Vec::new();
        write_settings(&mut buf, &[(setting::MAX_CONCURRENT_STREAMS, 100)]);
        assert_eq!(buf, [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]);
        buf.clear();
        write_settings_ack(&mut buf);
        assert_eq!(buf, [0, 0, 0, 4, 1, 0, 0, 0, 0]);
        buf.clear();
        write_ping_ack(&mut buf, b"abcdefgh");
        assert_eq!(&buf[..9], [0, 0, 8, 6, 1, 0, 0, 0, 0]);
        assert_eq!(&buf[9..], b"abcdefgh");
        buf.clear();
        write_window_update(&mut buf, 3, 1000);
        assert_eq!(buf, [0, 0, 4, 8, 0, 0, 0, 0, 3, 0, 0, 0x03, 0xe8]);
        buf.clear();
        write_rst_stream(&mut buf, 5, Reason::CANCEL);
        assert_eq!(buf, [0, 0, 4, 3, 0, 0, 0, 0, 5, 0, 0, 0, 8]);
        buf.clear();
        write_goaway(&mut buf, 9, Reason::ENHANCE_YOUR_CALM, b"x");
        assert_eq!(
            buf,
            [0, 0, 9, 7, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0xb, b'x']
        );
    }

    #[test]
    fn padding_is_stripped_or_rejected() {
        assert_eq!(strip_padding(&[2, b'a', b'b', 0, 0]), Some((&b"ab"[..], 3)));
        assert_eq!(strip_padding(&[0]), Some((&b""[..], 1)));
        assert_eq!(strip_padding(&[3, 0, 0]), None);
        assert_eq!(strip_padding(&[]), None);
    }

    #[test]
    fn reasons_have_names() {
        assert_eq!(Reason::FLOW_CONTROL_ERROR.name(), "FLOW_CONTROL_ERROR");
        assert_eq!(format!("{:?}", Reason(0xb)), "ENHANCE_YOUR_CALM(0xb)");
        assert_eq!(Reason(0x99).name(), "UNKNOWN");
    }
}
