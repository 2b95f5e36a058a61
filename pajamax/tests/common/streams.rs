//! A hand-written service with a method of every kind, each served on the
//! worker and on a thread of its own, and tonic client helpers for it.

use pajamax::grpc::streaming::{RawInbound, RawServerStream};
use pajamax::{
    BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Context, Method, MethodKind, Next,
    Producer, Responses, ServerStream, Service, Status,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

/// What a streaming call is asked to do.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Ask {
    /// Messages to send; 0 with `endless` for no end.
    #[prost(uint32, tag = "1")]
    pub count: u32,
    /// Bytes of `Item::blob` in each answer.
    #[prost(uint32, tag = "2")]
    pub size: u32,
    /// Time between answers, in milliseconds.
    #[prost(uint32, tag = "3")]
    pub interval_ms: u32,
    /// Send until cancelled.
    #[prost(bool, tag = "4")]
    pub endless: bool,
    /// A value carried along (summed, echoed).
    #[prost(uint64, tag = "5")]
    pub value: u64,
    /// End the call with this status code after the messages.
    #[prost(int32, tag = "6")]
    pub fail_code: i32,
    /// Bytes of an `x-big` response header (server streaming), if any.
    /// (Tag 7 is the blob some tests send along.)
    #[prost(uint32, tag = "8")]
    pub header_size: u32,
}

/// One answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Item {
    #[prost(uint64, tag = "1")]
    pub value: u64,
    #[prost(bytes = "vec", tag = "2")]
    pub blob: Vec<u8>,
}

/// Counters the tests read: how producers ended.
#[derive(Debug, Default)]
pub struct Seen {
    /// Producers on the worker dropped before their end.
    pub producers_dropped_early: AtomicUsize,
    /// Threads whose sink reported the call ended.
    pub sends_cancelled: AtomicUsize,
    /// Threads that finished their work.
    pub threads_done: AtomicUsize,
    /// Request handlers on the worker dropped before the client's end.
    pub handlers_dropped_early: AtomicUsize,
    /// Threads that saw their call end while they held its requests.
    pub hoarders_cancelled: AtomicUsize,
    /// Threads of `Deaf` calls that saw their call end.
    pub deaf_ended: AtomicUsize,
    /// Threads of `SumFirst` calls whose requests ended after the answer.
    pub first_readers_ended: AtomicUsize,
    /// The statuses `SumThread` threads read from their requests.
    pub sum_thread_errors: std::sync::Mutex<Vec<pajamax::Code>>,
}

impl Seen {
    /// How many threads finished their work, once `n` have or after ten
    /// seconds: a thread counts itself right after its call's end, which
    /// the client may see first.
    #[allow(dead_code)]
    pub fn threads_done_by(&self, n: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let done = self.threads_done.load(Ordering::SeqCst);
            if done >= n || Instant::now() > deadline {
                return done;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A `test.Streams` request with a blob `Ask` does not know, so that its
/// size counts.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PaddedAsk {
    /// `Ask::interval_ms`: the thread waits this long before the next.
    #[prost(uint32, tag = "3")]
    pub interval_ms: u32,
    /// `Ask::value`.
    #[prost(uint64, tag = "5")]
    pub value: u64,
    #[prost(bytes = "vec", tag = "7")]
    pub blob: Vec<u8>,
}

/// The service, `test.Streams`.
pub struct Streams {
    pub seen: Arc<Seen>,
}

pub const METHODS: &[Method] = &[
    Method {
        name: "Count",
        kind: MethodKind::ServerStreaming,
    },
    Method {
        name: "CountThread",
        kind: MethodKind::ServerStreaming,
    },
    Method {
        name: "Sum",
        kind: MethodKind::ClientStreaming,
    },
    Method {
        name: "SumThread",
        kind: MethodKind::ClientStreaming,
    },
    Method {
        name: "Echo",
        kind: MethodKind::BidiStreaming,
    },
    Method {
        name: "EchoThread",
        kind: MethodKind::BidiStreaming,
    },
    Method {
        name: "Unary",
        kind: MethodKind::Unary,
    },
    Method {
        name: "Hoard",
        kind: MethodKind::ClientStreaming,
    },
    Method {
        name: "Deaf",
        kind: MethodKind::BidiStreaming,
    },
    Method {
        name: "SumFirst",
        kind: MethodKind::ClientStreaming,
    },
];

fn item(value: u64, size: u32) -> Item {
    Item {
        value,
        blob: vec![value as u8; size as usize],
    }
}

fn end_status(code: i32) -> Result<(), Status> {
    if code == 0 {
        Ok(())
    } else {
        Err(Status::new(pajamax::Code::from_i32(code), "asked to fail"))
    }
}

/// `Count` on the worker: paced or not, endless or not.
struct Counter {
    ask: Ask,
    sent: u32,
    due: Option<Instant>,
    ended: bool,
    seen: Arc<Seen>,
}

impl Producer<Item> for Counter {
    fn next(&mut self, now: Instant) -> Next<Item> {
        if !self.ask.endless && self.sent == self.ask.count {
            self.ended = true;
            return Next::End(end_status(self.ask.fail_code));
        }
        if self.ask.interval_ms > 0 {
            match self.due {
                Some(due) if due > now => return Next::Wait(due),
                _ => self.due = Some(now + Duration::from_millis(u64::from(self.ask.interval_ms))),
            }
        }
        self.sent += 1;
        Next::Message(item(u64::from(self.sent), self.ask.size))
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        if !self.ended {
            self.seen
                .producers_dropped_early
                .fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// `Sum` on the worker.
struct Summer(u64, u32, Option<Arc<Seen>>);

impl Drop for Summer {
    fn drop(&mut self) {
        if let Some(seen) = &self.2 {
            seen.handlers_dropped_early.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl ClientStreamHandler<Ask, Item> for Summer {
    fn on_message(&mut self, _ctx: &mut Context<'_>, ask: Ask) -> Result<(), Status> {
        if ask.fail_code != 0 {
            return end_status(ask.fail_code);
        }
        self.0 += ask.value;
        self.1 += 1;
        Ok(())
    }

    fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<Item, Status> {
        self.2 = None;
        ctx.trailers_mut()
            .insert("x-count", &self.1.to_string())
            .unwrap();
        Ok(item(self.0, 0))
    }
}

/// `Echo` on the worker: every ask is answered with `count` items (1 if
/// 0) carrying its value.
struct Echoer;

impl BidiHandler<Ask, Item> for Echoer {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        ask: Ask,
        responses: &mut Responses<'_, Item>,
    ) -> Result<(), Status> {
        if ask.fail_code != 0 {
            return end_status(ask.fail_code);
        }
        for _ in 0..ask.count.max(1) {
            responses.send(&item(ask.value, ask.size));
        }
        Ok(())
    }

    fn on_end(
        &mut self,
        ctx: &mut Context<'_>,
        _responses: &mut Responses<'_, Item>,
    ) -> Result<(), Status> {
        ctx.trailers_mut().insert("x-end", "seen").unwrap();
        Ok(())
    }
}

impl Service for Streams {
    fn name(&self) -> &'static str {
        "test.Streams"
    }

    fn methods(&self) -> &'static [Method] {
        METHODS
    }

    fn unary(
        &self,
        _method: usize,
        _ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut pajamax::Reply<'_>,
    ) -> Result<(), Status> {
        let ask: Ask = pajamax::decode_request(request)?;
        reply.encode(&item(ask.value, ask.size));
        Ok(())
    }

    fn server_streaming(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let ask: Ask = pajamax::decode_request(request)?;
        ctx.headers_mut().insert("x-kind", "server").unwrap();
        if ask.header_size > 0 {
            let big = "b".repeat(ask.header_size as usize);
            ctx.headers_mut().insert("x-big", &big).unwrap();
        }
        match METHODS[method].name {
            "Count" => Ok(ServerStream::from_producer(Counter {
                ask,
                sent: 0,
                due: None,
                ended: false,
                seen: self.seen.clone(),
            })
            .into_raw()),
            "CountThread" => {
                let (stream, mut sink) = ServerStream::<Item>::channel(ctx);
                let seen = self.seen.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while ask.endless || n < u64::from(ask.count) {
                        n += 1;
                        if ask.interval_ms > 0 {
                            std::thread::sleep(Duration::from_millis(u64::from(ask.interval_ms)));
                        }
                        if sink.send(&item(n, ask.size)).is_err() {
                            seen.sends_cancelled.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                    sink.trailers_mut()
                        .insert("x-sent", &n.to_string())
                        .unwrap();
                    sink.finish(end_status(ask.fail_code));
                    seen.threads_done.fetch_add(1, Ordering::SeqCst);
                });
                Ok(stream.into_raw())
            }
            _ => Err(Status::unimplemented("no such method")),
        }
    }

    fn client_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        match METHODS[method].name {
            "Sum" => Ok(ClientStream::on_worker(Summer(0, 0, Some(self.seen.clone()))).into_raw()),
            "Hoard" => {
                // Takes the requests to a thread that never reads them.
                let (stream, requests, responder) = ClientStream::<Ask, Item>::channel(ctx);
                let seen = self.seen.clone();
                std::thread::spawn(move || {
                    while !requests.is_cancelled() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    seen.hoarders_cancelled.fetch_add(1, Ordering::SeqCst);
                    drop(responder);
                });
                Ok(stream.into_raw())
            }
            "SumFirst" => {
                // Answers with the first request, then reads on to the
                // end of the requests.
                let (stream, mut requests, responder) = ClientStream::<Ask, Item>::channel(ctx);
                let seen = self.seen.clone();
                std::thread::spawn(move || {
                    let first = requests.next().unwrap_or(Ok(Ask::default()));
                    responder.respond(first.map(|ask| item(ask.value, 0)));
                    for _ in requests {}
                    seen.first_readers_ended.fetch_add(1, Ordering::SeqCst);
                });
                Ok(stream.into_raw())
            }
            "SumThread" => {
                let (stream, requests, mut responder) = ClientStream::<Ask, Item>::channel(ctx);
                let seen = self.seen.clone();
                std::thread::spawn(move || {
                    let mut sum = 0;
                    let mut count = 0;
                    for ask in requests {
                        match ask {
                            Ok(ask) => {
                                if ask.interval_ms > 0 {
                                    std::thread::sleep(Duration::from_millis(u64::from(
                                        ask.interval_ms,
                                    )));
                                }
                                sum += ask.value;
                                count += 1;
                            }
                            Err(status) => {
                                seen.sum_thread_errors.lock().unwrap().push(status.code());
                                return responder.respond::<Item>(Err(status));
                            }
                        }
                    }
                    responder
                        .trailers_mut()
                        .insert("x-count", &count.to_string())
                        .unwrap();
                    responder.respond(Ok(item(sum, 0)));
                    seen.threads_done.fetch_add(1, Ordering::SeqCst);
                });
                Ok(stream.into_raw())
            }
            _ => Err(Status::unimplemented("no such method")),
        }
    }

    fn bidi_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        match METHODS[method].name {
            "Echo" => Ok(BidiStream::on_worker(Echoer).into_raw()),
            "EchoThread" => {
                let (stream, requests, mut sink) = BidiStream::<Ask, Item>::channel(ctx);
                let seen = self.seen.clone();
                std::thread::spawn(move || {
                    for ask in requests {
                        let Ok(ask) = ask else {
                            return;
                        };
                        for _ in 0..ask.count.max(1) {
                            if sink.send(&item(ask.value, ask.size)).is_err() {
                                seen.sends_cancelled.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                        }
                    }
                    sink.finish(Ok(()));
                    seen.threads_done.fetch_add(1, Ordering::SeqCst);
                });
                Ok(stream.into_raw())
            }
            "Deaf" => {
                // Lets go of the requests unread, answers once, and holds
                // its sink until the call ends.
                let (stream, requests, mut sink) = BidiStream::<Ask, Item>::channel(ctx);
                drop(requests);
                let seen = self.seen.clone();
                std::thread::spawn(move || {
                    if sink.send(&item(1, 0)).is_ok() {
                        while !sink.is_cancelled() {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    }
                    seen.deaf_ended.fetch_add(1, Ordering::SeqCst);
                });
                Ok(stream.into_raw())
            }
            _ => Err(Status::unimplemented("no such method")),
        }
    }
}

/// Starts a server with the streams service (and nothing else).
pub fn start(builder: pajamax::Builder) -> (pajamax::ServerHandle, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let server = builder
        .pin_workers(false)
        .add_service(Streams { seen: seen.clone() })
        .bind("127.0.0.1:0")
        .expect("bind");
    (server, seen)
}

fn client(channel: Channel) -> tonic::client::Grpc<Channel> {
    tonic::client::Grpc::new(channel).max_decoding_message_size(64 << 20)
}

fn path(method: &str) -> PathAndQuery {
    PathAndQuery::try_from(format!("/test.Streams/{method}")).unwrap()
}

fn codec() -> tonic_prost::ProstCodec<Ask, Item> {
    tonic_prost::ProstCodec::default()
}

/// A server-streaming call.
pub async fn server_stream(
    channel: Channel,
    method: &str,
    request: tonic::Request<Ask>,
) -> Result<tonic::Response<tonic::Streaming<Item>>, tonic::Status> {
    let mut client = client(channel);
    client.ready().await.expect("ready");
    client
        .server_streaming(request, path(method), codec())
        .await
}

/// A client-streaming call sending `asks`.
pub async fn client_stream(
    channel: Channel,
    method: &str,
    asks: Vec<Ask>,
) -> Result<tonic::Response<Item>, tonic::Status> {
    let mut client = client(channel);
    client.ready().await.expect("ready");
    let request = tonic::Request::new(tokio_stream::iter(asks));
    client
        .client_streaming(request, path(method), codec())
        .await
}

/// A bidirectional call: the asks come from `requests`.
pub async fn bidi(
    channel: Channel,
    method: &str,
    requests: tokio::sync::mpsc::Receiver<Ask>,
) -> Result<tonic::Response<tonic::Streaming<Item>>, tonic::Status> {
    let mut client = client(channel);
    client.ready().await.expect("ready");
    let request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(requests));
    client.streaming(request, path(method), codec()).await
}

/// Asks `Count` and `CountThread` on `channel` for 100 MiB each (1600
/// messages of 64 KiB) and reads them with a pause every 400 messages;
/// then checks that `server` held no more for the slow reader than a
/// stream's send buffer and a message, and that its output stayed within
/// the produce limit plus one chunk, or the sinks' credit.
pub async fn read_100_mib_slowly_within_bounds(server: &pajamax::ServerHandle, channel: Channel) {
    for method in ["Count", "CountThread"] {
        let request = Ask {
            count: 1600,
            size: 64 << 10,
            ..Ask::default()
        };
        let response = server_stream(channel.clone(), method, tonic::Request::new(request))
            .await
            .unwrap();
        let mut answers = response.into_inner();
        let mut received = 0usize;
        let mut count = 0;
        while let Some(item) = answers.message().await.unwrap() {
            received += item.blob.len();
            count += 1;
            if count % 400 == 0 {
                // The client stops reading for a while.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        assert_eq!(received, 100 << 20, "{method}");
    }
    let stats = server.stats();
    assert!(stats.peak_held_bytes <= 3 * (64 << 10) + 64, "{stats:?}");
    assert!(
        stats.peak_output_bytes <= (4 << 20) + (1 << 20),
        "{stats:?}"
    );
}

/// Every message of a stream, then its end.
pub async fn collect(
    mut stream: tonic::Streaming<Item>,
) -> (
    Vec<Item>,
    Result<(), tonic::Status>,
    Option<tonic::metadata::MetadataMap>,
) {
    let mut items = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(item)) => items.push(item),
            Ok(None) => {
                let trailers = stream.trailers().await.ok().flatten();
                return (items, Ok(()), trailers);
            }
            Err(status) => return (items, Err(status), None),
        }
    }
}
