//! WINDOW_UPDATE (RFC 9113 section 6.9).

use crate::h2::error::Error;
use crate::h2::frame::{kind, write_header, Reason, MAX_WINDOW};

/// Reads a WINDOW_UPDATE frame: its increment, reserved bit cleared. An
/// increment of 0 is for the caller to judge: a connection error on stream
/// 0, a stream error on a stream.
pub(crate) fn load(body: &[u8]) -> Result<u32, Error> {
    let bytes: [u8; 4] = body.try_into().map_err(|_| {
        Error::GoAway(
            Reason::FRAME_SIZE_ERROR,
            "WINDOW_UPDATE payload is not 4 bytes",
        )
    })?;
    Ok(u32::from_be_bytes(bytes) & MAX_WINDOW)
}

/// Appends a WINDOW_UPDATE frame.
pub fn write_window_update(dst: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(dst, 4, kind::WINDOW_UPDATE, 0, stream);
    dst.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}
