//! Producers and handlers on the worker whose `Drop` panics, however their
//! call ends (at its end, cancelled by the client, at its deadline, as the
//! answer is deferred, with the connection closed or failed, at the end of
//! a shutdown's grace period): the panic ends at most their own call, and
//! the worker (one here) goes on serving the connection's other calls and
//! its other connections.

mod common;

use common::streams::{self, Ask, Item, Streams};
use common::{connect, echo_works_on};
use pajamax::grpc::streaming::{RawInbound, RawServerStream};
use pajamax::{
    BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Code, Context, Method, MethodKind,
    Next, Producer, Responses, ServerStream, Service, Status,
};
use pajamax_test_peer::{Frame, TcpClient};
use prost::Message as _;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

/// Panics as it is dropped (unless the thread is unwinding already, which
/// would abort the tests): every producer and handler of `test.DropPanics`
/// holds one.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("dropped on purpose");
        }
    }
}

/// `Count`: `Ask::count` numbers from an iterator.
struct Numbers {
    next: u64,
    last: u64,
    _bomb: Bomb,
}

impl Iterator for Numbers {
    type Item = Result<Item, Status>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next > self.last {
            return None;
        }
        self.next += 1;
        Some(Ok(item(self.next - 1)))
    }
}

/// `Tick`: a number every `Ask::interval_ms`, for good.
struct Ticks {
    sent: u64,
    every: Duration,
    due: Option<Instant>,
    _bomb: Bomb,
}

impl Producer<Item> for Ticks {
    fn next(&mut self, now: Instant) -> Next<Item> {
        if let Some(due) = self.due.filter(|&due| due > now) {
            return Next::Wait(due);
        }
        self.due = Some(now + self.every);
        self.sent += 1;
        Next::Message(item(self.sent))
    }
}

/// `Sum`: the sum of the values, answered on the worker, or from a thread
/// once a message says `endless`; a message with a `fail_code` ends the
/// call with that code.
struct Summer {
    total: u64,
    defer: bool,
    _bomb: Bomb,
}

impl ClientStreamHandler<Ask, Item> for Summer {
    fn on_message(&mut self, _ctx: &mut Context<'_>, ask: Ask) -> Result<(), Status> {
        if ask.fail_code != 0 {
            let code = Code::from_i32(ask.fail_code);
            return Err(Status::new(code, "the message asked for it"));
        }
        self.total += ask.value;
        self.defer |= ask.endless;
        Ok(())
    }

    fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<Item, Status> {
        if self.defer {
            let responder = ctx.defer();
            let total = self.total;
            std::thread::spawn(move || responder.respond(Ok(item(total))));
        }
        Ok(item(self.total))
    }
}

/// `Echo`: each value back.
struct Echoer {
    _bomb: Bomb,
}

impl BidiHandler<Ask, Item> for Echoer {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        ask: Ask,
        responses: &mut Responses<'_, Item>,
    ) -> Result<(), Status> {
        responses.send(&item(ask.value));
        Ok(())
    }
}

fn item(value: u64) -> Item {
    Item {
        value,
        ..Default::default()
    }
}

/// `test.DropPanics`.
struct DropPanics;

const METHODS: &[Method] = &[
    Method {
        name: "Count",
        kind: MethodKind::ServerStreaming,
    },
    Method {
        name: "Tick",
        kind: MethodKind::ServerStreaming,
    },
    Method {
        name: "Sum",
        kind: MethodKind::ClientStreaming,
    },
    Method {
        name: "Echo",
        kind: MethodKind::BidiStreaming,
    },
];

impl Service for DropPanics {
    fn name(&self) -> &'static str {
        "test.DropPanics"
    }

    fn methods(&self) -> &'static [Method] {
        METHODS
    }

    fn server_streaming(
        &self,
        method: usize,
        _ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let ask: Ask = pajamax::decode_request(request)?;
        let stream = match METHODS[method].name {
            "Count" => ServerStream::iter(Numbers {
                next: 1,
                last: u64::from(ask.count),
                _bomb: Bomb,
            }),
            _ => ServerStream::from_producer(Ticks {
                sent: 0,
                every: Duration::from_millis(u64::from(ask.interval_ms)),
                due: None,
                _bomb: Bomb,
            }),
        };
        Ok(stream.into_raw())
    }

    fn client_streaming(&self, _: usize, _: &mut Context<'_>) -> Result<RawInbound, Status> {
        let summer = Summer {
            total: 0,
            defer: false,
            _bomb: Bomb,
        };
        Ok(ClientStream::on_worker(summer).into_raw())
    }

    fn bidi_streaming(&self, _: usize, _: &mut Context<'_>) -> Result<RawInbound, Status> {
        Ok(BidiStream::on_worker(Echoer { _bomb: Bomb }).into_raw())
    }
}

/// A server of one worker with `test.DropPanics` and `test.Streams`.
fn start(builder: pajamax::Builder) -> pajamax::ServerHandle {
    builder
        .workers(1)
        .pin_workers(false)
        .add_service(DropPanics)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap()
}

fn path(method: &str) -> PathAndQuery {
    format!("/test.DropPanics/{method}").try_into().unwrap()
}

fn codec() -> tonic_prost::ProstCodec<Ask, Item> {
    tonic_prost::ProstCodec::default()
}

async fn client(channel: &Channel) -> tonic::client::Grpc<Channel> {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    client
}

/// `what`, which fails the test if it takes ten seconds: a worker that
/// died leaves its calls unanswered.
async fn in_time<T>(what: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), what)
        .await
        .expect("no answer: the worker is gone")
}

/// The status of a `Sum` call of `asks` that fails.
async fn sum_fails(channel: &Channel, asks: Vec<Ask>) -> tonic::Status {
    in_time(client(channel).await.client_streaming(
        tonic::Request::new(tokio_stream::iter(asks)),
        path("Sum"),
        codec(),
    ))
    .await
    .unwrap_err()
}

/// A server of one worker, the connection a test's call goes on and
/// another one, served before the call.
async fn two_connections() -> (pajamax::ServerHandle, Channel, Channel) {
    let server = start(pajamax::Server::builder());
    let channel = connect(&server).await;
    let other = connect(&server).await;
    still_served(&[&other]).await;
    (server, channel, other)
}

/// Unary, server-streaming and client-streaming calls still go through on
/// each of `channels`.
async fn still_served(channels: &[&Channel]) {
    for channel in channels {
        in_time(echo_works_on((*channel).clone(), "Count")).await;
        in_time(echo_works_on((*channel).clone(), "Sum")).await;
    }
}

/// Checks that both connections are still served, then stops the server.
async fn still_served_then_stop(server: pajamax::ServerHandle, channel: &Channel, other: &Channel) {
    still_served(&[channel, other]).await;
    common::stop(server).await;
}

/// The status a stream ended with, which must have `code`.
fn ended_with(end: Result<(), tonic::Status>, code: tonic::Code) -> tonic::Status {
    let status = end.unwrap_err();
    assert_eq!(status.code(), code, "{status:?}");
    status
}

fn values(items: &[Item]) -> Vec<u64> {
    items.iter().map(|i| i.value).collect()
}

/// Opens a bidirectional `Echo` call and waits for the answer to its first
/// message; returns the sender of further messages and the answers.
async fn open_echo(channel: &Channel) -> (tokio::sync::mpsc::Sender<Ask>, tonic::Streaming<Item>) {
    let (send, requests) = tokio::sync::mpsc::channel(4);
    send.send(ask_value(7)).await.unwrap();
    let requests = tokio_stream::wrappers::ReceiverStream::new(requests);
    let response = client(channel)
        .await
        .streaming(tonic::Request::new(requests), path("Echo"), codec())
        .await
        .unwrap();
    let mut answers = response.into_inner();
    let first = in_time(answers.message()).await.unwrap().unwrap();
    assert_eq!(first.value, 7);
    (send, answers)
}

/// Opens a `Tick` stream with `request` and waits for its first message.
async fn open_ticks(channel: &Channel, request: tonic::Request<Ask>) -> tonic::Streaming<Item> {
    let response = client(channel)
        .await
        .server_streaming(request, path("Tick"), codec())
        .await
        .unwrap();
    let mut ticks = response.into_inner();
    let first = in_time(ticks.message()).await.unwrap().unwrap();
    assert_eq!(first.value, 1);
    ticks
}

fn ticks_every(ms: u32) -> tonic::Request<Ask> {
    tonic::Request::new(Ask {
        interval_ms: ms,
        ..Default::default()
    })
}

fn ask_value(value: u64) -> Ask {
    Ask {
        value,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_that_panics_as_it_is_dropped_at_its_end_ends_its_call_internal() {
    let (server, channel, other) = two_connections().await;
    let request = tonic::Request::new(Ask {
        count: 3,
        ..Default::default()
    });
    let response = client(&channel)
        .await
        .server_streaming(request, path("Count"), codec())
        .await
        .unwrap();
    let (items, end, _) = in_time(streams::collect(response.into_inner())).await;
    assert_eq!(values(&items), [1, 2, 3]);
    ended_with(end, tonic::Code::Internal);
    still_served_then_stop(server, &channel, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_that_panics_as_it_is_dropped_when_the_client_cancels_harms_no_other_call() {
    let (server, channel, other) = two_connections().await;
    let ticks = open_ticks(&channel, ticks_every(5)).await;
    // RST_STREAM(CANCEL), ahead of the next calls on the connection.
    drop(ticks);
    still_served_then_stop(server, &channel, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_that_panics_as_it_is_dropped_at_its_deadline_ends_its_call_deadline_exceeded() {
    let (server, channel, other) = two_connections().await;
    let mut request = ticks_every(5);
    request.set_timeout(Duration::from_millis(300));
    let ticks = open_ticks(&channel, request).await;
    let (items, end, _) = in_time(streams::collect(ticks)).await;
    assert!(!items.is_empty());
    ended_with(end, tonic::Code::DeadlineExceeded);
    still_served_then_stop(server, &channel, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidi_handler_that_panics_as_it_is_dropped_at_its_end_ends_its_call_internal() {
    let (server, channel, other) = two_connections().await;
    let (send, answers) = open_echo(&channel).await;
    send.send(ask_value(8)).await.unwrap();
    // The client is done: `on_end` answers OK, then the handler is dropped.
    drop(send);
    let (items, end, _) = in_time(streams::collect(answers)).await;
    assert_eq!(values(&items), [8]);
    ended_with(end, tonic::Code::Internal);
    still_served_then_stop(server, &channel, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidi_handler_that_panics_as_it_is_dropped_when_the_client_cancels_harms_no_other_call() {
    let (server, channel, other) = two_connections().await;
    let (send, answers) = open_echo(&channel).await;
    drop(answers);
    drop(send);
    still_served_then_stop(server, &channel, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stream_handler_that_panics_as_it_is_dropped_keeps_the_error_it_returned() {
    let (server, channel, other) = two_connections().await;
    let failing = Ask {
        fail_code: tonic::Code::FailedPrecondition as i32,
        ..Default::default()
    };
    let status = sum_fails(&channel, vec![ask_value(1), failing]).await;
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    still_served_then_stop(server, &channel, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stream_handler_that_panics_as_it_is_dropped_while_deferring_ends_its_call_internal(
) {
    let (server, channel, other) = two_connections().await;
    let deferring = Ask {
        value: 2,
        endless: true,
        ..Default::default()
    };
    let status = sum_fails(&channel, vec![ask_value(40), deferring]).await;
    assert_eq!(status.code(), tonic::Code::Internal, "{status:?}");
    still_served_then_stop(server, &channel, &other).await;
}

/// A raw connection to `addr` with a `Tick` stream (stream 1) and an
/// `Echo` call (stream 3) open, each with a message heard.
fn peer_with_open_calls(addr: SocketAddr) -> TcpClient {
    let mut peer = TcpClient::handshake(addr, &[]).unwrap();
    let ticks = Ask {
        interval_ms: 5,
        ..Default::default()
    };
    let mut bytes = peer
        .client
        .request(1, "/test.DropPanics/Tick", &ticks.encode_to_vec());
    peer.client
        .request_headers(3, "/test.DropPanics/Echo", &[], false)
        .write(&mut bytes);
    let echo = pajamax_test_peer::grpc::message(&ask_value(9).encode_to_vec());
    Frame::data(3, &echo, false).write(&mut bytes);
    peer.send(&bytes).unwrap();
    let heard = peer.listen(Duration::from_secs(10), |h| {
        h.messages.iter().any(|(s, _)| *s == 1) && h.messages.iter().any(|(s, _)| *s == 3)
    });
    assert!(!heard.messages_on(1).is_empty(), "{heard:?}");
    assert!(!heard.messages_on(3).is_empty(), "{heard:?}");
    peer
}

/// Waits until the server holds `n` connections.
async fn connections_come_to(server: &pajamax::ServerHandle, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.connections() != n {
        assert!(
            Instant::now() < deadline,
            "{} connections",
            server.connections()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_whose_producer_and_handler_panic_as_dropped_with_their_closed_connection_harm_no_other_connection(
) {
    let server = start(pajamax::Server::builder());
    let other = connect(&server).await;
    still_served(&[&other]).await;
    let addr = server.local_addr();
    let peer = tokio::task::spawn_blocking(move || peer_with_open_calls(addr))
        .await
        .unwrap();
    connections_come_to(&server, 2).await;
    drop(peer);
    connections_come_to(&server, 1).await;
    still_served(&[&other]).await;
    common::stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_whose_producer_and_handler_panic_as_dropped_with_their_failed_connection_harm_no_other_connection(
) {
    let server = start(pajamax::Server::builder());
    let other = connect(&server).await;
    still_served(&[&other]).await;
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = peer_with_open_calls(addr);
        // A WINDOW_UPDATE of 0 on the connection: PROTOCOL_ERROR, and the
        // connection's calls are forgotten.
        peer.send(&Frame::window_update(0, 0).to_bytes()).unwrap();
        peer.listen_for_goaway(Duration::from_secs(10))
    })
    .await
    .unwrap();
    assert!(heard.goaway.is_some(), "{heard:?}");
    still_served(&[&other]).await;
    common::stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_whose_producer_and_handler_panic_as_dropped_at_the_end_of_a_shutdown_end_unavailable(
) {
    let server = start(pajamax::Server::builder().shutdown_grace(Duration::from_millis(200)));
    let channel = connect(&server).await;
    let ticks = open_ticks(&channel, ticks_every(5)).await;
    let (send, answers) = open_echo(&channel).await;
    let stopping = tokio::spawn(common::stop(server));
    let (_, ticks_end, _) = in_time(streams::collect(ticks)).await;
    let (_, echo_end, _) = in_time(streams::collect(answers)).await;
    drop(send);
    for end in [ticks_end, echo_end] {
        let status = ended_with(end, tonic::Code::Unavailable);
        assert!(status.message().contains("shutting down"), "{status:?}");
    }
    in_time(stopping).await.unwrap();
}
