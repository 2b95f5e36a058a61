//! The connection state machine driven with byte vectors, built and read
//! by the test peer (`pajamax-test-peer`).

use crate::h2::config::Config;
use crate::h2::connection::{Connection, Event, Field};
use crate::h2::frame::{Reason, MAX_WINDOW};
use pajamax_test_peer::{
    flag, frame_bytes, kind, setting, split_frames, Client, ErrorCode, Frame, HeaderBlock,
    Indexing, Priority, PREFACE,
};

/// A client's view: builds frames, feeds them, reads the server's frames.
struct Peer {
    conn: Connection,
    client: Client,
    events: Vec<Event>,
    input: Vec<u8>,
}

impl Peer {
    fn new(config: Config) -> Peer {
        let mut peer = Peer {
            conn: Connection::new(config),
            client: Client::new(),
            events: Vec::new(),
            input: Vec::new(),
        };
        peer.feed(&Client::handshake(&[]));
        let out = peer.take_frames();
        assert_eq!(
            out[0].kind,
            kind::SETTINGS,
            "the server speaks first with SETTINGS"
        );
        assert!(out
            .iter()
            .any(|f| f.kind == kind::SETTINGS && f.has(flag::ACK)));
        peer
    }

    fn default() -> Peer {
        Peer::new(Config::default())
    }

    /// Feeds bytes, calling `recv` until they are used up as the runtime
    /// does; returns the events they produced, with `Data` ranges into
    /// `self.input`.
    fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.input = bytes.to_vec();
        let mut all = Vec::new();
        let mut pos = 0;
        loop {
            self.events.clear();
            let used = self.conn.recv(&self.input[pos..], &mut self.events);
            for event in self.events.drain(..) {
                all.push(match event {
                    Event::Data {
                        stream,
                        data,
                        end_stream,
                    } if !data.is_empty() => Event::Data {
                        stream,
                        data: data.start + pos..data.end + pos,
                        end_stream,
                    },
                    other => other,
                });
            }
            pos += used;
            if used == 0 || pos == bytes.len() {
                break;
            }
        }
        assert_eq!(pos, bytes.len(), "whole frames are consumed");
        all
    }

    /// The frames the server wrote since the last call; their header
    /// blocks are decoded on the way (see [`Peer::take_blocks`]).
    fn take_frames(&mut self) -> Vec<Frame> {
        let out = self.conn.output().to_vec();
        self.conn.advance_output(out.len());
        let received = self
            .client
            .receive(&out)
            .unwrap_or_else(|err| panic!("the server's output: {err}"));
        assert!(
            self.client.reader().unparsed().is_empty(),
            "output ends on a frame boundary"
        );
        received.into_iter().map(|r| r.frame).collect()
    }

    /// The header blocks of the frames taken since the last call, decoded.
    fn take_blocks(&mut self) -> Vec<HeaderBlock> {
        self.client.take_heard().blocks
    }

    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        self.client.block(fields, Indexing::Incremental)
    }

    fn request_block(&mut self, path: &str) -> Vec<u8> {
        self.client.request_block(path, &[])
    }

    fn headers_frame(&mut self, stream: u32, end_stream: bool) -> Vec<u8> {
        self.client
            .request_headers(stream, "/a.B/C", &[], end_stream)
            .to_bytes()
    }
}

/// The frames of a whole output.
fn parse_frames(bytes: &[u8]) -> Vec<Frame> {
    let (frames, rest) = split_frames(bytes);
    assert!(rest.is_empty(), "output ends on a frame boundary");
    frames
}

fn reason(code: ErrorCode) -> Reason {
    Reason(code.0)
}

fn goaway_reason(frames: &[Frame]) -> Option<Reason> {
    frames
        .iter()
        .find(|f| f.kind == kind::GOAWAY)
        .and_then(Frame::error_code)
        .map(reason)
}

fn rst_reason(frames: &[Frame], stream: u32) -> Option<Reason> {
    frames
        .iter()
        .find(|f| f.kind == kind::RST_STREAM && f.stream == stream)
        .and_then(Frame::error_code)
        .map(reason)
}

/// Feeds `bytes` and expects a connection error with `reason`.
fn expect_goaway(peer: &mut Peer, bytes: &[u8], reason: Reason) {
    peer.feed(bytes);
    let frames = peer.take_frames();
    assert_eq!(goaway_reason(&frames), Some(reason), "{frames:?}");
    assert!(peer.conn.is_closed());
    assert_eq!(peer.conn.error().map(|e| e.reason), Some(reason));
}

fn settings_frame(params: &[(u16, u32)]) -> Vec<u8> {
    Frame::settings(params).to_bytes()
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    Frame::window_update(stream, increment).to_bytes()
}

/// HEADERS with a block that CONTINUATION frames go on with.
fn open_block(stream: u32, fragment: &[u8], end_stream: bool) -> Vec<u8> {
    Frame::headers(stream, fragment, end_stream)
        .without_flags(flag::END_HEADERS)
        .to_bytes()
}

/// PRIORITY on `stream`: depends on `dependency`, with the weight field
/// `weight`.
fn priority(stream: u32, dependency: u32, weight: u8) -> Vec<u8> {
    let fields = Priority {
        dependency,
        exclusive: false,
        weight,
    };
    Frame::priority(stream, fields).to_bytes()
}

fn cancel(stream: u32) -> Vec<u8> {
    Frame::rst_stream(stream, ErrorCode::CANCEL).to_bytes()
}

fn ping(data: [u8; 8]) -> Vec<u8> {
    Frame::ping(data).to_bytes()
}

fn data(stream: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    Frame::data(stream, payload, end_stream).to_bytes()
}

#[test]
fn settings_advertise_the_configured_limits() {
    let conn = Connection::new(Config::default());
    let frames = parse_frames(conn.output());
    let first = &frames[0];
    assert_eq!(
        (first.kind, first.stream, first.flags),
        (kind::SETTINGS, 0, 0)
    );
    let params = first.settings_params().expect("whole parameters");
    assert!(params.contains(&(setting::MAX_CONCURRENT_STREAMS, 4096)));
    assert!(params.contains(&(setting::INITIAL_WINDOW_SIZE, 1 << 20)));
    // The connection window is opened beyond the default 65535.
    assert_eq!(frames[1].kind, kind::WINDOW_UPDATE);
}

#[test]
fn invalid_preface_is_a_protocol_error() {
    let mut conn = Connection::new(Config::default());
    let mut events = Vec::new();
    conn.recv(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &mut events);
    let frames = parse_frames(conn.output());
    assert_eq!(goaway_reason(&frames), Some(Reason::PROTOCOL_ERROR));
}

#[test]
fn preface_may_arrive_in_pieces() {
    let mut conn = Connection::new(Config::default());
    let mut events = Vec::new();
    assert_eq!(conn.recv(&PREFACE[..10], &mut events), 0);
    assert!(conn.error().is_none());
    let rest = Client::handshake(&[]);
    assert_eq!(conn.recv(&rest, &mut events), rest.len());
    assert!(conn.error().is_none());
}

#[test]
fn first_frame_must_be_settings() {
    let mut conn = Connection::new(Config::default());
    let mut bytes = PREFACE.to_vec();
    bytes.extend(ping([0; 8]));
    conn.recv(&bytes, &mut Vec::new());
    assert_eq!(conn.error().map(|e| e.reason), Some(Reason::PROTOCOL_ERROR));
}

#[test]
fn partial_frames_wait_for_the_rest() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, true);
    let mut events = Vec::new();
    assert_eq!(peer.conn.recv(&bytes[..5], &mut events), 0);
    assert_eq!(peer.conn.recv(&bytes[..bytes.len() - 1], &mut events), 0);
    assert!(events.is_empty());
    assert_eq!(peer.conn.recv(&bytes, &mut events), bytes.len());
    assert_eq!(events.len(), 1);
}

#[test]
fn ping_is_answered_and_acks_are_not() {
    let mut peer = Peer::default();
    peer.feed(&ping(*b"12345678"));
    let frames = peer.take_frames();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].kind, kind::PING);
    assert!(frames[0].has(flag::ACK));
    assert_eq!(frames[0].payload, b"12345678");
    peer.feed(&Frame::ping_ack(*b"12345678").to_bytes());
    assert!(peer.take_frames().is_empty());
}

#[test]
fn malformed_pings_are_connection_errors() {
    expect_goaway(
        &mut Peer::default(),
        &frame_bytes(kind::PING, 0, 0, &[0; 7]),
        Reason::FRAME_SIZE_ERROR,
    );
    expect_goaway(
        &mut Peer::default(),
        &frame_bytes(kind::PING, 0, 1, &[0; 8]),
        Reason::PROTOCOL_ERROR,
    );
}

#[test]
fn settings_errors() {
    let cases: Vec<(Vec<u8>, Reason)> = vec![
        (
            frame_bytes(kind::SETTINGS, flag::ACK, 0, &[0; 6]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            frame_bytes(kind::SETTINGS, 0, 1, &[]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            frame_bytes(kind::SETTINGS, 0, 0, &[0; 5]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            settings_frame(&[(setting::ENABLE_PUSH, 2)]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
            Reason::FLOW_CONTROL_ERROR,
        ),
        (
            settings_frame(&[(setting::MAX_FRAME_SIZE, 16_383)]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            settings_frame(&[(setting::MAX_FRAME_SIZE, 1 << 24)]),
            Reason::PROTOCOL_ERROR,
        ),
    ];
    for (bytes, reason) in cases {
        expect_goaway(&mut Peer::default(), &bytes, reason);
    }
}

#[test]
fn settings_are_acknowledged_and_unknown_ones_ignored() {
    let mut peer = Peer::default();
    peer.feed(&settings_frame(&[
        (0x99, 7),
        (setting::MAX_FRAME_SIZE, 20_000),
    ]));
    let frames = peer.take_frames();
    assert_eq!(frames.len(), 1);
    assert!(frames[0].kind == kind::SETTINGS && frames[0].has(flag::ACK));
    assert!(peer.conn.error().is_none());
}

#[test]
fn request_headers_become_an_event_with_their_fields() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, false);
    let events = peer.feed(&bytes);
    let Event::Request {
        stream,
        fields,
        end_stream,
        too_large,
        ..
    } = events[0].clone()
    else {
        panic!("{events:?}")
    };
    assert_eq!((stream, end_stream, too_large), (1, false, false));
    let list: Vec<_> = peer.conn.fields().iter(fields).collect();
    assert!(list.contains(&(&b":path"[..], &b"/a.B/C"[..])));
    assert!(list.contains(&(&b"content-type"[..], &b"application/grpc"[..])));
}

#[test]
fn headers_with_padding_and_priority() {
    let mut peer = Peer::default();
    let block = peer.request_block("/p.Q/R");
    let frame = Frame::headers(3, &block, true)
        .with_priority(Priority {
            dependency: 0,
            exclusive: false,
            weight: 16,
        })
        .padded(3);
    let events = peer.feed(&frame.to_bytes());
    assert!(matches!(
        events[0],
        Event::Request {
            stream: 3,
            end_stream: true,
            ..
        }
    ));
}

#[test]
fn header_block_spread_over_continuation_frames() {
    let mut peer = Peer::default();
    let block = peer.request_block("/x.Y/Z");
    let (a, rest) = block.split_at(3);
    let (b, c) = rest.split_at(2);
    let mut bytes = open_block(1, a, true);
    bytes.extend(Frame::continuation(1, b, false).to_bytes());
    bytes.extend(Frame::continuation(1, c, true).to_bytes());
    let events = peer.feed(&bytes);
    let Event::Request { fields, .. } = events[0].clone() else {
        panic!()
    };
    assert!(peer
        .conn
        .fields()
        .iter(fields)
        .any(|f| f == (&b":path"[..], &b"/x.Y/Z"[..])));
}

#[test]
fn continuation_rules() {
    let mut peer = Peer::default();
    let block = peer.request_block("/x.Y/Z");
    let mut bytes = open_block(1, &block[..2], false);
    bytes.extend(ping([0; 8]));
    expect_goaway(&mut peer, &bytes, Reason::PROTOCOL_ERROR);

    let mut peer = Peer::default();
    expect_goaway(
        &mut peer,
        &Frame::continuation(1, &[0x82], true).to_bytes(),
        Reason::PROTOCOL_ERROR,
    );

    let mut peer = Peer::default();
    let block = peer.request_block("/x.Y/Z");
    let mut bytes = open_block(1, &block[..2], false);
    bytes.extend(Frame::continuation(3, &block[2..], true).to_bytes());
    expect_goaway(&mut peer, &bytes, Reason::PROTOCOL_ERROR);
}

#[test]
fn continuation_is_expected_across_reads_and_after_every_block_start() {
    // The block's start in one read, a PING in the next: still an error.
    let mut peer = Peer::default();
    let block = peer.request_block("/x.Y/Z");
    assert!(peer.feed(&open_block(1, &block[..2], false)).is_empty());
    expect_goaway(&mut peer, &ping([0; 8]), Reason::PROTOCOL_ERROR);

    // A block that ended lets the next frames through; a second block's
    // start holds them back again.
    let mut peer = Peer::default();
    let block = peer.request_block("/x.Y/Z");
    let mut bytes = open_block(1, &block[..2], false);
    bytes.extend(Frame::continuation(1, &block[2..], true).to_bytes());
    bytes.extend(ping([1; 8]));
    let events = peer.feed(&bytes);
    assert!(matches!(events[..], [Event::Request { stream: 1, .. }]));
    assert!(peer.conn.error().is_none());
    let headers = peer.headers_frame(3, true);
    let events = peer.feed(&headers);
    assert!(matches!(events[..], [Event::Request { stream: 3, .. }]));
    let block = peer.request_block("/x.Y/Z");
    let mut bytes = open_block(5, &block[..2], false);
    bytes.extend(peer.headers_frame(7, true));
    expect_goaway(&mut peer, &bytes, Reason::PROTOCOL_ERROR);
}

#[test]
fn continuation_flood_is_bounded() {
    let mut peer = Peer::default();
    let mut bytes = open_block(1, &[0x82], false);
    for _ in 0..100 {
        bytes.extend(Frame::continuation(1, &[0; 1000], false).to_bytes());
    }
    expect_goaway(&mut peer, &bytes, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn data_events_index_the_input_without_padding() {
    let mut peer = Peer::default();
    let mut bytes = peer.headers_frame(1, false);
    bytes.extend(data(1, b"hello", false));
    bytes.extend(Frame::data(1, b"ab", true).padded(2).to_bytes());
    let events = peer.feed(&bytes);
    let data: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Data {
                data, end_stream, ..
            } => Some((peer.input[data.clone()].to_vec(), *end_stream)),
            _ => None,
        })
        .collect();
    assert_eq!(
        data,
        vec![(b"hello".to_vec(), false), (b"ab".to_vec(), true)]
    );
}

#[test]
fn stream_identifier_rules() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(2, true);
    expect_goaway(&mut peer, &bytes, Reason::PROTOCOL_ERROR);

    let mut peer = Peer::default();
    let mut bytes = peer.headers_frame(5, true);
    bytes.extend(peer.headers_frame(3, true));
    expect_goaway(&mut peer, &bytes, Reason::PROTOCOL_ERROR);

    let mut peer = Peer::default();
    expect_goaway(&mut peer, &data(1, b"x", false), Reason::PROTOCOL_ERROR);
    let mut peer = Peer::default();
    expect_goaway(&mut peer, &data(0, b"x", false), Reason::PROTOCOL_ERROR);
    let mut peer = Peer::default();
    expect_goaway(&mut peer, &cancel(1), Reason::PROTOCOL_ERROR);
    let mut peer = Peer::default();
    expect_goaway(&mut peer, &window_update(1, 1), Reason::PROTOCOL_ERROR);
    let mut peer = Peer::default();
    expect_goaway(
        &mut peer,
        &frame_bytes(kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
        Reason::PROTOCOL_ERROR,
    );
}

#[test]
fn data_after_end_stream_is_stream_closed() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    peer.take_frames();
    peer.feed(&data(1, b"late", false));
    let frames = peer.take_frames();
    assert_eq!(rst_reason(&frames, 1), Some(Reason::STREAM_CLOSED));
    assert!(peer.conn.error().is_none());
}

#[test]
fn headers_on_a_closed_stream_is_stream_closed() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], true);
    peer.take_frames();
    let bytes = peer.headers_frame(1, true);
    expect_goaway(&mut peer, &bytes, Reason::STREAM_CLOSED);
}

#[test]
fn concurrent_stream_limit_refuses_the_extra_stream() {
    let mut peer = Peer::new(Config {
        max_concurrent_streams: 2,
        ..Config::default()
    });
    let mut bytes = Vec::new();
    for id in [1, 3, 5] {
        bytes.extend(peer.headers_frame(id, false));
    }
    let events = peer.feed(&bytes);
    assert_eq!(events.len(), 2);
    let frames = peer.take_frames();
    assert_eq!(rst_reason(&frames, 5), Some(Reason::REFUSED_STREAM));
    // DATA already on its way for the refused stream is ignored.
    peer.feed(&data(5, b"x", true));
    assert!(peer.take_frames().is_empty());
    assert!(peer.conn.error().is_none());
}

#[test]
fn refused_header_blocks_leave_no_fields_behind() {
    // Each refused block decodes to a large field list; none of it may stay
    // in the read's field list, or one read of small frames could pin
    // megabytes.
    let mut peer = Peer::new(Config {
        max_concurrent_streams: 1,
        ..Config::default()
    });
    let big = "v".repeat(4000);
    let mut bytes = peer.headers_frame(1, false);
    for id in (3..=401).step_by(2) {
        let block =
            peer.client
                .literal_block(&[(":method", "POST"), (":path", "/a.B/C"), ("x-big", &big)]);
        bytes.extend(Frame::headers(id, &block, false).to_bytes());
    }
    let events = peer.feed(&bytes);
    assert_eq!(events.len(), 1, "only stream 1 opens");
    let Event::Request { fields, .. } = &events[0] else {
        panic!("{events:?}");
    };
    assert_eq!(
        peer.conn.fields().len(),
        fields.end,
        "only stream 1's fields stay"
    );
    assert!(peer.take_frames().len() >= 200);
}

#[test]
fn refused_remembered_blocks_leave_no_fields_behind() {
    // As above, with blocks small enough to be remembered: each refers to
    // a large table entry, so its fields are a thousand times its bytes. A
    // block that opens nothing must not stay behind when another block
    // takes its place among the remembered ones.
    let (mut peer, big, mut bytes) = with_big_entry(Config {
        max_concurrent_streams: 1,
        ..Config::default()
    });
    for id in (3..=401).step_by(2) {
        let path = format!("/a.B/M{id}");
        let block = small_block_of_big_fields(&mut peer, &path, &big, false);
        bytes.extend(Frame::headers(id, &block, false).to_bytes());
    }
    let events = peer.feed(&bytes);
    assert_eq!(events.len(), 1, "only stream 1 opens");
    assert_eq!(
        peer.conn.retired_field_bytes(),
        0,
        "no event names a refused block"
    );
    assert!(peer.take_frames().len() >= 200);
}

/// A peer whose table holds a large entry, `x-big` with the value
/// returned, once the bytes returned (stream 1's request) are fed.
fn with_big_entry(config: Config) -> (Peer, String, Vec<u8>) {
    let mut peer = Peer::new(config);
    let big = "v".repeat(4000);
    let bytes = peer
        .client
        .request_headers(1, "/a.B/C", &[("x-big", &big)], false)
        .to_bytes();
    (peer, big, bytes)
}

/// A block that refers to a large table entry, `big`, on `stream`: a
/// few dozen bytes that decode to 4 KB of fields; with `fresh`, it starts
/// with a table size update (to the same size), so it is decoded afresh
/// into the read's field list instead of being remembered.
fn small_block_of_big_fields(peer: &mut Peer, path: &str, big: &str, fresh: bool) -> Vec<u8> {
    if fresh {
        peer.client.encoder().set_max_table_size(4096);
    }
    let block = peer.client.literal_block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        ("x-big", big),
    ]);
    assert!(
        block.len() < 40,
        "x-big is one index: {} bytes",
        block.len()
    );
    block
}

#[test]
fn fields_of_streams_reset_in_the_same_read_are_let_go() {
    // Streams opened and reset by the client within one read, each with a
    // small block of large fields, decoded afresh or remembered: what
    // they decoded to must not stay for the read's events, or one read of
    // small frames could pin megabytes.
    // Each stream reset right after it opened, or ten opened and then
    // reset in the order they opened.
    for (fresh, group) in [(false, 1), (true, 1), (true, 10)] {
        let (mut peer, big, mut bytes) = with_big_entry(Config::default());
        let ids: Vec<u32> = (3..=401).step_by(2).collect();
        for ids in ids.chunks(group) {
            for &id in ids {
                let path = format!("/a.B/M{id}");
                let block = small_block_of_big_fields(&mut peer, &path, &big, fresh);
                bytes.extend(Frame::headers(id, &block, false).to_bytes());
            }
            for &id in ids {
                bytes.extend(cancel(id));
            }
        }
        let events = peer.feed(&bytes);
        assert_eq!(events.len(), 1, "only stream 1 is open: {events:?}");
        let Event::Request { fields, .. } = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(
            peer.conn.fields().len(),
            fields.end,
            "fresh {fresh}, {group} at a time: only stream 1's fields stay"
        );
        assert_eq!(
            peer.conn.retired_field_bytes(),
            0,
            "fresh {fresh}, {group} at a time: no event names a reset stream's block"
        );
    }
}

#[test]
fn a_remembered_block_named_by_an_event_left_keeps_its_fields() {
    // Streams 3 and 5 send the same block; 3 is reset, 5 stays: the block
    // is still named, and its fields stay for stream 5 even once other
    // blocks have taken its place among the remembered ones.
    let (mut peer, big, mut bytes) = with_big_entry(Config::default());
    for id in [3, 5] {
        let block = small_block_of_big_fields(&mut peer, "/a.B/Kept", &big, false);
        bytes.extend(Frame::headers(id, &block, false).to_bytes());
    }
    bytes.extend(cancel(3));
    for id in (7..=21).step_by(2) {
        let path = format!("/a.B/M{id}");
        let block = small_block_of_big_fields(&mut peer, &path, &big, false);
        bytes.extend(Frame::headers(id, &block, false).to_bytes());
        bytes.extend(cancel(id));
    }
    let events = peer.feed(&bytes);
    let Some(Event::Request {
        fields, block_id, ..
    }) = events
        .iter()
        .find(|event| matches!(event, Event::Request { stream: 5, .. }))
        .cloned()
    else {
        panic!("{events:?}");
    };
    assert!(block_id != 0, "remembered");
    let (list, range) = peer.conn.request_fields(fields, block_id);
    let path = list
        .iter(range)
        .find(|(name, _)| *name == b":path")
        .map(|(_, value)| value.to_vec());
    assert_eq!(path.as_deref(), Some(&b"/a.B/Kept"[..]), "{events:?}");
}

#[test]
fn self_dependency_is_a_stream_error() {
    let mut peer = Peer::default();
    peer.feed(&priority(1, 1, 16));
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::PROTOCOL_ERROR)
    );
    let mut peer = Peer::default();
    peer.feed(&priority(1, 3, 16));
    assert!(
        peer.take_frames().is_empty(),
        "PRIORITY is accepted and ignored"
    );
    peer.feed(&frame_bytes(kind::PRIORITY, 0, 1, &[0, 0, 0, 3]));
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::FRAME_SIZE_ERROR)
    );
}

#[test]
fn unknown_frame_types_are_ignored() {
    let mut peer = Peer::default();
    let events = peer.feed(&frame_bytes(0x42, 0xff, 0, b"whatever"));
    assert!(events.is_empty());
    assert!(peer.take_frames().is_empty());
    assert!(peer.conn.error().is_none());
}

#[test]
fn frame_larger_than_the_limit_is_a_frame_size_error() {
    let mut peer = Peer::default();
    let bytes = frame_bytes(kind::DATA, 0, 1, &vec![0; 16_385]);
    expect_goaway(&mut peer, &bytes, Reason::FRAME_SIZE_ERROR);
}

#[test]
fn invalid_hpack_is_a_compression_error() {
    let mut peer = Peer::default();
    // Indexed field 0 does not exist.
    expect_goaway(
        &mut peer,
        &Frame::headers(1, &[0x80], false).to_bytes(),
        Reason::COMPRESSION_ERROR,
    );
}

#[test]
fn malformed_request_is_reset_and_the_connection_goes_on() {
    let mut peer = Peer::default();
    let block = peer.block(&[(":method", "POST"), (":path", "/a")]);
    peer.feed(&Frame::headers(1, &block, false).to_bytes());
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::PROTOCOL_ERROR)
    );
    let bytes = peer.headers_frame(3, true);
    assert_eq!(peer.feed(&bytes).len(), 1);
}

/// HEADERS on stream 1 with `content-length` fields of `lengths`, then
/// `body` as its last DATA.
fn request_with_lengths(peer: &mut Peer, lengths: &[&str], body: &[u8]) -> Vec<u8> {
    let mut fields = vec![(":method", "POST"), (":scheme", "http"), (":path", "/")];
    fields.extend(lengths.iter().map(|length| ("content-length", *length)));
    let block = peer.block(&fields);
    let mut bytes = Frame::headers(1, &block, false).to_bytes();
    bytes.extend(data(1, body, true));
    bytes
}

#[test]
fn content_length_must_match_the_data() {
    let mut peer = Peer::default();
    let bytes = request_with_lengths(&mut peer, &["3"], b"ab");
    peer.feed(&bytes);
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::PROTOCOL_ERROR)
    );
}

#[test]
fn content_lengths_that_disagree_are_a_stream_error() {
    let mut peer = Peer::default();
    // The body matches the second length, not the first.
    let bytes = request_with_lengths(&mut peer, &["0", "2"], b"ab");
    assert!(peer.feed(&bytes).is_empty(), "no request is read");
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::PROTOCOL_ERROR)
    );
    assert!(peer.conn.error().is_none());
}

#[test]
fn oversized_header_list_is_flagged() {
    let mut peer = Peer::new(Config {
        max_header_list_size: 300,
        ..Config::default()
    });
    let long = "v".repeat(400);
    let block = peer.block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/a"),
        ("x-big", &long),
    ]);
    let events = peer.feed(&Frame::headers(1, &block, true).to_bytes());
    let Event::Request {
        fields, too_large, ..
    } = events[0].clone()
    else {
        panic!()
    };
    assert!(too_large);
    assert!(fields.is_empty());
}

#[test]
fn trailers_from_the_client_end_the_stream() {
    let mut peer = Peer::default();
    let mut bytes = peer.headers_frame(1, false);
    let trailers = peer.block(&[("x-check", "1")]);
    bytes.extend(Frame::headers(1, &trailers, true).to_bytes());
    let events = peer.feed(&bytes);
    assert_eq!(
        events[1],
        Event::Data {
            stream: 1,
            data: 0..0,
            end_stream: true
        }
    );
    // A second HEADERS without END_STREAM is malformed.
    let mut peer = Peer::default();
    let mut bytes = peer.headers_frame(1, false);
    bytes.extend(Frame::headers(1, &trailers, false).to_bytes());
    peer.feed(&bytes);
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::PROTOCOL_ERROR)
    );
}

#[test]
fn peer_reset_drops_the_stream() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, false);
    peer.feed(&bytes);
    let events = peer.feed(&cancel(1));
    assert_eq!(events, vec![Event::Reset { stream: 1, tag: 0 }]);
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], false);
    peer.conn.send_data(1, b"nothing", true);
    assert!(
        peer.take_frames().is_empty(),
        "nothing is sent on a reset stream"
    );
    expect_goaway(
        &mut peer,
        &frame_bytes(kind::RST_STREAM, 0, 1, &[0, 0, 8]),
        Reason::FRAME_SIZE_ERROR,
    );
}

#[test]
fn frames_after_the_peers_reset_are_stream_closed() {
    // RFC 9113 section 5.1: after receiving RST_STREAM, any frame but
    // PRIORITY on the stream is a stream error of type STREAM_CLOSED.
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, false);
    peer.feed(&bytes);
    peer.feed(&cancel(1));
    peer.take_frames();
    peer.feed(&data(1, b"test", true));
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::STREAM_CLOSED)
    );
    assert!(peer.conn.error().is_none());
    // PRIORITY stays allowed.
    peer.feed(&priority(1, 0, 16));
    assert!(peer.take_frames().is_empty());
}

#[test]
fn response_is_headers_data_trailers_with_small_steady_state_headers() {
    let mut peer = Peer::default();
    let mut sizes = Vec::new();
    for id in [1, 3] {
        let bytes = peer.headers_frame(id, true);
        peer.feed(&bytes);
        peer.conn.send_headers(
            id,
            &[
                Field::indexed(b":status", b"200"),
                Field::indexed(b"content-type", b"application/grpc"),
            ],
            false,
        );
        peer.conn.send_data(id, b"\0\0\0\0\x02hi", false);
        peer.conn
            .send_trailers(id, &[Field::indexed(b"grpc-status", b"0")]);
        let frames = peer.take_frames();
        let kinds: Vec<_> = frames.iter().map(|f| (f.kind, f.flags)).collect();
        assert_eq!(
            kinds,
            vec![
                (kind::HEADERS, flag::END_HEADERS),
                (kind::DATA, 0),
                (kind::HEADERS, flag::END_HEADERS | flag::END_STREAM)
            ]
        );
        let blocks = peer.take_blocks();
        let headers = blocks[0].strings();
        assert_eq!(headers[0], (":status".into(), "200".into()));
        let trailers = blocks[1].strings();
        assert_eq!(trailers, vec![("grpc-status".into(), "0".into())]);
        sizes.push((frames[0].payload.len(), frames[2].payload.len()));
        assert!(!peer.conn.is_stream_open(id));
    }
    assert!(
        sizes[1].0 <= 2 && sizes[1].1 == 1,
        "steady-state headers are indexed: {sizes:?}"
    );
}

/// A peer whose streams open with a window of 10 bytes, and stream 1 of it
/// answered with 25 bytes of body (10 sent, 15 held).
fn peer_with_held_body() -> Peer {
    let mut peer = Peer::default();
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 10)]));
    peer.take_frames();
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], false);
    peer.conn.send_data(1, &[9; 25], false);
    peer
}

/// Body bytes in `frames`.
fn data_bytes(frames: &[Frame]) -> usize {
    frames
        .iter()
        .filter(|f| f.kind == kind::DATA)
        .map(|f| f.payload.len())
        .sum()
}

#[test]
fn send_respects_windows_and_resumes_on_window_update() {
    let mut peer = peer_with_held_body();
    peer.conn
        .send_trailers(1, &[Field::indexed(b"grpc-status", b"0")]);
    let frames = peer.take_frames();
    assert_eq!(data_bytes(&frames), 10, "only the stream window is sent");
    assert_eq!(
        frames.iter().filter(|f| f.kind == kind::HEADERS).count(),
        1,
        "trailers wait"
    );

    peer.feed(&window_update(1, 10));
    let frames = peer.take_frames();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].payload.len(), 10);

    // A larger initial window opens the stream's window by the difference.
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 100)]));
    let frames = peer.take_frames();
    let data: Vec<_> = frames.iter().filter(|f| f.kind == kind::DATA).collect();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].payload.len(), 5);
    let last = frames.last().unwrap();
    assert_eq!(last.kind, kind::HEADERS);
    assert!(last.has(flag::END_STREAM));
    assert!(!peer.conn.is_stream_open(1));
}

#[test]
fn initial_window_changes_of_one_frame_apply_in_order() {
    let mut peer = peer_with_held_body();
    assert_eq!(data_bytes(&peer.take_frames()), 10);
    // Up, down, up: the stream's window moves by the last value's change.
    peer.feed(&settings_frame(&[
        (setting::INITIAL_WINDOW_SIZE, 50),
        (setting::INITIAL_WINDOW_SIZE, 5),
        (setting::INITIAL_WINDOW_SIZE, 20),
    ]));
    assert_eq!(data_bytes(&peer.take_frames()), 10);
    assert!(peer.conn.error().is_none());
    // A window 5 short of the largest: a frame that ends where it began
    // still takes it past 2^31 - 1 on the way, a connection error.
    let bytes = peer.headers_frame(3, true);
    peer.feed(&bytes);
    peer.feed(&window_update(3, MAX_WINDOW - 20 - 5));
    expect_goaway(
        &mut peer,
        &settings_frame(&[
            (setting::INITIAL_WINDOW_SIZE, 30),
            (setting::INITIAL_WINDOW_SIZE, 20),
        ]),
        Reason::FLOW_CONTROL_ERROR,
    );
}

#[test]
fn data_written_in_place_is_framed_within_windows_and_the_rest_held() {
    // Stream window 40,000 (connection window 65,535); frames of at most
    // 16,384 bytes.
    let mut peer = Peer::default();
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 40_000)]));
    peer.take_frames();
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    // Before the headers the stream has no window to write into.
    assert_eq!(
        peer.conn.send_data_in_place(1, |_| panic!("not called")),
        None
    );
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], false);
    peer.take_frames();

    // Small: one frame, the windows debited.
    let made = peer
        .conn
        .send_data_in_place(1, |out| out.extend_from_slice(&[1; 100]));
    assert_eq!(made, Some(100));
    assert_eq!(peer.conn.send_window(1), 40_000 - 100);
    let frames = peer.take_frames();
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].kind, frames[0].stream, frames[0].flags),
        (kind::DATA, 1, 0)
    );
    assert_eq!(frames[0].payload, vec![1; 100]);

    // Nothing written: no frame.
    assert_eq!(peer.conn.send_data_in_place(1, |_| {}), Some(0));
    assert!(peer.take_frames().is_empty());

    // 50,000 bytes (each byte its position mod 251): 39,900 go out in
    // frames of 16,384 at most, the rest is held.
    let body: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let made = peer
        .conn
        .send_data_in_place(1, |out| out.extend_from_slice(&body));
    assert_eq!(made, Some(50_000));
    let frames = peer.take_frames();
    let sizes: Vec<usize> = frames.iter().map(|f| f.payload.len()).collect();
    assert_eq!(sizes, [16_384, 16_384, 7_132]);
    assert!(frames
        .iter()
        .all(|f| f.kind == kind::DATA && f.stream == 1 && f.flags == 0));
    let sent: Vec<u8> = frames.iter().flat_map(|f| f.payload.clone()).collect();
    assert_eq!(sent, body[..39_900]);
    assert_eq!(peer.conn.buffered(1), 10_100);
    // Holding bytes, the stream takes nothing in place.
    assert_eq!(
        peer.conn.send_data_in_place(1, |_| panic!("not called")),
        None
    );

    // The window opens: the held bytes follow, in order, then the end.
    let events = peer.feed(&window_update(1, 20_000));
    assert!(events.contains(&Event::Writable { stream: 1 }));
    peer.conn
        .send_trailers(1, &[Field::indexed(b"grpc-status", b"0")]);
    let frames = peer.take_frames();
    let rest: Vec<u8> = frames
        .iter()
        .filter(|f| f.kind == kind::DATA)
        .flat_map(|f| f.payload.clone())
        .collect();
    assert_eq!(rest, body[39_900..]);
    let last = frames.last().unwrap();
    assert!(last.kind == kind::HEADERS && last.has(flag::END_STREAM));
    assert!(!peer.conn.is_stream_open(1));
}

#[test]
fn streams_shut_by_their_own_window_wait_aside() {
    // Each stream may receive 4 bytes; the connection window stays open.
    let mut peer = Peer::default();
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 4)]));
    peer.take_frames();
    let streams: Vec<u32> = (0..500).map(|i| 1 + 2 * i).collect();
    for &id in &streams {
        open_response(&mut peer, id, true);
        assert_eq!(peer.conn.send_data(id, &[7; 10], true), 10);
    }
    peer.take_frames();
    assert_eq!(peer.conn.held_bytes(), 500 * 6);
    // None can send until its own window opens: none waits in the queue
    // that the connection's window serves, so a WINDOW_UPDATE for one
    // stream does not walk the others.
    assert_eq!(peer.conn.blocked_len(), 0);

    let mut updates = Vec::new();
    for _ in 0..3 {
        updates.extend(window_update(999, 1));
    }
    peer.feed(&updates);
    assert_eq!(data_sent(&peer.take_frames()), vec![(999, 1); 3]);
    assert_eq!(peer.conn.blocked_len(), 0);

    // Shut by the connection's window instead, a stream waits in the queue
    // and goes on when that opens.
    peer.feed(&window_update(1, 100));
    assert_eq!(peer.take_frames().len(), 1, "the rest of stream 1 at once");
    assert!(!peer.conn.is_stream_open(1));

    // A larger initial window opens all the others.
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 100)]));
    let frames = peer.take_frames();
    let ended = frames
        .iter()
        .filter(|f| f.kind == kind::DATA && f.has(flag::END_STREAM))
        .count();
    assert_eq!(ended, 499);
    assert_eq!(peer.conn.held_bytes(), 0);
    assert!(streams.iter().all(|&id| !peer.conn.is_stream_open(id)));
}

#[test]
fn streams_shut_by_the_connection_window_resume_in_turn() {
    let mut peer = Peer::default();
    open_response(&mut peer, 1, true);
    assert_eq!(peer.conn.send_data(1, &vec![0; 65_535], false), 65_535);
    for id in [3, 5] {
        open_response(&mut peer, id, true);
        assert_eq!(peer.conn.send_data(id, &[id as u8; 30], true), 30);
    }
    peer.take_frames();
    assert_eq!(peer.conn.blocked_len(), 2);
    // 40 bytes of connection window: stream 3's 30, then 10 of stream 5's.
    peer.feed(&window_update(0, 40));
    assert_eq!(data_sent(&peer.take_frames()), vec![(3, 30), (5, 10)]);
    peer.feed(&window_update(0, 40));
    assert_eq!(data_sent(&peer.take_frames()), vec![(5, 20)]);
    assert_eq!(peer.conn.blocked_len(), 0);
}

#[test]
fn connection_window_is_shared_and_data_split_by_frame_size() {
    let mut peer = answering_streams_1_and_3();
    peer.conn.send_data(1, &vec![1; 40_000], true);
    peer.conn.send_data(3, &vec![3; 40_000], true);
    let frames = peer.take_frames();
    assert!(frames.iter().all(|f| f.payload.len() <= 16_384));
    let sent: usize = frames.iter().map(|f| f.payload.len()).sum();
    assert_eq!(sent, 65_535, "the default connection window");
    assert_eq!(frames.iter().filter(|f| f.has(flag::END_STREAM)).count(), 1);
    peer.feed(&window_update(0, 1 << 20));
    let frames = peer.take_frames();
    // The rest of stream 3 fits in its own 65535 window now.
    let sent: usize = frames.iter().map(|f| f.payload.len()).sum();
    assert_eq!(sent, 80_000 - 65_535);
    let last = frames.last().unwrap();
    assert!(last.stream == 3 && last.has(flag::END_STREAM));
}

#[test]
fn window_overflow_is_a_flow_control_error() {
    let mut peer = Peer::default();
    expect_goaway(
        &mut peer,
        &window_update(0, (1 << 31) - 1),
        Reason::FLOW_CONTROL_ERROR,
    );

    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, false);
    peer.feed(&bytes);
    peer.feed(&window_update(1, (1 << 31) - 1));
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::FLOW_CONTROL_ERROR)
    );
    assert!(peer.conn.error().is_none());

    let mut peer = Peer::default();
    expect_goaway(&mut peer, &window_update(0, 0), Reason::PROTOCOL_ERROR);
    let mut peer = Peer::default();
    expect_goaway(
        &mut peer,
        &frame_bytes(kind::WINDOW_UPDATE, 0, 0, &[0, 0, 1]),
        Reason::FRAME_SIZE_ERROR,
    );
}

#[test]
fn receive_window_is_replenished_in_batches() {
    let mut peer = Peer::default();
    let mut bytes = Vec::new();
    for i in 0..400u32 {
        let id = 1 + 2 * i;
        bytes.extend(peer.headers_frame(id, false));
        bytes.extend(data(id, &[0; 16_000], true));
    }
    peer.feed(&bytes);
    let updates: Vec<_> = peer
        .take_frames()
        .into_iter()
        .filter(|f| f.kind == kind::WINDOW_UPDATE)
        .collect();
    // 6.4 MB received: one connection-level update, no per-stream updates.
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].stream, 0);
}

#[test]
fn data_beyond_the_connection_window_is_a_flow_control_error() {
    let mut peer = Peer::new(Config {
        connection_window: 65_535,
        initial_stream_window: 1 << 20,
        ..Config::default()
    });
    let mut bytes = peer.headers_frame(1, false);
    for _ in 0..5 {
        bytes.extend(data(1, &[0; 16_000], false));
    }
    expect_goaway(&mut peer, &bytes, Reason::FLOW_CONTROL_ERROR);
}

#[test]
fn graceful_go_away_takes_two_steps() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, false);
    peer.feed(&bytes);
    peer.conn.go_away();
    let frames = peer.take_frames();
    assert_eq!(frames[0].kind, kind::GOAWAY);
    assert_eq!(&frames[0].payload[..4], &[0x7f, 0xff, 0xff, 0xff]);
    assert_eq!(frames[1].kind, kind::PING);
    // A request sent before the client saw the GOAWAY is still accepted.
    let bytes = peer.headers_frame(3, false);
    assert_eq!(peer.feed(&bytes).len(), 1);
    let sent = frames[1].ping_data().expect("a PING");
    peer.feed(&Frame::ping_ack(sent).to_bytes());
    let frames = peer.take_frames();
    assert_eq!(frames[0].kind, kind::GOAWAY);
    assert_eq!(&frames[0].payload[..8], &[0, 0, 0, 3, 0, 0, 0, 0]);
    // Later streams are refused; open ones finish, then the connection is done.
    let bytes = peer.headers_frame(5, true);
    peer.feed(&bytes);
    assert_eq!(
        rst_reason(&peer.take_frames(), 5),
        Some(Reason::REFUSED_STREAM)
    );
    for id in [1, 3] {
        assert!(!peer.conn.is_closed());
        peer.feed(&data(id, b"", true));
        peer.conn
            .send_headers(id, &[Field::indexed(b":status", b"200")], true);
    }
    assert!(peer.conn.is_closed());
    assert!(peer.conn.error().is_none());
}

/// The last stream id of a GOAWAY never grows (RFC 9113 section 6.8): a
/// stream refused after the second GOAWAY of a graceful shutdown, whether
/// its PING was answered or not, is not named by the GOAWAY of a later
/// connection error or close.
#[test]
fn a_goaway_after_the_graceful_one_names_no_later_stream() {
    for answered in [false, true] {
        for close in [false, true] {
            let mut peer = Peer::default();
            let bytes = peer.headers_frame(1, false);
            peer.feed(&bytes);
            peer.conn.go_away();
            let sent = peer.take_frames()[1].ping_data().expect("a PING");
            if answered {
                peer.feed(&Frame::ping_ack(sent).to_bytes());
            } else {
                peer.conn.end_draining();
            }
            let frames = peer.take_frames();
            assert_eq!(frames[0].last_stream(), Some(1));
            let bytes = peer.headers_frame(3, true);
            peer.feed(&bytes);
            assert_eq!(
                rst_reason(&peer.take_frames(), 3),
                Some(Reason::REFUSED_STREAM)
            );
            if close {
                peer.conn.close(Reason::NO_ERROR, "closed");
            } else {
                // PING on a stream: a connection error.
                peer.feed(&frame_bytes(kind::PING, 0, 1, &[0; 8]));
            }
            let frames = peer.take_frames();
            let goaway = frames.iter().find(|f| f.kind == kind::GOAWAY);
            assert_eq!(
                goaway.and_then(Frame::last_stream),
                Some(1),
                "answered {answered}, close {close}: {frames:?}"
            );
        }
    }
}

#[test]
fn goaway_from_the_client_closes_once_streams_are_done() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    peer.feed(&Frame::goaway(0, ErrorCode::NO_ERROR, b"").to_bytes());
    assert!(!peer.conn.is_closed());
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], true);
    assert!(peer.conn.is_closed());
}

#[test]
fn early_answer_resets_a_stream_the_client_is_still_sending_on() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, false);
    peer.feed(&bytes);
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], true);
    let frames = peer.take_frames();
    assert_eq!(rst_reason(&frames, 1), Some(Reason::NO_ERROR));
    // Its DATA still in flight is ignored.
    peer.feed(&data(1, b"rest", true));
    assert!(peer.take_frames().is_empty());
}

#[test]
fn large_header_block_is_split_into_continuation() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    peer.take_frames();
    let big = vec![b'a'; 40_000];
    peer.conn.send_headers(
        1,
        &[
            Field::indexed(b":status", b"200"),
            Field::literal(b"x-big", &big),
        ],
        true,
    );
    let frames = peer.take_frames();
    assert_eq!(frames[0].kind, kind::HEADERS);
    assert!(!frames[0].has(flag::END_HEADERS));
    assert!(frames[1..].iter().all(|f| f.kind == kind::CONTINUATION));
    assert!(frames.last().unwrap().has(flag::END_HEADERS));
    let blocks = peer.take_blocks();
    assert_eq!(blocks.len(), 1, "one block in {} frames", frames.len());
    assert_eq!(blocks[0].get("x-big").map(<[u8]>::len), Some(40_000));
}

/// What waits for a zero window is counted in `held_bytes`, for the layer
/// above to bound (it holds new calls back past the limit); the codec
/// takes new streams whatever is held, and a reset releases what its
/// stream held.
#[test]
fn held_bytes_count_what_waits_for_the_windows_and_a_reset_releases_them() {
    let mut peer = Peer::new(Config {
        max_held_bytes: 100_000,
        ..Config::default()
    });
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 0)]));
    peer.take_frames();
    for i in 0..20u32 {
        let id = 1 + 2 * i;
        let bytes = peer.headers_frame(id, true);
        assert!(!peer.feed(&bytes).is_empty(), "stream {id} taken");
        peer.conn
            .send_headers(id, &[Field::indexed(b":status", b"200")], false);
        peer.conn.send_data(id, &[0; 30_000], true);
        assert!(rst_reason(&peer.take_frames(), id).is_none());
    }
    assert_eq!(peer.conn.held_bytes(), 20 * 30_000);
    peer.feed(&cancel(1));
    assert_eq!(peer.conn.held_bytes(), 19 * 30_000);
}

fn small_flood_budget() -> Peer {
    Peer::new(Config {
        max_unproductive_frames: 100,
        ..Config::default()
    })
}

#[test]
fn ping_settings_and_empty_frame_floods_end_in_enhance_your_calm() {
    let floods = [
        ping([1; 8]),
        settings_frame(&[]),
        frame_bytes(0x77, 0, 0, b"unknown"),
        priority(9, 0, 1),
        data(1, b"", false),
    ];
    for flood in floods {
        let mut peer = small_flood_budget();
        let mut bytes = peer.headers_frame(1, false);
        bytes.extend(flood.repeat(101));
        expect_goaway(&mut peer, &bytes, Reason::ENHANCE_YOUR_CALM);
    }
}

#[test]
fn rapid_reset_ends_in_enhance_your_calm() {
    let mut peer = small_flood_budget();
    let mut bytes = Vec::new();
    for i in 0..=100u32 {
        let id = 1 + 2 * i;
        bytes.extend(peer.headers_frame(id, false));
        bytes.extend(cancel(id));
    }
    expect_goaway(&mut peer, &bytes, Reason::ENHANCE_YOUR_CALM);
}

/// A stream that is never answered (a watch that lives for days) and its
/// client's keepalive PINGs: each start of the count again
/// (`forgive_unproductive`, once a minute in the server) lets the PINGs go
/// on for good; without it they reach the limit.
#[test]
fn forgiven_counts_let_a_long_stream_take_pings_for_good() {
    let mut peer = small_flood_budget();
    let headers = peer.headers_frame(1, false);
    peer.feed(&headers);
    for _ in 0..10 {
        peer.feed(&ping([3; 8]).repeat(90));
        peer.conn.forgive_unproductive();
    }
    assert!(peer.conn.error().is_none());
    assert!(peer.conn.is_stream_open(1));
    expect_goaway(
        &mut peer,
        &ping([3; 8]).repeat(101),
        Reason::ENHANCE_YOUR_CALM,
    );
}

#[test]
fn answered_calls_renew_the_flood_budget() {
    let mut peer = small_flood_budget();
    for i in 0..10u32 {
        let id = 1 + 2 * i;
        let mut bytes = peer.headers_frame(id, true);
        for _ in 0..90 {
            bytes.extend(ping([2; 8]));
        }
        peer.feed(&bytes);
        peer.conn
            .send_headers(id, &[Field::indexed(b":status", b"200")], true);
        peer.take_frames();
    }
    assert!(peer.conn.error().is_none());
}

#[test]
fn one_recv_produces_a_bounded_number_of_events() {
    use crate::h2::connection::MAX_EVENTS_PER_RECV;
    let mut peer = Peer::default();
    let mut bytes = Vec::new();
    for i in 0..(MAX_EVENTS_PER_RECV as u32 + 10) {
        bytes.extend(peer.headers_frame(1 + 2 * i, true));
    }
    let mut events = Vec::new();
    let used = peer.conn.recv(&bytes, &mut events);
    assert_eq!(events.len(), MAX_EVENTS_PER_RECV);
    assert!(used < bytes.len());
    events.clear();
    assert_eq!(
        peer.conn.recv(&bytes[used..], &mut events),
        bytes.len() - used
    );
    assert_eq!(events.len(), 10);
}

#[test]
fn a_stream_reset_by_a_bad_priority_frame_cannot_be_opened() {
    let mut peer = Peer::default();
    peer.feed(&priority(1, 1, 16));
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::PROTOCOL_ERROR)
    );
    // HEADERS the client sent before it saw the reset are ignored, as on
    // any stream the server reset.
    let bytes = peer.headers_frame(1, true);
    assert!(peer.feed(&bytes).is_empty());
    assert!(!peer.conn.is_stream_open(1));
    assert!(peer.take_frames().is_empty());
    assert!(peer.conn.error().is_none());
}

#[test]
fn streams_reset_while_waiting_for_a_shut_window_do_not_pile_up() {
    let mut peer = Peer::default();
    // Use up the connection window; the peer never opens it again.
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], false);
    assert_eq!(peer.conn.send_data(1, &vec![0; 65_535], true), 65_535);
    peer.take_frames();
    for i in 0..2000u32 {
        // An answer that waits for the window, reset by the peer...
        let held = 3 + 4 * i;
        let bytes = peer.headers_frame(held, true);
        peer.feed(&bytes);
        peer.conn
            .send_headers(held, &[Field::indexed(b":status", b"200")], false);
        peer.conn.send_data(held, b"waits", true);
        peer.feed(&cancel(held));
        // ...and a trailers-only answer, which renews the flood budget.
        let answered = held + 2;
        let bytes = peer.headers_frame(answered, true);
        peer.feed(&bytes);
        peer.conn
            .send_headers(answered, &[Field::indexed(b":status", b"200")], true);
        peer.take_frames();
    }
    assert!(peer.conn.error().is_none());
    assert!(peer.conn.blocked_len() <= 16, "{}", peer.conn.blocked_len());
    assert_eq!(peer.conn.held_bytes(), 0);
}

/// Opens stream `id` for a response: request headers in, response
/// headers out.
fn open_response(peer: &mut Peer, id: u32, end_stream: bool) {
    let bytes = peer.headers_frame(id, end_stream);
    peer.feed(&bytes);
    peer.conn
        .send_headers(id, &[Field::indexed(b":status", b"200")], false);
    peer.take_frames();
}

/// The DATA frames among `frames`: stream and payload length.
fn data_sent(frames: &[Frame]) -> Vec<(u32, usize)> {
    frames
        .iter()
        .filter(|f| f.kind == kind::DATA)
        .map(|f| (f.stream, f.payload.len()))
        .collect()
}

fn window_updates(frames: &[Frame], stream: u32) -> Vec<u32> {
    frames
        .iter()
        .filter(|f| f.kind == kind::WINDOW_UPDATE && f.stream == stream)
        .filter_map(Frame::increment)
        .collect()
}

#[test]
fn stream_window_opens_only_for_released_bytes() {
    let mut peer = Peer::new(Config {
        initial_stream_window: 1000,
        ..Config::default()
    });
    // The window below the default holds once the client has seen it.
    peer.feed(&Frame::settings_ack().to_bytes());
    let mut bytes = peer.headers_frame(1, false);
    bytes.extend(data(1, &[7; 600], false));
    peer.feed(&bytes);
    assert!(
        window_updates(&peer.take_frames(), 1).is_empty(),
        "nothing released, nothing opened"
    );
    // 400 more fill the window; a byte beyond it is a stream error.
    peer.feed(&data(1, &[7; 400], false));
    peer.take_frames();
    peer.conn.release_capacity(1, 300);
    assert!(
        window_updates(&peer.take_frames(), 1).is_empty(),
        "below half the window: not yet"
    );
    peer.conn.release_capacity(1, 300);
    assert_eq!(window_updates(&peer.take_frames(), 1), vec![600]);
    peer.feed(&data(1, &[7; 600], false));
    assert!(peer
        .take_frames()
        .iter()
        .all(|f| f.kind != kind::RST_STREAM));
    peer.feed(&data(1, &[7; 1], false));
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::FLOW_CONTROL_ERROR)
    );
}

#[test]
fn padding_is_released_at_once() {
    let mut peer = Peer::new(Config {
        initial_stream_window: 1000,
        ..Config::default()
    });
    peer.feed(&Frame::settings_ack().to_bytes());
    let padded = Frame::data(1, &[1; 100], false).padded(200).to_bytes();
    let mut bytes = peer.headers_frame(1, false);
    for _ in 0..3 {
        bytes.extend(&padded);
    }
    peer.feed(&bytes);
    // 903 bytes taken from the window, 300 of them data still held: the
    // client may send 97, so the window opens by the padding, 603.
    assert_eq!(window_updates(&peer.take_frames(), 1), vec![603]);
}

/// A send buffer without a limit (`usize::MAX`): the capacity of a stream
/// whose windows are open is as large as a `usize` goes, not an overflow.
#[test]
fn the_largest_send_buffer_gives_the_largest_capacity() {
    let mut peer = Peer::new(Config {
        stream_send_buffer: usize::MAX,
        ..Config::default()
    });
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 10)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    assert_eq!(peer.conn.send_capacity(1), usize::MAX);
    assert_eq!(peer.conn.send_data(1, &[1; 60], false), 60);
    assert_eq!(peer.conn.buffered(1), 50);
    assert_eq!(peer.conn.send_capacity(1), usize::MAX - 50);
}

#[test]
fn send_buffer_is_capped_and_writable_follows_the_window() {
    let mut peer = Peer::new(Config {
        stream_send_buffer: 100,
        ..Config::default()
    });
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 10)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    assert_eq!(peer.conn.send_capacity(1), 10 + 100);
    assert_eq!(peer.conn.send_data(1, &[1; 60], false), 60);
    assert_eq!(peer.conn.buffered(1), 50);
    assert_eq!(peer.conn.send_capacity(1), 50);
    // Below the cap: a write is taken whole, even past the cap.
    assert_eq!(peer.conn.send_data(1, &[2; 80], false), 80);
    assert_eq!(peer.conn.buffered(1), 130);
    assert_eq!(peer.conn.send_capacity(1), 0);
    assert_eq!(peer.conn.send_data(1, &[3; 1], false), 0, "full: refused");
    let sent: usize = peer
        .take_frames()
        .iter()
        .filter(|f| f.kind == kind::DATA)
        .map(|f| f.payload.len())
        .sum();
    assert_eq!(sent, 10);
    let events = peer.feed(&window_update(1, 40));
    assert_eq!(events, vec![Event::Writable { stream: 1 }]);
    assert_eq!(peer.conn.buffered(1), 90);
    assert_eq!(peer.conn.send_capacity(1), 10);
    // A stream whose END_STREAM waits reports no Writable.
    assert_eq!(peer.conn.send_data(1, &[4; 5], true), 5);
    assert_eq!(peer.conn.send_capacity(1), 0);
    let events = peer.feed(&window_update(1, 40));
    assert!(events.is_empty(), "{events:?}");
    peer.feed(&window_update(1, 1000));
    let frames = peer.take_frames();
    let last_data = frames.iter().rfind(|f| f.kind == kind::DATA).unwrap();
    assert!(last_data.has(flag::END_STREAM));
    assert_eq!(
        rst_reason(&frames, 1),
        Some(Reason::NO_ERROR),
        "the client was still sending"
    );
    assert!(!peer.conn.is_stream_open(1));
}

#[test]
fn a_sender_waits_for_the_connection_window_without_holding_bytes() {
    let mut peer = Peer::new(Config::default());
    open_response(&mut peer, 1, false);
    open_response(&mut peer, 3, false);
    // Stream 1 uses up the connection's window (65,535 bytes).
    assert_eq!(peer.conn.send_data(1, &[1; 65_535], false), 65_535);
    assert_eq!(peer.conn.buffered(1), 0);
    assert_eq!(peer.conn.send_window(3), 0);
    peer.take_frames();
    peer.conn.await_room(3);
    assert_eq!(peer.conn.buffered(3), 0);
    assert_eq!(peer.conn.held_bytes(), 0);
    assert_eq!(peer.conn.send_window(3), 0, "waiting");
    assert!(peer.take_frames().is_empty(), "nothing is sent for a wait");
    // A stream WINDOW_UPDATE is not enough: the connection's window is shut.
    let events = peer.feed(&window_update(3, 100));
    assert!(events.is_empty(), "{events:?}");
    let events = peer.feed(&window_update(0, 1000));
    assert_eq!(events, vec![Event::Writable { stream: 3 }]);
    assert_eq!(peer.conn.send_window(3), 1000);
    assert!(
        data_sent(&peer.take_frames()).is_empty(),
        "still nothing sent"
    );
    // What the sender then sends goes out at once.
    assert_eq!(peer.conn.send_data(3, &[3; 400], false), 400);
    assert_eq!(data_sent(&peer.take_frames()), vec![(3, 400)]);
    assert_eq!(peer.conn.buffered(3), 0);
}

#[test]
fn a_sender_waits_for_its_stream_window_without_holding_bytes() {
    let mut peer = Peer::new(Config::default());
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 10)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    assert_eq!(peer.conn.send_data(1, &[1; 10], false), 10);
    peer.take_frames();
    // Asking again, or while the windows have room, changes nothing.
    peer.conn.await_room(1);
    peer.conn.await_room(1);
    assert_eq!(peer.conn.held_bytes(), 0);
    let events = peer.feed(&window_update(0, 1000));
    assert!(events.is_empty(), "{events:?}");
    let events = peer.feed(&window_update(1, 50));
    assert_eq!(events, vec![Event::Writable { stream: 1 }]);
    assert_eq!(peer.conn.send_window(1), 50);
    peer.conn.await_room(1);
    assert_eq!(peer.conn.send_window(1), 50, "room: no wait");
    assert_eq!(peer.conn.send_data(1, &[2; 60], false), 60);
    assert_eq!(data_sent(&peer.take_frames()), vec![(1, 50)]);
    assert_eq!(peer.conn.buffered(1), 10);
    // Bytes held after a wait go out as held bytes do.
    let events = peer.feed(&window_update(1, 100));
    assert_eq!(events, vec![Event::Writable { stream: 1 }]);
    assert_eq!(data_sent(&peer.take_frames()), vec![(1, 10)]);
}

#[test]
fn trailers_do_not_wait_behind_a_wait_for_room() {
    let mut peer = Peer::new(Config::default());
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 0)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    peer.conn.await_room(1);
    peer.conn
        .send_trailers(1, &[Field::indexed(b"grpc-status", b"0")]);
    let frames = peer.take_frames();
    let trailers = frames.iter().find(|f| f.kind == kind::HEADERS);
    assert!(
        trailers.is_some_and(|f| f.has(flag::END_STREAM)),
        "{frames:?}"
    );
    // The wait is gone with the stream: an opening window reports nothing.
    let events = peer.feed(&window_update(0, 1000));
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn an_empty_end_of_stream_does_not_wait_behind_a_wait_for_room() {
    let mut peer = Peer::new(Config::default());
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 0)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    peer.conn.await_room(1);
    // An empty DATA frame takes no window: it goes now.
    assert_eq!(peer.conn.send_data(1, &[], true), 0);
    let frames = peer.take_frames();
    let data = frames.iter().find(|f| f.kind == kind::DATA);
    assert!(
        data.is_some_and(|f| f.has(flag::END_STREAM) && f.payload.is_empty()),
        "{frames:?}"
    );
    assert_eq!(peer.conn.held_bytes(), 0);
    // The wait is gone with the stream: an opening window reports nothing.
    let events = peer.feed(&window_update(0, 1000));
    assert!(events.is_empty(), "{events:?}");
    let events = peer.feed(&window_update(1, 1000));
    assert!(events.is_empty(), "{events:?}");
    assert!(peer.take_frames().iter().all(|f| f.kind != kind::DATA));
}

#[test]
fn an_empty_data_frame_that_does_not_end_the_stream_keeps_the_wait_for_room() {
    let mut peer = Peer::new(Config::default());
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 0)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    peer.conn.await_room(1);
    // Nothing to send, and the stream goes on: its sender still waits to
    // be told of room.
    peer.conn.send_data(1, &[], false);
    peer.take_frames();
    let events = peer.feed(&window_update(1, 1000));
    assert_eq!(events, vec![Event::Writable { stream: 1 }]);
}

#[test]
fn a_long_stream_through_a_small_window_keeps_a_small_buffer() {
    let mut peer = Peer::new(Config {
        stream_send_buffer: 1000,
        ..Config::default()
    });
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 100)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    let mut received = 0;
    for round in 0..5_000u32 {
        while peer.conn.send_capacity(1) > 0 {
            assert_eq!(peer.conn.send_data(1, &[round as u8; 50], false), 50);
        }
        assert!(peer.conn.buffered(1) < 1000 + 50);
        received += peer
            .take_frames()
            .iter()
            .filter(|f| f.kind == kind::DATA)
            .map(|f| f.payload.len())
            .sum::<usize>();
        peer.feed(&window_update(1, 100));
        peer.feed(&window_update(0, 100));
    }
    assert!(received >= 5_000 * 100);
}

#[test]
fn headers_data_and_reset_in_one_batch_report_nothing() {
    let mut peer = Peer::default();
    let mut bytes = peer.headers_frame(1, false);
    bytes.extend(data(1, b"\0\0\0\0\0", true));
    bytes.extend(cancel(1));
    bytes.extend(peer.headers_frame(3, true));
    let events = peer.feed(&bytes);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(matches!(events[0], Event::Request { stream: 3, .. }));
    assert!(!peer.conn.is_stream_open(1));

    // Opened in an earlier batch: its data of this batch is taken back and
    // the reset reported.
    let bytes = peer.headers_frame(5, false);
    peer.feed(&bytes);
    let mut bytes = data(5, b"abc", false);
    bytes.extend(cancel(5));
    let events = peer.feed(&bytes);
    assert_eq!(events, vec![Event::Reset { stream: 5, tag: 0 }]);
}

#[test]
fn stream_halves_order_headers_data_and_trailers() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, true);
    peer.feed(&bytes);
    assert_eq!(
        peer.conn.send_data(1, b"early", false),
        0,
        "data before headers"
    );
    peer.conn
        .send_trailers(1, &[Field::indexed(b"grpc-status", b"0")]);
    assert!(peer.take_frames().is_empty(), "trailers before headers");
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], false);
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], false);
    assert_eq!(peer.take_frames().len(), 1, "headers are sent once");
    assert!(peer.conn.is_stream_open(1));
    peer.conn
        .send_trailers(1, &[Field::indexed(b"grpc-status", b"0")]);
    assert!(!peer.conn.is_stream_open(1));
}

/// A wait queued for the connection's window whose own window a SETTINGS
/// then shut is not told `Writable` when the connection's window opens
/// (nothing may go out on it yet); it waits aside for its own window, and
/// hears once that opens.
#[test]
fn a_wait_whose_own_window_shut_meanwhile_is_not_told_writable() {
    let mut peer = Peer::default();
    open_response(&mut peer, 1, false);
    open_response(&mut peer, 3, false);
    // Stream 1 uses up the connection's window; 3 waits for it.
    assert_eq!(peer.conn.send_data(1, &[1; 65_535], false), 65_535);
    peer.take_frames();
    peer.conn.await_room(3);
    // Its own window is shut while it waits.
    let events = peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 0)]));
    assert!(events.is_empty(), "{events:?}");
    let events = peer.feed(&window_update(0, 1000));
    assert!(events.is_empty(), "its own window is shut: {events:?}");
    assert_eq!(peer.conn.send_window(3), 0);
    let events = peer.feed(&window_update(3, 10));
    assert_eq!(events, vec![Event::Writable { stream: 3 }]);
    assert_eq!(peer.conn.send_window(3), 10);
    assert_eq!(peer.conn.held_bytes(), 0);
}

#[test]
fn fields_with_bytes_rfc_9113_forbids_are_malformed() {
    // RFC 9113 section 8.2.1: no NUL, CR or LF in a value, no leading or
    // trailing white space, no control bytes, space or colon (past the
    // first byte of a pseudo-header) in a name; such a request is
    // malformed, a stream error of type PROTOCOL_ERROR.
    let cases: [(&str, &str); 6] = [
        ("x-a", "one\r\nx-injected: two"),
        ("x-a", "nul\0byte"),
        ("x-a", " padded"),
        ("x a", "1"),
        ("x:a", "1"),
        ("x-\u{7f}", "1"),
    ];
    for (name, value) in cases {
        let mut peer = Peer::default();
        let block = peer.block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/a"),
            (name, value),
        ]);
        let events = peer.feed(&Frame::headers(1, &block, true).to_bytes());
        assert!(
            events.is_empty(),
            "{name:?}: {value:?} reached the consumer"
        );
        assert_eq!(
            rst_reason(&peer.take_frames(), 1),
            Some(Reason::PROTOCOL_ERROR),
            "{name:?}: {value:?}"
        );
    }
}

/// RFC 9113 section 6.9.3: a server whose SETTINGS lower the stream window
/// below the default must take what a client sends within the default
/// before it has seen them (gRPC clients send a request's body right after
/// the preface); the lower window holds once the client acknowledged it.
#[test]
fn a_stream_window_below_the_default_holds_once_the_client_acknowledged_it() {
    let mut peer = Peer::new(Config {
        initial_stream_window: 1000,
        ..Config::default()
    });
    // Sent before the client read the server's SETTINGS: within 65,535.
    let mut bytes = peer.headers_frame(1, false);
    bytes.extend(data(1, &[7; 10_000], false));
    peer.feed(&bytes);
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        None,
        "within the default window the client may still assume"
    );
    peer.feed(&Frame::settings_ack().to_bytes());
    // The client's window on stream 1 is now 1000 - 10,000; once the
    // 10,000 bytes are released it opens back to 1000, and no further.
    peer.conn.release_capacity(1, 10_000);
    assert_eq!(window_updates(&peer.take_frames(), 1), vec![10_000]);
    peer.feed(&data(1, &[7; 1000], false));
    assert_eq!(rst_reason(&peer.take_frames(), 1), None);
    peer.feed(&data(1, &[7; 1], false));
    assert_eq!(
        rst_reason(&peer.take_frames(), 1),
        Some(Reason::FLOW_CONTROL_ERROR)
    );
    // A stream opened after the acknowledgement has the lower window.
    let mut bytes = peer.headers_frame(3, false);
    bytes.extend(data(3, &[7; 1001], false));
    peer.feed(&bytes);
    assert_eq!(
        rst_reason(&peer.take_frames(), 3),
        Some(Reason::FLOW_CONTROL_ERROR)
    );
}

#[test]
fn data_sent_piece_by_piece_fills_the_last_frame_of_its_stream() {
    let mut peer = answering_streams_1_and_3();
    // Ten small messages of stream 1: one frame.
    for i in 0..10u8 {
        peer.conn.send_data(1, &[i; 7], false);
    }
    let frames = peer.take_frames();
    assert_eq!(data_sent(&frames), vec![(1, 70)]);
    let payload: Vec<u8> = (0..10u8).flat_map(|i| [i; 7]).collect();
    assert_eq!(frames[0].payload, payload);
    // Another stream's frame in between, or bytes written to the socket,
    // start a new frame; so does a frame that is full.
    peer.conn.send_data(1, &[1; 5], false);
    peer.conn.send_data(3, &[3; 5], false);
    peer.conn.send_data(1, &[1; 5], false);
    assert_eq!(data_sent(&peer.take_frames()), vec![(1, 5), (3, 5), (1, 5)]);
    peer.conn.send_data(3, &vec![3; 16_380], false);
    peer.conn.send_data(3, &[3; 10], false);
    assert_eq!(data_sent(&peer.take_frames()), vec![(3, 16_384), (3, 6)]);
    // END_STREAM goes on a frame of its own making.
    peer.conn.send_data(1, &[1; 5], false);
    peer.conn.send_data(1, &[1; 5], true);
    let frames = peer.take_frames();
    assert_eq!(data_sent(&frames), vec![(1, 5), (1, 5)]);
    assert!(frames[1].has(flag::END_STREAM) && !frames[0].has(flag::END_STREAM));
}

/// A peer whose requests on streams 1 and 3 have been answered with
/// headers, the frames so far taken.
fn answering_streams_1_and_3() -> Peer {
    let mut peer = Peer::default();
    let mut bytes = peer.headers_frame(1, true);
    bytes.extend(peer.headers_frame(3, true));
    peer.feed(&bytes);
    peer.take_frames();
    for id in [1, 3] {
        peer.conn
            .send_headers(id, &[Field::indexed(b":status", b"200")], false);
    }
    peer.take_frames();
    peer
}

/// RFC 9113 section 5.1: frames the client sent before it saw the server's
/// RST_STREAM are ignored, trailers as much as DATA: the other streams of
/// the connection go on. (Their block is still decoded: it may change the
/// HPACK table.)
#[test]
fn trailers_in_flight_on_a_stream_the_server_reset_are_ignored() {
    let mut peer = Peer::new(Config {
        max_concurrent_streams: 1,
        ..Config::default()
    });
    let mut bytes = peer.headers_frame(1, false);
    bytes.extend(peer.headers_frame(3, false));
    peer.feed(&bytes);
    assert_eq!(
        rst_reason(&peer.take_frames(), 3),
        Some(Reason::REFUSED_STREAM)
    );
    // Refused, and answered early while the client still sends: both
    // reset by the server.
    peer.conn
        .send_headers(1, &[Field::indexed(b":status", b"200")], true);
    assert_eq!(rst_reason(&peer.take_frames(), 1), Some(Reason::NO_ERROR));
    for stream in [3, 1] {
        let mut bytes = data(stream, b"body", false);
        let trailers = peer.block(&[("x-trailer", "on the way")]);
        bytes.extend(Frame::headers(stream, &trailers, true).to_bytes());
        let events = peer.feed(&bytes);
        assert!(events.is_empty(), "{events:?}");
        let frames = peer.take_frames();
        assert!(frames.is_empty(), "stream {stream}: {frames:?}");
    }
    // The table the trailers added to is the server's too.
    let block = peer.block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/a.B/C"),
        ("x-trailer", "on the way"),
    ]);
    let events = peer.feed(&Frame::headers(5, &block, true).to_bytes());
    assert!(
        matches!(events[..], [Event::Request { stream: 5, .. }]),
        "{events:?}"
    );
}

/// A DATA frame of padding alone carries no body: it counts against the
/// flood budget as an empty DATA frame does, padding or not.
#[test]
fn padding_only_data_floods_end_in_enhance_your_calm() {
    for pad in [0, 1, 200] {
        let mut peer = small_flood_budget();
        let mut bytes = peer.headers_frame(1, false);
        let flood = Frame::data(1, b"", false).padded(pad).to_bytes();
        bytes.extend(flood.repeat(101));
        expect_goaway(&mut peer, &bytes, Reason::ENHANCE_YOUR_CALM);
    }
}

/// The smallest windows the server may be configured with still open
/// again: a connection window of a few bytes is not replenished with
/// WINDOW_UPDATEs of 0 (a PROTOCOL_ERROR for the client), and a stream
/// window of one byte opens again once its byte is released.
#[test]
fn the_smallest_windows_open_again() {
    for size in [0, 1, 3] {
        let mut peer = Peer::new(Config {
            connection_window: size,
            ..Config::default()
        });
        peer.feed(&ping([1; 8]));
        let frames = peer.take_frames();
        assert!(
            window_updates(&frames, 0).iter().all(|&n| n > 0),
            "connection window {size}: {frames:?}"
        );
    }
    let mut peer = Peer::new(Config {
        initial_stream_window: 1,
        ..Config::default()
    });
    peer.feed(&Frame::settings_ack().to_bytes());
    let bytes = peer.headers_frame(1, false);
    peer.feed(&bytes);
    peer.take_frames();
    for byte in [b"x", b"y"] {
        assert_eq!(peer.feed(&data(1, byte, false)).len(), 1);
        assert!(window_updates(&peer.take_frames(), 1).is_empty());
        peer.conn.release_capacity(1, 1);
        assert_eq!(window_updates(&peer.take_frames(), 1), vec![1]);
    }
}

/// RFC 9113 section 6.9.3: bytes a client sent within the default window
/// before it saw the server's lower one, and that the consumer released
/// before the acknowledgement came, leave the client's window below zero
/// once it applies the lower one; the server opens it again then, or the
/// client could never send on the stream again.
#[test]
fn a_window_lowered_by_the_acknowledgement_opens_again_for_bytes_released_before_it() {
    let mut peer = Peer::new(Config {
        initial_stream_window: 16_384,
        ..Config::default()
    });
    let mut bytes = peer.headers_frame(1, false);
    for _ in 0..4 {
        bytes.extend(data(1, &[7; 16_000], false));
    }
    peer.feed(&bytes);
    peer.conn.release_capacity(1, 64_000);
    // The client's view of its window on stream 1: the default, less what
    // it sent, plus the server's updates; then the change to 16,384 once
    // it applies the SETTINGS it acknowledges.
    let mut window =
        65_535 - 64_000 + window_updates(&peer.take_frames(), 1).iter().sum::<u32>() as i64;
    window += 16_384 - 65_535;
    peer.feed(&Frame::settings_ack().to_bytes());
    window += window_updates(&peer.take_frames(), 1).iter().sum::<u32>() as i64;
    assert_eq!(window, 16_384, "everything was released");
    peer.feed(&data(1, &[7; 16_384], false));
    assert_eq!(rst_reason(&peer.take_frames(), 1), None);
    assert!(peer.conn.is_stream_open(1));
}

/// A Writable reported in a batch is taken back when the stream is reset
/// later in the same batch, as the stream's other events are: the consumer
/// hears of the reset only, not of room on a stream that is gone.
#[test]
fn a_reset_takes_back_the_writable_of_its_batch() {
    let mut peer = Peer::default();
    peer.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 10)]));
    peer.take_frames();
    open_response(&mut peer, 1, false);
    open_response(&mut peer, 3, false);
    for id in [1, 3] {
        assert_eq!(peer.conn.send_data(id, &[1; 60], false), 60);
    }
    peer.take_frames();
    let mut bytes = window_update(1, 20);
    bytes.extend(window_update(3, 20));
    bytes.extend(cancel(1));
    let events = peer.feed(&bytes);
    assert_eq!(
        events,
        vec![
            Event::Writable { stream: 3 },
            Event::Reset { stream: 1, tag: 0 }
        ]
    );
    assert_eq!(peer.conn.held_bytes(), 30);
}

/// RFC 9113 section 5.1: streams with even ids are the server's to open,
/// and it opens none, so they stay idle whatever the client opened: DATA,
/// RST_STREAM or WINDOW_UPDATE on one is a connection error, as on an odd
/// id above the client's last stream.
#[test]
fn frames_on_even_streams_are_frames_on_idle_streams() {
    let frames = [
        data(2, b"x", false),
        Frame::rst_stream(2, ErrorCode::CANCEL).to_bytes(),
        window_update(2, 10),
    ];
    for frame in frames {
        let mut peer = Peer::default();
        let bytes = peer.headers_frame(3, false);
        peer.feed(&bytes);
        expect_goaway(&mut peer, &frame, Reason::PROTOCOL_ERROR);
    }
}

/// A bad PRIORITY frame on an even stream is a stream error on a stream
/// only the server could open: the client's streams below that id stay
/// idle (RFC 9113 section 5.1.1: the first use of an id closes the idle
/// streams of the peer that would open it), and the next one opens.
#[test]
fn a_bad_priority_frame_on_an_even_stream_leaves_the_clients_lower_streams_idle() {
    let mut peer = Peer::default();
    let bytes = peer.headers_frame(1, false);
    peer.feed(&bytes);
    peer.feed(&priority(4, 4, 16));
    assert_eq!(
        rst_reason(&peer.take_frames(), 4),
        Some(Reason::PROTOCOL_ERROR)
    );
    let bytes = peer.headers_frame(3, false);
    let events = peer.feed(&bytes);
    assert!(
        matches!(events[..], [Event::Request { stream: 3, .. }]),
        "{events:?}"
    );
    assert!(peer.conn.error().is_none());
    assert!(peer.conn.is_stream_open(3));
}
