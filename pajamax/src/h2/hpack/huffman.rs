//! The HPACK Huffman code (RFC 7541 section 5.2 and Appendix B).
//!
//! Encoding packs codes into a 64-bit accumulator and writes 32 bits at a time.
//! Decoding reads the input into a 64-bit accumulator and looks the next 12
//! bits up in a table that gives one or two whole symbols (codes of up to 12
//! bits cover every letter, digit and common punctuation mark); longer codes
//! and the end of the string use the canonical form of the code (RFC 7541's
//! code is canonical: a code follows from the lengths alone). The tables are
//! computed at compile time from the code table, which is checked there to be
//! complete and canonical.

use super::decoder::DecodeError;

/// (code, length in bits) for each symbol 0..=255 and EOS (256); the code is
/// right-aligned. RFC 7541 Appendix B.
static CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),     //   0
    (0x7fffd8, 23),   //   1
    (0xfffffe2, 28),  //   2
    (0xfffffe3, 28),  //   3
    (0xfffffe4, 28),  //   4
    (0xfffffe5, 28),  //   5
    (0xfffffe6, 28),  //   6
    (0xfffffe7, 28),  //   7
    (0xfffffe8, 28),  //   8
    (0xffffea, 24),   //   9
    (0x3ffffffc, 30), //  10
    (0xfffffe9, 28),  //  11
    (0xfffffea, 28),  //  12
    (0x3ffffffd, 30), //  13
    (0xfffffeb, 28),  //  14
    (0xfffffec, 28),  //  15
    (0xfffffed, 28),  //  16
    (0xfffffee, 28),  //  17
    (0xfffffef, 28),  //  18
    (0xffffff0, 28),  //  19
    (0xffffff1, 28),  //  20
    (0xffffff2, 28),  //  21
    (0x3ffffffe, 30), //  22
    (0xffffff3, 28),  //  23
    (0xffffff4, 28),  //  24
    (0xffffff5, 28),  //  25
    (0xffffff6, 28),  //  26
    (0xffffff7, 28),  //  27
    (0xffffff8, 28),  //  28
    (0xffffff9, 28),  //  29
    (0xffffffa, 28),  //  30
    (0xffffffb, 28),  //  31
    (0x14, 6),        //  32 ' '
    (0x3f8, 10),      //  33 '!'
    (0x3f9, 10),      //  34 '"'
    (0xffa, 12),      //  35 '#'
    (0x1ff9, 13),     //  36 '$'
    (0x15, 6),        //  37 '%'
    (0xf8, 8),        //  38 '&'
    (0x7fa, 11),      //  39 "'"
    (0x3fa, 10),      //  40 '('
    (0x3fb, 10),      //  41 ')'
    (0xf9, 8),        //  42 '*'
    (0x7fb, 11),      //  43 '+'
    (0xfa, 8),        //  44 ','
    (0x16, 6),        //  45 '-'
    (0x17, 6),        //  46 '.'
    (0x18, 6),        //  47 '/'
    (0x0, 5),         //  48 '0'
    (0x1, 5),         //  49 '1'
    (0x2, 5),         //  50 '2'
    (0x19, 6),        //  51 '3'
    (0x1a, 6),        //  52 '4'
    (0x1b, 6),        //  53 '5'
    (0x1c, 6),        //  54 '6'
    (0x1d, 6),        //  55 '7'
    (0x1e, 6),        //  56 '8'
    (0x1f, 6),        //  57 '9'
    (0x5c, 7),        //  58 ':'
    (0xfb, 8),        //  59 ';'
    (0x7ffc, 15),     //  60 '<'
    (0x20, 6),        //  61 '='
    (0xffb, 12),      //  62 '>'
    (0x3fc, 10),      //  63 '?'
    (0x1ffa, 13),     //  64 '@'
    (0x21, 6),        //  65 'A'
    (0x5d, 7),        //  66 'B'
    (0x5e, 7),        //  67 'C'
    (0x5f, 7),        //  68 'D'
    (0x60, 7),        //  69 'E'
    (0x61, 7),        //  70 'F'
    (0x62, 7),        //  71 'G'
    (0x63, 7),        //  72 'H'
    (0x64, 7),        //  73 'I'
    (0x65, 7),        //  74 'J'
    (0x66, 7),        //  75 'K'
    (0x67, 7),        //  76 'L'
    (0x68, 7),        //  77 'M'
    (0x69, 7),        //  78 'N'
    (0x6a, 7),        //  79 'O'
    (0x6b, 7),        //  80 'P'
    (0x6c, 7),        //  81 'Q'
    (0x6d, 7),        //  82 'R'
    (0x6e, 7),        //  83 'S'
    (0x6f, 7),        //  84 'T'
    (0x70, 7),        //  85 'U'
    (0x71, 7),        //  86 'V'
    (0x72, 7),        //  87 'W'
    (0xfc, 8),        //  88 'X'
    (0x73, 7),        //  89 'Y'
    (0xfd, 8),        //  90 'Z'
    (0x1ffb, 13),     //  91 '['
    (0x7fff0, 19),    //  92 '\\'
    (0x1ffc, 13),     //  93 ']'
    (0x3ffc, 14),     //  94 '^'
    (0x22, 6),        //  95 '_'
    (0x7ffd, 15),     //  96 '`'
    (0x3, 5),         //  97 'a'
    (0x23, 6),        //  98 'b'
    (0x4, 5),         //  99 'c'
    (0x24, 6),        // 100 'd'
    (0x5, 5),         // 101 'e'
    (0x25, 6),        // 102 'f'
    (0x26, 6),        // 103 'g'
    (0x27, 6),        // 104 'h'
    (0x6, 5),         // 105 'i'
    (0x74, 7),        // 106 'j'
    (0x75, 7),        // 107 'k'
    (0x28, 6),        // 108 'l'
    (0x29, 6),        // 109 'm'
    (0x2a, 6),        // 110 'n'
    (0x7, 5),         // 111 'o'
    (0x2b, 6),        // 112 'p'
    (0x76, 7),        // 113 'q'
    (0x2c, 6),        // 114 'r'
    (0x8, 5),         // 115 's'
    (0x9, 5),         // 116 't'
    (0x2d, 6),        // 117 'u'
    (0x77, 7),        // 118 'v'
    (0x78, 7),        // 119 'w'
    (0x79, 7),        // 120 'x'
    (0x7a, 7),        // 121 'y'
    (0x7b, 7),        // 122 'z'
    (0x7ffe, 15),     // 123 '{'
    (0x7fc, 11),      // 124 '|'
    (0x3ffd, 14),     // 125 '}'
    (0x1ffd, 13),     // 126 '~'
    (0xffffffc, 28),  // 127
    (0xfffe6, 20),    // 128
    (0x3fffd2, 22),   // 129
    (0xfffe7, 20),    // 130
    (0xfffe8, 20),    // 131
    (0x3fffd3, 22),   // 132
    (0x3fffd4, 22),   // 133
    (0x3fffd5, 22),   // 134
    (0x7fffd9, 23),   // 135
    (0x3fffd6, 22),   // 136
    (0x7fffda, 23),   // 137
    (0x7fffdb, 23),   // 138
    (0x7fffdc, 23),   // 139
    (0x7fffdd, 23),   // 140
    (0x7fffde, 23),   // 141
    (0xffffeb, 24),   // 142
    (0x7fffdf, 23),   // 143
    (0xffffec, 24),   // 144
    (0xffffed, 24),   // 145
    (0x3fffd7, 22),   // 146
    (0x7fffe0, 23),   // 147
    (0xffffee, 24),   // 148
    (0x7fffe1, 23),   // 149
    (0x7fffe2, 23),   // 150
    (0x7fffe3, 23),   // 151
    (0x7fffe4, 23),   // 152
    (0x1fffdc, 21),   // 153
    (0x3fffd8, 22),   // 154
    (0x7fffe5, 23),   // 155
    (0x3fffd9, 22),   // 156
    (0x7fffe6, 23),   // 157
    (0x7fffe7, 23),   // 158
    (0xffffef, 24),   // 159
    (0x3fffda, 22),   // 160
    (0x1fffdd, 21),   // 161
    (0xfffe9, 20),    // 162
    (0x3fffdb, 22),   // 163
    (0x3fffdc, 22),   // 164
    (0x7fffe8, 23),   // 165
    (0x7fffe9, 23),   // 166
    (0x1fffde, 21),   // 167
    (0x7fffea, 23),   // 168
    (0x3fffdd, 22),   // 169
    (0x3fffde, 22),   // 170
    (0xfffff0, 24),   // 171
    (0x1fffdf, 21),   // 172
    (0x3fffdf, 22),   // 173
    (0x7fffeb, 23),   // 174
    (0x7fffec, 23),   // 175
    (0x1fffe0, 21),   // 176
    (0x1fffe1, 21),   // 177
    (0x3fffe0, 22),   // 178
    (0x1fffe2, 21),   // 179
    (0x7fffed, 23),   // 180
    (0x3fffe1, 22),   // 181
    (0x7fffee, 23),   // 182
    (0x7fffef, 23),   // 183
    (0xfffea, 20),    // 184
    (0x3fffe2, 22),   // 185
    (0x3fffe3, 22),   // 186
    (0x3fffe4, 22),   // 187
    (0x7ffff0, 23),   // 188
    (0x3fffe5, 22),   // 189
    (0x3fffe6, 22),   // 190
    (0x7ffff1, 23),   // 191
    (0x3ffffe0, 26),  // 192
    (0x3ffffe1, 26),  // 193
    (0xfffeb, 20),    // 194
    (0x7fff1, 19),    // 195
    (0x3fffe7, 22),   // 196
    (0x7ffff2, 23),   // 197
    (0x3fffe8, 22),   // 198
    (0x1ffffec, 25),  // 199
    (0x3ffffe2, 26),  // 200
    (0x3ffffe3, 26),  // 201
    (0x3ffffe4, 26),  // 202
    (0x7ffffde, 27),  // 203
    (0x7ffffdf, 27),  // 204
    (0x3ffffe5, 26),  // 205
    (0xfffff1, 24),   // 206
    (0x1ffffed, 25),  // 207
    (0x7fff2, 19),    // 208
    (0x1fffe3, 21),   // 209
    (0x3ffffe6, 26),  // 210
    (0x7ffffe0, 27),  // 211
    (0x7ffffe1, 27),  // 212
    (0x3ffffe7, 26),  // 213
    (0x7ffffe2, 27),  // 214
    (0xfffff2, 24),   // 215
    (0x1fffe4, 21),   // 216
    (0x1fffe5, 21),   // 217
    (0x3ffffe8, 26),  // 218
    (0x3ffffe9, 26),  // 219
    (0xffffffd, 28),  // 220
    (0x7ffffe3, 27),  // 221
    (0x7ffffe4, 27),  // 222
    (0x7ffffe5, 27),  // 223
    (0xfffec, 20),    // 224
    (0xfffff3, 24),   // 225
    (0xfffed, 20),    // 226
    (0x1fffe6, 21),   // 227
    (0x3fffe9, 22),   // 228
    (0x1fffe7, 21),   // 229
    (0x1fffe8, 21),   // 230
    (0x7ffff3, 23),   // 231
    (0x3fffea, 22),   // 232
    (0x3fffeb, 22),   // 233
    (0x1ffffee, 25),  // 234
    (0x1ffffef, 25),  // 235
    (0xfffff4, 24),   // 236
    (0xfffff5, 24),   // 237
    (0x3ffffea, 26),  // 238
    (0x7ffff4, 23),   // 239
    (0x3ffffeb, 26),  // 240
    (0x7ffffe6, 27),  // 241
    (0x3ffffec, 26),  // 242
    (0x3ffffed, 26),  // 243
    (0x7ffffe7, 27),  // 244
    (0x7ffffe8, 27),  // 245
    (0x7ffffe9, 27),  // 246
    (0x7ffffea, 27),  // 247
    (0x7ffffeb, 27),  // 248
    (0xffffffe, 28),  // 249
    (0x7ffffec, 27),  // 250
    (0x7ffffed, 27),  // 251
    (0x7ffffee, 27),  // 252
    (0x7ffffef, 27),  // 253
    (0x7fffff0, 27),  // 254
    (0x3ffffee, 26),  // 255
    (0x3fffffff, 30), // EOS
];

const EOS: usize = 256;

struct EncodeTable {
    code: [u32; 256],
    len: [u8; 256],
}

const fn build_encode_table() -> EncodeTable {
    let mut code = [0u32; 256];
    let mut len = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        code[i] = CODES[i].0;
        len[i] = CODES[i].1;
        i += 1;
    }
    EncodeTable { code, len }
}

static ENCODE: EncodeTable = build_encode_table();

/// Length in bytes of the Huffman encoding of `src`.
#[inline]
pub(crate) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| ENCODE.len[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Appends the Huffman encoding of `src` to `dst`, padded with ones.
pub(crate) fn encode(src: &[u8], dst: &mut Vec<u8>) {
    dst.reserve(encoded_len(src));
    // The low `n` bits of `acc` are pending output; `n` < 32 between symbols,
    // and a code has at most 30 bits, so nothing pending is shifted out.
    let mut acc: u64 = 0;
    let mut n: u32 = 0;
    for &b in src {
        let len = ENCODE.len[b as usize] as u32;
        acc = (acc << len) | ENCODE.code[b as usize] as u64;
        n += len;
        if n >= 32 {
            n -= 32;
            dst.extend_from_slice(&((acc >> n) as u32).to_be_bytes());
        }
    }
    if n > 0 {
        let pad = (8 - n % 8) % 8;
        acc = (acc << pad) | ((1u64 << pad) - 1);
        n += pad;
        while n > 0 {
            n -= 8;
            dst.push((acc >> n) as u8);
        }
    }
}

/// Bits looked up at once when decoding.
const FAST_BITS: u32 = 12;
const FAST_MASK: u64 = (1 << FAST_BITS) - 1;

/// For each 12-bit window: the symbols whose whole codes start it (none if
/// the first code is longer than 12 bits, else one or two), packed as
/// `sym1 | sym2 << 8 | len1 << 16 | bits used << 21 | count << 26`.
static FAST: [u32; 1 << FAST_BITS] = build_fast_table();

const fn build_fast_table() -> [u32; 1 << FAST_BITS] {
    // First symbol and its length for every window (length 0: none).
    let mut first = [(0u8, 0u8); 1 << FAST_BITS];
    let mut sym = 0;
    while sym < 256 {
        let (code, len) = CODES[sym];
        if len as u32 <= FAST_BITS {
            let shift = FAST_BITS - len as u32;
            let mut w = (code << shift) as usize;
            let end = ((code + 1) << shift) as usize;
            while w < end {
                first[w] = (sym as u8, len);
                w += 1;
            }
        }
        sym += 1;
    }
    let mut table = [0u32; 1 << FAST_BITS];
    let mut w = 0;
    while w < 1 << FAST_BITS {
        let (s1, l1) = first[w];
        if l1 != 0 {
            // A second code fits if it ends within the window.
            let rest = (w << l1) & FAST_MASK as usize;
            let (s2, l2) = first[rest];
            let (count, s2, used) = if l2 != 0 && l1 + l2 <= FAST_BITS as u8 {
                (2, s2, l1 + l2)
            } else {
                (1, 0, l1)
            };
            table[w] = s1 as u32
                | (s2 as u32) << 8
                | (l1 as u32) << 16
                | (used as u32) << 21
                | (count as u32) << 26;
        }
        w += 1;
    }
    table
}

/// The canonical form of the code, for codes the window does not cover and
/// for the end of a string: symbols ordered by (length, symbol), and per
/// length the first code, the exclusive end of its codes left-aligned to 30
/// bits, and where its symbols start in the order.
struct Canonical {
    symbols: [u16; 257],
    first: [u32; 31],
    limit: [u32; 31],
    offset: [u16; 31],
}

const fn build_canonical() -> Canonical {
    let mut count = [0u32; 31];
    let mut s = 0;
    while s < 257 {
        count[CODES[s].1 as usize] += 1;
        s += 1;
    }
    let mut first = [0u32; 31];
    let mut limit = [0u32; 31];
    let mut offset = [0u16; 31];
    let mut code = 0u32;
    let mut next = 0u16;
    let mut len = 1;
    while len <= 30 {
        code <<= 1;
        first[len] = code;
        offset[len] = next;
        code += count[len];
        next += count[len] as u16;
        limit[len] = code << (30 - len);
        len += 1;
    }
    // The code is complete: the last code of length 30 is all ones.
    assert!(code == 1 << 30);
    let mut symbols = [0u16; 257];
    let mut fill = offset;
    let mut s = 0;
    while s < 257 {
        let (c, l) = CODES[s];
        let l = l as usize;
        // Canonical: each code is its length's first plus its rank.
        assert!(c == first[l] + (fill[l] - offset[l]) as u32);
        symbols[fill[l] as usize] = s as u16;
        fill[l] += 1;
        s += 1;
    }
    Canonical {
        symbols,
        first,
        limit,
        offset,
    }
}

static CANONICAL: Canonical = build_canonical();

/// The symbol whose code starts the left-aligned 30-bit value `v`, and the
/// code's length.
#[inline]
fn canonical_lookup(v: u32) -> (usize, u32) {
    let c = &CANONICAL;
    let mut len = 5;
    while len < 30 && v >= c.limit[len] {
        len += 1;
    }
    let rank = (v >> (30 - len)) - c.first[len];
    let sym = c.symbols[(c.offset[len] as u32 + rank) as usize];
    (sym as usize, len as u32)
}

/// Appends the decoding of the Huffman string `src` to `dst`.
///
/// Fails on the EOS symbol, on padding longer than 7 bits and on padding that
/// is not all ones (a code cut short); `dst` is then left as it was.
/// Appends at most `src.len() * 8 / 5` bytes (the shortest code has 5 bits),
/// and grows `dst` by at most one byte more than that.
///
/// The input is read into a 64-bit accumulator; each step looks up the next
/// 12 bits, which yields one or two symbols for codes of up to 12 bits (all
/// letters, digits and common punctuation). Longer codes, and the last bits
/// of the string, go through the canonical form.
pub(crate) fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), DecodeError> {
    let start = dst.len();
    // One spare byte: a lookup that yields one symbol writes two.
    dst.resize(start + src.len() * 8 / 5 + 1, 0);
    match decode_into(src, &mut dst[start..]) {
        Ok(n) => {
            dst.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            dst.truncate(start);
            Err(e)
        }
    }
}

/// Decodes into `out`, which has room for `src.len() * 8 / 5 + 1` bytes;
/// returns the decoded length.
fn decode_into(src: &[u8], out: &mut [u8]) -> Result<usize, DecodeError> {
    // The low `bits` bits of `acc` are unread input.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut rest = src;
    let mut n = 0;
    loop {
        if bits <= 32 {
            if let Some((word, tail)) = rest.split_first_chunk::<4>() {
                acc = (acc << 32) | u64::from(u32::from_be_bytes(*word));
                bits += 32;
                rest = tail;
            }
        }
        while bits <= 56 {
            match rest.split_first() {
                Some((&b, tail)) => {
                    acc = (acc << 8) | u64::from(b);
                    bits += 8;
                    rest = tail;
                }
                None => break,
            }
        }
        if bits >= FAST_BITS {
            let e = FAST[((acc >> (bits - FAST_BITS)) & FAST_MASK) as usize];
            let count = (e >> 26) as usize;
            if count != 0 {
                // Every symbol took at least 5 bits, so `n + 1` is in bounds.
                out[n] = e as u8;
                out[n + 1] = (e >> 8) as u8;
                n += count;
                bits -= (e >> 21) & 0x1f;
                continue;
            }
        } else {
            // The input is exhausted. Up to 7 ones are the padding: no code
            // is all ones but EOS.
            let ones = (1u64 << bits) - 1;
            if bits <= 7 && acc & ones == ones {
                return Ok(n);
            }
            // Whole codes among the last bits: look them up with the window
            // padded with ones, and keep only what fits in the real bits.
            let pad = FAST_BITS - bits;
            let w = ((acc << pad) | ((1 << pad) - 1)) & FAST_MASK;
            let e = FAST[w as usize];
            let count = e >> 26;
            if count != 0 && (e >> 16) & 0x1f <= bits {
                out[n] = e as u8;
                n += 1;
                bits -= (e >> 16) & 0x1f;
                continue;
            }
        }
        // A code longer than 12 bits, or the end of the input: look at up to
        // 30 bits, padded with ones as the string's own padding would be.
        let v = if bits >= 30 {
            (acc >> (bits - 30)) as u32
        } else {
            ((acc << (30 - bits)) as u32) | ((1u32 << (30 - bits)) - 1)
        };
        let v = v & ((1 << 30) - 1);
        let (sym, len) = canonical_lookup(v);
        if len > bits {
            // What is left is not a whole code (so the input is exhausted):
            // it must be padding, at most 7 bits, all ones.
            debug_assert!(rest.is_empty());
            let ones = (1u64 << bits) - 1;
            if bits <= 7 && acc & ones == ones {
                return Ok(n);
            }
            return Err(DecodeError::HuffmanPadding);
        }
        if sym == EOS {
            return Err(DecodeError::HuffmanEos);
        }
        out[n] = sym as u8;
        n += 1;
        bits -= len;
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;

    fn enc(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(s, &mut out);
        assert_eq!(out.len(), encoded_len(s));
        out
    }

    fn dec(s: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::new();
        decode(s, &mut out).map(|_| out)
    }

    #[test]
    fn code_is_canonical_and_complete() {
        // Codes follow from the lengths: ordered by (length, symbol), each
        // code is the previous plus one, shifted left by the length increase.
        let mut order: Vec<usize> = (0..257).collect();
        order.sort_by_key(|&s| (CODES[s].1, s));
        let mut code = 0u32;
        let mut prev_len = CODES[order[0]].1;
        for (i, &s) in order.iter().enumerate() {
            let len = CODES[s].1;
            if i > 0 {
                code = (code + 1) << (len - prev_len);
            }
            prev_len = len;
            assert_eq!(CODES[s].0, code, "symbol {s}");
        }
        // Kraft equality: the code tree is full.
        let kraft: u64 = CODES.iter().map(|&(_, l)| 1u64 << (30 - l)).sum();
        assert_eq!(kraft, 1 << 30);
        assert_eq!(CODES[EOS], (0x3fff_ffff, 30));
        assert_eq!(CODES[b'/' as usize], (0x18, 6));
        assert_eq!(CODES[0], (0x1ff8, 13));
        assert_eq!(CODES[10], (0x3fff_fffc, 30));
        assert_eq!(CODES[255], (0x3ff_ffee, 26));
    }

    #[test]
    fn rfc_examples() {
        // RFC 7541 C.4 and C.6.
        let cases: [(&[u8], &str); 8] = [
            (b"www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            (b"no-cache", "a8eb 1064 9cbf"),
            (b"custom-key", "25a8 49e9 5ba9 7d7f"),
            (b"custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            (b"302", "6402"),
            (b"private", "aec3 771a 4b"),
            (
                b"Mon, 21 Oct 2013 20:13:21 GMT",
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            ),
            (
                b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ),
        ];
        for (plain, coded) in cases {
            assert_eq!(enc(plain), hex(coded));
            assert_eq!(dec(&hex(coded)).unwrap(), plain);
        }
    }

    #[test]
    fn every_byte_round_trips() {
        for b in 0..=255u8 {
            for n in 1..6 {
                let s = vec![b; n];
                assert_eq!(dec(&enc(&s)).unwrap(), s, "byte {b} x{n}");
            }
        }
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        assert_eq!(dec(&enc(&all)).unwrap(), all);
        assert_eq!(enc(b""), b"");
        assert_eq!(dec(b"").unwrap(), b"");
    }

    #[test]
    fn rejects_eos() {
        // EOS alone: 30 ones, padded with 2 ones.
        assert_eq!(dec(&[0xff, 0xff, 0xff, 0xff]), Err(DecodeError::HuffmanEos));
        // 'a' (00011) then EOS then padding.
        let mut bits: u64 = 0b00011;
        bits = (bits << 30) | 0x3fff_ffff;
        bits = (bits << 5) | 0b11111; // 40 bits
        let bytes: Vec<u8> = (0..5).rev().map(|i| (bits >> (i * 8)) as u8).collect();
        assert_eq!(dec(&bytes), Err(DecodeError::HuffmanEos));
    }

    #[test]
    fn rejects_bad_padding() {
        // '0' is 00000 (5 bits); padding 000 is not all ones.
        assert_eq!(dec(&[0b0000_0000]), Err(DecodeError::HuffmanPadding));
        // '0' with 111 padding is fine.
        assert_eq!(dec(&[0b0000_0111]).unwrap(), b"0");
        // A whole byte of ones after a complete string: padding of 8 bits.
        let mut s = enc(b"abcd");
        assert_eq!(dec(&s).unwrap(), b"abcd");
        s.push(0xff);
        assert_eq!(dec(&s), Err(DecodeError::HuffmanPadding));
        // A byte of ones alone is 8 bits of padding too.
        assert_eq!(dec(&[0xff]), Err(DecodeError::HuffmanPadding));
        // Symbol 0 (13 bits) followed by the padding 000.
        assert_eq!(dec(&[0xff, 0xc0]), Err(DecodeError::HuffmanPadding));
    }

    /// A bit-by-bit decoder straight from the code table, to check the fast
    /// one against.
    fn reference_decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::new();
        let (mut code, mut len) = (0u32, 0u8);
        for i in 0..src.len() * 8 {
            let bit = (src[i / 8] >> (7 - i % 8)) & 1;
            code = (code << 1) | u32::from(bit);
            len += 1;
            if let Some(sym) = (0..257).find(|&s| CODES[s] == (code, len)) {
                if sym == EOS {
                    return Err(DecodeError::HuffmanEos);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            }
        }
        if len > 7 || code != (1 << len) - 1 {
            return Err(DecodeError::HuffmanPadding);
        }
        Ok(out)
    }

    #[test]
    fn matches_reference_decoder_on_random_input() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ok = 0;
        for i in 0..20_000 {
            let len = (next() % 12) as usize;
            let input: Vec<u8> = if i % 2 == 0 {
                // Arbitrary bytes: mostly invalid.
                (0..len).map(|_| next() as u8).collect()
            } else {
                // A valid string, sometimes damaged at the end.
                let plain: Vec<u8> = (0..len)
                    .map(|_| match next() % 4 {
                        0 => next() as u8,
                        _ => b"abcdefghijklmnopqrstuvwxyz0123456789-/:."[(next() % 40) as usize],
                    })
                    .collect();
                let mut e = enc(&plain);
                match next() % 4 {
                    0 if !e.is_empty() => {
                        e.pop();
                    }
                    1 => e.push(next() as u8),
                    2 if !e.is_empty() => {
                        let j = (next() as usize) % e.len();
                        e[j] ^= 1 << (next() % 8);
                    }
                    _ => {}
                }
                e
            };
            let want = reference_decode(&input);
            assert_eq!(dec(&input), want, "input {input:02x?}");
            ok += want.is_ok() as usize;
        }
        assert!(ok > 5000, "{ok}");
    }

    #[test]
    fn output_bound_holds() {
        // Shortest codes: five bits each.
        let s = vec![b'0'; 1000];
        let e = enc(&s);
        assert_eq!(e.len(), 625);
        let d = dec(&e).unwrap();
        assert_eq!(d.len(), 1000);
        assert!(d.len() <= e.len() * 8 / 5);
    }
}
