//! A sans-I/O HTTP/2 server codec (RFC 9113) with HPACK (RFC 7541).
//!
//! Nothing here touches a socket, a thread or a clock: bytes go in, events and
//! bytes come out.

pub mod hpack;
