//! Answers given later, from another thread, through a `Responder`.

mod common;

use common::{assert_status, call, connect, echo_works, start, stop, text, ProbeRequest};
use std::time::{Duration, Instant};
use tonic::Code;

fn deferred(text: &str, delay_ms: u32) -> tonic::Request<ProbeRequest> {
    tonic::Request::new(ProbeRequest {
        text: text.into(),
        sleep_ms: delay_ms,
        ..Default::default()
    })
}

#[tokio::test]
async fn answer_from_another_thread_after_a_delay() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let started = Instant::now();
    let reply = call(channel.clone(), "Defer", deferred("later", 200))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(reply.get_ref().text, "later");
    assert_eq!(reply.metadata().get("x-deferred").unwrap(), "yes");
    stop(server).await;
}

#[tokio::test]
async fn the_worker_serves_others_while_answers_are_pending() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let slow: Vec<_> = (0..200)
        .map(|i| {
            let channel = channel.clone();
            tokio::spawn(
                async move { call(channel, "Defer", deferred(&format!("d{i}"), 2000)).await },
            )
        })
        .collect();
    // While 200 answers wait on other threads, an inline call goes through:
    // it is answered before any of them.
    echo_works(channel.clone(), "fast").await;
    assert!(slow.iter().all(|task| !task.is_finished()));
    for (i, task) in slow.into_iter().enumerate() {
        assert_eq!(task.await.unwrap().unwrap().get_ref().text, format!("d{i}"));
    }
    stop(server).await;
}

#[tokio::test]
async fn dropped_responder_is_an_error_not_a_hang() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let status = tokio::time::timeout(
        Duration::from_secs(5),
        call(channel.clone(), "DropResponder", text("x")),
    )
    .await
    .expect("answered, not hung")
    .unwrap_err();
    assert_status(&status, Code::Internal, "dropped its responder");
    echo_works(channel, "ok").await;
    stop(server).await;
}

#[tokio::test]
async fn answer_after_the_client_reset_is_dropped() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    // The client gives up (RST_STREAM) before the answer comes back.
    let mut request = deferred("too late", 300);
    request.set_timeout(Duration::from_millis(50));
    let status = call(channel.clone(), "Defer", request).await.unwrap_err();
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The late answer went nowhere; the connection is healthy.
    echo_works(channel, "after").await;
    assert_eq!(server.stats().connection_errors, 0);
    stop(server).await;
}

/// Requests whose header block repeats an earlier one, each with its body
/// in the same read, run without a call record until the handler defers;
/// each deferred answer still reaches its own stream.
#[test]
fn deferred_answers_to_repeated_header_blocks_read_at_once() {
    use pajamax_test_peer::TcpClient;
    use prost::Message;

    let server = start(pajamax::Server::builder().workers(1));
    let mut peer = TcpClient::handshake(server.local_addr(), &[]).unwrap();
    let streams = [1u32, 3, 5, 7, 9];
    let mut bytes = Vec::new();
    for stream in streams {
        let request = ProbeRequest {
            text: format!("s{stream}"),
            sleep_ms: 20,
            ..Default::default()
        };
        let message = request.encode_to_vec();
        bytes.extend(peer.client.request(stream, "/test.Probe/Defer", &message));
    }
    let heard = common::expect_statuses(&mut peer, &bytes, &streams, "0");
    for stream in streams {
        let (_, message) = heard
            .messages
            .iter()
            .find(|(of, _)| *of == stream)
            .expect("an answer on each stream");
        let reply = common::ProbeReply::decode(&message[..]).unwrap();
        assert_eq!(reply.text, format!("s{stream}"));
    }
    drop(peer);
    server.shutdown();
}

#[tokio::test]
async fn shutdown_waits_for_deferred_answers() {
    let server = start(pajamax::Server::builder().workers(1));
    let channel = connect(&server).await;
    let pending = tokio::spawn(call(channel, "Defer", deferred("in flight", 300)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop(server).await;
    assert_eq!(pending.await.unwrap().unwrap().get_ref().text, "in flight");
}

/// The requests of deferred calls count in their connection's request
/// bytes waiting for other threads until answered: past
/// `max_buffered_request_bytes` a call is refused at once, so a client
/// cannot pile requests up in the threads' queues; once answers go out,
/// there is room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_requests_are_bounded_per_connection() {
    const LIMIT: usize = 64 << 10;
    const BLOB: usize = 20 << 10;
    let server = start(
        pajamax::Server::builder()
            .workers(1)
            .max_buffered_request_bytes(LIMIT),
    );
    let channel = connect(&server).await;
    let request = |i: usize| {
        tonic::Request::new(ProbeRequest {
            text: format!("held {i}"),
            blob: vec![7; BLOB],
            sleep_ms: 1500,
            ..Default::default()
        })
    };
    // One after the other, so that each request's bytes arrive in one read
    // and none waits incomplete (which the same limit also bounds).
    let mut calls = Vec::new();
    for i in 0..10 {
        calls.push(tokio::spawn(call(channel.clone(), "Defer", request(i))));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut answered = 0;
    let mut refused = 0;
    for task in calls {
        match task.await.unwrap() {
            Ok(reply) => {
                assert!(reply.get_ref().text.starts_with("held "));
                answered += 1;
            }
            Err(status) if status.message().contains("incomplete requests") => {
                // Refused while incomplete, if its bytes came in pieces.
                assert_eq!(status.code(), Code::ResourceExhausted);
            }
            Err(status) => {
                assert_status(&status, Code::ResourceExhausted, "wait for other threads");
                refused += 1;
            }
        }
    }
    // Three requests of 20 KiB fit in 64 KiB, a fourth does not.
    assert!((1..=3).contains(&answered), "{answered} answered");
    assert!(refused >= 1, "{refused} refused for the threads' share");
    let peak = server.stats().peak_queued_request_bytes;
    assert!(peak <= LIMIT, "{peak} bytes waited for threads");
    // Answered, they left the connection's share: more go to the threads.
    let reply = call(channel.clone(), "Defer", request(10)).await.unwrap();
    assert_eq!(reply.get_ref().text, "held 10");
    stop(server).await;
}
