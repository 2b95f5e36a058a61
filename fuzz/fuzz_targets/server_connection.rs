//! A gRPC server connection fed arbitrary client bytes, split into several
//! reads at points the input chooses, with the output written out between
//! reads, the way the runtime drives it.
//!
//! Input: a control byte, a count of split points, two bytes per split
//! point (the length of each read), then the client's bytes.
//! Control byte bits:
//! - 0x01: prepend a valid client preface and an empty SETTINGS frame, so
//!   that the input starts at frame handling;
//! - 0x02: use small limits (streams, windows, header sizes, message size);
//! - 0x04: write out only half the pending output after each read;
//! - 0x18: start a graceful shutdown after read 1, 2 or 3 (0: never).
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
//!   each time a one-byte index names it;
//! - the output is a well-formed frame stream: see `pajamax_fuzz::peer`.

#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use pajamax::grpc::connection::{GrpcConfig, GrpcConnection};
use pajamax::h2::frame::{self, FrameHeader, HEADER_LEN, PREFACE};
use pajamax::h2::Config;
use pajamax_fuzz::echo::router;
use pajamax_fuzz::peer::ServerOutput;
use pajamax_fuzz::Input;

const OUTPUT_BASE: usize = 64 << 10;
const OUTPUT_PER_INPUT_BYTE: usize = 64;

/// Small limits, so that a short input reaches them. Limits added later
/// keep their defaults.
#[allow(clippy::needless_update)]
fn tight_config() -> GrpcConfig {
    let defaults = GrpcConfig::default();
    GrpcConfig {
        max_recv_message_size: 64,
        max_buffered_request_bytes: 256,
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
    let splits = usize::from(input.byte() % 8);
    let mut lengths = Vec::with_capacity(splits + 1);
    for _ in 0..splits {
        lengths.push(usize::from(input.u16()));
    }
    let body = input.rest();

    let mut stream = Vec::with_capacity(body.len() + 64);
    if primed {
        stream.extend_from_slice(PREFACE);
        frame::write_settings(&mut stream, &[]);
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
    let mut checker = ServerOutput::new();
    let now = Instant::now();
    let mut buffered: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut written = 0;

    for (i, read) in reads.into_iter().enumerate() {
        buffered.extend_from_slice(read);
        fed += read.len();
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
            check_bound(&conn, written, fed);
            let pending = conn.output().len();
            let n = if half_writes { pending / 2 } else { pending };
            checker.feed(&conn.output()[..n]);
            conn.advance_output(n);
            written += n;
            if used == 0 || buffered.is_empty() || conn.h2().error().is_some() {
                break;
            }
        }
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
    }

    check_bound(&conn, written, fed);
    let pending = conn.output().len();
    checker.feed(conn.output());
    conn.advance_output(pending);
    assert!(conn.output().is_empty(), "output left after writing it all");
    checker.finish();
});

fn check_bound(conn: &GrpcConnection, written: usize, fed: usize) {
    let total = written + conn.output().len();
    let bound = OUTPUT_BASE + OUTPUT_PER_INPUT_BYTE * fed;
    assert!(
        total <= bound,
        "{total} bytes of output for {fed} bytes of input (bound {bound})"
    );
}
