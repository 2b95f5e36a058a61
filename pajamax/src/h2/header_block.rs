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

    /// Lets go of the assembly buffer's room past `max` bytes, unless a
    /// block is being assembled.
    pub(crate) fn trim(&mut self, max: usize) {
        if self.partial.is_none() && self.buf.capacity() > max {
            self.buf = Vec::new();
        }
    }

    /// The room of the assembly buffer.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.buf.capacity()
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

/// How many request blocks are remembered: a client that calls a few
/// methods in turn repeats a few blocks.
pub(crate) const REMEMBERED: usize = 4;

/// A request header block that decoded without changing the HPACK table,
/// and what came of it.
struct Remembered {
    block: Vec<u8>,
    /// The decoder's table changes when it was decoded.
    state: u64,
    fields: Fields,
    check: FieldCheck,
    id: u64,
    /// The last batch of input in which an event named it
    /// ([`RepeatedBlock::named`]).
    used_in: u32,
}

impl Remembered {
    /// A place for a block: id 0, matching nothing.
    fn empty() -> Remembered {
        Remembered {
            block: Vec::new(),
            state: u64::MAX,
            fields: Fields::default(),
            check: FieldCheck::new(false),
            id: 0,
            used_in: u32::MAX,
        }
    }
}

/// The last few request header blocks that decoded without changing the
/// HPACK table. Clients repeat the same blocks call after call (the same
/// methods, the same fields, all indexed or remembered); while the table
/// stays the same, a repeat decodes to the same fields, so it costs a
/// comparison.
pub(crate) struct RepeatedBlock {
    /// The most recently used first; places not used yet have id 0. Kept
    /// in place, not in an allocation of its own.
    entries: [Remembered; REMEMBERED],
    last_id: u64,
    /// The current batch of input.
    batch: u32,
    /// Remembered blocks replaced during the current batch of input, whose
    /// fields events of the batch may still name.
    retired: Vec<(u64, Fields)>,
}

impl Default for RepeatedBlock {
    fn default() -> RepeatedBlock {
        RepeatedBlock {
            entries: std::array::from_fn(|_| Remembered::empty()),
            last_id: 0,
            batch: 0,
            retired: Vec::new(),
        }
    }
}

impl RepeatedBlock {
    /// A new batch of input: blocks replaced in the last one are forgotten.
    pub(crate) fn new_batch(&mut self) {
        self.retired.clear();
        self.batch = self.batch.wrapping_add(1);
    }

    /// The fields of remembered block `id`, if it is remembered or was
    /// replaced in this batch after an event of the batch named it.
    pub(crate) fn fields_of(&self, id: u64) -> Option<&Fields> {
        if id == 0 {
            return None;
        }
        if let Some(entry) = self.entries.iter().find(|entry| entry.id == id) {
            return Some(&entry.fields);
        }
        self.retired
            .iter()
            .find(|(retired, _)| *retired == id)
            .map(|(_, fields)| fields)
    }

    /// An event of this batch names remembered block `id`, the block just
    /// decoded (which [`RepeatedBlock::decode`] leaves first): its fields
    /// are kept until the next batch even if another block takes its
    /// place. Blocks that open nothing are not kept.
    #[inline]
    pub(crate) fn named(&mut self, id: u64) {
        let entry = &mut self.entries[0];
        debug_assert_eq!(entry.id, id, "the block just decoded comes first");
        entry.used_in = self.batch;
    }

    /// No event of this batch names remembered block `id` any more (its
    /// stream was reset in the batch that opened it): its fields need not
    /// be kept past its place among the remembered ones.
    pub(crate) fn unnamed(&mut self, id: u64) {
        if let Some(entry) = self.entries.iter_mut().find(|entry| entry.id == id) {
            entry.used_in = u32::MAX;
        }
        self.retired.retain(|(retired, _)| *retired != id);
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
        let same = |entry: &Remembered| {
            entry.state == state && entry.block.len() == block.len() && entry.block == block
        };
        // The most recently used first: a client repeating one block finds
        // it there.
        if let Some(at) = self.entries.iter().position(same) {
            if at > 0 {
                self.entries[..=at].rotate_right(1);
            }
            let entry = &self.entries[0];
            return Ok((entry.check.clone(), entry.id));
        }
        let first = fields.len();
        let check = decode(decoder, block, false, max_list, fields)?;
        if decoder.table_changes() != state
            || block.len() > REPEAT_MAX
            || check.finish().is_err()
            || check.list_size > max_list
        {
            return Ok((check, 0));
        }
        self.last_id += 1;
        let id = self.last_id;
        // Replaced: a place not used yet or an entry the table has moved
        // past, else the least recently used.
        let at = self
            .entries
            .iter()
            .position(|entry| entry.state != state)
            .unwrap_or(REMEMBERED - 1);
        let entry = &mut self.entries[at];
        if entry.used_in == self.batch {
            // Events of this batch may name the block being replaced.
            let kept = std::mem::take(&mut entry.fields);
            self.retired.push((entry.id, kept));
        }
        // No event names it yet.
        entry.used_in = self.batch.wrapping_sub(1);
        entry.block.clear();
        entry.block.extend_from_slice(block);
        entry.state = state;
        entry.fields.clear();
        for field in fields.classified(first..fields.len()) {
            let info = FieldInfo {
                kind: field.kind,
                flag: field.flag,
                ..FieldInfo::OTHER
            };
            entry
                .fields
                .push_classified(field.name, field.value, &info, field.id);
        }
        entry.check = check.clone();
        entry.id = id;
        if at > 0 {
            self.entries[..=at].rotate_right(1);
        }
        Ok((check, id))
    }
}

#[cfg(test)]
impl RepeatedBlock {
    /// The bytes of the fields kept for blocks replaced in this batch.
    pub(crate) fn retired_bytes(&self) -> usize {
        self.retired
            .iter()
            .map(|(_, fields)| fields.list_size())
            .sum()
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

    fn call_block(encoder: &mut Encoder, path: &str) -> Vec<u8> {
        block(
            encoder,
            &[
                (":method", "POST", Indexing::None),
                (":path", path, Indexing::None),
                (":scheme", "http", Indexing::None),
            ],
        )
    }

    #[test]
    fn blocks_that_take_turns_are_all_remembered() {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(4096);
        let mut repeated = RepeatedBlock::default();
        let paths = ["/a.B/One", "/a.B/Two", "/a.B/Three"];
        let mut first_ids = Vec::new();
        for round in 0..4 {
            repeated.new_batch();
            for (i, path) in paths.iter().enumerate() {
                let bytes = call_block(&mut encoder, path);
                let mut fields = Fields::default();
                let (check, id) = repeated
                    .decode(&mut decoder, &bytes, 16 << 10, &mut fields)
                    .unwrap();
                assert_eq!(check.finish(), Ok(()));
                assert_ne!(id, 0);
                if round == 0 {
                    first_ids.push(id);
                } else {
                    assert_eq!(id, first_ids[i], "{path} taken from memory");
                    assert!(fields.is_empty(), "not decoded again");
                }
                let kept = listed(repeated.fields_of(id).unwrap());
                assert_eq!(kept[1].1, path.as_bytes());
            }
        }
    }

    #[test]
    fn a_block_replaced_in_a_batch_keeps_its_fields_until_the_next() {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(4096);
        let mut repeated = RepeatedBlock::default();
        // One more block than are remembered, in one batch: the first is
        // replaced while an event of the batch may still name it.
        let paths: Vec<String> = (0..=REMEMBERED).map(|i| format!("/a.B/M{i}")).collect();
        let mut ids = Vec::new();
        for path in &paths {
            let bytes = call_block(&mut encoder, path);
            let mut fields = Fields::default();
            let (_, id) = repeated
                .decode(&mut decoder, &bytes, 16 << 10, &mut fields)
                .unwrap();
            assert_ne!(id, 0);
            // The request event names it.
            repeated.named(id);
            ids.push(id);
        }
        let path = |fields: &Fields| listed(fields)[1].1.clone();
        for (id, expected) in ids.iter().zip(&paths) {
            assert_eq!(path(repeated.fields_of(*id).unwrap()), expected.as_bytes());
        }
        repeated.new_batch();
        assert!(repeated.fields_of(ids[0]).is_none(), "gone with its batch");
        for id in &ids[1..] {
            assert!(repeated.fields_of(*id).is_some());
        }
    }

    #[test]
    fn a_replaced_block_no_event_named_is_not_kept() {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(4096);
        let mut repeated = RepeatedBlock::default();
        // Blocks whose streams open nothing (refused, reset): nothing of the
        // batch names them, so nothing of them stays once they are replaced.
        let mut ids = Vec::new();
        for i in 0..=REMEMBERED {
            let bytes = call_block(&mut encoder, &format!("/a.B/M{i}"));
            let mut fields = Fields::default();
            let (_, id) = repeated
                .decode(&mut decoder, &bytes, 16 << 10, &mut fields)
                .unwrap();
            assert_ne!(id, 0);
            ids.push(id);
        }
        assert!(repeated.fields_of(ids[0]).is_none(), "replaced, not kept");
        assert_eq!(repeated.retired_bytes(), 0);
        for id in &ids[1..] {
            assert!(repeated.fields_of(*id).is_some());
        }
    }
}
