//! Message compression: tonic's client sending and accepting gzip or
//! deflate on every kind of call, which compression answers take, and the
//! raw requests no real client sends (gzip and deflate bombs, an unknown
//! encoding, a compressed flag without an encoding).

mod common;

use common::streams::{self, bidi, client_stream, collect, server_stream, Ask, Item};
use flate2::read::{GzDecoder, ZlibDecoder};
use flate2::write::{GzEncoder, ZlibEncoder};
use pajamax::{
    BidiHandler, BidiStream, Context, Method, MethodKind, Next, Producer, RawInbound,
    RawServerStream, Reply, Responses, ServerStream, Service, Status,
};
use pajamax_test_peer::{Frame, TcpClient};
use prost::Message;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::codec::CompressionEncoding;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

/// `test.Zip`: answers what it saw of the request's compression.
struct Zip;

/// What `test.Zip/Look` saw.
#[derive(Clone, PartialEq, prost::Message)]
struct Look {
    #[prost(bool, tag = "1")]
    request_compressed: bool,
    #[prost(bytes = "vec", tag = "2")]
    blob: Vec<u8>,
}

impl Service for Zip {
    fn name(&self) -> &'static str {
        "test.Zip"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: &[Method] = &[
            Method {
                name: "Look",
                kind: MethodKind::Unary,
            },
            Method {
                name: "Plain",
                kind: MethodKind::Unary,
            },
            Method {
                name: "Mixed",
                kind: MethodKind::ServerStreaming,
            },
            Method {
                name: "MixedThread",
                kind: MethodKind::ServerStreaming,
            },
            Method {
                name: "MixedEcho",
                kind: MethodKind::BidiStreaming,
            },
            Method {
                name: "LookLater",
                kind: MethodKind::Unary,
            },
        ];
        METHODS
    }

    fn server_streaming(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let look: Look = pajamax::decode_request(request)?;
        if method == 2 {
            return Ok(ServerStream::from_producer(Mixed(look.blob, 0)).into_raw());
        }
        let (stream, mut sink) = ServerStream::<Look>::channel(ctx);
        std::thread::spawn(move || {
            for plain in MIXED {
                let answer = Look {
                    request_compressed: false,
                    blob: look.blob.clone(),
                };
                let sent = if plain {
                    sink.send_uncompressed(&answer)
                } else {
                    sink.send(&answer)
                };
                sent.unwrap();
            }
            sink.finish(Ok(()));
        });
        Ok(stream.into_raw())
    }

    fn bidi_streaming(&self, _method: usize, _ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        Ok(BidiStream::on_worker(MixedEcho).into_raw())
    }

    fn unary(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        let look: Look = pajamax::decode_request(request)?;
        if method == 1 {
            ctx.compress_response(false);
        }
        let answer = Look {
            request_compressed: ctx.request_compressed(),
            blob: look.blob,
        };
        if method == 5 {
            // Answered from another thread.
            let responder = ctx.defer();
            std::thread::spawn(move || responder.respond(Ok(answer)));
            return Ok(());
        }
        reply.encode(&answer);
        Ok(())
    }
}

/// Which answers of `test.Zip/Mixed` and `MixedThread` are sent
/// uncompressed.
const MIXED: [bool; 3] = [false, true, false];

/// `test.Zip/Mixed`: the request's blob three times, the second sent
/// uncompressed.
struct Mixed(Vec<u8>, usize);

impl Producer<Look> for Mixed {
    fn next(&mut self, _now: Instant) -> Next<Look> {
        let Some(&plain) = MIXED.get(self.1) else {
            return Next::End(Ok(()));
        };
        self.1 += 1;
        let answer = Look {
            request_compressed: false,
            blob: self.0.clone(),
        };
        if plain {
            Next::Uncompressed(answer)
        } else {
            Next::Message(answer)
        }
    }
}

/// `test.Zip/MixedEcho`: answers each request twice, the second time
/// uncompressed.
struct MixedEcho;

impl BidiHandler<Look, Look> for MixedEcho {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        request: Look,
        responses: &mut Responses<'_, Look>,
    ) -> Result<(), Status> {
        responses.send(&request);
        responses.send_uncompressed(&request);
        Ok(())
    }
}

fn start(send_compressed: bool) -> pajamax::ServerHandle {
    pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .send_compressed(send_compressed)
        .add_service(Zip)
        .add_service(streams::Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap()
}

async fn connect(server: &pajamax::ServerHandle) -> Channel {
    Endpoint::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The compressions tonic's client sends and accepts in these tests.
const ENCODINGS: [CompressionEncoding; 2] =
    [CompressionEncoding::Gzip, CompressionEncoding::Deflate];

/// Calls `test.Zip/{method}` with tonic's client, sending and accepting
/// `encoding` alone (tonic fails a call whose answer comes compressed
/// otherwise).
async fn look(
    channel: Channel,
    method: &str,
    blob: Vec<u8>,
    encoding: Option<CompressionEncoding>,
) -> Look {
    let mut client = tonic::client::Grpc::new(channel);
    if let Some(encoding) = encoding {
        client = client.send_compressed(encoding).accept_compressed(encoding);
    }
    client.ready().await.unwrap();
    let path = PathAndQuery::try_from(format!("/test.Zip/{method}")).unwrap();
    let codec = tonic_prost::ProstCodec::<Look, Look>::default();
    let request = Look {
        request_compressed: false,
        blob,
    };
    client
        .unary(tonic::Request::new(request), path, codec)
        .await
        .unwrap()
        .into_inner()
}

fn asks(values: &[u64], size: u32) -> Vec<Ask> {
    values
        .iter()
        .map(|&value| Ask {
            count: 1,
            size,
            value,
            ..Default::default()
        })
        .collect()
}

#[tokio::test]
async fn compressed_unary_calls_both_ways() {
    let server = start(true);
    let channel = connect(&server).await;
    let blob: Vec<u8> = b"compress me ".repeat(1000);
    for encoding in ENCODINGS {
        let seen = look(channel.clone(), "Look", blob.clone(), Some(encoding)).await;
        assert!(seen.request_compressed, "{encoding}");
        assert_eq!(seen.blob, blob);
        // The handler may turn compression off for its answer.
        let seen = look(channel.clone(), "Plain", blob.clone(), Some(encoding)).await;
        assert!(seen.request_compressed);
        assert_eq!(seen.blob, blob);
        // A request too small to compress is still flagged compressed by
        // tonic.
        let seen = look(channel.clone(), "Look", Vec::new(), Some(encoding)).await;
        assert!(seen.request_compressed);
    }
    // A client that does not ask for compression gets none, and sends none.
    let seen = look(channel, "Look", blob.clone(), None).await;
    assert!(!seen.request_compressed);
    assert_eq!(seen.blob, blob);
    common::stop(server).await;
}

/// `max_recv_message_size(usize::MAX)`, as for no limit: a compressed
/// request is inflated whole (the reader's bound of one byte past the
/// limit wrapped to nothing).
#[tokio::test]
async fn compressed_requests_are_taken_whole_without_a_message_limit() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .max_recv_message_size(usize::MAX)
        .add_service(Zip)
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    let blob: Vec<u8> = b"no limit ".repeat(1000);
    for encoding in ENCODINGS {
        let seen = look(channel.clone(), "Look", blob.clone(), Some(encoding)).await;
        assert!(seen.request_compressed);
        assert_eq!(seen.blob, blob);
    }
    common::stop(server).await;
}

/// A tonic client for `test.Streams` that sends and accepts `encoding`.
fn streams_client(channel: Channel, encoding: CompressionEncoding) -> tonic::client::Grpc<Channel> {
    tonic::client::Grpc::new(channel)
        .send_compressed(encoding)
        .accept_compressed(encoding)
}

fn path(method: &str) -> PathAndQuery {
    PathAndQuery::try_from(format!("/test.Streams/{method}")).unwrap()
}

fn codec() -> tonic_prost::ProstCodec<Ask, Item> {
    tonic_prost::ProstCodec::default()
}

#[tokio::test]
async fn compressed_streams_on_the_worker_and_on_threads() {
    let server = start(true);
    let channel = connect(&server).await;
    for encoding in ENCODINGS {
        compressed_streams(&channel, encoding).await;
    }
    // The helpers' clients, without compression, are served as before.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    for ask in asks(&[8], 10) {
        tx.send(ask).await.unwrap();
    }
    drop(tx);
    let (items, end, _) = collect(
        bidi(channel.clone(), "Echo", rx)
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    end.unwrap();
    assert_eq!(items.len(), 1);
    let sum = client_stream(channel.clone(), "Sum", asks(&[1, 1], 0))
        .await
        .unwrap();
    assert_eq!(sum.get_ref().value, 2);
    let (items, end, _) = collect(
        server_stream(
            channel,
            "Count",
            tonic::Request::new(Ask {
                count: 2,
                ..Default::default()
            }),
        )
        .await
        .unwrap()
        .into_inner(),
    )
    .await;
    end.unwrap();
    assert_eq!(items.len(), 2);
    common::stop(server).await;
}

/// Every kind of call to `test.Streams`, on the worker and on threads, with
/// tonic's client sending and accepting `encoding`.
async fn compressed_streams(channel: &Channel, encoding: CompressionEncoding) {
    for method in ["Count", "CountThread"] {
        let mut client = streams_client(channel.clone(), encoding);
        client.ready().await.unwrap();
        let ask = Ask {
            count: 20,
            size: 3000,
            ..Default::default()
        };
        let stream = client
            .server_streaming(tonic::Request::new(ask), path(method), codec())
            .await
            .unwrap()
            .into_inner();
        let (items, end, _) = collect(stream).await;
        end.unwrap();
        let values: Vec<u64> = items.iter().map(|item| item.value).collect();
        assert_eq!(values, (1..=20).collect::<Vec<_>>(), "{method} {encoding}");
        assert!(items.iter().all(|item| item.blob.len() == 3000));
    }
    for method in ["Sum", "SumThread"] {
        let mut client = streams_client(channel.clone(), encoding);
        client.ready().await.unwrap();
        let request = tonic::Request::new(tokio_stream::iter(asks(&[1, 2, 3, 4], 5000)));
        let sum = client
            .client_streaming(request, path(method), codec())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(sum.value, 10, "{method} {encoding}");
    }
    for method in ["Echo", "EchoThread"] {
        let mut client = streams_client(channel.clone(), encoding);
        client.ready().await.unwrap();
        let request = tonic::Request::new(tokio_stream::iter(asks(&[5, 6, 7], 2000)));
        let stream = client
            .streaming(request, path(method), codec())
            .await
            .unwrap()
            .into_inner();
        let (items, end, _) = collect(stream).await;
        end.unwrap();
        let values: Vec<u64> = items.iter().map(|item| item.value).collect();
        assert_eq!(values, [5, 6, 7], "{method} {encoding}");
        assert!(items.iter().all(|item| item.blob.len() == 2000));
    }
}

// ----- on the wire -----

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// `bytes` in the zlib format, as gRPC's `deflate`.
fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// `payload` inflated as `encoding` (`gzip` or `deflate`) says.
fn inflate(encoding: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut inflated = Vec::new();
    match encoding {
        b"gzip" => GzDecoder::new(payload).read_to_end(&mut inflated),
        b"deflate" => ZlibDecoder::new(payload).read_to_end(&mut inflated),
        other => panic!("{}", String::from_utf8_lossy(other)),
    }
    .unwrap();
    inflated
}

/// `payload` framed as one message flagged compressed.
fn compressed_message(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![1];
    out.extend((payload.len() as u32).to_be_bytes());
    out.extend(payload);
    out
}

/// What a raw call heard, and its answer's messages as sent: each with
/// its compressed flag byte, which [`pajamax_test_peer::Heard`] drops.
struct Wire {
    heard: pajamax_test_peer::Heard,
    /// `(compressed flag, payload)` of each message on stream 1.
    messages: Vec<(u8, Vec<u8>)>,
}

/// Sends one request to `test.Zip/{method}` with `extra` header fields and
/// `body` as its one DATA frame, and listens for its end.
fn raw_call(addr: SocketAddr, method: &str, extra: &[(&str, &str)], body: &[u8]) -> Wire {
    let mut peer = TcpClient::handshake(addr, &[]).unwrap();
    raw_call_on(&mut peer, 1, method, extra, body)
}

/// As [`raw_call`], on `stream` of the connection `peer` holds: the
/// header block of a call that repeats an earlier call's fields repeats
/// its block (the fields are in the client's dynamic table).
fn raw_call_on(
    peer: &mut TcpClient,
    stream: u32,
    method: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Wire {
    let mut bytes = peer
        .client
        .request_headers(stream, &format!("/test.Zip/{method}"), extra, false)
        .to_bytes();
    // In frames of at most the default SETTINGS_MAX_FRAME_SIZE.
    let mut chunks = body.chunks(16 << 10).peekable();
    while let Some(chunk) = chunks.next() {
        Frame::data(stream, chunk, chunks.peek().is_none()).write(&mut bytes);
    }
    peer.send(&bytes).unwrap();

    // Read here rather than with `TcpClient::listen`, to keep the DATA.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut body = Vec::new();
    let mut buf = vec![0; 64 << 10];
    while peer.client.heard().status(stream).is_none() {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
            .expect("the call ends within 5 s");
        peer.socket.set_read_timeout(Some(left)).unwrap();
        let n = peer.socket.read(&mut buf).expect("the server answers");
        assert!(n > 0, "the server closed the connection mid-call");
        for received in peer.client.receive(&buf[..n]).unwrap() {
            if received.frame.stream == stream {
                body.extend_from_slice(received.frame.data_bytes().unwrap_or_default());
            }
        }
    }
    let mut messages = Vec::new();
    let mut rest = &body[..];
    while !rest.is_empty() {
        assert!(rest.len() >= 5, "a message prefix cut short: {rest:?}");
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        assert!(rest.len() >= 5 + len, "a message cut short");
        messages.push((rest[0], rest[5..5 + len].to_vec()));
        rest = &rest[5 + len..];
    }
    Wire {
        heard: peer.client.take_heard(),
        messages,
    }
}

/// A request to `test.Zip` of `size` bytes of one letter, gzipped and
/// framed as one message flagged compressed; and that request.
fn gzipped_request(size: usize) -> (Look, Vec<u8>) {
    let request = Look {
        request_compressed: false,
        blob: vec![b'a'; size],
    };
    let body = compressed_message(&gzip(&request.encode_to_vec()));
    (request, body)
}

#[test]
fn answers_say_gzip_and_carry_gzip() {
    let server = start(true);
    let (request, body) = gzipped_request(4000);
    let both = [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")];
    let wire = raw_call(server.local_addr(), "Look", &both, &body);
    assert_eq!(wire.heard.status(1), Some("0"));
    let headers = &wire.heard.blocks[0];
    assert_eq!(headers.get("grpc-encoding"), Some(&b"gzip"[..]));
    assert_eq!(wire.messages.len(), 1);
    let (flag, payload) = &wire.messages[0];
    assert_eq!(*flag, 1, "the answer is flagged compressed");
    assert!(
        payload.len() < 200,
        "4000 bytes of one letter compress well"
    );
    let mut inflated = Vec::new();
    GzDecoder::new(&payload[..])
        .read_to_end(&mut inflated)
        .unwrap();
    let answer = Look::decode(&inflated[..]).unwrap();
    assert!(answer.request_compressed);
    assert_eq!(answer.blob, request.blob);

    // Without grpc-accept-encoding the answer is not compressed.
    let wire = raw_call(
        server.local_addr(),
        "Look",
        &[("grpc-encoding", "gzip")],
        &body,
    );
    assert_eq!(wire.heard.status(1), Some("0"));
    assert_eq!(wire.heard.blocks[0].get("grpc-encoding"), None);
    assert_eq!(wire.messages.len(), 1);
    let (flag, payload) = &wire.messages[0];
    assert_eq!(*flag, 0, "the answer is flagged uncompressed");
    let answer = Look::decode(&payload[..]).unwrap();
    assert!(answer.request_compressed);
    assert_eq!(answer.blob, request.blob);
    server.shutdown();
}

/// A compressed answer takes the request's compression if the client
/// accepts it, else gzip, else deflate.
#[test]
fn answers_take_the_requests_compression_else_gzip_else_deflate() {
    let server = start(true);
    let request = Look {
        request_compressed: false,
        blob: vec![b'z'; 3000],
    };
    let encoded = request.encode_to_vec();
    let plain = pajamax_test_peer::grpc::message(&encoded);
    for (sent, accepted, answered) in [
        ("deflate", "gzip,deflate", "deflate"),
        ("gzip", "deflate, gzip", "gzip"),
        ("identity", "deflate,gzip", "gzip"),
        ("identity", "deflate", "deflate"),
        ("gzip", "identity,deflate", "deflate"),
        ("deflate", "gzip", "gzip"),
    ] {
        let body = match sent {
            "gzip" => compressed_message(&gzip(&encoded)),
            "deflate" => compressed_message(&zlib(&encoded)),
            _ => plain.clone(),
        };
        let extra = [("grpc-encoding", sent), ("grpc-accept-encoding", accepted)];
        let wire = raw_call(server.local_addr(), "Look", &extra, &body);
        let case = format!("{sent} accepting {accepted}");
        assert_eq!(wire.heard.status(1), Some("0"), "{case}");
        assert_eq!(
            wire.heard.blocks[0].get("grpc-encoding"),
            Some(answered.as_bytes()),
            "{case}"
        );
        assert_eq!(wire.messages.len(), 1);
        let (flag, payload) = &wire.messages[0];
        assert_eq!(*flag, 1, "{case}");
        assert!(payload.len() < 200, "{case}: 3000 bytes of one letter");
        let answer = Look::decode(&inflate(answered.as_bytes(), payload)[..]).unwrap();
        assert_eq!(answer.request_compressed, sent != "identity", "{case}");
        assert_eq!(answer.blob, request.blob, "{case}");
    }
    server.shutdown();
}

/// Calls whose header block repeats an earlier one on the connection
/// (each method's third call; its second one is the first with every
/// field indexed) answer with the compression a fresh read of the block
/// chose: unary calls with a whole plain body (answered from the light
/// record) or a compressed one, answered inline or from a thread, and
/// streams from a producer, a thread and a handler on the worker.
#[test]
fn repeated_header_blocks_answer_with_the_same_compression() {
    let server = start(true);
    let request = Look {
        request_compressed: false,
        blob: vec![b'r'; 3000],
    };
    let encoded = request.encode_to_vec();
    for (sent, accepted, answered) in [
        ("deflate", "gzip,deflate", Some("deflate")),
        ("identity", "deflate", Some("deflate")),
        ("gzip", "deflate", Some("deflate")),
        ("identity", "gzip,deflate", Some("gzip")),
        ("deflate", "identity", None),
    ] {
        let body = match sent {
            "gzip" => compressed_message(&gzip(&encoded)),
            "deflate" => compressed_message(&zlib(&encoded)),
            _ => pajamax_test_peer::grpc::message(&encoded),
        };
        let two = [body.clone(), body.clone()].concat();
        let extra = [("grpc-encoding", sent), ("grpc-accept-encoding", accepted)];
        let mut peer = TcpClient::handshake(server.local_addr(), &[]).unwrap();
        // Room for every answer on the connection.
        peer.send(&Frame::window_update(0, 1 << 30).to_bytes())
            .unwrap();
        let mut stream = 1;
        for (method, body, flags) in [
            ("Look", &body, &[1][..]),
            ("LookLater", &body, &[1]),
            ("Mixed", &body, &[1, 0, 1]),
            ("MixedThread", &body, &[1, 0, 1]),
            ("MixedEcho", &two, &[1, 0, 1, 0]),
        ] {
            for call in 1..=3 {
                let case = format!("{method} call {call}: {sent} accepting {accepted}");
                let wire = raw_call_on(&mut peer, stream, method, &extra, body);
                assert_eq!(wire.heard.status(stream), Some("0"), "{case}");
                stream += 2;
                assert_eq!(
                    wire.heard.blocks[0].get("grpc-encoding"),
                    answered.map(str::as_bytes),
                    "{case}"
                );
                let got: Vec<u8> = wire.messages.iter().map(|(flag, _)| *flag).collect();
                let want: Vec<u8> = flags
                    .iter()
                    .map(|&f| f * answered.is_some() as u8)
                    .collect();
                assert_eq!(got, want, "{case}");
                for (flag, payload) in &wire.messages {
                    let bytes = match (flag, answered) {
                        (1, Some(answered)) => inflate(answered.as_bytes(), payload),
                        _ => payload.clone(),
                    };
                    let answer = Look::decode(&bytes[..]).unwrap();
                    assert_eq!(answer.blob, request.blob, "{case}");
                }
            }
        }
    }
    server.shutdown();
}

/// A thread's compressed answers that its stream cannot take (the client's
/// windows shut, the stream's send buffer full) wait in the call's backlog
/// and leave from there, once the windows open, compressed as the call
/// chose: deflate here.
#[test]
fn a_threads_answers_held_back_leave_with_the_chosen_compression() {
    let server = start(true);
    // Bytes that do not compress: the three answers of `MixedThread` (the
    // first and last compressed) are 40 KB each, past a stream's 64 KiB
    // send buffer together.
    let mut blob = Vec::with_capacity(40_000);
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    while blob.len() < 40_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        blob.extend_from_slice(&x.to_le_bytes());
    }
    let request = Look {
        request_compressed: false,
        blob,
    };
    let body = compressed_message(&zlib(&request.encode_to_vec()));
    // No window for any stream until the thread has sent everything.
    let mut peer = TcpClient::handshake(server.local_addr(), &[(0x4, 0)]).unwrap();
    let mut opener = peer.socket.try_clone().unwrap();
    let open = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut bytes = Frame::settings(&[(0x4, 1 << 20)]).to_bytes();
        Frame::window_update(0, 1 << 30).write(&mut bytes);
        opener.write_all(&bytes).unwrap();
    });
    let extra = [
        ("grpc-encoding", "deflate"),
        ("grpc-accept-encoding", "gzip,deflate"),
    ];
    let wire = raw_call_on(&mut peer, 1, "MixedThread", &extra, &body);
    open.join().unwrap();
    assert_eq!(wire.heard.status(1), Some("0"));
    assert_eq!(
        wire.heard.blocks[0].get("grpc-encoding"),
        Some(&b"deflate"[..])
    );
    let flags: Vec<u8> = wire.messages.iter().map(|(flag, _)| *flag).collect();
    assert_eq!(flags, [1, 0, 1]);
    for (flag, payload) in &wire.messages {
        let bytes = if *flag == 1 {
            inflate(b"deflate", payload)
        } else {
            payload.clone()
        };
        assert_eq!(Look::decode(&bytes[..]).unwrap().blob, request.blob);
    }
    drop(peer);
    server.shutdown();
}

#[test]
fn a_handler_that_turns_compression_off_answers_uncompressed() {
    // The server compresses by default and the client sends and accepts
    // gzip; `test.Zip/Plain` asks for its answer to go uncompressed.
    let server = start(true);
    let addr = server.local_addr();
    let (request, body) = gzipped_request(4000);
    let both = [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")];
    let wire = raw_call(addr, "Plain", &both, &body);
    assert_eq!(wire.heard.status(1), Some("0"));
    assert_eq!(
        wire.heard.blocks[0].get("grpc-encoding"),
        None,
        "no grpc-encoding for an answer sent as is: {:?}",
        wire.heard.blocks[0].strings()
    );
    assert_eq!(wire.messages.len(), 1);
    let (flag, payload) = &wire.messages[0];
    assert_eq!(*flag, 0, "the answer is flagged uncompressed");
    assert!(payload.len() > 4000, "the answer's blob is there as is");
    let answer = Look::decode(&payload[..]).unwrap();
    assert!(answer.request_compressed, "the request was still inflated");
    assert_eq!(answer.blob, request.blob);

    // On the same server, `Look` answers that client compressed.
    let wire = raw_call(addr, "Look", &both, &body);
    assert_eq!(
        wire.heard.blocks[0].get("grpc-encoding"),
        Some(&b"gzip"[..])
    );
    assert_eq!(wire.messages.len(), 1);
    assert_eq!(wire.messages[0].0, 1);
    server.shutdown();
}

/// Answers sent uncompressed on purpose go flagged 0 on a compressed
/// call, from a producer on the worker, a sink on a thread and a
/// bidirectional handler on the worker; on a call not compressed, every
/// answer goes flagged 0 (the internal mark never reaches the wire).
#[test]
fn messages_sent_uncompressed_go_uncompressed_in_a_compressed_stream() {
    let server = start(true);
    let addr = server.local_addr();
    let (request, body) = gzipped_request(3000);
    let both = [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")];
    let only_gzip_requests = [("grpc-encoding", "gzip")];
    // Two requests in one body for the bidirectional call.
    let two = [body.clone(), body.clone()].concat();
    for (method, body, compressed, plain) in [
        ("Mixed", &body, &[1, 0, 1][..], &[0, 0, 0][..]),
        ("MixedThread", &body, &[1, 0, 1], &[0, 0, 0]),
        ("MixedEcho", &two, &[1, 0, 1, 0], &[0, 0, 0, 0]),
    ] {
        let wire = raw_call(addr, method, &both, body);
        assert_eq!(wire.heard.status(1), Some("0"), "{method}");
        assert_eq!(
            wire.heard.blocks[0].get("grpc-encoding"),
            Some(&b"gzip"[..]),
            "{method}"
        );
        let flags: Vec<u8> = wire.messages.iter().map(|(flag, _)| *flag).collect();
        assert_eq!(flags, compressed, "{method}");
        for (flag, payload) in &wire.messages {
            let bytes = if *flag == 1 {
                let mut inflated = Vec::new();
                GzDecoder::new(&payload[..])
                    .read_to_end(&mut inflated)
                    .unwrap();
                inflated
            } else {
                payload.clone()
            };
            let answer = Look::decode(&bytes[..]).unwrap();
            assert_eq!(answer.blob, request.blob, "{method}");
        }

        // A client that accepts no compression gets every answer flagged
        // 0, with the same bytes.
        let wire = raw_call(addr, method, &only_gzip_requests, body);
        assert_eq!(wire.heard.status(1), Some("0"), "{method}");
        assert_eq!(wire.heard.blocks[0].get("grpc-encoding"), None);
        let flags: Vec<u8> = wire.messages.iter().map(|(flag, _)| *flag).collect();
        assert_eq!(flags, plain, "{method}");
        for (_, payload) in &wire.messages {
            assert_eq!(Look::decode(&payload[..]).unwrap().blob, request.blob);
        }
    }
    server.shutdown();
}

#[test]
fn bad_compression_gets_a_clear_status() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .max_recv_message_size(1 << 20)
        .add_service(Zip)
        .bind("127.0.0.1:0")
        .unwrap();
    let addr = server.local_addr();
    // 16 MiB of zeros in about 16 KiB: stopped at the 1 MiB limit.
    let bomb = Look {
        request_compressed: false,
        blob: vec![0; 16 << 20],
    };
    let body = compressed_message(&gzip(&bomb.encode_to_vec()));
    assert!(body.len() < 64 << 10);
    let heard = raw_call(addr, "Look", &[("grpc-encoding", "gzip")], &body).heard;
    assert_eq!(heard.status(1), Some("8"), "RESOURCE_EXHAUSTED");
    let body = compressed_message(&zlib(&bomb.encode_to_vec()));
    assert!(body.len() < 64 << 10);
    let heard = raw_call(addr, "Look", &[("grpc-encoding", "deflate")], &body).heard;
    assert_eq!(heard.status(1), Some("8"), "RESOURCE_EXHAUSTED");

    // An encoding not served: UNIMPLEMENTED, naming what is.
    let plain = pajamax_test_peer::grpc::message(&Look::default().encode_to_vec());
    let heard = raw_call(addr, "Look", &[("grpc-encoding", "snappy")], &plain).heard;
    assert_eq!(heard.status(1), Some("12"), "UNIMPLEMENTED");
    let accepted = heard.blocks[0].get("grpc-accept-encoding").unwrap();
    assert_eq!(accepted, b"gzip,deflate,identity");

    // A compressed flag without grpc-encoding: INTERNAL.
    let heard = raw_call(addr, "Look", &[], &compressed_message(&gzip(b""))).heard;
    assert_eq!(heard.status(1), Some("13"), "INTERNAL");

    // Not gzip or deflate at all; deflate with bytes after its end.
    for encoding in ["gzip", "deflate"] {
        let heard = raw_call(
            addr,
            "Look",
            &[("grpc-encoding", encoding)],
            &compressed_message(b"not compressed"),
        )
        .heard;
        assert_eq!(heard.status(1), Some("13"), "INTERNAL");
        let message = heard.blocks.last().unwrap().get("grpc-message").unwrap();
        let message = String::from_utf8_lossy(message);
        assert!(
            message.contains(&format!("invalid {encoding} message")),
            "{message}"
        );
    }
    let mut trailing = zlib(&Look::default().encode_to_vec());
    trailing.extend(b"after");
    let heard = raw_call(
        addr,
        "Look",
        &[("grpc-encoding", "deflate")],
        &compressed_message(&trailing),
    )
    .heard;
    assert_eq!(heard.status(1), Some("13"), "INTERNAL");

    // The server serves on.
    let heard = raw_call(addr, "Look", &[], &plain).heard;
    assert_eq!(heard.status(1), Some("0"));
    server.shutdown();
}

/// RFC 1952 allows a gzip file of several members, one after another, and
/// gzip readers (Go's `gzip.Reader`, which grpc-go uses) inflate them all:
/// the message is the members' contents joined. Bytes after the last
/// member that are not a member are an error, not ignored.
#[test]
fn a_gzip_message_of_several_members_is_inflated_whole() {
    let server = start(false);
    let addr = server.local_addr();
    let request = Look {
        request_compressed: false,
        blob: (0..4000u32).map(|i| b'a' + (i % 26) as u8).collect(),
    };
    let encoded = request.encode_to_vec();
    let (first, second) = encoded.split_at(encoded.len() / 2);
    let mut members = gzip(first);
    members.extend(gzip(second));
    let wire = raw_call(
        addr,
        "Look",
        &[("grpc-encoding", "gzip")],
        &compressed_message(&members),
    );
    assert_eq!(wire.heard.status(1), Some("0"), "{:?}", wire.heard.blocks);
    assert_eq!(wire.messages.len(), 1);
    let answer = Look::decode(&wire.messages[0].1[..]).unwrap();
    assert_eq!(answer.blob, request.blob, "every member is inflated");

    // One member and then bytes that are no gzip member: INTERNAL.
    let mut trailing = gzip(&encoded);
    trailing.extend(b"not a gzip member");
    let heard = raw_call(
        addr,
        "Look",
        &[("grpc-encoding", "gzip")],
        &compressed_message(&trailing),
    )
    .heard;
    assert_eq!(heard.status(1), Some("13"), "INTERNAL");
    server.shutdown();
}
