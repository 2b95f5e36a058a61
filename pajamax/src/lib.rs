//! pajamax: a synchronous, thread-per-core gRPC server.
//!
//! Handlers are plain Rust `fn`s. Each worker thread owns its connections and
//! serves every request that one `read()` brought in before answering them all
//! with one `write()`.
//!
//! The layers, from the wire up:
//! - [`h2`]: a sans-I/O HTTP/2 server codec (frames, HPACK, flow control).
//! - [`grpc`]: gRPC message framing, status, metadata and routing.
//! - `runtime`: the worker threads; the only code that touches sockets.
//! - [`Server`]: the builder that puts them together.

pub mod dispatch;
mod fast_hash;
pub mod grpc;
pub mod h2;
mod runtime;
pub mod server;

pub use grpc::context::Context;
pub use grpc::remote::{CancelReason, Cancelled, Responder, Sink, Streaming};
pub use grpc::service::{decode_request, Method, MethodKind, Reply, Service};
pub use grpc::status::{Code, Status};
pub use grpc::streaming::{
    BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Next, Producer, Responses,
    ServerStream,
};
pub use server::{Builder, Server, ServerHandle, Stats, WorkerStats};

/// Includes the Rust code that `pajamax-build` generated for a proto package.
///
/// The argument is the proto package name, as in `package helloworld;`.
///
/// ```ignore
/// pub mod helloworld {
///     pajamax::include_proto!("helloworld");
/// }
/// ```
#[macro_export]
macro_rules! include_proto {
    ($package: tt) => {
        include!(concat!(env!("OUT_DIR"), concat!("/", $package, ".rs")));
    };
}
