//! A client's view of the server's output: parses every frame the server
//! writes and asserts what must hold of any of them, whatever the client
//! sent.
//!
//! Among the checks, the gRPC messages of the DATA of each stream whose
//! response headers said `content-type: application/grpc` are read as a
//! client reads them, across DATA frames: every flag byte is 0 or 1
//! (never a mark of the server's own, such as its 0x80 for a message to
//! go uncompressed or its 0xff for one whose encoding did not finish), 1
//! only on a stream whose response headers said `grpc-encoding: gzip` or
//! `deflate`; a compressed message is in that format, gzip or zlib's (the
//! first of each stream inflates, the others start as the format does); a
//! stream that ends (END_STREAM) ends on a message boundary: no length
//! prefix promises more than the stream carries. DATA comes after the
//! response headers.

use std::collections::HashMap;
use std::io::Read;

use flate2::read::{MultiGzDecoder, ZlibDecoder};

use pajamax_test_peer::{flag, kind, FrameHeader, HeaderBlock, Reader, Received};

/// What the server has done on one stream so far.
#[derive(Default)]
struct StreamState {
    /// A complete header block (response headers) was sent.
    headers_sent: bool,
    /// END_STREAM or RST_STREAM was sent: no HEADERS, CONTINUATION or DATA
    /// may follow.
    ended: bool,
    /// The response headers said `content-type: application/grpc...`:
    /// its DATA carries gRPC messages (not, say, the text of a 415).
    grpc: bool,
    /// How the response headers said the messages are compressed
    /// (`grpc-encoding`).
    compression: Compression,
    /// The gRPC messages of its DATA so far.
    messages: Messages,
}

/// A compression the server may answer with, as `grpc-encoding` names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Compression {
    /// No `grpc-encoding`, or one the server does not compress with.
    #[default]
    None,
    /// `gzip` (RFC 1952).
    Gzip,
    /// `deflate`: the zlib format (RFC 1950).
    Deflate,
}

impl Compression {
    fn of(value: &[u8]) -> Compression {
        match value {
            b"gzip" => Compression::Gzip,
            b"deflate" => Compression::Deflate,
            _ => Compression::None,
        }
    }

    /// The shortest message in the format: a gzip member's header and
    /// trailer, or a zlib stream's header, an empty final block and its
    /// Adler-32.
    fn min_len(self) -> usize {
        match self {
            Compression::Gzip => GZIP_MIN_LEN,
            _ => ZLIB_MIN_LEN,
        }
    }

    /// Whether a message's first bytes start the format.
    fn starts(self, magic: [u8; 3]) -> bool {
        match self {
            Compression::Gzip => magic == GZIP_MAGIC,
            // deflate with a window of at most 32 KiB, no preset
            // dictionary, and the header's check (RFC 1950 section 2.2).
            _ => {
                magic[0] & 0x0f == 8
                    && magic[0] >> 4 <= 7
                    && magic[1] & 0x20 == 0
                    && u16::from_be_bytes([magic[0], magic[1]]).is_multiple_of(31)
            }
        }
    }
}

/// The largest compressed message whose body is kept to be inflated (the
/// service's answers are far smaller); a larger one is only skipped.
const INFLATE_LIMIT: usize = 16 << 10;

/// The first bytes of a gzip member (RFC 1952): its magic and the deflate
/// method.
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// A gzip member's header and trailer, without any data.
const GZIP_MIN_LEN: usize = 18;

/// A zlib stream of no data: its header, an empty final block, its
/// Adler-32.
const ZLIB_MIN_LEN: usize = 8;

/// The gRPC messages of one stream's DATA, read as they arrive, whatever
/// the DATA frames' bounds: the prefix of the message under way and how
/// much of its body is still to come. Every compressed message must start
/// as its format (gzip or zlib's) does; the first one of the stream (at
/// most [`INFLATE_LIMIT`] bytes) is kept until it is whole and inflated.
/// Inflating each one would double what a compressed answer costs the
/// target, for little: the server deflates every message the same way.
#[derive(Default)]
struct Messages {
    /// The 5-byte prefix of the message under way, as far as it came.
    prefix: [u8; 5],
    prefix_len: usize,
    /// Bytes of the message under way still to come, once its prefix is
    /// whole.
    remaining: usize,
    /// The message under way is compressed: its first bytes, as far as
    /// they came, to check with [`Compression::starts`].
    magic: Option<([u8; 3], usize)>,
    /// How the messages of the stream are compressed.
    compression: Compression,
    /// The body of the compressed message under way, to inflate.
    kept: Option<Vec<u8>>,
    /// A compressed message of this stream was kept to be inflated.
    inflated: bool,
}

impl Messages {
    /// Reads the DATA payload `data` of `stream`, whose response headers
    /// named `compression`.
    fn feed(&mut self, stream: u32, compression: Compression, mut data: &[u8], trace: bool) {
        self.compression = compression;
        while !data.is_empty() {
            if self.prefix_len < self.prefix.len() {
                let n = (self.prefix.len() - self.prefix_len).min(data.len());
                self.prefix[self.prefix_len..self.prefix_len + n].copy_from_slice(&data[..n]);
                self.prefix_len += n;
                data = &data[n..];
                if self.prefix_len == self.prefix.len() {
                    self.start(stream, trace);
                }
                continue;
            }
            let n = self.remaining.min(data.len());
            let body = &data[..n];
            if let Some((magic, have)) = &mut self.magic {
                let m = (magic.len() - *have).min(n);
                magic[*have..*have + m].copy_from_slice(&body[..m]);
                *have += m;
            }
            if let Some(kept) = &mut self.kept {
                kept.extend_from_slice(body);
            }
            self.remaining -= n;
            data = &data[n..];
            if self.remaining == 0 {
                self.end(stream);
            }
        }
    }

    /// The prefix of a message is whole.
    fn start(&mut self, stream: u32, trace: bool) {
        let [flag, len @ ..] = self.prefix;
        let len = u32::from_be_bytes(len) as usize;
        if trace {
            eprintln!("    message on stream {stream}: flag {flag}, {len} bytes");
        }
        assert!(
            flag <= 1,
            "message on stream {stream} with the flag byte {flag:#04x} (length {len})"
        );
        if flag == 1 {
            let compression = self.compression;
            assert!(
                compression != Compression::None,
                "compressed message on stream {stream}, whose response headers did not say grpc-encoding: gzip or deflate"
            );
            assert!(
                len >= compression.min_len(),
                "compressed message on stream {stream} of {len} bytes, too short for {compression:?}"
            );
            self.magic = Some(([0; 3], 0));
            if !self.inflated && len <= INFLATE_LIMIT {
                self.inflated = true;
                self.kept = Some(Vec::with_capacity(len));
            }
        }
        self.remaining = len;
        if len == 0 {
            self.end(stream);
        }
    }

    /// The message under way is whole: a compressed one must be in the
    /// stream's format, and inflate if it was kept.
    fn end(&mut self, stream: u32) {
        let compression = self.compression;
        if let Some((magic, _)) = self.magic.take() {
            assert!(
                compression.starts(magic),
                "compressed message on stream {stream} that is not {compression:?}: {magic:02x?}"
            );
        }
        if let Some(body) = self.kept.take() {
            let mut inflated = Vec::new();
            let read = if compression == Compression::Gzip {
                MultiGzDecoder::new(&body[..])
                    .take(INFLATE_LIMIT as u64)
                    .read_to_end(&mut inflated)
            } else {
                ZlibDecoder::new(&body[..])
                    .take(INFLATE_LIMIT as u64)
                    .read_to_end(&mut inflated)
            };
            assert!(
                read.is_ok(),
                "compressed message on stream {stream} does not inflate ({read:?}): {body:02x?}"
            );
        }
        self.prefix_len = 0;
    }

    /// The stream ended: it must end between messages.
    fn finish(&mut self, stream: u32) {
        assert!(
            self.prefix_len == 0,
            "stream {stream} ends inside a message: prefix {:02x?}, {} bytes of it missing",
            &self.prefix[..self.prefix_len],
            if self.prefix_len < self.prefix.len() {
                self.prefix.len() - self.prefix_len
            } else {
                self.remaining
            }
        );
        *self = Messages::default();
    }
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
                let state = self.streams.entry(head.stream).or_default();
                state.ended = true;
                // A reset may cut a message short.
                state.messages = Messages::default();
            }
            kind::DATA => {
                assert!(
                    head.flags & !flag::END_STREAM == 0,
                    "unexpected DATA flags {head:?}"
                );
                let trace = self.trace;
                let state = self.open_stream(head);
                assert!(
                    state.headers_sent,
                    "server sent {head:?} before the response headers"
                );
                if state.grpc {
                    let compression = state.compression;
                    state
                        .messages
                        .feed(head.stream, compression, payload, trace);
                }
                if head.has(flag::END_STREAM) {
                    state.ended = true;
                    state.messages.finish(head.stream);
                }
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
            for (name, value) in &fields {
                match &name[..] {
                    b"content-type" => state.grpc = value.starts_with(b"application/grpc"),
                    b"grpc-encoding" => state.compression = Compression::of(value),
                    _ => {}
                }
            }
        }
        if end_stream {
            state.ended = true;
            state.messages.finish(stream);
        }
    }
}
