//! A sans-I/O HTTP/2 server codec (RFC 9113) with HPACK (RFC 7541).
//!
//! Nothing here touches a socket, a thread or a clock: bytes go in, events and
//! bytes come out.

pub mod config;
pub mod connection;
mod error;
pub mod fields;
pub mod frame;
mod header_block;
pub mod hpack;
mod output;
mod recv_flow;
mod send_flow;
mod settings;
mod shutdown;
mod streams;
pub mod window;

pub use config::Config;
pub use connection::{BlockMemo, Connection, ConnectionError, Event, Field};
pub use frame::Reason;
/// How many request header blocks a connection remembers (see
/// [`Event::Request`]'s `block_id`).
pub(crate) use header_block::REMEMBERED as REMEMBERED_BLOCKS;

#[cfg(test)]
mod connection_tests;
