//! The interop `TestService` served in process, for what its unit tests
//! cannot see: the threads of its `FullDuplexCall`s.

mod common;

use common::connect;
use pajamax_examples::grpc_testing::test_service_server::TestServiceServer;
use pajamax_examples::grpc_testing::{
    ResponseParameters, StreamingOutputCallRequest, StreamingOutputCallResponse,
};
use pajamax_examples::InteropService;
use std::time::{Duration, Instant};

/// The threads of this process whose name starts as the `FullDuplexCall`
/// threads' (`interop-full-duplex`, as the kernel keeps at most 15 bytes
/// of it).
#[cfg(target_os = "linux")]
fn full_duplex_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("interop-full-du"))
        .count()
}

/// A `FullDuplexCall` asked to wait a minute before its answer, whose
/// deadline passes long before: the client gets DEADLINE_EXCEEDED, and the
/// call's thread, told the call ended, stops waiting and ends, instead of
/// sleeping out the minute for a call that is gone.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_full_duplex_thread_waiting_out_an_interval_ends_with_its_call() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(TestServiceServer::new(InteropService))
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server.local_addr().to_string()).await;
    let (requests, receiver) = tokio::sync::mpsc::channel(1);
    requests
        .send(StreamingOutputCallRequest {
            response_parameters: vec![ResponseParameters {
                size: 1,
                interval_us: 60_000_000,
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.unwrap();
    let codec: tonic_prost::ProstCodec<StreamingOutputCallRequest, StreamingOutputCallResponse> =
        Default::default();
    let mut request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(receiver));
    // Sent as the request's `grpc-timeout`.
    request.set_timeout(Duration::from_millis(300));
    let outcome = tokio::time::timeout(Duration::from_secs(20), async {
        let mut answers = client
            .streaming(
                request,
                "/grpc.testing.TestService/FullDuplexCall".parse().unwrap(),
                codec,
            )
            .await?
            .into_inner();
        answers.message().await
    })
    .await
    .expect("the call outlived its deadline");
    // The server's DEADLINE_EXCEEDED, or tonic's own CANCELLED as its
    // timer for the same deadline fires first (and it resets the stream).
    let code = outcome.unwrap_err().code();
    assert!(
        matches!(code, tonic::Code::DeadlineExceeded | tonic::Code::Cancelled),
        "{code:?}"
    );
    drop((requests, client));
    let ended = Instant::now() + Duration::from_secs(10);
    while full_duplex_threads() > 0 && Instant::now() < ended {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        full_duplex_threads(),
        0,
        "the call's thread still waits out its interval"
    );
    server.shutdown();
}
