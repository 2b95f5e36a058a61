//! A sans-I/O HTTP/2 server codec (RFC 9113) with HPACK (RFC 7541).
//!
//! Nothing here touches a socket, a thread or a clock: bytes go in, events and
//! bytes come out.

pub mod config;
pub mod connection;
pub mod fields;
pub mod frame;
pub mod hpack;
pub mod window;

pub use config::Config;
pub use connection::{Connection, ConnectionError, Event, Field};
pub use frame::Reason;

#[cfg(test)]
mod connection_tests;
