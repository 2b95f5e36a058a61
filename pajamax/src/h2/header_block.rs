//! Header blocks: assembled from a HEADERS frame and its CONTINUATION
//! frames (RFC 9113 section 4.3), then decoded with HPACK into checked
//! fields.

use crate::h2::error::Error;
use crate::h2::fields::{FieldCheck, Fields};
use crate::h2::frame::headers::Headers;
use crate::h2::frame::{flag, FrameHeader, Reason};
use crate::h2::hpack::Decoder;

/// A header block that CONTINUATION frames are still adding to.
pub(crate) struct PartialBlock {
    pub stream: u32,
    pub end_stream: bool,
    pub self_dependent: bool,
}

/// Assembles the header block of at most one stream at a time, within a
/// size limit.
pub(crate) struct BlockAssembler {
    partial: Option<PartialBlock>,
    buf: Vec<u8>,
    max: usize,
}

impl BlockAssembler {
    /// An assembler accepting blocks of up to `max` encoded bytes.
    pub(crate) fn new(max: usize) -> BlockAssembler {
        BlockAssembler {
            partial: None,
            buf: Vec::new(),
            max,
        }
    }

    /// Whether the next frame must be a CONTINUATION.
    pub(crate) fn expects_continuation(&self) -> bool {
        self.partial.is_some()
    }

    /// Starts a block from a HEADERS frame without END_HEADERS.
    pub(crate) fn begin(&mut self, stream: u32, headers: &Headers<'_>) -> Result<(), Error> {
        if headers.block.len() > self.max {
            return Err(Error::GoAway(
                Reason::ENHANCE_YOUR_CALM,
                "header block too large",
            ));
        }
        self.buf.clear();
        self.buf.extend_from_slice(headers.block);
        self.partial = Some(PartialBlock {
            stream,
            end_stream: headers.end_stream,
            self_dependent: headers.self_dependent,
        });
        Ok(())
    }

    /// Adds a CONTINUATION frame. Once it ends the block, returns the
    /// block's facts and its bytes; the caller hands the bytes back with
    /// [`BlockAssembler::recycle`].
    pub(crate) fn continuation(
        &mut self,
        head: FrameHeader,
        body: &[u8],
    ) -> Result<Option<(PartialBlock, Vec<u8>)>, Error> {
        match &self.partial {
            Some(partial) if partial.stream == head.stream => {}
            _ => {
                return Err(Error::GoAway(
                    Reason::PROTOCOL_ERROR,
                    "unexpected CONTINUATION",
                ))
            }
        }
        if self.buf.len() + body.len() > self.max {
            return Err(Error::GoAway(
                Reason::ENHANCE_YOUR_CALM,
                "header block too large",
            ));
        }
        self.buf.extend_from_slice(body);
        if !head.has(flag::END_HEADERS) {
            return Ok(None);
        }
        let partial = self.partial.take().expect("checked above");
        Ok(Some((partial, std::mem::take(&mut self.buf))))
    }

    /// Takes back the buffer of a finished block, to keep its room.
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        self.buf = buf;
    }
}

/// Decodes a complete header block, appending its fields to `fields`
/// unless it is a trailer block or the list is over `max_list` bytes (its
/// fields are then dropped). Returns the verdict on the fields.
pub(crate) fn decode(
    decoder: &mut Decoder,
    block: &[u8],
    is_trailers: bool,
    max_list: usize,
    fields: &mut Fields,
) -> Result<FieldCheck, Error> {
    let first_field = fields.len();
    let mut check = FieldCheck::new(is_trailers);
    decoder
        .decode_classified(block, |name, value, info, id| {
            if check.field_info(info, name.len() + value.len())
                && check.list_size <= max_list
                && !is_trailers
            {
                fields.push_classified(name, value, info, id);
            }
        })
        .map_err(|_| Error::GoAway(Reason::COMPRESSION_ERROR, "invalid HPACK header block"))?;
    if check.list_size > max_list {
        fields.truncate(first_field);
    }
    Ok(check)
}
