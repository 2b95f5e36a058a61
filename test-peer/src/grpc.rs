//! gRPC over HTTP/2 as bytes: the request header fields and the
//! length-prefixed messages of request and response bodies.

/// Length of a message's prefix: a compressed flag, then a 4-byte length.
pub const PREFIX_LEN: usize = 5;

/// The header fields of a gRPC request to `path` (`/package.Service/Method`)
/// as grpc-go orders them, without the optional ones.
pub fn request_fields(path: &str) -> [(&str, &str); 6] {
    [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
}

/// Appends `payload` as one uncompressed message: prefix and payload.
pub fn write_message(out: &mut Vec<u8>, payload: &[u8]) {
    out.push(0);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// `payload` as one uncompressed message.
pub fn message(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + payload.len());
    write_message(&mut out, payload);
    out
}

/// Splits a body into its complete messages' payloads (the compressed
/// flag is not looked at); returns them and what is left (the start of a
/// message that has not all arrived).
pub fn split_messages(mut body: &[u8]) -> (Vec<Vec<u8>>, &[u8]) {
    let mut messages = Vec::new();
    while body.len() >= PREFIX_LEN {
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        let Some(payload) = body.get(PREFIX_LEN..PREFIX_LEN + len) else {
            break;
        };
        messages.push(payload.to_vec());
        body = &body[PREFIX_LEN + len..];
    }
    (messages, body)
}

/// Reassembles the messages of one stream from its DATA frames, which may
/// cut them anywhere.
#[derive(Debug, Default, Clone)]
pub struct MessageReader {
    buf: Vec<u8>,
}

impl MessageReader {
    /// A reader that has seen nothing.
    pub fn new() -> MessageReader {
        MessageReader::default()
    }

    /// Takes the next data of the stream; returns the payloads of the
    /// messages it completes.
    pub fn push(&mut self, data: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(data);
        let (messages, rest) = split_messages(&self.buf);
        let used = self.buf.len() - rest.len();
        self.buf.drain(..used);
        messages
    }

    /// Bytes of a message not complete yet.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_a_flag_and_a_big_endian_length() {
        assert_eq!(message(b"hi"), [0, 0, 0, 0, 2, b'h', b'i']);
        assert_eq!(message(b""), [0, 0, 0, 0, 0]);
        let long = vec![7; 0x0102];
        assert_eq!(&message(&long)[..5], &[0, 0, 0, 1, 2]);
    }

    #[test]
    fn messages_are_split_and_reassembled() {
        let mut body = message(b"one");
        body.extend(message(b""));
        body.extend(message(b"three"));
        let (messages, rest) = split_messages(&body[..body.len() - 2]);
        assert_eq!(messages, [b"one".to_vec(), Vec::new()]);
        assert_eq!(rest, &body[8 + 5..body.len() - 2]);

        let mut reader = MessageReader::new();
        let mut got = Vec::new();
        for piece in body.chunks(3) {
            got.extend(reader.push(piece));
        }
        assert_eq!(got, [b"one".to_vec(), Vec::new(), b"three".to_vec()]);
        assert_eq!(reader.pending(), 0);
    }
}
