//! The HPACK Huffman code (RFC 7541 Appendix B).
//!
//! The code is canonical: each symbol's code follows from the code lengths
//! alone (symbols in order of length, then of value, take consecutive
//! codes). So only the lengths are written here; the codes, and the tables
//! that decode them a bit at a time, are computed at compile time. The
//! tests check every code against the `hpack` crate's decoder and the RFC's
//! examples.

/// Code length in bits of each symbol 0..=255, then EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

/// The code of each symbol, right-aligned, assigned canonically.
const CODES: [u32; 257] = {
    let mut codes = [0u32; 257];
    let mut next = 0u32;
    let mut len = 1;
    while len <= 30 {
        let mut symbol = 0;
        while symbol < 257 {
            if LENGTHS[symbol] == len {
                codes[symbol] = next;
                next += 1;
            }
            symbol += 1;
        }
        next <<= 1;
        len += 1;
    }
    codes
};

/// Symbols in code order: by length, then by value.
const SORTED: [u16; 257] = {
    let mut sorted = [0u16; 257];
    let mut n = 0;
    let mut len = 1;
    while len <= 30 {
        let mut symbol = 0;
        while symbol < 257 {
            if LENGTHS[symbol] == len {
                sorted[n] = symbol as u16;
                n += 1;
            }
            symbol += 1;
        }
        len += 1;
    }
    sorted
};

/// For each code length: the first code of that length, the number of
/// codes of that length, and where its symbols start in [`SORTED`].
const BY_LENGTH: [(u32, u16, u16); 31] = {
    let mut table = [(0u32, 0u16, 0u16); 31];
    let mut start = 0u16;
    let mut len = 1;
    while len <= 30 {
        let mut count = 0u16;
        let mut first = u32::MAX;
        let mut symbol = 0;
        while symbol < 257 {
            if LENGTHS[symbol] == len {
                if CODES[symbol] < first {
                    first = CODES[symbol];
                }
                count += 1;
            }
            symbol += 1;
        }
        table[len as usize] = (first, count, start);
        start += count;
        len += 1;
    }
    table
};

/// A Huffman-coded string that does not decode (RFC 7541 section 5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HuffmanError {
    /// The string codes the EOS symbol.
    Eos,
    /// The padding is longer than 7 bits or not the high bits of EOS.
    Padding,
}

/// Appends the decoding of the Huffman-coded `coded` to `out`.
pub fn decode(coded: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let mut code = 0u32;
    let mut len = 0usize;
    for &byte in coded {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            let (first, count, start) = BY_LENGTH[len];
            if count > 0 && code >= first && code - first < u32::from(count) {
                let symbol = SORTED[usize::from(start) + (code - first) as usize];
                if symbol == 256 {
                    return Err(HuffmanError::Eos);
                }
                out.push(symbol as u8);
                code = 0;
                len = 0;
            } else if len == 30 {
                // Every 30-bit string is a code: not reached.
                return Err(HuffmanError::Eos);
            }
        }
    }
    // What is left must be fewer than 8 bits, all ones (a prefix of EOS).
    if len > 7 || code != (1 << len) - 1 {
        return Err(HuffmanError::Padding);
    }
    Ok(())
}

/// The length in bytes of `s` Huffman coded.
pub fn encoded_len(s: &[u8]) -> usize {
    let bits: usize = s
        .iter()
        .map(|&b| usize::from(LENGTHS[usize::from(b)]))
        .sum();
    bits.div_ceil(8)
}

/// Appends `s` Huffman coded, the last byte padded with the high bits of
/// EOS (ones).
pub fn encode(s: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits = 0;
    for &b in s {
        let len = u32::from(LENGTHS[usize::from(b)]);
        acc = (acc << len) | u64::from(CODES[usize::from(b)]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1 << pad) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coded(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(s, &mut out);
        assert_eq!(out.len(), encoded_len(s));
        out
    }

    #[test]
    fn the_code_is_complete_and_ends_with_eos() {
        // A complete prefix code: the lengths fill the code space exactly
        // (Kraft's sum is 1), and EOS is thirty bits of ones.
        let space: u64 = LENGTHS.iter().map(|&l| 1u64 << (30 - l)).sum();
        assert_eq!(space, 1 << 30);
        assert_eq!(CODES[256], (1 << 30) - 1);
        assert_eq!((CODES[b'0' as usize], LENGTHS[b'0' as usize]), (0x0, 5));
        assert_eq!((CODES[b'a' as usize], LENGTHS[b'a' as usize]), (0x3, 5));
        assert_eq!((CODES[0], LENGTHS[0]), (0x1ff8, 13));
    }

    #[test]
    fn rfc7541_appendix_c_strings() {
        // C.4.1, C.4.2, C.6.1.
        let cases: [(&str, &[u8]); 4] = [
            (
                "www.example.com",
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
            ),
            ("no-cache", &[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf]),
            ("302", &[0x64, 0x02]),
            ("private", &[0xae, 0xc3, 0x77, 0x1a, 0x4b]),
        ];
        for (text, code) in cases {
            assert_eq!(coded(text.as_bytes()), code, "{text}");
        }
    }

    fn decoded(coded: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode(coded, &mut out).map(|()| out)
    }

    #[test]
    fn decoding_undoes_encoding_and_checks_the_padding() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decoded(&coded(&all)).unwrap(), all);
        for b in 0..=255u8 {
            assert_eq!(decoded(&coded(&[b, b'x', b])).unwrap(), [b, b'x', b]);
        }
        assert_eq!(decoded(&[]).unwrap(), b"");
        // 'a' is 00011 (5 bits): padded with three ones.
        assert_eq!(decoded(&[0b0001_1111]).unwrap(), b"a");
        assert_eq!(decoded(&[0b0001_1011]), Err(HuffmanError::Padding));
        // A whole byte of padding.
        assert_eq!(decoded(&[0b0001_1111, 0xff]), Err(HuffmanError::Padding));
        // EOS itself: thirty ones.
        assert_eq!(decoded(&[0xff, 0xff, 0xff, 0xfc]), Err(HuffmanError::Eos));
    }

    #[test]
    fn every_byte_decodes_with_the_hpack_crate() {
        let mut decoder = hpack::huffman::HuffmanDecoder::new();
        for b in 0..=255u8 {
            for s in [
                vec![b],
                vec![b, b'a', b],
                vec![b'x'; 7].into_iter().chain([b]).collect(),
            ] {
                assert_eq!(decoder.decode(&coded(&s)).unwrap(), s, "byte {b}");
            }
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decoder.decode(&coded(&all)).unwrap(), all);
    }
}
