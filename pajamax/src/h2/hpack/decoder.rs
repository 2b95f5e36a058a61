//! Header block decoding (RFC 7541 sections 3, 4 and 6).

use std::fmt;

use super::table::{bytes_eq, DynamicTable, NewName, STATIC_INFO, STATIC_LEN, STATIC_TABLE};
use super::{huffman, integer};
use crate::h2::fields::{classify, FieldInfo};

/// An HPACK decoding error. Any of them is a connection error of type
/// COMPRESSION_ERROR: the decoder's state can no longer be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A field or name referred to index 0 or to an index past the end of
    /// the static and dynamic tables.
    InvalidIndex(usize),
    /// An integer was larger than 2^32 - 1 or had more continuation bytes
    /// than such a value needs.
    IntegerOverflow,
    /// The block ended inside an integer or a string length.
    Truncated,
    /// A string literal's length ran past the end of the block.
    StringTooLong,
    /// A Huffman string contained the EOS symbol.
    HuffmanEos,
    /// A Huffman string ended with padding longer than 7 bits or padding that
    /// was not all ones (which includes a code cut short).
    HuffmanPadding,
    /// A dynamic table size update asked for more than the advertised
    /// SETTINGS_HEADER_TABLE_SIZE.
    TableSizeOverLimit {
        /// The size asked for.
        requested: usize,
        /// The advertised limit.
        limit: usize,
    },
    /// A dynamic table size update came after a field representation; it
    /// may only start a block.
    TableSizeUpdateNotAtStart,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::InvalidIndex(i) => write!(f, "hpack: invalid table index {i}"),
            DecodeError::IntegerOverflow => f.write_str("hpack: integer overflow"),
            DecodeError::Truncated => f.write_str("hpack: header block truncated"),
            DecodeError::StringTooLong => {
                f.write_str("hpack: string length runs past the end of the header block")
            }
            DecodeError::HuffmanEos => f.write_str("hpack: EOS symbol in Huffman string"),
            DecodeError::HuffmanPadding => f.write_str("hpack: invalid Huffman padding"),
            DecodeError::TableSizeOverLimit { requested, limit } => write!(
                f,
                "hpack: dynamic table size update to {requested} exceeds the limit {limit}"
            ),
            DecodeError::TableSizeUpdateNotAtStart => {
                f.write_str("hpack: dynamic table size update after a header field")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// A scratch buffer that grew past this is dropped after the block, so one
/// large block does not pin its memory for the connection's lifetime.
const SCRATCH_KEEP: usize = 64 * 1024;

/// Scratch bytes reserved by the first block: room for the Huffman strings
/// of a typical field without regrowing.
const INITIAL_SCRATCH: usize = 256;

/// Ids of static entries: `STATIC_ID | index`. Dynamic entries count up
/// from 1, remembered literals down from `MEMO_ID`.
const STATIC_ID: u64 = 1 << 63;
const MEMO_ID: u64 = 1 << 62;

/// Literals without indexing remembered per connection.
const MEMOS: usize = 4;
/// The longest representation remembered.
const MEMO_MAX: usize = 256;

/// A literal field sent without indexing, remembered with its decoded name
/// and value: a client that repeats it (as nghttp2 does with `:path` and
/// `content-length`) costs a comparison, not a Huffman decoding.
#[derive(Debug)]
struct Memo {
    /// The field's representation in the block.
    repr: Vec<u8>,
    name: Vec<u8>,
    value: Vec<u8>,
    info: FieldInfo,
    id: u64,
}

/// The decoding context of one connection (the peer's requests).
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The SETTINGS_HEADER_TABLE_SIZE we advertise: the largest size a
    /// dynamic table size update may set.
    limit: usize,
    /// Huffman-decoded name and value of the field being decoded.
    scratch: Vec<u8>,
    memos: Vec<Memo>,
    /// The memo to replace next.
    next_memo: usize,
    memo_serial: u64,
}

/// A string literal of the current field: a range of the block or of the
/// scratch buffer.
#[derive(Clone, Copy)]
enum Lit {
    Block(usize, usize),
    Scratch(usize, usize),
}

impl Lit {
    #[inline]
    fn get<'a>(self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Lit::Block(a, b) => &block[a..b],
            Lit::Scratch(a, b) => &scratch[a..b],
        }
    }
}

/// The name of the current literal field.
#[derive(Clone, Copy)]
enum Name {
    Lit(Lit),
    Static(&'static [u8]),
    /// Position in the dynamic table, 0 = newest.
    Dynamic(usize),
}

impl Decoder {
    /// Creates a decoder whose dynamic table may grow to `max_table_size`
    /// bytes: the SETTINGS_HEADER_TABLE_SIZE we advertise (default 4096). The
    /// table starts at that size; a size update from the peer may lower it.
    pub fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: DynamicTable::new(max_table_size),
            limit: max_table_size,
            scratch: Vec::new(),
            memos: Vec::new(),
            next_memo: 0,
            memo_serial: 0,
        }
    }

    /// A count that changes whenever the dynamic table changes: a block
    /// decoded at one count decodes the same while it stays.
    pub fn table_changes(&self) -> u64 {
        self.table.changes()
    }

    /// Decodes one complete header block (HEADERS + CONTINUATION payloads
    /// already joined), calling `emit(name, value)` for every field in
    /// order.
    ///
    /// The slices borrow from the block, the dynamic table or an internal
    /// reusable scratch buffer and live only for the call. Decoding does not
    /// allocate per field once the scratch buffer and the table have grown
    /// to their working size. The whole block is decoded even if the caller
    /// ignores fields, so the dynamic table stays in sync. After an error
    /// the fields already emitted stand, and the context must be dropped
    /// (the connection answers COMPRESSION_ERROR).
    pub fn decode<F: FnMut(&[u8], &[u8])>(
        &mut self,
        block: &[u8],
        mut emit: F,
    ) -> Result<(), DecodeError> {
        self.decode_classified(block, |name, value, _, _| emit(name, value))
    }

    /// As [`Decoder::decode`], with each field's [`FieldInfo`] (what a
    /// request field is, classified once per table entry or remembered
    /// literal) and an id that names a value taken from a table entry or a
    /// remembered literal for as long as the connection lives (0 for a value
    /// decoded afresh).
    pub fn decode_classified<F: FnMut(&[u8], &[u8], &FieldInfo, u64)>(
        &mut self,
        block: &[u8],
        mut emit: F,
    ) -> Result<(), DecodeError> {
        if self.scratch.capacity() == 0 {
            self.scratch.reserve(INITIAL_SCRATCH);
        }
        let result = self.decode_block(block, &mut emit);
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        result
    }

    /// Lets go of the scratch room past `max` bytes (up to 64 KiB stay
    /// after a decoding); the next decoding takes a small one.
    pub(crate) fn trim_scratch(&mut self, max: usize) {
        if self.scratch.capacity() > max {
            self.scratch = Vec::new();
        }
    }

    /// The room of the scratch buffer Huffman strings are decoded into.
    #[cfg(test)]
    pub(crate) fn scratch_room(&self) -> usize {
        self.scratch.capacity()
    }

    fn decode_block<F: FnMut(&[u8], &[u8], &FieldInfo, u64)>(
        &mut self,
        block: &[u8],
        emit: &mut F,
    ) -> Result<(), DecodeError> {
        let mut pos = 0;
        let mut at_start = true;
        while let Some(&first) = block.get(pos) {
            if first & 0x80 != 0 {
                // 6.1 Indexed Header Field.
                let index = integer::decode(block, &mut pos, 7)?;
                if index.wrapping_sub(1) < STATIC_LEN {
                    let (name, value) = STATIC_TABLE[index - 1];
                    emit(
                        name,
                        value,
                        &STATIC_INFO[index - 1],
                        STATIC_ID | index as u64,
                    );
                } else {
                    if index == 0 {
                        return Err(DecodeError::InvalidIndex(0));
                    }
                    let (name, value, info, id) = self
                        .table
                        .get_entry(index - STATIC_LEN - 1)
                        .ok_or(DecodeError::InvalidIndex(index))?;
                    emit(name, value, info, id);
                }
            } else if first & 0x40 != 0 {
                // 6.2.1 Literal with Incremental Indexing.
                self.literal(block, &mut pos, 6, true, emit)?;
            } else if first & 0x20 != 0 {
                // 6.3 Dynamic Table Size Update.
                if !at_start {
                    return Err(DecodeError::TableSizeUpdateNotAtStart);
                }
                let size = integer::decode(block, &mut pos, 5)?;
                if size > self.limit {
                    return Err(DecodeError::TableSizeOverLimit {
                        requested: size,
                        limit: self.limit,
                    });
                }
                self.table.set_max_size(size);
                continue;
            } else if first & 0x10 == 0 && self.remembered(block, &mut pos, emit)? {
                // 6.2.2 without Indexing, as sent before.
            } else {
                // 6.2.2 without Indexing (0000) and 6.2.3 Never Indexed (0001).
                self.literal(block, &mut pos, 4, false, emit)?;
            }
            at_start = false;
        }
        Ok(())
    }

    /// A literal without indexing at `*pos` whose name is not a dynamic
    /// entry: if it was seen before, emits it as remembered and moves past
    /// it (`true`); otherwise decodes it, remembers it when it is small
    /// enough, and moves past it too. Returns `false`, leaving `*pos`, for
    /// a name from the dynamic table (whose meaning changes with the
    /// table).
    fn remembered<F: FnMut(&[u8], &[u8], &FieldInfo, u64)>(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        emit: &mut F,
    ) -> Result<bool, DecodeError> {
        let start = *pos;
        let mut at = start;
        let name_index = integer::decode(block, &mut at, 4)?;
        if name_index > STATIC_LEN {
            return Ok(false);
        }
        if name_index == 0 {
            skip_string(block, &mut at)?;
        }
        skip_string(block, &mut at)?;
        let repr = &block[start..at];
        if let Some(memo) = self
            .memos
            .iter()
            .find(|memo| memo.repr.len() == repr.len() && bytes_eq(&memo.repr, repr))
        {
            *pos = at;
            emit(&memo.name, &memo.value, &memo.info, memo.id);
            return Ok(true);
        }
        if repr.len() > MEMO_MAX {
            return Ok(false);
        }
        // Decode it as any literal into the memo it replaces (its buffers
        // reused: a client whose literal changes every call, as
        // `grpc-timeout` does, allocates nothing), then keep it.
        self.memo_serial += 1;
        let id = MEMO_ID - self.memo_serial;
        let slot = if self.memos.len() < MEMOS {
            self.memos.push(Memo {
                repr: Vec::new(),
                name: Vec::new(),
                value: Vec::new(),
                info: FieldInfo::OTHER,
                id,
            });
            self.memos.len() - 1
        } else {
            let slot = self.next_memo;
            self.next_memo = (slot + 1) % MEMOS;
            slot
        };
        let (memo, scratch) = (&mut self.memos[slot], &mut self.scratch);
        // Matches nothing until it is whole.
        memo.repr.clear();
        memo.name.clear();
        memo.value.clear();
        scratch.clear();
        let mut p = start;
        integer::decode(block, &mut p, 4)?;
        if name_index == 0 {
            let name = read_string(block, &mut p, scratch)?;
            memo.name.extend_from_slice(name.get(block, scratch));
        } else {
            memo.name.extend_from_slice(STATIC_TABLE[name_index - 1].0);
        }
        let value = read_string(block, &mut p, scratch)?;
        memo.value.extend_from_slice(value.get(block, scratch));
        debug_assert_eq!(p, at);
        *pos = at;
        memo.info = classify(&memo.name, &memo.value);
        memo.id = id;
        memo.repr.extend_from_slice(repr);
        emit(&memo.name, &memo.value, &memo.info, memo.id);
        Ok(true)
    }

    fn literal<F: FnMut(&[u8], &[u8], &FieldInfo, u64)>(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        prefix: u8,
        add_to_table: bool,
        emit: &mut F,
    ) -> Result<(), DecodeError> {
        self.scratch.clear();
        let name_index = integer::decode(block, pos, prefix)?;
        let name = if name_index == 0 {
            Name::Lit(read_string(block, pos, &mut self.scratch)?)
        } else if name_index <= STATIC_LEN {
            Name::Static(STATIC_TABLE[name_index - 1].0)
        } else {
            let p = name_index - STATIC_LEN - 1;
            if p >= self.table.len() {
                return Err(DecodeError::InvalidIndex(name_index));
            }
            Name::Dynamic(p)
        };
        let value = read_string(block, pos, &mut self.scratch)?;

        let value_bytes = value.get(block, &self.scratch);
        let name_bytes = match name {
            Name::Lit(l) => l.get(block, &self.scratch),
            Name::Static(s) => s,
            Name::Dynamic(p) => match self.table.get(p) {
                Some((n, _)) => n,
                None => return Err(DecodeError::InvalidIndex(name_index)),
            },
        };
        let info = classify(name_bytes, value_bytes);
        let id = if add_to_table {
            self.table.next_id()
        } else {
            0
        };
        emit(name_bytes, value_bytes, &info, id);

        if add_to_table {
            let new_name = match name {
                Name::Lit(l) => NewName::Bytes(l.get(block, &self.scratch)),
                Name::Static(s) => NewName::Bytes(s),
                Name::Dynamic(p) => NewName::Dynamic(p),
            };
            self.table
                .insert_classified(new_name, value.get(block, &self.scratch), info);
        }
        Ok(())
    }
}

/// Moves `*pos` past a string literal (5.2) without decoding it.
#[inline]
fn skip_string(block: &[u8], pos: &mut usize) -> Result<(), DecodeError> {
    if *pos >= block.len() {
        return Err(DecodeError::Truncated);
    }
    let len = integer::decode(block, pos, 7)?;
    if len > block.len() - *pos {
        return Err(DecodeError::StringTooLong);
    }
    *pos += len;
    Ok(())
}

/// Reads a string literal (5.2) at `*pos`. A Huffman string is decoded onto
/// the end of `scratch`; it can grow by at most 8/5 of the encoded length.
#[inline]
fn read_string(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Lit, DecodeError> {
    let first = *block.get(*pos).ok_or(DecodeError::Truncated)?;
    let len = integer::decode(block, pos, 7)?;
    let start = *pos;
    if len > block.len() - start {
        return Err(DecodeError::StringTooLong);
    }
    let end = start + len;
    *pos = end;
    if first & 0x80 == 0 {
        Ok(Lit::Block(start, end))
    } else {
        let from = scratch.len();
        huffman::decode(&block[start..end], scratch)?;
        Ok(Lit::Scratch(from, scratch.len()))
    }
}

#[cfg(test)]
impl Decoder {
    /// The dynamic table, newest first, and its size.
    pub(crate) fn table_contents(&self) -> super::TableContents {
        self.table.contents()
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::rfc_vectors::{REQ1, REQ2, REQ3, RESP1, RESP2, RESP3};
    use super::*;
    use crate::h2::fields::FieldKind;

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;

    fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
        let mut out = Vec::new();
        d.decode(block, |n, v| out.push((n.to_vec(), v.to_vec())))
            .map(|_| out)
    }

    fn fields(list: &[(&str, &str)]) -> Fields {
        list.iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    /// Decodes `block` and checks the fields, then the table (newest first)
    /// and its size.
    fn check(
        d: &mut Decoder,
        block: &str,
        want: &[(&str, &str)],
        table: &[(&str, &str)],
        size: usize,
    ) {
        assert_eq!(decode(d, &hex(block)).unwrap(), fields(want));
        assert_eq!(d.table_contents(), (fields(table), size));
    }

    #[test]
    fn c2_1_literal_with_indexing() {
        let mut d = Decoder::new(4096);
        check(
            &mut d,
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            &[("custom-key", "custom-header")],
            &[("custom-key", "custom-header")],
            55,
        );
    }

    #[test]
    fn c2_2_literal_without_indexing() {
        let mut d = Decoder::new(4096);
        check(
            &mut d,
            "040c 2f73 616d 706c 652f 7061 7468",
            &[(":path", "/sample/path")],
            &[],
            0,
        );
    }

    #[test]
    fn c2_3_literal_never_indexed() {
        let mut d = Decoder::new(4096);
        check(
            &mut d,
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            &[("password", "secret")],
            &[],
            0,
        );
    }

    #[test]
    fn c2_4_indexed() {
        let mut d = Decoder::new(4096);
        check(&mut d, "82", &[(":method", "GET")], &[], 0);
    }

    const REQ_TABLE1: [(&str, &str); 1] = [(":authority", "www.example.com")];
    const REQ_TABLE2: [(&str, &str); 2] = [
        ("cache-control", "no-cache"),
        (":authority", "www.example.com"),
    ];
    const REQ_TABLE3: [(&str, &str); 3] = [
        ("custom-key", "custom-value"),
        ("cache-control", "no-cache"),
        (":authority", "www.example.com"),
    ];

    #[test]
    fn c3_requests_without_huffman() {
        let mut d = Decoder::new(4096);
        check(
            &mut d,
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            &REQ1,
            &REQ_TABLE1,
            57,
        );
        check(
            &mut d,
            "8286 84be 5808 6e6f 2d63 6163 6865",
            &REQ2,
            &REQ_TABLE2,
            110,
        );
        check(
            &mut d,
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
            &REQ3,
            &REQ_TABLE3,
            164,
        );
    }

    #[test]
    fn c4_requests_with_huffman() {
        let mut d = Decoder::new(4096);
        check(
            &mut d,
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            &REQ1,
            &REQ_TABLE1,
            57,
        );
        check(
            &mut d,
            "8286 84be 5886 a8eb 1064 9cbf",
            &REQ2,
            &REQ_TABLE2,
            110,
        );
        check(
            &mut d,
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            &REQ3,
            &REQ_TABLE3,
            164,
        );
    }

    const RESP_TABLE1: [(&str, &str); 4] = [
        ("location", "https://www.example.com"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("cache-control", "private"),
        (":status", "302"),
    ];
    const RESP_TABLE2: [(&str, &str); 4] = [
        (":status", "307"),
        ("location", "https://www.example.com"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("cache-control", "private"),
    ];
    const RESP_TABLE3: [(&str, &str); 3] = [
        (
            "set-cookie",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
        ("content-encoding", "gzip"),
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
    ];

    #[test]
    fn c5_responses_without_huffman() {
        let mut d = Decoder::new(256);
        check(
            &mut d,
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
             6c65 2e63 6f6d",
            &RESP1,
            &RESP_TABLE1,
            222,
        );
        check(&mut d, "4803 3330 37c1 c0bf", &RESP2, &RESP_TABLE2, 222);
        check(
            &mut d,
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
             3d31",
            &RESP3,
            &RESP_TABLE3,
            215,
        );
    }

    #[test]
    fn c6_responses_with_huffman() {
        let mut d = Decoder::new(256);
        check(
            &mut d,
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            &RESP1,
            &RESP_TABLE1,
            222,
        );
        check(&mut d, "4883 640e ffc1 c0bf", &RESP2, &RESP_TABLE2, 222);
        check(
            &mut d,
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            &RESP3,
            &RESP_TABLE3,
            215,
        );
    }

    fn err(d: &mut Decoder, block: &[u8]) -> DecodeError {
        decode(d, block).unwrap_err()
    }

    #[test]
    fn index_zero() {
        let mut d = Decoder::new(4096);
        assert_eq!(err(&mut d, &[0x80]), DecodeError::InvalidIndex(0));
    }

    #[test]
    fn index_past_the_table() {
        let mut d = Decoder::new(4096);
        // Empty dynamic table: 62 does not exist.
        assert_eq!(err(&mut d, &[0x80 | 62]), DecodeError::InvalidIndex(62));
        // Literal with a name index past the table.
        assert_eq!(
            err(&mut d, &[0x40 | 62, 0x01, b'x']),
            DecodeError::InvalidIndex(62)
        );
        assert_eq!(
            err(&mut d, &[0x0f, 0x30, 0x01, b'x']),
            DecodeError::InvalidIndex(63)
        );
        // One entry: 62 works, 63 does not.
        let mut d = Decoder::new(4096);
        decode(&mut d, &[0x40, 1, b'a', 1, b'b']).unwrap();
        assert_eq!(decode(&mut d, &[0x80 | 62]).unwrap(), fields(&[("a", "b")]));
        assert_eq!(err(&mut d, &[0x80 | 63]), DecodeError::InvalidIndex(63));
        // A huge index.
        assert_eq!(
            err(&mut d, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
            DecodeError::InvalidIndex(127 + 0x7f + (0x7f << 7) + (0x7f << 14) + (0x0f << 21))
        );
    }

    #[test]
    fn truncated_integer() {
        let mut d = Decoder::new(4096);
        assert_eq!(err(&mut d, &[0xff]), DecodeError::Truncated);
        assert_eq!(err(&mut d, &[0xff, 0x80]), DecodeError::Truncated);
        assert_eq!(err(&mut d, &[0x3f]), DecodeError::Truncated);
        // Name index, then the string length is missing.
        assert_eq!(err(&mut d, &[0x44]), DecodeError::Truncated);
        // New name, name length is missing.
        assert_eq!(err(&mut d, &[0x40]), DecodeError::Truncated);
        // Value length prefix full but continuation missing.
        assert_eq!(err(&mut d, &[0x44, 0x7f]), DecodeError::Truncated);
    }

    #[test]
    fn truncated_string() {
        let mut d = Decoder::new(4096);
        // Value says 5 bytes, 3 follow.
        assert_eq!(
            err(&mut d, &[0x04, 0x05, b'/', b'a', b'b']),
            DecodeError::StringTooLong
        );
        // Name says 10 bytes, 2 follow.
        assert_eq!(
            err(&mut d, &[0x40, 0x0a, b'a', b'b']),
            DecodeError::StringTooLong
        );
        // Huffman string cut short.
        assert_eq!(
            err(&mut d, &hex("4188 f1e3 c2e5")),
            DecodeError::StringTooLong
        );
        // A length far larger than any block.
        assert_eq!(
            err(&mut d, &[0x04, 0x7f, 0xff, 0xff, 0xff, 0x0f]),
            DecodeError::StringTooLong
        );
    }

    #[test]
    fn integer_overflow() {
        let mut d = Decoder::new(4096);
        assert_eq!(
            err(&mut d, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            DecodeError::IntegerOverflow
        );
        assert_eq!(
            err(&mut d, &[0x04, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            DecodeError::IntegerOverflow
        );
        assert_eq!(
            err(&mut d, &[0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            DecodeError::IntegerOverflow
        );
    }

    #[test]
    fn huffman_eos() {
        let mut d = Decoder::new(4096);
        // :path with a value that is EOS (30 ones) plus 2 bits of padding.
        assert_eq!(
            err(&mut d, &[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]),
            DecodeError::HuffmanEos
        );
    }

    #[test]
    fn huffman_bad_padding() {
        let mut d = Decoder::new(4096);
        // 'www.example.com' followed by a byte of ones: 8+ bits of padding.
        assert_eq!(
            err(&mut d, &hex("418d f1e3 c2e5 f23a 6ba0 ab90 f4ff ff")),
            DecodeError::HuffmanPadding
        );
        // '0' (00000) padded with zeros.
        assert_eq!(
            err(&mut d, &[0x04, 0x81, 0x00]),
            DecodeError::HuffmanPadding
        );
        // '0' padded with 110.
        assert_eq!(
            err(&mut d, &[0x04, 0x81, 0x06]),
            DecodeError::HuffmanPadding
        );
        // '0' padded with 111 is fine.
        let mut d = Decoder::new(4096);
        assert_eq!(
            decode(&mut d, &[0x04, 0x81, 0x07]).unwrap(),
            fields(&[(":path", "0")])
        );
    }

    #[test]
    fn size_update_over_limit() {
        let mut d = Decoder::new(4096);
        // 4097 = 31 + 4066 -> 0x3f, 0xe2, 0x1f
        assert_eq!(
            err(&mut d, &[0x3f, 0xe2, 0x1f]),
            DecodeError::TableSizeOverLimit {
                requested: 4097,
                limit: 4096
            }
        );
        let mut d = Decoder::new(0);
        assert_eq!(
            err(&mut d, &[0x21]),
            DecodeError::TableSizeOverLimit {
                requested: 1,
                limit: 0
            }
        );
        assert_eq!(
            decode(&mut d, &[0x20, 0x82]).unwrap(),
            fields(&[(":method", "GET")])
        );
    }

    #[test]
    fn size_update_after_a_field() {
        let mut d = Decoder::new(4096);
        assert_eq!(
            err(&mut d, &[0x82, 0x20]),
            DecodeError::TableSizeUpdateNotAtStart
        );
        let mut d = Decoder::new(4096);
        assert_eq!(
            err(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82, 0x3f, 0xe1, 0x1f]),
            DecodeError::TableSizeUpdateNotAtStart
        );
    }

    #[test]
    fn size_updates_at_start_evict_and_apply() {
        let mut d = Decoder::new(4096);
        decode(
            &mut d,
            &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
        )
        .unwrap();
        assert_eq!(d.table_contents().1, 55);
        // 0 then 4096: empties the table, then restores the maximum.
        assert_eq!(
            decode(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82]).unwrap(),
            fields(&[(":method", "GET")])
        );
        assert_eq!(d.table_contents(), (vec![], 0));
        assert_eq!(err(&mut d, &[0x80 | 62]), DecodeError::InvalidIndex(62));
        // Size update alone is a valid block; so is an empty block.
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, &[0x3f, 0x21]).unwrap(), fields(&[]));
        assert_eq!(d.table.max_size(), 64);
        assert_eq!(decode(&mut d, &[]).unwrap(), fields(&[]));
        // Next block may update again.
        assert_eq!(decode(&mut d, &[0x3f, 0xe1, 0x1f]).unwrap(), fields(&[]));
        assert_eq!(d.table.max_size(), 4096);
    }

    #[test]
    fn entry_larger_than_table_empties_it() {
        let mut d = Decoder::new(64);
        decode(&mut d, &[0x40, 1, b'a', 1, b'b']).unwrap();
        assert_eq!(d.table_contents().1, 34);
        let mut block = vec![0x40, 1, b'k', 31];
        block.extend_from_slice(&[b'v'; 31]); // 1 + 31 + 32 = 64: fits exactly
        let got = decode(&mut d, &block).unwrap();
        assert_eq!(got[0].1.len(), 31);
        assert_eq!(d.table_contents().0.len(), 1);
        assert_eq!(d.table_contents().1, 64);
        let mut block = vec![0x40, 1, b'k', 32];
        block.extend_from_slice(&[b'v'; 32]); // 65: too large
        let got = decode(&mut d, &block).unwrap();
        assert_eq!(got, vec![(b"k".to_vec(), vec![b'v'; 32])]);
        assert_eq!(d.table_contents(), (vec![], 0));
    }

    #[test]
    fn literal_naming_an_entry_it_evicts() {
        // Section 4.4: the new entry's name refers to the entry evicted to
        // make room for it.
        let mut d = Decoder::new(80);
        decode(
            &mut d,
            &[0x40, 4, b'n', b'a', b'm', b'e', 4, b'v', b'a', b'l', b'1'],
        )
        .unwrap();
        assert_eq!(d.table_contents().1, 40);
        let got = decode(
            &mut d,
            &[
                0x40 | 62,
                10,
                b'v',
                b'a',
                b'l',
                b'u',
                b'e',
                b'-',
                b't',
                b'w',
                b'o',
                b'!',
            ],
        )
        .unwrap();
        assert_eq!(got, fields(&[("name", "value-two!")]));
        assert_eq!(d.table_contents(), (fields(&[("name", "value-two!")]), 46));
        // Without indexing, a dynamic name is read in place.
        let got = decode(&mut d, &[0x0f, 0x2f, 1, b'x']).unwrap();
        assert_eq!(got, fields(&[("name", "x")]));
    }

    #[test]
    fn steady_state_does_not_grow_buffers() {
        let mut d = Decoder::new(4096);
        let first = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff 5886 a8eb 1064 9cbf");
        decode(&mut d, &first).unwrap();
        let again = [0x82, 0x86, 0x84, 0xbf, 0xbe];
        let mut n = 0;
        d.decode(&again, |_, _| n += 1).unwrap();
        let caps = (d.scratch.capacity(), d.table_contents());
        for _ in 0..1000 {
            d.decode(&again, |_, _| n += 1).unwrap();
        }
        assert_eq!(n, 5 * 1001);
        assert_eq!((d.scratch.capacity(), d.table_contents()), caps);
    }

    #[test]
    fn scratch_is_released_after_a_huge_block() {
        let mut d = Decoder::new(4096);
        let value = vec![b'a'; 200_000];
        let mut block = vec![0x04];
        let mut huff = Vec::new();
        super::super::huffman::encode(&value, &mut huff);
        integer::encode(huff.len(), 7, 0x80, &mut block);
        block.extend_from_slice(&huff);
        let mut len = 0;
        d.decode(&block, |_, v| len = v.len()).unwrap();
        assert_eq!(len, value.len());
        assert!(d.scratch.capacity() <= SCRATCH_KEEP);
    }

    #[test]
    fn error_messages() {
        let e: Box<dyn std::error::Error> = Box::new(DecodeError::InvalidIndex(0));
        assert_eq!(e.to_string(), "hpack: invalid table index 0");
        assert!(DecodeError::TableSizeOverLimit {
            requested: 5000,
            limit: 4096
        }
        .to_string()
        .contains("5000"));
    }

    /// Decodes with ids and kinds.
    fn decode_ids(d: &mut Decoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>, FieldKind, u64)> {
        let mut out = Vec::new();
        d.decode_classified(block, |n, v, info, id| {
            out.push((n.to_vec(), v.to_vec(), info.kind, id))
        })
        .unwrap();
        out
    }

    #[test]
    fn literals_without_indexing_are_remembered() {
        use crate::h2::hpack::{Encoder, Indexing};
        let mut encoder = Encoder::new();
        let mut block = Vec::new();
        encoder.begin_block(&mut block);
        encoder.encode(b":path", b"/pkg.Service/Method", Indexing::None, &mut block);
        encoder.encode(b"x-literal-name", b"v", Indexing::None, &mut block);
        encoder.encode(b"content-length", b"83", Indexing::None, &mut block);
        let mut d = Decoder::new(4096);
        let first = decode_ids(&mut d, &block);
        let second = decode_ids(&mut d, &block);
        assert_eq!(first, second, "the same fields and the same ids");
        assert_eq!(first[0].0, b":path");
        assert_eq!(first[0].1, b"/pkg.Service/Method");
        assert_eq!(first[0].2, FieldKind::Path);
        assert_eq!(first[2].2, FieldKind::ContentLength);
        assert!(first.iter().all(|f| f.3 != 0), "remembered values have ids");
        // Another value gets another id; distinct literals of other lengths
        // cycle the four memos (each refilled in place), and the decoding
        // stays right.
        for i in 0..10 {
            let mut other = Vec::new();
            encoder.begin_block(&mut other);
            let path = format!("/pkg.Service/M{i}{}", "x".repeat((i * 7) % 23));
            encoder.encode(b":path", path.as_bytes(), Indexing::None, &mut other);
            let fields = decode_ids(&mut d, &other);
            assert_eq!(fields[0].1, path.as_bytes());
            assert_ne!(fields[0].3, first[0].3);
        }
        assert_eq!(decode_ids(&mut d, &block)[0].1, b"/pkg.Service/Method");
    }

    #[test]
    fn ids_follow_table_entries() {
        use crate::h2::hpack::{Encoder, Indexing};
        let mut encoder = Encoder::new();
        let mut d = Decoder::new(4096);
        let mut ids = Vec::new();
        for _ in 0..3 {
            let mut block = Vec::new();
            encoder.begin_block(&mut block);
            encoder.encode(b"x-user", b"alice", Indexing::Incremental, &mut block);
            encoder.encode(b":method", b"POST", Indexing::Incremental, &mut block);
            let fields = decode_ids(&mut d, &block);
            assert_eq!(fields[0].2, FieldKind::Other);
            assert_eq!(fields[1].2, FieldKind::Method);
            ids.push((fields[0].3, fields[1].3));
        }
        // Inserted, then indexed: the entry keeps its id; a static entry has
        // one too.
        assert_eq!(ids[0], ids[1]);
        assert_eq!(ids[1], ids[2]);
        assert_ne!(ids[0].0, 0);
        assert_ne!(ids[0].1, 0);
    }
}
