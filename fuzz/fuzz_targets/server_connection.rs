//! A gRPC server connection fed arbitrary client bytes, split into several
//! reads at points the input chooses, with the output written out between
//! reads, the way the runtime drives it.
//!
//! Input: a control byte, a sweep byte if control bit 0x80 is set, a
//! count of split points, two bytes per split point (the length of each
//! read), then the client's bytes.
//! Control byte bits:
//! - 0x01: prepend a valid client preface and an empty SETTINGS frame, so
//!   that the input starts at frame handling;
//! - 0x02: use small limits (streams, windows, header sizes, message size);
//! - 0x04: write out only half the pending output after each read;
//! - 0x18: start a graceful shutdown after read 1, 2 or 3 (0: never);
//! - 0x60: how far the clock moves after each read: not at all, 1 ms,
//!   10 ms or 1 s. Deadlines and paced producers (`Tick`) then come due,
//!   and are handled as the runtime does (`handle_timeout` once
//!   `poll_timeout` has passed).
//! - 0x80: a sweep byte follows, for what the worker's sweep does to a
//!   connection between reads (after the graceful shutdown of that read,
//!   if any); with it, the sweep's `trim_tables` runs after every read,
//!   giving back the room of the tables and buffers a burst left, and:
//!   - 0x03: `end_draining` (the second GOAWAY, for a client that does
//!     not answer the first one's PING) after read 1, 2 or 3 (0: never);
//!   - 0x04: `forgive_unproductive` after every read;
//!   - 0x08: a keepalive `ping` after every read;
//!   - 0x30: `close_with_status` (the end of a shutdown's grace period)
//!     after read 1, 2 or 3 (0: never);
//!   - 0x40: `close` (the idle timeout's, NO_ERROR) after the last read;
//!   - 0x80: after the last read, `end_draining` once the connection has
//!     drained for 5 s of the final rounds' clock, as the sweep does.
//!
//! After each read the output is written out (all or half of it); while
//! producers on the worker want to send and the output was all written,
//! `produce` is called and its output written, a few rounds per read, as
//! the runtime's worker does. After the last read, the clock moves on by
//! a second at a time and everything is written out, until nothing more
//! comes (bounded rounds).
//!
//! Asserted:
//! - nothing panics (a handler's panic is caught by the connection);
//! - `recv` returns at most the length of what it was given; it may stop
//!   early (it handles a bounded number of requests per call), but when it
//!   leaves a complete frame it has used some bytes, so calling it again
//!   until it returns 0 leaves no complete frame unless the connection
//!   failed;
//! - the server's output never exceeds 64 KiB + 64 bytes per input byte,
//!   counted over the whole connection (whatever was written out plus
//!   what is pending). The constant covers the opening SETTINGS and
//!   WINDOW_UPDATE. Answers are a few times the size of the request that
//!   asked for them (the 415 answer to a 13-byte HEADERS frame, about 90
//!   bytes, is the largest fixed one), so exceeding 64 per byte means the
//!   output grows with something other than what the client sent, such as
//!   a long header value held in the HPACK dynamic table and echoed back
//!   each time a one-byte index names it. A compressed answer adds about
//!   20 bytes of gzip per message (fewer for deflate): a one-byte `Tick`
//!   message, 8 bytes framed, goes out in 28, 37 with its own DATA
//!   frame's header, still below the bound;
//! - the output is a well-formed frame stream: see `pajamax_fuzz::peer`;
//!   among its checks, the last stream id of the GOAWAYs never grows, and
//!   nothing but RST_STREAM goes on a stream above the one they named;
//! - the gRPC messages of each answer's DATA, read across frames, have the
//!   flag 0 or 1 (never the server's internal marks, 0x80 for a message to
//!   go uncompressed and 0xff for one whose encoding panicked halfway), 1
//!   only after `grpc-encoding: gzip` or `deflate` in the response
//!   headers, and then are gzip or zlib's format as it says; a stream that
//!   ends does so between messages. The echo service turns compression on
//!   for clients that send `grpc-accept-encoding: gzip` (or `deflate`),
//!   sends messages uncompressed in such calls and answers with messages
//!   whose encoding panics, as its requests' first bytes choose (`Choice`
//!   in `pajamax_fuzz::echo`).

#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use pajamax::grpc::connection::{GrpcConfig, GrpcConnection};
use pajamax::h2::Config;
use pajamax::h2::Reason;
use pajamax::Status;
use pajamax_fuzz::echo::router;
use pajamax_fuzz::peer::ServerOutput;
use pajamax_fuzz::Input;
use pajamax_test_peer::frame::HEADER_LEN;
use pajamax_test_peer::{Client, FrameHeader};

const OUTPUT_BASE: usize = 64 << 10;
const OUTPUT_PER_INPUT_BYTE: usize = 64;

/// Clock steps after each read, picked by control bits 0x60.
const STEPS: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_millis(1),
    Duration::from_millis(10),
    Duration::from_secs(1),
];

/// Rounds of `produce` after a read, as the worker's `READS_PER_TURN`.
const PRODUCE_ROUNDS: usize = 4;

/// Rounds after the last read: the clock moves by a second each.
const FINAL_ROUNDS: usize = 8;

/// How long the worker's sweep lets a connection drain before its second
/// GOAWAY goes anyway.
const DRAIN_PING_TIMEOUT: Duration = Duration::from_secs(5);

/// What the worker's sweep does between reads, from the sweep byte.
#[derive(Default)]
struct Sweep {
    /// `trim_tables` after every read (any sweep byte).
    trim: bool,
    /// `end_draining` after this read (1 to 3; 0: never).
    end_draining_after: usize,
    forgive: bool,
    ping: bool,
    /// `close_with_status` after this read (1 to 3; 0: never).
    close_with_status_after: usize,
    close_at_end: bool,
    drain_timeout: bool,
}

impl Sweep {
    fn new(byte: u8) -> Sweep {
        Sweep {
            trim: true,
            end_draining_after: usize::from(byte & 3),
            forgive: byte & 0x04 != 0,
            ping: byte & 0x08 != 0,
            close_with_status_after: usize::from((byte >> 4) & 3),
            close_at_end: byte & 0x40 != 0,
            drain_timeout: byte & 0x80 != 0,
        }
    }

    /// What the sweep does after read `read` (counted from 1).
    fn after_read(&self, read: usize, conn: &mut GrpcConnection) {
        if self.trim {
            conn.trim_tables();
        }
        if self.forgive {
            conn.forgive_unproductive();
        }
        if self.ping {
            conn.ping();
        }
        if read == self.end_draining_after {
            conn.end_draining();
        }
        if read == self.close_with_status_after {
            conn.close_with_status(
                &Status::unavailable("the server is shutting down"),
                "shutdown grace period over",
            );
        }
    }
}

/// Small limits, so that a short input reaches them, and a `call_timeout`
/// that a few of the time steps pass. Limits added later keep their
/// defaults.
#[allow(clippy::needless_update)]
fn tight_config() -> GrpcConfig {
    let defaults = GrpcConfig::default();
    GrpcConfig {
        max_recv_message_size: 64,
        max_buffered_request_bytes: 256,
        call_timeout: Some(Duration::from_millis(25)),
        h2: Config {
            max_concurrent_streams: 4,
            initial_stream_window: 256,
            connection_window: 65_535,
            max_header_list_size: 512,
            max_header_block_size: 1024,
            max_held_bytes: 1024,
            max_unproductive_frames: 16,
            ..defaults.h2
        },
        ..defaults
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let control = input.byte();
    let primed = control & 0x01 != 0;
    let tight = control & 0x02 != 0;
    let half_writes = control & 0x04 != 0;
    let go_away_after = usize::from((control >> 3) & 3);
    let step = STEPS[usize::from((control >> 5) & 3)];
    let sweep = if control & 0x80 != 0 {
        Sweep::new(input.byte())
    } else {
        Sweep::default()
    };
    let splits = usize::from(input.byte() % 8);
    let mut lengths = Vec::with_capacity(splits + 1);
    for _ in 0..splits {
        lengths.push(usize::from(input.u16()));
    }
    let body = input.rest();

    let mut stream = Vec::with_capacity(body.len() + 64);
    if primed {
        stream.extend_from_slice(&Client::handshake(&[]));
    }
    stream.extend_from_slice(body);
    let mut reads = Vec::with_capacity(splits + 1);
    let mut rest = &stream[..];
    for len in lengths {
        let (read, tail) = rest.split_at(len.min(rest.len()));
        reads.push(read);
        rest = tail;
    }
    reads.push(rest);

    let config = if tight {
        tight_config()
    } else {
        GrpcConfig::default()
    };
    let mut conn = GrpcConnection::new(router(), &config, None);
    let mut out = Output {
        checker: ServerOutput::new(),
        written: 0,
        fed: 0,
        half_writes,
    };
    let mut now = Instant::now();
    let mut buffered: Vec<u8> = Vec::new();

    for (i, read) in reads.into_iter().enumerate() {
        buffered.extend_from_slice(read);
        out.fed += read.len();
        // As the runtime does: call recv again while it makes progress, as
        // one call handles a bounded number of requests.
        loop {
            let used = conn.recv(&buffered, now);
            assert!(
                used <= buffered.len(),
                "recv used {used} of {} bytes",
                buffered.len()
            );
            buffered.drain(..used);
            out.write(&mut conn);
            if used == 0 || buffered.is_empty() || conn.h2().error().is_some() {
                break;
            }
        }
        out.produce(&mut conn, now);
        if conn.h2().error().is_none() {
            if let Some(head) = FrameHeader::parse(&buffered) {
                assert!(
                    HEADER_LEN + head.len as usize > buffered.len(),
                    "recv made no progress on a complete frame: {head:?}"
                );
            }
        }
        if i + 1 == go_away_after {
            conn.go_away();
        }
        sweep.after_read(i + 1, &mut conn);
        now += step;
        out.timeouts(&mut conn, now);
    }
    if sweep.close_at_end {
        conn.close(Reason::NO_ERROR, "idle timeout");
    }

    // The client reads everything from now on; time passes.
    out.half_writes = false;
    let mut draining_since = None;
    for _ in 0..FINAL_ROUNDS {
        out.write(&mut conn);
        out.produce(&mut conn, now);
        let draining = sweep.drain_timeout && conn.is_draining();
        if conn.poll_timeout().is_none() && !draining {
            break;
        }
        if draining {
            let since = *draining_since.get_or_insert(now);
            if now.duration_since(since) >= DRAIN_PING_TIMEOUT {
                conn.end_draining();
            }
        }
        now += STEPS[3];
        out.timeouts(&mut conn, now);
    }
    out.write(&mut conn);
    assert!(conn.output().is_empty(), "output left after writing it all");
    out.checker.finish();
});

/// The client's side of the output: what was written, checked.
struct Output {
    checker: ServerOutput,
    written: usize,
    /// Input bytes given to the connection so far.
    fed: usize,
    /// Write out only half the pending output.
    half_writes: bool,
}

impl Output {
    /// Checks the bound, then writes out the pending output (or half of
    /// it) to the checker.
    fn write(&mut self, conn: &mut GrpcConnection) {
        self.check_bound(conn);
        let pending = conn.output().len();
        let n = if self.half_writes {
            pending / 2
        } else {
            pending
        };
        self.checker.feed(&conn.output()[..n]);
        conn.advance_output(n);
        self.written += n;
    }

    /// As the worker does once the output is written: pulls the producers
    /// that want to send, writing out what they made, a few rounds.
    fn produce(&mut self, conn: &mut GrpcConnection, now: Instant) {
        for _ in 0..PRODUCE_ROUNDS {
            if !conn.wants_to_produce() || !conn.output().is_empty() {
                return;
            }
            conn.produce(now);
            self.write(conn);
        }
    }

    /// Handles the deadlines and producer wake-ups due by `now`, and
    /// writes out what they made.
    fn timeouts(&mut self, conn: &mut GrpcConnection, now: Instant) {
        if conn.poll_timeout().is_some_and(|at| at <= now) {
            conn.handle_timeout(now);
            self.write(conn);
            self.produce(conn, now);
        }
    }

    fn check_bound(&self, conn: &GrpcConnection) {
        let total = self.written + conn.output().len();
        let bound = OUTPUT_BASE + OUTPUT_PER_INPUT_BYTE * self.fed;
        assert!(
            total <= bound,
            "{total} bytes of output for {} bytes of input (bound {bound})",
            self.fed
        );
    }
}
