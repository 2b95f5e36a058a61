//! pajamax: a synchronous, thread-per-core gRPC server.
//!
//! Handlers are plain Rust `fn`s: no async runtime, no futures. Each worker
//! thread is pinned to a core and owns its connections; it parses everything
//! one `read()` brought in, runs the handlers inline, and sends all the
//! answers with one `write()`.
//!
//! Coming from tonic? `docs/from-tonic.md` in the repository maps each part
//! of a tonic server (dependencies, `build.rs`, handlers, metadata,
//! streaming, interceptors, health, reflection, shutdown) to its pajamax
//! counterpart.
//!
//! # Getting started
//!
//! `pajamax-build` turns `.proto` files into Rust from `build.rs` (no
//! `protoc` needed): the prost message types and, for each service, a trait
//! of handlers and a server type that implements [`Service`]. The README
//! has the `Cargo.toml` and `build.rs` lines.
//!
//! ```ignore
//! mod helloworld {
//!     pajamax::include_proto!("helloworld");
//! }
//! use helloworld::greeter_server::{Greeter, GreeterServer};
//! use helloworld::{HelloReply, HelloRequest};
//!
//! struct MyGreeter;
//!
//! impl Greeter for MyGreeter {
//!     fn say_hello(&self, request: HelloRequest) -> Result<HelloReply, pajamax::Status> {
//!         Ok(HelloReply { message: format!("Hello {}!", request.name) })
//!     }
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     pajamax::Server::builder()
//!         .add_service(GreeterServer::new(MyGreeter))
//!         // Serves until SIGTERM or SIGINT, then drains the calls in flight.
//!         .serve_until_signal("127.0.0.1:50051")
//! }
//! ```
//!
//! The same server runs below with a service written by hand, the way the
//! generated `GreeterServer` implements [`Service`]; the messages are plain
//! protobuf `string`s here:
//!
//! ```
//! use pajamax::{Context, Method, Reply, Service, Status};
//!
//! /// `demo.Greeter/SayHello`, one `string` in and one out.
//! struct Greeter;
//!
//! impl Service for Greeter {
//!     fn name(&self) -> &'static str {
//!         "demo.Greeter"
//!     }
//!
//!     fn methods(&self) -> &'static [Method] {
//!         const METHODS: &[Method] = &[Method::unary("SayHello")];
//!         METHODS
//!     }
//!
//!     fn unary(
//!         &self,
//!         _method: usize,
//!         _ctx: &mut Context<'_>,
//!         request: &[u8],
//!         reply: &mut Reply<'_>,
//!     ) -> Result<(), Status> {
//!         let name: String = pajamax::decode_request(request)?;
//!         reply.encode(&format!("Hello {name}!"));
//!         Ok(())
//!     }
//! }
//!
//! let server = pajamax::Server::builder()
//!     .workers(1)
//!     .add_service(Greeter)
//!     .bind("127.0.0.1:0")?; // port 0: the system chooses
//! println!("serving demo.Greeter on {}", server.local_addr());
//! server.shutdown();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Handlers run on the worker
//!
//! A handler runs on the worker thread that read its request, between the
//! read and the write: while it runs, no other call of that worker moves.
//! Quick work (a lookup, a computation, an answer from memory) belongs
//! there. Work that waits (a database, a file, another service) must not
//! block the worker; hand it to a thread of your own instead:
//!
//! - [`Context::defer`] gives the call's [`Responder`], to answer a unary
//!   call later from any thread;
//! - a stream's `channel` ([`ServerStream::channel`],
//!   [`ClientStream::channel`], [`BidiStream::channel`]) serves a streaming
//!   call from a thread, through a [`Sink`] and a [`Streaming`];
//! - dispatch mode (`pajamax-build`'s `dispatch_services`, and the
//!   [`dispatch`] module) sends every call of a service to threads the
//!   application owns, each with its own shard of state.
//!
//! A panic in a handler ends its call with `INTERNAL`; the worker goes on.
//!
//! # The call's context
//!
//! Each generated handler comes in two forms: `say_hello(&self, request)`,
//! and `say_hello_with_context(&self, ctx, request)`, which also gets the
//! call's [`Context`]: the request [`Metadata`], the deadline from the
//! client's `grpc-timeout`, the peer address, and the metadata to send back
//! with the response headers and the trailers. Implement one of the two.
//!
//! ```
//! use pajamax::{Context, Metadata, ResponseMetadata, Status};
//!
//! fn say_hello_with_context(ctx: &mut Context<'_>, name: String) -> Result<String, Status> {
//!     if ctx.time_remaining().is_some_and(|left| left.is_zero()) {
//!         return Err(Status::deadline_exceeded("the client gave up"));
//!     }
//!     let user = ctx.metadata().get("x-user").unwrap_or("anonymous").to_owned();
//!     ctx.trailers_mut().insert("x-served-by", "demo").unwrap();
//!     Ok(format!("Hello {name}, from {user}!"))
//! }
//!
//! // A handler can be called without a server, on a context made for it.
//! let mut request = Metadata::new();
//! request.insert("x-user", "alice").unwrap();
//! let mut response = ResponseMetadata::default();
//! let mut ctx = Context::new(&request, None, None, &mut response);
//! assert_eq!(say_hello_with_context(&mut ctx, "world".into())?, "Hello world, from alice!");
//! assert_eq!(response.trailers.get("x-served-by"), Some("demo"));
//! # Ok::<(), Status>(())
//! ```
//!
//! An error is a [`Status`]: a [`Code`] and a message. The metadata set on
//! the context goes out with an error too.
//!
//! # Streaming
//!
//! | kind | a handler returns | served on the worker | served on a thread |
//! | --- | --- | --- | --- |
//! | server streaming | [`ServerStream<Resp>`](ServerStream) | [`ServerStream::iter`], [`ServerStream::from_producer`] | [`ServerStream::channel`]: a [`Sink`] |
//! | client streaming | [`ClientStream<Req, Resp>`](ClientStream) | [`ClientStream::on_worker`] with a [`ClientStreamHandler`] | [`ClientStream::channel`]: a [`Streaming`] and a [`Responder`] |
//! | bidirectional | [`BidiStream<Req, Resp>`](BidiStream) | [`BidiStream::on_worker`] with a [`BidiHandler`] | [`BidiStream::channel`]: a [`Streaming`] and a [`Sink`] |
//!
//! On the worker nothing blocks: answers are pulled from the iterator or
//! [`Producer`] only as far as the client's flow-control windows allow, and
//! request messages are handed to the handler as they arrive. On a thread,
//! [`Sink::send`] waits while the client does not read, and [`Streaming`]
//! is a blocking iterator of the requests. Both ways, a slow client slows
//! the handler down instead of filling memory, and a cancelled call or a
//! passed deadline reaches the handler ([`Cancelled`]).
//!
//! ```
//! use pajamax::{Context, ServerStream, Status};
//!
//! // On the worker: the numbers up to `to`, pulled as the client reads.
//! fn count(to: u32) -> Result<ServerStream<u32>, Status> {
//!     Ok(ServerStream::iter((1..=to).map(Ok)))
//! }
//!
//! // On a thread: `send` waits while the client is slow, and fails once
//! // the call has ended.
//! fn count_slowly(ctx: &mut Context<'_>, to: u32) -> Result<ServerStream<u32>, Status> {
//!     let (stream, mut sink) = ServerStream::channel(ctx);
//!     std::thread::spawn(move || {
//!         for n in 1..=to {
//!             std::thread::sleep(std::time::Duration::from_millis(10));
//!             if sink.send(&n).is_err() {
//!                 return; // cancelled: stop working for it
//!             }
//!         }
//!         sink.finish(Ok(()));
//!     });
//!     Ok(stream)
//! }
//! # let md = pajamax::Metadata::new();
//! # let mut response = pajamax::ResponseMetadata::default();
//! # let mut ctx = Context::new(&md, None, None, &mut response);
//! # count(3)?;
//! # count_slowly(&mut ctx, 3)?;
//! # Ok::<(), Status>(())
//! ```
//!
//! # Interceptors and observers
//!
//! An [`Interceptor`] runs on the worker before the handler of every call
//! ([`Builder::intercept`]), or of one service's calls ([`Intercepted`]):
//! it sees the method ([`CallInfo`]) and the call's context, and may add
//! response metadata or refuse the call with a status. A [`CallObserver`]
//! sees each call once it is answered ([`Builder::observe`],
//! [`FinishedCall`]: method, status code, duration, message bytes). Both
//! are synchronous and must not block; a server without them pays one test
//! per call for them.
//!
//! ```
//! use pajamax::{CallInfo, Context, FinishedCall, Status};
//!
//! fn api_key(_call: &CallInfo<'_>, ctx: &mut Context<'_>) -> Result<(), Status> {
//!     match ctx.metadata().get("x-api-key") {
//!         Some("secret") => Ok(()),
//!         _ => Err(Status::unauthenticated("a valid x-api-key is required")),
//!     }
//! }
//!
//! let builder = pajamax::Server::builder()
//!     .intercept(api_key)
//!     .observe(|call: &FinishedCall<'_>| {
//!         eprintln!("{}/{}: {:?} in {:?}", call.service, call.method, call.code, call.duration);
//!     });
//! ```
//!
//! # Serving and shutting down
//!
//! [`Builder::serve_until_signal`] serves until SIGTERM or SIGINT, then
//! drains: new connections are refused, every connection gets a GOAWAY,
//! the calls in flight are answered (for at most
//! [`Builder::shutdown_grace`]), and it returns. [`Builder::serve_with_shutdown`]
//! drains when a closure returns; [`Builder::bind`] gives a [`ServerHandle`]
//! to shut down by hand. [`Builder::on_shutdown`] runs hooks as the drain
//! begins. `docs/deployment.md` in the repository tells what clients see.
//!
//! Health checking (`grpc.health.v1.Health`) and server reflection are
//! separate crates, `pajamax-health` and `pajamax-reflection`.
//!
//! # TLS
//!
//! With the cargo feature `tls`, the server speaks TLS itself (rustls on
//! the `ring` provider, ALPN `h2`): `Builder::tls` with a `TlsConfig` made
//! from PEM, mutual TLS with client CAs (handlers see the client's
//! certificates with `Context::peer_certificates`), and certificates
//! replaced on the running server (`ServerHandle::reload_tls`). The
//! batching stays: what one read brought in is decrypted and handled
//! together, and its answers leave encrypted in one write. `docs/tls.md` in
//! the repository has the details and what it costs.
//!
//! # Internals
//!
//! The `h2` module (the HTTP/2 codec and its HPACK) and the `grpc` module
//! (gRPC over it: the connection, the router, framing) are public
//! for the project's own tests, fuzz targets and benches; the code
//! `pajamax-build` generates names none of their paths. They are hidden
//! from these docs and may change in any release: everything an
//! application uses is re-exported here, at the crate root. How the layers
//! fit together is in `docs/architecture.md` in the repository.

pub mod dispatch;
mod fast_hash;
mod stream_map;
// Internals: public for the project's tests, fuzz targets and benches; not
// part of the documented API, and generated code does not name them.
// Their docs are for the project's maintainers, and may link to the private
// items next to them.
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)]
pub mod grpc;
#[doc(hidden)]
pub mod h2;
mod runtime;
pub mod server;
pub mod testing;
#[cfg(feature = "tls")]
mod tls;

pub use grpc::context::{Context, ResponseMetadata};
pub use grpc::intercept::{CallInfo, CallObserver, FinishedCall, Intercepted, Interceptor};
pub use grpc::metadata::{InvalidMetadata, Metadata};
pub use grpc::remote::{CancelReason, Cancelled, Responder, Sink, Streaming, TrySendError};
pub use grpc::service::{decode_request, decode_request_into, Method, MethodKind, Reply, Service};
pub use grpc::status::{Code, Status};
pub use grpc::streaming::{
    BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Next, Producer, RawInbound,
    RawServerStream, Responses, ServerStream,
};
/// The HTTP/2 settings and limits a server enforces, for
/// [`Builder::h2_config`].
pub use h2::Config as H2Config;
/// A DER-encoded X.509 certificate, as
/// [`Context::peer_certificates`] hands them out (rustls's type).
#[cfg(feature = "tls")]
pub use rustls::pki_types::CertificateDer;
pub use server::{Builder, Server, ServerHandle, Stats, WorkerStats};
#[cfg(feature = "tls")]
pub use tls::{TlsConfig, TlsReloader};

/// Includes the Rust code that `pajamax-build` generated for a proto package.
///
/// The argument is the proto package name, as in `package helloworld;`; the
/// code was written by the crate's `build.rs` into Cargo's `OUT_DIR`.
///
/// ```ignore
/// pub mod helloworld {
///     pajamax::include_proto!("helloworld");
/// }
/// ```
///
/// The generated code names the types of other proto packages by relative
/// paths (`super::super::common::v1::Id`), as prost does. So a package with
/// dots in its name, such as `package acme.store.v1;`, goes in one nested
/// module per part, and the packages it imports sit beside it at the module
/// paths their names give:
///
/// ```ignore
/// pub mod acme {
///     pub mod common {
///         pub mod v1 {
///             pajamax::include_proto!("acme.common.v1");
///         }
///     }
///     pub mod store {
///         pub mod v1 {
///             pajamax::include_proto!("acme.store.v1");
///         }
///     }
/// }
///
/// use acme::store::v1::store_server::{Store, StoreServer};
/// ```
///
/// A package that uses no other package's types may sit in any module
/// (`pub mod grpc_testing { pajamax::include_proto!("grpc.testing"); }`).
/// A part of a package name that is a Rust keyword is written escaped, as
/// prost names the file: `include_proto!("foo.r#type.v1")` for
/// `package foo.type.v1;`.
///
/// The well-known types (`google.protobuf.Timestamp`, `Duration`, `Any`...)
/// are those of the `prost-types` crate, which the crate then needs as a
/// dependency; `google.protobuf.Empty` is `()`.
#[macro_export]
macro_rules! include_proto {
    ($package: tt) => {
        include!(concat!(env!("OUT_DIR"), concat!("/", $package, ".rs")));
    };
}
