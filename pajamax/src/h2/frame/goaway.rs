//! GOAWAY (RFC 9113 section 6.8).

use crate::h2::error::Error;
use crate::h2::frame::{kind, write_header, FrameHeader, Reason, MAX_WINDOW};

/// Checks a GOAWAY frame from the peer; the server only needs to know
/// that one arrived.
pub(crate) fn check(head: FrameHeader, body: &[u8]) -> Result<(), Error> {
    if head.stream != 0 {
        return Err(Error::GoAway(Reason::PROTOCOL_ERROR, "GOAWAY on a stream"));
    }
    if body.len() < 8 {
        return Err(Error::GoAway(
            Reason::FRAME_SIZE_ERROR,
            "GOAWAY shorter than 8 bytes",
        ));
    }
    Ok(())
}

/// Appends a GOAWAY frame with optional debug data.
pub fn write_goaway(dst: &mut Vec<u8>, last_stream: u32, reason: Reason, debug: &[u8]) {
    write_header(dst, 8 + debug.len(), kind::GOAWAY, 0, 0);
    dst.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    dst.extend_from_slice(&reason.0.to_be_bytes());
    dst.extend_from_slice(debug);
}
