//! gRPC over HTTP/2: message framing, status, metadata, timeouts and routing.

pub mod context;
pub mod metadata;
pub mod service;
pub mod status;
