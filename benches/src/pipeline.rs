//! A connection's whole request path without sockets: the bytes of many
//! grpc-go `SayHello` calls in one buffer, through
//! [`GrpcConnection::recv`] (HTTP/2 framing, HPACK, routing, decode, the
//! echo handler, encode, answer framing) to the answers in the output
//! buffer.
//!
//! The requests are what grpc-go (as used by ghz) sends on a connection: a
//! HEADERS frame whose block holds `:method`, `:scheme`, `:path`,
//! `:authority`, `content-type`, `user-agent`, `te`, `grpc-accept-encoding`
//! and a `grpc-timeout` that differs on every call (the time left of ghz's
//! 20 s default deadline), HPACK-encoded as Go's encoder does (all fields
//! indexed once seen, so the timeout is a literal with an indexed name that
//! enters the table every time), then one DATA frame with the message and
//! END_STREAM.
//!
//! A measured batch runs on a connection that has done its handshake and
//! served [`WARMUP`] calls first, as a long-lived connection has: its HPACK
//! tables hold the fields, its buffers have grown.

use crate::complex_proto::{payload, EchoGreeter};
use pajamax::grpc::connection::{GrpcConfig, GrpcConnection};
use pajamax::grpc::router::Router;
use pajamax_test_peer::{grpc, setting, Client, Encoder, Frame, Indexing};
use prost::Message;
use std::sync::Arc;
use std::time::Instant;

/// The method's path.
pub const PATH: &[u8] = b"/helloworld.Greeter/SayHello";

/// Calls a connection serves before the measured ones.
pub const WARMUP: usize = 64;

/// The bytes of one client connection: the handshake, the warm-up calls,
/// then the measured ones.
pub struct ClientBytes {
    /// Preface, SETTINGS, the connection window update and the ACK of the
    /// server's SETTINGS.
    pub handshake: Vec<u8>,
    /// [`WARMUP`] requests on streams 1, 3, 5...
    pub warmup: Vec<u8>,
    /// `count` requests on the streams after.
    pub requests: Vec<u8>,
    /// How many requests `requests` holds.
    pub count: usize,
}

/// The client side of a connection to [`WARMUP`] and then `count`
/// complex_proto calls.
pub fn client_bytes(count: usize) -> ClientBytes {
    // grpc-go's SETTINGS (no push, 4 MiB window, 16 KiB header list),
    // then its connection window update.
    let mut handshake = Client::handshake(&[
        (setting::ENABLE_PUSH, 0),
        (setting::INITIAL_WINDOW_SIZE, 4 << 20),
        (setting::MAX_HEADER_LIST_SIZE, 16 << 20),
    ]);
    Frame::window_update(0, (4 << 20) - 65_535).write(&mut handshake);
    Frame::settings_ack().write(&mut handshake);

    let message = grpc::message(&payload().encode_to_vec());

    let mut encoder = Encoder::new();
    let mut block = Vec::with_capacity(128);
    let mut requests = Vec::with_capacity((WARMUP + count) * 160);
    let mut warmup = Vec::new();
    for i in 0..WARMUP + count {
        if i == WARMUP {
            warmup = std::mem::take(&mut requests);
        }
        let stream = 2 * i as u32 + 1;
        // The deadline's remaining time in microseconds, as grpc-go sends it.
        let timeout = format!("{}u", 19_999_000 - (i * 7_919) % 900_000);
        block.clear();
        encoder.begin_block(&mut block);
        for (name, value) in [
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", PATH),
            (b":authority", b"127.0.0.1:50051"),
            (b"content-type", b"application/grpc"),
            (b"user-agent", b"grpc-go/1.61.0"),
            (b"te", b"trailers"),
            (b"grpc-accept-encoding", b"gzip"),
            (b"grpc-timeout", timeout.as_bytes()),
        ] {
            encoder.encode_field(name, value, Indexing::Incremental, &mut block);
        }
        Frame::headers(stream, &block, false).write(&mut requests);
        Frame::data(stream, &message, true).write(&mut requests);
    }
    ClientBytes {
        handshake,
        warmup,
        requests,
        count,
    }
}

/// A router serving [`EchoGreeter`].
pub fn router() -> Arc<Router> {
    let mut router = Router::new();
    router.add(Arc::new(EchoGreeter));
    Arc::new(router)
}

/// A new server connection that has taken the client's handshake and
/// warm-up calls, and written out its answers.
pub fn connection(router: &Arc<Router>, client: &ClientBytes) -> GrpcConnection {
    let mut conn = GrpcConnection::new(router.clone(), &GrpcConfig::default(), None);
    let now = Instant::now();
    feed(&mut conn, &client.handshake, now);
    feed(&mut conn, &client.warmup, now);
    conn
}

/// Serves `input`, the measured part: see [`feed`]. Not inlined, so that a
/// profiler can count it alone.
#[inline(never)]
pub fn serve(conn: &mut GrpcConnection, input: &[u8], now: Instant) -> usize {
    feed(conn, input, now)
}

/// Gives `input` to the connection until all of it is used, writing the
/// answers out (dropping them) after each pass as a worker writes them to
/// its socket; returns how many bytes of answers there were.
fn feed(conn: &mut GrpcConnection, input: &[u8], now: Instant) -> usize {
    let mut pos = 0;
    let mut written = 0;
    while pos < input.len() {
        let used = conn.recv(&input[pos..], now);
        let out = conn.output().len();
        written += out;
        conn.advance_output(out);
        assert!(used > 0, "the connection stopped reading its input");
        pos += used;
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_is_answered_with_the_echo_and_status_0() {
        let client = client_bytes(50);
        let mut conn = GrpcConnection::new(router(), &GrpcConfig::default(), None);
        let mut input = client.handshake.clone();
        input.extend_from_slice(&client.warmup);
        input.extend_from_slice(&client.requests);
        assert_eq!(conn.recv(&input, Instant::now()), input.len());

        let mut client = Client::new();
        client.receive(conn.output()).expect("well-formed output");
        assert!(client.reader().unparsed().is_empty());
        let heard = client.take_heard();
        let message = payload().encode_to_vec();
        assert!(heard.messages.iter().all(|(_, m)| *m == message));
        assert_eq!(heard.messages.len(), WARMUP + 50);
        let trailers: Vec<_> = heard.blocks.iter().filter(|b| b.end_stream).collect();
        assert!(trailers
            .iter()
            .all(|b| b.strings() == [("grpc-status".to_string(), "0".to_string())]));
        assert_eq!(trailers.len(), WARMUP + 50);
        assert!(conn.is_idle());
    }

    #[test]
    fn serve_takes_all_input_in_passes() {
        let client = client_bytes(1000);
        let router = router();
        let mut conn = connection(&router, &client);
        let written = serve(&mut conn, &client.requests, Instant::now());
        // The answers to 1000 calls: headers, message and trailers each.
        assert!(written > 1000 * (5 + payload().encoded_len()));
        assert!(conn.is_idle());
    }
}
