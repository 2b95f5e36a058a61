//! PING (RFC 9113 section 6.7).

use crate::h2::error::Error;
use crate::h2::frame::{flag, kind, write_header, FrameHeader, Reason};

/// A PING frame: its opaque payload, and whether it is an ACK.
pub(crate) struct Ping {
    pub ack: bool,
    pub payload: [u8; 8],
}

impl Ping {
    /// Reads a PING frame.
    pub(crate) fn load(head: FrameHeader, body: &[u8]) -> Result<Ping, Error> {
        if head.stream != 0 {
            return Err(Error::GoAway(Reason::PROTOCOL_ERROR, "PING on a stream"));
        }
        let payload: [u8; 8] = body
            .try_into()
            .map_err(|_| Error::GoAway(Reason::FRAME_SIZE_ERROR, "PING payload is not 8 bytes"))?;
        Ok(Ping {
            ack: head.has(flag::ACK),
            payload,
        })
    }
}

/// Appends a PING frame (not an ACK) with `payload`.
pub fn write_ping(dst: &mut Vec<u8>, payload: &[u8; 8]) {
    write_header(dst, 8, kind::PING, 0, 0);
    dst.extend_from_slice(payload);
}

/// Appends a PING frame with the ACK flag echoing `payload`.
pub fn write_ping_ack(dst: &mut Vec<u8>, payload: &[u8; 8]) {
    write_header(dst, 8, kind::PING, flag::ACK, 0);
    dst.extend_from_slice(payload);
}
