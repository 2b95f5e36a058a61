//! Tests of the gRPC connection, driven with byte vectors.

use super::*;
use crate::grpc::service::{Method, Service};
use crate::grpc::status::Code;
use crate::grpc::streaming::{RawInbound, RawServerStream};
use crate::{BidiHandler, BidiStream, Responses, ServerStream};
use pajamax_test_peer::{Client, ErrorCode, Frame};
use std::time::Duration;

thread_local! {
    static FIRST_RESPONDER: std::cell::RefCell<Option<crate::Responder>> =
        const { std::cell::RefCell::new(None) };
}

/// A handler that defers its call twice fails it with `INTERNAL` (the
/// second `defer` panics), and the first responder sees the call
/// ended: the call has one answer, and no thread waits for good.
#[test]
fn a_call_deferred_twice_ends_internal_and_its_first_responder_with_it() {
    let mut conn = connection();
    let inbox = Inbox::new(|| {});
    conn.set_inbox(inbox.clone(), 7);
    let mut client = Client::new();
    let mut input = Client::handshake(&[]);
    input.extend(client.request(
        1,
        "/test.S/Echo",
        &prost::Message::encode_to_vec(&b"2".to_vec()),
    ));
    conn.recv(&input, Instant::now());
    hear(&mut conn, &mut client);
    assert_eq!(client.heard().status(1), Some("13"));
    let first = FIRST_RESPONDER
        .with(|kept| kept.borrow_mut().take())
        .expect("kept");
    assert!(first.is_cancelled());
    // Its answer goes nowhere.
    first.respond(Ok(b"late".to_vec()));
    let mut deliveries = Vec::new();
    inbox.drain(&mut deliveries);
    for delivery in deliveries {
        conn.deliver(delivery);
    }
    hear(&mut conn, &mut client);
    assert!(client.heard().messages_on(1).is_empty());
    assert_eq!(conn.open_calls(), 0);
}

/// `test.S/Split` (server streaming: the request's bytes one by one, but
/// for a request `B`: one message of 100,000 bytes) and `test.S/Chat` (bidi on the worker: each message back; after a
/// message `bye`, the end sends `bye!` and fails with ABORTED).
struct Split;

#[derive(Default)]
struct Back {
    parting: bool,
}

impl BidiHandler<Vec<u8>, Vec<u8>> for Back {
    fn on_message(
        &mut self,
        _: &mut Context<'_>,
        message: Vec<u8>,
        responses: &mut Responses<'_, Vec<u8>>,
    ) -> Result<(), Status> {
        self.parting = message == b"bye";
        responses.send(&message);
        Ok(())
    }

    fn on_end(
        &mut self,
        _: &mut Context<'_>,
        responses: &mut Responses<'_, Vec<u8>>,
    ) -> Result<(), Status> {
        if self.parting {
            responses.send(&b"bye!".to_vec());
            return Err(Status::aborted("parted"));
        }
        Ok(())
    }
}

impl Service for Split {
    fn name(&self) -> &'static str {
        "test.S"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: [Method; 3] = [
            Method {
                name: "Split",
                kind: MethodKind::ServerStreaming,
            },
            Method {
                name: "Chat",
                kind: MethodKind::BidiStreaming,
            },
            Method::unary("Echo"),
        ];
        &METHODS
    }

    /// `Echo`: the request's bytes, then the `x-tag` metadata. A request
    /// of one letter asks for something else: `E` an error, `M` response
    /// metadata, `P` a panic, `B` an answer of 100,000 bytes, `H` one of
    /// 16,000 bytes, `L` one of 40,000 bytes, `S` an error whose message
    /// takes 100,000 bytes, `Z` a compressed answer, `X` an error after an
    /// answer was encoded, `T` trailing metadata only, `D` an answer
    /// deferred (given at once, `D!`, before encoding another), `2` two
    /// deferrals (the first responder kept in `FIRST_RESPONDER`).
    fn unary(
        &self,
        _: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut crate::Reply<'_>,
    ) -> Result<(), Status> {
        let mut bytes: Vec<u8> = crate::decode_request(request)?;
        match &bytes[..] {
            b"E" => return Err(Status::invalid_argument("asked for")),
            b"S" => return Err(Status::invalid_argument("S".repeat(100_000))),
            b"M" => {
                ctx.headers_mut().insert("x-head", "h").unwrap();
                ctx.trailers_mut().insert("x-tail", "t").unwrap();
            }
            b"P" => panic!("asked for"),
            b"B" => bytes = vec![b'B'; 100_000],
            b"H" => bytes = vec![b'H'; 16_000],
            b"L" => bytes = vec![b'L'; 40_000],
            b"Z" => ctx.compress_response(true),
            b"X" => {
                reply.encode(&bytes);
                return Err(Status::invalid_argument("after encoding"));
            }
            b"T" => {
                ctx.trailers_mut().insert("x-tail", "t").unwrap();
            }
            b"D" => ctx.defer().respond(Ok(b"D!".to_vec())),
            b"2" => {
                let first = ctx.defer();
                FIRST_RESPONDER.with(|kept| *kept.borrow_mut() = Some(first));
                let _second = ctx.defer();
            }
            _ => {}
        }
        bytes.extend(ctx.metadata().get("x-tag").unwrap_or("").as_bytes());
        reply.encode(&bytes);
        Ok(())
    }

    fn server_streaming(
        &self,
        _: usize,
        _: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let bytes: Vec<u8> = crate::decode_request(request)?;
        if bytes == b"B" {
            return Ok(ServerStream::iter([Ok(vec![b'B'; 100_000])]).into_raw());
        }
        Ok(ServerStream::iter(bytes.into_iter().map(|b| Ok(vec![b]))).into_raw())
    }

    fn bidi_streaming(&self, _: usize, _: &mut Context<'_>) -> Result<RawInbound, Status> {
        Ok(BidiStream::<Vec<u8>, Vec<u8>>::on_worker(Back::default()).into_raw())
    }
}

fn connection() -> GrpcConnection {
    let mut router = Router::new();
    router.add(Arc::new(Split));
    GrpcConnection::new(Arc::new(router), &GrpcConfig::default(), None)
}

#[test]
fn a_server_stream_gets_back_the_deadline_its_client_asked_for() {
    let arrived = Instant::now();
    let ms = Duration::from_millis;
    let capped = |asked: Option<Duration>, longest: Duration| {
        Some(arrived + asked.map_or(longest, |asked| asked.min(longest)))
    };
    // Asked for more than the cap: the client's own, from arrival.
    let own = uncapped_deadline(capped(Some(ms(10_000)), ms(300)), Some(ms(10_000)), ms(300));
    assert_eq!(own, Some(arrived + ms(10_000)));
    // Asked for less: as capped.
    let own = uncapped_deadline(capped(Some(ms(100)), ms(300)), Some(ms(100)), ms(300));
    assert_eq!(own, Some(arrived + ms(100)));
    // Asked for nothing: none.
    assert_eq!(
        uncapped_deadline(capped(None, ms(300)), None, ms(300)),
        None
    );
    // Asked for more than the clock holds: none, as without a cap.
    let huge = Some(Duration::MAX);
    assert_eq!(
        uncapped_deadline(capped(huge, ms(300)), huge, ms(300)),
        None
    );
}

/// A graceful shutdown whose PING goes unanswered (`end_draining`),
/// then a request, refused, and a connection error: the error's GOAWAY
/// names the stream the second GOAWAY named, not the refused one
/// (RFC 9113 section 6.8: the id never grows).
#[test]
fn the_goaway_of_an_error_after_a_drain_names_no_refused_stream() {
    let mut conn = connection();
    let now = Instant::now();
    conn.recv(&Client::handshake(&[]), now);
    conn.go_away();
    conn.end_draining();
    // HEADERS on stream 1 with an empty block and END_STREAM, then
    // DATA on stream 0.
    let input = [0, 0, 0, 1, 5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(conn.recv(&input, now), input.len());
    assert!(conn.is_closed());
    let mut client = Client::new();
    let received = client.receive(conn.output()).expect("frames");
    let named: Vec<u32> = received
        .iter()
        .filter_map(|r| r.frame.last_stream())
        .collect();
    assert_eq!(named, [0x7fff_ffff, 0, 0], "{received:?}");
}

/// A client that sends many calls at once and reads their answers
/// slowly is served in turn: once the answers held for its windows pass
/// the limit, the calls that come after wait with their requests (none
/// is refused), and run in order as it reads. A waiting call the client
/// resets is let go, one whose deadline passes ends DEADLINE_EXCEEDED,
/// and a stream of requests, whose messages would wait with it, is
/// refused meanwhile.
#[test]
fn calls_past_the_held_limit_wait_for_the_client_to_read() {
    let (mut conn, mut client, mut input) = held_past_two_answers();
    let big = big_answer();
    for stream in [1, 3, 5, 7, 9] {
        input.extend(client.request(stream, "/test.S/Echo", &big));
    }
    let now = Instant::now();
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    // 1 and 3 ran (200,000 bytes held); 5, 7 and 9 wait.
    assert_eq!(conn.parks, 3);
    // Each answer: 100,000 bytes in a field (4 bytes of tag and length),
    // framed (5).
    assert_eq!(conn.h2().held_bytes(), 2 * 100_009);
    assert_eq!(client.heard().blocks.len(), 2, "headers of 1 and 3 only");
    assert!(client.heard().resets.is_empty());
    // Meanwhile: 5 is reset, a call with a deadline waits, a stream of
    // requests is refused.
    let mut input = Frame::rst_stream(5, ErrorCode::CANCEL).to_bytes();
    let deadline = client.request_block("/test.S/Echo", &[("grpc-timeout", "10m")]);
    Frame::headers(11, &deadline, false).write(&mut input);
    Frame::data(11, &pajamax_test_peer::grpc::message(&big), true).write(&mut input);
    input.extend(client.request(13, "/test.S/Chat", &big));
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    assert_eq!(conn.parks, 4);
    assert_eq!(client.heard().resets, [(13, ErrorCode::REFUSED_STREAM)]);
    let later = now + Duration::from_millis(20);
    conn.handle_timeout(later);
    hear(&mut conn, &mut client);
    assert_eq!(client.heard().status(11), Some("4"));
    // The client reads 1 and 3: 7 and 9 run, in order; 5 is gone.
    let mut input = Frame::window_update(0, 1 << 24).to_bytes();
    for stream in [1, 3] {
        Frame::window_update(stream, 200_000).write(&mut input);
    }
    conn.recv(&input, later);
    hear(&mut conn, &mut client);
    assert_eq!(client.heard().status(1), Some("0"));
    assert_eq!(client.heard().status(3), Some("0"));
    let answered: Vec<u32> = client
        .heard()
        .blocks
        .iter()
        .map(|block| block.stream)
        .filter(|&stream| stream == 7 || stream == 9)
        .collect();
    assert_eq!(answered, [7, 9], "headers of 7 then 9");
    assert!(client.heard().status(5).is_none());
    let mut input = Vec::new();
    for stream in [7, 9] {
        Frame::window_update(stream, 200_000).write(&mut input);
    }
    conn.recv(&input, later);
    client.receive(conn.output()).unwrap();
    assert_eq!(client.heard().status(7), Some("0"));
    assert_eq!(client.heard().status(9), Some("0"));
    assert_eq!(conn.open_calls(), 0);
    assert_eq!(conn.buffered_request_bytes(), 0);
}

/// A call that waits for the client to read runs before the calls that
/// come after it, even those that come in the read that lets it run: a
/// client whose every read both opens its windows and sends a new call
/// would otherwise have the new calls served and the waiting one wait
/// for good.
#[test]
fn a_waiting_call_runs_before_calls_that_come_with_the_windows_it_waits_for() {
    let (mut conn, mut client, mut input) = held_past_two_answers();
    let big = big_answer();
    Frame::window_update(0, 1 << 30).write(&mut input);
    // 1 and 3 run (200,018 bytes held), 5 waits.
    for stream in [1, 3, 5] {
        input.extend(client.request(stream, "/test.S/Echo", &big));
    }
    let now = Instant::now();
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    assert_eq!(conn.parks, 1);
    // Each read lets one answer out and brings a new call.
    for (read, (opened, new)) in [(1, 7), (3, 9), (7, 11)].into_iter().enumerate() {
        let mut input = Frame::window_update(opened, 200_000).to_bytes();
        input.extend(client.request(new, "/test.S/Echo", &big));
        conn.recv(&input, now);
        hear(&mut conn, &mut client);
        let heads: Vec<u32> = client
            .heard()
            .blocks
            .iter()
            .map(|block| block.stream)
            .filter(|&stream| stream > 3)
            .collect();
        assert_eq!(heads.first(), Some(&5), "read {read}: {heads:?}");
    }
    // 11 waits; a read that resets it and lets 5 out does not run it.
    conn.take_answered();
    let mut input = Frame::rst_stream(11, ErrorCode::CANCEL).to_bytes();
    Frame::window_update(5, 200_000).write(&mut input);
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    assert_eq!(client.heard().status(5), Some("0"));
    assert!(client.heard().blocks.iter().all(|block| block.stream != 11));
    assert_eq!(conn.take_answered(), 0, "11's handler did not run");
    assert_eq!(conn.open_calls(), 0);
    assert_eq!(conn.buffered_request_bytes(), 0);
}

/// Calls that end while they wait for the client to read (their
/// deadline passes, or the client resets them) leave no trace: a client
/// that never reads and sends call after call with a short deadline
/// does not grow the list of waiting calls without end.
#[test]
fn calls_that_end_while_waiting_do_not_pile_up() {
    let (mut conn, mut client, mut input) = held_past_two_answers();
    let big = big_answer();
    for stream in [1, 3] {
        input.extend(client.request(stream, "/test.S/Echo", &big));
    }
    let mut now = Instant::now();
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    let small = prost::Message::encode_to_vec(&b"s".to_vec());
    let body = pajamax_test_peer::grpc::message(&small);
    let mut stream = 5;
    for round in 0..100 {
        let mut input = Vec::new();
        for _ in 0..10 {
            let block = client.request_block("/test.S/Echo", &[("grpc-timeout", "1m")]);
            Frame::headers(stream, &block, false).write(&mut input);
            Frame::data(stream, &body, true).write(&mut input);
            stream += 2;
        }
        // One in ten is reset instead.
        Frame::rst_stream(stream - 2, ErrorCode::CANCEL).write(&mut input);
        conn.recv(&input, now);
        now += Duration::from_millis(2);
        conn.handle_timeout(now);
        hear(&mut conn, &mut client);
        assert_eq!(conn.open_calls(), 0, "round {round}");
        assert!(
            conn.parked.len() <= 20,
            "round {round}: {}",
            conn.parked.len()
        );
    }
    // The reset ones never ran nor waited: reset in the read that
    // opened them.
    assert_eq!(conn.parks, 900);
    assert_eq!(client.heard().status(stream - 4), Some("4"));
    assert_eq!(conn.buffered_request_bytes(), 0);
}

#[test]
fn producers_held_back_by_the_clients_windows_do_not_ask_for_turns() {
    let mut router = Router::new();
    router.add(Arc::new(Split));
    let mut config = GrpcConfig::default();
    config.h2.max_held_bytes = 100;
    let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
    let mut client = Client::new();
    // The client's streams may take one byte each.
    let mut input = Client::handshake(&[(0x4, 1)]);
    let request = prost::Message::encode_to_vec(&vec![7u8; 200]);
    for stream in [1, 3, 5] {
        input.extend(client.request(stream, "/test.S/Split", &request));
    }
    let now = Instant::now();
    conn.recv(&input, now);
    conn.produce(now);
    assert!(conn.h2().held_bytes() >= 100);
    assert!(
        !conn.wants_to_produce(),
        "held back by the windows: nothing to do until they open"
    );
}

/// A producer whose windows are shut makes nothing until they open:
/// a stream holds no more than the part of a message past the window,
/// not a send buffer full of messages to be copied out later, even when
/// another stream used up the connection's window.
#[test]
fn producers_wait_for_the_windows_without_filling_their_send_buffer() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    // 10,000 messages of 8 bytes framed on each of two streams: more
    // than the windows' 65,535 bytes.
    let request = prost::Message::encode_to_vec(&vec![7u8; 10_000]);
    for stream in [1, 3] {
        input.extend(client.request(stream, "/test.S/Split", &request));
    }
    conn.recv(&input, now);
    let mut rounds = 0;
    while client.heard().status(1).is_none() || client.heard().status(3).is_none() {
        rounds += 1;
        assert!(rounds < 100, "the streams should end");
        while conn.wants_to_produce() {
            conn.produce(now);
            hear(&mut conn, &mut client);
        }
        // A wait holds less than one message per stream.
        assert!(
            conn.h2().held_bytes() < 2 * 8,
            "{} bytes held while the windows are shut",
            conn.h2().held_bytes()
        );
        let mut updates = Vec::new();
        for stream in [0, 1, 3] {
            Frame::window_update(stream, 20_000).write(&mut updates);
        }
        conn.recv(&updates, now);
        hear(&mut conn, &mut client);
    }
    let heard = client.take_heard();
    for stream in [1, 3] {
        assert_eq!(heard.status(stream), Some("0"));
        let messages = heard.messages_on(stream);
        assert_eq!(messages.len(), 10_000);
        assert!(messages.iter().all(|m| *m == [0x0a, 1, 7]));
    }
}

/// What a bidirectional handler sends in its `on_end` goes out before
/// the status it ends with, as what it sends before an error from
/// `on_message` does.
#[test]
fn messages_sent_at_the_end_go_before_the_error_it_returns() {
    let mut conn = connection();
    let mut client = Client::new();
    let mut input = Client::handshake(&[]);
    let request = prost::Message::encode_to_vec(&b"bye".to_vec());
    input.extend(client.request(1, "/test.S/Chat", &request));
    conn.recv(&input, Instant::now());
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(1), Some("10"), "ABORTED");
    let bye = prost::Message::encode_to_vec(&b"bye".to_vec());
    let parting = prost::Message::encode_to_vec(&b"bye!".to_vec());
    assert_eq!(heard.messages_on(1), vec![&bye[..], &parting[..]]);
}

/// Answers to the messages of a read go out before the status of a
/// message after them that the call cannot take (too large, or not
/// inflating): a bad message ends the call, it does not take back what
/// was answered already.
#[test]
fn answers_before_a_bad_message_go_before_its_status() {
    let good =
        |m: &[u8]| pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&m.to_vec()));
    // Past the message size limit; and compressed, but not gzip.
    let too_large = [0, 0xff, 0xff, 0xff, 0xff];
    let bad_gzip = [1, 0, 0, 0, 3, 1, 2, 3];
    for (bad, encoding, code) in [
        (&too_large[..], "identity", "8"),
        (&bad_gzip[..], "gzip", "13"),
    ] {
        let mut conn = connection();
        let mut client = Client::new();
        let mut input = Client::handshake(&[]);
        client
            .request_headers(1, "/test.S/Chat", &[("grpc-encoding", encoding)], false)
            .write(&mut input);
        let mut body = good(b"a");
        body.extend(good(b"b"));
        body.extend(bad);
        Frame::data(1, &body, false).write(&mut input);
        conn.recv(&input, Instant::now());
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(1), Some(code), "{encoding}");
        let a = prost::Message::encode_to_vec(&b"a".to_vec());
        let b = prost::Message::encode_to_vec(&b"b".to_vec());
        assert_eq!(heard.messages_on(1), vec![&a[..], &b[..]], "{encoding}");
    }
}

#[test]
fn a_connection_error_in_the_read_of_a_request_ends_its_calls_quietly() {
    for path in ["/test.S/Split", "/test.S/Chat"] {
        let mut conn = connection();
        let mut client = Client::new();
        let mut input = Client::handshake(&[]);
        let request = prost::Message::encode_to_vec(&b"abc".to_vec());
        input.extend(client.request(1, path, &request));
        // A PING of 7 bytes: a connection error in the same read.
        input.extend(pajamax_test_peer::frame_bytes(6, 0, 0, &[0; 7]));
        let now = Instant::now();
        assert_eq!(conn.recv(&input, now), input.len());
        conn.produce(now);
        assert!(conn.is_closed());
        assert_eq!(conn.open_calls(), 0);
        assert!(!conn.wants_to_produce());
        let out = conn.output().to_vec();
        let frames: Vec<_> = std::iter::successors(Frame::parse(&out), |(_, used)| {
            let rest = &out[*used..];
            Frame::parse(rest).map(|(f, n)| (f, used + n))
        })
        .map(|(f, _)| f)
        .collect();
        assert!(frames.iter().any(|f| f.header().kind == 7), "a GOAWAY");
    }
}

/// A connection whose answers may hold 150,000 bytes for the client's
/// windows before new calls wait (two answers of [`big_answer`]), its
/// client, and the client's first bytes: a handshake that gives every
/// stream a window of nothing, so that every answer waits.
fn held_past_two_answers() -> (GrpcConnection, Client, Vec<u8>) {
    let mut router = Router::new();
    router.add(Arc::new(Split));
    let mut config = GrpcConfig::default();
    config.h2.max_held_bytes = 150_000;
    let conn = GrpcConnection::new(Arc::new(router), &config, None);
    (conn, Client::new(), Client::handshake(&[(0x4, 0)]))
}

/// The request of an `Echo` answered with 100,000 bytes.
fn big_answer() -> Vec<u8> {
    prost::Message::encode_to_vec(&b"B".to_vec())
}

/// Writes out what `conn` has to send, into what `client` heard.
fn hear(conn: &mut GrpcConnection, client: &mut Client) {
    let out = conn.output().to_vec();
    conn.advance_output(out.len());
    client.receive(&out).unwrap();
}

/// The HEADERS of an `Echo` with `x-tag: !` on each of `streams`, with
/// no body yet.
fn tagged_heads(client: &mut Client, streams: &[u32], input: &mut Vec<u8>) {
    for &stream in streams {
        let block = client.request_block("/test.S/Echo", &[("x-tag", "!")]);
        Frame::headers(stream, &block, false).write(input);
    }
}

/// Each stream's whole request body: one message, the stream's number
/// as a byte.
fn own_number_bodies(streams: &[u32]) -> Vec<u8> {
    let mut input = Vec::new();
    for &stream in streams {
        let message = prost::Message::encode_to_vec(&vec![stream as u8]);
        let body = pajamax_test_peer::grpc::message(&message);
        Frame::data(stream, &body, true).write(&mut input);
    }
    input
}

#[test]
fn calls_whose_body_comes_later_wait_as_their_head() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    // The first block adds its fields to the table, the second refers to
    // them, and the ones after repeat the second: those calls wait as
    // their shared head.
    let streams = [1, 3, 5, 7, 9];
    tagged_heads(&mut client, &streams, &mut input);
    conn.recv(&input, now);
    assert_eq!(conn.open_calls(), 5);
    assert!(conn.waiting.len() >= 3, "{}", conn.waiting.len());
    assert!(conn.calls.len() <= 2);
    // A reset call is forgotten.
    let rst = Frame::rst_stream(9, pajamax_test_peer::ErrorCode::CANCEL).to_bytes();
    conn.recv(&rst, now);
    assert_eq!(conn.open_calls(), 4);
    conn.recv(&own_number_bodies(&[1, 3, 5, 7]), now);
    assert_eq!(conn.open_calls(), 0);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for stream in [1, 3, 5, 7] {
        assert_eq!(heard.status(stream), Some("0"), "stream {stream}");
        let reply: Vec<u8> = prost::Message::decode(heard.messages_on(stream)[0]).unwrap();
        assert_eq!(reply, [stream as u8, b'!'], "its own body and metadata");
    }
    assert_eq!(heard.status(9), None);
}

#[test]
fn bodies_that_follow_all_the_heads_of_a_read_each_reach_their_own_call() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    let streams = [1, 3, 5, 7, 9, 11];
    tagged_heads(&mut client, &streams, &mut input);
    // Bodies after every head, in another order for some, and stream
    // 11's in two DATA frames.
    input.extend(own_number_bodies(&[1, 3, 7, 5, 9]));
    let message = prost::Message::encode_to_vec(&vec![11u8]);
    let body = pajamax_test_peer::grpc::message(&message);
    Frame::data(11, &body[..3], false).write(&mut input);
    Frame::data(11, &body[3..], true).write(&mut input);
    conn.recv(&input, now);
    assert_eq!(conn.open_calls(), 0);
    assert_eq!(conn.waiting.len(), 0);
    // Streams 1, 3 and 7 found their body ahead; 5 and 9 came after 7's
    // where they looked, and 11's first DATA does not end it.
    assert_eq!(conn.waits, 3);
    hear(&mut conn, &mut client);
    let expected: Vec<(u32, &str)> = streams.iter().map(|&s| (s, "0")).collect();
    assert_own_replies(&client.take_heard(), &expected);
}

#[test]
fn bodies_found_ahead_that_cannot_run_at_once_still_reach_their_call() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    let body = |n: u8| pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![n]));
    let two = |n: u8| [body(n), body(n)].concat();
    let mut head = |input: &mut Vec<u8>, stream: u32, gzip: bool| {
        let extra: &[(&str, &str)] = if gzip {
            &[("x-tag", "!"), ("grpc-encoding", "gzip")]
        } else {
            &[("x-tag", "!")]
        };
        let block = client.request_block("/test.S/Echo", extra);
        Frame::headers(stream, &block, false).write(input);
    };
    // 1: a compressed message (a call in a box).
    head(&mut input, 1, true);
    let mut deflated = Vec::new();
    compression::deflate_frames(&body(1), Encoding::Gzip, &mut deflated);
    Frame::data(1, &deflated, true).write(&mut input);
    // 3: the first plain head (a call in a box), its whole body.
    head(&mut input, 3, false);
    Frame::data(3, &body(3), true).write(&mut input);
    // 5, 7, 9: repeated heads (light records): two messages; a message,
    // then an empty DATA that ends the stream; a cut message.
    head(&mut input, 5, false);
    Frame::data(5, &two(5), true).write(&mut input);
    head(&mut input, 7, false);
    Frame::data(7, &body(7), false).write(&mut input);
    Frame::data(7, &[], true).write(&mut input);
    head(&mut input, 9, false);
    Frame::data(9, &body(9)[..6], true).write(&mut input);
    // 11, 13: both heads first, then their bodies.
    head(&mut input, 11, false);
    head(&mut input, 13, false);
    Frame::data(11, &body(11), true).write(&mut input);
    Frame::data(13, &two(13), true).write(&mut input);
    conn.recv(&input, now);
    assert_eq!(conn.open_calls(), 0);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    let expected = [
        (1, "0"),
        (3, "0"),
        (5, "13"),
        (7, "0"),
        (9, "13"),
        (11, "0"),
        (13, "13"),
    ];
    assert_own_replies(&heard, &expected);
}

/// Each `(stream, grpc-status)` was heard, and each call that ended
/// OK answered with its own body: the stream's number, then `!`.
fn assert_own_replies(heard: &pajamax_test_peer::Heard, expected: &[(u32, &str)]) {
    for &(stream, status) in expected {
        assert_eq!(heard.status(stream), Some(status), "stream {stream}");
        if status == "0" {
            let reply: Vec<u8> = prost::Message::decode(heard.messages_on(stream)[0]).unwrap();
            assert_eq!(reply, [stream as u8, b'!'], "stream {stream}'s own body");
        }
    }
}

#[test]
fn answers_of_every_kind_follow_answers_written_in_place() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    conn.recv(&Client::handshake(&[]), now);
    hear(&mut conn, &mut client);
    // From the second answer on, the kept blocks hold and a plain
    // answer's message is encoded straight into the output; the other
    // kinds are taken back from there.
    let asks: [&[u8]; 14] = [
        b"a", b"b", b"c", b"E", b"d", b"M", b"e", b"P", b"f", b"B", b"g", b"h", b"L", b"i",
    ];
    for (i, ask) in asks.into_iter().enumerate() {
        let stream = 1 + 2 * i as u32;
        let message = prost::Message::encode_to_vec(&ask.to_vec());
        let in_place_before = conn.answered_in_place;
        conn.recv(&client.request(stream, "/test.S/Echo", &message), now);
        hear(&mut conn, &mut client);
        if ask == b"L" {
            // Larger than a frame, within the windows: in place, in
            // three DATA frames.
            assert_eq!(conn.answered_in_place, in_place_before + 1);
            assert_eq!(client.heard().data_frames, 3);
        }
        if ask == b"B" {
            // Held for the client's windows, then sent on.
            assert_eq!(client.heard().status(stream), None);
            let mut more = Frame::window_update(0, 1 << 20).to_bytes();
            Frame::window_update(stream, 1 << 20).write(&mut more);
            conn.recv(&more, now);
            hear(&mut conn, &mut client);
        }
        let heard = client.take_heard();
        let status = match ask {
            b"E" => "3",
            b"P" => "13",
            _ => "0",
        };
        assert_eq!(heard.status(stream), Some(status), "{ask:?}");
        let replies: Vec<Vec<u8>> = heard
            .messages_on(stream)
            .into_iter()
            .map(|m| prost::Message::decode(m).unwrap())
            .collect();
        let expected = match ask {
            b"E" | b"P" => vec![],
            b"B" => vec![vec![b'B'; 100_000]],
            b"L" => vec![vec![b'L'; 40_000]],
            _ => vec![ask.to_vec()],
        };
        assert_eq!(replies, expected, "{ask:?}");
        let field = |name: &str| heard.blocks.iter().find_map(|block| block.value(name));
        // Headers and trailers, or a trailers-only answer: nothing
        // left over from an answer taken back.
        let blocks = heard.blocks.iter().filter(|b| b.stream == stream).count();
        let trailers_only = matches!(ask, b"E" | b"P");
        assert_eq!(blocks, if trailers_only { 1 } else { 2 }, "{ask:?}");
        let metadata = ask == b"M";
        assert_eq!(field("x-head").is_some(), metadata, "{ask:?}");
        assert_eq!(field("x-tail").is_some(), metadata, "{ask:?}");
    }
    assert_eq!(conn.open_calls(), 0);
    assert_eq!(conn.h2().open_streams(), 0);
    // Of the eight plain answers, those after the first two and after
    // the first one following a change of the HPACK table went in
    // place.
    assert!(conn.answered_in_place >= 3, "{}", conn.answered_in_place);
}

/// Sends a unary `Echo` of `ask` on `stream` with the `extra` fields,
/// and returns what was heard; `in_place` says whether the answer was
/// written in place.
fn echo(
    conn: &mut GrpcConnection,
    client: &mut Client,
    stream: u32,
    ask: &[u8],
    extra: &[(&str, &str)],
) -> (pajamax_test_peer::Heard, bool) {
    let before = conn.answered_in_place;
    let message = prost::Message::encode_to_vec(&ask.to_vec());
    let mut input = client
        .request_headers(stream, "/test.S/Echo", extra, false)
        .to_bytes();
    let body = pajamax_test_peer::grpc::message(&message);
    Frame::data(stream, &body, true).write(&mut input);
    conn.recv(&input, Instant::now());
    hear(conn, client);
    (client.take_heard(), conn.answered_in_place > before)
}

/// The one reply on `stream`, decoded, with its status.
fn reply_on(heard: &pajamax_test_peer::Heard, stream: u32) -> (Option<&str>, Vec<Vec<u8>>) {
    let replies = heard
        .messages_on(stream)
        .into_iter()
        .map(|m| prost::Message::decode(m).unwrap())
        .collect();
    (heard.status(stream), replies)
}

#[test]
fn answers_begun_in_place_and_taken_back_go_the_general_way() {
    // Each kind that must be taken back comes right after a plain
    // answer that went in place: the kept blocks hold when it begins.
    let mut router = Router::new();
    router.add(Arc::new(Split));
    let deny = |_: &crate::grpc::intercept::CallInfo<'_>, ctx: &mut Context<'_>| match ctx
        .metadata()
        .get("x-deny")
    {
        Some(_) => Err(Status::permission_denied("denied")),
        None => Ok(()),
    };
    router.hooks_mut().interceptors.push(Arc::new(deny));
    let mut conn = GrpcConnection::new(Arc::new(router), &GrpcConfig::default(), None);
    let inbox = Inbox::new(|| {});
    conn.set_inbox(inbox.clone(), 7);
    let mut client = Client::new();
    conn.recv(&Client::handshake(&[]), Instant::now());
    hear(&mut conn, &mut client);
    let mut stream = 1;
    // Plain answers until one goes in place again.
    let warm = |conn: &mut GrpcConnection, client: &mut Client, stream: &mut u32| {
        for _ in 0..3 {
            *stream += 2;
            let (heard, in_place) = echo(conn, client, *stream, b"w", &[]);
            assert_eq!(reply_on(&heard, *stream), (Some("0"), vec![b"w".to_vec()]));
            if in_place {
                *stream += 2;
                return *stream;
            }
        }
        panic!("no answer in place");
    };

    // An empty message, in place.
    let s = warm(&mut conn, &mut client, &mut stream);
    let (heard, in_place) = echo(&mut conn, &mut client, s, b"", &[]);
    assert!(in_place);
    assert_eq!(reply_on(&heard, s), (Some("0"), vec![vec![]]));

    // Compression the handler asks for, the client accepting gzip.
    let s = warm(&mut conn, &mut client, &mut stream);
    let (heard, in_place) = echo(
        &mut conn,
        &mut client,
        s,
        b"Z",
        &[("grpc-accept-encoding", "gzip")],
    );
    assert!(!in_place);
    assert_eq!(heard.status(s), Some("0"));
    let encoding = heard.blocks.iter().find_map(|b| b.value("grpc-encoding"));
    assert_eq!(encoding.as_deref(), Some("gzip"), "compressed as asked");
    let message = heard.messages_on(s)[0];
    assert_eq!(&message[..2], &[0x1f, 0x8b], "a gzip member");

    // An error after an answer was encoded: trailers only.
    let s = warm(&mut conn, &mut client, &mut stream);
    let (heard, in_place) = echo(&mut conn, &mut client, s, b"X", &[]);
    assert!(!in_place);
    assert_eq!(reply_on(&heard, s), (Some("3"), vec![]));
    assert_eq!(heard.blocks.len(), 1);

    // A call an interceptor turns away.
    let s = warm(&mut conn, &mut client, &mut stream);
    let (heard, in_place) = echo(&mut conn, &mut client, s, b"a", &[("x-deny", "1")]);
    assert!(!in_place);
    assert_eq!(reply_on(&heard, s), (Some("7"), vec![]));
    assert_eq!(heard.blocks.len(), 1);

    // A deferred call: nothing until its answer comes back, and then
    // the answer given, not what the handler encoded.
    let s = warm(&mut conn, &mut client, &mut stream);
    let (heard, in_place) = echo(&mut conn, &mut client, s, b"D", &[]);
    assert!(!in_place);
    assert_eq!(heard.frames, 0, "{heard:?}");
    assert_eq!(conn.open_calls(), 1);
    let mut deliveries = Vec::new();
    inbox.drain(&mut deliveries);
    for delivery in deliveries {
        conn.deliver(delivery);
    }
    conn.settle(Instant::now());
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"D!".to_vec()]));

    // The kept headers hold but the kept trailers do not: an error with
    // a status not sent before changes the table, and an answer with
    // trailing metadata only keeps the headers again but not
    // `grpc-status: 0`.
    let s = warm(&mut conn, &mut client, &mut stream);
    assert_eq!(
        reply_on(&echo(&mut conn, &mut client, s, b"P", &[]).0, s).0,
        Some("13")
    );
    stream += 2;
    let s = stream;
    let (heard, _) = echo(&mut conn, &mut client, s, b"T", &[]);
    assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"T".to_vec()]));
    stream += 2;
    let s = stream;
    let (heard, in_place) = echo(&mut conn, &mut client, s, b"a", &[]);
    assert!(!in_place, "the trailers' memo is stale");
    assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"a".to_vec()]));
    assert_eq!(heard.blocks.len(), 2);
    let s = s + 2;
    let (heard, in_place) = echo(&mut conn, &mut client, s, b"b", &[]);
    assert!(in_place);
    assert_eq!(reply_on(&heard, s), (Some("0"), vec![b"b".to_vec()]));

    // In one read, behind a PING's answer and answers in place: answers
    // taken back leave what came before them as it was.
    let asks: [&[u8]; 6] = [b"c", b"X", b"d", b"Z", b"e", b"f"];
    let mut input = Frame::ping([9; 8]).to_bytes();
    let first = s + 2;
    for (i, ask) in asks.iter().enumerate() {
        let stream = first + 2 * i as u32;
        let message = prost::Message::encode_to_vec(&ask.to_vec());
        let extra: &[(&str, &str)] = &[("grpc-accept-encoding", "gzip")];
        Frame::headers(stream, &client.request_block("/test.S/Echo", extra), false)
            .write(&mut input);
        let body = pajamax_test_peer::grpc::message(&message);
        Frame::data(stream, &body, true).write(&mut input);
    }
    let before = conn.answered_in_place;
    conn.recv(&input, Instant::now());
    assert!(conn.answered_in_place > before);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for (i, ask) in asks.iter().enumerate() {
        let stream = first + 2 * i as u32;
        match *ask {
            b"X" => assert_eq!(reply_on(&heard, stream), (Some("3"), vec![])),
            b"Z" => assert_eq!(heard.status(stream), Some("0")),
            _ => assert_eq!(reply_on(&heard, stream), (Some("0"), vec![ask.to_vec()])),
        }
    }

    assert_eq!(conn.open_calls(), 0);
    assert_eq!(conn.h2().open_streams(), 0);
}

#[test]
fn answers_in_place_use_up_the_connection_window() {
    let mut conn = connection();
    let mut client = Client::new();
    conn.recv(&Client::handshake(&[]), Instant::now());
    hear(&mut conn, &mut client);
    // Two small answers, then answers of 16,008 bytes in one frame each,
    // every stream with a fresh window of 65,535: the fifth large one
    // finds the connection's window used up.
    let mut left = 65_535usize;
    for (stream, ask) in [(1, &b"a"[..]), (3, b"b")] {
        let (heard, _) = echo(&mut conn, &mut client, stream, ask, &[]);
        assert_eq!(heard.status(stream), Some("0"));
        left -= heard.data_bytes;
    }
    for stream in [5, 7, 9, 11] {
        let (heard, in_place) = echo(&mut conn, &mut client, stream, b"H", &[]);
        assert!(in_place);
        assert_eq!(heard.status(stream), Some("0"));
        left -= heard.data_bytes;
    }
    assert!(left < 16_000, "{left}");
    let (heard, in_place) = echo(&mut conn, &mut client, 13, b"H", &[]);
    assert!(!in_place);
    assert_eq!(heard.status(13), None, "held for the connection's window");
    assert_eq!(
        heard.data_bytes, left,
        "what the connection's window lets out"
    );
    conn.recv(&Frame::window_update(0, 1 << 20).to_bytes(), Instant::now());
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(13), Some("0"));
}

#[test]
fn calls_of_blocks_that_take_turns_wait_as_their_own_heads() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    // Two header blocks in turn (as a client calling with two tags):
    // once each is in the HPACK table, both are remembered.
    let streams: Vec<u32> = (0..12).map(|i| 1 + 2 * i).collect();
    let tag = |stream: u32| if stream % 4 == 1 { "a" } else { "b" };
    for &stream in &streams {
        Frame::headers(
            stream,
            &client.request_block("/test.S/Echo", &[("x-tag", tag(stream))]),
            false,
        )
        .write(&mut input);
    }
    conn.recv(&input, now);
    assert_eq!(conn.open_calls(), 12);
    assert!(conn.waiting.len() >= 8, "{}", conn.waiting.len());
    conn.recv(&own_number_bodies(&streams), now);
    assert_eq!(conn.open_calls(), 0);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for &stream in &streams {
        assert_eq!(heard.status(stream), Some("0"), "stream {stream}");
        let reply: Vec<u8> = prost::Message::decode(heard.messages_on(stream)[0]).unwrap();
        assert_eq!(
            reply,
            [stream as u8, tag(stream).as_bytes()[0]],
            "its own body and metadata"
        );
    }
}

#[test]
fn waiting_calls_end_at_their_deadline() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    for stream in [1, 3, 5, 7] {
        Frame::headers(
            stream,
            &client.request_block("/test.S/Split", &[("grpc-timeout", "10m")]),
            false,
        )
        .write(&mut input);
    }
    conn.recv(&input, now);
    assert!(conn.waiting.len() >= 2);
    let due = conn.poll_timeout().expect("deadlines armed");
    assert!(due <= now + Duration::from_millis(10));
    conn.handle_timeout(now + Duration::from_millis(11));
    assert_eq!(conn.open_calls(), 0);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for stream in [1, 3, 5, 7] {
        assert_eq!(
            heard.status(stream),
            Some("4"),
            "DEADLINE_EXCEEDED on {stream}"
        );
    }
}

/// Calls with a long `grpc-timeout` that end long before it (here
/// server streams, each one message) leave their deadline on the
/// timer. A client that keeps making such calls on one connection must
/// not grow the timer heap without bound while no deadline comes.
#[test]
fn ended_calls_with_distant_deadlines_do_not_pile_up_on_the_timer() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    conn.recv(&Client::handshake(&[]), now);
    hear(&mut conn, &mut client);
    let request = pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![7u8]));
    let mut stream = 1;
    for _ in 0..50 {
        let mut input = Vec::new();
        for _ in 0..100 {
            Frame::headers(
                stream,
                &client.request_block("/test.S/Split", &[("grpc-timeout", "1H")]),
                false,
            )
            .write(&mut input);
            Frame::data(stream, &request, true).write(&mut input);
            stream += 2;
        }
        assert_eq!(conn.recv(&input, now), input.len());
        conn.produce(now);
        hear(&mut conn, &mut client);
    }
    let heard = client.take_heard();
    assert_eq!(heard.status(1), Some("0"));
    assert_eq!(heard.status(stream - 2), Some("0"));
    assert_eq!(conn.open_calls(), 0);
    // 5,000 calls ended, at most 100 open at once; the hour has not
    // passed. What is kept is bounded by the calls open at once, not by
    // all the calls made.
    assert!(
        conn.timers.len() <= 4 * 100,
        "{} timer entries kept for 0 open calls",
        conn.timers.len()
    );
}

/// Paced server streams (here waiting an hour for their next message)
/// that the client resets long before their time leave that time on the
/// timer. A client that keeps opening and resetting them on one
/// connection, with no deadline anywhere, must not grow the timer heap
/// with every stream it ever opened while no time comes.
#[test]
fn reset_paced_streams_do_not_pile_up_on_the_timer() {
    let mut router = Router::new();
    router.add(Arc::new(Hold));
    let mut conn = GrpcConnection::new(Arc::new(router), &GrpcConfig::default(), None);
    let mut client = Client::new();
    let now = Instant::now();
    conn.recv(&Client::handshake(&[]), now);
    hear(&mut conn, &mut client);
    let mut stream = 1;
    for _ in 0..50 {
        let mut input = Vec::new();
        let first = stream;
        for _ in 0..100 {
            Frame::headers(stream, &client.request_block("/test.H/Hold", &[]), false)
                .write(&mut input);
            Frame::data(stream, &numbered(stream), true).write(&mut input);
            stream += 2;
        }
        assert_eq!(conn.recv(&input, now), input.len());
        conn.produce(now);
        assert_eq!(conn.open_calls(), 100, "each stream waits for its time");
        let mut resets = Vec::new();
        for reset in (first..stream).step_by(2) {
            Frame::rst_stream(reset, ErrorCode::CANCEL).write(&mut resets);
        }
        assert_eq!(conn.recv(&resets, now), resets.len());
        conn.produce(now);
        hear(&mut conn, &mut client);
        assert_eq!(conn.open_calls(), 0);
    }
    // 5,000 paced streams reset, at most 100 open at once; the hour has
    // not passed. What is kept is bounded by the streams open at once.
    assert!(
        conn.timers.len() <= 4 * 100,
        "{} timer entries kept for 0 open calls",
        conn.timers.len()
    );
    SEEN.with(|seen| seen.borrow_mut().clear());
}

/// One gRPC message flagged compressed: `payload` gzipped.
fn gzipped(payload: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(payload).unwrap();
    let payload = gz.finish().unwrap();
    let mut message = vec![1];
    message.extend((payload.len() as u32).to_be_bytes());
    message.extend(payload);
    message
}

#[test]
fn a_connection_does_not_keep_the_room_a_gzip_bomb_inflated_into() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    // Nearly the largest message once inflated: a field the request
    // type does not know, of zeros, from a few KiB on the wire.
    let mut request = vec![0x12];
    let size = (4 << 20) - 1024;
    prost::encoding::encode_varint(size as u64, &mut request);
    request.resize(request.len() + size, 0);
    let bomb = gzipped(&request);
    assert!(bomb.len() < 16 << 10, "{}", bomb.len());
    let gzip = [("grpc-encoding", "gzip")];
    let mut input = Client::handshake(&[]);
    // A unary call, and a message of a bidirectional one.
    client
        .request_headers(1, "/test.S/Echo", &gzip, false)
        .write(&mut input);
    Frame::data(1, &bomb, true).write(&mut input);
    client
        .request_headers(3, "/test.S/Chat", &gzip, false)
        .write(&mut input);
    Frame::data(3, &bomb, true).write(&mut input);
    // The worker's way in, which tidies only at its sweep: the room is
    // let go as the message is through, not a second later (a peer
    // that sent one such message on each of many connections every
    // second would have each of them hold the room all along).
    let mut events = Vec::new();
    let used = conn.recv_at(&input, Some(now), &mut events);
    assert_eq!(used, input.len());
    assert!(
        conn.inflated.capacity() <= KEPT_COMPRESSION_ROOM,
        "{} bytes kept",
        conn.inflated.capacity()
    );
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(1), Some("0"));
    assert_eq!(heard.status(3), Some("0"));
    assert_eq!(heard.messages_on(3).len(), 1, "the message went through");
    // The public way in.
    let mut input = Vec::new();
    client
        .request_headers(5, "/test.S/Echo", &gzip, false)
        .write(&mut input);
    Frame::data(5, &bomb, true).write(&mut input);
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    assert_eq!(client.take_heard().status(5), Some("0"));
    assert!(
        conn.inflated.capacity() <= KEPT_COMPRESSION_ROOM,
        "{} bytes kept",
        conn.inflated.capacity()
    );
}

/// Answers that deflate to more than the room a connection keeps, on a
/// unary call and on a bidirectional one: the room goes as soon as they
/// are sent, also on the worker's way in, which tidies only at its
/// sweep.
#[test]
fn a_connection_does_not_keep_the_room_a_large_answer_deflated_into() {
    let config = GrpcConfig {
        send_compressed: true,
        ..GrpcConfig::default()
    };
    let mut router = Router::new();
    router.add(Arc::new(Split));
    let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
    let mut client = Client::new();
    let now = Instant::now();
    let mut events = Vec::new();
    let mut handshake =
        Client::handshake(&[(pajamax_test_peer::setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
    Frame::window_update(0, 1 << 30).write(&mut handshake);
    conn.recv_at(&handshake, Some(now), &mut events);
    hear(&mut conn, &mut client);
    // Bytes that do not deflate: the answers echo them.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..(KEPT_COMPRESSION_ROOM + (8 << 10)) / 8)
        .flat_map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed.to_le_bytes()
        })
        .collect();
    let accept = [("grpc-accept-encoding", "gzip")];
    for (stream, path) in [(1, "/test.S/Echo"), (3, "/test.S/Chat")] {
        let message = prost::Message::encode_to_vec(&noise);
        let body = pajamax_test_peer::grpc::message(&message);
        let mut input = client
            .request_headers(stream, path, &accept, false)
            .to_bytes();
        let chunks = body.chunks(16 << 10).count();
        for (at, chunk) in body.chunks(16 << 10).enumerate() {
            Frame::data(stream, chunk, at + 1 == chunks).write(&mut input);
        }
        let used = conn.recv_at(&input, Some(now), &mut events);
        assert_eq!(used, input.len());
        assert!(
            conn.deflated.capacity() <= KEPT_COMPRESSION_ROOM,
            "{} bytes kept after {path}",
            conn.deflated.capacity()
        );
        // The unary answer was made apart from the output, to be
        // compressed: that room goes too.
        assert!(
            conn.reply.capacity() <= KEPT_COMPRESSION_ROOM,
            "{} bytes of reply kept after {path}",
            conn.reply.capacity()
        );
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(stream), Some("0"), "{path}");
        assert_eq!(heard.messages_on(stream).len(), 1, "{path}");
    }
}

/// `test.H/Hold` (server streaming): notes the deadline its context
/// shows, then waits without end. `test.H/Probe` (unary): notes it too.
struct Hold;

thread_local! {
    static SEEN: std::cell::RefCell<Vec<(u8, Option<Instant>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

struct Forever;

impl crate::Producer<Vec<u8>> for Forever {
    fn next(&mut self, now: Instant) -> crate::Next<Vec<u8>> {
        crate::Next::Wait(now + Duration::from_secs(3600))
    }
}

impl Service for Hold {
    fn name(&self) -> &'static str {
        "test.H"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: [Method; 2] = [
            Method {
                name: "Hold",
                kind: MethodKind::ServerStreaming,
            },
            Method::unary("Probe"),
        ];
        &METHODS
    }

    fn unary(
        &self,
        _: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut crate::Reply<'_>,
    ) -> Result<(), Status> {
        let bytes: Vec<u8> = crate::decode_request(request)?;
        SEEN.with(|seen| seen.borrow_mut().push((bytes[0], ctx.deadline())));
        reply.encode(&bytes);
        Ok(())
    }

    fn server_streaming(
        &self,
        _: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let bytes: Vec<u8> = crate::decode_request(request)?;
        SEEN.with(|seen| seen.borrow_mut().push((bytes[0], ctx.deadline())));
        Ok(ServerStream::from_producer(Forever).into_raw())
    }
}

fn capped_connection(cap: Duration) -> GrpcConnection {
    let mut router = Router::new();
    router.add(Arc::new(Hold));
    let config = GrpcConfig {
        call_timeout: Some(cap),
        ..GrpcConfig::default()
    };
    GrpcConnection::new(Arc::new(router), &config, None)
}

/// The request message of a `Hold` or `Probe` on `stream`: its number.
fn numbered(stream: u32) -> Vec<u8> {
    pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![stream as u8]))
}

/// Every way a server stream's request reaches it under `call_timeout`
/// (a new head or a repeated one, its body in the same read or a later
/// one, whole or in pieces, compressed): the handler sees the client's
/// own deadline, the stream outlives the cap and ends at that deadline.
#[test]
fn a_server_stream_runs_to_its_clients_deadline_on_every_path() {
    let cap = Duration::from_millis(100);
    let asked = Duration::from_secs(10);
    let mut conn = capped_connection(cap);
    let mut client = Client::new();
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_millis(50);
    let [first, second] = every_path_requests(&mut client, 1);
    let mut input = Client::handshake(&[]);
    input.extend(first);
    conn.recv(&input, t0);
    conn.recv(&second, t1);
    conn.produce(t1);

    let mut seen = SEEN.with(|seen| std::mem::take(&mut *seen.borrow_mut()));
    seen.sort();
    let expected = vec![
        (1, Some(t0 + asked)),
        (3, Some(t0 + asked)),
        (5, Some(t0 + asked)),
        (7, Some(t0 + asked)),
        (9, Some(t0 + asked)),
        (11, Some(t0 + asked)),
        (13, Some(t1 + asked)),
        (15, None),
        (17, Some(t1 + Duration::from_millis(80))),
        (19, Some(t1 + cap)),
    ];
    assert_eq!(seen, expected);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(19), Some("0"));

    // Past the cap: the streams go on; the one that asked for less ends.
    conn.handle_timeout(t0 + cap * 2);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(17), Some("4"));
    for stream in [1, 3, 5, 7, 9, 11, 13, 15] {
        assert_eq!(
            heard.status(stream),
            None,
            "stream {stream} ended at the cap"
        );
    }
    assert_eq!(conn.open_calls(), 8);
    // At the client's deadline they end, but the one without any.
    let due = conn.poll_timeout().expect("the clients' deadlines armed");
    assert!(due <= t0 + asked, "{:?}", due - t0);
    conn.handle_timeout(t1 + asked);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for stream in [1, 3, 5, 7, 9, 11, 13] {
        assert_eq!(heard.status(stream), Some("4"), "stream {stream}");
    }
    assert_eq!(heard.status(15), None);
    assert_eq!(conn.open_calls(), 1);
}

/// A capped connection whose answers are all held (windows of 0) past
/// `max_held_bytes` by a unary answer on stream 1: the calls after it
/// wait to run until the client reads.
fn crowded_capped_connection(cap: Duration) -> (GrpcConnection, Client, Vec<u8>) {
    let mut router = Router::new();
    router.add(Arc::new(Hold));
    let mut config = GrpcConfig {
        call_timeout: Some(cap),
        ..GrpcConfig::default()
    };
    config.h2.max_held_bytes = 1_000;
    let conn = GrpcConnection::new(Arc::new(router), &config, None);
    let mut client = Client::new();
    let mut input = Client::handshake(&[(0x4, 0)]);
    let big = pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![1u8; 2_000]));
    input.extend(client.request(1, "/test.H/Probe", &big[5..]));
    (conn, client, input)
}

/// Requests of `Hold` on every path, on streams 1 + 2k from `first`: a
/// new head and repeated ones (light records) of `grpc-timeout: 10S`, with
/// the body in the same read, a later one, or in pieces across both;
/// compressed; without a deadline of its own; with one shorter than the
/// cap (`80m`); and a unary `Probe`. Returns the two reads: the heads of
/// the first six and some bodies, then the rest (the compressed request's
/// head and those after it come in the second).
fn every_path_requests(client: &mut Client, first: u32) -> [Vec<u8>; 2] {
    let s = |k: u32| first + 2 * k;
    let timeout = [("grpc-timeout", "10S")];
    let mut one = Vec::new();
    // The first head is read anew, the others repeat it.
    for k in 0..6 {
        let block = client.request_block("/test.H/Hold", &timeout);
        Frame::headers(s(k), &block, false).write(&mut one);
    }
    for k in 0..3 {
        Frame::data(s(k), &numbered(s(k)), true).write(&mut one);
    }
    Frame::data(s(5), &numbered(s(5))[..3], false).write(&mut one);
    let mut two = Vec::new();
    Frame::data(s(3), &numbered(s(3)), true).write(&mut two);
    Frame::data(s(4), &numbered(s(4)), true).write(&mut two);
    Frame::data(s(5), &numbered(s(5))[3..], true).write(&mut two);
    let gzip = [("grpc-timeout", "10S"), ("grpc-encoding", "gzip")];
    client
        .request_headers(s(6), "/test.H/Hold", &gzip, false)
        .write(&mut two);
    let message = prost::Message::encode_to_vec(&vec![s(6) as u8]);
    Frame::data(s(6), &gzipped(&message), true).write(&mut two);
    client
        .request_headers(s(7), "/test.H/Hold", &[], false)
        .write(&mut two);
    Frame::data(s(7), &numbered(s(7)), true).write(&mut two);
    client
        .request_headers(s(8), "/test.H/Hold", &[("grpc-timeout", "80m")], false)
        .write(&mut two);
    Frame::data(s(8), &numbered(s(8)), true).write(&mut two);
    client
        .request_headers(s(9), "/test.H/Probe", &timeout, false)
        .write(&mut two);
    Frame::data(s(9), &numbered(s(9)), true).write(&mut two);
    [one, two]
}

/// Requests that wait to run on a crowded capped connection, on every
/// path ([`every_path_requests`] from stream 3), the heads of the first
/// read at `t0`, the rest at `t1`.
fn park_every_path(
    conn: &mut GrpcConnection,
    client: &mut Client,
    mut input: Vec<u8>,
    t0: Instant,
    t1: Instant,
) {
    let [first, second] = every_path_requests(client, 3);
    input.extend(first);
    conn.recv(&input, t0);
    conn.recv(&second, t1);
    hear(conn, client);
    assert_eq!(conn.parks, 10, "every call after the first waits");
    assert!(SEEN.with(|seen| seen.borrow().iter().all(|&(n, _)| n == 1)));
}

/// Server streams that wait to run, whatever path their request took,
/// outlive the cap and run to their client's own deadline once the client
/// reads; one that asked for less than the cap, and a unary call, end at
/// their deadline while they wait.
#[test]
fn server_streams_that_wait_run_to_their_clients_deadline_on_every_path() {
    let cap = Duration::from_millis(100);
    let asked = Duration::from_secs(10);
    let (mut conn, mut client, input) = crowded_capped_connection(cap);
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_millis(50);
    park_every_path(&mut conn, &mut client, input, t0, t1);
    conn.handle_timeout(t0 + cap * 2);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(19), Some("4"));
    assert_eq!(heard.status(21), Some("4"), "a unary call keeps the cap");
    for stream in [3, 5, 7, 9, 11, 13, 15, 17] {
        assert_eq!(
            heard.status(stream),
            None,
            "stream {stream} ended at the cap"
        );
    }
    // The client reads: they run, each once, with the client's deadline.
    SEEN.with(|seen| seen.borrow_mut().clear());
    let mut input = Frame::window_update(0, 1 << 20).to_bytes();
    Frame::window_update(1, 1 << 20).write(&mut input);
    conn.recv(&input, t0 + cap * 2);
    hear(&mut conn, &mut client);
    assert_eq!(client.heard().status(1), Some("0"));
    let mut seen = SEEN.with(|seen| std::mem::take(&mut *seen.borrow_mut()));
    seen.sort();
    let expected = vec![
        (3, Some(t0 + asked)),
        (5, Some(t0 + asked)),
        (7, Some(t0 + asked)),
        (9, Some(t0 + asked)),
        (11, Some(t0 + asked)),
        (13, Some(t0 + asked)),
        (15, Some(t1 + asked)),
        (17, None),
    ];
    assert_eq!(seen, expected);
    assert_eq!(conn.open_calls(), 8);
    // They end at the client's deadline, but the one without any.
    let due = conn.poll_timeout().expect("the clients' deadlines armed");
    assert!(due <= t0 + asked, "{:?}", due - t0);
    conn.handle_timeout(t1 + asked);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for stream in [3, 5, 7, 9, 11, 13, 15] {
        assert_eq!(heard.status(stream), Some("4"), "stream {stream}");
    }
    assert_eq!(heard.status(17), None);
    assert_eq!(conn.open_calls(), 1);
}

/// A server stream that waits to run while its client does not read ends
/// at the client's own deadline, not at the cap and not never: the timer
/// is armed for the deadline it has once its request is in.
#[test]
fn a_server_stream_that_waits_ends_at_its_clients_deadline() {
    let cap = Duration::from_millis(100);
    let asked = Duration::from_secs(10);
    let (mut conn, mut client, input) = crowded_capped_connection(cap);
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_millis(50);
    park_every_path(&mut conn, &mut client, input, t0, t1);
    conn.handle_timeout(t0 + cap * 2);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(19), Some("4"));
    assert_eq!(heard.status(21), Some("4"));
    assert_eq!(conn.open_calls(), 8);
    let due = conn.poll_timeout().expect("the clients' deadlines armed");
    assert!(due <= t0 + asked, "{:?}", due - t0);
    conn.handle_timeout(t0 + asked - Duration::from_millis(1));
    hear(&mut conn, &mut client);
    assert_eq!(conn.open_calls(), 8, "ended before the client's deadline");
    conn.handle_timeout(t1 + asked);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for stream in [3, 5, 7, 9, 11, 13, 15] {
        assert_eq!(heard.status(stream), Some("4"), "stream {stream}");
    }
    assert_eq!(heard.status(17), None);
    assert_eq!(conn.open_calls(), 1);
    // The one left runs once the client reads, with no deadline.
    SEEN.with(|seen| seen.borrow_mut().clear());
    let mut input = Frame::window_update(0, 1 << 20).to_bytes();
    Frame::window_update(1, 1 << 20).write(&mut input);
    conn.recv(&input, t1 + asked);
    hear(&mut conn, &mut client);
    let seen = SEEN.with(|seen| std::mem::take(&mut *seen.borrow_mut()));
    assert_eq!(seen, [(17, None)]);
}

#[test]
fn unknown_paths_are_echoed_short() {
    let router = Router::new();
    let long = format!("/{}/Method", "s".repeat(4000));
    let status = unimplemented_status(&router, long.as_bytes());
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(status.message().len() < 160, "{}", status.message().len());
    let status = unimplemented_status(&router, b"/pkg.Svc/Do");
    assert_eq!(status.message(), "unknown service pkg.Svc");
    // A path not of the form `/{service}/{method}` is named as such,
    // not as a service with an empty or odd name.
    for malformed in [
        "/",
        "/pkg.Svc",
        "/pkg.Svc/",
        "//Do",
        "pkg.Svc/Do",
        "*",
        "/a/b/c",
    ] {
        let status = unimplemented_status(&router, malformed.as_bytes());
        assert_eq!(status.code(), Code::Unimplemented);
        assert_eq!(
            status.message(),
            format!("malformed method name \"{malformed}\"")
        );
    }
    // A long path is whole or malformed as a whole, not as the part
    // of it echoed.
    let status = unimplemented_status(&router, long.as_bytes());
    assert!(
        status.message().starts_with("unknown service sss"),
        "{}",
        status.message()
    );
    assert!(status.message().len() < 160, "{}", status.message().len());
    let malformed = format!("/pkg.Svc/{}/Do", "m".repeat(200));
    let status = unimplemented_status(&router, malformed.as_bytes());
    assert!(
        status.message().starts_with("malformed method name"),
        "{}",
        status.message()
    );
    struct Long;
    impl Service for Long {
        fn name(&self) -> &'static str {
            const NAME: &str = concat!(
                "pkg.AServiceWhoseNameIsLongerThanTheEchoedPartOfAPath",
                "AServiceWhoseNameIsLongerThanTheEchoedPartOfAPath",
                "AServiceWhoseNameIsLongerThanTheEchoedPartOfAPath"
            );
            NAME
        }

        fn methods(&self) -> &'static [Method] {
            &[]
        }
    }
    let mut router = Router::new();
    router.add(Arc::new(Long));
    let path = format!("/{}/Missing", Long.name());
    let status = unimplemented_status(&router, path.as_bytes());
    assert!(
        status.message().starts_with("unknown method /pkg.AService"),
        "{}",
        status.message()
    );
}

#[test]
fn answers_decode_right_while_the_client_changes_its_header_table_size() {
    use pajamax_test_peer::setting::HEADER_TABLE_SIZE;
    let mut conn = connection();
    let mut client = Client::new();
    let mut input =
        Client::handshake(&[(pajamax_test_peer::setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
    Frame::window_update(0, 1 << 30).write(&mut input);
    conn.recv(&input, Instant::now());
    hear(&mut conn, &mut client);
    client.take_heard();
    // Table sizes the client asks for between calls; some SETTINGS carry
    // two values (the smallest must be announced, then the last).
    let sizes: [&[u32]; 12] = [
        &[0],
        &[4096],
        &[40],
        &[0, 4096],
        &[64],
        &[100],
        &[4096],
        &[30, 200],
        &[1 << 20],
        &[0],
        &[0],
        &[4096],
    ];
    let asks: [&[u8]; 9] = [b"a", b"b", b"E", b"M", b"T", b"c", b"L", b"X", b"d"];
    let mut stream = 1u32;
    for (round, size) in sizes.iter().enumerate() {
        for ask in asks {
            let (heard, _) = echo(&mut conn, &mut client, stream, ask, &[("x-tag", "!")]);
            let status = match ask {
                b"E" | b"X" => "3",
                _ => "0",
            };
            assert_eq!(heard.status(stream), Some(status), "round {round} {ask:?}");
            let blocks: Vec<_> = heard.blocks.iter().filter(|b| b.stream == stream).collect();
            let first = blocks[0];
            assert_eq!(
                first.value(":status").as_deref(),
                Some("200"),
                "round {round}"
            );
            assert_eq!(
                first.value("content-type").as_deref(),
                Some("application/grpc"),
                "round {round} {ask:?}"
            );
            if status == "0" {
                let mut expected = ask.to_vec();
                if ask.len() == 1 && ask[0] == b'L' {
                    expected = vec![b'L'; 40_000];
                }
                expected.extend_from_slice(b"!");
                assert_eq!(reply_on(&heard, stream).1, vec![expected], "round {round}");
                assert_eq!(blocks.len(), 2);
                let trailers = blocks[1];
                assert_eq!(
                    trailers.fields.len(),
                    if ask == b"M" || ask == b"T" { 2 } else { 1 },
                    "{:?}",
                    trailers.strings()
                );
            } else {
                assert_eq!(
                    first.value("grpc-message").as_deref(),
                    Some(if ask == b"E" {
                        "asked for"
                    } else {
                        "after encoding"
                    })
                );
            }
            if ask == b"M" {
                assert_eq!(first.value("x-head").as_deref(), Some("h"));
                assert_eq!(blocks[1].value("x-tail").as_deref(), Some("t"));
            }
            stream += 2;
        }
        // Server streaming too.
        let message = prost::Message::encode_to_vec(&b"xyz".to_vec());
        conn.recv(
            &client.request(stream, "/test.S/Split", &message),
            Instant::now(),
        );
        hear(&mut conn, &mut client);
        let heard = client.take_heard();
        assert_eq!(heard.status(stream), Some("0"), "round {round} split");
        assert_eq!(heard.messages_on(stream).len(), 3);
        stream += 2;
        // The client changes its table size.
        let params: Vec<(u16, u32)> = size.iter().map(|&s| (HEADER_TABLE_SIZE, s)).collect();
        for &s in size.iter() {
            client.reader().decoder_mut().set_max_table_size(s as usize);
        }
        conn.recv(&Frame::settings(&params).to_bytes(), Instant::now());
        hear(&mut conn, &mut client);
        client.take_heard();
    }
}

#[test]
fn an_answer_with_metadata_leaves_none_to_the_next_calls_error() {
    let mut conn = connection();
    let mut client = Client::new();
    conn.recv(&Client::handshake(&[]), Instant::now());
    hear(&mut conn, &mut client);
    // A unary answer with response metadata, sent whole.
    let (heard, _) = echo(&mut conn, &mut client, 1, b"M", &[]);
    assert_eq!(heard.status(1), Some("0"));
    let field = |heard: &pajamax_test_peer::Heard, name: &str| {
        heard.blocks.iter().find_map(|block| block.value(name))
    };
    assert_eq!(field(&heard, "x-head").as_deref(), Some("h"));
    // Then calls answered with a status before any handler runs: an
    // unknown method, and a deadline already passed. Neither may carry
    // the metadata of the call before.
    let message = prost::Message::encode_to_vec(&b"a".to_vec());
    conn.recv(&client.request(3, "/test.S/Nope", &message), Instant::now());
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(3), Some("12"));
    assert_eq!(field(&heard, "x-head"), None, "{:?}", heard.blocks);
    assert_eq!(field(&heard, "x-tail"), None, "{:?}", heard.blocks);
    let (heard, _) = echo(&mut conn, &mut client, 5, b"a", &[("grpc-timeout", "0n")]);
    assert_eq!(heard.status(5), Some("4"));
    assert_eq!(field(&heard, "x-head"), None, "{:?}", heard.blocks);
    assert_eq!(field(&heard, "x-tail"), None, "{:?}", heard.blocks);
}

/// A compressed answer's headers carry `grpc-encoding` besides the
/// fields of a plain one: metadata that fits beside the plain ones but
/// not beside those is not dropped while the call still succeeds.
#[test]
fn compressed_answers_count_grpc_encoding_in_the_header_list_limit() {
    const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    let config = GrpcConfig {
        send_compressed: true,
        ..GrpcConfig::default()
    };
    let mut router = Router::new();
    router.add(Arc::new(Split));
    let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
    let mut client = Client::new();
    // `:status`, `content-type` and `x-head: h` come to 141 bytes;
    // with `grpc-encoding: gzip`, 190.
    let handshake = Client::handshake(&[(MAX_HEADER_LIST_SIZE, 150)]);
    conn.recv(&handshake, Instant::now());
    hear(&mut conn, &mut client);
    let accept = [("grpc-accept-encoding", "gzip")];
    let (heard, _) = echo(&mut conn, &mut client, 1, b"M", &accept);
    let head = heard.blocks.iter().find_map(|block| block.value("x-head"));
    assert!(
        heard.status(1) != Some("0") || head.as_deref() == Some("h"),
        "a success without its metadata: {:?}",
        heard.blocks
    );
    assert_eq!(heard.status(1), Some("13"));
}

/// `test.T/Take` (client streaming): its messages go to another thread;
/// the call's `Streaming` and `Responder` wait in `TAKEN` for the test.
struct Take;

thread_local! {
    static TAKEN: std::cell::RefCell<Vec<(crate::Streaming<Vec<u8>>, crate::Responder)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Service for Take {
    fn name(&self) -> &'static str {
        "test.T"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: [Method; 1] = [Method {
            name: "Take",
            kind: MethodKind::ClientStreaming,
        }];
        &METHODS
    }

    fn client_streaming(&self, _: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        let (stream, requests, responder) = crate::ClientStream::<Vec<u8>, Vec<u8>>::channel(ctx);
        TAKEN.with(|taken| taken.borrow_mut().push((requests, responder)));
        Ok(stream.into_raw())
    }
}

/// A call whose thread reads each message as it comes, while another
/// call's unread message holds the connection's share: each message
/// refused for lack of room is let through once the thread waits for
/// it, and the call is listed once among those waiting for room, however
/// many times that happens.
#[test]
fn a_call_refused_room_again_and_again_is_listed_once_among_the_starved() {
    let mut router = Router::new();
    router.add(Arc::new(Take));
    let config = GrpcConfig {
        max_buffered_request_bytes: 100,
        ..GrpcConfig::default()
    };
    let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
    let inbox = Inbox::new(|| {});
    conn.set_inbox(inbox.clone(), 7);
    let mut client = Client::new();
    let now = Instant::now();
    let message = |len: usize| {
        pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![b'm'; len]))
    };
    let mut input = Client::handshake(&[]);
    for stream in [1, 3] {
        client
            .request_headers(stream, "/test.T/Take", &[], false)
            .write(&mut input);
    }
    // The hoarder's message, never read, holds most of the share.
    Frame::data(1, &message(80), false).write(&mut input);
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    let mut taken = TAKEN.with(|taken| std::mem::take(&mut *taken.borrow_mut()));
    assert_eq!(taken.len(), 2);
    let (mut requests, _responder) = taken.pop().unwrap();
    let (read_tx, read) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for message in requests.by_ref() {
            read_tx.send(message.unwrap().len()).unwrap();
        }
    });
    let deliver = |conn: &mut GrpcConnection| {
        let mut deliveries = Vec::new();
        inbox.drain(&mut deliveries);
        for delivery in deliveries {
            conn.deliver(delivery);
        }
        conn.settle(Instant::now());
    };
    for _ in 0..50 {
        // Two in one read: the second is refused, the thread not
        // waiting for it (the first waits to be taken, or was refused).
        let mut input = Vec::new();
        Frame::data(3, &message(1), false).write(&mut input);
        Frame::data(3, &message(1), false).write(&mut input);
        conn.recv(&input, Instant::now());
        for _ in 0..2 {
            let give_up = Instant::now() + Duration::from_secs(10);
            loop {
                deliver(&mut conn);
                match read.recv_timeout(Duration::from_millis(1)) {
                    Ok(len) => break assert_eq!(len, 1),
                    Err(_) => assert!(Instant::now() < give_up, "a message never came"),
                }
            }
        }
        hear(&mut conn, &mut client);
    }
    assert!(conn.starved.len() <= 1, "{} listed", conn.starved.len());
    // The client is done: the thread reads to the end.
    let mut input = Vec::new();
    Frame::data(3, &[], true).write(&mut input);
    conn.recv(&input, Instant::now());
    reader.join().unwrap();
    drop(taken);
}

/// Client streams whose threads each wait for their next message, while
/// their clients each send part of a message and never the rest: past
/// `max_buffered_request_bytes`, what the connection holds for them stays
/// within twice the limit, not one message for every stream it may open;
/// the calls past it end RESOURCE_EXHAUSTED.
#[test]
fn parts_of_messages_threads_wait_for_are_bounded_per_connection() {
    const LIMIT: usize = 1000;
    let mut router = Router::new();
    router.add(Arc::new(Take));
    let config = GrpcConfig {
        max_buffered_request_bytes: LIMIT,
        ..GrpcConfig::default()
    };
    let mut conn = GrpcConnection::new(Arc::new(router), &config, None);
    let inbox = Inbox::new(|| {});
    conn.set_inbox(inbox.clone(), 7);
    let mut client = Client::new();
    let streams: Vec<u32> = (0..10).map(|i| 1 + 2 * i).collect();
    let mut input = Client::handshake(&[]);
    for &stream in &streams {
        client
            .request_headers(stream, "/test.T/Take", &[], false)
            .write(&mut input);
    }
    conn.recv(&input, Instant::now());
    hear(&mut conn, &mut client);
    let taken = TAKEN.with(|taken| std::mem::take(&mut *taken.borrow_mut()));
    assert_eq!(taken.len(), streams.len());
    let mut responders = Vec::new();
    let mut readers = Vec::new();
    for (mut requests, responder) in taken {
        responders.push(responder);
        readers.push(std::thread::spawn(move || {
            while let Some(Ok(_)) = requests.next() {}
        }));
    }
    let waits = |conn: &GrpcConnection, stream: u32| {
        matches!(&conn.calls.get(stream).expect("open").state,
            State::Remote(remote) if remote.shared.reads_on())
    };
    let give_up = Instant::now() + Duration::from_secs(10);
    while !streams.iter().all(|&stream| waits(&conn, stream)) {
        assert!(Instant::now() < give_up, "the threads never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
    // 600 bytes of a message of 100,000 on each stream.
    let mut part = vec![0];
    part.extend(100_000u32.to_be_bytes());
    part.extend([b'm'; 595]);
    let mut input = Vec::new();
    for &stream in &streams {
        Frame::data(stream, &part, false).write(&mut input);
    }
    conn.recv(&input, Instant::now());
    hear(&mut conn, &mut client);
    assert!(
        conn.buffered_request_bytes() <= 2 * LIMIT,
        "{} bytes held for a limit of {LIMIT}",
        conn.buffered_request_bytes()
    );
    let exhausted = streams
        .iter()
        .filter(|&&stream| client.heard().status(stream) == Some("8"))
        .count();
    assert_eq!(exhausted, streams.len() - 3, "{:?}", client.heard());
    let mut resets = Vec::new();
    for &stream in &streams {
        Frame::rst_stream(stream, ErrorCode::CANCEL).write(&mut resets);
    }
    conn.recv(&resets, Instant::now());
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(conn.open_calls(), 0);
    drop(responders);
}

/// Whether what a handing-over of a call gave sees the call ended.
type Ended = Box<dyn Fn() -> bool>;

thread_local! {
    /// What the first handing-over of a call to a thread gave (a
    /// responder, a sink, a stream of requests): whether it sees the
    /// call ended, by method.
    static FIRST_HANDOVERS: std::cell::RefCell<Vec<(&'static str, Ended)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// The methods whose first sink's `on_cancel` ran.
    static WOKEN: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn keep_first(method: &'static str, cancelled: impl Fn() -> bool + 'static) {
    FIRST_HANDOVERS.with(|kept| kept.borrow_mut().push((method, Box::new(cancelled))));
}

fn keep_sink<M: prost::Message + 'static>(method: &'static str, mut sink: crate::Sink<M>) {
    sink.on_cancel(move |_| WOKEN.with(|woken| woken.borrow_mut().push(method)));
    keep_first(method, move || sink.is_cancelled());
}

/// `test.Twice`: every method hands its call to another thread twice.
struct Twice;

/// A client stream on the worker whose end defers twice.
struct EndTwice;

impl crate::ClientStreamHandler<Vec<u8>, Vec<u8>> for EndTwice {
    fn on_message(&mut self, _: &mut Context<'_>, _: Vec<u8>) -> Result<(), Status> {
        Ok(())
    }

    fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<Vec<u8>, Status> {
        let first = ctx.defer();
        keep_first("End", move || first.is_cancelled());
        let _second = ctx.defer();
        Ok(Vec::new())
    }
}

impl Service for Twice {
    fn name(&self) -> &'static str {
        "test.Twice"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: [Method; 6] = [
            Method::unary("Unary"),
            Method::unary("Intercepted"),
            Method {
                name: "Stream",
                kind: MethodKind::ServerStreaming,
            },
            Method {
                name: "End",
                kind: MethodKind::ClientStreaming,
            },
            Method {
                name: "Gather",
                kind: MethodKind::ClientStreaming,
            },
            Method {
                name: "Talk",
                kind: MethodKind::BidiStreaming,
            },
        ];
        &METHODS
    }

    fn unary(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        _: &[u8],
        _: &mut crate::Reply<'_>,
    ) -> Result<(), Status> {
        if method == 0 {
            let first = ctx.defer();
            keep_first("Unary", move || first.is_cancelled());
        }
        // `Intercepted`: the interceptor deferred first.
        let _second = ctx.defer();
        Ok(())
    }

    fn server_streaming(
        &self,
        _: usize,
        ctx: &mut Context<'_>,
        _: &[u8],
    ) -> Result<RawServerStream, Status> {
        let (stream, sink) = ServerStream::<Vec<u8>>::channel(ctx);
        keep_sink("Stream", sink);
        let _second = ctx.defer();
        Ok(stream.into_raw())
    }

    fn client_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        if method == 3 {
            return Ok(crate::ClientStream::on_worker(EndTwice).into_raw());
        }
        let (stream, requests, responder) = crate::ClientStream::<Vec<u8>, Vec<u8>>::channel(ctx);
        keep_first("Gather", move || {
            requests.is_cancelled() && responder.is_cancelled()
        });
        let _second = ctx.defer();
        Ok(stream.into_raw())
    }

    fn bidi_streaming(&self, _: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        let (_, requests, sink) = BidiStream::<Vec<u8>, Vec<u8>>::channel(ctx);
        keep_first("Talk", move || requests.is_cancelled());
        keep_sink("Talk", sink);
        let (stream, _, _) = BidiStream::<Vec<u8>, Vec<u8>>::channel(ctx);
        Ok(stream.into_raw())
    }
}

/// On every path a handler takes its call to another thread (a unary
/// call, after an interceptor did, a server stream, the end of a client
/// stream on the worker, a client stream or a bidirectional call opened
/// on a thread), a second time fails only that call, `INTERNAL`, and what
/// the first gave sees the call ended (a sink's `on_cancel` runs).
#[test]
fn a_call_taken_to_a_thread_twice_ends_internal_on_every_path() {
    let mut router = Router::new();
    router.add(Arc::new(Twice));
    router.hooks_mut().interceptors.push(Arc::new(
        |call: &crate::CallInfo<'_>, ctx: &mut Context<'_>| {
            if call.method == "Intercepted" {
                let first = ctx.defer();
                keep_first("Intercepted", move || first.is_cancelled());
            }
            Ok(())
        },
    ));
    let mut conn = GrpcConnection::new(Arc::new(router), &GrpcConfig::default(), None);
    let inbox = Inbox::new(|| {});
    conn.set_inbox(inbox.clone(), 7);
    let mut client = Client::new();
    let mut input = Client::handshake(&[]);
    let message = prost::Message::encode_to_vec(&b"x".to_vec());
    let methods = ["Unary", "Intercepted", "Stream", "End", "Gather", "Talk"];
    for (at, method) in methods.iter().enumerate() {
        let stream = 1 + 2 * at as u32;
        input.extend(client.request(stream, &format!("/test.Twice/{method}"), &message));
    }
    // A call after them is served.
    input.extend(client.request(
        13,
        "/test.Twice/Talk",
        &prost::Message::encode_to_vec(&b"y".to_vec()),
    ));
    conn.recv(&input, Instant::now());
    let mut deliveries = Vec::new();
    inbox.drain(&mut deliveries);
    for delivery in deliveries {
        conn.deliver(delivery);
    }
    hear(&mut conn, &mut client);
    for (at, method) in methods.iter().enumerate() {
        let stream = 1 + 2 * at as u32;
        assert_eq!(client.heard().status(stream), Some("13"), "{method}");
    }
    assert_eq!(client.heard().status(13), Some("13"));
    assert_eq!(conn.open_calls(), 0);
    let firsts = FIRST_HANDOVERS.with(|kept| std::mem::take(&mut *kept.borrow_mut()));
    let named: Vec<_> = firsts.iter().map(|(method, _)| *method).collect();
    assert_eq!(
        named,
        [
            "Unary",
            "Intercepted",
            "Stream",
            "End",
            "Gather",
            "Talk",
            "Talk",
            "Talk",
            "Talk"
        ]
    );
    for (method, cancelled) in &firsts {
        assert!(cancelled(), "{method}: the first goes on");
    }
    let woken = WOKEN.with(|woken| std::mem::take(&mut *woken.borrow_mut()));
    assert_eq!(woken, ["Stream", "Talk", "Talk"]);
}

/// A bidi handler on the worker whose answers fill its stream's send
/// buffer waits until that buffer has room again, not merely until the
/// client's windows let some of it out: a WINDOW_UPDATE too small to bring
/// the held bytes under the buffer's size leaves it blocked, and every
/// answer it made reaches the client, in order, once the windows open.
#[test]
fn a_bidi_handler_resumes_only_once_its_send_buffer_has_room() {
    let mut conn = connection();
    let mut client = Client::new();
    // The client's windows are shut: every answer is held.
    let mut input = Client::handshake(&[(0x4, 0)]);
    let block = client.request_block("/test.S/Chat", &[]);
    Frame::headers(1, &block, false).write(&mut input);
    let count = 20;
    for i in 0..count {
        let message = prost::Message::encode_to_vec(&vec![i as u8; 10_000]);
        let body = pajamax_test_peer::grpc::message(&message);
        Frame::data(1, &body, false).write(&mut input);
    }
    let now = Instant::now();
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    let held = conn.h2().buffered(1);
    assert!(held >= 64 << 10, "the send buffer is full: {held}");
    assert!(held < count * 10_000, "not every message ran yet: {held}");
    // A little room in the windows: some held bytes go, not enough to
    // bring the buffer under its size.
    let mut input = Frame::window_update(1, 1000).to_bytes();
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    // The client reads all: every answer arrives, in order.
    input = Frame::window_update(0, 1 << 24).to_bytes();
    Frame::window_update(1, 1 << 24).write(&mut input);
    conn.recv(&input, now);
    hear(&mut conn, &mut client);
    let answers = client.heard().messages_on(1).len();
    assert_eq!(answers, count, "{} bytes", client.heard().data_bytes);
    for (i, message) in client.heard().messages_on(1).iter().enumerate() {
        let bytes: Vec<u8> = prost::Message::decode(*message).unwrap();
        assert_eq!(bytes, vec![i as u8; 10_000], "answer {i}");
    }
}

/// Asks `path` for a 100,000-byte message, past the client's first
/// windows: once the read is through, the room `room` reads is no larger
/// than a connection keeps; then the windows open and the message comes
/// whole.
fn large_message_leaves_no_room(
    conn: &mut GrpcConnection,
    path: &str,
    room: impl Fn(&GrpcConnection) -> usize,
    name: &str,
) {
    let mut client = Client::new();
    let now = Instant::now();
    let mut events = Vec::new();
    let mut input = Client::handshake(&[]);
    input.extend(client.request(1, path, &big_answer()));
    let used = conn.recv_at(&input, Some(now), &mut events);
    assert_eq!(used, input.len());
    assert!(
        room(conn) <= KEPT_COMPRESSION_ROOM,
        "{name}: {} bytes kept",
        room(conn)
    );
    hear(conn, &mut client);
    let mut open = Frame::window_update(0, 1 << 20).to_bytes();
    Frame::window_update(1, 1 << 20).write(&mut open);
    conn.recv(&open, now);
    hear(conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(1), Some("0"), "{name}");
    let message: Vec<u8> = prost::Message::decode(heard.messages_on(1)[0]).unwrap();
    assert_eq!(message, vec![b'B'; 100_000], "{name}");
}

/// A unary answer larger than the room a connection keeps, made apart
/// from the output (past the client's windows, so taken back from its
/// place there, or for observers): the room goes as soon as it is sent,
/// also on the worker's way in, which tidies only at its sweep.
#[test]
fn a_connection_does_not_keep_the_room_of_a_large_unary_answer() {
    let observed = |router: &mut Router| {
        router
            .hooks_mut()
            .observers
            .push(Arc::new(|_: &crate::FinishedCall<'_>| {}));
    };
    let quiet = |_: &mut Router| {};
    for (name, hooks) in [
        ("taken back", &quiet as &dyn Fn(&mut Router)),
        ("observed", &observed),
    ] {
        let mut router = Router::new();
        router.add(Arc::new(Split));
        hooks(&mut router);
        let mut conn = GrpcConnection::new(Arc::new(router), &GrpcConfig::default(), None);
        large_message_leaves_no_room(&mut conn, "/test.S/Echo", |c| c.reply.capacity(), name);
    }
}

/// A server stream's message larger than the room a connection keeps,
/// made apart from the output (its first turn, before its headers went):
/// the room goes once the producers' turns are done, also on the worker's
/// way in, which tidies only at its sweep.
#[test]
fn a_connection_does_not_keep_the_room_of_a_large_streamed_message() {
    let mut conn = connection();
    let scratch = |c: &GrpcConnection| c.scratch.capacity();
    large_message_leaves_no_room(&mut conn, "/test.S/Split", scratch, "streamed");
}

/// Calls whose request came in more than one frame gather it in their own
/// buffer, which stays with the call's box when the box is kept for the
/// next calls (up to 64 of them, each with up to 64 KiB): the sweep's trim
/// gives that room back past what a few such calls need.
#[test]
fn the_sweep_gives_back_the_room_of_the_calls_kept_for_the_next_ones() {
    const CALLS: u32 = 64;
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    let message =
        pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![b'r'; 60_000]));
    // Room for every answer.
    Frame::window_update(0, 1 << 30).write(&mut input);
    let streams: Vec<u32> = (0..CALLS).map(|i| 2 * i + 1).collect();
    // Every call open at once, its request in frames of 16,000 bytes.
    for &stream in &streams {
        let block = client.request_block("/test.S/Echo", &[("x-tag", "!")]);
        Frame::headers(stream, &block, false).write(&mut input);
    }
    let parts: Vec<&[u8]> = message.chunks(16_000).collect();
    for (at, part) in parts.iter().enumerate() {
        for &stream in &streams {
            Frame::data(stream, part, at + 1 == parts.len()).write(&mut input);
        }
    }
    let mut used = 0;
    while used < input.len() {
        used += conn.recv(&input[used..], now);
        hear(&mut conn, &mut client);
    }
    let heard = client.take_heard();
    for &stream in &streams {
        assert_eq!(heard.status(stream), Some("0"), "stream {stream}");
    }
    assert!(conn.is_idle());
    assert!(conn.spare_room() > 3 << 20, "{} bytes", conn.spare_room());
    conn.trim_tables();
    assert!(
        conn.spare_room() <= KEPT_SPARE_ROOM,
        "{} bytes kept by the spare calls",
        conn.spare_room()
    );
}

/// A bidirectional handler on the worker that answers one large message
/// makes it in the connection's list of answer parts: the room past what
/// the connection keeps goes once the answers are sent, also on the
/// worker's way in, which tidies only at its sweep.
#[test]
fn a_connection_does_not_keep_the_room_of_a_large_bidirectional_answer() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    Frame::window_update(0, 1 << 30).write(&mut input);
    let message =
        pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&vec![b'c'; 200_000]));
    let block = client.request_block("/test.S/Chat", &[]);
    Frame::headers(1, &block, false).write(&mut input);
    let parts: Vec<&[u8]> = message.chunks(16_000).collect();
    for (at, part) in parts.iter().enumerate() {
        Frame::data(1, part, at + 1 == parts.len()).write(&mut input);
    }
    let mut used = 0;
    while used < input.len() {
        used += conn.recv(&input[used..], now);
    }
    assert!(
        conn.outgoing.messages.capacity() <= KEPT_COMPRESSION_ROOM,
        "{} bytes kept",
        conn.outgoing.messages.capacity()
    );
    hear(&mut conn, &mut client);
    let mut open = Frame::window_update(1, 1 << 20).to_bytes();
    Frame::window_update(0, 1 << 20).write(&mut open);
    conn.recv(&open, now);
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(1), Some("0"));
    let answer: Vec<u8> = prost::Message::decode(heard.messages_on(1)[0]).unwrap();
    assert_eq!(answer, vec![b'c'; 200_000]);
}

/// A status message is percent-encoded into room the connection keeps; one
/// large message (a handler's) leaves that room as large until the
/// worker's sweep, which gives it back.
#[test]
fn the_sweep_gives_back_the_room_of_a_large_status_message() {
    let mut conn = connection();
    let mut client = Client::new();
    let mut input = Client::handshake(&[]);
    input.extend(client.request(
        1,
        "/test.S/Echo",
        &prost::Message::encode_to_vec(&b"S".to_vec()),
    ));
    conn.recv(&input, Instant::now());
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    assert_eq!(heard.status(1), Some("3"));
    assert!(conn.text.capacity() >= 100_000);
    conn.trim_tables();
    assert!(
        conn.text.capacity() <= KEPT_TEXT,
        "{} bytes kept",
        conn.text.capacity()
    );
}

/// Large header blocks (many in one read, one continued in CONTINUATION
/// frames) grow the rooms the codec decodes them in, which keep up to
/// 64 KiB each between reads: the worker's sweep gives them back.
#[test]
fn the_sweep_gives_back_the_room_of_large_header_blocks() {
    let mut conn = connection();
    let mut client = Client::new();
    let now = Instant::now();
    let mut input = Client::handshake(&[]);
    let big = "b".repeat(15_000);
    let message = pajamax_test_peer::grpc::message(&prost::Message::encode_to_vec(&b"e".to_vec()));
    for stream in (0..8).map(|i| 2 * i + 1) {
        let block = client.request_block("/test.S/Echo", &[("x-big", &big)]);
        Frame::headers(stream, &block, false).write(&mut input);
        Frame::data(stream, &message, true).write(&mut input);
    }
    // A block of 60,000 bytes in four frames: its call is refused, past
    // the header list size limit.
    let mut fields: Vec<(String, String)> = pajamax_test_peer::grpc::request_fields("/test.S/Echo")
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    fields.extend((0..4).map(|i| (format!("x-big-{i}"), "c".repeat(15_000))));
    let block = client
        .encoder()
        .block(&fields, pajamax_test_peer::hpack::Indexing::None);
    let parts: Vec<&[u8]> = block.chunks(16_000).collect();
    Frame::headers(17, parts[0], false)
        .without_flags(pajamax_test_peer::frame::flag::END_HEADERS)
        .write(&mut input);
    for (at, part) in parts.iter().enumerate().skip(1) {
        Frame::continuation(17, part, at + 1 == parts.len()).write(&mut input);
    }
    Frame::data(17, &message, true).write(&mut input);
    let mut used = 0;
    while used < input.len() {
        used += conn.recv(&input[used..], now);
    }
    hear(&mut conn, &mut client);
    let heard = client.take_heard();
    for stream in (0..9).map(|i| 2 * i + 1) {
        assert!(heard.status(stream).is_some(), "stream {stream}");
    }
    // A read after them, as the worker's next.
    conn.recv(&Frame::ping(*b"12345678").to_bytes(), now);
    assert!(
        conn.h2.header_room() > 128 << 10,
        "{} bytes",
        conn.h2.header_room()
    );
    conn.trim_tables();
    assert!(
        conn.h2.header_room() <= 16 << 10,
        "{} bytes kept",
        conn.h2.header_room()
    );
}
