//! Header blocks: assembled from a HEADERS frame and its CONTINUATION
//! frames (RFC 9113 section 4.3), then decoded with HPACK into checked
//! fields.

use crate::h2::error::Error;
use crate::h2::fields::{FieldCheck, FieldInfo, Fields};
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

/// The longest request block remembered.
const REPEAT_MAX: usize = 512;

/// The last request header block that decoded without changing the HPACK
/// table, and what came of it. Clients repeat the same block call after call
/// (the same method, the same fields, all indexed or remembered); while the
/// table stays the same, a repeat decodes to the same fields, so it costs a
/// comparison and a copy.
#[derive(Default)]
pub(crate) struct RepeatedBlock {
    block: Vec<u8>,
    /// The decoder's table changes when it was decoded.
    state: u64,
    fields: Fields,
    check: Option<FieldCheck>,
    id: u64,
    /// Remembered blocks replaced during the current batch of input, whose
    /// fields events of the batch may still name.
    retired: Vec<(u64, Fields)>,
    /// Whether an event of this batch names the current block.
    used: bool,
}

impl RepeatedBlock {
    /// A new batch of input: blocks replaced in the last one are forgotten.
    pub(crate) fn new_batch(&mut self) {
        self.retired.clear();
        self.used = false;
    }

    /// The fields of remembered block `id`, if it is the current one or was
    /// replaced in this batch.
    pub(crate) fn fields_of(&self, id: u64) -> Option<&Fields> {
        if id == self.id && self.check.is_some() {
            return Some(&self.fields);
        }
        self.retired
            .iter()
            .find(|(retired, _)| *retired == id)
            .map(|(_, fields)| fields)
    }

    /// Decodes a request block, or takes what the same block decoded to last
    /// time. A block decoded afresh has its fields appended to `fields`; a
    /// remembered one leaves `fields` alone, its fields are
    /// [`RepeatedBlock::fields_of`] its id. Returns the verdict on the fields
    /// and an id for the remembered block (0 if decoded afresh).
    pub(crate) fn decode(
        &mut self,
        decoder: &mut Decoder,
        block: &[u8],
        max_list: usize,
        fields: &mut Fields,
    ) -> Result<(FieldCheck, u64), Error> {
        let state = decoder.table_changes();
        if let Some(check) = &self.check {
            if self.state == state && self.block.len() == block.len() && self.block == block {
                self.used = true;
                return Ok((check.clone(), self.id));
            }
        }
        let first = fields.len();
        let check = decode(decoder, block, false, max_list, fields)?;
        if decoder.table_changes() == state
            && block.len() <= REPEAT_MAX
            && check.finish().is_ok()
            && check.list_size <= max_list
        {
            if self.used {
                // Events of this batch may name the block being replaced.
                let mut kept = Fields::default();
                std::mem::swap(&mut kept, &mut self.fields);
                self.retired.push((self.id, kept));
            }
            self.used = true;
            self.block.clear();
            self.block.extend_from_slice(block);
            self.state = state;
            self.fields.clear();
            for field in fields.classified(first..fields.len()) {
                let info = FieldInfo {
                    kind: field.kind,
                    flag: field.flag,
                    ..FieldInfo::OTHER
                };
                self.fields
                    .push_classified(field.name, field.value, &info, field.id);
            }
            self.check = Some(check.clone());
            self.id += 1;
            return Ok((check, self.id));
        }
        Ok((check, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::hpack::{Encoder, Indexing};

    fn block(encoder: &mut Encoder, fields: &[(&str, &str, Indexing)]) -> Vec<u8> {
        let mut block = Vec::new();
        encoder.begin_block(&mut block);
        for (name, value, indexing) in fields {
            encoder.encode(name.as_bytes(), value.as_bytes(), *indexing, &mut block);
        }
        block
    }

    fn listed(fields: &Fields) -> Vec<(Vec<u8>, Vec<u8>)> {
        fields
            .iter_all()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect()
    }

    #[test]
    fn a_repeated_block_is_taken_from_memory_while_the_table_stays() {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(4096);
        let mut repeated = RepeatedBlock::default();
        let request = [
            (":method", "POST", Indexing::Incremental),
            (":scheme", "http", Indexing::Incremental),
            (":path", "/a.B/C", Indexing::None),
            ("x-user", "alice", Indexing::Incremental),
            ("content-length", "5", Indexing::None),
        ];
        let mut ids = Vec::new();
        let mut lists = Vec::new();
        for _ in 0..3 {
            let bytes = block(&mut encoder, &request);
            let mut fields = Fields::default();
            let (check, id) = repeated
                .decode(&mut decoder, &bytes, 16 << 10, &mut fields)
                .unwrap();
            assert_eq!(check.finish(), Ok(()));
            assert_eq!(check.content_length, Some(5));
            ids.push(id);
            // A remembered block's fields are kept once, not copied.
            if fields.is_empty() {
                lists.push(listed(repeated.fields_of(id).unwrap()));
            } else {
                lists.push(listed(&fields));
            }
        }
        // The first block adds x-user to the table: not remembered. The
        // second, all indexed or literal, is; the third is the same bytes.
        assert_eq!(ids[0], 0);
        assert_ne!(ids[1], 0);
        assert_eq!(ids[2], ids[1]);
        assert_eq!(lists[0], lists[1]);
        assert_eq!(lists[1], lists[2]);
        assert_eq!(lists[2][3], (b"x-user".to_vec(), b"alice".to_vec()));

        // Another field enters the table: the same bytes now mean other
        // entries, so the block is decoded again.
        let other = block(&mut encoder, &[("x-other", "1", Indexing::Incremental)]);
        let mut fields = Fields::default();
        decode(&mut decoder, &other, false, 16 << 10, &mut fields).unwrap();
        let bytes = block(&mut encoder, &request);
        let mut fields = Fields::default();
        let (_, id) = repeated
            .decode(&mut decoder, &bytes, 16 << 10, &mut fields)
            .unwrap();
        assert_ne!(id, ids[1], "decoded afresh");
        assert_eq!(listed(&fields), lists[0]);
    }

    #[test]
    fn malformed_blocks_are_not_remembered() {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(4096);
        let mut repeated = RepeatedBlock::default();
        let bad = [
            (":method", "POST", Indexing::None),
            ("te", "gzip", Indexing::None),
        ];
        for _ in 0..2 {
            let bytes = block(&mut encoder, &bad);
            let mut fields = Fields::default();
            let (check, id) = repeated
                .decode(&mut decoder, &bytes, 16 << 10, &mut fields)
                .unwrap();
            assert!(check.finish().is_err());
            assert_eq!(id, 0);
        }
    }

    #[test]
    fn a_block_replaced_in_a_batch_keeps_its_fields_until_the_next() {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(4096);
        let mut repeated = RepeatedBlock::default();
        let one = [
            (":method", "POST", Indexing::None),
            (":path", "/a.B/One", Indexing::None),
            (":scheme", "http", Indexing::None),
        ];
        let two = [
            (":method", "POST", Indexing::None),
            (":path", "/a.B/Two", Indexing::None),
            (":scheme", "http", Indexing::None),
        ];
        let mut fields = Fields::default();
        let bytes_one = block(&mut encoder, &one);
        let (_, first) = repeated
            .decode(&mut decoder, &bytes_one, 16 << 10, &mut fields)
            .unwrap();
        repeated.new_batch();
        // In one batch: a repeat of the first block, then another block.
        let mut fields = Fields::default();
        let (_, again) = repeated
            .decode(&mut decoder, &bytes_one, 16 << 10, &mut fields)
            .unwrap();
        assert_eq!(again, first);
        let bytes_two = block(&mut encoder, &two);
        let (_, second) = repeated
            .decode(&mut decoder, &bytes_two, 16 << 10, &mut fields)
            .unwrap();
        assert_ne!(first, 0);
        assert_ne!(second, first);
        let path = |fields: &Fields| listed(fields)[1].1.clone();
        assert_eq!(path(repeated.fields_of(first).unwrap()), b"/a.B/One");
        assert_eq!(path(repeated.fields_of(second).unwrap()), b"/a.B/Two");
        repeated.new_batch();
        assert!(repeated.fields_of(first).is_none(), "gone with its batch");
        assert!(repeated.fields_of(second).is_some());
    }
}
