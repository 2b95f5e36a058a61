//! A client's view of the server's output: parses every frame the server
//! writes and asserts what must hold of any of them, whatever the client
//! sent.

use std::collections::HashMap;

use pajamax::h2::frame::{flag, kind, FrameHeader, HEADER_LEN, MAX_WINDOW};
use pajamax::h2::hpack::Decoder;

/// What the server has done on one stream so far.
#[derive(Default)]
struct StreamState {
    /// A complete header block (response headers) was sent.
    headers_sent: bool,
    /// END_STREAM or RST_STREAM was sent: no HEADERS, CONTINUATION or DATA
    /// may follow.
    ended: bool,
}

/// Checks the byte stream a server writes to one connection.
pub struct ServerOutput {
    unparsed: Vec<u8>,
    decoder: Decoder,
    frames: usize,
    /// The header block being received: stream, END_STREAM, bytes.
    block: Option<(u32, bool, Vec<u8>)>,
    streams: HashMap<u32, StreamState>,
    /// A GOAWAY with an error code was sent: nothing may follow it.
    failed: bool,
    /// Print every frame and header block (`PAJAMAX_FUZZ_TRACE` set), to
    /// see what an input does when running it alone.
    trace: bool,
}

impl Default for ServerOutput {
    fn default() -> ServerOutput {
        ServerOutput::new()
    }
}

impl ServerOutput {
    /// A checker that has seen nothing yet.
    pub fn new() -> ServerOutput {
        ServerOutput {
            unparsed: Vec::new(),
            decoder: Decoder::new(4096),
            frames: 0,
            block: None,
            streams: HashMap::new(),
            failed: false,
            trace: crate::trace_enabled(),
        }
    }

    /// Takes the next bytes the server wrote and checks every frame they
    /// complete.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.unparsed.extend_from_slice(bytes);
        let mut pos = 0;
        while let Some(head) = FrameHeader::parse(&self.unparsed[pos..]) {
            let end = pos + HEADER_LEN + head.len as usize;
            if end > self.unparsed.len() {
                break;
            }
            let payload = self.unparsed[pos + HEADER_LEN..end].to_vec();
            self.frame(head, &payload);
            pos = end;
        }
        self.unparsed.drain(..pos);
    }

    /// The server's output ends here: it must end on a frame boundary and
    /// outside a header block.
    pub fn finish(&self) {
        assert!(
            self.unparsed.is_empty(),
            "server output ends inside a frame: {:02x?}",
            self.unparsed
        );
        assert!(
            self.block.is_none(),
            "server output ends inside a header block"
        );
    }

    fn frame(&mut self, head: FrameHeader, payload: &[u8]) {
        if self.trace {
            eprintln!(
                "server: {head:?} {:?}",
                String::from_utf8_lossy(&payload[..payload.len().min(64)])
            );
        }
        assert!(
            !self.failed,
            "server sent {head:?} after a GOAWAY with an error code"
        );
        if self.frames == 0 {
            assert!(
                head.kind == kind::SETTINGS && !head.has(flag::ACK),
                "server's first frame is not SETTINGS: {head:?}"
            );
        }
        self.frames += 1;
        if let Some((stream, _, _)) = &self.block {
            assert!(
                head.kind == kind::CONTINUATION && head.stream == *stream,
                "server interrupted a header block with {head:?}"
            );
        }
        match head.kind {
            kind::SETTINGS => {
                assert_eq!(head.stream, 0, "SETTINGS on a stream");
                if head.has(flag::ACK) {
                    assert!(payload.is_empty(), "SETTINGS ACK with a payload");
                } else {
                    assert_eq!(payload.len() % 6, 0, "SETTINGS length");
                }
            }
            kind::PING => {
                assert_eq!(head.stream, 0, "PING on a stream");
                assert_eq!(payload.len(), 8, "PING length");
            }
            kind::GOAWAY => {
                assert_eq!(head.stream, 0, "GOAWAY on a stream");
                assert!(payload.len() >= 8, "GOAWAY shorter than 8 bytes");
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                if code != 0 {
                    self.failed = true;
                }
            }
            kind::WINDOW_UPDATE => {
                assert_eq!(payload.len(), 4, "WINDOW_UPDATE length");
                let increment =
                    u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                assert!(
                    increment & MAX_WINDOW != 0,
                    "server sent a WINDOW_UPDATE of 0 on stream {}",
                    head.stream
                );
            }
            kind::RST_STREAM => {
                assert_ne!(head.stream, 0, "RST_STREAM on stream 0");
                assert_eq!(payload.len(), 4, "RST_STREAM length");
                self.streams.entry(head.stream).or_default().ended = true;
            }
            kind::DATA => {
                let state = self.open_stream(head);
                if head.has(flag::END_STREAM) {
                    state.ended = true;
                }
                assert!(
                    head.flags & !flag::END_STREAM == 0,
                    "unexpected DATA flags {head:?}"
                );
            }
            kind::HEADERS => {
                self.open_stream(head);
                assert!(
                    head.flags & !(flag::END_STREAM | flag::END_HEADERS) == 0,
                    "unexpected HEADERS flags {head:?}"
                );
                self.block = Some((head.stream, head.has(flag::END_STREAM), payload.to_vec()));
                if head.has(flag::END_HEADERS) {
                    self.end_block();
                }
            }
            kind::CONTINUATION => {
                let Some((_, _, block)) = &mut self.block else {
                    panic!("CONTINUATION outside a header block: {head:?}");
                };
                assert!(
                    head.flags & !flag::END_HEADERS == 0,
                    "unexpected CONTINUATION flags {head:?}"
                );
                block.extend_from_slice(payload);
                if head.has(flag::END_HEADERS) {
                    self.end_block();
                }
            }
            other => panic!("server sent a frame of type {other:#x}"),
        }
    }

    /// A stream the server may still send HEADERS or DATA on.
    fn open_stream(&mut self, head: FrameHeader) -> &mut StreamState {
        assert!(
            head.stream % 2 == 1,
            "server sent {head:?} on stream 0 or an even stream"
        );
        let state = self.streams.entry(head.stream).or_default();
        assert!(
            !state.ended,
            "server sent {head:?} after ending or resetting the stream"
        );
        state
    }

    fn end_block(&mut self) {
        let (stream, end_stream, block) = self.block.take().expect("a block is open");
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if let Err(err) = self.decoder.decode(&block, |name, value| {
            fields.push((name.to_vec(), value.to_vec()))
        }) {
            panic!("server sent an undecodable header block ({err}): {block:02x?}");
        }
        if self.trace {
            for (name, value) in &fields {
                eprintln!(
                    "    {}: {}",
                    String::from_utf8_lossy(name),
                    String::from_utf8_lossy(value)
                );
            }
        }
        let state = self.streams.entry(stream).or_default();
        if state.headers_sent {
            // Trailers: they end the stream and carry grpc-status.
            assert!(end_stream, "a second header block without END_STREAM");
            assert!(
                fields.iter().all(|(name, _)| !name.starts_with(b":")),
                "pseudo-header in trailers: {fields:?}"
            );
            assert!(
                fields.iter().any(|(name, _)| name == b"grpc-status"),
                "trailers without grpc-status: {fields:?}"
            );
        } else {
            assert!(
                fields.first().is_some_and(|(name, _)| name == b":status"),
                "response headers do not start with :status: {fields:?}"
            );
            state.headers_sent = true;
        }
        if end_stream {
            state.ended = true;
        }
    }
}
