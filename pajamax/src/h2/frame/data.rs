//! DATA (RFC 9113 section 6.1).

use crate::h2::error::Error;
use crate::h2::frame::{flag, strip_padding, FrameHeader, Reason};
use std::ops::Range;

/// Where the body bytes of a DATA frame are in its payload, padding left
/// out.
pub(crate) fn unpad(head: FrameHeader, payload: &[u8]) -> Result<Range<usize>, Error> {
    if !head.has(flag::PADDED) {
        return Ok(0..payload.len());
    }
    let (body, _) = strip_padding(payload).ok_or(Error::GoAway(
        Reason::PROTOCOL_ERROR,
        "DATA padding longer than the frame",
    ))?;
    Ok(1..1 + body.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::frame::kind;

    fn head(flags: u8) -> FrameHeader {
        FrameHeader {
            len: 0,
            kind: kind::DATA,
            flags,
            stream: 1,
        }
    }

    #[test]
    fn padding_is_left_out() {
        assert_eq!(unpad(head(0), b"abc"), Ok(0..3));
        assert_eq!(unpad(head(flag::PADDED), &[1, b'a', 0]), Ok(1..2));
        assert_eq!(
            unpad(head(flag::PADDED), &[5, b'a']),
            Err(Error::GoAway(
                Reason::PROTOCOL_ERROR,
                "DATA padding longer than the frame"
            ))
        );
    }
}
