//! A handler that panics, in every kind of method, on the worker and on a
//! thread of its own: its call ends `INTERNAL`, and the connection and its
//! other calls go on.

mod common;

use common::streams::{self, Ask, Item, Streams};
use common::{connect, echo_works_on};
use pajamax::grpc::streaming::{RawInbound, RawServerStream};
use pajamax::{
    BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Context, Method, Next, Producer,
    Responses, ServerStream, Service, Status,
};
use std::time::Instant;

/// `test.Panics`: each method panics after its first message.
struct Panics;

/// The streaming methods of `test.Streams`, by the same names.
const METHODS: &[Method] = streams::METHODS.split_at(6).0;

struct PanicsLater(u32);

impl Producer<Item> for PanicsLater {
    fn next(&mut self, _now: Instant) -> Next<Item> {
        self.0 += 1;
        assert!(self.0 < 2, "the producer panics on purpose");
        Next::Message(Item::default())
    }
}

struct PanicsOnMessage;

impl ClientStreamHandler<Ask, Item> for PanicsOnMessage {
    fn on_message(&mut self, _ctx: &mut Context<'_>, _ask: Ask) -> Result<(), Status> {
        panic!("the handler panics on purpose")
    }

    fn on_end(&mut self, _ctx: &mut Context<'_>) -> Result<Item, Status> {
        Ok(Item::default())
    }
}

impl BidiHandler<Ask, Item> for PanicsOnMessage {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        _ask: Ask,
        responses: &mut Responses<'_, Item>,
    ) -> Result<(), Status> {
        responses.send(&Item::default());
        panic!("the handler panics on purpose")
    }

    fn on_end(
        &mut self,
        _ctx: &mut Context<'_>,
        _responses: &mut Responses<'_, Item>,
    ) -> Result<(), Status> {
        Ok(())
    }
}

impl Service for Panics {
    fn name(&self) -> &'static str {
        "test.Panics"
    }

    fn methods(&self) -> &'static [Method] {
        METHODS
    }

    fn server_streaming(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        _request: &[u8],
    ) -> Result<RawServerStream, Status> {
        if METHODS[method].name == "Count" {
            return Ok(ServerStream::from_producer(PanicsLater(0)).into_raw());
        }
        let (stream, mut sink) = ServerStream::<Item>::channel(ctx);
        std::thread::spawn(move || {
            sink.send(&Item::default()).unwrap();
            panic!("the thread panics on purpose");
        });
        Ok(stream.into_raw())
    }

    fn client_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        if METHODS[method].name == "Sum" {
            return Ok(ClientStream::on_worker(PanicsOnMessage).into_raw());
        }
        let (stream, mut requests, _responder) = ClientStream::<Ask, Item>::channel(ctx);
        std::thread::spawn(move || {
            let _ = requests.next();
            panic!("the thread panics on purpose");
        });
        Ok(stream.into_raw())
    }

    fn bidi_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        if METHODS[method].name == "Echo" {
            return Ok(BidiStream::on_worker(PanicsOnMessage).into_raw());
        }
        let (stream, mut requests, mut sink) = BidiStream::<Ask, Item>::channel(ctx);
        std::thread::spawn(move || {
            let _ = requests.next();
            sink.send(&Item::default()).unwrap();
            panic!("the thread panics on purpose");
        });
        Ok(stream.into_raw())
    }
}

fn panics_path(method: &str) -> tonic::codegen::http::uri::PathAndQuery {
    format!("/test.Panics/{method}").try_into().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_any_kind_of_call_ends_it_internal_and_nothing_else() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Panics)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    let codec = || tonic_prost::ProstCodec::<Ask, Item>::default();
    for method in ["Count", "CountThread"] {
        let mut client = tonic::client::Grpc::new(channel.clone());
        client.ready().await.unwrap();
        let response = client
            .server_streaming(
                tonic::Request::new(Ask::default()),
                panics_path(method),
                codec(),
            )
            .await
            .unwrap();
        let (items, end, _) = streams::collect(response.into_inner()).await;
        assert_eq!(items.len(), 1, "{method}");
        assert_eq!(end.unwrap_err().code(), tonic::Code::Internal, "{method}");
        echo_works_on(channel.clone(), "Count").await;
    }
    for method in ["Sum", "SumThread"] {
        let mut client = tonic::client::Grpc::new(channel.clone());
        client.ready().await.unwrap();
        let requests = tokio_stream::iter(vec![Ask::default(), Ask::default()]);
        let status = client
            .client_streaming(tonic::Request::new(requests), panics_path(method), codec())
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Internal, "{method}: {status:?}");
        echo_works_on(channel.clone(), "Sum").await;
    }
    for method in ["Echo", "EchoThread"] {
        let mut client = tonic::client::Grpc::new(channel.clone());
        client.ready().await.unwrap();
        let (send, requests) = tokio::sync::mpsc::channel(4);
        send.send(Ask::default()).await.unwrap();
        let requests = tokio_stream::wrappers::ReceiverStream::new(requests);
        let response = client
            .streaming(tonic::Request::new(requests), panics_path(method), codec())
            .await
            .unwrap();
        let (items, end, _) = streams::collect(response.into_inner()).await;
        drop(send);
        assert_eq!(items.len(), 1, "{method}");
        assert_eq!(end.unwrap_err().code(), tonic::Code::Internal, "{method}");
        echo_works_on(channel.clone(), "Count").await;
    }
    common::stop(server).await;
}

/// An answer whose encoding writes part of itself, then panics (when
/// `panics`); otherwise an `Item` with `value` and a blob of 100 bytes.
#[derive(Debug, Default)]
struct Brittle {
    value: u64,
    panics: bool,
}

impl prost::Message for Brittle {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        prost::encoding::uint64::encode(1, &self.value, buf);
        prost::encoding::bytes::encode(2, &vec![7u8; 100], buf);
        assert!(!self.panics, "the answer's encoding panics on purpose");
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        prost::encoding::uint64::encoded_len(1, &self.value)
            + prost::encoding::bytes::encoded_len(2, &vec![7u8; 100])
    }

    fn clear(&mut self) {}
}

/// `test.Brittle/Echo` and `Caught`: answer each request with a whole
/// answer, then one whose encoding panics. `Caught` catches that panic
/// itself, sends another whole answer and goes on.
struct BrittleEcho {
    catches: bool,
}

impl BidiHandler<Ask, Brittle> for BrittleEcho {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        ask: Ask,
        responses: &mut Responses<'_, Brittle>,
    ) -> Result<(), Status> {
        responses.send(&Brittle {
            value: ask.value,
            panics: false,
        });
        let broken = Brittle {
            value: ask.value + 1,
            panics: true,
        };
        if !self.catches {
            responses.send(&broken);
            return Ok(());
        }
        let caught =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| responses.send(&broken)));
        assert!(caught.is_err());
        responses.send(&Brittle {
            value: ask.value + 2,
            panics: false,
        });
        Ok(())
    }
}

struct BrittleService;

impl Service for BrittleService {
    fn name(&self) -> &'static str {
        "test.Brittle"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: &[Method] = &[
            Method {
                name: "Echo",
                kind: pajamax::MethodKind::BidiStreaming,
            },
            Method {
                name: "Caught",
                kind: pajamax::MethodKind::BidiStreaming,
            },
        ];
        METHODS
    }

    fn bidi_streaming(&self, method: usize, _ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        if method == 1 {
            return Ok(BidiStream::on_worker(BrittleEcho { catches: true }).into_raw());
        }
        Ok(BidiStream::on_worker(BrittleEcho { catches: false }).into_raw())
    }
}

/// A server with `test.Brittle` (answers compressed for clients that
/// accept gzip) and `test.Streams`.
fn brittle_server() -> pajamax::ServerHandle {
    pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .send_compressed(true)
        .add_service(BrittleService)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap()
}

/// Calls `test.Brittle/{method}` with one request of value 7, accepting
/// gzip answers when `gzip`: the answers and how the call ended.
async fn brittle_call(
    channel: tonic::transport::Channel,
    method: &str,
    gzip: bool,
) -> (Vec<Item>, Result<(), tonic::Status>) {
    let mut client = tonic::client::Grpc::new(channel);
    if gzip {
        client = client.accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    }
    client.ready().await.unwrap();
    let requests = tokio_stream::iter(vec![Ask {
        value: 7,
        ..Ask::default()
    }]);
    let response = client
        .streaming(
            tonic::Request::new(requests),
            format!("/test.Brittle/{method}").try_into().unwrap(),
            tonic_prost::ProstCodec::<Ask, Item>::default(),
        )
        .await
        .unwrap();
    let (items, end, _) = streams::collect(response.into_inner()).await;
    assert!(
        items.iter().all(|item| item.blob == vec![7u8; 100]),
        "{method}, gzip {gzip}: every answer whole"
    );
    (items, end)
}

/// A handler whose answer's encoding panics halfway: the answers before it
/// go, whole, then `INTERNAL`; no part of the broken one, compressed or
/// not, and the worker and the connection go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_encoding_panics_leaves_nothing_of_itself() {
    let server = brittle_server();
    let channel = connect(&server).await;
    for gzip in [false, true] {
        let (items, end) = brittle_call(channel.clone(), "Echo", gzip).await;
        let values: Vec<u64> = items.iter().map(|item| item.value).collect();
        assert_eq!(values, [7], "gzip {gzip}");
        // The server's status, not the client's complaint about what it
        // read.
        let status = end.unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::Internal,
            "gzip {gzip}: {status:?}"
        );
        assert_eq!(status.message(), "handler panicked", "gzip {gzip}");
        echo_works_on(channel.clone(), "Count").await;
    }
    assert_eq!(server.stats().connection_errors, 0);
    common::stop(server).await;
}

/// A handler that catches the panic of an answer's encoding itself and goes
/// on: nothing of the broken answer goes, compressed or not, and the
/// answers around it arrive whole, then `OK`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_encoding_panic_the_handler_catches_leaves_nothing() {
    let server = brittle_server();
    let channel = connect(&server).await;
    for gzip in [false, true] {
        let (items, end) = brittle_call(channel.clone(), "Caught", gzip).await;
        let values: Vec<u64> = items.iter().map(|item| item.value).collect();
        assert_eq!(values, [7, 9], "gzip {gzip}: {end:?}");
        end.unwrap();
        echo_works_on(channel.clone(), "Count").await;
    }
    assert_eq!(server.stats().connection_errors, 0);
    common::stop(server).await;
}
