//! gRPC over HTTP/2: message framing, status, metadata, timeouts, routing,
//! and calls of every kind.

mod bodies;
mod call;
mod clock;
pub mod compression;
pub mod connection;
pub mod context;
mod decode;
mod executor;
pub(crate) mod framing;
mod head;
pub mod intercept;
pub mod metadata;
pub mod percent;
pub mod remote;
mod response;
pub mod router;
pub mod service;
pub mod status;
pub mod streaming;
pub mod timeout;
mod timers;
mod waiting;
