//! SETTINGS (RFC 9113 section 6.5).

use crate::h2::error::Error;
use crate::h2::frame::{flag, kind, write_header, FrameHeader, Reason};

/// A SETTINGS frame from the peer.
pub(crate) enum Settings<'a> {
    /// The peer acknowledged the server's settings.
    Ack,
    /// New parameters, to apply in order and acknowledge.
    Params(&'a [u8]),
}

impl<'a> Settings<'a> {
    /// Reads a SETTINGS frame.
    pub(crate) fn load(head: FrameHeader, body: &'a [u8]) -> Result<Settings<'a>, Error> {
        if head.stream != 0 {
            return Err(Error::GoAway(
                Reason::PROTOCOL_ERROR,
                "SETTINGS on a stream",
            ));
        }
        if head.has(flag::ACK) {
            if !body.is_empty() {
                return Err(Error::GoAway(
                    Reason::FRAME_SIZE_ERROR,
                    "SETTINGS ACK with a payload",
                ));
            }
            return Ok(Settings::Ack);
        }
        if !body.len().is_multiple_of(6) {
            return Err(Error::GoAway(
                Reason::FRAME_SIZE_ERROR,
                "SETTINGS length not a multiple of 6",
            ));
        }
        Ok(Settings::Params(body))
    }

    /// The parameters as `(identifier, value)`, in order; none for an ACK.
    pub(crate) fn params(&self) -> impl Iterator<Item = (u16, u32)> + 'a {
        let body: &'a [u8] = match self {
            Settings::Ack => &[],
            Settings::Params(body) => body,
        };
        body.chunks_exact(6).map(|param| {
            (
                u16::from_be_bytes([param[0], param[1]]),
                u32::from_be_bytes([param[2], param[3], param[4], param[5]]),
            )
        })
    }
}

/// Appends a SETTINGS frame with the given parameters.
pub fn write_settings(dst: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_header(dst, params.len() * 6, kind::SETTINGS, 0, 0);
    for (id, value) in params {
        dst.extend_from_slice(&id.to_be_bytes());
        dst.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends a SETTINGS frame with the ACK flag.
pub fn write_settings_ack(dst: &mut Vec<u8>) {
    write_header(dst, 0, kind::SETTINGS, flag::ACK, 0);
}
