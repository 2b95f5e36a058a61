//! Interceptors and call observers with tonic's client.

mod common;

use common::streams::{self, server_stream, Ask, Streams};
use common::{call, connect, text, Probe};
use pajamax::grpc::intercept::{CallInfo, FinishedCall, Intercepted};
use pajamax::{Code, Context, Status};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn api_key(_: &CallInfo<'_>, ctx: &mut Context<'_>) -> Result<(), Status> {
    match ctx.metadata().get("x-api-key") {
        Some("secret") => {
            ctx.headers_mut().insert("x-checked", "yes").unwrap();
            Ok(())
        }
        _ => Err(Status::unauthenticated("a valid x-api-key is required")),
    }
}

/// Lets every call through, adding `x-checked` to its headers and
/// `x-seen` to its trailers.
fn mark(_: &CallInfo<'_>, ctx: &mut Context<'_>) -> Result<(), Status> {
    ctx.headers_mut().insert("x-checked", "yes").unwrap();
    ctx.trailers_mut().insert("x-seen", "yes").unwrap();
    Ok(())
}

/// Asserts that `metadata` holds both entries `mark` adds.
fn assert_marked(metadata: &tonic::metadata::MetadataMap) {
    assert_eq!(metadata.get("x-checked").unwrap(), "yes", "{metadata:?}");
    assert_eq!(metadata.get("x-seen").unwrap(), "yes", "{metadata:?}");
}

fn keyed(text_sent: &str, key: Option<&str>) -> tonic::Request<common::ProbeRequest> {
    let mut request = text(text_sent);
    if let Some(key) = key {
        request
            .metadata_mut()
            .insert("x-api-key", key.parse().unwrap());
    }
    request
}

/// What an observer records of each finished call (`what`), and the
/// observer that records it.
type Recorded<T> = Arc<Mutex<Vec<T>>>;

fn recorder<T: Send + 'static>(
    what: impl Fn(&FinishedCall<'_>) -> T + Send + Sync + 'static,
) -> (
    Recorded<T>,
    impl Fn(&FinishedCall<'_>) + Send + Sync + 'static,
) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let record = calls.clone();
    (calls, move |call: &FinishedCall<'_>| {
        record.lock().unwrap().push(what(call))
    })
}

#[tokio::test]
async fn an_interceptor_rejects_calls_before_their_handler_and_adds_metadata() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let infos = seen.clone();
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .intercept(move |info: &CallInfo<'_>, _: &mut Context<'_>| {
            infos
                .lock()
                .unwrap()
                .push(format!("{}/{}", info.service, info.method));
            Ok(())
        })
        .intercept(api_key)
        .add_service(Probe)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    let status = call(channel.clone(), "Echo", keyed("no key", None))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let status = call(channel.clone(), "Echo", keyed("bad key", Some("guess")))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let reply = call(channel.clone(), "Echo", keyed("good", Some("secret")))
        .await
        .unwrap();
    assert_eq!(reply.get_ref().text, "good");
    assert_eq!(reply.metadata().get("x-checked").unwrap(), "yes");
    // A streaming call passes the same interceptors.
    let status = server_stream(
        channel.clone(),
        "Count",
        tonic::Request::new(Ask::default()),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [
            "test.Probe/Echo",
            "test.Probe/Echo",
            "test.Probe/Echo",
            "test.Streams/Count"
        ]
    );
    common::stop(server).await;
}

#[tokio::test]
async fn a_rejected_call_never_reaches_its_handler() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1).intercept(
        |_: &CallInfo<'_>, _: &mut Context<'_>| Err(Status::permission_denied("closed")),
    ));
    let channel = connect(&server).await;
    let mut request = tonic::Request::new(Ask {
        count: 5,
        ..Ask::default()
    });
    request.set_timeout(Duration::from_secs(5));
    let status = server_stream(channel.clone(), "CountThread", request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    tokio::time::sleep(Duration::from_millis(50)).await;
    // CountThread's handler starts a thread that counts itself done, or
    // counts its sends cancelled if the call ended under it.
    assert_eq!(seen.threads_done.load(Ordering::SeqCst), 0);
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 0);
    common::stop(server).await;
}

#[tokio::test]
async fn an_intercepted_service_is_the_only_one_checked() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Intercepted::new(Probe, api_key))
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    let status = call(channel.clone(), "Echo", keyed("x", None))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(call(channel.clone(), "Echo", keyed("x", Some("secret")))
        .await
        .is_ok());
    // The other service does not ask for a key.
    let reply = common::streams_unary(channel, 5).await.unwrap();
    assert_eq!(reply.get_ref().value, 5);
    common::stop(server).await;
}

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    method: String,
    code: Code,
    request_bytes: u64,
    response_bytes: u64,
}

#[tokio::test]
async fn observers_see_every_answered_call() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let record = calls.clone();
    let longest = Arc::new(AtomicUsize::new(0));
    let slowest = longest.clone();
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .observe(move |call: &FinishedCall<'_>| {
            slowest.fetch_max(call.duration.as_millis() as usize, Ordering::SeqCst);
            record.lock().unwrap().push(Seen {
                method: format!("{}/{}", call.service, call.method),
                code: call.code,
                request_bytes: call.request_bytes,
                response_bytes: call.response_bytes,
            });
        })
        .add_service(Probe)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    call(channel.clone(), "Echo", text("hi")).await.unwrap();
    let mut failing = text("no");
    failing.get_mut().code = 5;
    call(channel.clone(), "Fail", failing).await.unwrap_err();
    let sleepy = tonic::Request::new(common::ProbeRequest {
        sleep_ms: 30,
        ..Default::default()
    });
    call(channel.clone(), "Sleep", sleepy).await.unwrap();
    let response = server_stream(
        channel.clone(),
        "Count",
        tonic::Request::new(Ask {
            count: 3,
            size: 10,
            ..Ask::default()
        }),
    )
    .await
    .unwrap();
    let (items, end, _) = streams::collect(response.into_inner()).await;
    end.unwrap();
    assert_eq!(items.len(), 3);
    common::call_path(channel.clone(), "/test.Probe/Nope", text("?"))
        .await
        .unwrap_err();
    // Published on the worker after each answer; wait for the last one.
    for _ in 0..100 {
        if calls.lock().unwrap().len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let calls = calls.lock().unwrap().clone();
    let methods: Vec<_> = calls.iter().map(|c| (c.method.as_str(), c.code)).collect();
    assert_eq!(
        methods,
        [
            ("test.Probe/Echo", Code::Ok),
            ("test.Probe/Fail", Code::NotFound),
            ("test.Probe/Sleep", Code::Ok),
            ("test.Streams/Count", Code::Ok),
            ("test.Probe/Nope", Code::Unimplemented),
        ]
    );
    // "hi" as a ProbeRequest: 4 bytes, plus the prefix; the reply echoes it.
    assert_eq!(calls[0].request_bytes, 4 + 5);
    assert!(calls[0].response_bytes > 5);
    // Three items of 10 bytes, each 2 + 10 + 2 encoded, prefixed.
    assert_eq!(calls[3].response_bytes, 3 * (14 + 5));
    assert!(
        longest.load(Ordering::SeqCst) >= 30,
        "the sleep is in the duration"
    );
    common::stop(server).await;
}

/// A call whose deadline passes before its handler runs is answered
/// `DEADLINE_EXCEEDED` all the same, and observers see it: one whose
/// `grpc-timeout` is over on arrival (unary and client-streaming), and one
/// whose deadline passes while it waits for its request body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_see_calls_whose_deadline_passed_before_their_handler() {
    use common::raw::RawPeer;
    use pajamax_test_peer::Frame;

    let (calls, observer) =
        recorder(|call| (format!("{}/{}", call.service, call.method), call.code));
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .observe(observer)
        .add_service(Probe)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let over = [("grpc-timeout", "0n")];
        let mut bytes = Vec::new();
        // A whole unary request, over on arrival.
        let block = peer.request_block("/test.Probe/Echo", &over);
        Frame::headers(1, &block, false).write(&mut bytes);
        Frame::data(1, &pajamax_test_peer::grpc::message(&[]), true).write(&mut bytes);
        // A client stream, over on arrival.
        let block = peer.request_block("/test.Streams/Sum", &over);
        Frame::headers(3, &block, false).write(&mut bytes);
        // A unary request whose body never comes; its deadline passes.
        let block = peer.request_block("/test.Probe/Echo", &[("grpc-timeout", "1m")]);
        Frame::headers(5, &block, false).write(&mut bytes);
        peer.send(&bytes);
        peer.listen(Duration::from_secs(10), |h| h.statuses.len() == 3)
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
            Some("4"),
            "{heard:?}"
        );
    }
    // Observers run on the worker before its answers are written.
    let mut seen = calls.lock().unwrap().clone();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [
            ("test.Probe/Echo".to_string(), Code::DeadlineExceeded),
            ("test.Probe/Echo".to_string(), Code::DeadlineExceeded),
            ("test.Streams/Sum".to_string(), Code::DeadlineExceeded),
        ]
    );
    common::stop(server).await;
}

/// The response metadata an interceptor adds goes out on every kind of
/// call, served on the worker or on a thread: the headers with the
/// answer's headers, the trailers with its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptor_metadata_reaches_every_kind_of_call() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1).intercept(mark));
    let channel = connect(&server).await;
    let ask = |count| Ask {
        count,
        value: 1,
        ..Ask::default()
    };
    for method in ["Count", "CountThread"] {
        let response = server_stream(channel.clone(), method, tonic::Request::new(ask(2)))
            .await
            .unwrap();
        assert_eq!(
            response.metadata().get("x-checked").unwrap(),
            "yes",
            "{method}"
        );
        let (items, end, trailers) = streams::collect(response.into_inner()).await;
        end.unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(trailers.unwrap().get("x-seen").unwrap(), "yes", "{method}");
    }
    for method in ["Sum", "SumThread"] {
        let reply = streams::client_stream(channel.clone(), method, vec![ask(0), ask(0)])
            .await
            .unwrap();
        assert_eq!(
            reply.metadata().get("x-checked").unwrap(),
            "yes",
            "{method}"
        );
        assert_eq!(reply.metadata().get("x-seen").unwrap(), "yes", "{method}");
    }
    for method in ["Echo", "EchoThread"] {
        let (send, requests) = tokio::sync::mpsc::channel(4);
        send.send(ask(0)).await.unwrap();
        drop(send);
        let response = streams::bidi(channel.clone(), method, requests)
            .await
            .unwrap();
        assert_eq!(
            response.metadata().get("x-checked").unwrap(),
            "yes",
            "{method}"
        );
        let (_, end, trailers) = streams::collect(response.into_inner()).await;
        end.unwrap();
        assert_eq!(trailers.unwrap().get("x-seen").unwrap(), "yes", "{method}");
    }
    // A stream that fails: the metadata comes with the status.
    let mut failing = ask(0);
    failing.fail_code = 5;
    let status = server_stream(channel.clone(), "Count", tonic::Request::new(failing))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(status.metadata().get("x-seen").unwrap(), "yes");
    assert_eq!(status.metadata().get("x-checked").unwrap(), "yes");
    common::stop(server).await;
}

/// A compressed request message counts in `FinishedCall::request_bytes`
/// inflated, as the handler takes it, on every kind of call: the same
/// messages count the same whether they go to a unary call or a stream.
#[tokio::test]
async fn observers_count_compressed_requests_inflated_on_every_kind_of_call() {
    use common::streams::{Item, PaddedAsk};
    use prost::Message;
    use tonic::codec::CompressionEncoding;
    use tonic::codegen::http::uri::PathAndQuery;

    let (calls, observer) =
        recorder(|call| (call.method.to_string(), call.code, call.request_bytes));
    let (server, _) = streams::start(pajamax::Server::builder().workers(1).observe(observer));
    let channel = connect(&server).await;
    // Compresses well: what goes on the wire is far smaller.
    let ask = PaddedAsk {
        interval_ms: 0,
        value: 1,
        blob: vec![7; 4000],
    };
    let framed = ask.encoded_len() as u64 + 5;
    let client = || async {
        let mut client =
            tonic::client::Grpc::new(channel.clone()).send_compressed(CompressionEncoding::Gzip);
        client.ready().await.unwrap();
        client
    };
    let codec = || tonic_prost::ProstCodec::<PaddedAsk, Item>::default();
    let path = |method: &str| PathAndQuery::try_from(format!("/test.Streams/{method}")).unwrap();
    client()
        .await
        .unary(tonic::Request::new(ask.clone()), path("Unary"), codec())
        .await
        .unwrap();
    for method in ["Sum", "SumThread"] {
        let asks = tokio_stream::iter(vec![ask.clone(), ask.clone()]);
        let sum = client()
            .await
            .client_streaming(tonic::Request::new(asks), path(method), codec())
            .await
            .unwrap();
        assert_eq!(sum.get_ref().value, 2, "{method}");
    }
    for method in ["Echo", "EchoThread"] {
        let asks = tokio_stream::iter(vec![ask.clone(), ask.clone()]);
        let response = client()
            .await
            .streaming(tonic::Request::new(asks), path(method), codec())
            .await
            .unwrap();
        let (items, end, _) = streams::collect(response.into_inner()).await;
        end.unwrap();
        assert_eq!(items.len(), 2, "{method}");
    }
    for _ in 0..200 {
        if calls.lock().unwrap().len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut seen = calls.lock().unwrap().clone();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [
            ("Echo".to_string(), Code::Ok, 2 * framed),
            ("EchoThread".to_string(), Code::Ok, 2 * framed),
            ("Sum".to_string(), Code::Ok, 2 * framed),
            ("SumThread".to_string(), Code::Ok, 2 * framed),
            ("Unary".to_string(), Code::Ok, framed),
        ]
    );
    common::stop(server).await;
}

/// A call refused at once because the connection's requests waiting for
/// other threads take all the room (`RESOURCE_EXHAUSTED`) still carries
/// the metadata its interceptor added, as any other status does: a
/// deferred unary call and a server stream sent to a thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptor_metadata_reaches_calls_refused_for_room() {
    const BLOB: usize = 1000;
    let server = common::start(
        pajamax::Server::builder()
            .workers(1)
            .max_buffered_request_bytes(BLOB + 100)
            .intercept(mark)
            .add_service(Streams {
                seen: Default::default(),
            }),
    );
    let channel = connect(&server).await;
    let held = |sleep_ms| {
        tonic::Request::new(common::ProbeRequest {
            text: "held".into(),
            blob: vec![7; BLOB],
            sleep_ms,
            ..Default::default()
        })
    };
    // The first request waiting for a thread is taken whatever its size.
    let first = tokio::spawn(call(channel.clone(), "Defer", held(300)));
    for _ in 0..1000 {
        if server.stats().peak_queued_request_bytes >= BLOB {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(server.stats().peak_queued_request_bytes >= BLOB);
    let status = call(channel.clone(), "Defer", held(0)).await.unwrap_err();
    common::assert_status(
        &status,
        tonic::Code::ResourceExhausted,
        "wait for other threads",
    );
    assert_marked(status.metadata());
    // `count` 0: no messages; the blob makes the request too large to
    // wait beside the first.
    let ask = streams::PaddedAsk {
        blob: vec![7; 200],
        ..Default::default()
    };
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let status = client
        .server_streaming(
            tonic::Request::new(ask),
            tonic::codegen::http::uri::PathAndQuery::from_static("/test.Streams/CountThread"),
            tonic_prost::ProstCodec::<streams::PaddedAsk, streams::Item>::default(),
        )
        .await
        .unwrap_err();
    common::assert_status(
        &status,
        tonic::Code::ResourceExhausted,
        "wait for other threads",
    );
    assert_marked(status.metadata());
    // The call held is answered, with the metadata.
    let reply = first.await.unwrap().unwrap();
    assert_eq!(reply.get_ref().text, "held");
    assert_marked(reply.metadata());
    common::stop(server).await;
}

/// A read of more requests than one batch takes is run in several
/// batches; every call of the read is timed from the read that brought it,
/// not from its batch. The first request blocks the worker: every call
/// read with it is answered after it, and so took longer.
#[test]
fn observers_time_every_batch_of_a_read_from_the_read() {
    use common::raw::RawPeer;
    use prost::Message;

    let (calls, observer) = recorder(|call| (call.method.to_string(), call.code, call.duration));
    let server = common::start(pajamax::Server::builder().workers(1).observe(observer));
    let mut peer = RawPeer::handshake(server.local_addr(), &[]);
    let sleep = common::ProbeRequest {
        sleep_ms: 50,
        ..Default::default()
    };
    let mut bytes = peer.request(1, "/test.Probe/Sleep", &sleep.encode_to_vec());
    // Two events each (headers, body): far more than one batch of events.
    const ECHOES: u32 = 400;
    let echo = common::ProbeRequest {
        text: "x".into(),
        ..Default::default()
    };
    for i in 1..=ECHOES {
        bytes.extend(peer.request(2 * i + 1, "/test.Probe/Echo", &echo.encode_to_vec()));
    }
    assert!(bytes.len() < 32 << 10, "{} bytes: one read", bytes.len());
    peer.send(&bytes);
    let heard = peer.listen(Duration::from_secs(20), |h| {
        h.statuses.len() == ECHOES as usize + 1
    });
    assert_eq!(heard.statuses.len(), ECHOES as usize + 1, "{heard:?}");
    assert!(heard.statuses.iter().all(|(_, status)| status == "0"));
    // Observers run on the worker before its answers are written.
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), ECHOES as usize + 1);
    assert_eq!(calls[0].0, "Sleep");
    let slept = calls[0].2;
    assert!(slept >= Duration::from_millis(50));
    for (method, code, duration) in &calls[1..] {
        assert_eq!((method.as_str(), *code), ("Echo", Code::Ok));
        assert!(*duration >= slept, "{duration:?} < {slept:?}");
    }
    drop(peer);
    server.shutdown();
}

/// Calls that end without an answer are seen too, `CANCELLED`: one the
/// client resets, one on each kind of thread, and those whose connection
/// goes away.
#[tokio::test]
async fn observers_see_calls_the_client_cancels_or_leaves_as_cancelled() {
    let (calls, observer) = recorder(|call| (call.method.to_string(), call.code));
    let (server, _) = streams::start(pajamax::Server::builder().workers(1).observe(observer));
    let endless = Ask {
        endless: true,
        interval_ms: 5,
        ..Default::default()
    };
    let seen = |method: &'static str| {
        let calls = calls.clone();
        async move {
            for _ in 0..500 {
                let found = calls.lock().unwrap().iter().any(|(m, _)| m == method);
                if found {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let calls = calls.lock().unwrap();
            let found: Vec<Code> = calls
                .iter()
                .filter(|(m, _)| m == method)
                .map(|(_, code)| *code)
                .collect();
            assert_eq!(found, [Code::Cancelled], "{method}: {calls:?}");
        }
    };
    // Reset by the client: on the worker, then on a thread.
    let channel = connect(&server).await;
    for method in ["Count", "CountThread"] {
        let mut stream = server_stream(
            channel.clone(),
            method,
            tonic::Request::new(endless.clone()),
        )
        .await
        .unwrap()
        .into_inner();
        stream.message().await.unwrap().unwrap();
        drop(stream);
        seen(method).await;
    }
    // The connection closes, with no reset, while a call is open.
    calls.lock().unwrap().clear();
    let addr = server.local_addr();
    tokio::task::spawn_blocking(move || {
        let mut peer = common::raw::RawPeer::handshake(addr, &[]);
        let ask = prost::Message::encode_to_vec(&endless);
        let bytes = peer.request(1, "/test.Streams/Count", &ask);
        peer.send(&bytes);
        peer.listen(Duration::from_secs(5), |heard| heard.data_bytes > 0);
    })
    .await
    .unwrap();
    seen("Count").await;
    drop(channel);
    common::stop(server).await;
}

/// A request message the handler took counts in
/// `FinishedCall::request_bytes` also when the handler fails on it (it
/// does not decode, or the handler refuses it): on the worker as on a
/// thread, and as a unary call's request counts whatever its handler
/// answers.
#[test]
fn observers_count_the_request_message_a_stream_fails_on() {
    use common::raw::RawPeer;
    use pajamax_test_peer::Frame;
    use prost::Message;

    let (calls, observer) =
        recorder(|call| (call.method.to_string(), call.code, call.request_bytes));
    let (server, _) = streams::start(pajamax::Server::builder().workers(1).observe(observer));
    let mut peer = RawPeer::handshake(server.local_addr(), &[]);
    let good = pajamax_test_peer::grpc::message(
        &Ask {
            value: 1,
            ..Ask::default()
        }
        .encode_to_vec(),
    );
    // Field 1 (`count`, a varint) sent length-delimited: it does not
    // decode.
    let undecodable = pajamax_test_peer::grpc::message(&[0x0a, 0x01, 0x00]);
    // Decodes, and the handler on the worker refuses it (NOT_FOUND).
    let refused = pajamax_test_peer::grpc::message(
        &Ask {
            fail_code: 5,
            ..Ask::default()
        }
        .encode_to_vec(),
    );
    let cases = [
        ("Echo", &undecodable, Code::Internal),
        ("EchoThread", &undecodable, Code::Internal),
        ("Sum", &undecodable, Code::Internal),
        ("SumThread", &undecodable, Code::Internal),
        ("Echo", &refused, Code::NotFound),
        ("Sum", &refused, Code::NotFound),
    ];
    let mut bytes = Vec::new();
    for (at, (method, last, _)) in cases.iter().enumerate() {
        let stream = 1 + 2 * at as u32;
        let block = peer.request_block(&format!("/test.Streams/{method}"), &[]);
        Frame::headers(stream, &block, false).write(&mut bytes);
        Frame::data(stream, &good, false).write(&mut bytes);
        Frame::data(stream, last, true).write(&mut bytes);
    }
    peer.send(&bytes);
    let heard = peer.listen(Duration::from_secs(10), |h| h.statuses.len() == cases.len());
    assert_eq!(heard.statuses.len(), cases.len(), "{heard:?}");
    // Observers run on the worker before its answers are written.
    let mut seen = calls.lock().unwrap().clone();
    let mut expected: Vec<_> = cases
        .iter()
        .map(|(method, last, code)| {
            let taken = (good.len() + last.len()) as u64;
            (method.to_string(), *code, taken)
        })
        .collect();
    let order = |a: &(String, Code, u64), b: &(String, Code, u64)| {
        (&a.0, a.1 as i32).cmp(&(&b.0, b.1 as i32))
    };
    seen.sort_by(order);
    expected.sort_by(order);
    assert_eq!(seen, expected);
    drop(peer);
    server.shutdown();
}
