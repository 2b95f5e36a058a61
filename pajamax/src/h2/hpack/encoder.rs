//! Header block encoding (RFC 7541 sections 4 and 6).

use super::table::{entry_size, static_find, DynamicTable, NewName, STATIC_LEN};
use super::{huffman, integer};

/// How a field that is not found whole in a table is sent (RFC 7541
/// section 6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Literal with incremental indexing: the field is added to the dynamic
    /// table (if it fits), so the next identical field is one index.
    Incremental,
    /// Literal without indexing: the table is left alone.
    None,
    /// Literal never indexed, for sensitive values: the table is left alone,
    /// intermediaries must not index it either, and the value is never
    /// matched against table entries, so its encoded size reveals nothing
    /// about what the table holds.
    Never,
}

/// The largest dynamic table the encoder uses, whatever the peer allows.
/// A gRPC server sends a handful of distinct fields; a larger table would
/// only hold more memory per connection.
const MAX_TABLE_SIZE: usize = 4096;

/// The peer's default SETTINGS_HEADER_TABLE_SIZE.
const DEFAULT_TABLE_SIZE: usize = 4096;

/// The encoding context of one connection (our responses).
#[derive(Debug)]
pub struct Encoder {
    table: DynamicTable,
    /// Table sizes to announce at the start of the next block: the smallest
    /// since the last block, and the latest.
    pending: Option<(usize, usize)>,
    /// Whether strings may be Huffman coded (always, except in tests that
    /// reproduce the RFC's plain examples).
    huffman: bool,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}

impl Encoder {
    /// Creates an encoder for a peer with the default table size, 4096.
    pub fn new() -> Encoder {
        Encoder {
            table: DynamicTable::new(DEFAULT_TABLE_SIZE),
            pending: None,
            huffman: true,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE changed. The next block starts
    /// with a dynamic table size update (two if the size went down and then
    /// up again since the last block: the smallest, then the final one, as
    /// RFC 7541 section 4.2 requires), and the table evicts accordingly.
    ///
    /// Sizes above 4096 are announced as 4096: the encoder may use less than
    /// the peer allows, and bounds its memory that way.
    pub fn set_max_table_size(&mut self, size: usize) {
        let size = size.min(MAX_TABLE_SIZE);
        self.pending = Some(match self.pending {
            Some((min, _)) => (min.min(size), size),
            None => (size, size),
        });
    }

    /// A count that changes whenever what [`Encoder::encode`] would write
    /// for the same fields may change: a block encoded while it stayed the
    /// same, and that left it the same, can be reused as it is.
    #[inline]
    pub fn state(&self) -> u64 {
        if self.pending.is_some() {
            // A size update must start the next block.
            return u64::MAX;
        }
        self.table.changes()
    }

    /// Starts a header block: appends the pending dynamic table size
    /// updates, if any, to `dst`. Call it before the first field of every
    /// block.
    pub fn begin_block(&mut self, dst: &mut Vec<u8>) {
        if let Some((min, last)) = self.pending.take() {
            if min < last {
                integer::encode(min, 5, 0x20, dst);
                self.table.set_max_size(min);
            }
            integer::encode(last, 5, 0x20, dst);
            self.table.set_max_size(last);
        }
    }

    /// Appends one field to `dst`.
    ///
    /// A field equal to a static or dynamic table entry becomes that entry's
    /// index. Otherwise it is a literal, with the name as an index when a
    /// table has it, added to the dynamic table when `indexing` is
    /// [`Indexing::Incremental`] and it fits (a field larger than the whole
    /// table is sent without indexing instead of emptying the table).
    /// [`Indexing::Never`] fields are always literals. Strings are Huffman
    /// coded when that is shorter.
    pub fn encode(&mut self, name: &[u8], value: &[u8], indexing: Indexing, dst: &mut Vec<u8>) {
        let sensitive = indexing == Indexing::Never;
        let (static_full, static_name) = static_find(name, value);
        if let (Some(index), false) = (static_full, sensitive) {
            integer::encode(index, 7, 0x80, dst);
            return;
        }
        let (dyn_full, dyn_name) = if sensitive {
            (None, None)
        } else {
            self.table.find(name, value)
        };
        if let Some(pos) = dyn_full {
            integer::encode(pos + STATIC_LEN + 1, 7, 0x80, dst);
            return;
        }
        let dyn_name = match (static_name, dyn_name, sensitive) {
            (Some(_), _, _) => None,
            (None, _, true) => self.table.find(name, b"").1,
            (None, found, false) => found,
        };
        let name_index = static_name.or(dyn_name.map(|pos| pos + STATIC_LEN + 1));

        let add = indexing == Indexing::Incremental
            && entry_size(name.len(), value.len()) <= self.table.max_size();
        let (prefix, flags) = match indexing {
            Indexing::Incremental if add => (6, 0x40),
            Indexing::Never => (4, 0x10),
            _ => (4, 0x00),
        };
        match name_index {
            Some(index) => integer::encode(index, prefix, flags, dst),
            None => {
                dst.push(flags);
                self.string(name, dst);
            }
        }
        self.string(value, dst);
        if add {
            self.table.insert(NewName::Bytes(name), value);
        }
    }

    /// A string literal (5.2), Huffman coded when that is shorter.
    #[inline]
    fn string(&self, s: &[u8], dst: &mut Vec<u8>) {
        let huffman_len = if self.huffman {
            huffman::encoded_len(s)
        } else {
            usize::MAX
        };
        if huffman_len < s.len() {
            integer::encode(huffman_len, 7, 0x80, dst);
            huffman::encode(s, dst);
        } else {
            integer::encode(s.len(), 7, 0, dst);
            dst.extend_from_slice(s);
        }
    }
}

#[cfg(test)]
impl Encoder {
    /// An encoder that never Huffman codes, to reproduce RFC examples.
    pub(crate) fn without_huffman() -> Encoder {
        Encoder {
            huffman: false,
            ..Encoder::new()
        }
    }

    /// The dynamic table, newest first, and its size.
    pub(crate) fn table_contents(&self) -> super::TableContents {
        self.table.contents()
    }
}

#[cfg(test)]
mod tests {
    use super::super::rfc_vectors::{REQ1, REQ2, REQ3, RESP1, RESP2, RESP3};
    use super::super::{hex, Decoder};
    use super::*;

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;

    fn fields(list: &[(&str, &str)]) -> Fields {
        list.iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    fn block(e: &mut Encoder, list: &[(&str, &str)], indexing: Indexing) -> Vec<u8> {
        let mut dst = Vec::new();
        e.begin_block(&mut dst);
        for (n, v) in list {
            e.encode(n.as_bytes(), v.as_bytes(), indexing, &mut dst);
        }
        dst
    }

    fn decode(d: &mut Decoder, block: &[u8]) -> Fields {
        let mut out = Vec::new();
        d.decode(block, |n, v| out.push((n.to_vec(), v.to_vec())))
            .unwrap();
        out
    }

    /// Encodes `list`, checks the bytes, decodes them and checks that both
    /// tables agree.
    fn check(e: &mut Encoder, d: &mut Decoder, list: &[(&str, &str)], want: &str) {
        let b = block(e, list, Indexing::Incremental);
        assert_eq!(b, hex(want));
        assert_eq!(decode(d, &b), fields(list));
        assert_eq!(e.table_contents(), d.table_contents());
    }

    #[test]
    fn c3_requests_without_huffman() {
        let mut e = Encoder::without_huffman();
        let mut d = Decoder::new(4096);
        check(
            &mut e,
            &mut d,
            &REQ1,
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        );
        check(&mut e, &mut d, &REQ2, "8286 84be 5808 6e6f 2d63 6163 6865");
        check(
            &mut e,
            &mut d,
            &REQ3,
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        );
        assert_eq!(e.table_contents().1, 164);
    }

    #[test]
    fn c4_requests_with_huffman() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        check(
            &mut e,
            &mut d,
            &REQ1,
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        );
        check(&mut e, &mut d, &REQ2, "8286 84be 5886 a8eb 1064 9cbf");
        check(
            &mut e,
            &mut d,
            &REQ3,
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        );
        assert_eq!(e.table_contents().1, 164);
    }

    /// An encoder/decoder pair already at the RFC's table size of 256 (the
    /// examples start without a size update, as if it was always 256).
    fn pair_256(mut e: Encoder) -> (Encoder, Decoder) {
        e.set_max_table_size(256);
        let mut update = Vec::new();
        e.begin_block(&mut update);
        assert_eq!(update, [0x3f, 0xe1, 0x01]);
        (e, Decoder::new(256))
    }

    #[test]
    fn c5_responses_without_huffman() {
        let (mut e, mut d) = pair_256(Encoder::without_huffman());
        check(
            &mut e,
            &mut d,
            &RESP1,
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
             6c65 2e63 6f6d",
        );
        assert_eq!(e.table_contents().1, 222);
        check(&mut e, &mut d, &RESP2, "4803 3330 37c1 c0bf");
        assert_eq!(e.table_contents().1, 222);
        check(
            &mut e,
            &mut d,
            &RESP3,
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
             3d31",
        );
        assert_eq!(e.table_contents().1, 215);
    }

    #[test]
    fn c6_responses_with_huffman() {
        let (mut e, mut d) = pair_256(Encoder::new());
        check(
            &mut e,
            &mut d,
            &RESP1,
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        );
        // The RFC Huffman codes "307" (3 bytes either way); a plain string of
        // the same length is cheaper to decode, so it stays plain.
        check(&mut e, &mut d, &RESP2, "4803 3330 37c1 c0bf");
        check(
            &mut e,
            &mut d,
            &RESP3,
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        );
        assert_eq!(e.table_contents().1, 215);
    }

    #[test]
    fn c2_representations() {
        let mut e = Encoder::without_huffman();
        let mut dst = Vec::new();
        e.encode(
            b"custom-key",
            b"custom-header",
            Indexing::Incremental,
            &mut dst,
        );
        assert_eq!(
            dst,
            hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")
        );
        let mut e = Encoder::without_huffman();
        dst.clear();
        e.encode(b":path", b"/sample/path", Indexing::None, &mut dst);
        assert_eq!(dst, hex("040c 2f73 616d 706c 652f 7061 7468"));
        dst.clear();
        e.encode(b"password", b"secret", Indexing::Never, &mut dst);
        assert_eq!(dst, hex("1008 7061 7373 776f 7264 0673 6563 7265 74"));
        dst.clear();
        e.encode(b":method", b"GET", Indexing::Incremental, &mut dst);
        assert_eq!(dst, [0x82]);
        assert_eq!(e.table_contents(), (vec![], 0));
    }

    /// The fields pajamax sends on every response.
    fn grpc_response(e: &mut Encoder) -> (Vec<u8>, Vec<u8>) {
        let mut headers = Vec::new();
        e.begin_block(&mut headers);
        e.encode(b":status", b"200", Indexing::Incremental, &mut headers);
        e.encode(
            b"content-type",
            b"application/grpc",
            Indexing::Incremental,
            &mut headers,
        );
        let mut trailers = Vec::new();
        e.begin_block(&mut trailers);
        e.encode(b"grpc-status", b"0", Indexing::Incremental, &mut trailers);
        (headers, trailers)
    }

    #[test]
    fn grpc_response_fields_become_one_byte_each() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let (h, t) = grpc_response(&mut e);
        assert_eq!(h[0], 0x88);
        assert_eq!(
            decode(&mut d, &h),
            fields(&[(":status", "200"), ("content-type", "application/grpc")])
        );
        assert_eq!(decode(&mut d, &t), fields(&[("grpc-status", "0")]));
        for _ in 0..3 {
            let (h, t) = grpc_response(&mut e);
            assert_eq!(h, [0x88, 0xbf]);
            assert_eq!(t, [0xbe]);
            assert_eq!(
                decode(&mut d, &h),
                fields(&[(":status", "200"), ("content-type", "application/grpc")])
            );
            assert_eq!(decode(&mut d, &t), fields(&[("grpc-status", "0")]));
        }
    }

    #[test]
    fn size_updates_minimum_then_final() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let b = block(&mut e, &[("x-a", "1"), ("x-b", "2")], Indexing::Incremental);
        decode(&mut d, &b);
        assert_eq!(e.table_contents().0.len(), 2);

        // Down to 0, then back up: both are announced, and the table empties.
        e.set_max_table_size(100);
        e.set_max_table_size(0);
        e.set_max_table_size(2000);
        let b = block(&mut e, &[("x-a", "1")], Indexing::Incremental);
        assert_eq!(&b[..4], &[0x20, 0x3f, 0xb1, 0x0f]);
        assert_eq!(decode(&mut d, &b), fields(&[("x-a", "1")]));
        assert_eq!(e.table_contents(), d.table_contents());
        assert_eq!(e.table_contents().0.len(), 1);

        // Only down: one update, evicting to fit.
        e.set_max_table_size(4096);
        e.set_max_table_size(40);
        let b = block(&mut e, &[("x-b", "2")], Indexing::Incremental);
        assert_eq!(&b[..2], &[0x3f, 0x09]);
        assert_eq!(decode(&mut d, &b), fields(&[("x-b", "2")]));
        assert_eq!(e.table_contents(), d.table_contents());
        assert_eq!(e.table_contents().0, fields(&[("x-b", "2")]));

        // No change: no update.
        let b = block(&mut e, &[("x-b", "2")], Indexing::Incremental);
        assert_eq!(b, [0x80 | 62]);

        // Above the cap: announced as 4096.
        e.set_max_table_size(1 << 20);
        let mut b = Vec::new();
        e.begin_block(&mut b);
        assert_eq!(b, [0x3f, 0xe1, 0x1f]);
        decode(&mut d, &b);
        assert_eq!(e.table_contents(), d.table_contents());
    }

    #[test]
    fn too_large_field_is_not_indexed() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let b = block(&mut e, &[("x-a", "1")], Indexing::Incremental);
        decode(&mut d, &b);
        let big = "v".repeat(5000);
        let b = block(&mut e, &[("x-big", &big)], Indexing::Incremental);
        assert_eq!(b[0], 0x00);
        assert_eq!(decode(&mut d, &b), fields(&[("x-big", &big)]));
        // The table kept its entry.
        assert_eq!(e.table_contents().0, fields(&[("x-a", "1")]));
        assert_eq!(e.table_contents(), d.table_contents());
    }

    #[test]
    fn never_indexed_is_always_literal() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let b = block(
            &mut e,
            &[("authorization", "secret"), ("x-token", "t")],
            Indexing::Incremental,
        );
        decode(&mut d, &b);
        // Both are in the dynamic table now, yet sent as literals.
        let mut b = Vec::new();
        e.encode(b"authorization", b"secret", Indexing::Never, &mut b);
        // Static name 23 with a 4-bit prefix: 0x1f 0x08.
        assert_eq!(&b[..2], &[0x1f, 0x08]);
        assert_eq!(decode(&mut d, &b), fields(&[("authorization", "secret")]));
        let mut b = Vec::new();
        e.encode(b"x-token", b"t", Indexing::Never, &mut b);
        // Name from the dynamic table (62 = 15 + 47), raw value.
        assert_eq!(b, [0x1f, 47, 0x01, b't']);
        assert_eq!(decode(&mut d, &b), fields(&[("x-token", "t")]));
        let mut b = Vec::new();
        e.encode(b":method", b"GET", Indexing::Never, &mut b);
        assert_eq!(b, [0x12, 0x03, b'G', b'E', b'T']);
        assert_eq!(e.table_contents(), d.table_contents());
        assert_eq!(e.table_contents().0.len(), 2);
    }

    #[test]
    fn without_indexing_uses_full_matches() {
        let mut e = Encoder::new();
        let mut b = Vec::new();
        e.encode(b"x-a", b"1", Indexing::Incremental, &mut b);
        b.clear();
        e.encode(b"x-a", b"1", Indexing::None, &mut b);
        assert_eq!(b, [0x80 | 62]);
        b.clear();
        e.encode(b":status", b"404", Indexing::None, &mut b);
        assert_eq!(b, [0x80 | 13]);
        b.clear();
        e.encode(b"x-a", b"2", Indexing::None, &mut b);
        assert_eq!(b[0], 0x0f);
        assert_eq!(b[1], 62 - 15);
    }

    #[test]
    fn empty_name_and_value() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let b = block(
            &mut e,
            &[("", ""), ("", ""), ("x", "")],
            Indexing::Incremental,
        );
        assert_eq!(b[..3], [0x40, 0x00, 0x00]);
        assert_eq!(b[3], 0x80 | 62);
        assert_eq!(decode(&mut d, &b), fields(&[("", ""), ("", ""), ("x", "")]));
        assert_eq!(e.table_contents(), d.table_contents());
    }
}
