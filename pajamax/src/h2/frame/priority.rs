//! PRIORITY (RFC 9113 section 6.3): checked, then ignored.

use crate::h2::error::Error;
use crate::h2::frame::{FrameHeader, Reason, MAX_WINDOW};

/// Checks a PRIORITY frame; its content is not used.
pub(crate) fn check(head: FrameHeader, body: &[u8]) -> Result<(), Error> {
    if head.stream == 0 {
        return Err(Error::GoAway(
            Reason::PROTOCOL_ERROR,
            "PRIORITY on stream 0",
        ));
    }
    if body.len() != 5 {
        return Err(Error::Reset(head.stream, Reason::FRAME_SIZE_ERROR));
    }
    let dependency = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & MAX_WINDOW;
    if dependency == head.stream {
        return Err(Error::Reset(head.stream, Reason::PROTOCOL_ERROR));
    }
    Ok(())
}
