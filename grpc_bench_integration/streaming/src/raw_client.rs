//! The load's raw client: HTTP/2 and gRPC written and read as bytes on one
//! thread, with no runtime, no per-message allocation and no protobuf
//! library, so that it costs far less per message than the servers it
//! drives and the server, not the client, is what runs out of CPU.
//!
//! It speaks what tonic's client speaks: the preface, SETTINGS with a 2 MiB
//! stream window and a 5 MiB connection window (hyper's defaults, which
//! tonic's client keeps), `POST` requests with `content-type:
//! application/grpc` and `te: trailers`, WINDOW_UPDATE once half a window
//! is consumed, and the server's own windows kept to when it sends. Header
//! blocks from the server are decoded with the test peer's HPACK decoder
//! (the server's dynamic table must be followed); items are read field by
//! field and checked as the tonic client checks them.
//!
//! Each stream's answers to one read are followed by its next items in one
//! DATA frame (the tonic client's h2 also gathers what a stream has queued
//! into one frame).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use pajamax_test_peer::hpack::{Decoder, Encoder, Indexing};
use pajamax_test_peer::{flag, frame, kind, PREFACE};

use crate::{Faults, Received};

/// The stream window this client gives the server: hyper's default.
const STREAM_WINDOW: u32 = 2 << 20;
/// The connection window this client gives the server: hyper's default.
const CONNECTION_WINDOW: u32 = 5 << 20;
/// The largest frame the server may send (the default; not raised).
const MAX_FRAME: usize = 16_384;
/// A connection's room for reads: many frames, and at least one whole
/// frame besides the start of one kept from the last read.
const INPUT_ROOM: usize = 256 << 10;
/// The server's windows until its SETTINGS say otherwise.
const DEFAULT_WINDOW: i64 = 65_535;
/// The gRPC message prefix: a compressed flag and a 32-bit length.
const PREFIX: usize = 5;
/// SETTINGS identifiers.
const SETTINGS_ENABLE_PUSH: u16 = 0x2;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// What the load does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Each stream calls `Subscribe` again and again.
    Subscribe,
    /// Each stream is one `Echo` call with `window` items in flight.
    Echo,
}

/// The load's shape.
#[derive(Clone, Debug)]
pub struct Load {
    /// Where the server listens.
    pub addr: SocketAddr,
    /// `Subscribe` or `Echo`.
    pub mode: Mode,
    /// How many connections.
    pub connections: usize,
    /// How many streams in all (stream i on connection i mod C).
    pub streams: usize,
    /// Items per `Subscribe` call.
    pub count: u32,
    /// Payload bytes per item.
    pub size: u32,
    /// Items an `Echo` stream keeps in flight.
    pub window: usize,
    /// Each stream's share of a counted run; none: the load runs for ever.
    pub items: Option<u64>,
}

/// Runs the load until every stream has its `items` (for ever without
/// them), counting each stream's items in `received` and what went wrong
/// in `faults`. An error is a connection that failed or that the server
/// closed.
pub fn run(load: &Load, received: &[Arc<Received>], faults: &Faults) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(256);
    let authority = load.addr.to_string();
    let mut encoder = Encoder::without_huffman();
    let path = match load.mode {
        Mode::Subscribe => "/streambench.StreamBench/Subscribe",
        Mode::Echo => "/streambench.StreamBench/Echo",
    };
    // Literals without indexing: the same bytes serve every call.
    let head = encoder.block(
        &[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", authority.as_str()),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
        Indexing::None,
    );
    let mut conns = Vec::with_capacity(load.connections);
    for index in 0..load.connections {
        let mut socket = TcpStream::from_std(std::net::TcpStream::connect(load.addr)?);
        socket.set_nodelay(true)?;
        poll.registry().register(
            &mut socket,
            Token(index),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        conns.push(Conn::new(socket));
    }
    let mut streams: Vec<Stream> = (0..load.streams)
        .map(|i| Stream::new(i % load.connections, load.items))
        .collect();
    let mut client = Client {
        load,
        head,
        payload: crate::payload(load.size),
        received,
        faults,
        open: load.streams,
    };
    for (index, stream) in streams.iter_mut().enumerate() {
        let conn = &mut conns[stream.conn];
        client.start_call(conn, stream, index);
    }
    for conn in &mut conns {
        client.send_waiting(conn, &mut streams);
        conn.flush()?;
    }
    while client.open > 0 {
        poll.poll(&mut events, Some(Duration::from_secs(1)))?;
        for event in events.iter() {
            let conn = &mut conns[event.token().0];
            if event.is_readable() {
                loop {
                    let room = conn.input.len() - conn.filled;
                    match conn.socket.read(&mut conn.input[conn.filled..]) {
                        Ok(0) => {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the server closed a connection",
                            ))
                        }
                        Ok(n) => {
                            conn.filled += n;
                            client.on_input(conn, &mut streams)?;
                            // A short read emptied the socket: the next
                            // bytes raise a new event (unless the server
                            // closed, which the next read finds).
                            if n < room && !event.is_read_closed() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            conn.flush()?;
        }
    }
    Ok(())
}

/// One connection: its socket, the bytes read and not yet taken, the bytes
/// to write, the server's header blocks' decoder and the windows.
struct Conn {
    socket: TcpStream,
    /// Where reads go; `filled` bytes of it are read and not yet taken
    /// (at most the start of one frame between reads).
    input: Vec<u8>,
    filled: usize,
    output: Vec<u8>,
    decoder: Decoder,
    /// A header block put together from HEADERS and CONTINUATION: its
    /// stream, END_STREAM, its bytes.
    block: Option<(u32, bool, Vec<u8>)>,
    /// Calls by stream id: the stream's index.
    calls: HashMap<u32, usize>,
    next_id: u32,
    /// What this client may still send on the connection.
    send_window: i64,
    /// The server's initial stream window.
    peer_stream_window: i64,
    peer_max_frame: usize,
    /// Bytes taken since the connection's last WINDOW_UPDATE.
    taken: u32,
    /// Streams with items waiting to be sent.
    waiting: Vec<usize>,
}

impl Conn {
    fn new(socket: TcpStream) -> Conn {
        let mut output = PREFACE.to_vec();
        let mut settings = Vec::new();
        for (id, value) in [
            (SETTINGS_ENABLE_PUSH, 0),
            (SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
        ] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&value.to_be_bytes());
        }
        frame::write_frame(&mut output, kind::SETTINGS, 0, 0, &settings);
        let increment = CONNECTION_WINDOW - DEFAULT_WINDOW as u32;
        frame::write_frame(
            &mut output,
            kind::WINDOW_UPDATE,
            0,
            0,
            &increment.to_be_bytes(),
        );
        Conn {
            socket,
            input: vec![0; INPUT_ROOM],
            filled: 0,
            output,
            decoder: Decoder::new(),
            block: None,
            calls: HashMap::new(),
            next_id: 1,
            send_window: DEFAULT_WINDOW,
            peer_stream_window: DEFAULT_WINDOW,
            peer_max_frame: MAX_FRAME,
            taken: 0,
            waiting: Vec::new(),
        }
    }

    /// Writes what the socket takes; the rest waits for the next event.
    fn flush(&mut self) -> io::Result<()> {
        let mut written = 0;
        while written < self.output.len() {
            match self.socket.write(&self.output[written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.output.drain(..written);
        Ok(())
    }
}

/// One stream of the load: its current call and what it has received.
struct Stream {
    conn: usize,
    /// The current call's stream id; 0 between calls.
    id: u32,
    /// The start of a message whose rest has not come.
    partial: Vec<u8>,
    /// The item number due next in this call.
    next: u64,
    /// Items asked for in this `Subscribe` call.
    asked: u64,
    /// Items still wanted in a counted run (u64::MAX when not counted).
    left: u64,
    /// Bytes taken since the stream's last WINDOW_UPDATE.
    taken: u32,
    /// `Echo`: items sent in this call, items waiting to be sent, whether
    /// the request half is ended, what this client may still send.
    sent: u64,
    unsent: u64,
    half_closed: bool,
    send_window: i64,
}

impl Stream {
    fn new(conn: usize, items: Option<u64>) -> Stream {
        Stream {
            conn,
            id: 0,
            partial: Vec::new(),
            next: 0,
            asked: 0,
            left: items.unwrap_or(u64::MAX),
            taken: 0,
            sent: 0,
            unsent: 0,
            half_closed: false,
            send_window: 0,
        }
    }
}

struct Client<'a> {
    load: &'a Load,
    /// The request header block.
    head: Vec<u8>,
    payload: Vec<u8>,
    received: &'a [Arc<Received>],
    faults: &'a Faults,
    /// Streams not done.
    open: usize,
}

impl Client<'_> {
    /// Opens the stream's next call.
    fn start_call(&mut self, conn: &mut Conn, stream: &mut Stream, index: usize) {
        let id = conn.next_id;
        conn.next_id += 2;
        conn.calls.insert(id, index);
        stream.id = id;
        stream.next = 0;
        stream.partial.clear();
        stream.taken = 0;
        stream.send_window = conn.peer_stream_window;
        frame::write_frame(
            &mut conn.output,
            kind::HEADERS,
            flag::END_HEADERS,
            id,
            &self.head,
        );
        stream.unsent = match self.load.mode {
            Mode::Subscribe => {
                stream.asked = u64::from(self.load.count).min(stream.left);
                // The request message goes when the server's windows take
                // it (at once, unless it is slow to open them).
                1
            }
            Mode::Echo => {
                stream.sent = 0;
                stream.half_closed = false;
                (self.load.window as u64).min(stream.left)
            }
        };
        if !conn.waiting.contains(&index) {
            conn.waiting.push(index);
        }
    }

    /// Takes every whole frame of the connection's input; the start of a
    /// frame whose rest has not come moves to the front.
    fn on_input(&mut self, conn: &mut Conn, streams: &mut [Stream]) -> io::Result<()> {
        let mut at = 0;
        let mut input = std::mem::take(&mut conn.input);
        while conn.filled - at >= 9 {
            let header = &input[at..at + 9];
            let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
            if len > MAX_FRAME {
                return Err(protocol("a frame larger than SETTINGS_MAX_FRAME_SIZE"));
            }
            if conn.filled - at - 9 < len {
                break;
            }
            let (kind, flags) = (header[3], header[4]);
            let id = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & !(1 << 31);
            let payload = &input[at + 9..at + 9 + len];
            at += 9 + len;
            self.on_frame(conn, streams, kind, flags, id, payload)?;
        }
        input.copy_within(at..conn.filled, 0);
        conn.filled -= at;
        conn.input = input;
        self.send_waiting(conn, streams);
        Ok(())
    }

    fn on_frame(
        &mut self,
        conn: &mut Conn,
        streams: &mut [Stream],
        kind: u8,
        flags: u8,
        id: u32,
        payload: &[u8],
    ) -> io::Result<()> {
        match kind {
            kind::DATA => {
                let data = unpad(flags, payload)?;
                // The whole frame counts against the windows.
                conn.taken += payload.len() as u32;
                if conn.taken >= CONNECTION_WINDOW / 2 {
                    window_update(&mut conn.output, 0, conn.taken);
                    conn.taken = 0;
                }
                let Some(&index) = conn.calls.get(&id) else {
                    return Ok(());
                };
                let stream = &mut streams[index];
                stream.taken += payload.len() as u32;
                if stream.taken >= STREAM_WINDOW / 2 && flags & flag::END_STREAM == 0 {
                    window_update(&mut conn.output, id, stream.taken);
                    stream.taken = 0;
                }
                let answered = self.on_data(stream, index, data);
                if self.load.mode == Mode::Echo && answered > 0 && !stream.half_closed {
                    let more =
                        answered.min(stream.left.saturating_sub(stream.sent + stream.unsent));
                    if more > 0 {
                        if stream.unsent == 0 {
                            conn.waiting.push(index);
                        }
                        stream.unsent += more;
                    }
                }
                if flags & flag::END_STREAM != 0 {
                    // Without trailers: not a gRPC answer.
                    self.faults.note(
                        &self.faults.errors,
                        format!("stream {id} ended without trailers"),
                    );
                    self.end_call(conn, streams, index);
                }
            }
            kind::HEADERS | kind::CONTINUATION => {
                let fragment = if kind == kind::HEADERS {
                    conn.block = Some((id, flags & flag::END_STREAM != 0, Vec::new()));
                    headers_fragment(flags, payload)?
                } else {
                    payload
                };
                let Some((block_id, end_stream, bytes)) = conn.block.as_mut() else {
                    return Err(protocol("CONTINUATION without HEADERS"));
                };
                if *block_id != id {
                    return Err(protocol("CONTINUATION on another stream"));
                }
                bytes.extend_from_slice(fragment);
                if flags & flag::END_HEADERS != 0 {
                    let (_, end_stream, bytes) = (*block_id, *end_stream, std::mem::take(bytes));
                    conn.block = None;
                    let fields = conn
                        .decoder
                        .decode(&bytes)
                        .map_err(|e| protocol(&format!("header block: {e}")))?;
                    if end_stream {
                        if let Some(&index) = conn.calls.get(&id) {
                            let status = fields
                                .iter()
                                .find(|(name, _)| name == b"grpc-status")
                                .map(|(_, value)| String::from_utf8_lossy(value).into_owned());
                            self.on_trailers(conn, streams, index, status, &fields);
                        }
                    }
                }
            }
            kind::RST_STREAM => {
                if let Some(&index) = conn.calls.get(&id) {
                    let code = payload
                        .get(..4)
                        .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                    self.faults.note(
                        &self.faults.errors,
                        format!("stream {id} reset with code {code}"),
                    );
                    self.end_call(conn, streams, index);
                }
            }
            kind::SETTINGS if flags & flag::ACK == 0 => {
                for setting in payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([setting[0], setting[1]]);
                    let value =
                        u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
                    match id {
                        SETTINGS_INITIAL_WINDOW_SIZE => {
                            let delta = i64::from(value) - conn.peer_stream_window;
                            conn.peer_stream_window = i64::from(value);
                            for &index in conn.calls.values() {
                                streams[index].send_window += delta;
                            }
                        }
                        SETTINGS_MAX_FRAME_SIZE => conn.peer_max_frame = value as usize,
                        _ => {}
                    }
                }
                frame::write_frame(&mut conn.output, kind::SETTINGS, flag::ACK, 0, &[]);
            }
            kind::PING if flags & flag::ACK == 0 => {
                frame::write_frame(&mut conn.output, kind::PING, flag::ACK, 0, payload);
            }
            kind::GOAWAY => {
                let code = payload
                    .get(4..8)
                    .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                return Err(protocol(&format!(
                    "GOAWAY with code {code}: {}",
                    String::from_utf8_lossy(payload.get(8..).unwrap_or_default())
                )));
            }
            kind::WINDOW_UPDATE => {
                let increment = payload.get(..4).map_or(0, |c| {
                    u32::from_be_bytes([c[0], c[1], c[2], c[3]]) & !(1 << 31)
                });
                if id == 0 {
                    conn.send_window += i64::from(increment);
                } else if let Some(&index) = conn.calls.get(&id) {
                    streams[index].send_window += i64::from(increment);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Reads the items a DATA frame brings; returns how many.
    fn on_data(&mut self, stream: &mut Stream, index: usize, mut data: &[u8]) -> u64 {
        let mut items = 0;
        if !stream.partial.is_empty() {
            // The rest of a message begun in an earlier frame: its prefix
            // first, then its body.
            let mut partial = std::mem::take(&mut stream.partial);
            let whole = fill(&mut partial, &mut data, PREFIX) && {
                let total = message_len(&partial).unwrap_or(PREFIX);
                fill(&mut partial, &mut data, total)
            };
            if !whole {
                stream.partial = partial;
                return 0;
            }
            self.on_item(stream, index, &partial[PREFIX..]);
            items += 1;
            partial.clear();
            stream.partial = partial;
        }
        while !data.is_empty() {
            match message_len(data) {
                Some(total) if total <= data.len() => {
                    self.on_item(stream, index, &data[PREFIX..total]);
                    items += 1;
                    data = &data[total..];
                }
                _ => {
                    stream.partial.extend_from_slice(data);
                    break;
                }
            }
        }
        items
    }

    /// Checks one item: its number and its payload's size.
    fn on_item(&mut self, stream: &mut Stream, index: usize, message: &[u8]) {
        match parse_item(message) {
            Some((seq, len)) if seq == stream.next && len == self.load.size as usize => {}
            found => self.faults.note(
                &self.faults.bad_items,
                format!(
                    "item {:?} where item {} of {} bytes was due",
                    found, stream.next, self.load.size
                ),
            ),
        }
        stream.next += 1;
        self.received[index].add_one();
    }

    fn on_trailers(
        &mut self,
        conn: &mut Conn,
        streams: &mut [Stream],
        index: usize,
        status: Option<String>,
        fields: &[(Vec<u8>, Vec<u8>)],
    ) {
        let stream = &mut streams[index];
        if status.as_deref() != Some("0") {
            let message = fields
                .iter()
                .find(|(name, _)| name == b"grpc-message")
                .map(|(_, value)| String::from_utf8_lossy(value).into_owned());
            self.faults.note(
                &self.faults.errors,
                format!("call ended with grpc-status {status:?}: {message:?}"),
            );
        } else {
            match self.load.mode {
                Mode::Subscribe => {
                    stream.left = stream.left.saturating_sub(stream.next);
                    if stream.next != stream.asked {
                        self.faults.note(
                            &self.faults.short_calls,
                            format!(
                                "subscribe: call ended OK after {} of {} items",
                                stream.next, stream.asked
                            ),
                        );
                    }
                }
                Mode::Echo => {
                    if stream.next == stream.left {
                        stream.left = 0;
                    } else {
                        self.faults.note(
                            &self.faults.short_calls,
                            format!("echo: call ended OK after {} items", stream.next),
                        );
                    }
                }
            }
        }
        self.end_call(conn, streams, index);
    }

    /// Forgets the stream's call and starts its next one, unless it has
    /// all it wanted.
    fn end_call(&mut self, conn: &mut Conn, streams: &mut [Stream], index: usize) {
        let stream = &mut streams[index];
        conn.calls.remove(&stream.id);
        stream.id = 0;
        stream.unsent = 0;
        if stream.left == 0 {
            self.open -= 1;
            return;
        }
        self.start_call(conn, stream, index);
    }

    /// Sends the `Subscribe` requests of the waiting streams that the
    /// server's windows take, each ending its stream's half.
    fn send_asks(&mut self, conn: &mut Conn, streams: &mut [Stream]) {
        let mut waiting = std::mem::take(&mut conn.waiting);
        waiting.retain(|&index| {
            let stream = &mut streams[index];
            if stream.id == 0 || stream.unsent == 0 {
                return false;
            }
            let mut ask = Vec::with_capacity(16);
            ask.push(0x08);
            put_varint(&mut ask, stream.asked);
            ask.push(0x10);
            put_varint(&mut ask, u64::from(self.load.size));
            let mut message = vec![0u8];
            message.extend_from_slice(&(ask.len() as u32).to_be_bytes());
            message.extend_from_slice(&ask);
            let len = message.len() as i64;
            if conn.send_window < len || stream.send_window < len {
                return true;
            }
            conn.send_window -= len;
            stream.send_window -= len;
            stream.unsent = 0;
            frame::write_frame(
                &mut conn.output,
                kind::DATA,
                flag::END_STREAM,
                stream.id,
                &message,
            );
            false
        });
        conn.waiting = waiting;
    }

    /// Sends the items each waiting stream may send, one DATA frame per
    /// stream (more when the server's frames are smaller), as far as the
    /// windows allow.
    fn send_waiting(&mut self, conn: &mut Conn, streams: &mut [Stream]) {
        if self.load.mode == Mode::Subscribe {
            return self.send_asks(conn, streams);
        }
        let item_len = item_len(self.load.size);
        let mut waiting = std::mem::take(&mut conn.waiting);
        waiting.retain(|&index| {
            let stream = &mut streams[index];
            if stream.id == 0 {
                return false;
            }
            while stream.unsent > 0 {
                let room = conn
                    .send_window
                    .min(stream.send_window)
                    .min(conn.peer_max_frame as i64);
                let fit = (room.max(0) as usize / item_len) as u64;
                let n = stream.unsent.min(fit);
                if n == 0 {
                    return true;
                }
                let last = stream.sent + n == stream.left;
                let flags = if last { flag::END_STREAM } else { 0 };
                let start = conn.output.len();
                frame::write_header(&mut conn.output, 0, kind::DATA, flags, stream.id);
                for _ in 0..n {
                    put_item(&mut conn.output, stream.sent, &self.payload);
                    stream.sent += 1;
                }
                let len = conn.output.len() - start - 9;
                conn.output[start..start + 3].copy_from_slice(&(len as u32).to_be_bytes()[1..]);
                stream.unsent -= n;
                conn.send_window -= len as i64;
                stream.send_window -= len as i64;
                if last {
                    stream.half_closed = true;
                }
            }
            false
        });
        conn.waiting = waiting;
    }
}

/// The length of an item of `size` payload bytes, framed, for the largest
/// item numbers (a 10-byte varint): what a frame is sized for.
fn item_len(size: u32) -> usize {
    PREFIX + 1 + 10 + 1 + varint_len(u64::from(size)) + size as usize
}

/// Appends one framed item.
fn put_item(out: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX]);
    if seq != 0 {
        out.push(0x08);
        put_varint(out, seq);
    }
    out.push(0x12);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
    let len = (out.len() - start - PREFIX) as u32;
    out[start + 1..start + PREFIX].copy_from_slice(&len.to_be_bytes());
}

/// Moves bytes from the start of `data` to `partial` until it holds
/// `total`; whether it does.
fn fill(partial: &mut Vec<u8>, data: &mut &[u8], total: usize) -> bool {
    let take = total.saturating_sub(partial.len()).min(data.len());
    partial.extend_from_slice(&data[..take]);
    *data = &data[take..];
    partial.len() >= total
}

/// An item's number and payload length; none when it is not an item.
fn parse_item(mut message: &[u8]) -> Option<(u64, usize)> {
    let (mut seq, mut len) = (0, 0);
    while let Some((&key, rest)) = message.split_first() {
        message = rest;
        match key {
            0x08 => seq = take_varint(&mut message)?,
            0x12 => {
                let n = take_varint(&mut message)? as usize;
                message = message.get(n..)?;
                len = n;
            }
            _ => return None,
        }
    }
    Some((seq, len))
}

fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_len(value: u64) -> usize {
    (64 - value.max(1).leading_zeros() as usize).div_ceil(7)
}

/// The total length of the message `buf` starts with, once its prefix is
/// there.
fn message_len(buf: &[u8]) -> Option<usize> {
    let prefix = buf.get(..PREFIX)?;
    Some(PREFIX + u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize)
}

fn window_update(out: &mut Vec<u8>, id: u32, increment: u32) {
    frame::write_frame(out, kind::WINDOW_UPDATE, 0, id, &increment.to_be_bytes());
}

/// A DATA frame's data, its padding taken off.
fn unpad(flags: u8, payload: &[u8]) -> io::Result<&[u8]> {
    if flags & flag::PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or_else(|| protocol("empty padded frame"))?;
    rest.get(
        ..rest
            .len()
            .checked_sub(pad as usize)
            .ok_or_else(|| protocol("padding"))?,
    )
    .ok_or_else(|| protocol("padding"))
}

/// A HEADERS frame's block fragment: padding and priority taken off.
fn headers_fragment(flags: u8, payload: &[u8]) -> io::Result<&[u8]> {
    let mut fragment = unpad(flags, payload)?;
    if flags & flag::PRIORITY != 0 {
        fragment = fragment.get(5..).ok_or_else(|| protocol("priority"))?;
    }
    Ok(fragment)
}

fn protocol(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}
