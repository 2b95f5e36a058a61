//! gRPC over HTTP/2: message framing, status, metadata, timeouts and routing.

pub mod connection;
pub mod context;
pub mod deferred;
pub mod metadata;
pub mod percent;
pub mod router;
pub mod service;
pub mod status;
pub mod timeout;
