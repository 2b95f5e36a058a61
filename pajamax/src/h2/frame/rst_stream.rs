//! RST_STREAM (RFC 9113 section 6.4).

use crate::h2::error::Error;
use crate::h2::frame::{kind, write_header, FrameHeader, Reason};

/// Reads a RST_STREAM frame: its error code.
pub(crate) fn load(head: FrameHeader, body: &[u8]) -> Result<Reason, Error> {
    if head.stream == 0 {
        return Err(Error::GoAway(
            Reason::PROTOCOL_ERROR,
            "RST_STREAM on stream 0",
        ));
    }
    let code: [u8; 4] = body.try_into().map_err(|_| {
        Error::GoAway(
            Reason::FRAME_SIZE_ERROR,
            "RST_STREAM payload is not 4 bytes",
        )
    })?;
    Ok(Reason(u32::from_be_bytes(code)))
}

/// Appends a RST_STREAM frame.
pub fn write_rst_stream(dst: &mut Vec<u8>, stream: u32, reason: Reason) {
    write_header(dst, 4, kind::RST_STREAM, 0, stream);
    dst.extend_from_slice(&reason.0.to_be_bytes());
}
