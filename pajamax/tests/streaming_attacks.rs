//! Streaming abuse against a running server: a client that streams without
//! end into a handler that does not read, one that opens streams and never
//! sends, one that leaves many half-open streams unread. Each is bounded,
//! and a good client on the same worker is served meanwhile.

mod common;

use common::streams::{self, server_stream, Ask, Item};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;

/// A unary call on a connection of its own goes through.
async fn good_client_is_served(server: &pajamax::ServerHandle) {
    let channel = common::connect(server).await;
    let reply = common::streams_unary(channel, 9).await.unwrap();
    assert_eq!(reply.get_ref().value, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_client_stream_into_a_handler_that_does_not_read_is_held_back() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    // 1 KiB messages, as many as the client is let to send.
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let asks = tokio_stream::iter(std::iter::repeat_with(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Ask {
            value: 1,
            ..Ask::default()
        }
    }))
    .map_blob(1024);
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let call = tokio::spawn(async move {
        let codec = tonic_prost::ProstCodec::<Blob, Item>::default();
        client
            .client_streaming(
                tonic::Request::new(asks),
                PathAndQuery::from_static("/test.Streams/Hoard"),
                codec,
            )
            .await
    });
    // Let the client send all it may.
    let mut last = 0;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        let now = pulled.load(Ordering::SeqCst);
        if now == last && now > 0 {
            break;
        }
        last = now;
    }
    let sent = pulled.load(Ordering::SeqCst);
    // The stream window (1 MiB) plus the thread's queue (1 MiB), and what
    // tonic itself keeps ready to send: no more than about 3 MiB of 1 KiB
    // messages got out of the client's stream.
    assert!(sent > 100 && sent < 3500, "the client sent {sent} messages");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(pulled.load(Ordering::SeqCst), sent, "held back for good");
    let stats = server.stats();
    assert!(
        stats.peak_buffered_request_bytes <= (1 << 20) + (64 << 10),
        "{stats:?}"
    );
    good_client_is_served(&server).await;
    call.abort();
    drop(channel);
    common::wait_for(|| seen.hoarders_cancelled.load(Ordering::SeqCst) == 1).await;
    assert_eq!(seen.hoarders_cancelled.load(Ordering::SeqCst), 1);
    common::stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_opened_and_never_sent_on_are_bounded_by_the_stream_limit() {
    let (server, seen) = streams::start(
        pajamax::Server::builder()
            .workers(1)
            .max_concurrent_streams(100),
    );
    let channel = common::connect(&server).await;
    let mut calls = Vec::new();
    for _ in 0..300 {
        let mut client = tonic::client::Grpc::new(channel.clone());
        calls.push(tokio::spawn(async move {
            client.ready().await.unwrap();
            let codec = tonic_prost::ProstCodec::<Ask, Item>::default();
            // A request stream that never yields.
            let silent = tokio_stream::pending::<Ask>();
            client
                .client_streaming(
                    tonic::Request::new(silent),
                    PathAndQuery::from_static("/test.Streams/Sum"),
                    codec,
                )
                .await
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    good_client_is_served(&server).await;
    let stats = server.stats();
    assert!(stats.peak_open_streams <= 100, "{stats:?}");
    assert!(
        stats.peak_open_streams >= 90,
        "the calls were opened: {stats:?}"
    );
    for call in &calls {
        call.abort();
    }
    drop(channel);
    // The calls the server held end as the client resets them.
    common::wait_for(|| seen.handlers_dropped_early.load(Ordering::SeqCst) >= 100).await;
    assert!(seen.handlers_dropped_early.load(Ordering::SeqCst) >= 100);
    assert!(server.stats().peak_open_streams <= 100);
    common::stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_unread_half_open_streams_hold_a_bounded_amount() {
    let h2 = pajamax::h2::Config {
        max_held_bytes: 1 << 20,
        ..Default::default()
    };
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1).h2_config(h2));
    let channel = common::connect(&server).await;
    let mut unread = Vec::new();
    let mut waiting = 0;
    for _ in 0..300 {
        let request = Ask {
            endless: true,
            size: 1000,
            ..Ask::default()
        };
        let call = server_stream(channel.clone(), "Count", tonic::Request::new(request));
        match tokio::time::timeout(Duration::from_millis(200), call).await {
            // Kept, never read.
            Ok(Ok(response)) => unread.push(response.into_inner()),
            Ok(Err(status)) => panic!("{status:?}"),
            // Past the held limit, a new call waits for the client to read.
            Err(_) => {
                waiting += 1;
                if waiting == 3 {
                    break;
                }
            }
        }
    }
    assert_eq!(waiting, 3, "calls past the held limit wait");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = server.stats();
    // What the client's windows let out, the held limit, then at most one
    // produce turn and a stream's send buffer.
    assert!(
        stats.peak_held_bytes <= (1 << 20) + (64 << 10) + (16 << 10),
        "{stats:?}"
    );
    good_client_is_served(&server).await;
    let opened = unread.len();
    // The bound was put to the test: streams were open and the server
    // held bytes for them.
    assert!(opened >= 32, "{opened} streams opened");
    assert!(stats.peak_held_bytes >= 1 << 19, "{stats:?}");
    drop(unread);
    drop(channel);
    common::wait_for(|| seen.producers_dropped_early.load(Ordering::SeqCst) == opened).await;
    assert_eq!(seen.producers_dropped_early.load(Ordering::SeqCst), opened);
    common::stop(server).await;
}

/// A request of `Hoard` carrying a blob, to make its size count.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Blob {
    /// `Ask::value`.
    #[prost(uint64, tag = "5")]
    pub value: u64,
    /// Filler, a field `Ask` does not know.
    #[prost(bytes = "vec", tag = "7")]
    pub blob: Vec<u8>,
}

trait MapBlob: Sized {
    fn map_blob(self, size: usize) -> impl tokio_stream::Stream<Item = Blob> + Send + 'static;
}

impl<S: tokio_stream::Stream<Item = Ask> + Send + 'static> MapBlob for S {
    fn map_blob(self, size: usize) -> impl tokio_stream::Stream<Item = Blob> + Send + 'static {
        use tokio_stream::StreamExt;
        self.map(move |ask| Blob {
            value: ask.value,
            blob: vec![7; size],
        })
    }
}

/// A client that opens its flow-control windows wide and then never reads
/// the socket: a thread's sink must be held back as a producer on the
/// worker is, not let fill the connection's unwritten output. The sink's
/// credit comes back as the bytes leave the stream for the output; with
/// the output not written, it must not come back without end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_is_held_back_by_a_client_that_opens_its_windows_and_never_reads() {
    use common::raw::{frame_bytes, RawPeer};
    use pajamax::h2::frame::{kind, setting};
    use prost::Message;

    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    // 2000 answers of 64 KiB: 125 MiB, from a thread.
    let request = Ask {
        count: 2000,
        size: 64 << 10,
        ..Ask::default()
    }
    .encode_to_vec();
    let peer = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
        peer.send(&frame_bytes(
            kind::WINDOW_UPDATE,
            0,
            0,
            &(1u32 << 30).to_be_bytes(),
        ));
        let bytes = peer.request(1, "/test.Streams/CountThread", &request);
        peer.send(&bytes);
        // No reads from here on.
        std::thread::sleep(Duration::from_secs(2));
        peer
    })
    .await
    .unwrap();
    let stats = server.stats();
    let done = seen.threads_done.load(Ordering::SeqCst);
    good_client_is_served(&server).await;
    drop(peer);
    // The thread learns that the connection closed, if it still sends.
    common::wait_for(|| {
        seen.threads_done.load(Ordering::SeqCst) + seen.sends_cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
    // The output a never-reading client makes the server hold is bounded
    // (as for producers on the worker: the produce limit, a chunk, the
    // pending-output limit), not the whole answer.
    assert!(stats.peak_output_bytes <= 8 << 20, "{stats:?}");
    assert_eq!(
        done, 0,
        "the thread sent 125 MiB to a client that reads nothing"
    );
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 1);
    common::stop(server).await;
}

/// A client that asks for a server stream and closes its sending half at
/// once (the FIN with the request, as `clients_that_close_right_after_their_request_are_let_go`
/// does for a unary call) still gets the whole stream, which fits the
/// windows it gave: the peer's FIN ends what it sends, not what it reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stream_asked_for_right_before_the_clients_fin_is_answered_whole() {
    use common::raw::RawPeer;
    use prost::Message;

    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    // 2000 answers of about 16 bytes: some 32 KiB, within the default
    // windows of 65,535 bytes, but more than one producer's turn.
    let request = Ask {
        count: 2000,
        size: 10,
        ..Ask::default()
    }
    .encode_to_vec();
    let heard = tokio::task::spawn_blocking(move || {
        RawPeer::ask_then_fin(addr, "/test.Streams/Count", &request)
    })
    .await
    .unwrap();
    assert_eq!(
        heard.statuses,
        [(1, "0".to_string())],
        "{} bytes of DATA heard",
        heard.data_bytes
    );
    assert!(heard.closed, "the connection was kept: {heard:?}");
    assert_eq!(seen.producers_dropped_early.load(Ordering::SeqCst), 0);
    // A stream larger than the windows, which the client can no longer
    // open, ends with the connection once the windows are used up.
    ask_past_the_windows_then_fin(addr, "/test.Streams/Count").await;
    common::wait_for(|| seen.producers_dropped_early.load(Ordering::SeqCst) == 1).await;
    assert_eq!(seen.producers_dropped_early.load(Ordering::SeqCst), 1);
    good_client_is_served(&server).await;
    common::stop(server).await;
}

/// Asks `path` for a server stream larger than the client's first windows,
/// sends the FIN at once, and checks that the windows' worth of DATA came
/// and the connection closed: the windows can no longer open.
async fn ask_past_the_windows_then_fin(addr: std::net::SocketAddr, path: &'static str) {
    use common::raw::RawPeer;
    use prost::Message;

    let request = Ask {
        count: 20_000,
        size: 10,
        ..Ask::default()
    }
    .encode_to_vec();
    let heard = tokio::task::spawn_blocking(move || RawPeer::ask_then_fin(addr, path, &request))
        .await
        .unwrap();
    assert!(heard.closed, "the connection was kept: {heard:?}");
    assert_eq!(heard.data_bytes, 65_535, "{heard:?}");
}

/// As `ask_past_the_windows_then_fin`, on a connection where an earlier
/// call, long answered, had a distant deadline (its body came in a read of
/// its own, so the deadline went on the connection's timer): that
/// deadline is no longer anything the connection waits for, and does not
/// keep it open for the hour once the client's windows are used up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_of_an_ended_call_does_not_keep_a_connection_past_the_clients_fin() {
    use common::raw::RawPeer;
    use pajamax_test_peer::frame::Frame;
    use prost::Message;

    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let block = peer.request_block("/test.Streams/Unary", &[("grpc-timeout", "1H")]);
        peer.send(&Frame::headers(1, &block, false).to_bytes());
        // The head alone: the call waits for its body, its deadline set.
        std::thread::sleep(Duration::from_millis(200));
        let ask = Ask {
            value: 5,
            ..Ask::default()
        };
        let body = pajamax_test_peer::grpc::message(&ask.encode_to_vec());
        peer.send(&Frame::data(1, &body, true).to_bytes());
        let answered = peer.listen(Duration::from_secs(10), |h| !h.statuses.is_empty());
        assert_eq!(answered.statuses, [(1, "0".to_string())], "{answered:?}");
        let request = Ask {
            count: 20_000,
            size: 10,
            ..Ask::default()
        }
        .encode_to_vec();
        let bytes = peer.request(3, "/test.Streams/Count", &request);
        peer.send(&bytes);
        peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
        peer.listen(Duration::from_secs(10), |h| h.closed)
    })
    .await
    .unwrap();
    assert!(heard.closed, "the connection was kept: {heard:?}");
    common::wait_for(|| seen.producers_dropped_early.load(Ordering::SeqCst) == 1).await;
    assert_eq!(seen.producers_dropped_early.load(Ordering::SeqCst), 1);
    good_client_is_served(&server).await;
    common::stop(server).await;
}

/// As `a_server_stream_asked_for_right_before_the_clients_fin_is_answered_whole`,
/// for a stream sent from another thread: once the client's windows, which
/// it can no longer open, are used up, the connection closes and the
/// thread's `send` fails, instead of the thread waiting for credit (and the
/// connection staying open) for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_streaming_past_the_windows_of_a_client_that_sent_its_fin_is_let_go() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    ask_past_the_windows_then_fin(server.local_addr(), "/test.Streams/CountThread").await;
    common::wait_for(|| seen.sends_cancelled.load(Ordering::SeqCst) == 1).await;
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(seen.threads_done.load(Ordering::SeqCst), 0);
    good_client_is_served(&server).await;
    common::stop(server).await;
}

/// As `a_thread_streaming_past_the_windows_of_a_client_that_sent_its_fin_is_let_go`,
/// with many such streams: together they hold more than the connection's
/// credit for its sinks, so some threads wait for credit with nothing of
/// theirs held yet. The streams whose bytes wait for windows the client can
/// no longer open end, their credit goes to the others, and every thread
/// learns its call ended; the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_streaming_past_the_windows_of_a_client_that_sent_its_fin_all_end() {
    use common::raw::{frame_bytes, RawPeer};
    use pajamax_test_peer::frame::{kind, setting};
    use prost::Message;

    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let streams = 100u32;
    let request = Ask {
        endless: true,
        size: 1000,
        ..Ask::default()
    }
    .encode_to_vec();
    let heard = tokio::task::spawn_blocking(move || {
        // Small stream windows, a connection window that never runs out.
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1024)]);
        let mut bytes = frame_bytes(kind::WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
        for i in 0..streams {
            bytes.extend(peer.request(1 + 2 * i, "/test.Streams/CountThread", &request));
        }
        peer.send(&bytes);
        // The sinks fill their streams' send buffers and the connection's
        // credit meanwhile.
        let before = peer.listen(Duration::from_millis(500), |_| false);
        // One more call, whose one small answer fits its window, once the
        // credit is spent: it finishes with the credit of the others.
        let small = Ask {
            count: 1,
            size: 10,
            ..Ask::default()
        }
        .encode_to_vec();
        let last = 1 + 2 * streams;
        let bytes = peer.request(last, "/test.Streams/CountThread", &small);
        peer.send(&bytes);
        peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
        let after = peer.listen(Duration::from_secs(10), |h| h.closed);
        (before, after, last)
    })
    .await
    .unwrap();
    let (before, heard, last) = heard;
    assert!(heard.closed, "the connection was kept: {heard:?}");
    assert!(
        before.statuses.is_empty(),
        "no call ended before the FIN: {before:?}"
    );
    assert_eq!(heard.statuses, [(last, "0".to_owned())], "{heard:?}");
    common::wait_for(|| seen.sends_cancelled.load(Ordering::SeqCst) == streams as usize).await;
    assert_eq!(
        seen.sends_cancelled.load(Ordering::SeqCst),
        streams as usize
    );
    assert_eq!(seen.threads_done.load(Ordering::SeqCst), 1);
    good_client_is_served(&server).await;
    common::stop(server).await;
}

/// A client that goes away (its process ends: its kernel sends the FIN,
/// then answers anything more with a reset) while a call of its waits on
/// another thread with nothing to send yet: the connection is not kept for
/// that call. The PING sent as the FIN comes meets the reset, which ends
/// the connection, and the thread learns its call ended when it sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_while_a_thread_has_nothing_to_send_is_let_go() {
    use common::raw::RawPeer;
    use prost::Message;

    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    // The thread waits 2 s before its first message.
    let request = Ask {
        count: 2,
        size: 10,
        interval_ms: 2000,
        ..Ask::default()
    }
    .encode_to_vec();
    tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let bytes = peer.request(1, "/test.Streams/CountThread", &request);
        peer.send(&bytes);
        // What the server sent is read, so that closing sends a FIN.
        let _ = peer.listen(Duration::from_millis(200), |_| false);
    })
    .await
    .unwrap();
    let closed_by = std::time::Instant::now() + Duration::from_millis(1000);
    while server.connections() > 0 && std::time::Instant::now() < closed_by {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.connections(), 0, "the connection is kept");
    common::wait_for(|| seen.sends_cancelled.load(Ordering::SeqCst) == 1).await;
    assert_eq!(seen.threads_done.load(Ordering::SeqCst), 0);
    good_client_is_served(&server).await;
    common::stop(server).await;
}

/// Request messages queued for handlers on other threads are bounded per
/// connection, not only per call: a client that opens many client streams
/// served on threads that do not read (yet), and sends each a gzip bomb
/// (a few KiB that inflate to nearly the largest message), would otherwise
/// have every stream's queue hold one inflated message, thousands of
/// streams on one connection. Past the connection's share the worker takes
/// no more for the threads, but for the next message of a call whose
/// thread waits for it: a call whose thread reads is served meanwhile.
#[test]
fn gzip_bombs_queued_for_threads_that_do_not_read_are_bounded_per_connection() {
    use common::raw::RawPeer;
    use flate2::write::GzEncoder;
    use pajamax_test_peer::{ErrorCode, Frame};
    use prost::Message;
    use std::io::Write;

    fn bomb(value: u64) -> Vec<u8> {
        // Nearly 4 MiB (the largest request message) once inflated.
        let request = Blob {
            value,
            blob: vec![0; (4 << 20) - 1024],
        }
        .encode_to_vec();
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&request).unwrap();
        let payload = gz.finish().unwrap();
        let mut message = vec![1];
        message.extend((payload.len() as u32).to_be_bytes());
        message.extend(payload);
        message
    }

    let limit = 8 << 20;
    let (server, seen) = streams::start(
        pajamax::Server::builder()
            .workers(1)
            .max_buffered_request_bytes(limit),
    );
    let mut peer = RawPeer::handshake(server.local_addr(), &[]);
    let gzip = [("grpc-encoding", "gzip")];
    let hoarders: Vec<u32> = (0..32).map(|i| 1 + 2 * i).collect();
    let mut bytes = Vec::new();
    for &stream in &hoarders {
        peer.client
            .request_headers(stream, "/test.Streams/Hoard", &gzip, false)
            .write(&mut bytes);
        Frame::data(stream, &bomb(1), false).write(&mut bytes);
    }
    // A call whose thread reads, behind them on the same connection: its
    // thread waits for the message, which is queued past the share.
    let summed = 1 + 2 * 32;
    peer.client
        .request_headers(summed, "/test.Streams/SumThread", &gzip, false)
        .write(&mut bytes);
    Frame::data(summed, &bomb(42), true).write(&mut bytes);
    assert!(bytes.len() < 1 << 20, "{} bytes sent", bytes.len());
    peer.send(&bytes);
    // The reading call is answered while the hoarders hold the share (the
    // test peer's own listen, to keep the messages); then long enough for
    // the worker to take in the rest.
    let heard = (*peer).listen(Duration::from_secs(10), |heard| {
        heard.status(summed).is_some()
    });
    assert_eq!(heard.statuses, [(summed, "0".to_string())], "{heard:?}");
    let reply = heard.messages_on(summed);
    assert_eq!(reply.len(), 1);
    assert_eq!(Item::decode(reply[0]).unwrap().value, 42);
    peer.listen(Duration::from_millis(500), |_| false);
    let stats = server.stats();
    assert!(
        stats.peak_queued_request_bytes <= limit + (4 << 20),
        "33 inflated messages of 4 MiB queued at once: {stats:?}"
    );
    assert!(stats.peak_queued_request_bytes >= 4 << 20, "{stats:?}");

    // The hoarders go: their threads drop what they never read.
    let mut resets = Vec::new();
    for &stream in &hoarders {
        Frame::rst_stream(stream, ErrorCode::CANCEL).write(&mut resets);
    }
    peer.send(&resets);
    for _ in 0..500 {
        if seen.hoarders_cancelled.load(Ordering::SeqCst) == 32 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(seen.hoarders_cancelled.load(Ordering::SeqCst), 32);
    drop(peer);
    server.shutdown();
}

/// Many streams of one connection served by sinks on other threads, to a
/// client that opens its windows wide and never reads: each sink's credit
/// bounds its own stream, and the connection bounds them together, so the
/// output does not hold a send buffer's worth for each of hundreds of
/// streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sinks_to_a_client_that_opens_its_windows_and_never_reads_are_bounded_together() {
    use common::raw::{frame_bytes, RawPeer};
    use pajamax::h2::frame::{kind, setting};
    use prost::Message;

    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let streams = 256;
    // Endless answers of 16 KiB, each stream from a thread of its own.
    let request = Ask {
        endless: true,
        size: 16 << 10,
        ..Ask::default()
    }
    .encode_to_vec();
    let peer = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
        let mut bytes = frame_bytes(kind::WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
        for i in 0..streams {
            bytes.extend(peer.request(1 + 2 * i, "/test.Streams/CountThread", &request));
        }
        peer.send(&bytes);
        // No reads from here on.
        std::thread::sleep(Duration::from_secs(2));
        peer
    })
    .await
    .unwrap();
    let stats = server.stats();
    good_client_is_served(&server).await;
    drop(peer);
    common::wait_for(|| seen.sends_cancelled.load(Ordering::SeqCst) == streams as usize).await;
    assert_eq!(
        seen.sends_cancelled.load(Ordering::SeqCst),
        streams as usize
    );
    assert_eq!(stats.peak_open_streams, streams as usize, "{stats:?}");
    // The produce limit, the connection's credit for its sinks, and the
    // pending-output limit; not 256 streams' send buffers (16 MiB).
    assert!(stats.peak_output_bytes <= 8 << 20, "{stats:?}");
    common::stop(server).await;
}

/// Bidirectional calls whose threads let go of their requests unread and
/// go on answering hold none of the connection's share of bytes queued for
/// threads: a client-streaming call to a thread that reads, on the same
/// connection, is fed and answers while they last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_a_thread_let_go_of_unread_hold_no_share_of_the_connection() {
    use tokio_stream::StreamExt;
    fn blobs(count: u64) -> impl tokio_stream::Stream<Item = Blob> + Send + 'static {
        tokio_stream::iter((1..=count).map(|value| Ask {
            value,
            ..Default::default()
        }))
        .map_blob(16 << 10)
    }
    let (server, seen) = streams::start(
        pajamax::Server::builder()
            .workers(1)
            .max_buffered_request_bytes(256 << 10),
    );
    let channel = common::connect(&server).await;
    let mut deaf = Vec::new();
    let mut ends = Vec::new();
    for _ in 0..2 {
        let mut client = tonic::client::Grpc::new(channel.clone());
        client.ready().await.unwrap();
        // 192 KiB each: together more than the connection's share.
        let (end, more) = tokio::sync::mpsc::channel::<Blob>(1);
        ends.push(end);
        let asks = blobs(12).chain(tokio_stream::wrappers::ReceiverStream::new(more));
        let codec = tonic_prost::ProstCodec::<Blob, Item>::default();
        let response = client
            .streaming(
                tonic::Request::new(asks),
                PathAndQuery::from_static("/test.Streams/Deaf"),
                codec,
            )
            .await
            .unwrap();
        let mut answers = response.into_inner();
        assert_eq!(answers.message().await.unwrap().unwrap().value, 1);
        deaf.push(answers);
    }
    // Their requests have had time to reach the server.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Blob, Item>::default();
    let sum = tokio::time::timeout(
        Duration::from_secs(60),
        client.client_streaming(
            tonic::Request::new(blobs(8)),
            PathAndQuery::from_static("/test.Streams/SumThread"),
            codec,
        ),
    )
    .await
    .expect("the call whose thread reads is fed")
    .unwrap();
    assert_eq!(sum.get_ref().value, 8 * 9 / 2);
    assert_eq!(seen.deaf_ended.load(Ordering::SeqCst), 0, "still going");
    // The client ends its requests, then cancels.
    drop(ends);
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(deaf);
    drop(channel);
    common::wait_for(|| seen.deaf_ended.load(Ordering::SeqCst) == 2).await;
    assert_eq!(seen.deaf_ended.load(Ordering::SeqCst), 2);
    common::stop(server).await;
}

/// Sinks of many calls on one connection share its credit, more than it
/// holds at once, while the client reads; a third of the calls are
/// cancelled part-way, often while their sinks wait for that credit. Every
/// other call gets all of its answers, and the connection's credit is all
/// there again after: a second round of calls on it ends whole as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sinks_sharing_a_connection_some_cancelled_mid_way_end_whole() {
    const CALLS: u32 = 96;
    const ITEMS: u32 = 40;
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    // 8 KiB answers: 96 sinks with a send buffer (64 KiB) each want more
    // than the connection lends its sinks together (4 MiB).
    let ask = Ask {
        count: ITEMS,
        size: 8 << 10,
        ..Ask::default()
    };
    let round = |calls: u32, cancel_every: u32| {
        let channel = channel.clone();
        let ask = ask.clone();
        async move {
            let mut tasks = Vec::new();
            for i in 0..calls {
                let channel = channel.clone();
                let cancel = cancel_every > 0 && i % cancel_every == 0;
                // A call to be cancelled asks for answers without end: its
                // thread ends only by learning that.
                let ask = Ask {
                    endless: cancel,
                    ..ask.clone()
                };
                tasks.push(tokio::spawn(async move {
                    let mut answers =
                        server_stream(channel, "CountThread", tonic::Request::new(ask))
                            .await
                            .unwrap()
                            .into_inner();
                    let mut got = 0;
                    while let Some(item) = answers.message().await.unwrap() {
                        got += 1;
                        assert_eq!(item.value, got);
                        if cancel && got == 3 {
                            // Dropped: the client resets the stream.
                            return None;
                        }
                    }
                    Some(got)
                }));
            }
            let mut whole = 0;
            let mut cancelled = 0;
            for task in tasks {
                match task.await.unwrap() {
                    Some(got) => {
                        assert_eq!(got, u64::from(ITEMS));
                        whole += 1;
                    }
                    None => cancelled += 1,
                }
            }
            (whole, cancelled)
        }
    };
    let (whole, cancelled) = tokio::time::timeout(Duration::from_secs(120), round(CALLS, 3))
        .await
        .expect("every call not cancelled ends");
    assert_eq!((whole, cancelled), (CALLS - CALLS / 3, CALLS / 3));
    common::wait_for(|| {
        seen.threads_done.load(Ordering::SeqCst) + seen.sends_cancelled.load(Ordering::SeqCst)
            == CALLS as usize
    })
    .await;
    assert_eq!(
        seen.threads_done.load(Ordering::SeqCst),
        (CALLS - CALLS / 3) as usize
    );
    assert_eq!(
        seen.sends_cancelled.load(Ordering::SeqCst),
        (CALLS / 3) as usize,
        "the threads of the calls cancelled learn it"
    );
    // The credit of the calls cancelled came back: more sinks than it
    // lets send at once still end.
    let (whole, _) = tokio::time::timeout(Duration::from_secs(120), round(CALLS, 0))
        .await
        .expect("a second round ends");
    assert_eq!(whole, CALLS);
    common::stop(server).await;
}

/// A client-streaming call answered by its thread before the client is
/// done ends there: the thread that still reads its requests learns so,
/// rather than waiting for ever for messages the server no longer takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answered_early_ends_the_requests_its_thread_reads() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1));
    let channel = common::connect(&server).await;
    let (more, asks) = tokio::sync::mpsc::channel::<Ask>(4);
    more.send(Ask {
        value: 5,
        ..Ask::default()
    })
    .await
    .unwrap();
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Ask, Item>::default();
    let answer = client
        .client_streaming(
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(asks)),
            PathAndQuery::from_static("/test.Streams/SumFirst"),
            codec,
        )
        .await
        .unwrap();
    assert_eq!(answer.get_ref().value, 5);
    // The client has not ended its requests.
    common::wait_for(|| seen.first_readers_ended.load(Ordering::SeqCst) == 1).await;
    assert_eq!(seen.first_readers_ended.load(Ordering::SeqCst), 1);
    drop(more);
    common::stop(server).await;
}

/// Request messages queued for a thread count in the connection's peak
/// of queued bytes even when the client resets the call in the same turn
/// of the connection: the stream is gone by the end of the turn, but the
/// bytes stay queued until the thread lets go of them.
#[test]
fn bytes_queued_for_a_call_reset_in_the_same_turn_count_in_the_peak() {
    use common::raw::RawPeer;
    use pajamax::{ClientStream, Context, Method, MethodKind, Reply, Service, Status};
    use pajamax_test_peer::{ErrorCode, Frame};
    use std::sync::Mutex;

    /// `test.Keep`: `Keep` keeps its requests and responder, unread, until
    /// the test lets go of them; `Sleep` holds the worker for a second.
    struct Keep(Arc<Mutex<Vec<Box<dyn Send>>>>);

    impl Service for Keep {
        fn name(&self) -> &'static str {
            "test.Keep"
        }

        fn methods(&self) -> &'static [Method] {
            &[
                Method {
                    name: "Keep",
                    kind: MethodKind::ClientStreaming,
                },
                Method {
                    name: "Sleep",
                    kind: MethodKind::Unary,
                },
            ]
        }

        fn unary(
            &self,
            _method: usize,
            _ctx: &mut Context<'_>,
            _request: &[u8],
            _reply: &mut Reply<'_>,
        ) -> Result<(), Status> {
            std::thread::sleep(Duration::from_secs(1));
            Ok(())
        }

        fn client_streaming(
            &self,
            _method: usize,
            ctx: &mut Context<'_>,
        ) -> Result<pajamax::grpc::streaming::RawInbound, Status> {
            let (stream, requests, responder) = ClientStream::<Ask, Item>::channel(ctx);
            self.0.lock().unwrap().push(Box::new((requests, responder)));
            Ok(stream.into_raw())
        }
    }

    fn message(declared: usize, body: usize) -> Vec<u8> {
        let mut message = vec![0];
        message.extend((declared as u32).to_be_bytes());
        message.extend(std::iter::repeat_n(0u8, body));
        message
    }

    let kept = Arc::new(Mutex::new(Vec::new()));
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Keep(kept.clone()))
        .bind("127.0.0.1:0")
        .unwrap();
    let mut peer = RawPeer::handshake(server.local_addr(), &[]);
    // A whole message of 10,000 bytes for the thread, the start of another
    // (60,000 bytes of 100,000), then the reset: more than the worker's
    // read buffer (64 KiB), so that the worker's first read fills it and
    // the reset comes in its second read of the same turn. A reset read
    // with the stream's HEADERS would take the call back before it opens.
    let body = 10_000;
    let mut bytes = Frame::settings_ack().to_bytes();
    peer.client
        .request_headers(1, "/test.Keep/Keep", &[], false)
        .write(&mut bytes);
    Frame::data(1, &message(body, body), false).write(&mut bytes);
    let rest = message(100_000, 60_000);
    for piece in rest.chunks(15_000) {
        Frame::data(1, piece, false).write(&mut bytes);
    }
    Frame::rst_stream(1, ErrorCode::CANCEL).write(&mut bytes);
    assert!(bytes.len() > 66 << 10, "{}", bytes.len());
    // All of it waits in the socket while the worker sleeps in a call of
    // another connection.
    let mut sleeper = RawPeer::handshake(server.local_addr(), &[]);
    let sleep = sleeper.request(1, "/test.Keep/Sleep", &[]);
    sleeper.send(&sleep);
    std::thread::sleep(Duration::from_millis(200));
    peer.send(&bytes);
    for _ in 0..500 {
        if server.stats().peak_queued_request_bytes >= body {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = server.stats();
    assert_eq!(kept.lock().unwrap().len(), 1, "the call was not opened");
    assert!(stats.peak_queued_request_bytes >= body, "{stats:?}");
    kept.lock().unwrap().clear();
    drop((peer, sleeper));
    server.shutdown();
}

/// A client stream read by a thread, whose client ends its requests and
/// shuts its sending half (its FIN) while the thread has no room for the
/// last ones yet, is still answered: every request has come, and the
/// thread takes them and answers without the client's help.
#[test]
fn a_client_stream_ended_at_the_clients_fin_while_its_thread_has_no_room_is_answered() {
    use common::raw::RawPeer;
    use pajamax_test_peer::Frame;
    use prost::Message;
    use streams::PaddedAsk;

    let (server, seen) = streams::start(
        pajamax::Server::builder()
            .workers(1)
            .max_buffered_request_bytes(1000),
    );
    let mut peer = RawPeer::connect(server.local_addr());
    let mut bytes = pajamax_test_peer::frame::handshake(&[]);
    peer.client
        .request_headers(1, "/test.Streams/SumThread", &[], false)
        .write(&mut bytes);
    // 15 messages of about 100 bytes: the thread takes the first, then
    // waits 300 ms; the connection's queued bytes hold about ten of them,
    // the others wait on the worker for room.
    for i in 0..15 {
        let ask = PaddedAsk {
            interval_ms: if i == 0 { 300 } else { 0 },
            value: 1,
            blob: vec![0; 90],
        };
        let body = pajamax_test_peer::grpc::message(&ask.encode_to_vec());
        Frame::data(1, &body, false).write(&mut bytes);
    }
    Frame::data(1, &[], true).write(&mut bytes);
    peer.send(&bytes);
    peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
    let heard = peer.listen(Duration::from_secs(10), |h| h.closed);
    assert_eq!(heard.statuses, [(1, "0".to_string())], "{heard:?}");
    assert!(heard.closed, "the connection was kept: {heard:?}");
    assert_eq!(seen.threads_done_by(1), 1);
    server.shutdown();
}
