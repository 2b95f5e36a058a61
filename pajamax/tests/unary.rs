//! Unary calls over loopback with tonic's client.

mod common;

use common::{
    assert_status, call, call_path, connect, echo_works, start, stop, text, ProbeRequest,
};
use std::time::Duration;
use tonic::Code;

#[tokio::test]
async fn echo_answers() {
    let server = start(pajamax::Server::builder().workers(2));
    let channel = connect(&server).await;
    let reply = call(channel, "Echo", text("hello")).await.unwrap();
    assert_eq!(reply.get_ref().text, "hello");
    assert_eq!(reply.get_ref().remaining_ms, -1);
    assert!(reply.get_ref().peer.starts_with("127.0.0.1:"));
    stop(server).await;
}

#[tokio::test]
async fn thousand_concurrent_calls_on_one_connection() {
    let server = start(pajamax::Server::builder().workers(2));
    let channel = connect(&server).await;
    let calls = (0..1000).map(|i| {
        let channel = channel.clone();
        tokio::spawn(async move { call(channel, "Echo", text(&format!("call {i}"))).await })
    });
    let results = futures_join(calls).await;
    assert_eq!(results.len(), 1000);
    for (i, result) in results {
        assert_eq!(result.unwrap().get_ref().text, format!("call {i}"));
    }
    assert_eq!(server.connections(), 1);
    stop(server).await;
}

#[tokio::test]
async fn one_mebibyte_request_and_reply() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let request = tonic::Request::new(ProbeRequest {
        text: "big".into(),
        reply_size: 1 << 20,
        blob: (0..1 << 20).map(|i| (i % 251) as u8).collect(),
        ..Default::default()
    });
    let reply = call(channel.clone(), "Echo", request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.received, 1 << 20);
    assert_eq!(reply.blob.len(), 1 << 20);
    assert!(reply.blob.iter().all(|&b| b == 7));
    // Several at once share the connection window.
    let calls = (0..8).map(|_| {
        let channel = channel.clone();
        tokio::spawn(async move {
            let request = tonic::Request::new(ProbeRequest {
                reply_size: 1 << 20,
                blob: vec![1; 1 << 20],
                ..Default::default()
            });
            call(channel, "Echo", request).await
        })
    });
    for (_, result) in futures_join(calls).await {
        let reply = result.unwrap().into_inner();
        assert_eq!((reply.received, reply.blob.len()), (1 << 20, 1 << 20));
    }
    stop(server).await;
}

#[tokio::test]
async fn handler_status_reaches_the_client_with_its_message() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let request = tonic::Request::new(ProbeRequest {
        text: "no such key: 100% ✓".into(),
        code: 5,
        ..Default::default()
    });
    let status = call(channel.clone(), "Fail", request).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), "no such key: 100% ✓");
    // The connection is still good.
    echo_works(channel, "after").await;
    stop(server).await;
}

#[tokio::test]
async fn unknown_method_and_service_are_unimplemented_and_the_connection_goes_on() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let status = call(channel.clone(), "Nope", text("x")).await.unwrap_err();
    assert_status(
        &status,
        Code::Unimplemented,
        "unknown method /test.Probe/Nope",
    );
    let status = call_path(channel.clone(), "/other.Svc/Do", text("x"))
        .await
        .unwrap_err();
    assert_status(&status, Code::Unimplemented, "unknown service other.Svc");
    echo_works(channel, "still here").await;
    assert_eq!(server.connections(), 1);
    stop(server).await;
}

#[tokio::test]
async fn oversized_message_is_resource_exhausted() {
    let server = start(
        pajamax::Server::builder()
            .workers(1)
            .max_recv_message_size(1000),
    );
    let channel = connect(&server).await;
    let request = tonic::Request::new(ProbeRequest {
        blob: vec![0; 2000],
        ..Default::default()
    });
    let status = call(channel.clone(), "Echo", request).await.unwrap_err();
    assert_status(
        &status,
        Code::ResourceExhausted,
        "larger than the limit of 1000",
    );
    echo_works(channel, "ok").await;
    stop(server).await;
}

#[tokio::test]
async fn default_limit_is_four_mebibytes() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let request = tonic::Request::new(ProbeRequest {
        blob: vec![0; (4 << 20) + 1],
        ..Default::default()
    });
    let status = call(channel.clone(), "Echo", request).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    let request = tonic::Request::new(ProbeRequest {
        blob: vec![0; (4 << 20) - 100],
        ..Default::default()
    });
    assert_eq!(
        call(channel, "Echo", request)
            .await
            .unwrap()
            .get_ref()
            .received,
        (4 << 20) - 100
    );
    stop(server).await;
}

#[tokio::test]
async fn panicking_handler_fails_only_its_call() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let status = call(channel.clone(), "Panic", text("boom"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Internal);
    assert_eq!(status.message(), "handler panicked");
    echo_works(channel, "alive").await;
    stop(server).await;
}

#[tokio::test]
async fn malformed_request_message_is_internal_as_with_tonic_and_grpc_go() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    // A ProbeRequest field 1 (string) claiming 100 bytes that are not there:
    // sent through a codec of raw bytes.
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<RawBytes, common::ProbeReply>::default();
    let request = tonic::Request::new(RawBytes {
        value: vec![0x0a, 100, b'x'],
    });
    let status = client
        .unary(request, "/test.Probe/Echo".parse().unwrap(), codec)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Internal);
    assert!(
        status.message().starts_with("failed to decode request"),
        "{status:?}"
    );
    stop(server).await;
}

/// A message whose encoding is the given bytes, as they are.
#[derive(Clone, PartialEq, Debug, Default)]
struct RawBytes {
    value: Vec<u8>,
}

impl prost::Message for RawBytes {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        buf.put_slice(&self.value);
    }
    fn merge_field(
        &mut self,
        _: u32,
        _: prost::encoding::WireType,
        _: &mut impl prost::bytes::Buf,
        _: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        unreachable!("never decoded")
    }
    fn encoded_len(&self) -> usize {
        self.value.len()
    }
    fn clear(&mut self) {
        self.value.clear();
    }
}

#[tokio::test]
async fn metadata_travels_both_ways() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let mut request = text("md");
    request
        .metadata_mut()
        .insert("x-user", "alice".parse().unwrap());
    request.metadata_mut().insert_bin(
        "x-token-bin",
        tonic::metadata::MetadataValue::from_bytes(&[0, 1, 2, 255]),
    );
    let reply = call(channel, "Metadata", request).await.unwrap();
    assert_eq!(reply.get_ref().text, "alice");
    assert_eq!(reply.metadata().get("x-hello").unwrap(), "alice");
    // tonic merges trailers into the response metadata.
    let token = reply
        .metadata()
        .get_bin("x-token-bin")
        .unwrap()
        .to_bytes()
        .unwrap();
    assert_eq!(&token[..], &[0, 1, 2, 255]);
    stop(server).await;
}

#[tokio::test]
async fn repeated_header_blocks_keep_each_calls_metadata() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    // The same metadata over and over (the same header block, remembered by
    // the server), then another user, then the first again.
    for user in ["alice", "alice", "alice", "bob", "alice", "bob", "bob"] {
        let mut request = text("md");
        request
            .metadata_mut()
            .insert("x-user", user.parse().unwrap());
        let reply = call(channel.clone(), "Metadata", request).await.unwrap();
        assert_eq!(reply.get_ref().text, user);
        assert_eq!(reply.metadata().get("x-hello").unwrap(), user);
    }
    // Without metadata after calls with some: none seen.
    let reply = call(channel, "Metadata", text("md")).await.unwrap();
    assert_eq!(reply.get_ref().text, "nobody");
    stop(server).await;
}

#[tokio::test]
async fn workers_count_answers_reads_and_writes() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let channel = channel.clone();
            tokio::spawn(async move { call(channel, "Echo", text(&i.to_string())).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    // Published once per turn of the worker's loop: wait for that turn.
    let mut worker = Default::default();
    for _ in 0..200 {
        worker = server.stats().workers[0];
        if worker.requests_answered == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(worker.requests_answered, 200, "{worker:?}");
    assert!(worker.reads >= 1 && worker.writes >= 1, "{worker:?}");
    assert!(worker.writes <= 200, "{worker:?}");
    assert!(worker.requests_per_write() >= 1.0, "{worker:?}");
    stop(server).await;
}

#[tokio::test]
async fn deadline_reaches_the_handler() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let mut request = text("deadline");
    request.set_timeout(Duration::from_secs(30));
    let reply = call(channel, "Echo", request).await.unwrap().into_inner();
    assert!(
        reply.remaining_ms > 20_000 && reply.remaining_ms <= 30_000,
        "{}",
        reply.remaining_ms
    );
    stop(server).await;
}

#[tokio::test]
async fn hundred_connections_at_once() {
    let server = start(pajamax::Server::builder().workers(2));
    let mut channels = Vec::new();
    for _ in 0..100 {
        channels.push(connect(&server).await);
    }
    let calls = channels.iter().enumerate().map(|(i, channel)| {
        let channel = channel.clone();
        tokio::spawn(async move { call(channel, "Echo", text(&format!("conn {i}"))).await })
    });
    for (i, result) in futures_join(calls).await {
        assert_eq!(result.unwrap().get_ref().text, format!("conn {i}"));
    }
    assert_eq!(server.connections(), 100);
    let per_worker = server.connections_per_worker();
    assert_eq!(per_worker, vec![50, 50], "connections are spread evenly");
    stop(server).await;
}

/// Awaits every task, keeping the order of the input.
async fn futures_join<T: Send + 'static>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<(usize, T)> {
    let mut out = Vec::new();
    for (i, task) in tasks.enumerate() {
        out.push((i, task.await.unwrap()));
    }
    out
}

/// A deadline already passed when the request is read (`grpc-timeout: 0n`)
/// ends the call before its handler runs, for a new header block and for
/// the same block repeated, each with its body in the same read.
#[test]
fn a_deadline_passed_on_arrival_answers_without_running_the_handler() {
    use pajamax_test_peer::{grpc, Frame, TcpClient};

    let server = start(pajamax::Server::builder().workers(1));
    let mut peer = TcpClient::handshake(server.local_addr(), &[]).unwrap();
    let streams = [1u32, 3, 5];
    let mut bytes = Vec::new();
    for stream in streams {
        let headers = peer.client.request_headers(
            stream,
            "/test.Probe/Echo",
            &[("grpc-timeout", "0n")],
            false,
        );
        headers.write(&mut bytes);
        // ProbeRequest { text: "hi" }
        Frame::data(stream, &grpc::message(b"\x0a\x02hi"), true).write(&mut bytes);
    }
    let heard = common::expect_statuses(&mut peer, &bytes, &streams, "4");
    assert!(heard.messages.is_empty(), "no handler answered: {heard:?}");
    drop(peer);
    server.shutdown();
}
