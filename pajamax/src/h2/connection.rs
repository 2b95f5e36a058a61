//! The server side of one HTTP/2 connection, sans I/O.
//!
//! [`Connection`] coordinates the parts of the codec, each in a file of its
//! own: frame payloads (`frame/`), the stream table (`streams`), header
//! block assembly (`header_block`), receive and send flow control
//! (`recv_flow`, `send_flow`), the output and its HPACK encoder (`output`),
//! SETTINGS (`settings`) and GOAWAY (`shutdown`).
//!
//! Call order, for every batch of bytes read from the socket:
//! 1. [`Connection::recv`] with the bytes: control frames are answered
//!    inside, and the request events are appended to a caller-owned list;
//! 2. for each event, the caller answers with [`Connection::send_headers`],
//!    [`Connection::send_data`], [`Connection::send_trailers`] or
//!    [`Connection::reset_stream`], and tells with
//!    [`Connection::release_capacity`] how much request body it has taken
//!    in, so that the client may send more;
//! 3. the caller writes [`Connection::output`] to the socket and reports what
//!    went out with [`Connection::advance_output`].
//!
//! A stream has a receiving and a sending half. The client's window on a
//! stream opens again only for bytes the caller has released, so a consumer
//! that falls behind slows its client down. What the server sends goes out
//! as far as the client's windows allow; the rest is held, up to
//! [`Config::stream_send_buffer`] bytes per stream ([`Connection::send_data`]
//! refuses more), and [`Event::Writable`] says when held bytes went out.
//!
//! Errors are sticky: after a connection error the GOAWAY is still in the
//! output, [`Connection::is_closed`] turns true and further input is ignored.

use crate::h2::config::Config;
pub use crate::h2::error::ConnectionError;
use crate::h2::error::Error;
use crate::h2::fields::Fields;
use crate::h2::frame::headers::Headers;
use crate::h2::frame::ping::Ping;
use crate::h2::frame::settings::Settings;
use crate::h2::frame::{self, flag, kind, FrameHeader, Reason, HEADER_LEN};
use crate::h2::header_block::{self, BlockAssembler, RepeatedBlock};
use crate::h2::hpack::Decoder;
use crate::h2::output::Output;
pub use crate::h2::output::{BlockMemo, Field};
use crate::h2::recv_flow::{self, RecvFlow};
use crate::h2::send_flow::{self, SendFlow};
use crate::h2::settings::{self, PeerSettings};
use crate::h2::shutdown::Shutdown;
use crate::h2::streams::{RecvHalf, SendHalf, Stream, Streams, NO_LENGTH};
use std::ops::Range;

/// Room the batch's field list keeps between reads: a read of many large
/// header blocks gives the rest back.
const FIELDS_KEEP: usize = 64 << 10;

/// Room each of the buffers header blocks are decoded in keeps past the
/// worker's sweep ([`Connection::trim_header_rooms`]).
const HEADER_ROOM_KEPT: usize = 4 << 10;

/// What the peer asked for, in the order it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new request's headers. Its fields are `fields` in
    /// [`Connection::fields`].
    Request {
        /// The stream the request opened.
        stream: u32,
        /// Indexes of its header fields in [`Connection::fields`]; empty for
        /// a remembered block (see `block_id`), whose fields
        /// [`Connection::request_fields`] gives.
        fields: Range<usize>,
        /// The request has no body.
        end_stream: bool,
        /// The header list was larger than SETTINGS_MAX_HEADER_LIST_SIZE;
        /// its fields were dropped.
        too_large: bool,
        /// Not 0 when the header block is the same as one before (the same
        /// bytes, the HPACK table unchanged), and so are its fields: the
        /// same id, the same fields.
        block_id: u64,
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
    /// error; nothing more may be sent on it. Events of the same batch for
    /// that stream are taken back; a stream opened and reset within one
    /// batch is not reported at all.
    Reset {
        /// The stream.
        stream: u32,
        /// The tag the consumer had attached to it
        /// ([`Connection::set_tag`]), 0 for none.
        tag: u32,
    },
    /// Bytes the stream held for the client's windows went out, or the
    /// windows it waited for opened ([`Connection::await_room`]): it may
    /// take more ([`Connection::send_capacity`]).
    Writable {
        /// The stream.
        stream: u32,
    },
}

impl Event {
    /// The stream the event is about.
    pub fn stream(&self) -> u32 {
        match self {
            Event::Request { stream, .. }
            | Event::Data { stream, .. }
            | Event::Reset { stream, .. }
            | Event::Writable { stream } => *stream,
        }
    }
}

/// How many events one [`Connection::recv`] produces at most; the caller
/// passes the rest of the input again once it has sent the answers.
pub const MAX_EVENTS_PER_RECV: usize = 512;

/// A whole answer being written straight into the output
/// ([`Connection::begin_answer`]).
#[must_use = "an answer begun is finished or taken back"]
#[derive(Debug)]
pub(crate) struct InPlaceAnswer {
    stream: u32,
    /// Where its HEADERS frame starts in the output.
    start: usize,
    /// Where its body starts.
    body: usize,
    /// How much body the client's windows take.
    room: usize,
}

/// The server side of an HTTP/2 connection. See the module documentation
/// for the call order.
pub struct Connection {
    config: Config,
    preface_seen: bool,
    settings_seen: bool,
    /// The connection is out of its steady state: it failed, has not seen
    /// the client's preface or first SETTINGS yet, or a header block waits
    /// for its CONTINUATION. While it is not, each frame passes one test
    /// of this flag instead of one of each ([`Connection::settle`] works it
    /// out again).
    unsettled: bool,
    /// The client acknowledged the server's SETTINGS: until then it may
    /// still send within the default stream window (RFC 9113 section 6.9.3).
    settings_acked: bool,
    /// The receive window a stream the client opens starts with: the
    /// configured one, or the default if larger until the SETTINGS ACK.
    opening_window: u32,
    decoder: Decoder,
    peer: PeerSettings,
    streams: Streams,
    recv_flow: RecvFlow,
    send_flow: SendFlow,
    blocks: BlockAssembler,
    /// The last request header block, decoded.
    repeated: RepeatedBlock,
    fields: Fields,
    output: Output,
    /// Frames that made the server work without carrying a request forward
    /// (PING, SETTINGS, PRIORITY, RST_STREAM, empty DATA or CONTINUATION,
    /// unknown frames, stream errors) since the server last answered a call.
    unproductive: u32,
    shutdown: Shutdown,
    error: Option<ConnectionError>,
    /// Counts the calls of [`Connection::recv`], to know which events of a
    /// stream belong to the batch being read.
    batch: u32,
}

impl Connection {
    /// A new connection; its SETTINGS and the opening of the connection
    /// window are already in [`Connection::output`].
    pub fn new(config: Config) -> Connection {
        let mut output = Output::new();
        settings::write_local(&config, output.buf());
        let recv_flow = RecvFlow::new(config.connection_window);
        recv_flow.write_opening(output.buf());
        Connection {
            preface_seen: false,
            settings_seen: false,
            unsettled: true,
            settings_acked: false,
            opening_window: recv_flow::opening_window(config.initial_stream_window),
            decoder: Decoder::new(4096),
            peer: PeerSettings::new(),
            streams: Streams::new(),
            recv_flow,
            send_flow: SendFlow::new(),
            blocks: BlockAssembler::new(config.max_header_block_size),
            repeated: RepeatedBlock::default(),
            fields: Fields::default(),
            output,
            unproductive: 0,
            shutdown: Shutdown::default(),
            error: None,
            batch: 0,
            config,
        }
    }

    // ----- getters -----

    /// The header fields of the requests of the last [`Connection::recv`]
    /// that were decoded afresh; see [`Connection::request_fields`].
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// The header fields of an [`Event::Request`] of the last
    /// [`Connection::recv`], by its `fields` and `block_id`: a remembered
    /// block's fields are kept once, not copied for each request.
    pub fn request_fields(&self, fields: Range<usize>, block_id: u64) -> (&Fields, Range<usize>) {
        if !fields.is_empty() || block_id == 0 {
            return (&self.fields, fields);
        }
        match self.repeated.fields_of(block_id) {
            Some(kept) => (kept, 0..kept.len()),
            None => (&self.fields, fields),
        }
    }

    /// Whether the client's preface and first SETTINGS have arrived.
    pub fn handshake_done(&self) -> bool {
        self.settings_seen
    }

    /// Bytes waiting to be written to the socket.
    pub fn output(&self) -> &[u8] {
        self.output.pending()
    }

    /// How many bytes [`Connection::output`] holds.
    #[inline]
    pub fn output_len(&self) -> usize {
        self.output.pending_len()
    }

    /// The number of open streams.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Response bytes held back because the peer's flow-control windows are
    /// closed. The gRPC layer holds new calls back while this exceeds
    /// [`Config::max_held_bytes`].
    pub fn held_bytes(&self) -> usize {
        self.send_flow.held()
    }

    /// The connection error, once one happened.
    pub fn error(&self) -> Option<ConnectionError> {
        self.error
    }

    /// The highest stream id the peer has opened: it changes whenever a
    /// new stream is opened.
    pub fn last_peer_stream(&self) -> u32 {
        self.streams.last()
    }

    /// Whether the stream is open for the server to send on.
    pub fn is_stream_open(&self, stream: u32) -> bool {
        self.streams.contains(stream)
    }

    /// The largest header list the peer takes (its
    /// SETTINGS_MAX_HEADER_LIST_SIZE; unlimited until it says), counted as
    /// [`header_list_size`] does.
    pub fn peer_max_header_list(&self) -> usize {
        self.peer.max_header_list
    }

    /// Whether the connection is on its way out: a GOAWAY went either way,
    /// or it failed.
    #[inline]
    pub(crate) fn is_ending(&self) -> bool {
        self.shutdown.ending()
    }

    /// Whether the connection is finished: after a connection error, or
    /// after a GOAWAY either way once every stream is done. The caller
    /// closes the socket once [`Connection::output`] is written.
    pub fn is_closed(&self) -> bool {
        // A failure marks the shutdown's end too: one test while neither
        // side has ended anything.
        self.shutdown.ending() && (self.error.is_some() || self.streams.is_empty())
    }

    /// The bytes of the fields of remembered blocks replaced in the last
    /// read and kept for its events.
    #[cfg(test)]
    pub(crate) fn retired_field_bytes(&self) -> usize {
        self.repeated.retired_bytes()
    }

    /// How many stream ids wait in the flow-control queue.
    #[cfg(test)]
    pub(crate) fn blocked_len(&self) -> usize {
        self.send_flow.blocked_len()
    }

    // ----- input -----

    /// Processes the complete frames at the start of `input` and returns how
    /// many bytes it used; the caller keeps the rest for the next call.
    /// Control frames are answered into the output; request events are
    /// appended to `events`, whose `Data` ranges index `input`.
    pub fn recv(&mut self, input: &[u8], events: &mut Vec<Event>) -> usize {
        self.fields.clear_keeping(FIELDS_KEEP);
        self.repeated.new_batch();
        self.batch = self.batch.wrapping_add(1);
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
                    Error::GoAway(reason, message) => {
                        self.fail(reason, message);
                        return input.len();
                    }
                    Error::Reset(stream, reason) => {
                        self.stream_error(stream, reason, events);
                        if self.count_unproductive().is_err() {
                            self.fail(Reason::ENHANCE_YOUR_CALM, "too many stream errors");
                            return input.len();
                        }
                    }
                }
            }
        }
        self.recv_flow.replenish(self.output.buf());
        pos
    }

    /// The checks of a frame on a connection out of its steady state: the
    /// first frame must be SETTINGS, and the frame after a header block's
    /// start its CONTINUATION. Works out again whether the connection is
    /// still out of its steady state: the frame that ends a block leaves
    /// it so, and the next frame settles it.
    #[inline(never)]
    fn check_unsettled(&mut self, head: FrameHeader) -> Result<(), Error> {
        if !self.settings_seen {
            if head.kind != kind::SETTINGS || head.has(flag::ACK) {
                return Err(Error::GoAway(
                    Reason::PROTOCOL_ERROR,
                    "the preface must be followed by SETTINGS",
                ));
            }
            self.settings_seen = true;
        }
        if self.blocks.expects_continuation() && head.kind != kind::CONTINUATION {
            return Err(Error::GoAway(
                Reason::PROTOCOL_ERROR,
                "expected CONTINUATION",
            ));
        }
        self.settle();
        Ok(())
    }

    /// Works out [`Connection::unsettled`] from what it stands for.
    fn settle(&mut self) {
        self.unsettled = self.error.is_some()
            || !self.preface_seen
            || !self.settings_seen
            || self.blocks.expects_continuation();
    }

    fn on_frame(
        &mut self,
        head: FrameHeader,
        input: &[u8],
        payload: Range<usize>,
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        if self.unsettled {
            self.check_unsettled(head)?;
        }
        // Frames that do not move a request forward are counted first
        // (`count_unproductive`): PING and SETTINGS but their ACKs, empty
        // CONTINUATION that ends nothing, PRIORITY, RST_STREAM,
        // PUSH_PROMISE and unknown types. One match for both. DATA without
        // a body that ends nothing is counted once its padding is off.
        match head.kind {
            kind::DATA => self.on_data(head, input, payload, events),
            kind::HEADERS => self.on_headers(head, &input[payload], events),
            _ => self.on_control_frame(head, &input[payload], events),
        }
    }

    /// Every frame but DATA and HEADERS: out of the loop that reads
    /// requests, which then keeps fewer values at hand for a turn of one
    /// request (`docs/benchmarks.md`).
    #[inline(never)]
    fn on_control_frame(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        match head.kind {
            kind::CONTINUATION => {
                if body.is_empty() && !head.has(flag::END_HEADERS) {
                    self.count_unproductive()?;
                }
                self.on_continuation(head, body, events)
            }
            kind::PRIORITY => {
                self.count_unproductive()?;
                frame::priority::check(head, body)
            }
            kind::RST_STREAM => {
                self.count_unproductive()?;
                self.on_rst_stream(head, body, events)
            }
            kind::SETTINGS => {
                if !head.has(flag::ACK) {
                    self.count_unproductive()?;
                }
                self.on_settings(head, body, events)
            }
            kind::PING => {
                if !head.has(flag::ACK) {
                    self.count_unproductive()?;
                }
                let ping = Ping::load(head, body)?;
                if !ping.ack {
                    frame::write_ping_ack(self.output.buf(), &ping.payload);
                } else {
                    let last = self.streams.last();
                    self.shutdown
                        .on_ping_ack(&ping.payload, last, self.output.buf());
                }
                Ok(())
            }
            kind::GOAWAY => {
                frame::goaway::check(head, body)?;
                self.shutdown.on_goaway();
                Ok(())
            }
            kind::WINDOW_UPDATE => self.on_window_update(head, body, events),
            kind::PUSH_PROMISE => {
                self.count_unproductive()?;
                Err(Error::GoAway(
                    Reason::PROTOCOL_ERROR,
                    "PUSH_PROMISE from a client",
                ))
            }
            _ => self.count_unproductive(),
        }
    }

    fn on_data(
        &mut self,
        head: FrameHeader,
        input: &[u8],
        payload: Range<usize>,
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        if head.stream == 0 {
            return Err(Error::GoAway(Reason::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        let len = payload.len();
        self.recv_flow.take(len)?;
        let body = frame::data::unpad(head, &input[payload.clone()])?;
        let data = payload.start + body.start..payload.start + body.end;
        let end_stream = head.has(flag::END_STREAM);
        if data.is_empty() && !end_stream {
            // No body, padding or not: it moves nothing forward.
            self.count_unproductive()?;
        }
        let Some(stream) = self.streams.get_mut(head.stream) else {
            return self.streams.frame_on_unknown(head.stream);
        };
        if !stream.recv_open() {
            return Err(Error::Reset(head.stream, Reason::STREAM_CLOSED));
        }
        recv_flow::take_stream(stream, head.stream, len, data.len())?;
        if stream.content_left != NO_LENGTH {
            let len = data.len() as u64;
            if len > stream.content_left || (end_stream && len != stream.content_left) {
                return Err(Error::Reset(head.stream, Reason::PROTOCOL_ERROR));
            }
            stream.content_left -= len;
        }
        stream.event_batch = self.batch;
        if end_stream {
            stream.recv = RecvHalf::Closed;
        } else {
            // Padding is not the consumer's to release.
            recv_flow::replenish_stream(
                stream,
                head.stream,
                self.config.initial_stream_window,
                self.output.buf(),
            );
        }
        events.push(Event::Data {
            stream: head.stream,
            data,
            end_stream,
        });
        Ok(())
    }

    fn on_headers(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        let headers = Headers::load(head, body)?;
        if !headers.end_headers {
            // Until its CONTINUATION ends it, each frame is checked.
            self.unsettled = true;
            return self.blocks.begin(head.stream, &headers);
        }
        self.on_header_block(
            head.stream,
            headers.block,
            headers.end_stream,
            headers.self_dependent,
            events,
        )
    }

    fn on_continuation(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        let Some((partial, block)) = self.blocks.continuation(head, body)? else {
            return Ok(());
        };
        let result = self.on_header_block(
            partial.stream,
            &block,
            partial.end_stream,
            partial.self_dependent,
            events,
        );
        self.blocks.recycle(block);
        result
    }

    /// A complete header block: a request's head, or trailers. Only a
    /// request's fields stay in the batch's field list (its event points at
    /// them); trailers are decoded without keeping theirs, and those of a
    /// block that fails go at once, so blocks that open nothing cannot pile
    /// fields up in one read.
    fn on_header_block(
        &mut self,
        id: u32,
        block: &[u8],
        end_stream: bool,
        self_dependent: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        let first_field = self.fields.len();
        // A stream above every id seen is new, without a look-up.
        let is_trailers = id <= self.streams.last() && self.streams.contains(id);
        let result = self.header_block(id, is_trailers, block, end_stream, self_dependent, events);
        if result.is_err() {
            self.fields.truncate(first_field);
        }
        result
    }

    fn header_block(
        &mut self,
        id: u32,
        is_trailers: bool,
        block: &[u8],
        end_stream: bool,
        self_dependent: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        let first_field = self.fields.len();
        let max_list = self.config.max_header_list_size as usize;
        let (check, block_id) = if is_trailers {
            let check =
                header_block::decode(&mut self.decoder, block, true, max_list, &mut self.fields)?;
            (check, 0)
        } else {
            self.repeated
                .decode(&mut self.decoder, block, max_list, &mut self.fields)?
        };
        let too_large = check.list_size > max_list;

        if is_trailers {
            let stream = self.streams.get_mut(id).expect("checked above");
            if !stream.recv_open() {
                return Err(Error::Reset(id, Reason::STREAM_CLOSED));
            }
            if !end_stream || check.finish().is_err() {
                return Err(Error::Reset(id, Reason::PROTOCOL_ERROR));
            }
            if stream.content_left != NO_LENGTH && stream.content_left != 0 {
                return Err(Error::Reset(id, Reason::PROTOCOL_ERROR));
            }
            stream.recv = RecvHalf::Closed;
            stream.event_batch = self.batch;
            events.push(Event::Data {
                stream: id,
                data: 0..0,
                end_stream: true,
            });
            return Ok(());
        }
        if id <= self.streams.last() {
            return match self.streams.closed_entry(id) {
                // Reset by the server while the client could still be
                // sending: trailers it sent before it saw the reset are
                // ignored, as DATA is (RFC 9113 section 5.1).
                Some(true) => {
                    self.fields.truncate(first_field);
                    self.count_unproductive()
                }
                Some(false) => Err(Error::GoAway(
                    Reason::STREAM_CLOSED,
                    "HEADERS on a closed stream",
                )),
                None => Err(Error::GoAway(
                    Reason::PROTOCOL_ERROR,
                    "stream id lower than an earlier one",
                )),
            };
        }
        self.streams.pass(id);
        // A remembered block (an id) was found whole and well formed when
        // it was first decoded.
        if self_dependent || (block_id == 0 && check.finish().is_err()) {
            return Err(Error::Reset(id, Reason::PROTOCOL_ERROR));
        }
        if self.shutdown.goaway_sent()
            || self.streams.len() >= self.config.max_concurrent_streams as usize
        {
            return Err(Error::Reset(id, Reason::REFUSED_STREAM));
        }
        let mut stream = Stream::new(
            end_stream,
            self.opening_window,
            self.peer.initial_window,
            self.batch,
        );
        // A length of 2^64 - 1 bytes is checked as one byte shorter.
        stream.content_left = check
            .content_length
            .map_or(NO_LENGTH, |n| n.min(NO_LENGTH - 1));
        self.streams.insert(id, stream);
        if end_stream && check.content_length.is_some_and(|n| n != 0) {
            return Err(Error::Reset(id, Reason::PROTOCOL_ERROR));
        }
        if block_id != 0 {
            self.repeated.named(block_id);
        }
        events.push(Event::Request {
            stream: id,
            fields: first_field..self.fields.len(),
            end_stream,
            too_large,
            block_id,
        });
        Ok(())
    }

    fn on_rst_stream(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        frame::rst_stream::load(head, body)?;
        if self.streams.is_idle(head.stream) {
            return Err(Error::GoAway(
                Reason::PROTOCOL_ERROR,
                "RST_STREAM on an idle stream",
            ));
        }
        if self.drop_stream(head.stream, events) {
            // Closed by the peer: anything it sends on the stream from now
            // on is a STREAM_CLOSED error (RFC 9113 section 5.1).
            self.streams.remember_closed(head.stream, false);
        }
        Ok(())
    }

    fn on_settings(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        let settings = Settings::load(head, body)?;
        if let Settings::Ack = settings {
            if !self.settings_acked {
                self.settings_acked = true;
                self.opening_window = self.config.initial_stream_window;
                recv_flow::settings_acked(
                    &mut self.streams,
                    self.config.initial_stream_window,
                    self.output.buf(),
                );
            }
            return Ok(());
        }
        let initial_window = self.peer.initial_window;
        self.peer
            .apply(&settings, &mut self.streams, &mut self.output)?;
        frame::write_settings_ack(self.output.buf());
        if self.peer.initial_window > initial_window {
            self.send_flow.stream_windows_opened(&mut self.streams);
        }
        self.flush_blocked(events);
        Ok(())
    }

    fn on_window_update(
        &mut self,
        head: FrameHeader,
        body: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), Error> {
        let increment = frame::window_update::load(body)?;
        if head.stream == 0 {
            if increment == 0 {
                return Err(Error::GoAway(Reason::PROTOCOL_ERROR, "WINDOW_UPDATE of 0"));
            }
            self.send_flow
                .window
                .adjust(i64::from(increment))
                .map_err(|_| {
                    Error::GoAway(Reason::FLOW_CONTROL_ERROR, "connection window above 2^31-1")
                })?;
        } else {
            let Some(stream) = self.streams.get_mut(head.stream) else {
                if self.streams.is_idle(head.stream) {
                    return Err(Error::GoAway(
                        Reason::PROTOCOL_ERROR,
                        "WINDOW_UPDATE on an idle stream",
                    ));
                }
                return Ok(());
            };
            if increment == 0 {
                return Err(Error::Reset(head.stream, Reason::PROTOCOL_ERROR));
            }
            if stream.send_window.adjust(i64::from(increment)).is_err() {
                return Err(Error::Reset(head.stream, Reason::FLOW_CONTROL_ERROR));
            }
            self.send_flow
                .stream_window_opened(&mut self.streams, head.stream);
        }
        self.flush_blocked(events);
        Ok(())
    }

    /// Gives back the room of the table of open streams past what the
    /// streams open now need: call it now and then (not after each
    /// stream), so that a burst of streams does not leave it behind.
    pub(crate) fn trim_streams(&mut self) {
        self.streams.trim();
    }

    /// Lets go of the room for decoding header blocks past
    /// [`HEADER_ROOM_KEPT`] each (the batch's field list, the buffer of
    /// blocks continued in CONTINUATION frames, the decoder's scratch
    /// room), which keep up to 64 KiB each between reads: for the
    /// worker's sweep, so that one read of large header blocks does not
    /// leave them with the connection for as long as it lives. Between
    /// reads: the fields of the last one are no longer named.
    pub(crate) fn trim_header_rooms(&mut self) {
        if self.fields.room() > HEADER_ROOM_KEPT {
            self.fields.clear_keeping(HEADER_ROOM_KEPT / 2);
        }
        self.blocks.trim(HEADER_ROOM_KEPT);
        self.decoder.trim_scratch(HEADER_ROOM_KEPT);
    }

    /// The room held for decoding header blocks: the batch's field list,
    /// the buffer blocks continued in CONTINUATION frames are assembled
    /// in, and the decoder's scratch room.
    #[cfg(test)]
    pub(crate) fn header_room(&self) -> usize {
        self.fields.room() + self.blocks.room() + self.decoder.scratch_room()
    }

    /// How many places the table of open streams has.
    #[cfg(test)]
    pub(crate) fn stream_places(&self) -> usize {
        self.streams.places()
    }

    /// Starts the count of frames that moved no request forward again, as
    /// a completed answer does: a caller that does so once a minute lets
    /// a connection whose streams live for days take its client's
    /// keepalive PINGs for good, and still closes one that floods it
    /// within the minute ([`Config::max_unproductive_frames`]).
    pub fn forgive_unproductive(&mut self) {
        self.unproductive = 0;
    }

    /// Counts a frame or error that did not move a request forward; past
    /// the budget the peer is flooding and the connection ends with
    /// ENHANCE_YOUR_CALM.
    fn count_unproductive(&mut self) -> Result<(), Error> {
        self.unproductive += 1;
        if self.unproductive > self.config.max_unproductive_frames {
            return Err(Error::GoAway(
                Reason::ENHANCE_YOUR_CALM,
                "too many frames without a request",
            ));
        }
        Ok(())
    }

    fn stream_error(&mut self, stream: u32, reason: Reason, events: &mut Vec<Event>) {
        frame::write_rst_stream(self.output.buf(), stream, reason);
        self.drop_stream(stream, events);
        // A stream reset while idle (a bad PRIORITY frame) is closed from
        // now on: it can no longer be opened by HEADERS. An even one stays
        // idle, and leaves the client's streams below it idle too.
        if !stream.is_multiple_of(2) {
            self.streams.pass(stream);
        }
        self.streams.remember_closed(stream, true);
    }

    /// Forgets a stream reset while reading input and the response data it
    /// had queued, and reports it; returns whether it was there. Events
    /// of this batch for the stream are taken back, so that no handler
    /// runs for a call already reset; a stream opened in this batch is not
    /// reported at all.
    fn drop_stream(&mut self, stream: u32, events: &mut Vec<Event>) -> bool {
        let Some(state) = self.forget_stream(stream) else {
            return false;
        };
        let mut opened_here = false;
        if state.event_batch == self.batch {
            let mut block_left = 0;
            events.retain(|event| match event {
                Event::Request {
                    stream: id,
                    block_id,
                    ..
                } if *id == stream => {
                    opened_here = true;
                    block_left = *block_id;
                    false
                }
                other => other.stream() != stream,
            });
            if opened_here {
                self.let_go_of_fields(block_left, events);
            }
        }
        if !opened_here {
            events.push(Event::Reset {
                stream,
                tag: state.tag,
            });
        }
        true
    }

    /// A request opened in this batch, with remembered block `block_id`
    /// (0 for none), was taken back: what no event left names goes (the
    /// read's fields past the last request's, the block's mark unless
    /// another request names it). So a read of streams opened and reset at
    /// once holds no more than the requests it leaves.
    fn let_go_of_fields(&mut self, block_id: u64, events: &[Event]) {
        let mut named_end = 0;
        let mut block_named = false;
        for event in events {
            if let Event::Request {
                fields,
                block_id: other,
                ..
            } = event
            {
                named_end = named_end.max(fields.end);
                block_named |= *other == block_id;
            }
        }
        self.fields.truncate(named_end);
        if block_id != 0 && !block_named {
            self.repeated.unnamed(block_id);
        }
    }

    /// Forgets a stream and the response data it had queued; returns its
    /// state if it was there.
    fn forget_stream(&mut self, stream: u32) -> Option<Stream> {
        let state = self.streams.remove(stream)?;
        if let Some(pending) = &state.pending {
            self.send_flow.release(pending);
        }
        Some(state)
    }

    fn fail(&mut self, reason: Reason, message: &'static str) {
        frame::write_goaway(
            self.output.buf(),
            self.shutdown.last_stream(self.streams.last()),
            reason,
            message.as_bytes(),
        );
        self.error = Some(ConnectionError { reason, message });
        self.unsettled = true;
        self.shutdown.on_failure();
        self.streams.clear();
        self.send_flow.clear();
    }

    // ----- commands -----

    /// How many body bytes [`Connection::send_data`] takes on `stream` now:
    /// what the client's windows let out at once plus the room left in the
    /// stream's send buffer. Zero before the response headers, once the
    /// sending half is closing, or when the stream is gone.
    pub fn send_capacity(&self, stream: u32) -> usize {
        self.send_flow
            .capacity(&self.streams, stream, self.config.stream_send_buffer)
    }

    /// What the client's windows let out on `stream` at once, without
    /// holding anything: zero when the stream holds bytes already.
    pub fn send_window(&self, stream: u32) -> usize {
        self.send_flow.window(&self.streams, stream)
    }

    /// Asks for an [`Event::Writable`] once the client's windows let bytes
    /// out on `stream`, for a sender with nothing made yet whose windows
    /// are shut ([`Connection::send_window`] is zero): it then makes its
    /// bytes straight into the output instead of into the stream's send
    /// buffer. Nothing is done if the stream holds bytes or waits already,
    /// cannot send, or has room in its windows. While it waits,
    /// `send_window` stays zero; bytes sent meanwhile are held as usual.
    pub fn await_room(&mut self, stream: u32) {
        self.send_flow.await_room(&mut self.streams, stream);
    }

    /// Response bytes `stream` holds for the client's windows.
    pub fn buffered(&self, stream: u32) -> usize {
        self.streams.get(stream).map_or(0, Stream::buffered)
    }

    /// Sends response headers on `stream`; with `end_stream` they close it
    /// (a trailers-only response). Ignored if the stream is gone or its
    /// headers were sent already.
    pub fn send_headers(&mut self, stream: u32, fields: &[Field<'_>], end_stream: bool) {
        if !self.open_send_side(stream) {
            return;
        }
        self.output
            .header_block(stream, fields.iter().copied(), end_stream);
        if end_stream {
            self.close_send_side(stream);
        }
    }

    /// As [`Connection::send_headers`], with `memo` keeping the encoded
    /// block: while the encoder's table stays the same, the same `fields`
    /// cost a copy of the kept bytes. For the headers every answer repeats.
    pub fn send_headers_memo(
        &mut self,
        stream: u32,
        memo: &mut BlockMemo,
        fields: &[Field<'_>],
        end_stream: bool,
    ) {
        if !self.open_send_side(stream) {
            return;
        }
        self.output
            .header_block_memo(stream, memo, fields, end_stream);
        if end_stream {
            self.close_send_side(stream);
        }
    }

    /// As [`Connection::send_trailers`], with `memo` keeping the encoded
    /// block (see [`Connection::send_headers_memo`]).
    pub fn send_trailers_memo(&mut self, stream: u32, memo: &mut BlockMemo, fields: &[Field<'_>]) {
        if !self.trailers_go_now(stream, fields) {
            return;
        }
        self.output.header_block_memo(stream, memo, fields, true);
        self.close_send_side(stream);
    }

    /// Sends a whole answer on `stream`: headers, `data`, then trailers that
    /// close it, each header block kept in its memo (see
    /// [`Connection::send_headers_memo`]). The same as the three calls, in
    /// one look-up of the stream when the client's windows take all of
    /// `data`. Ignored if the stream is gone or its headers were sent.
    pub fn send_answer(
        &mut self,
        stream: u32,
        headers: (&mut BlockMemo, &[Field<'_>]),
        data: &[u8],
        trailers: (&mut BlockMemo, &[Field<'_>]),
    ) {
        let Some(state) = self.streams.get_mut(stream) else {
            return;
        };
        if state.send != SendHalf::Idle {
            return;
        }
        let room = self.send_flow.room(state);
        if data.len() > room || data.is_empty() {
            // Some of it waits for the windows: the general way.
            self.send_headers_memo(stream, headers.0, headers.1, false);
            self.send_data(stream, data, false);
            return self.send_trailers_memo(stream, trailers.0, trailers.1);
        }
        if self
            .output
            .answer_from_memos(stream, headers.0, data, trailers.0)
        {
            // The stream's own window goes with the stream.
            self.send_flow.window.consume(data.len());
        } else {
            self.output
                .header_block_memo(stream, headers.0, headers.1, false);
            let max_frame = self.output.max_frame();
            send_flow::write_data_frames(
                self.output.buf(),
                stream,
                data,
                false,
                &mut state.send_window,
                &mut self.send_flow.window,
                max_frame,
            );
            self.output
                .header_block_memo(stream, trailers.0, trailers.1, true);
        }
        self.answer_sent(stream);
    }

    /// Closes `stream`, whose whole answer was just written: a client
    /// still sending is told to stop (RST_STREAM with NO_ERROR).
    #[inline(always)]
    fn answer_sent(&mut self, stream: u32) {
        let state = self.streams.remove(stream).expect("an open stream");
        self.unproductive = 0;
        if state.recv_open() {
            frame::write_rst_stream(self.output.buf(), stream, Reason::NO_ERROR);
        }
        self.streams.remember_closed(stream, state.recv_open());
    }

    /// Starts a whole answer on `stream` whose body the caller writes
    /// straight into the output ([`Connection::answer_body`]), so it is not
    /// copied there: the kept `headers` block goes first, and the body
    /// starts with `body_room` zero bytes for the caller to fill (at most
    /// 8). `None`, with nothing written, if the stream is gone, its headers
    /// were sent or the memo does not hold: then the answer goes the way of
    /// [`Connection::send_answer`]. An answer begun is either finished or
    /// taken back before anything else is sent.
    pub(crate) fn begin_answer(
        &mut self,
        stream: u32,
        headers: &BlockMemo,
        body_room: usize,
    ) -> Option<InPlaceAnswer> {
        let state = self.streams.get(stream)?;
        if state.send != SendHalf::Idle {
            return None;
        }
        // Nothing the peer sends is read before the answer is finished.
        let room = self.send_flow.room(state);
        let start = self.output.buf().len();
        let body = self.output.begin_answer(stream, headers, body_room)?;
        Some(InPlaceAnswer {
            stream,
            start,
            body,
            room,
        })
    }

    /// Where the body of the answer begun goes: appended to it.
    #[inline]
    pub(crate) fn answer_body(&mut self) -> &mut Vec<u8> {
        self.output.buf()
    }

    /// Sends the answer begun, with the kept `trailers` block closing the
    /// stream, when the client's windows take its whole body (in as many
    /// DATA frames as the peer's frame size asks). Otherwise nothing more
    /// is written and the answer comes back to be taken back
    /// ([`Connection::take_back_answer`]).
    pub(crate) fn finish_answer(
        &mut self,
        answer: InPlaceAnswer,
        trailers: &BlockMemo,
    ) -> Result<(), InPlaceAnswer> {
        let stream = answer.stream;
        let len = self.output.buf().len() - answer.body;
        if len > answer.room || !self.output.end_answer(stream, answer.body, trailers) {
            return Err(answer);
        }
        // The stream's own window goes with the stream.
        self.send_flow.window.consume(len);
        self.answer_sent(stream);
        Ok(())
    }

    /// Takes back the answer begun: the output is as it was before, and
    /// the body written moves to `back` (replacing what it held).
    pub(crate) fn take_back_answer(&mut self, answer: InPlaceAnswer, back: &mut Vec<u8>) {
        self.output.take_back(answer.start, answer.body, back);
    }

    /// Takes back the answer begun, and drops what was written of it.
    pub(crate) fn drop_answer(&mut self, answer: InPlaceAnswer) {
        self.output.buf().truncate(answer.start);
    }

    /// As [`Connection::send_data`] without END_STREAM, for body bytes that
    /// `write` appends to the output itself, so that they are not copied
    /// there from a buffer of the caller's. Only while the stream holds no
    /// bytes and the client's windows are open
    /// ([`Connection::send_window`] above zero): otherwise `write` is not
    /// called and `None` comes back. Bytes past what the windows let out
    /// are held as `send_data` holds them (a copy of those only). Returns
    /// how many bytes `write` appended; `write` may only append (it panics
    /// if the output came back shorter).
    pub fn send_data_in_place(
        &mut self,
        stream: u32,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Option<usize> {
        let room = self.send_window(stream);
        if room == 0 {
            return None;
        }
        let max_frame = self.output.max_frame();
        let out = self.output.buf();
        let header_at = out.len();
        out.extend_from_slice(&[0; frame::HEADER_LEN]);
        let start = out.len();
        write(out);
        assert!(
            out.len() >= start,
            "send_data_in_place: `write` may only append"
        );
        let len = out.len() - start;
        let sent = len.min(room);
        let held = (len > sent).then(|| out.split_off(start + sent));
        if sent == 0 {
            out.truncate(header_at);
        } else {
            send_flow::frame_in_place(out, header_at, stream, max_frame);
            let state = self.streams.get_mut(stream).expect("open, with a window");
            state.send_window.consume(sent);
            self.send_flow.window.consume(sent);
        }
        if let Some(held) = held {
            // The windows are used up: the rest waits for them.
            self.send_flow.hold(&mut self.streams, stream, held);
        }
        Some(len)
    }

    /// Sends body bytes on `stream` as far as the client's windows allow
    /// and holds the rest, and returns how many bytes it took: all of
    /// `data`, or none when the stream already holds
    /// [`Config::stream_send_buffer`] bytes or more (an [`Event::Writable`]
    /// follows once some went out), when its headers are not sent, when
    /// its sending half is closing, or when it is gone. With `end_stream`
    /// the sending half closes.
    pub fn send_data(&mut self, stream: u32, data: &[u8], end_stream: bool) -> usize {
        let sent = self.send_flow.send_data(
            &mut self.streams,
            &mut self.output,
            stream,
            data,
            end_stream,
            self.config.stream_send_buffer,
        );
        if sent.closed {
            self.close_send_side(stream);
        }
        sent.accepted
    }

    /// Sends trailers on `stream` and closes its sending half; they wait
    /// behind held data. Ignored if the stream is gone, its headers are not
    /// sent, or its sending half is closing.
    pub fn send_trailers(&mut self, stream: u32, fields: &[Field<'_>]) {
        if !self.trailers_go_now(stream, fields) {
            return;
        }
        self.output
            .header_block(stream, fields.iter().copied(), true);
        self.close_send_side(stream);
    }

    /// Opens the sending half of `stream` for its response headers;
    /// `false` if the stream is gone or its headers were sent already.
    fn open_send_side(&mut self, stream: u32) -> bool {
        match self.streams.get_mut(stream) {
            Some(state) if state.send == SendHalf::Idle => {
                state.send = SendHalf::Open;
                true
            }
            _ => false,
        }
    }

    /// Whether trailers for `stream` go out now: `false` if they wait
    /// behind held data (kept with it), or the stream cannot send them.
    fn trailers_go_now(&mut self, stream: u32, fields: &[Field<'_>]) -> bool {
        match self.streams.get_mut(stream) {
            Some(state) if state.send == SendHalf::Open => !SendFlow::hold_trailers(state, fields),
            _ => false,
        }
    }

    /// Attaches `tag` to `stream`, for the consumer to find its own record
    /// of the stream without a table of its own (0: nothing); it comes back
    /// with [`Connection::tag`], [`Connection::take_tag`] and in
    /// [`Event::Reset`]. Ignored if the stream is gone.
    pub fn set_tag(&mut self, stream: u32, tag: u32) {
        if let Some(state) = self.streams.get_mut(stream) {
            state.tag = tag;
        }
    }

    /// The tag attached to `stream`; 0 if none, or if the stream is gone.
    pub fn tag(&self, stream: u32) -> u32 {
        self.streams.get(stream).map_or(0, |state| state.tag)
    }

    /// The tag attached to `stream`, detached; 0 if none.
    pub fn take_tag(&mut self, stream: u32) -> u32 {
        self.streams
            .get_mut(stream)
            .map_or(0, |state| std::mem::take(&mut state.tag))
    }

    /// Tells that the consumer has taken `n` body bytes of `stream` in: the
    /// client's window on the stream opens again for them (in batches of
    /// at least half the initial window). Ignored if the stream is gone.
    pub fn release_capacity(&mut self, stream: u32, n: usize) {
        let Some(state) = self.streams.get_mut(stream) else {
            return;
        };
        state.unreleased = state
            .unreleased
            .saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
        if state.recv_open() {
            recv_flow::replenish_stream(
                state,
                stream,
                self.config.initial_stream_window,
                self.output.buf(),
            );
        }
    }

    /// Resets `stream` with `reason` and forgets it.
    pub fn reset_stream(&mut self, stream: u32, reason: Reason) {
        if self.forget_stream(stream).is_some() {
            frame::write_rst_stream(self.output.buf(), stream, reason);
            self.streams.remember_closed(stream, true);
        }
    }

    /// Sends a PING with `payload`, to learn whether the peer still
    /// answers; its ACK is taken as any other (the caller watches for the
    /// peer's next bytes). Nothing after a connection error.
    pub fn ping(&mut self, payload: &[u8; 8]) {
        if self.error.is_none() {
            frame::write_ping(self.output.buf(), payload);
        }
    }

    /// Starts a graceful shutdown in two steps, so that no request already
    /// on its way is refused: a GOAWAY that still allows every stream, with a
    /// PING; once the PING's ACK shows the client has seen it, a GOAWAY naming
    /// the last stream accepted. Streams opened later are refused; open ones
    /// go on to their end.
    pub fn go_away(&mut self) {
        if self.error.is_none() {
            self.shutdown.begin(self.output.buf());
        }
    }

    /// Whether [`Connection::go_away`]'s first GOAWAY is out and the
    /// client has not answered its PING yet.
    pub fn is_draining(&self) -> bool {
        self.error.is_none() && self.shutdown.draining()
    }

    /// The second GOAWAY of [`Connection::go_away`], naming the last stream
    /// accepted, without waiting any longer for the PING's ACK: for a
    /// client that does not answer it (grpc-go waits 5 seconds). Nothing
    /// if the connection is not draining.
    pub fn end_draining(&mut self) {
        if self.is_draining() {
            let last = self.streams.last();
            self.shutdown.end_draining(last, self.output.buf());
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
    /// The output keeps its room once written, until
    /// [`Connection::reclaim_output_room`].
    pub fn advance_output(&mut self, n: usize) {
        self.output.advance(n);
    }

    /// Before the connection is served: while nothing is pending, the
    /// output takes `spare`'s room if it is larger. With
    /// [`Connection::reclaim_output_room`] after, a caller serving many
    /// connections in turn keeps one large buffer for all of them, instead
    /// of each output growing in every burst and shrinking after it.
    #[inline]
    pub fn lend_output_room(&mut self, spare: &mut Vec<u8>) {
        self.output.lend_room(spare);
    }

    /// After the connection was served: an output holding more than 4 KiB
    /// of room gives it back, the larger of its buffer and `spare` going to
    /// `spare`; bytes still pending, if they fill a quarter of the room or
    /// less, move to a buffer of their size first.
    #[inline]
    pub fn reclaim_output_room(&mut self, spare: &mut Vec<u8>) {
        self.output.reclaim_room(spare);
    }

    fn close_send_side(&mut self, stream: u32) {
        let Some(state) = self.streams.remove(stream) else {
            return;
        };
        if let Some(pending) = &state.pending {
            self.send_flow.release(pending);
        }
        self.unproductive = 0;
        if state.recv_open() {
            // The answer is complete while the client is still sending: tell
            // it to stop (RFC 9113 section 8.1).
            frame::write_rst_stream(self.output.buf(), stream, Reason::NO_ERROR);
        }
        self.streams.remember_closed(stream, state.recv_open());
    }

    /// Sends what the windows now allow of the queued responses, in order,
    /// and closes the streams whose response is then complete.
    fn flush_blocked(&mut self, events: &mut Vec<Event>) {
        let mut rounds = self.send_flow.blocked_len();
        while let Some(stream) = self.send_flow.flush(
            &mut self.streams,
            &mut self.output,
            &mut rounds,
            events,
            self.batch,
        ) {
            self.close_send_side(stream);
        }
    }
}

/// The size of a header list as SETTINGS_MAX_HEADER_LIST_SIZE counts it:
/// each field as an HPACK entry (RFC 9113 section 6.5.2).
pub(crate) fn header_list_size(fields: &[Field<'_>]) -> usize {
    fields
        .iter()
        .map(|field| crate::h2::hpack::entry_size(field.name.len(), field.value.len()))
        .sum()
}
