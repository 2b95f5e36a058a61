//! The server side of one HTTP/2 connection, sans I/O.
//!
//! Call order, for every batch of bytes read from the socket:
//! 1. [`Connection::recv`] with the bytes: control frames are answered
//!    inside, and the request events are appended to a caller-owned list;
//! 2. for each event, the caller answers with [`Connection::send_headers`],
//!    [`Connection::send_data`], [`Connection::send_trailers`] or
//!    [`Connection::reset_stream`];
//! 3. the caller writes [`Connection::output`] to the socket and reports what
//!    went out with [`Connection::advance_output`].
//!
//! Errors are sticky: after a connection error the GOAWAY is still in the
//! output, [`Connection::is_closed`] turns true and further input is ignored.

use crate::fast_hash::BuildStreamIdHasher;
use crate::h2::config::Config;
use crate::h2::fields::{FieldCheck, Fields};
use crate::h2::frame::{self, flag, kind, setting, FrameHeader, Reason, HEADER_LEN, MAX_WINDOW};
use crate::h2::hpack::{Decoder, Encoder, Indexing};
use crate::h2::window::Window;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;

/// What the peer asked for, in the order it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new request's headers. Its fields are `fields` in
    /// [`Connection::fields`].
    Request {
        /// The stream the request opened.
        stream: u32,
        /// Indexes of its header fields.
        fields: Range<usize>,
        /// The request has no body.
        end_stream: bool,
        /// The header list was larger than SETTINGS_MAX_HEADER_LIST_SIZE;
        /// its fields were dropped.
        too_large: bool,
    },
    /// Body bytes of a request: `data` indexes the input given to
    /// [`Connection::recv`]. Request trailers arrive as an empty `Data` with
    /// `end_stream`.
    Data {
        /// The stream.
        stream: u32,
        /// Where the bytes are in the input.
        data: Range<usize>,
        /// The client is done sending on this stream.
        end_stream: bool,
    },
    /// The peer reset the stream, or the server reset it for a stream
    /// error; nothing more may be sent on it.
    Reset {
        /// The stream.
        stream: u32,
    },
}

/// A header field to send.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The name, lower case.
    pub name: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Whether the field should enter the HPACK dynamic table.
    pub indexing: Indexing,
}

impl<'a> Field<'a> {
    /// A field that the encoder keeps in its dynamic table: for values
    /// repeated across responses.
    pub fn indexed(name: &'a [u8], value: &'a [u8]) -> Field<'a> {
        Field {
            name,
            value,
            indexing: Indexing::Incremental,
        }
    }

    /// A field sent as a literal, not kept in the dynamic table: for values
    /// that change from response to response.
    pub fn literal(name: &'a [u8], value: &'a [u8]) -> Field<'a> {
        Field {
            name,
            value,
            indexing: Indexing::None,
        }
    }
}

/// A connection error: the GOAWAY code and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionError {
    /// The code sent in GOAWAY.
    pub reason: Reason,
    /// What the peer did wrong, also sent as GOAWAY debug data.
    pub message: &'static str,
}

enum FrameError {
    Connection(Reason, &'static str),
    Stream(u32, Reason),
}

type StreamMap = HashMap<u32, Stream, BuildStreamIdHasher>;

struct Stream {
    /// The client may still send DATA.
    recv_open: bool,
    /// Bytes the client may still send before the server replenishes.
    recv_window: i64,
    send_window: Window,
    content_length: Option<u64>,
    received: u64,
    pending: Option<Box<PendingSend>>,
}

/// Response bytes waiting for the peer to open its windows.
#[derive(Default)]
struct PendingSend {
    data: Vec<u8>,
    sent: usize,
    end_stream: bool,
    trailers: Option<OwnedFields>,
}

/// Trailers kept until the data before them has been sent.
#[derive(Default)]
struct OwnedFields {
    bytes: Vec<u8>,
    fields: Vec<(Range<usize>, Range<usize>, Indexing)>,
}

/// A header block split over HEADERS and CONTINUATION frames.
struct PartialBlock {
    stream: u32,
    end_stream: bool,
    self_dependent: bool,
}

/// How many events one [`Connection::recv`] produces at most; the caller
/// passes the rest of the input again once it has sent the answers.
pub const MAX_EVENTS_PER_RECV: usize = 512;

/// How many closed stream ids are remembered to tell "closed" from "idle".
const CLOSED_MEMORY: usize = 256;

/// The server side of an HTTP/2 connection. See the module documentation
/// for the call order.
pub struct Connection {
    config: Config,
    preface_seen: bool,
    settings_seen: bool,
    decoder: Decoder,
    encoder: Encoder,
    peer_initial_window: u32,
    peer_max_frame_size: usize,
    streams: StreamMap,
    last_stream: u32,
    recently_closed: VecDeque<(u32, bool)>,
    send_window: Window,
    recv_window: i64,
    recv_unacked: u32,
    partial: Option<PartialBlock>,
    block_buf: Vec<u8>,
    fields: Fields,
    out: Vec<u8>,
    out_start: usize,
    blocked: VecDeque<u32>,
    /// Response bytes held back by flow control, over all streams.
    held: usize,
    /// Frames that made the server work without carrying a request forward
    /// (PING, SETTINGS, PRIORITY, RST_STREAM, empty DATA or CONTINUATION,
    /// unknown frames, stream errors) since the server last answered a call.
    unproductive: u32,
    /// The first GOAWAY of a graceful shutdown is out and its PING unanswered.
    draining: bool,
    goaway_sent: bool,
    goaway_received: bool,
    error: Option<ConnectionError>,
}

/// The payload of the PING that follows the first GOAWAY of a graceful
/// shutdown: its ACK proves the client has seen the GOAWAY.
const SHUTDOWN_PING: [u8; 8] = *b"pjmx-bye";

impl Connection {
    /// A new connection; its SETTINGS and the opening of the connection
    /// window are already in [`Connection::output`].
    pub fn new(config: Config) -> Connection {
        let mut out = Vec::with_capacity(64 << 10);
        frame::write_settings(
            &mut out,
            &[
                (
                    setting::MAX_CONCURRENT_STREAMS,
                    config.max_concurrent_streams,
                ),
                (setting::INITIAL_WINDOW_SIZE, config.initial_stream_window),
                (setting::MAX_FRAME_SIZE, config.max_frame_size),
                (setting::MAX_HEADER_LIST_SIZE, config.max_header_list_size),
            ],
        );
        const DEFAULT_WINDOW: u32 = 65_535;
        if config.connection_window > DEFAULT_WINDOW {
            frame::write_window_update(&mut out, 0, config.connection_window - DEFAULT_WINDOW);
        }
        let recv_window = i64::from(config.connection_window.max(DEFAULT_WINDOW));
        Connection {
            config,
            preface_seen: false,
            settings_seen: false,
            decoder: Decoder::new(4096),
            encoder: Encoder::new(),
            peer_initial_window: DEFAULT_WINDOW,
            peer_max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            streams: StreamMap::default(),
            last_stream: 0,
            recently_closed: VecDeque::with_capacity(CLOSED_MEMORY),
            send_window: Window::new(DEFAULT_WINDOW),
            recv_window,
            recv_unacked: 0,
            partial: None,
            block_buf: Vec::new(),
            fields: Fields::default(),
            out,
            out_start: 0,
            blocked: VecDeque::new(),
            held: 0,
            unproductive: 0,
            draining: false,
            goaway_sent: false,
            goaway_received: false,
            error: None,
        }
    }

    // ----- getters -----

    /// The header fields of the requests of the last [`Connection::recv`].
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// Whether the client's preface and first SETTINGS have arrived.
    pub fn handshake_done(&self) -> bool {
        self.settings_seen
    }

    /// Bytes waiting to be written to the socket.
    pub fn output(&self) -> &[u8] {
        &self.out[self.out_start..]
    }

    /// The number of open streams.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Response bytes held back because the peer's flow-control windows are
    /// closed. New streams are refused while this exceeds
    /// [`Config::max_held_bytes`].
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// The connection error, once one happened.
    pub fn error(&self) -> Option<ConnectionError> {
        self.error
    }

    /// Whether the stream is open for the server to send on.
    pub fn is_stream_open(&self, stream: u32) -> bool {
        self.streams.contains_key(&stream)
    }

    /// Whether the connection is finished: after a connection error, or
    /// after a GOAWAY either way once every stream is done. The caller
    /// closes the socket once [`Connection::output`] is written.
    pub fn is_closed(&self) -> bool {
        self.error.is_some()
            || ((self.goaway_sent || self.goaway_received) && self.streams.is_empty())
    }

    // ----- input -----

    /// Processes the complete frames at the start of `input` and returns how
    /// many bytes it used; the caller keeps the rest for the next call.
    /// Control frames are answered into the output; request events are
    /// appended to `events`, whose `Data` ranges index `input`.
    pub fn recv(&mut self, input: &[u8], events: &mut Vec<Event>) -> usize {
        self.fields.clear();
        if self.error.is_some() {
            return input.len();
        }
        let mut pos = 0;
        if !self.preface_seen {
            let n = input.len().min(frame::PREFACE.len());
            if input[..n] != frame::PREFACE[..n] {
                self.fail(Reason::PROTOCOL_ERROR, "invalid connection preface");
                return input.len();
            }
            if n < frame::PREFACE.len() {
                return 0;
            }
            self.preface_seen = true;
            pos = n;
        }
        while let Some(head) = FrameHeader::parse(&input[pos..]) {
            if events.len() >= MAX_EVENTS_PER_RECV {
                // Leave the rest for the next call, so that one batch's
                // answers stay bounded.
                break;
            }
            if head.len > self.config.max_frame_size {
                self.fail(
                    Reason::FRAME_SIZE_ERROR,
                    "frame larger than SETTINGS_MAX_FRAME_SIZE",
                );
                return input.len();
            }
            let start = pos + HEADER_LEN;
            let end = start + head.len as usize;
            if end > input.len() {
                break;
            }
            pos = end;
            if let Err(err) = self.on_frame(head, input, start..end, events) {
                match err {
                    FrameError::Connection(reason, message) => {
                        self.fail(reason, message);
                        return input.len();
                    }
                    FrameError::Stream(stream, reason) => {
                        self.stream_error(stream, reason, events);
                        if self.count_unproductive().is_err() {
                            self.fail(Reason::ENHANCE_YOUR_CALM, "too many stream errors");
                            return input.len();
                        }
                    }
                }
            }
        }
        if self.recv_unacked >= self.config.connection_window / 4 {
            frame::write_window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_window += i64::from(self.recv_unacked);
            self.recv_unacked = 0;
        }
        pos
    }

    fn on_frame(
        &mut self,
        head: FrameHeader,
        input: &[u8],
        payload: Range<usize>,
        events: &mut Vec<Event>,
    ) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        if !self.settings_seen {
            if head.kind != kind::SETTINGS || head.has(flag::ACK) {
                return Err(Conn(
                    Reason::PROTOCOL_ERROR,
                    "the preface must be followed by SETTINGS",
                ));
            }
            self.settings_seen = true;
        }
        if self.partial.is_some() && head.kind != kind::CONTINUATION {
            return Err(Conn(Reason::PROTOCOL_ERROR, "expected CONTINUATION"));
        }
        let unproductive = match head.kind {
            kind::PING | kind::SETTINGS => !head.has(flag::ACK),
            kind::DATA => payload.is_empty() && !head.has(flag::END_STREAM),
            kind::CONTINUATION => payload.is_empty() && !head.has(flag::END_HEADERS),
            kind::HEADERS | kind::WINDOW_UPDATE | kind::GOAWAY => false,
            _ => true,
        };
        if unproductive {
            self.count_unproductive()?;
        }
        let body = &input[payload.clone()];
        match head.kind {
            kind::DATA => self.on_data(head, input, payload, events),
            kind::HEADERS => self.on_headers(head, body, events),
            kind::CONTINUATION => self.on_continuation(head, body, events),
            kind::PRIORITY => {
                if head.stream == 0 {
                    return Err(Conn(Reason::PROTOCOL_ERROR, "PRIORITY on stream 0"));
                }
                if body.len() != 5 {
                    return Err(FrameError::Stream(head.stream, Reason::FRAME_SIZE_ERROR));
                }
                let dependency =
                    u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & MAX_WINDOW;
                if dependency == head.stream {
                    return Err(FrameError::Stream(head.stream, Reason::PROTOCOL_ERROR));
                }
                Ok(())
            }
            kind::RST_STREAM => self.on_rst_stream(head, body, events),
            kind::SETTINGS => self.on_settings(head, body),
            kind::PING => {
                if head.stream != 0 {
                    return Err(Conn(Reason::PROTOCOL_ERROR, "PING on a stream"));
                }
                let payload: &[u8; 8] = body
                    .try_into()
                    .map_err(|_| Conn(Reason::FRAME_SIZE_ERROR, "PING payload is not 8 bytes"))?;
                if !head.has(flag::ACK) {
                    frame::write_ping_ack(&mut self.out, payload);
                } else if self.draining && *payload == SHUTDOWN_PING {
                    self.draining = false;
                    frame::write_goaway(&mut self.out, self.last_stream, Reason::NO_ERROR, b"");
                    self.goaway_sent = true;
                }
                Ok(())
            }
            kind::GOAWAY => {
                if head.stream != 0 {
                    return Err(Conn(Reason::PROTOCOL_ERROR, "GOAWAY on a stream"));
                }
                if body.len() < 8 {
                    return Err(Conn(
                        Reason::FRAME_SIZE_ERROR,
                        "GOAWAY shorter than 8 bytes",
                    ));
                }
                self.goaway_received = true;
                Ok(())
            }
            kind::WINDOW_UPDATE => self.on_window_update(head, body, events),
            kind::PUSH_PROMISE => Err(Conn(Reason::PROTOCOL_ERROR, "PUSH_PROMISE from a client")),
            _ => Ok(()),
        }
    }

    fn on_data(
        &mut self,
        head: FrameHeader,
        input: &[u8],
        payload: Range<usize>,
        events: &mut Vec<Event>,
    ) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        if head.stream == 0 {
            return Err(Conn(Reason::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        let len = payload.len();
        if len as i64 > self.recv_window {
            return Err(Conn(
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.recv_window -= len as i64;
        self.recv_unacked += len as u32;
        let data = if head.has(flag::PADDED) {
            let (body, _) = frame::strip_padding(&input[payload.clone()]).ok_or(Conn(
                Reason::PROTOCOL_ERROR,
                "DATA padding longer than the frame",
            ))?;
            payload.start + 1..payload.start + 1 + body.len()
        } else {
            payload
        };
        let end_stream = head.has(flag::END_STREAM);
        let Some(stream) = self.streams.get_mut(&head.stream) else {
            return self.frame_on_unknown_stream(head.stream);
        };
        if !stream.recv_open {
            return Err(FrameError::Stream(head.stream, Reason::STREAM_CLOSED));
        }
        if len as i64 > stream.recv_window {
            return Err(FrameError::Stream(head.stream, Reason::FLOW_CONTROL_ERROR));
        }
        stream.recv_window -= len as i64;
        stream.received += data.len() as u64;
        if let Some(expected) = stream.content_length {
            if stream.received > expected || (end_stream && stream.received != expected) {
                return Err(FrameError::Stream(head.stream, Reason::PROTOCOL_ERROR));
            }
        }
        if end_stream {
            stream.recv_open = false;
        } else {
            let initial = i64::from(self.config.initial_stream_window);
            if stream.recv_window < initial / 2 {
                frame::write_window_update(
                    &mut self.out,
                    head.stream,
                    (initial - stream.recv_window) as u32,
                );
                stream.recv_window = initial;
            }
        }
        events.push(Event::Data {
            stream: head.stream,
            data,
            end_stream,
        });
        Ok(())
    }

    /// A frame other than HEADERS or PRIORITY on a stream not in the table:
    /// idle streams are a connection error, closed ones a stream error,
    /// except right after the server reset them.
    fn frame_on_unknown_stream(&self, stream: u32) -> Result<(), FrameError> {
        if stream > self.last_stream {
            return Err(FrameError::Connection(
                Reason::PROTOCOL_ERROR,
                "frame on an idle stream",
            ));
        }
        match self.recently_closed.iter().find(|(id, _)| *id == stream) {
            Some((_, true)) => Ok(()),
            _ => Err(FrameError::Stream(stream, Reason::STREAM_CLOSED)),
        }
    }

    fn on_headers(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        if head.stream == 0 || head.stream.is_multiple_of(2) {
            return Err(Conn(
                Reason::PROTOCOL_ERROR,
                "HEADERS on stream 0 or an even stream",
            ));
        }
        let mut block = body;
        if head.has(flag::PADDED) {
            block = frame::strip_padding(block)
                .ok_or(Conn(
                    Reason::PROTOCOL_ERROR,
                    "HEADERS padding longer than the frame",
                ))?
                .0;
        }
        let mut self_dependent = false;
        if head.has(flag::PRIORITY) {
            if block.len() < 5 {
                return Err(Conn(
                    Reason::FRAME_SIZE_ERROR,
                    "HEADERS too short for its priority",
                ));
            }
            let dependency =
                u32::from_be_bytes([block[0], block[1], block[2], block[3]]) & MAX_WINDOW;
            self_dependent = dependency == head.stream;
            block = &block[5..];
        }
        let end_stream = head.has(flag::END_STREAM);
        if !head.has(flag::END_HEADERS) {
            if block.len() > self.config.max_header_block_size {
                return Err(Conn(Reason::ENHANCE_YOUR_CALM, "header block too large"));
            }
            self.block_buf.clear();
            self.block_buf.extend_from_slice(block);
            self.partial = Some(PartialBlock {
                stream: head.stream,
                end_stream,
                self_dependent,
            });
            return Ok(());
        }
        self.on_header_block(head.stream, block, end_stream, self_dependent, events)
    }

    fn on_continuation(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        match &self.partial {
            Some(partial) if partial.stream == head.stream => {}
            _ => return Err(Conn(Reason::PROTOCOL_ERROR, "unexpected CONTINUATION")),
        }
        if self.block_buf.len() + body.len() > self.config.max_header_block_size {
            return Err(Conn(Reason::ENHANCE_YOUR_CALM, "header block too large"));
        }
        self.block_buf.extend_from_slice(body);
        if !head.has(flag::END_HEADERS) {
            return Ok(());
        }
        let partial = self.partial.take().expect("checked above");
        let block = std::mem::take(&mut self.block_buf);
        let result = self.on_header_block(
            partial.stream,
            &block,
            partial.end_stream,
            partial.self_dependent,
            events,
        );
        self.block_buf = block;
        result
    }

    fn on_header_block(
        &mut self,
        id: u32,
        block: &[u8],
        end_stream: bool,
        self_dependent: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        let is_trailers = self.streams.contains_key(&id);
        let first_field = self.fields.len();
        let mut check = FieldCheck::new(is_trailers);
        let max_list = self.config.max_header_list_size as usize;
        let Connection {
            decoder, fields, ..
        } = self;
        decoder
            .decode(block, |name, value| {
                if check.field(name, value) && check.list_size <= max_list && !is_trailers {
                    fields.push(name, value);
                }
            })
            .map_err(|_| Conn(Reason::COMPRESSION_ERROR, "invalid HPACK header block"))?;
        let too_large = check.list_size > max_list;
        if too_large {
            self.fields.truncate(first_field);
        }

        if is_trailers {
            let stream = self.streams.get_mut(&id).expect("checked above");
            if !stream.recv_open {
                return Err(FrameError::Stream(id, Reason::STREAM_CLOSED));
            }
            if !end_stream || check.finish().is_err() {
                return Err(FrameError::Stream(id, Reason::PROTOCOL_ERROR));
            }
            if stream
                .content_length
                .is_some_and(|expected| expected != stream.received)
            {
                return Err(FrameError::Stream(id, Reason::PROTOCOL_ERROR));
            }
            stream.recv_open = false;
            events.push(Event::Data {
                stream: id,
                data: 0..0,
                end_stream: true,
            });
            return Ok(());
        }
        if id <= self.last_stream {
            return Err(
                if self.recently_closed.iter().any(|(closed, _)| *closed == id) {
                    Conn(Reason::STREAM_CLOSED, "HEADERS on a closed stream")
                } else {
                    Conn(
                        Reason::PROTOCOL_ERROR,
                        "stream id lower than an earlier one",
                    )
                },
            );
        }
        self.last_stream = id;
        if self_dependent || check.finish().is_err() {
            return Err(FrameError::Stream(id, Reason::PROTOCOL_ERROR));
        }
        if self.goaway_sent
            || self.streams.len() >= self.config.max_concurrent_streams as usize
            || self.held > self.config.max_held_bytes
        {
            return Err(FrameError::Stream(id, Reason::REFUSED_STREAM));
        }
        self.streams.insert(
            id,
            Stream {
                recv_open: !end_stream,
                recv_window: i64::from(self.config.initial_stream_window),
                send_window: Window::new(self.peer_initial_window),
                content_length: check.content_length,
                received: 0,
                pending: None,
            },
        );
        if end_stream && check.content_length.is_some_and(|n| n != 0) {
            return Err(FrameError::Stream(id, Reason::PROTOCOL_ERROR));
        }
        events.push(Event::Request {
            stream: id,
            fields: first_field..self.fields.len(),
            end_stream,
            too_large,
        });
        Ok(())
    }

    fn on_rst_stream(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        if head.stream == 0 {
            return Err(Conn(Reason::PROTOCOL_ERROR, "RST_STREAM on stream 0"));
        }
        if body.len() != 4 {
            return Err(Conn(
                Reason::FRAME_SIZE_ERROR,
                "RST_STREAM payload is not 4 bytes",
            ));
        }
        if head.stream > self.last_stream {
            return Err(Conn(Reason::PROTOCOL_ERROR, "RST_STREAM on an idle stream"));
        }
        if self.drop_stream(head.stream) {
            // Closed by the peer: anything it sends on the stream from now
            // on is a STREAM_CLOSED error (RFC 9113 section 5.1).
            self.remember_closed(head.stream, false);
            events.push(Event::Reset {
                stream: head.stream,
            });
        }
        Ok(())
    }

    fn on_settings(&mut self, head: FrameHeader, body: &[u8]) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        if head.stream != 0 {
            return Err(Conn(Reason::PROTOCOL_ERROR, "SETTINGS on a stream"));
        }
        if head.has(flag::ACK) {
            if !body.is_empty() {
                return Err(Conn(
                    Reason::FRAME_SIZE_ERROR,
                    "SETTINGS ACK with a payload",
                ));
            }
            return Ok(());
        }
        if !body.len().is_multiple_of(6) {
            return Err(Conn(
                Reason::FRAME_SIZE_ERROR,
                "SETTINGS length not a multiple of 6",
            ));
        }
        for param in body.chunks_exact(6) {
            let id = u16::from_be_bytes([param[0], param[1]]);
            let value = u32::from_be_bytes([param[2], param[3], param[4], param[5]]);
            match id {
                setting::HEADER_TABLE_SIZE => {
                    self.encoder.set_max_table_size(value.min(4096) as usize)
                }
                setting::ENABLE_PUSH if value > 1 => {
                    return Err(Conn(Reason::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH above 1"));
                }
                setting::INITIAL_WINDOW_SIZE => {
                    if value > MAX_WINDOW {
                        return Err(Conn(
                            Reason::FLOW_CONTROL_ERROR,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let delta = i64::from(value) - i64::from(self.peer_initial_window);
                    self.peer_initial_window = value;
                    for stream in self.streams.values_mut() {
                        stream.send_window.adjust(delta).map_err(|_| {
                            Conn(Reason::FLOW_CONTROL_ERROR, "stream window above 2^31-1")
                        })?;
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value)
                    {
                        return Err(Conn(
                            Reason::PROTOCOL_ERROR,
                            "SETTINGS_MAX_FRAME_SIZE out of range",
                        ));
                    }
                    self.peer_max_frame_size = value as usize;
                }
                _ => {}
            }
        }
        frame::write_settings_ack(&mut self.out);
        self.flush_blocked();
        Ok(())
    }

    fn on_window_update(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), FrameError> {
        use FrameError::Connection as Conn;
        let _ = events;
        let bytes: [u8; 4] = body.try_into().map_err(|_| {
            Conn(
                Reason::FRAME_SIZE_ERROR,
                "WINDOW_UPDATE payload is not 4 bytes",
            )
        })?;
        let increment = u32::from_be_bytes(bytes) & MAX_WINDOW;
        if head.stream == 0 {
            if increment == 0 {
                return Err(Conn(Reason::PROTOCOL_ERROR, "WINDOW_UPDATE of 0"));
            }
            self.send_window
                .adjust(i64::from(increment))
                .map_err(|_| Conn(Reason::FLOW_CONTROL_ERROR, "connection window above 2^31-1"))?;
        } else {
            let Some(stream) = self.streams.get_mut(&head.stream) else {
                if head.stream > self.last_stream {
                    return Err(Conn(
                        Reason::PROTOCOL_ERROR,
                        "WINDOW_UPDATE on an idle stream",
                    ));
                }
                return Ok(());
            };
            if increment == 0 {
                return Err(FrameError::Stream(head.stream, Reason::PROTOCOL_ERROR));
            }
            if stream.send_window.adjust(i64::from(increment)).is_err() {
                return Err(FrameError::Stream(head.stream, Reason::FLOW_CONTROL_ERROR));
            }
        }
        self.flush_blocked();
        Ok(())
    }

    /// Counts a frame or error that did not move a request forward; past
    /// the budget the peer is flooding and the connection ends with
    /// ENHANCE_YOUR_CALM.
    fn count_unproductive(&mut self) -> Result<(), FrameError> {
        self.unproductive += 1;
        if self.unproductive > self.config.max_unproductive_frames {
            return Err(FrameError::Connection(
                Reason::ENHANCE_YOUR_CALM,
                "too many frames without a request",
            ));
        }
        Ok(())
    }

    fn stream_error(&mut self, stream: u32, reason: Reason, events: &mut Vec<Event>) {
        frame::write_rst_stream(&mut self.out, stream, reason);
        if self.drop_stream(stream) {
            events.push(Event::Reset { stream });
        }
        // A stream reset while idle (a bad PRIORITY frame) is closed from
        // now on: it can no longer be opened by HEADERS.
        self.last_stream = self.last_stream.max(stream);
        self.remember_closed(stream, true);
    }

    /// Forgets a stream and the response data it had queued; returns
    /// whether it was there.
    fn drop_stream(&mut self, stream: u32) -> bool {
        match self.streams.remove(&stream) {
            Some(state) => {
                if let Some(pending) = state.pending {
                    self.held -= pending.data.len() - pending.sent;
                }
                true
            }
            None => false,
        }
    }

    /// Remembers a closed stream; `server_reset` when the server reset it
    /// while the client could still be sending, so that frames the client
    /// sent before it saw the reset are ignored.
    fn remember_closed(&mut self, stream: u32, server_reset: bool) {
        if self.recently_closed.len() == CLOSED_MEMORY {
            self.recently_closed.pop_front();
        }
        self.recently_closed.push_back((stream, server_reset));
    }

    fn fail(&mut self, reason: Reason, message: &'static str) {
        frame::write_goaway(&mut self.out, self.last_stream, reason, message.as_bytes());
        self.error = Some(ConnectionError { reason, message });
        self.streams.clear();
        self.blocked.clear();
        self.held = 0;
    }

    // ----- commands -----

    /// Sends response headers on `stream`; with `end_stream` they close it
    /// (a trailers-only response). Ignored if the stream is gone.
    pub fn send_headers(&mut self, stream: u32, fields: &[Field<'_>], end_stream: bool) {
        if !self.streams.contains_key(&stream) {
            return;
        }
        self.write_header_block(stream, fields.iter().copied(), end_stream);
        if end_stream {
            self.close_send_side(stream);
        }
    }

    /// Sends body bytes on `stream`, as far as the peer's windows allow;
    /// the rest is queued and goes out as WINDOW_UPDATEs arrive. Ignored if
    /// the stream is gone.
    pub fn send_data(&mut self, stream: u32, data: &[u8], end_stream: bool) {
        let Some(state) = self.streams.get_mut(&stream) else {
            return;
        };
        if let Some(pending) = &mut state.pending {
            pending.data.extend_from_slice(data);
            pending.end_stream = end_stream;
            self.held += data.len();
            return;
        }
        let sent = write_data_frames(
            &mut self.out,
            stream,
            data,
            end_stream,
            &mut state.send_window,
            &mut self.send_window,
            self.peer_max_frame_size,
        );
        if sent < data.len() {
            self.held += data.len() - sent;
            state.pending = Some(Box::new(PendingSend {
                data: data[sent..].to_vec(),
                sent: 0,
                end_stream,
                trailers: None,
            }));
            self.queue_blocked(stream);
        } else if end_stream {
            self.close_send_side(stream);
        }
    }

    /// Sends trailers on `stream` and closes it; they wait behind queued
    /// data. Ignored if the stream is gone.
    pub fn send_trailers(&mut self, stream: u32, fields: &[Field<'_>]) {
        let Some(state) = self.streams.get_mut(&stream) else {
            return;
        };
        if let Some(pending) = &mut state.pending {
            let mut owned = OwnedFields::default();
            for field in fields {
                let name = owned.bytes.len()..owned.bytes.len() + field.name.len();
                owned.bytes.extend_from_slice(field.name);
                let value = owned.bytes.len()..owned.bytes.len() + field.value.len();
                owned.bytes.extend_from_slice(field.value);
                owned.fields.push((name, value, field.indexing));
            }
            pending.trailers = Some(owned);
            return;
        }
        self.write_header_block(stream, fields.iter().copied(), true);
        self.close_send_side(stream);
    }

    /// Resets `stream` with `reason` and forgets it.
    pub fn reset_stream(&mut self, stream: u32, reason: Reason) {
        if self.drop_stream(stream) {
            frame::write_rst_stream(&mut self.out, stream, reason);
            self.remember_closed(stream, true);
        }
    }

    /// Starts a graceful shutdown in two steps, so that no request already
    /// on its way is refused: a GOAWAY that still allows every stream, with a
    /// PING; once the PING's ACK shows the client has seen it, a GOAWAY naming
    /// the last stream accepted. Streams opened later are refused; open ones
    /// go on to their end.
    pub fn go_away(&mut self) {
        if !self.draining && !self.goaway_sent && self.error.is_none() {
            frame::write_goaway(&mut self.out, MAX_WINDOW, Reason::NO_ERROR, b"");
            frame::write_header(&mut self.out, 8, kind::PING, 0, 0);
            self.out.extend_from_slice(&SHUTDOWN_PING);
            self.draining = true;
        }
    }

    /// Closes the connection with `reason` (for example ENHANCE_YOUR_CALM
    /// when the server refuses more connections).
    pub fn close(&mut self, reason: Reason, message: &'static str) {
        if self.error.is_none() {
            self.fail(reason, message);
        }
    }

    /// Reports that the first `n` bytes of [`Connection::output`] were written.
    pub fn advance_output(&mut self, n: usize) {
        self.out_start += n;
        if self.out_start >= self.out.len() {
            self.out.clear();
            self.out_start = 0;
        } else if self.out_start > 64 << 10 && self.out_start * 2 > self.out.len() {
            self.out.drain(..self.out_start);
            self.out_start = 0;
        }
    }

    /// Encodes a header block straight into the output behind a HEADERS
    /// frame header; only a block larger than the peer's frame size is
    /// moved out again and split over CONTINUATION frames.
    fn write_header_block<'f>(
        &mut self,
        stream: u32,
        fields: impl Iterator<Item = Field<'f>>,
        end_stream: bool,
    ) {
        let end_flag = if end_stream { flag::END_STREAM } else { 0 };
        let head = self.out.len();
        frame::write_header(
            &mut self.out,
            0,
            kind::HEADERS,
            end_flag | flag::END_HEADERS,
            stream,
        );
        let start = self.out.len();
        self.encoder.begin_block(&mut self.out);
        for field in fields {
            self.encoder
                .encode(field.name, field.value, field.indexing, &mut self.out);
        }
        let len = self.out.len() - start;
        if len <= self.peer_max_frame_size {
            frame::patch_len(&mut self.out, head, len);
            return;
        }
        let block: Vec<u8> = self.out.split_off(start);
        self.out.truncate(head);
        let mut chunks = block.chunks(self.peer_max_frame_size);
        let first = chunks.next().unwrap_or(&[]);
        let rest = chunks.len();
        frame::write_header(&mut self.out, first.len(), kind::HEADERS, end_flag, stream);
        self.out.extend_from_slice(first);
        for (i, chunk) in chunks.enumerate() {
            let flags = if i + 1 == rest { flag::END_HEADERS } else { 0 };
            frame::write_header(
                &mut self.out,
                chunk.len(),
                kind::CONTINUATION,
                flags,
                stream,
            );
            self.out.extend_from_slice(chunk);
        }
    }

    fn close_send_side(&mut self, stream: u32) {
        let Some(state) = self.streams.remove(&stream) else {
            return;
        };
        if let Some(pending) = &state.pending {
            self.held -= pending.data.len() - pending.sent;
        }
        self.unproductive = 0;
        if state.recv_open {
            // The answer is complete while the client is still sending: tell
            // it to stop (RFC 9113 section 8.1).
            frame::write_rst_stream(&mut self.out, stream, Reason::NO_ERROR);
        }
        self.remember_closed(stream, state.recv_open);
    }

    /// Queues a stream that now waits for the peer's windows. Streams
    /// reset while waiting leave their ids behind until a flush passes;
    /// dropping those whenever they outnumber the live ones keeps the queue
    /// bounded by the open streams even if the windows stay shut.
    fn queue_blocked(&mut self, stream: u32) {
        if self.blocked.len() >= 2 * self.streams.len() + 16 {
            let streams = &self.streams;
            self.blocked
                .retain(|id| streams.get(id).is_some_and(|s| s.pending.is_some()));
        }
        self.blocked.push_back(stream);
    }

    /// How many stream ids wait in the flow-control queue.
    #[cfg(test)]
    pub(crate) fn blocked_len(&self) -> usize {
        self.blocked.len()
    }

    /// Sends what the windows now allow of the queued responses, in order.
    fn flush_blocked(&mut self) {
        let mut rounds = self.blocked.len();
        while rounds > 0 && self.send_window.available() > 0 {
            rounds -= 1;
            let Some(id) = self.blocked.pop_front() else {
                break;
            };
            let Some(state) = self.streams.get_mut(&id) else {
                continue;
            };
            let Some(mut pending) = state.pending.take() else {
                continue;
            };
            let sent = write_data_frames(
                &mut self.out,
                id,
                &pending.data[pending.sent..],
                pending.end_stream && pending.trailers.is_none(),
                &mut state.send_window,
                &mut self.send_window,
                self.peer_max_frame_size,
            );
            pending.sent += sent;
            self.held -= sent;
            if pending.sent < pending.data.len() {
                state.pending = Some(pending);
                self.blocked.push_back(id);
                continue;
            }
            if let Some(trailers) = pending.trailers.take() {
                let fields = trailers.fields.iter().map(|(name, value, indexing)| Field {
                    name: &trailers.bytes[name.clone()],
                    value: &trailers.bytes[value.clone()],
                    indexing: *indexing,
                });
                self.write_header_block(id, fields, true);
                self.close_send_side(id);
            } else if pending.end_stream {
                self.close_send_side(id);
            }
        }
    }
}

/// Writes as much of `data` as the windows and the frame size allow, as
/// DATA frames; END_STREAM goes on the last one if all of `data` fits.
/// Returns the number of bytes of `data` written.
fn write_data_frames(
    out: &mut Vec<u8>,
    stream: u32,
    data: &[u8],
    end_stream: bool,
    stream_window: &mut Window,
    conn_window: &mut Window,
    max_frame: usize,
) -> usize {
    if data.is_empty() {
        if end_stream {
            frame::write_header(out, 0, kind::DATA, flag::END_STREAM, stream);
        }
        return 0;
    }
    let mut sent = 0;
    loop {
        let room = stream_window
            .available()
            .min(conn_window.available())
            .min(max_frame);
        let n = room.min(data.len() - sent);
        if n == 0 {
            return sent;
        }
        let last = sent + n == data.len();
        let flags = if last && end_stream {
            flag::END_STREAM
        } else {
            0
        };
        frame::write_header(out, n, kind::DATA, flags, stream);
        out.extend_from_slice(&data[sent..sent + n]);
        stream_window.consume(n);
        conn_window.consume(n);
        sent += n;
        if last {
            return sent;
        }
    }
}
