//! Percent-encoding of `grpc-message` (gRPC over HTTP/2, "Responses").

/// Appends `message` percent-encoded: bytes outside printable ASCII, `%`
/// itself, and a space that starts or ends the message become `%XX`. An
/// HTTP/2 field value must not start or end with a space (RFC 9113
/// section 8.2.1): a client may drop the field or the response.
///
/// ```
/// let mut out = Vec::new();
/// pajamax::grpc::percent::encode(" 50% \u{2713} ", &mut out);
/// assert_eq!(out, b"%2050%25 %E2%9C%93%20");
/// ```
pub fn encode(message: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let last = message.len().wrapping_sub(1);
    for (i, &b) in message.as_bytes().iter().enumerate() {
        let at_an_end = b == b' ' && (i == 0 || i == last);
        if (0x20..=0x7e).contains(&b) && b != b'%' && !at_an_end {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        }
    }
}

/// Decodes a percent-encoded `grpc-message`; a malformed `%` sequence is
/// kept as it is, as the protocol asks.
///
/// ```
/// assert_eq!(pajamax::grpc::percent::decode(b"a%20b%zz%E2%9C%93"), "a b%zz\u{2713}");
/// ```
pub fn decode(encoded: &[u8]) -> String {
    let mut out = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if encoded[i] == b'%' && i + 2 < encoded.len() {
            if let (Some(hi), Some(lo)) = (hex(encoded[i + 1]), hex(encoded[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(encoded[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte_value() {
        let text: String = (1u32..0x250).filter_map(char::from_u32).collect();
        let mut encoded = Vec::new();
        encode(&text, &mut encoded);
        assert!(encoded.iter().all(|b| (0x20..=0x7e).contains(b)));
        assert_eq!(decode(&encoded), text);
    }

    #[test]
    fn spaces_at_either_end_are_encoded() {
        // A field value with a space at either end is malformed in HTTP/2.
        for (message, expected) in [
            (" ", &b"%20"[..]),
            ("  ", b"%20%20"),
            (" a b ", b"%20a b%20"),
            ("a  b", b"a  b"),
        ] {
            let mut encoded = Vec::new();
            encode(message, &mut encoded);
            assert_eq!(encoded, expected, "{message:?}");
            assert_eq!(crate::h2::fields::value_problem(&encoded), None);
            assert_eq!(decode(&encoded), message);
        }
    }

    #[test]
    fn keeps_truncated_escapes() {
        assert_eq!(decode(b"100%"), "100%");
        assert_eq!(decode(b"%4"), "%4");
    }
}
