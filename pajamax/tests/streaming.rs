//! Streaming calls of every kind, served on the worker and on threads, with
//! tonic's client.

mod common;

use common::streams::{self, bidi, client_stream, collect, server_stream, Ask, Item};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

fn ask(count: u32) -> Ask {
    Ask {
        count,
        ..Ask::default()
    }
}

#[tokio::test]
async fn server_streams_arrive_in_order_from_the_worker_and_from_a_thread() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    for method in ["Count", "CountThread"] {
        let response = server_stream(channel.clone(), method, tonic::Request::new(ask(3000)))
            .await
            .unwrap();
        assert_eq!(response.metadata().get("x-kind").unwrap(), "server");
        let (items, end, _) = collect(response.into_inner()).await;
        end.unwrap();
        let values: Vec<u64> = items.iter().map(|i| i.value).collect();
        assert_eq!(values, (1..=3000).collect::<Vec<_>>(), "{method}");
    }
    assert_eq!(seen.threads_done_by(1), 1);
    common::stop(server).await;
}

#[tokio::test]
async fn a_server_stream_ends_with_the_status_and_trailers_asked_for() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    for method in ["Count", "CountThread"] {
        let request = Ask {
            count: 2,
            fail_code: 5,
            ..Ask::default()
        };
        let response = server_stream(channel.clone(), method, tonic::Request::new(request))
            .await
            .unwrap();
        let (items, end, _) = collect(response.into_inner()).await;
        assert_eq!(items.len(), 2, "{method}");
        common::assert_status(&end.unwrap_err(), tonic::Code::NotFound, "asked to fail");
    }
    let response = server_stream(channel.clone(), "CountThread", tonic::Request::new(ask(1)))
        .await
        .unwrap();
    let (_, end, trailers) = collect(response.into_inner()).await;
    end.unwrap();
    assert_eq!(trailers.unwrap().get("x-sent").unwrap(), "1");
    // No message at all: a trailers-only answer.
    let response = server_stream(channel.clone(), "Count", tonic::Request::new(ask(0)))
        .await
        .unwrap();
    let (items, end, _) = collect(response.into_inner()).await;
    assert!(items.is_empty());
    end.unwrap();
    common::stop(server).await;
}

#[tokio::test]
async fn client_streams_of_4000_messages_are_summed() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    for method in ["Sum", "SumThread"] {
        let asks: Vec<Ask> = (1..=4000u64)
            .map(|value| Ask {
                value,
                ..Ask::default()
            })
            .collect();
        let response = client_stream(channel.clone(), method, asks).await.unwrap();
        assert_eq!(response.get_ref().value, 4000 * 4001 / 2, "{method}");
        // Trailers of a unary answer land in tonic's response metadata.
        assert_eq!(response.metadata().get("x-count").unwrap(), "4000");
    }
    // An empty client stream is answered too.
    let response = client_stream(channel.clone(), "Sum", Vec::new())
        .await
        .unwrap();
    assert_eq!(response.get_ref().value, 0);
    common::stop(server).await;
}

/// A request message past `max_recv_message_size` ends a client stream
/// RESOURCE_EXHAUSTED on the worker, and the thread reading the stream
/// learns that status from its requests after the message before it (as a
/// tonic or grpc-go handler's request stream reports the error that ended
/// it), not a bare cancellation.
#[tokio::test]
async fn a_thread_reads_the_status_the_worker_ended_its_call_with() {
    let (server, seen) = streams::start(
        pajamax::Server::builder()
            .workers(1)
            .max_recv_message_size(16),
    );
    let channel = common::connect(&server).await;
    // 23 bytes encoded.
    let big = Ask {
        count: u32::MAX,
        size: u32::MAX,
        value: u64::MAX,
        ..Ask::default()
    };
    let small = Ask {
        value: 1,
        ..Ask::default()
    };
    let status = client_stream(channel, "SumThread", vec![small, big])
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    common::wait_for(|| !seen.sum_thread_errors.lock().unwrap().is_empty()).await;
    let read = seen.sum_thread_errors.lock().unwrap().clone();
    assert_eq!(read, [pajamax::Code::ResourceExhausted]);
    common::stop(server).await;
}

#[tokio::test]
async fn a_handler_error_mid_stream_ends_the_call() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    let mut asks = vec![ask(0); 10];
    asks[5].fail_code = 9;
    let status = client_stream(channel.clone(), "Sum", asks)
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    common::echo_works_on(channel, "Sum").await;
    common::stop(server).await;
}

#[tokio::test]
async fn bidi_answers_each_message_as_it_comes() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    for method in ["Echo", "EchoThread"] {
        let (tx, rx) = mpsc::channel(4);
        // The response headers come with the first answer: tonic waits for
        // them before it returns the call, so the first request goes first.
        tx.send(Ask {
            value: 1,
            ..Ask::default()
        })
        .await
        .unwrap();
        let response = bidi(channel.clone(), method, rx).await.unwrap();
        let mut answers = response.into_inner();
        for value in 1..=50u64 {
            if value > 1 {
                tx.send(Ask {
                    value,
                    ..Ask::default()
                })
                .await
                .unwrap();
            }
            // Ping-pong: the answer comes before the next request is sent.
            let item = answers.message().await.unwrap().unwrap();
            assert_eq!(item.value, value, "{method}");
        }
        drop(tx);
        assert!(answers.message().await.unwrap().is_none());
    }
    common::stop(server).await;
}

#[tokio::test]
async fn a_hundred_and_fifty_bidi_calls_share_one_connection() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    let mut calls = Vec::new();
    for call in 0..150u64 {
        let channel = channel.clone();
        let method = if call % 2 == 0 { "Echo" } else { "EchoThread" };
        calls.push(tokio::spawn(async move {
            let (tx, rx) = mpsc::channel(16);
            let sender = tokio::spawn(async move {
                for i in 0..20u64 {
                    let value = call * 1000 + i;
                    let ask = Ask {
                        value,
                        count: 2,
                        size: 100,
                        ..Ask::default()
                    };
                    tx.send(ask).await.unwrap();
                }
            });
            let response = bidi(channel, method, rx).await.unwrap();
            let (items, end, _) = collect(response.into_inner()).await;
            sender.await.unwrap();
            end.unwrap();
            let values: Vec<u64> = items.iter().map(|i| i.value).collect();
            let expected: Vec<u64> = (0..20u64)
                .flat_map(|i| [call * 1000 + i, call * 1000 + i])
                .collect();
            assert_eq!(values, expected);
        }));
    }
    for call in calls {
        call.await.unwrap();
    }
    common::stop(server).await;
}

#[tokio::test]
async fn a_slow_reader_of_100_mib_keeps_the_server_bounded() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    streams::read_100_mib_slowly_within_bounds(&server, channel).await;
    common::stop(server).await;
}

#[tokio::test]
async fn a_cancelled_stream_stops_its_producer() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    for method in ["Count", "CountThread"] {
        let request = Ask {
            endless: true,
            size: 1000,
            ..Ask::default()
        };
        let response = server_stream(channel.clone(), method, tonic::Request::new(request))
            .await
            .unwrap();
        let mut answers = response.into_inner();
        for _ in 0..100 {
            answers.message().await.unwrap().unwrap();
        }
        // Dropping the stream resets it (RST_STREAM CANCEL).
        drop(answers);
    }
    for _ in 0..200 {
        if seen.producers_dropped_early.load(Ordering::SeqCst) == 1
            && seen.sends_cancelled.load(Ordering::SeqCst) == 1
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.producers_dropped_early.load(Ordering::SeqCst), 1);
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 1);
    common::echo_works_on(channel, "Count").await;
    common::stop(server).await;
}

/// The server's `call_timeout` caps client-streaming calls, as unary ones;
/// server-streaming and bidirectional calls run past it (a server stream's
/// wait for its request is capped: next test).
#[tokio::test]
async fn the_server_call_timeout_caps_client_streams_only() {
    let cap = Duration::from_millis(300);
    let (server, _seen) = streams::start(pajamax::Server::builder().workers(1).call_timeout(cap));
    let channel = common::connect(&server).await;
    // A server stream of 8 items 100 ms apart: about 800 ms.
    for method in ["Count", "CountThread"] {
        let request = tonic::Request::new(Ask {
            count: 8,
            interval_ms: 100,
            ..Ask::default()
        });
        let started = Instant::now();
        let response = server_stream(channel.clone(), method, request)
            .await
            .unwrap();
        let (items, end, _) = collect(response.into_inner()).await;
        end.unwrap();
        assert_eq!(items.len(), 8, "{method}");
        assert!(started.elapsed() > cap, "{method}: {:?}", started.elapsed());
    }
    // A bidirectional call whose client sends its second request after
    // the cap.
    let (send, requests) = tokio::sync::mpsc::channel(4);
    send.send(Ask::default()).await.unwrap();
    let response = bidi(channel.clone(), "Echo", requests).await.unwrap();
    tokio::time::sleep(cap * 2).await;
    send.send(Ask::default()).await.unwrap();
    drop(send);
    let (items, end, _) = collect(response.into_inner()).await;
    end.unwrap();
    assert_eq!(items.len(), 2);
    // A client stream still open past the cap is ended by the server.
    let (send, requests) = tokio::sync::mpsc::channel::<Ask>(4);
    send.send(Ask::default()).await.unwrap();
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let started = Instant::now();
    let status = client
        .client_streaming(
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(requests)),
            "/test.Streams/Sum".try_into().unwrap(),
            tonic_prost::ProstCodec::<Ask, Item>::default(),
        )
        .await
        .unwrap_err();
    common::assert_status(&status, tonic::Code::DeadlineExceeded, "deadline");
    assert!(started.elapsed() >= cap, "{:?}", started.elapsed());
    drop(send);
    common::stop(server).await;
}

/// A server-streaming call is held to the server's `call_timeout` while
/// its request message is awaited, then runs to the client's own deadline
/// (none here). The request goes through tonic's streaming client, so that
/// it can come late; each case twice, the second call repeating the first
/// one's header block.
#[tokio::test]
async fn the_server_call_timeout_caps_a_server_streams_wait_for_its_request() {
    let cap = Duration::from_millis(300);
    let (server, _seen) = streams::start(pajamax::Server::builder().workers(1).call_timeout(cap));
    let channel = common::connect(&server).await;
    for round in 0..2 {
        // The request in time: 8 items 100 ms apart, past the cap.
        let (send, requests) = tokio::sync::mpsc::channel(1);
        let started = Instant::now();
        send.send(Ask {
            count: 8,
            interval_ms: 100,
            ..Ask::default()
        })
        .await
        .unwrap();
        drop(send);
        let response = bidi(channel.clone(), "Count", requests).await.unwrap();
        let (items, end, _) = collect(response.into_inner()).await;
        end.unwrap();
        assert_eq!(items.len(), 8, "round {round}");
        assert!(
            started.elapsed() > cap,
            "round {round}: {:?}",
            started.elapsed()
        );

        // No request before the cap: the call ends there.
        let (send, requests) = tokio::sync::mpsc::channel::<Ask>(1);
        let started = Instant::now();
        let status = tokio::time::timeout(cap * 10, bidi(channel.clone(), "Count", requests))
            .await
            .expect("the call was not ended")
            .unwrap_err();
        common::assert_status(&status, tonic::Code::DeadlineExceeded, "deadline");
        let took = started.elapsed();
        assert!(took >= cap && took < cap * 5, "round {round}: {took:?}");
        drop(send);
    }
    common::echo_works_on(channel, "Count").await;
    common::stop(server).await;
}

#[tokio::test]
async fn a_deadline_that_passes_mid_stream_ends_it() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    for method in ["Count", "CountThread"] {
        let request = Ask {
            count: 100,
            interval_ms: 20,
            ..Ask::default()
        };
        let mut request = tonic::Request::new(request);
        request.set_timeout(Duration::from_millis(300));
        let response = server_stream(channel.clone(), method, request)
            .await
            .unwrap();
        let (items, end, _) = collect(response.into_inner()).await;
        assert!(
            !items.is_empty() && items.len() < 100,
            "{method}: {}",
            items.len()
        );
        common::assert_status(&end.unwrap_err(), tonic::Code::DeadlineExceeded, "deadline");
    }
    for _ in 0..200 {
        if seen.sends_cancelled.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.producers_dropped_early.load(Ordering::SeqCst), 1);
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 1);
    common::stop(server).await;
}

#[tokio::test]
async fn a_paced_stream_does_not_hold_up_other_connections() {
    let (server, _) = streams::start(pajamax::Server::builder().workers(1));
    let streaming = common::connect(&server).await;
    let request = Ask {
        count: 20,
        interval_ms: 50,
        ..Ask::default()
    };
    let response = server_stream(streaming, "Count", tonic::Request::new(request))
        .await
        .unwrap();
    let paced = tokio::spawn(collect(response.into_inner()));
    let other = common::connect(&server).await;
    for _ in 0..50 {
        let response = common::streams_unary(other.clone(), 7).await.unwrap();
        assert_eq!(response.get_ref().value, 7);
    }
    assert!(
        !paced.is_finished(),
        "fifty calls were answered while the stream paced itself"
    );
    let (items, end, _) = paced.await.unwrap();
    end.unwrap();
    assert_eq!(items.len(), 20);
    common::stop(server).await;
}

/// A thread's answers compressed with gzip: many times the sink's credit
/// (64 KiB) in all, so the credit of compressed messages must come back.
#[tokio::test]
async fn a_threads_compressed_stream_arrives_whole() {
    use tonic::codec::CompressionEncoding;
    use tonic::codegen::http::uri::PathAndQuery;

    let (server, seen) =
        streams::start(pajamax::Server::builder().workers(1).send_compressed(true));
    let channel = common::connect(&server).await;
    let mut client = tonic::client::Grpc::new(channel)
        .max_decoding_message_size(64 << 20)
        .accept_compressed(CompressionEncoding::Gzip);
    client.ready().await.unwrap();
    let request = Ask {
        count: 500,
        size: 16 << 10,
        ..Ask::default()
    };
    let response = client
        .server_streaming(
            tonic::Request::new(request),
            PathAndQuery::from_static("/test.Streams/CountThread"),
            tonic_prost::ProstCodec::<Ask, common::streams::Item>::default(),
        )
        .await
        .unwrap();
    assert_eq!(response.metadata().get("grpc-encoding").unwrap(), "gzip");
    let (items, end, _) =
        tokio::time::timeout(Duration::from_secs(20), collect(response.into_inner()))
            .await
            .expect("the stream ends");
    end.unwrap();
    assert_eq!(items.len(), 500);
    assert!(items.iter().all(|item| item.blob.len() == 16 << 10));
    common::stop(server).await;
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 0);
}
