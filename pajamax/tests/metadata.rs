//! Response metadata a handler sets, as tonic's client and a raw peer see
//! it: names HTTP/2 forbids in a response, and error details.

mod common;

use common::{connect, text, ProbeReply, ProbeRequest};
use pajamax::{Context, Reply, Service, Status};
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;

/// A service whose handler sets the metadata its request lists.
struct Setter;

impl Service for Setter {
    fn name(&self) -> &'static str {
        "test.Setter"
    }

    fn methods(&self) -> &'static [pajamax::Method] {
        const METHODS: [pajamax::Method; 1] = [pajamax::Method::unary("Set")];
        &METHODS
    }

    /// The request's text is lines `h name value` (a response header) or
    /// `t name value` (a trailer); `mirror` sets the whole request metadata
    /// as both; `fail` ends the call with `NOT_FOUND`. A key the metadata
    /// refuses is left out.
    fn unary(
        &self,
        _method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        let req: ProbeRequest = pajamax::decode_request(request)?;
        if req.text.lines().any(|line| line == "mirror") {
            let metadata = ctx.metadata().clone();
            *ctx.trailers_mut() = metadata.clone();
            *ctx.headers_mut() = metadata;
        }
        let mut refused = Vec::new();
        for line in req.text.lines() {
            let mut parts = line.splitn(3, ' ');
            let (Some(to), Some(name), value) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let value = value.unwrap_or("");
            let inserted = match to {
                "h" => ctx.headers_mut().insert(name, value),
                "t" => ctx.trailers_mut().insert(name, value),
                _ => continue,
            };
            if inserted.is_err() {
                refused.push(name.to_owned());
            }
        }
        if req.text.lines().any(|line| line == "fail") {
            return Err(Status::not_found("as asked"));
        }
        reply.encode(&ProbeReply {
            text: refused.join(","),
            ..Default::default()
        });
        Ok(())
    }
}

/// A server of one worker serving `service` on a free loopback port.
fn serve(service: impl Service) -> pajamax::ServerHandle {
    pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(service)
        .bind("127.0.0.1:0")
        .unwrap()
}

async fn set(
    channel: tonic::transport::Channel,
    lines: &str,
) -> Result<tonic::Response<ProbeReply>, tonic::Status> {
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<ProbeRequest, ProbeReply>::default();
    let path = PathAndQuery::from_static("/test.Setter/Set");
    client.unary(text(lines), path, codec).await
}

/// RFC 9113 section 8.2.2: a response with a connection-specific field
/// (or `te` other than `trailers`) is malformed, and the client drops the
/// call. Such names cannot be set, so a handler that tries still answers.
#[tokio::test]
async fn connection_specific_names_are_refused_so_the_call_still_answers() {
    let server = serve(Setter);
    let channel = connect(&server).await;
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "te",
    ] {
        for to in ["h", "t"] {
            let lines = format!("{to} {name} close\n{to} x-ok yes");
            let reply = set(channel.clone(), &lines)
                .await
                .unwrap_or_else(|status| panic!("{to} {name}: {status:?}"));
            assert_eq!(reply.get_ref().text, name, "{to} {name} is refused");
        }
        // And on an error answer (trailers-only).
        let status = set(channel.clone(), &format!("t {name} close\nfail"))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{name}: {status:?}");
    }
    // The fields gRPC owns in a response cannot be set twice either.
    for name in ["content-type", "content-length"] {
        let reply = set(channel.clone(), &format!("h {name} text/plain"))
            .await
            .unwrap();
        assert_eq!(reply.get_ref().text, name);
    }
    common::stop(server).await;
}

/// A service whose handler fails with the details its request carries.
struct Detailed;

impl Service for Detailed {
    fn name(&self) -> &'static str {
        "test.Detailed"
    }

    fn methods(&self) -> &'static [pajamax::Method] {
        const METHODS: [pajamax::Method; 1] = [pajamax::Method::unary("Fail")];
        &METHODS
    }

    /// Fails with `INVALID_ARGUMENT`, the request's text as message and its
    /// blob as details.
    fn unary(
        &self,
        _method: usize,
        _ctx: &mut Context<'_>,
        request: &[u8],
        _reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        let req: ProbeRequest = pajamax::decode_request(request)?;
        Err(Status::with_details(
            pajamax::Code::InvalidArgument,
            req.text,
            req.blob,
        ))
    }
}

/// Rich error details reach tonic's `Status::details`, decoded from
/// `grpc-status-details-bin`, beside a percent-encoded message.
#[tokio::test]
async fn error_details_reach_the_client() {
    let server = serve(Detailed);
    let channel = connect(&server).await;
    for details in [vec![8, 3, 18, 1, 0xff], vec![1], vec![]] {
        let mut client = tonic::client::Grpc::new(channel.clone());
        client.ready().await.expect("ready");
        let codec = tonic_prost::ProstCodec::<ProbeRequest, ProbeReply>::default();
        let request = tonic::Request::new(ProbeRequest {
            text: "50% \u{2713}\nbad".into(),
            blob: details.clone(),
            ..Default::default()
        });
        let path = PathAndQuery::from_static("/test.Detailed/Fail");
        let status = client.unary(request, path, codec).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert_eq!(status.message(), "50% \u{2713}\nbad");
        assert_eq!(status.details(), &details[..]);
    }
    common::stop(server).await;
}

/// A status message that starts or ends with a space goes with those
/// spaces percent-encoded: an HTTP/2 field value must not start or end
/// with one (RFC 9113 section 8.2.1), and a client that holds to it drops
/// the field, or the whole answer. The message reads back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_with_spaces_at_its_ends_goes_as_a_valid_field_value() {
    use common::raw::RawPeer;
    use prost::Message;

    let server = serve(Detailed);
    let addr = server.local_addr();
    let text = " failed:  ";
    let blocks = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let message = ProbeRequest {
            text: text.into(),
            ..Default::default()
        }
        .encode_to_vec();
        let bytes = peer.request(1, "/test.Detailed/Fail", &message);
        peer.send(&bytes);
        // The peer's own reading, which keeps the header blocks.
        let heard = pajamax_test_peer::TcpClient::listen(&mut peer, Duration::from_secs(10), |h| {
            !h.statuses.is_empty()
        });
        heard.blocks
    })
    .await
    .unwrap();
    let sent = blocks
        .iter()
        .find_map(|block| block.get("grpc-message"))
        .unwrap_or_else(|| panic!("{blocks:?}"));
    assert_eq!(sent, b"%20failed: %20");

    let channel = connect(&server).await;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<ProbeRequest, ProbeReply>::default();
    let path = PathAndQuery::from_static("/test.Detailed/Fail");
    let status = client
        .unary(
            tonic::Request::new(ProbeRequest {
                text: text.into(),
                ..Default::default()
            }),
            path,
            codec,
        )
        .await
        .unwrap_err();
    assert_eq!(status.message(), text);
    common::stop(server).await;
}

/// A client's SETTINGS_MAX_HEADER_LIST_SIZE bounds the header blocks it
/// takes (RFC 9113 section 6.5.2; grpc-java advertises 8 KiB): an answer
/// whose metadata would pass it ends `INTERNAL`, without the metadata,
/// instead of a block the client refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_past_the_clients_header_list_limit_ends_internal() {
    use common::raw::RawPeer;
    use pajamax::h2::frame::setting;
    use prost::Message;

    let server = serve(Setter);
    let addr = server.local_addr();
    let big = "a".repeat(2000);
    let asks = [
        (1, format!("t x-big {big}")),
        (3, format!("t x-big {big}\nfail")),
        (5, format!("h x-big {big}")),
        (7, "t x-ok yes\nh x-ok yes".to_string()),
    ];
    let (heard, blocks) = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::MAX_HEADER_LIST_SIZE, 1024)]);
        let mut bytes = Vec::new();
        for (stream, lines) in &asks {
            let message = ProbeRequest {
                text: lines.clone(),
                ..Default::default()
            }
            .encode_to_vec();
            bytes.extend(peer.request(*stream, "/test.Setter/Set", &message));
        }
        peer.send(&bytes);
        // The peer's own reading keeps the header blocks (`RawPeer::listen`
        // takes them away).
        let heard = pajamax_test_peer::TcpClient::listen(&mut peer, Duration::from_secs(10), |h| {
            h.statuses.len() == 4
        });
        (common::raw::Heard::from(&heard), heard.blocks)
    })
    .await
    .unwrap();
    for stream in [1, 3, 5] {
        assert_eq!(
            heard
                .statuses
                .iter()
                .find(|s| s.0 == stream)
                .map(|s| s.1.as_str()),
            Some("13"),
            "stream {stream}: {heard:?}"
        );
    }
    assert_eq!(
        heard
            .statuses
            .iter()
            .find(|s| s.0 == 7)
            .map(|s| s.1.as_str()),
        Some("0")
    );
    assert!(blocks.len() >= 4, "{blocks:?}");
    for block in &blocks {
        let size: usize = block
            .fields
            .iter()
            .map(|(n, v)| n.len() + v.len() + 32)
            .sum();
        assert!(
            size <= 1024,
            "a block of {size} bytes on stream {}",
            block.stream
        );
    }
    common::stop(server).await;
}

/// A server stream whose initial metadata would pass the client's header
/// list size limit: its headers go without it, and the call ends
/// `INTERNAL`, its producer dropped or its thread told, as grpc-go resets
/// such a stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_headers_past_the_clients_header_list_limit_end_the_call_internal() {
    use common::raw::RawPeer;
    use common::streams::{self, Ask};
    use pajamax::h2::frame::setting;
    use prost::Message;
    use std::sync::atomic::Ordering;

    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let ask = |header_size| {
        Ask {
            endless: true,
            interval_ms: 1,
            header_size,
            ..Ask::default()
        }
        .encode_to_vec()
    };
    let (heard, blocks) = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::MAX_HEADER_LIST_SIZE, 1024)]);
        let mut bytes = peer.request(1, "/test.Streams/Count", &ask(2000));
        bytes.extend(peer.request(3, "/test.Streams/CountThread", &ask(2000)));
        peer.send(&bytes);
        // The peer's own reading keeps the header blocks (`RawPeer::listen`
        // takes them away).
        let heard = pajamax_test_peer::TcpClient::listen(&mut peer, Duration::from_secs(10), |h| {
            h.statuses.len() == 2
        });
        (common::raw::Heard::from(&heard), heard.blocks)
    })
    .await
    .unwrap();
    let mut statuses = heard.statuses.clone();
    statuses.sort();
    assert_eq!(statuses, [(1, "13".into()), (3, "13".into())], "{heard:?}");
    assert!(blocks.len() >= 2, "{blocks:?}");
    for block in &blocks {
        let size: usize = block
            .fields
            .iter()
            .map(|(n, v)| n.len() + v.len() + 32)
            .sum();
        assert!(size <= 1024, "a block of {size} bytes: {block:?}");
    }
    for _ in 0..500 {
        if seen.sends_cancelled.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(seen.producers_dropped_early.load(Ordering::SeqCst), 1);
    common::stop(server).await;
}

/// A service whose handler sends each request entry named `x-echo-*`
/// back as a response header, as it came (whatever its bytes), borrowing
/// the request's values while it sets them (no copy of them first).
struct Echoer;

impl Service for Echoer {
    fn name(&self) -> &'static str {
        "test.Echoer"
    }

    fn methods(&self) -> &'static [pajamax::Method] {
        const METHODS: [pajamax::Method; 1] = [pajamax::Method::unary("Echo")];
        &METHODS
    }

    fn unary(
        &self,
        _method: usize,
        ctx: &mut Context<'_>,
        _request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        let request = ctx.metadata();
        for (name, value) in request.iter() {
            if name.starts_with("x-echo-") {
                ctx.headers_mut().insert_raw(name, value).unwrap();
            }
        }
        if let Some(id) = request.get("x-request-id") {
            ctx.trailers_mut().insert("x-request-id", id).unwrap();
        }
        reply.encode(&ProbeReply::default());
        Ok(())
    }
}

/// The request metadata lives as long as the context, not as one borrow
/// of it: a handler sets response metadata from it without copying it.
#[tokio::test]
async fn request_metadata_is_borrowed_while_response_metadata_is_set() {
    let server = serve(Echoer);
    let channel = connect(&server).await;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<ProbeRequest, ProbeReply>::default();
    let mut request = text("");
    request
        .metadata_mut()
        .insert("x-echo-a", "one".parse().unwrap());
    request
        .metadata_mut()
        .insert("x-request-id", "r-7".parse().unwrap());
    // Values a request may carry past printable ASCII come back as sent.
    let latin = tonic::metadata::AsciiMetadataValue::try_from(&b"caf\xe9 \tau lait"[..]).unwrap();
    request.metadata_mut().insert("x-echo-latin", latin);
    request.metadata_mut().insert_bin(
        "x-echo-b-bin",
        tonic::metadata::BinaryMetadataValue::from_bytes(&[0xfb, 0xff]),
    );
    let path = PathAndQuery::from_static("/test.Echoer/Echo");
    let response = client.unary(request, path, codec).await.unwrap();
    assert_eq!(response.metadata().get("x-echo-a").unwrap(), "one");
    assert_eq!(
        response.metadata().get("x-echo-latin").unwrap().as_bytes(),
        b"caf\xe9 \tau lait"
    );
    assert_eq!(
        response
            .metadata()
            .get_bin("x-echo-b-bin")
            .unwrap()
            .to_bytes()
            .unwrap(),
        &[0xfb, 0xff][..]
    );
    assert_eq!(response.metadata().get("x-request-id").unwrap(), "r-7");
    common::stop(server).await;
}

/// Request metadata sent back whole (a copy of `ctx.metadata()`) holds
/// what the client sent, names no handler can set among them: `grpc-status`
/// and `grpc-message` from the client would go out beside the server's
/// own, and a client would read the call's outcome from them. Names
/// starting with `grpc-` are left out of the answer (tonic leaves out
/// `grpc-status` and `grpc-message`, grpc-go its reserved names); the
/// others go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_names_in_request_metadata_sent_back_are_left_out() {
    use common::raw::RawPeer;
    use pajamax_test_peer::Frame;
    use prost::Message;

    let server = serve(Setter);
    let addr = server.local_addr();
    let blocks = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let extra = [
            ("grpc-status", "7"),
            ("grpc-message", "from the client"),
            ("grpc-previous-rpc-attempts", "1"),
            ("x-kept", "yes"),
        ];
        let mut bytes = Vec::new();
        for (stream, text) in [(1, "mirror"), (3, "mirror\nfail")] {
            let block = peer.request_block("/test.Setter/Set", &extra);
            Frame::headers(stream, &block, false).write(&mut bytes);
            let message = ProbeRequest {
                text: text.into(),
                ..Default::default()
            }
            .encode_to_vec();
            Frame::data(stream, &pajamax_test_peer::grpc::message(&message), true)
                .write(&mut bytes);
        }
        peer.send(&bytes);
        let heard = pajamax_test_peer::TcpClient::listen(&mut peer, Duration::from_secs(10), |h| {
            h.statuses.len() == 2
        });
        heard.blocks
    })
    .await
    .unwrap();
    for (stream, status) in [(1, "0"), (3, "5")] {
        let blocks: Vec<_> = blocks.iter().filter(|b| b.stream == stream).collect();
        let fields: Vec<(String, String)> = blocks.iter().flat_map(|b| b.strings()).collect();
        let named = |name: &str| {
            fields
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            named("grpc-status"),
            [status],
            "stream {stream}: {fields:?}"
        );
        let message: &[&str] = if status == "0" { &[] } else { &["as asked"] };
        assert_eq!(named("grpc-message"), message, "stream {stream}");
        assert!(
            named("grpc-previous-rpc-attempts").is_empty(),
            "stream {stream}"
        );
        // Sent back with the headers and with the trailers (in one block
        // for the trailers-only answer).
        assert_eq!(named("x-kept"), ["yes", "yes"], "stream {stream}");
    }
    common::stop(server).await;
}
