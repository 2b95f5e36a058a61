//! Prefix-coded integers (RFC 7541 section 5.1).

use super::decoder::DecodeError;

/// Largest integer the decoder accepts. Anything that counts bytes (string
/// lengths, table sizes, indices) is far below this in practice.
pub(crate) const MAX_INT: u64 = u32::MAX as u64;

/// Appends `value` with an N-bit prefix; `flags` holds the bits above the prefix.
#[inline]
pub(crate) fn encode(value: usize, prefix_bits: u8, flags: u8, dst: &mut Vec<u8>) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        dst.push(flags | value as u8);
        return;
    }
    dst.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        dst.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    dst.push(rest as u8);
}

/// Reads an integer with an N-bit prefix starting at `buf[*pos]`, which must
/// exist, and advances `*pos` past it.
#[inline]
pub(crate) fn decode(buf: &[u8], pos: &mut usize, prefix_bits: u8) -> Result<usize, DecodeError> {
    let max = ((1u16 << prefix_bits) - 1) as u8;
    let first = buf[*pos] & max;
    *pos += 1;
    if first < max {
        return Ok(first as usize);
    }
    decode_rest(buf, pos, max as u64)
}

/// The continuation bytes. At most five are read (35 bits), enough for any
/// value up to `MAX_INT`; longer encodings are rejected as overflow.
#[cold]
fn decode_rest(buf: &[u8], pos: &mut usize, mut value: u64) -> Result<usize, DecodeError> {
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos).ok_or(DecodeError::Truncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            return Err(DecodeError::IntegerOverflow);
        }
    }
    if value > MAX_INT {
        return Err(DecodeError::IntegerOverflow);
    }
    usize::try_from(value).map_err(|_| DecodeError::IntegerOverflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(value: usize, prefix: u8, flags: u8) -> Vec<u8> {
        let mut v = Vec::new();
        encode(value, prefix, flags, &mut v);
        v
    }

    fn dec(buf: &[u8], prefix: u8) -> Result<(usize, usize), DecodeError> {
        let mut pos = 0;
        decode(buf, &mut pos, prefix).map(|v| (v, pos))
    }

    #[test]
    fn rfc_c1_1_ten_in_5_bit_prefix() {
        assert_eq!(enc(10, 5, 0), [0b0000_1010]);
        assert_eq!(dec(&[0b1110_1010], 5), Ok((10, 1)));
    }

    #[test]
    fn rfc_c1_2_1337_in_5_bit_prefix() {
        assert_eq!(enc(1337, 5, 0), [0b0001_1111, 0b1001_1010, 0b0000_1010]);
        assert_eq!(
            dec(&[0b1111_1111, 0b1001_1010, 0b0000_1010], 5),
            Ok((1337, 3))
        );
    }

    #[test]
    fn rfc_c1_3_42_at_octet_boundary() {
        assert_eq!(enc(42, 8, 0), [42]);
        assert_eq!(dec(&[42], 8), Ok((42, 1)));
    }

    #[test]
    fn flags_are_kept_and_ignored() {
        assert_eq!(enc(3, 7, 0x80), [0x83]);
        assert_eq!(enc(127, 7, 0x80), [0xff, 0x00]);
        assert_eq!(dec(&[0xff, 0x00], 7), Ok((127, 2)));
        assert_eq!(enc(62, 6, 0x40), [0x7e]);
        assert_eq!(enc(63, 6, 0x40), [0x7f, 0x00]);
    }

    #[test]
    fn round_trips() {
        for prefix in 1..=8u8 {
            for v in (0..5000).chain([u32::MAX as usize - 1, u32::MAX as usize]) {
                let e = enc(v, prefix, 0);
                assert_eq!(dec(&e, prefix), Ok((v, e.len())), "{v} prefix {prefix}");
            }
        }
    }

    #[test]
    fn truncated() {
        assert_eq!(dec(&[0x1f], 5), Err(DecodeError::Truncated));
        assert_eq!(dec(&[0x1f, 0x9a], 5), Err(DecodeError::Truncated));
        assert_eq!(dec(&[0xff, 0x80, 0x80], 8), Err(DecodeError::Truncated));
    }

    #[test]
    fn overflow() {
        // 2^32 does not fit.
        let e = enc(1 << 32, 5, 0);
        assert_eq!(dec(&e, 5), Err(DecodeError::IntegerOverflow));
        // Six continuation bytes, even if they only add zeros.
        assert_eq!(
            dec(&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 5),
            Err(DecodeError::IntegerOverflow)
        );
        assert_eq!(
            dec(
                &[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
                5
            ),
            Err(DecodeError::IntegerOverflow)
        );
        // Five continuation bytes with a big last one.
        assert_eq!(
            dec(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0x7f], 5),
            Err(DecodeError::IntegerOverflow)
        );
    }
}
