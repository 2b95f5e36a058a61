//! The connection's output: the bytes waiting for the socket, and the
//! HPACK encoder that writes response header blocks into them.

use crate::h2::frame::{self, flag, kind};
use crate::h2::hpack::{Encoder, Indexing};

/// A header field to send.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The name, lower case.
    pub name: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Whether the field should enter the HPACK dynamic table.
    pub indexing: Indexing,
}

impl<'a> Field<'a> {
    /// A field that the encoder keeps in its dynamic table: for values
    /// repeated across responses.
    pub fn indexed(name: &'a [u8], value: &'a [u8]) -> Field<'a> {
        Field {
            name,
            value,
            indexing: Indexing::Incremental,
        }
    }

    /// A field sent as a literal, not kept in the dynamic table: for values
    /// that change from response to response.
    pub fn literal(name: &'a [u8], value: &'a [u8]) -> Field<'a> {
        Field {
            name,
            value,
            indexing: Indexing::None,
        }
    }
}

/// Bytes for the socket, written from the front.
pub(crate) struct Output {
    buf: Vec<u8>,
    /// How much of `buf` has been written.
    start: usize,
    encoder: Encoder,
    /// The peer's SETTINGS_MAX_FRAME_SIZE.
    max_frame: usize,
}

impl Output {
    pub(crate) fn new() -> Output {
        Output {
            buf: Vec::with_capacity(64 << 10),
            start: 0,
            encoder: Encoder::new(),
            max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
        }
    }

    /// Bytes waiting to be written.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Where frames are appended.
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// The largest frame payload the peer accepts.
    pub(crate) fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Applies the peer's SETTINGS_MAX_FRAME_SIZE.
    pub(crate) fn set_max_frame(&mut self, size: usize) {
        self.max_frame = size;
    }

    /// Applies the peer's SETTINGS_HEADER_TABLE_SIZE.
    pub(crate) fn set_header_table_size(&mut self, size: usize) {
        self.encoder.set_max_table_size(size);
    }

    /// Reports that the first `n` pending bytes were written.
    pub(crate) fn advance(&mut self, n: usize) {
        self.start += n;
        if self.start >= self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 64 << 10 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Encodes a header block straight into the output behind a HEADERS
    /// frame header; only a block larger than the peer's frame size is
    /// moved out again and split over CONTINUATION frames.
    pub(crate) fn header_block<'f>(
        &mut self,
        stream: u32,
        fields: impl Iterator<Item = Field<'f>>,
        end_stream: bool,
    ) {
        let end_flag = if end_stream { flag::END_STREAM } else { 0 };
        let head = self.buf.len();
        frame::write_header(
            &mut self.buf,
            0,
            kind::HEADERS,
            end_flag | flag::END_HEADERS,
            stream,
        );
        let start = self.buf.len();
        self.encoder.begin_block(&mut self.buf);
        for field in fields {
            self.encoder
                .encode(field.name, field.value, field.indexing, &mut self.buf);
        }
        let len = self.buf.len() - start;
        if len <= self.max_frame {
            frame::patch_len(&mut self.buf, head, len);
            return;
        }
        let block: Vec<u8> = self.buf.split_off(start);
        self.buf.truncate(head);
        let mut chunks = block.chunks(self.max_frame);
        let first = chunks.next().unwrap_or(&[]);
        let rest = chunks.len();
        frame::write_header(&mut self.buf, first.len(), kind::HEADERS, end_flag, stream);
        self.buf.extend_from_slice(first);
        for (i, chunk) in chunks.enumerate() {
            let flags = if i + 1 == rest { flag::END_HEADERS } else { 0 };
            frame::write_header(
                &mut self.buf,
                chunk.len(),
                kind::CONTINUATION,
                flags,
                stream,
            );
            self.buf.extend_from_slice(chunk);
        }
    }
}
