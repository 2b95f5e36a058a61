//! A raw HTTP/2 client for testing pajamax: everything as bytes.
//!
//! It writes what a test needs a client to send, including what no real
//! client would: the preface, every frame type ([`Frame`]) with or without
//! padding, priority, END_STREAM or END_HEADERS, unknown types, HPACK
//! header blocks with the indexing the test chooses ([`Encoder`]), gRPC
//! messages ([`grpc`]). It reads what the server writes: frames, header
//! blocks put together and decoded ([`Decoder`], strict where RFC 7541 is),
//! gRPC messages, and a summary of what was heard ([`Heard`]).
//!
//! Its HPACK and frame code shares nothing with pajamax's: it is checked
//! against RFC 9113's layouts, RFC 7541's examples and the `hpack` crate in
//! its own tests, so a test does not read the server's output with the
//! server's own decoder.
//!
//! The core has no I/O: [`Client`] takes and gives bytes, so a test can
//! drive a server's connection state machine directly. [`TcpClient`] puts
//! it on a blocking socket for tests against a running server.
//!
//! The crate does not depend on pajamax, so pajamax's own unit tests can
//! use it.
//!
//! ```
//! use pajamax_test_peer::{Client, ErrorCode, Frame};
//!
//! let mut client = Client::new();
//! let mut bytes = Client::handshake(&[]);
//! bytes.extend(client.request(1, "/helloworld.Greeter/SayHello", b"\x0a\x03bob"));
//! Frame::rst_stream(1, ErrorCode::CANCEL).write(&mut bytes);
//! // ... give `bytes` to the server, and what it answers to the client:
//! let answer = Frame::goaway(1, ErrorCode::NO_ERROR, b"").to_bytes();
//! client.receive(&answer).unwrap();
//! assert_eq!(client.heard().goaway, Some(ErrorCode::NO_ERROR));
//! ```

pub mod blocking;
pub mod client;
pub mod frame;
pub mod grpc;
pub mod hpack;
mod huffman;
pub mod reader;

pub use blocking::TcpClient;
pub use client::{Client, Heard};
pub use frame::{
    flag, frame_bytes, kind, setting, split_frames, ErrorCode, Frame, FrameHeader, Priority,
    PREFACE,
};
pub use hpack::{Decoder, Encoder, Indexing};
pub use reader::{HeaderBlock, ReadError, Reader, Received};
