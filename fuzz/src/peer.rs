//! A client's view of the server's output: parses every frame the server
//! writes and asserts what must hold of any of them, whatever the client
//! sent.

use std::collections::HashMap;

use pajamax_test_peer::{flag, kind, FrameHeader, HeaderBlock, Reader, Received};

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
    /// Splits the output into frames and decodes the header blocks; it
    /// fails on a header block interrupted by another frame, CONTINUATION
    /// outside a block and a block that does not decode.
    reader: Reader,
    frames: usize,
    streams: HashMap<u32, StreamState>,
    /// A GOAWAY with an error code was sent: nothing may follow it.
    failed: bool,
    /// The last stream id of the last GOAWAY sent: a stream above it was
    /// refused, so nothing but RST_STREAM may go on it.
    goaway_last: u32,
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
            reader: Reader::new(),
            frames: 0,
            streams: HashMap::new(),
            failed: false,
            goaway_last: u32::MAX,
            trace: crate::trace_enabled(),
        }
    }

    /// Takes the next bytes the server wrote and checks every frame they
    /// complete.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.reader.push(bytes);
        while let Some(next) = self.reader.next_frame() {
            match next {
                Ok(received) => self.frame(received),
                Err(err) => panic!("server output: {err}"),
            }
        }
    }

    /// The server's output ends here: it must end on a frame boundary and
    /// outside a header block.
    pub fn finish(&self) {
        assert!(
            self.reader.unparsed().is_empty(),
            "server output ends inside a frame: {:02x?}",
            self.reader.unparsed()
        );
        assert!(
            !self.reader.in_header_block(),
            "server output ends inside a header block"
        );
    }

    fn frame(&mut self, received: Received) {
        let Received { frame, block } = received;
        let head = frame.header();
        let payload = &frame.payload;
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
        match head.kind {
            kind::SETTINGS => {
                assert_eq!(head.stream, 0, "SETTINGS on a stream");
                if head.has(flag::ACK) {
                    assert!(payload.is_empty(), "SETTINGS ACK with a payload");
                } else {
                    assert!(frame.settings_params().is_some(), "SETTINGS length");
                }
            }
            kind::PING => {
                assert_eq!(head.stream, 0, "PING on a stream");
                assert_eq!(payload.len(), 8, "PING length");
            }
            kind::GOAWAY => {
                assert_eq!(head.stream, 0, "GOAWAY on a stream");
                assert!(payload.len() >= 8, "GOAWAY shorter than 8 bytes");
                if frame.error_code().is_some_and(|code| code.0 != 0) {
                    self.failed = true;
                }
                if let Some(last) = frame.last_stream() {
                    // RFC 9113 section 6.8: the last stream id of a GOAWAY
                    // never grows.
                    assert!(
                        last <= self.goaway_last,
                        "GOAWAY names stream {last} after one named {}",
                        self.goaway_last
                    );
                    self.goaway_last = last;
                }
            }
            kind::WINDOW_UPDATE => {
                assert_eq!(payload.len(), 4, "WINDOW_UPDATE length");
                assert!(
                    frame.increment() != Some(0),
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
            }
            kind::CONTINUATION => {
                assert!(
                    head.flags & !flag::END_HEADERS == 0,
                    "unexpected CONTINUATION flags {head:?}"
                );
            }
            other => panic!("server sent a frame of type {other:#x}"),
        }
        if let Some(block) = block {
            self.end_block(block);
        }
    }

    /// A stream the server may still send HEADERS or DATA on.
    fn open_stream(&mut self, head: FrameHeader) -> &mut StreamState {
        assert!(
            head.stream % 2 == 1,
            "server sent {head:?} on stream 0 or an even stream"
        );
        assert!(
            head.stream <= self.goaway_last,
            "server sent {head:?} on a stream above the last one its GOAWAY named ({})",
            self.goaway_last
        );
        let state = self.streams.entry(head.stream).or_default();
        assert!(
            !state.ended,
            "server sent {head:?} after ending or resetting the stream"
        );
        state
    }

    fn end_block(&mut self, block: HeaderBlock) {
        let HeaderBlock {
            stream,
            end_stream,
            fields,
        } = block;
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
