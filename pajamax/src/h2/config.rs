//! Limits and settings of the HTTP/2 codec.

/// What a connection advertises and enforces. Every limit bounds something
/// that peer input could otherwise grow.
///
/// [`Builder::bind`](crate::Builder::bind) refuses (`InvalidInput`) a
/// `max_frame_size` outside 16 384 ..= 16 777 215, a window above
/// 2^31 - 1, and a `max_concurrent_streams`, `initial_stream_window`,
/// `max_unproductive_frames` or `stream_send_buffer` of 0.
#[derive(Debug, Clone)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: open streams allowed per connection;
    /// a stream past it is refused with REFUSED_STREAM. Default 4096.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: how much a client may send on one stream
    /// before the server replenishes its window. Default 1 MiB.
    pub initial_stream_window: u32,
    /// The connection-level receive window the server opens at start; a
    /// value below HTTP/2's initial 65 535 leaves it at that. Default
    /// 16 MiB.
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload accepted.
    /// Default 16 384.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest decoded header list
    /// (names + values + 32 bytes per field) of one request; a request past
    /// it is answered RESOURCE_EXHAUSTED. Default 16 KiB.
    pub max_header_list_size: u32,
    /// The largest encoded header block continued in CONTINUATION frames,
    /// summed over its HEADERS and CONTINUATION frames; past it the
    /// connection is closed with ENHANCE_YOUR_CALM. A block that fits in
    /// one HEADERS frame is bounded by `max_frame_size` instead. Default
    /// 64 KiB.
    pub max_header_block_size: usize,
    /// Response bytes one stream may hold while the peer's flow-control
    /// windows are shut; past it `send_data` takes no more on that stream
    /// until some went out. A producer is held back by this, per stream.
    /// Default 64 KiB; 0 makes the server's `bind` fail with `InvalidInput`.
    pub stream_send_buffer: usize,
    /// Response bytes that may wait for the peer's flow-control windows
    /// (a zero-window or never-reading peer, or one that asked for more
    /// at once than its windows take); past it new unary and
    /// server-streaming calls wait to run, their requests kept, until the
    /// peer opens its windows, new client-streaming and bidirectional
    /// calls are refused with REFUSED_STREAM, and producers on the worker
    /// are not pulled. The codec counts the bytes
    /// ([`Connection::held_bytes`](super::Connection::held_bytes)); the
    /// gRPC layer holds calls back. Default 16 MiB.
    pub max_held_bytes: usize,
    /// Frames that make the server work without moving a request forward
    /// (PING, SETTINGS, PRIORITY, RST_STREAM, empty DATA or CONTINUATION,
    /// unknown frames, stream errors) allowed between two answers; past it
    /// the connection is closed with ENHANCE_YOUR_CALM. Bounds ping,
    /// settings, empty-frame and reset floods, rapid reset included. The
    /// client's first SETTINGS counts too. The server's workers start the
    /// count again every minute as well, so that a stream that lives for
    /// days does not add up its client's keepalive PINGs. Default 10 000.
    pub max_unproductive_frames: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_concurrent_streams: 4096,
            initial_stream_window: 1 << 20,
            connection_window: 16 << 20,
            max_frame_size: 16_384,
            max_header_list_size: 16 << 10,
            max_header_block_size: 64 << 10,
            stream_send_buffer: 64 << 10,
            max_held_bytes: 16 << 20,
            max_unproductive_frames: 10_000,
        }
    }
}
