//! The server's output, read the way a client reads it: split into frames
//! as its bytes arrive, header blocks put together from HEADERS and
//! CONTINUATION and decoded.

use std::fmt;

use crate::frame::{flag, kind, Frame, FrameHeader};
use crate::hpack::{DecodeError, Decoder, Field};

/// A decoded header block: response headers, trailers, or a trailers-only
/// answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderBlock {
    /// The stream it was sent on.
    pub stream: u32,
    /// Whether its HEADERS frame had END_STREAM.
    pub end_stream: bool,
    /// The fields, in order.
    pub fields: Vec<Field>,
}

impl HeaderBlock {
    /// The value of the first field named `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| n == name.as_bytes())
            .map(|(_, v)| &v[..])
    }

    /// The value of the first field named `name`, as text (invalid UTF-8
    /// replaced).
    pub fn value(&self, name: &str) -> Option<String> {
        self.get(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The fields as text (invalid UTF-8 replaced).
    pub fn strings(&self) -> Vec<(String, String)> {
        self.fields
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }
}

/// One frame the server sent; on the frame that ends a header block
/// (HEADERS or CONTINUATION with END_HEADERS), the decoded block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The frame as sent.
    pub frame: Frame,
    /// The header block this frame completed.
    pub block: Option<HeaderBlock>,
}

/// Output that no well-behaved server sends. The frame that showed it is
/// used up, and an open header block dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// A header block was interrupted by another frame (RFC 9113 section
    /// 6.10: only CONTINUATION of the same stream may follow).
    Interrupted {
        /// The stream of the open block.
        stream: u32,
        /// The frame that came instead.
        by: FrameHeader,
    },
    /// CONTINUATION outside a header block.
    StrayContinuation(FrameHeader),
    /// HEADERS whose padding or priority fields do not fit in it.
    Malformed(FrameHeader),
    /// A header block the HPACK decoder rejected.
    Undecodable {
        /// Its stream.
        stream: u32,
        /// The decoder's complaint.
        error: DecodeError,
        /// The block.
        block: Vec<u8>,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Interrupted { stream, by } => {
                write!(
                    f,
                    "the header block on stream {stream} was interrupted by {by:?}"
                )
            }
            ReadError::StrayContinuation(head) => {
                write!(f, "CONTINUATION outside a header block: {head:?}")
            }
            ReadError::Malformed(head) => {
                write!(f, "HEADERS too short for its padding or priority: {head:?}")
            }
            ReadError::Undecodable {
                stream,
                error,
                block,
            } => write!(f, "stream {stream}: {error}: {block:02x?}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads a server's output, in pieces of any size.
#[derive(Debug, Default)]
pub struct Reader {
    buf: Vec<u8>,
    /// Where the next frame starts in `buf`.
    pos: usize,
    decoder: Decoder,
    /// The open header block: stream, END_STREAM, bytes so far.
    block: Option<(u32, bool, Vec<u8>)>,
}

impl Reader {
    /// A reader that has seen nothing.
    pub fn new() -> Reader {
        Reader::default()
    }

    /// Takes the next bytes the server wrote.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, or `None` until more bytes come.
    pub fn next_frame(&mut self) -> Option<Result<Received, ReadError>> {
        let (frame, len) = Frame::parse(&self.buf[self.pos..])?;
        self.pos += len;
        Some(self.assemble(frame))
    }

    /// Takes `bytes` and returns every frame they complete.
    pub fn read(&mut self, bytes: &[u8]) -> Result<Vec<Received>, ReadError> {
        self.push(bytes);
        let mut received = Vec::new();
        while let Some(next) = self.next_frame() {
            received.push(next?);
        }
        Ok(received)
    }

    /// The bytes of a frame that has not all arrived.
    pub fn unparsed(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Whether a header block is open: its CONTINUATION is still to come.
    pub fn in_header_block(&self) -> bool {
        self.block.is_some()
    }

    /// The HPACK decoder, to change its table size.
    pub fn decoder_mut(&mut self) -> &mut Decoder {
        &mut self.decoder
    }

    fn assemble(&mut self, frame: Frame) -> Result<Received, ReadError> {
        if let Some((stream, _, _)) = &self.block {
            if frame.kind != kind::CONTINUATION || frame.stream != *stream {
                let stream = *stream;
                self.block = None;
                return Err(ReadError::Interrupted {
                    stream,
                    by: frame.header(),
                });
            }
        }
        match frame.kind {
            kind::HEADERS => {
                let fragment = frame
                    .fragment()
                    .ok_or(ReadError::Malformed(frame.header()))?;
                self.block = Some((frame.stream, frame.has(flag::END_STREAM), fragment.to_vec()));
            }
            kind::CONTINUATION => match &mut self.block {
                Some((_, _, block)) => block.extend_from_slice(&frame.payload),
                None => return Err(ReadError::StrayContinuation(frame.header())),
            },
            _ => return Ok(Received { frame, block: None }),
        }
        if !frame.has(flag::END_HEADERS) {
            return Ok(Received { frame, block: None });
        }
        let (stream, end_stream, bytes) = self.block.take().expect("a block was opened above");
        match self.decoder.decode(&bytes) {
            Ok(fields) => Ok(Received {
                frame,
                block: Some(HeaderBlock {
                    stream,
                    end_stream,
                    fields,
                }),
            }),
            Err(error) => Err(ReadError::Undecodable {
                stream,
                error,
                block: bytes,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ErrorCode;
    use crate::hpack::{Encoder, Indexing};

    fn response_block(encoder: &mut Encoder) -> Vec<u8> {
        encoder.block(
            &[(":status", "200"), ("content-type", "application/grpc")],
            Indexing::Incremental,
        )
    }

    #[test]
    fn frames_arrive_in_pieces_and_blocks_are_decoded() {
        let mut encoder = Encoder::new();
        let block = response_block(&mut encoder);
        let mut bytes = Frame::headers(1, &block[..2], false)
            .without_flags(flag::END_HEADERS)
            .to_bytes();
        Frame::continuation(1, &block[2..], true).write(&mut bytes);
        Frame::data(1, b"\0\0\0\0\0", false).write(&mut bytes);
        Frame::rst_stream(1, ErrorCode::CANCEL).write(&mut bytes);

        let mut reader = Reader::new();
        let mut received = Vec::new();
        for piece in bytes.chunks(4) {
            received.extend(reader.read(piece).unwrap());
            let open = received.len() == 1;
            assert_eq!(reader.in_header_block(), open);
        }
        assert!(reader.unparsed().is_empty());
        let kinds: Vec<u8> = received.iter().map(|r| r.frame.kind).collect();
        assert_eq!(
            kinds,
            [
                kind::HEADERS,
                kind::CONTINUATION,
                kind::DATA,
                kind::RST_STREAM
            ]
        );
        let block = received[1].block.as_ref().unwrap();
        assert_eq!((block.stream, block.end_stream), (1, false));
        assert_eq!(block.value(":status").as_deref(), Some("200"));
        assert_eq!(
            block.strings()[1],
            ("content-type".to_string(), "application/grpc".to_string())
        );
        assert!(received.iter().filter(|r| r.block.is_some()).count() == 1);
    }

    #[test]
    fn padded_headers_with_priority_are_read() {
        let mut encoder = Encoder::new();
        let block = response_block(&mut encoder);
        let bytes = Frame::headers(3, &block, true)
            .with_priority(crate::frame::Priority {
                dependency: 1,
                exclusive: false,
                weight: 0,
            })
            .padded(4)
            .to_bytes();
        let received = Reader::new().read(&bytes).unwrap();
        let block = received[0].block.as_ref().unwrap();
        assert_eq!((block.stream, block.end_stream), (3, true));
        assert_eq!(block.fields.len(), 2);
    }

    #[test]
    fn what_a_server_must_not_send_is_an_error() {
        let mut reader = Reader::new();
        let open = Frame::headers(1, &[0x88], false).without_flags(flag::END_HEADERS);
        let mut bytes = open.to_bytes();
        Frame::ping([0; 8]).write(&mut bytes);
        assert!(matches!(
            reader.read(&bytes),
            Err(ReadError::Interrupted { stream: 1, .. })
        ));
        let stray = Frame::continuation(1, &[0x88], true).to_bytes();
        assert!(matches!(
            Reader::new().read(&stray),
            Err(ReadError::StrayContinuation(_))
        ));
        let bad = Frame::headers(1, &[0x80], true).to_bytes();
        assert!(matches!(
            Reader::new().read(&bad),
            Err(ReadError::Undecodable { stream: 1, .. })
        ));
        let short = Frame::new(kind::HEADERS, flag::PADDED | flag::END_HEADERS, 1, [9]).to_bytes();
        assert!(matches!(
            Reader::new().read(&short),
            Err(ReadError::Malformed(_))
        ));
    }
}
