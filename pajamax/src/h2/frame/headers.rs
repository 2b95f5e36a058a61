//! HEADERS and CONTINUATION (RFC 9113 sections 6.2 and 6.10).

use crate::h2::error::Error;
use crate::h2::frame::{flag, strip_padding, FrameHeader, Reason, MAX_WINDOW};

/// A HEADERS frame's payload, padding and priority taken off.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Headers<'a> {
    /// The header block fragment.
    pub block: &'a [u8],
    /// The stream ends with this header block.
    pub end_stream: bool,
    /// The block is complete in this frame.
    pub end_headers: bool,
    /// The priority names the stream itself as its dependency: a stream
    /// error (RFC 9113 section 5.3.1).
    pub self_dependent: bool,
}

impl<'a> Headers<'a> {
    /// Reads a HEADERS frame sent by a client.
    pub(crate) fn load(head: FrameHeader, body: &'a [u8]) -> Result<Headers<'a>, Error> {
        if head.stream == 0 || head.stream.is_multiple_of(2) {
            return Err(Error::GoAway(
                Reason::PROTOCOL_ERROR,
                "HEADERS on stream 0 or an even stream",
            ));
        }
        let mut block = body;
        if head.has(flag::PADDED) {
            block = strip_padding(block)
                .ok_or(Error::GoAway(
                    Reason::PROTOCOL_ERROR,
                    "HEADERS padding longer than the frame",
                ))?
                .0;
        }
        let mut self_dependent = false;
        if head.has(flag::PRIORITY) {
            if block.len() < 5 {
                return Err(Error::GoAway(
                    Reason::FRAME_SIZE_ERROR,
                    "HEADERS too short for its priority",
                ));
            }
            let dependency =
                u32::from_be_bytes([block[0], block[1], block[2], block[3]]) & MAX_WINDOW;
            self_dependent = dependency == head.stream;
            block = &block[5..];
        }
        Ok(Headers {
            block,
            end_stream: head.has(flag::END_STREAM),
            end_headers: head.has(flag::END_HEADERS),
            self_dependent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::frame::kind;

    fn head(flags: u8, stream: u32) -> FrameHeader {
        FrameHeader {
            len: 0,
            kind: kind::HEADERS,
            flags,
            stream,
        }
    }

    #[test]
    fn padding_and_priority_are_taken_off() {
        let body = [1, 0, 0, 0, 3, 16, b'x', 0];
        let headers = Headers::load(head(flag::PADDED | flag::PRIORITY, 3), &body).unwrap();
        assert_eq!(headers.block, b"x");
        assert!(headers.self_dependent);
        assert!(!headers.end_headers);
    }

    #[test]
    fn bad_frames_are_connection_errors() {
        for (flags, stream, body) in [
            (0, 0, &b""[..]),
            (0, 2, b""),
            (flag::PADDED, 1, &[4, 0]),
            (flag::PRIORITY, 1, &[0, 0, 0]),
        ] {
            assert!(matches!(
                Headers::load(head(flags, stream), body),
                Err(Error::GoAway(..))
            ));
        }
    }
}
