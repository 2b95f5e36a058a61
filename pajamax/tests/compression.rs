//! Message compression: tonic's client sending and accepting gzip on every
//! kind of call, and the raw requests no real client sends (a gzip bomb,
//! an unknown encoding, a compressed flag without an encoding).

mod common;

use common::streams::{self, bidi, client_stream, collect, server_stream, Ask, Item};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use pajamax::{Context, Method, MethodKind, Reply, Service, Status};
use pajamax_test_peer::{Frame, TcpClient};
use prost::Message;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;
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
        ];
        METHODS
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
        reply.encode(&Look {
            request_compressed: ctx.request_compressed(),
            blob: look.blob,
        });
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

async fn look(channel: Channel, method: &str, blob: Vec<u8>, gzip: bool) -> Look {
    let mut client = tonic::client::Grpc::new(channel);
    if gzip {
        client = client
            .send_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Gzip);
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
    let seen = look(channel.clone(), "Look", blob.clone(), true).await;
    assert!(seen.request_compressed);
    assert_eq!(seen.blob, blob);
    // A client that does not ask for gzip gets none, and sends none.
    let seen = look(channel.clone(), "Look", blob.clone(), false).await;
    assert!(!seen.request_compressed);
    assert_eq!(seen.blob, blob);
    // The handler may turn compression off for its answer.
    let seen = look(channel.clone(), "Plain", blob.clone(), true).await;
    assert!(seen.request_compressed);
    assert_eq!(seen.blob, blob);
    // A request too small to compress is still flagged compressed by tonic.
    let seen = look(channel, "Look", Vec::new(), true).await;
    assert!(seen.request_compressed);
    server.shutdown();
}

/// A tonic client for `test.Streams` that sends and accepts gzip.
fn streams_client(channel: Channel) -> tonic::client::Grpc<Channel> {
    tonic::client::Grpc::new(channel)
        .send_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Gzip)
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
    for method in ["Count", "CountThread"] {
        let mut client = streams_client(channel.clone());
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
        assert_eq!(values, (1..=20).collect::<Vec<_>>(), "{method}");
        assert!(items.iter().all(|item| item.blob.len() == 3000));
    }
    for method in ["Sum", "SumThread"] {
        let mut client = streams_client(channel.clone());
        client.ready().await.unwrap();
        let request = tonic::Request::new(tokio_stream::iter(asks(&[1, 2, 3, 4], 5000)));
        let sum = client
            .client_streaming(request, path(method), codec())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(sum.value, 10, "{method}");
    }
    for method in ["Echo", "EchoThread"] {
        let mut client = streams_client(channel.clone());
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
        assert_eq!(values, [5, 6, 7], "{method}");
        assert!(items.iter().all(|item| item.blob.len() == 2000));
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
    server.shutdown();
}

// ----- on the wire -----

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// `payload` framed as one message flagged compressed.
fn compressed_message(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![1];
    out.extend((payload.len() as u32).to_be_bytes());
    out.extend(payload);
    out
}

/// Sends one request to `test.Zip/Look` with `extra` header fields and
/// `body` as its one DATA frame, and listens for its end.
fn raw_call(addr: SocketAddr, extra: &[(&str, &str)], body: &[u8]) -> pajamax_test_peer::Heard {
    let mut peer = TcpClient::handshake(addr, &[]).unwrap();
    let mut bytes = peer
        .client
        .request_headers(1, "/test.Zip/Look", extra, false)
        .to_bytes();
    // In frames of at most the default SETTINGS_MAX_FRAME_SIZE.
    let mut chunks = body.chunks(16 << 10).peekable();
    while let Some(chunk) = chunks.next() {
        Frame::data(1, chunk, chunks.peek().is_none()).write(&mut bytes);
    }
    peer.send(&bytes).unwrap();
    peer.listen(Duration::from_secs(5), |heard| heard.status(1).is_some())
}

#[test]
fn answers_say_gzip_and_carry_gzip() {
    let server = start(true);
    let request = Look {
        request_compressed: false,
        blob: vec![b'a'; 4000],
    };
    let body = compressed_message(&gzip(&request.encode_to_vec()));
    let heard = raw_call(
        server.local_addr(),
        &[("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")],
        &body,
    );
    assert_eq!(heard.status(1), Some("0"));
    let headers = &heard.blocks[0];
    assert_eq!(headers.get("grpc-encoding"), Some(&b"gzip"[..]));
    let messages = heard.messages_on(1);
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0].len() < 200,
        "4000 bytes of one letter compress well"
    );
    let mut inflated = Vec::new();
    GzDecoder::new(messages[0])
        .read_to_end(&mut inflated)
        .unwrap();
    let answer = Look::decode(&inflated[..]).unwrap();
    assert!(answer.request_compressed);
    assert_eq!(answer.blob, request.blob);

    // Without grpc-accept-encoding the answer is not compressed.
    let heard = raw_call(server.local_addr(), &[("grpc-encoding", "gzip")], &body);
    assert_eq!(heard.status(1), Some("0"));
    assert_eq!(heard.blocks[0].get("grpc-encoding"), None);
    let answer = Look::decode(heard.messages_on(1)[0]).unwrap();
    assert_eq!(answer.blob, request.blob);
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
    let heard = raw_call(addr, &[("grpc-encoding", "gzip")], &body);
    assert_eq!(heard.status(1), Some("8"), "RESOURCE_EXHAUSTED");

    // An encoding not served: UNIMPLEMENTED, naming what is.
    let plain = pajamax_test_peer::grpc::message(&Look::default().encode_to_vec());
    let heard = raw_call(addr, &[("grpc-encoding", "snappy")], &plain);
    assert_eq!(heard.status(1), Some("12"), "UNIMPLEMENTED");
    let accepted = heard.blocks[0].get("grpc-accept-encoding").unwrap();
    assert_eq!(accepted, b"gzip,identity");

    // A compressed flag without grpc-encoding: INTERNAL.
    let heard = raw_call(addr, &[], &compressed_message(&gzip(b"")));
    assert_eq!(heard.status(1), Some("13"), "INTERNAL");

    // Not gzip at all.
    let heard = raw_call(
        addr,
        &[("grpc-encoding", "gzip")],
        &compressed_message(b"not gzip"),
    );
    assert_eq!(heard.status(1), Some("13"), "INTERNAL");

    // The server serves on.
    let heard = raw_call(addr, &[], &plain);
    assert_eq!(heard.status(1), Some("0"));
    server.shutdown();
}
