//! A client connection without I/O: builds the bytes of requests with its
//! HPACK context, and reads the server's bytes into frames, header blocks,
//! messages and a summary of what was heard.

use std::collections::HashMap;

use crate::frame::{kind, ErrorCode, Frame};
use crate::grpc::{self, MessageReader};
use crate::hpack::{Encoder, Indexing};
use crate::reader::{HeaderBlock, ReadError, Reader, Received};

/// What the server said, summed up over the frames read since the summary
/// was last taken ([`Client::take_heard`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The error code of the last GOAWAY.
    pub goaway: Option<ErrorCode>,
    /// The last stream id of the last GOAWAY.
    pub last_stream: Option<u32>,
    /// `(stream, code)` of every RST_STREAM, in order.
    pub resets: Vec<(u32, ErrorCode)>,
    /// `(stream, grpc-status)` of every header block that has one
    /// (trailers, and trailers-only answers), in order.
    pub statuses: Vec<(u32, String)>,
    /// Every header block, in order.
    pub blocks: Vec<HeaderBlock>,
    /// DATA payload bytes, padding included.
    pub data_bytes: usize,
    /// DATA frames.
    pub data_frames: usize,
    /// `(stream, payload)` of every gRPC message the DATA frames completed.
    pub messages: Vec<(u32, Vec<u8>)>,
    /// The data of every PING the server sent (not of its acknowledgements).
    pub pings: Vec<[u8; 8]>,
    /// Frames, of any type.
    pub frames: usize,
    /// The connection was closed (set by whoever reads the socket).
    pub closed: bool,
}

impl Heard {
    /// The `grpc-status` the server sent on `stream`, if any.
    pub fn status(&self, stream: u32) -> Option<&str> {
        self.statuses
            .iter()
            .find(|(id, _)| *id == stream)
            .map(|(_, status)| status.as_str())
    }

    /// The messages completed on `stream`, in order.
    pub fn messages_on(&self, stream: u32) -> Vec<&[u8]> {
        self.messages
            .iter()
            .filter(|(id, _)| *id == stream)
            .map(|(_, m)| &m[..])
            .collect()
    }
}

/// One client connection's state, without a socket: what a test sends is
/// built here, what the server sent is read here.
#[derive(Debug, Default)]
pub struct Client {
    encoder: Encoder,
    reader: Reader,
    heard: Heard,
    messages: HashMap<u32, MessageReader>,
}

impl Client {
    /// A client with fresh HPACK contexts.
    pub fn new() -> Client {
        Client::default()
    }

    /// The preface and a SETTINGS frame with `settings`.
    pub fn handshake(settings: &[(u16, u32)]) -> Vec<u8> {
        crate::frame::handshake(settings)
    }

    /// The HPACK encoder of the client's header blocks.
    pub fn encoder(&mut self) -> &mut Encoder {
        &mut self.encoder
    }

    /// The reader of the server's bytes.
    pub fn reader(&mut self) -> &mut Reader {
        &mut self.reader
    }

    /// A header block of `fields`, each sent with `indexing`.
    pub fn block(&mut self, fields: &[(&str, &str)], indexing: Indexing) -> Vec<u8> {
        self.encoder.block(fields, indexing)
    }

    /// A header block for a gRPC request to `path` (the fields of
    /// [`grpc::request_fields`]), then `extra`; every field indexed.
    pub fn request_block(&mut self, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut fields = grpc::request_fields(path).to_vec();
        fields.extend_from_slice(extra);
        self.encoder.block(&fields, Indexing::Incremental)
    }

    /// A header block of literals that leave the dynamic table alone.
    pub fn literal_block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        self.encoder.block(fields, Indexing::None)
    }

    /// HEADERS opening a gRPC request to `path` on `stream`: see
    /// [`Client::request_block`].
    pub fn request_headers(
        &mut self,
        stream: u32,
        path: &str,
        extra: &[(&str, &str)],
        end_stream: bool,
    ) -> Frame {
        let block = self.request_block(path, extra);
        Frame::headers(stream, &block, end_stream)
    }

    /// A whole unary gRPC request: HEADERS, then one DATA frame with
    /// `message` as a gRPC message and END_STREAM.
    pub fn request(&mut self, stream: u32, path: &str, message: &[u8]) -> Vec<u8> {
        let mut out = self.request_headers(stream, path, &[], false).to_bytes();
        Frame::data(stream, &grpc::message(message), true).write(&mut out);
        out
    }

    /// Reads the next bytes the server wrote: returns the frames they
    /// complete, and adds them to what was heard.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<Vec<Received>, ReadError> {
        let received = self.reader.read(bytes)?;
        for r in &received {
            self.record(r);
        }
        Ok(received)
    }

    /// What was heard since the last [`Client::take_heard`].
    pub fn heard(&self) -> &Heard {
        &self.heard
    }

    /// Takes what was heard, and starts a new summary.
    pub fn take_heard(&mut self) -> Heard {
        std::mem::take(&mut self.heard)
    }

    /// Notes that the connection closed.
    pub fn set_closed(&mut self) {
        self.heard.closed = true;
    }

    fn record(&mut self, received: &Received) {
        let heard = &mut self.heard;
        let frame = &received.frame;
        heard.frames += 1;
        match frame.kind {
            kind::GOAWAY => {
                heard.goaway = frame.error_code().or(heard.goaway);
                heard.last_stream = frame.last_stream().or(heard.last_stream);
            }
            kind::RST_STREAM => {
                if let Some(code) = frame.error_code() {
                    heard.resets.push((frame.stream, code));
                }
                self.messages.remove(&frame.stream);
            }
            kind::DATA => {
                heard.data_bytes += frame.payload.len();
                heard.data_frames += 1;
                if let Some(data) = frame.data_bytes() {
                    let reader = self.messages.entry(frame.stream).or_default();
                    for message in reader.push(data) {
                        heard.messages.push((frame.stream, message));
                    }
                }
            }
            kind::PING if !frame.has(crate::frame::flag::ACK) => {
                heard.pings.extend(frame.ping_data());
            }
            _ => {}
        }
        if let Some(block) = &received.block {
            if let Some(status) = block.value("grpc-status") {
                heard.statuses.push((block.stream, status));
            }
            if block.end_stream {
                self.messages.remove(&block.stream);
            }
            heard.blocks.push(block.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{flag, PREFACE};
    use crate::hpack::{Decoder, Encoder};

    #[test]
    fn requests_are_headers_then_one_message() {
        let mut client = Client::new();
        let bytes = client.request(1, "/a.B/C", b"hi");
        let (frames, rest) = crate::frame::split_frames(&bytes);
        assert!(rest.is_empty());
        assert_eq!(frames.len(), 2);
        assert_eq!(
            (frames[0].kind, frames[0].flags, frames[0].stream),
            (kind::HEADERS, flag::END_HEADERS, 1)
        );
        let fields = Decoder::new().decode(&frames[0].payload).unwrap();
        let names: Vec<&[u8]> = fields.iter().map(|(n, _)| &n[..]).collect();
        assert_eq!(
            names,
            [
                &b":method"[..],
                b":scheme",
                b":path",
                b":authority",
                b"content-type",
                b"te"
            ]
        );
        assert_eq!(fields[2].1, b"/a.B/C");
        assert_eq!(frames[1], Frame::data(1, b"\0\0\0\0\x02hi", true));
        // The second request to the same path is all indexes.
        let again = client.request_headers(3, "/a.B/C", &[], true);
        assert!(again.payload.iter().all(|b| b & 0x80 != 0), "{again:?}");
        assert!(Client::handshake(&[]).starts_with(PREFACE));
    }

    #[test]
    fn what_the_server_sends_is_summed_up() {
        let mut server = Encoder::new();
        let mut out = Frame::settings(&[]).to_bytes();
        let headers = server.block(&[(":status", "200")], Indexing::Incremental);
        Frame::headers(1, &headers, false).write(&mut out);
        let mut body = grpc::message(b"one");
        body.extend(grpc::message(b"two"));
        Frame::data(1, &body[..6], false).write(&mut out);
        Frame::data(1, &body[6..], false).padded(2).write(&mut out);
        let trailers = server.block(&[("grpc-status", "0")], Indexing::Incremental);
        Frame::headers(1, &trailers, true).write(&mut out);
        let trailers_only = server.block(
            &[(":status", "200"), ("grpc-status", "12")],
            Indexing::Incremental,
        );
        Frame::headers(3, &trailers_only, true).write(&mut out);
        Frame::rst_stream(5, ErrorCode::REFUSED_STREAM).write(&mut out);
        Frame::ping(*b"pingpong").write(&mut out);
        Frame::ping_ack(*b"ackackac").write(&mut out);
        Frame::goaway(3, ErrorCode::NO_ERROR, b"").write(&mut out);

        let mut client = Client::new();
        let (first, second) = out.split_at(30);
        client.receive(first).unwrap();
        client.receive(second).unwrap();
        let heard = client.take_heard();
        assert_eq!(heard.goaway, Some(ErrorCode::NO_ERROR));
        assert_eq!(heard.last_stream, Some(3));
        assert_eq!(heard.resets, [(5, ErrorCode::REFUSED_STREAM)]);
        assert_eq!(
            heard.statuses,
            [(1, "0".to_string()), (3, "12".to_string())]
        );
        assert_eq!(heard.status(3), Some("12"));
        assert_eq!(heard.blocks.len(), 3);
        assert_eq!((heard.data_frames, heard.data_bytes), (2, 16 + 3));
        assert_eq!(heard.messages_on(1), [&b"one"[..], b"two"]);
        assert_eq!(heard.pings, [*b"pingpong"]);
        assert_eq!(heard.frames, 10);
        assert!(!heard.closed);
        assert_eq!(client.heard(), &Heard::default());
    }
}
