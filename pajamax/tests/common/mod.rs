//! A probe service and tonic client helpers shared by the integration tests.
#![allow(dead_code)]

use pajamax::{Context, Reply, Service, Status};
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

/// The request of every probe method.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProbeRequest {
    /// Echoed back in `ProbeReply::text`.
    #[prost(string, tag = "1")]
    pub text: String,
    /// Size of `ProbeReply::blob`.
    #[prost(uint32, tag = "2")]
    pub reply_size: u32,
    /// Carried along; its length is reported in `ProbeReply::received`.
    #[prost(bytes = "vec", tag = "3")]
    pub blob: Vec<u8>,
    /// For `Fail`: the status code to answer.
    #[prost(int32, tag = "4")]
    pub code: i32,
    /// For `Sleep`: how long to block, in milliseconds.
    #[prost(uint32, tag = "5")]
    pub sleep_ms: u32,
}

/// The answer of every probe method.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProbeReply {
    #[prost(string, tag = "1")]
    pub text: String,
    #[prost(bytes = "vec", tag = "2")]
    pub blob: Vec<u8>,
    #[prost(uint32, tag = "3")]
    pub received: u32,
    /// Milliseconds left before the deadline, or -1 without one.
    #[prost(int64, tag = "4")]
    pub remaining_ms: i64,
    #[prost(string, tag = "5")]
    pub peer: String,
}

/// A hand-written service: exercises the `Service` interface directly.
pub struct Probe;

pub const METHODS: &[&str] = &[
    "Echo",
    "Fail",
    "Panic",
    "Metadata",
    "Sleep",
    "Defer",
    "DropResponder",
];

impl Service for Probe {
    fn name(&self) -> &'static str {
        "test.Probe"
    }

    fn methods(&self) -> &'static [pajamax::Method] {
        const DESCRIBED: [pajamax::Method; METHODS.len()] = {
            let mut described = [pajamax::Method::unary(""); METHODS.len()];
            let mut i = 0;
            while i < METHODS.len() {
                described[i] = pajamax::Method::unary(METHODS[i]);
                i += 1;
            }
            described
        };
        &DESCRIBED
    }

    fn unary(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        let req: ProbeRequest = pajamax::decode_request(request)?;
        let mut answer = ProbeReply {
            text: req.text.clone(),
            blob: vec![7; req.reply_size as usize],
            received: req.blob.len() as u32,
            remaining_ms: ctx.time_remaining().map_or(-1, |d| d.as_millis() as i64),
            peer: ctx.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
        };
        match METHODS[method] {
            "Echo" => {}
            "Fail" => {
                return Err(Status::new(pajamax::Code::from_i32(req.code), req.text));
            }
            "Panic" => panic!("probe handler panics on purpose"),
            "Metadata" => {
                let user = ctx.metadata().get("x-user").unwrap_or("nobody").to_string();
                let token = ctx.metadata().get_bin("x-token-bin").unwrap_or_default();
                ctx.headers_mut().insert("x-hello", &user).unwrap();
                ctx.trailers_mut()
                    .insert_bin("x-token-bin", &token)
                    .unwrap();
                answer.text = user;
            }
            "Sleep" => std::thread::sleep(Duration::from_millis(u64::from(req.sleep_ms))),
            "Defer" => {
                // Answered from another thread after `sleep_ms`.
                let mut responder = ctx.defer();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(u64::from(req.sleep_ms)));
                    responder
                        .trailers_mut()
                        .insert("x-deferred", "yes")
                        .unwrap();
                    responder.respond(Ok(answer));
                });
                return Err(Status::unknown("ignored: the responder answers"));
            }
            "DropResponder" => {
                drop(ctx.defer());
                return Ok(());
            }
            _ => unreachable!(),
        }
        reply.encode(&answer);
        Ok(())
    }
}

/// Starts a server with the probe service on a free loopback port.
pub fn start(builder: pajamax::Builder) -> pajamax::ServerHandle {
    builder
        .pin_workers(false)
        .add_service(Probe)
        .bind("127.0.0.1:0")
        .expect("bind")
}

/// A tonic channel to `server` (one HTTP/2 connection).
pub async fn connect(server: &pajamax::ServerHandle) -> Channel {
    Endpoint::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .expect("connect")
}

/// One unary call to `/test.Probe/{method}`.
pub async fn call(
    channel: Channel,
    method: &str,
    request: tonic::Request<ProbeRequest>,
) -> Result<tonic::Response<ProbeReply>, tonic::Status> {
    call_path(channel, &format!("/test.Probe/{method}"), request).await
}

/// One unary call to any path.
pub async fn call_path(
    channel: Channel,
    path: &str,
    request: tonic::Request<ProbeRequest>,
) -> Result<tonic::Response<ProbeReply>, tonic::Status> {
    let mut client = tonic::client::Grpc::new(channel).max_decoding_message_size(64 << 20);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<ProbeRequest, ProbeReply>::default();
    let path = PathAndQuery::try_from(path.to_string()).unwrap();
    client.unary(request, path, codec).await
}

/// A request with just `text`.
pub fn text(text: &str) -> tonic::Request<ProbeRequest> {
    tonic::Request::new(ProbeRequest {
        text: text.into(),
        ..Default::default()
    })
}

/// Asserts a call failed with `code` and a message containing `text`.
pub fn assert_status(status: &tonic::Status, code: tonic::Code, text: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    assert!(
        status.message().contains(text),
        "{:?} lacks {text:?}",
        status.message()
    );
}

/// Asserts that an echo call on `channel` still goes through.
pub async fn echo_works(channel: Channel, text_sent: &str) {
    let reply = call(channel, "Echo", text(text_sent)).await.unwrap();
    assert_eq!(reply.get_ref().text, text_sent);
}

/// Shuts the server down off the async runtime, so the client can answer
/// the server's shutdown PING meanwhile.
pub async fn stop(server: pajamax::ServerHandle) {
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}

/// Sends `bytes` on `peer` and waits until each of `streams` has its
/// `grpc-status`, which must be `status`; returns what was heard.
pub fn expect_statuses(
    peer: &mut pajamax_test_peer::TcpClient,
    bytes: &[u8],
    streams: &[u32],
    status: &str,
) -> pajamax_test_peer::Heard {
    peer.send(bytes).unwrap();
    let heard = peer.listen(Duration::from_secs(10), |h| {
        h.statuses.len() == streams.len()
    });
    for &stream in streams {
        assert_eq!(
            heard.status(stream),
            Some(status),
            "stream {stream}: {heard:?}"
        );
    }
    heard
}

pub mod raw;
pub mod streams;

/// One unary `test.Streams/Unary` call, answered with `value`.
pub async fn streams_unary(
    channel: Channel,
    value: u64,
) -> Result<tonic::Response<streams::Item>, tonic::Status> {
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<streams::Ask, streams::Item>::default();
    let path = PathAndQuery::from_static("/test.Streams/Unary");
    let request = streams::Ask {
        value,
        ..Default::default()
    };
    client
        .unary(tonic::Request::new(request), path, codec)
        .await
}

/// Asserts that `channel` still carries calls, after a call on it went
/// wrong: a unary call, then a short streaming call to `method` ("Sum", a
/// client stream, or "Count", a server stream).
pub async fn echo_works_on(channel: Channel, method: &str) {
    let reply = streams_unary(channel.clone(), 42).await.unwrap();
    assert_eq!(reply.get_ref().value, 42);
    let ask = |value, count| streams::Ask {
        value,
        count,
        ..Default::default()
    };
    match method {
        "Sum" => {
            let asks = vec![ask(40, 0), ask(2, 0)];
            let reply = streams::client_stream(channel, method, asks).await.unwrap();
            assert_eq!(reply.get_ref().value, 42);
        }
        "Count" => {
            let request = tonic::Request::new(ask(0, 3));
            let response = streams::server_stream(channel, method, request)
                .await
                .unwrap();
            let (items, end, _) = streams::collect(response.into_inner()).await;
            end.unwrap();
            let values: Vec<u64> = items.iter().map(|i| i.value).collect();
            assert_eq!(values, [1, 2, 3]);
        }
        other => panic!("no short call for {other}"),
    }
}

/// Waits until `what` holds, for five seconds at most (then returns, for
/// the caller's assertion to tell what did not happen).
#[allow(dead_code)]
pub async fn wait_for(what: impl Fn() -> bool) {
    for _ in 0..500 {
        if what() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
