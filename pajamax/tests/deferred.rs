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

/// The server's `call_timeout` gives a call without a deadline of its own
/// one, and shortens a longer one; a shorter one of the client's still
/// holds, and a call quicker than both is answered.
#[tokio::test]
async fn the_server_call_timeout_caps_every_deadline() {
    let cap = Duration::from_millis(300);
    let server = start(pajamax::Server::builder().workers(1).call_timeout(cap));
    let channel = connect(&server).await;
    for client_timeout in [None, Some(Duration::from_secs(20))] {
        let mut request = deferred("never in time", 5000);
        if let Some(timeout) = client_timeout {
            request.set_timeout(timeout);
        }
        let started = Instant::now();
        let status = call(channel.clone(), "Defer", request).await.unwrap_err();
        let took = started.elapsed();
        // Ended by the server: the client waits up to 20 s, or for good.
        assert_status(&status, Code::DeadlineExceeded, "deadline passed");
        assert!(took >= cap, "{client_timeout:?}: after {took:?}");
        assert!(
            took < Duration::from_secs(3),
            "{client_timeout:?}: after {took:?}"
        );
    }
    // Requests that repeat a header block share its capped timeout.
    for _ in 0..2 {
        let status = call(channel.clone(), "Defer", deferred("again", 5000))
            .await
            .unwrap_err();
        assert_status(&status, Code::DeadlineExceeded, "deadline passed");
    }
    // The client's own shorter deadline still ends the call first (the
    // server's answer or the client's own timer, whichever comes first).
    let mut request = deferred("shorter", 5000);
    request.set_timeout(Duration::from_millis(50));
    let started = Instant::now();
    let status = call(channel.clone(), "Defer", request).await.unwrap_err();
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    assert!(started.elapsed() < cap, "after {:?}", started.elapsed());
    // A call answered within the cap is answered.
    let reply = call(channel.clone(), "Defer", deferred("quick", 20))
        .await
        .unwrap();
    assert_eq!(reply.get_ref().text, "quick");
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
            sleep_ms: 5000,
            ..Default::default()
        })
    };
    // One call at a time, each on its way to the thread (held) or refused
    // before the next: sent together, their incomplete requests could pass
    // the same limit for incomplete request bytes, and be refused for that.
    let mut calls = Vec::new();
    let mut held = 0;
    for i in 0..10 {
        let task = tokio::spawn(call(channel.clone(), "Defer", request(i)));
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            if server.stats().peak_queued_request_bytes >= (held + 1) * BLOB {
                held += 1;
                break;
            }
            if task.is_finished() {
                break;
            }
            assert!(
                Instant::now() < give_up,
                "call {i} neither held nor refused"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        calls.push(task);
    }
    let mut answered = 0;
    let mut refused = 0;
    for task in calls {
        match task.await.unwrap() {
            Ok(reply) => {
                assert!(reply.get_ref().text.starts_with("held "));
                answered += 1;
            }
            Err(status) => {
                assert_status(&status, Code::ResourceExhausted, "wait for other threads");
                refused += 1;
            }
        }
    }
    // Three requests of 20 KiB fit in 64 KiB, a fourth does not.
    assert!((1..=3).contains(&answered), "{answered} answered");
    assert_eq!(answered, held);
    assert_eq!(answered + refused, 10);
    let peak = server.stats().peak_queued_request_bytes;
    assert!(peak <= LIMIT, "{peak} bytes waited for threads");
    // Answered, they left the connection's share: more go to the threads.
    let mut next = request(10);
    next.get_mut().sleep_ms = 0;
    let reply = call(channel.clone(), "Defer", next).await.unwrap();
    assert_eq!(reply.get_ref().text, "held 10");
    stop(server).await;
}

/// A deferred call's request, held until its thread answers, does not hold
/// up the streamed messages of another call of the connection: requests
/// held for threads and streamed messages each have the limit, and a
/// message refused for lack of room goes to its thread once that thread
/// has taken the ones before, not once the deferred call is answered (a
/// deferred call waiting on such a stream would never be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_messages_do_not_wait_for_a_deferred_requests_answer() {
    use common::streams::{Item, PaddedAsk, Seen, Streams};
    use std::sync::Arc;
    use tonic::codegen::http::uri::PathAndQuery;

    const LIMIT: usize = 64 << 10;
    let server = start(
        pajamax::Server::builder()
            .workers(1)
            .max_buffered_request_bytes(LIMIT)
            .add_service(Streams {
                seen: Arc::new(Seen::default()),
            }),
    );
    let channel = connect(&server).await;
    // 40 KiB held for 30 s (the test ends it sooner).
    let held = tokio::spawn(call(
        channel.clone(),
        "Defer",
        tonic::Request::new(ProbeRequest {
            text: "held".into(),
            blob: vec![7; 40 << 10],
            sleep_ms: 30_000,
            ..Default::default()
        }),
    ));
    let give_up = Instant::now() + Duration::from_secs(10);
    while server.stats().peak_queued_request_bytes < 40 << 10 {
        assert!(Instant::now() < give_up, "the deferred call never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Messages of 10 KiB to a thread that takes one every 50 ms: they wait
    // up to the limit of their own, then for the thread to take some.
    let asks: Vec<_> = (0..8)
        .map(|_| PaddedAsk {
            interval_ms: 50,
            value: 1,
            blob: vec![7; 10 << 10],
        })
        .collect();
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.expect("ready");
    let summed = client.client_streaming(
        tonic::Request::new(tokio_stream::iter(asks)),
        PathAndQuery::from_static("/test.Streams/SumThread"),
        tonic_prost::ProstCodec::<PaddedAsk, Item>::default(),
    );
    let reply = tokio::time::timeout(Duration::from_secs(20), summed)
        .await
        .expect("the streamed messages went to the thread beside the deferred request")
        .unwrap();
    assert_eq!(reply.get_ref().value, 8);
    assert!(!held.is_finished(), "the deferred call is still held");
    // Each kind within the limit.
    let peak = server.stats().peak_queued_request_bytes;
    assert!(peak <= 2 * LIMIT, "{peak} bytes waited for threads");
    held.abort();
    stop(server).await;
}
