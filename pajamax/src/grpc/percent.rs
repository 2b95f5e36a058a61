//! Percent-encoding of `grpc-message` (gRPC over HTTP/2, "Responses").

/// Appends `message` percent-encoded: bytes outside printable ASCII, and
/// `%` itself, become `%XX`.
///
/// ```
/// let mut out = Vec::new();
/// pajamax::grpc::percent::encode("50% \u{2713}", &mut out);
/// assert_eq!(out, b"50%25 %E2%9C%93");
/// ```
pub fn encode(message: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in message.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
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
    fn keeps_truncated_escapes() {
        assert_eq!(decode(b"100%"), "100%");
        assert_eq!(decode(b"%4"), "%4");
    }
}
