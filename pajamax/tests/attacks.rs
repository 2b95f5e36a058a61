//! Known HTTP/2 attacks performed against a running server. For each: the
//! offender gets its bounded answer, the server's counters stay under the
//! configured limits, and a well-behaved connection on the same worker still
//! gets its answers.

mod common;

use common::raw::{frame_bytes, RawPeer};
use common::{call, connect, start, stop, text, ProbeRequest};
use pajamax::h2::frame::{flag, kind, setting, Reason};
use prost::Message;
use std::net::SocketAddr;
use std::time::Duration;

/// One worker, so the offender and the good client share it.
fn server(builder: pajamax::Builder) -> pajamax::ServerHandle {
    start(builder.workers(1))
}

async fn good_client_is_served(server: &pajamax::ServerHandle) {
    let channel = connect(server).await;
    let reply = call(channel, "Echo", text("still served")).await.unwrap();
    assert_eq!(reply.get_ref().text, "still served");
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

fn echo_request(reply_size: u32) -> Vec<u8> {
    ProbeRequest {
        text: "x".into(),
        reply_size,
        ..Default::default()
    }
    .encode_to_vec()
}

/// Sends `flood` after a handshake and expects GOAWAY(`reason`).
async fn flood_ends_in(addr: SocketAddr, flood: Vec<u8>, reason: Reason) {
    let heard = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let writer = peer.send_in_background(flood);
        let heard = peer.expect_goaway();
        let _ = writer.join();
        heard
    })
    .await;
    assert_eq!(heard.goaway, Some(reason), "{heard:?}");
}

fn repeat(frame: Vec<u8>, times: usize) -> Vec<u8> {
    frame.repeat(times)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_flood() {
    let server = server(pajamax::Server::builder());
    let flood = repeat(frame_bytes(kind::PING, 0, 0, &[7; 8]), 20_000);
    flood_ends_in(server.local_addr(), flood, Reason::ENHANCE_YOUR_CALM).await;
    good_client_is_served(&server).await;
    assert_eq!(server.stats().connection_errors, 1);
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_flood() {
    let server = server(pajamax::Server::builder());
    let flood = repeat(
        frame_bytes(kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]),
        20_000,
    );
    flood_ends_in(server.local_addr(), flood, Reason::ENHANCE_YOUR_CALM).await;
    good_client_is_served(&server).await;
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_data_and_headers_floods() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    // Empty DATA frames on an open stream.
    let mut peer = RawPeer::connect(addr);
    let mut flood = peer.request_block("/test.Probe/Echo", &[]);
    flood = frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &flood);
    flood.extend(repeat(frame_bytes(kind::DATA, 0, 1, b""), 20_000));
    flood_ends_in(addr, flood, Reason::ENHANCE_YOUR_CALM).await;
    // HEADERS frames with empty header blocks, each a malformed request.
    let mut flood = Vec::new();
    for i in 0..20_000u32 {
        flood.extend(frame_bytes(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1 + 2 * i,
            b"",
        ));
    }
    flood_ends_in(addr, flood, Reason::ENHANCE_YOUR_CALM).await;
    good_client_is_served(&server).await;
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rst_stream_flood_and_rapid_reset() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    let mut peer = RawPeer::connect(addr);
    let mut flood = Vec::new();
    for i in 0..20_000u32 {
        let id = 1 + 2 * i;
        let block = peer.request_block("/test.Probe/Echo", &[]);
        flood.extend(frame_bytes(kind::HEADERS, flag::END_HEADERS, id, &block));
        flood.extend(frame_bytes(kind::RST_STREAM, 0, id, &[0, 0, 0, 8]));
    }
    flood_ends_in(addr, flood, Reason::ENHANCE_YOUR_CALM).await;
    good_client_is_served(&server).await;
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_window_stall_with_large_replies_pending() {
    let limit = 1 << 20;
    let reply = 256 << 10;
    let h2 = pajamax::h2::Config {
        max_held_bytes: limit,
        ..Default::default()
    };
    let server = server(pajamax::Server::builder().h2_config(h2));
    let addr = server.local_addr();
    let (stalled, read) = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 0)]);
        // Answers run and are held until they pass the limit; the calls
        // after them wait with their requests, none refused.
        for batch in 0..2u32 {
            let mut bytes = Vec::new();
            for i in 0..10u32 {
                let id = 1 + 2 * (10 * batch + i);
                bytes.extend(peer.request(id, "/test.Probe/Echo", &echo_request(reply)));
            }
            peer.send(&bytes);
            std::thread::sleep(Duration::from_millis(300));
        }
        let stalled = peer.listen(Duration::from_millis(300), |_| false);
        // The client reads at last: every call is answered.
        let mut windows = frame_bytes(kind::WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
        for i in 0..20u32 {
            let increment = (reply + 1024).to_be_bytes();
            windows.extend(frame_bytes(kind::WINDOW_UPDATE, 0, 1 + 2 * i, &increment));
        }
        peer.send(&windows);
        let read = peer.listen(Duration::from_secs(10), |h| h.statuses.len() >= 20);
        (stalled, read)
    })
    .await;
    assert_eq!(stalled.data_bytes, 0, "nothing is sent into a zero window");
    assert!(stalled.resets.is_empty(), "{stalled:?}");
    // Held answers stop at the limit plus one.
    let stats = server.stats();
    assert!(
        stats.peak_held_bytes <= limit + reply as usize + 64,
        "{stats:?}"
    );
    assert!(stats.peak_held_bytes > limit, "{stats:?}");
    let answered: Vec<u32> = read.statuses.iter().map(|(id, _)| *id).collect();
    assert_eq!(answered.len(), 20, "{read:?}");
    assert!(read.statuses.iter().all(|(_, status)| status == "0"));
    assert!(read.resets.is_empty(), "{read:?}");
    good_client_is_served(&server).await;
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_dribble_with_one_byte_window_updates() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    let heard = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 0)]);
        let request = peer.request(1, "/test.Probe/Echo", &echo_request(300));
        peer.send(&request);
        // Once the answer waits for the window, open it a byte at a time.
        std::thread::sleep(Duration::from_millis(200));
        for _ in 0..400 {
            peer.send(&frame_bytes(kind::WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes()));
        }
        peer.listen(Duration::from_secs(10), |h| !h.statuses.is_empty())
    })
    .await;
    // The whole answer trickles out, a byte per update (the bytes of the
    // updates read together go out in one frame), and ends well.
    assert!(heard.data_bytes > 300, "{heard:?}");
    assert_eq!(heard.statuses, vec![(1, "0".to_string())]);
    good_client_is_served(&server).await;
    assert!(server.stats().peak_output_bytes < 64 << 10);
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpack_bomb_and_oversized_header_list() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    let heard = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        // A 4000-byte value enters the dynamic table once...
        let big = "b".repeat(4000);
        let block = peer.request_block("/test.Probe/Echo", &[("x-bomb", &big)]);
        let mut bytes = frame_bytes(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
            &block,
        );
        // (evicting everything else), then one small block refers to it
        // 4000 times: 16 MB decoded from 8 KB.
        let mut block = peer.literal_block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/test.Probe/Echo"),
            ("content-type", "application/grpc"),
        ]);
        block.extend(std::iter::repeat_n(0x80 | 62, 4000));
        bytes.extend(frame_bytes(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            3,
            &block,
        ));
        peer.send(&bytes);
        peer.listen(Duration::from_secs(5), |h| h.statuses.len() >= 2)
    })
    .await;
    // The first request is within limits (it has no message: INTERNAL);
    // the bomb passes the 16 KiB header list limit and that call alone is
    // answered RESOURCE_EXHAUSTED, without the fields being stored.
    assert_eq!(heard.goaway, None, "{heard:?}");
    assert_eq!(
        heard.statuses,
        vec![(1, "13".to_string()), (3, "8".to_string())]
    );
    good_client_is_served(&server).await;
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_flood() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    let mut peer = RawPeer::connect(addr);
    let block = peer.request_block("/test.Probe/Echo", &[]);
    let mut flood = frame_bytes(kind::HEADERS, 0, 1, &block);
    flood.extend(repeat(
        frame_bytes(kind::CONTINUATION, 0, 1, &[0x40; 1000]),
        1000,
    ));
    flood_ends_in(addr, flood, Reason::ENHANCE_YOUR_CALM).await;
    // Empty CONTINUATION frames cost nothing to buffer but are counted.
    let mut flood = frame_bytes(kind::HEADERS, 0, 1, &block);
    flood.extend(repeat(frame_bytes(kind::CONTINUATION, 0, 1, b""), 20_000));
    flood_ends_in(addr, flood, Reason::ENHANCE_YOUR_CALM).await;
    good_client_is_served(&server).await;
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris() {
    let server = server(
        pajamax::Server::builder()
            .handshake_timeout(Duration::from_millis(300))
            .idle_timeout(Duration::from_millis(300)),
    );
    let addr = server.local_addr();
    let (half, silent) = blocking(move || {
        // Half a preface, then nothing.
        let mut half = RawPeer::connect(addr);
        half.send(&pajamax::h2::frame::PREFACE[..10]);
        // A whole preface, then nothing.
        let mut silent = RawPeer::handshake(addr, &[]);
        let wait = Duration::from_secs(5);
        (
            half.listen(wait, |h| h.closed),
            silent.listen(wait, |h| h.closed),
        )
    })
    .await;
    assert!(half.closed && silent.closed);
    assert_eq!(half.goaway, Some(Reason::PROTOCOL_ERROR));
    assert_eq!(silent.goaway, Some(Reason::NO_ERROR));
    good_client_is_served(&server).await;
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_that_never_reads() {
    let limit = 256 << 10;
    let server = server(pajamax::Server::builder().max_pending_output(limit));
    let addr = server.local_addr();
    let reply = 16 << 10;
    let writer = blocking(move || {
        // Large windows, many requests with large answers, and no reads.
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
        peer.send(&frame_bytes(
            kind::WINDOW_UPDATE,
            0,
            0,
            &(1u32 << 30).to_be_bytes(),
        ));
        let mut bytes = Vec::new();
        for i in 0..3000u32 {
            bytes.extend(peer.request(1 + 2 * i, "/test.Probe/Echo", &echo_request(reply)));
        }
        let writer = peer.send_in_background(bytes);
        std::thread::sleep(Duration::from_secs(2));
        (peer, writer)
    })
    .await;
    let stats = server.stats();
    // The unwritten output stops growing at the limit plus one batch of
    // answers (MAX_EVENTS_PER_RECV requests).
    let bound = limit + pajamax::h2::connection::MAX_EVENTS_PER_RECV * (reply as usize + 64);
    assert!(stats.peak_output_bytes <= bound, "{stats:?} > {bound}");
    good_client_is_served(&server).await;
    drop(writer);
    stop(server).await;
}

/// A peer that never reads, whose calls are answered from other threads:
/// reading stops as for answers made on the worker, but the calls already
/// under way still answer, each into the output. The unwritten output
/// stops growing at the limit plus one batch and the answers of the calls
/// that were under way, at most `max_concurrent_streams` of them: the
/// calls the peer sends once those have answered are not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_that_never_reads_answers_from_threads() {
    let limit = 256 << 10;
    let streams = 1000;
    let server = server(
        pajamax::Server::builder()
            .max_pending_output(limit)
            .max_concurrent_streams(streams),
    );
    let addr = server.local_addr();
    let reply = 64 << 10;
    let (peer, writer, later) = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
        peer.send(&frame_bytes(
            kind::WINDOW_UPDATE,
            0,
            0,
            &(1u32 << 30).to_be_bytes(),
        ));
        // Every call reaches its thread before the first answer comes back.
        let request = ProbeRequest {
            text: "x".into(),
            reply_size: reply,
            sleep_ms: 300,
            ..Default::default()
        }
        .encode_to_vec();
        let mut bytes = Vec::new();
        for i in 0..streams {
            bytes.extend(peer.request(1 + 2 * i, "/test.Probe/Defer", &request));
        }
        // As many again, sent once the first have answered: their streams
        // are free then, and only the stop of reading holds them back.
        let mut later = Vec::new();
        for i in streams..2 * streams {
            later.extend(peer.request(1 + 2 * i, "/test.Probe/Defer", &request));
        }
        let writer = peer.send_in_background(bytes);
        (peer, writer, later)
    })
    .await;
    let answered = || server.stats().workers[0].requests_answered;
    common::wait_for(|| answered() == u64::from(streams)).await;
    let later = peer.send_in_background(later);
    // Longer than the calls take, had they been read.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let batch = pajamax::h2::connection::MAX_EVENTS_PER_RECV;
    // One read's batch may go in before reading stops; no more.
    assert!(
        answered() <= u64::from(streams) + batch as u64,
        "{} answered: read past the limit",
        answered()
    );
    let stats = server.stats();
    let answer = reply as usize + 64;
    let bound = limit + (batch + streams as usize) * answer;
    assert!(stats.peak_output_bytes <= bound, "{stats:?} > {bound}");
    good_client_is_served(&server).await;
    drop((writer, later, peer));
    stop(server).await;
}

/// Clients that send a request and close their sending half at once (the
/// FIN arriving with the bytes before it) are answered and let go: the end
/// of their input is not missed, so their connections are not held until
/// an idle timeout that is off by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_close_right_after_their_request_are_let_go() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    for round in 0..20 {
        let heard = blocking(move || {
            let mut peer = RawPeer::connect(addr);
            let mut bytes = pajamax_test_peer::frame::handshake(&[]);
            bytes.extend(peer.request(1, "/test.Probe/Echo", &echo_request(10)));
            peer.send(&bytes);
            peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
            peer.listen(Duration::from_secs(5), |h| h.closed)
        })
        .await;
        assert_eq!(heard.statuses, [(1, "0".to_string())], "round {round}");
        assert!(
            heard.closed,
            "round {round}: the connection was kept: {heard:?}"
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.stats().connections > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.stats().connections, 0);
    good_client_is_served(&server).await;
    stop(server).await;
}

/// A call answered from another thread (`ctx.defer()`) whose client shut
/// its sending half right after the request still gets its answer: the
/// peer's FIN ends what it sends, not what it reads (as for a server
/// stream, `a_server_stream_asked_for_right_before_the_clients_fin_is_answered_whole`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_call_asked_for_right_before_the_clients_fin_is_answered() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    let request = ProbeRequest {
        text: "later".into(),
        sleep_ms: 200,
        ..Default::default()
    }
    .encode_to_vec();
    let heard = blocking(move || RawPeer::ask_then_fin(addr, "/test.Probe/Defer", &request)).await;
    assert_eq!(heard.statuses, [(1, "0".to_string())], "{heard:?}");
    assert!(heard.closed, "the connection was kept: {heard:?}");
    good_client_is_served(&server).await;
    stop(server).await;
}

/// Unary answers larger than the socket takes at once, asked for right
/// before the client's FIN, all arrive: the calls are over on the server's
/// side (their answers are in the output), but the output still waits for
/// the client to read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_answers_still_waiting_for_the_socket_at_the_clients_fin_all_arrive() {
    const CALLS: u32 = 40;
    const SIZE: u32 = 500_000;
    // Every answer is made at once, into the output (reading is not
    // paused): far more than the socket takes before the client reads.
    let server = server(pajamax::Server::builder().max_pending_output(64 << 20));
    let addr = server.local_addr();
    let heard = blocking(move || {
        let mut peer = RawPeer::connect(addr);
        // Windows for every answer: the client need not send anything more.
        let mut bytes =
            pajamax_test_peer::frame::handshake(&[(setting::INITIAL_WINDOW_SIZE, 1 << 20)]);
        pajamax_test_peer::frame::Frame::window_update(0, 64 << 20).write(&mut bytes);
        for i in 0..CALLS {
            bytes.extend(peer.request(2 * i + 1, "/test.Probe/Echo", &echo_request(SIZE)));
        }
        peer.send(&bytes);
        peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
        // Reads only later: the server meets the FIN with answers waiting.
        std::thread::sleep(Duration::from_millis(500));
        peer.listen(Duration::from_secs(20), |h| h.closed)
    })
    .await;
    assert_eq!(
        heard.statuses.len(),
        CALLS as usize,
        "{} bytes of DATA heard, closed: {}",
        heard.data_bytes,
        heard.closed
    );
    assert!(heard.statuses.iter().all(|(_, status)| status == "0"));
    assert!(heard.closed, "the connection was kept");
    good_client_is_served(&server).await;
    stop(server).await;
}

/// Thousands of half-open streams whose header lists are each near the
/// limit, made of a few bytes that refer to one large value in the HPACK
/// table (and a literal that differs, so that no two blocks are the same):
/// the connection holds its open calls' metadata up to its own limit, and
/// refuses the streams past it, instead of holding a header list for each
/// of 4096 streams (some 46 MiB from 300 KiB on the wire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_streams_with_large_header_lists_from_the_hpack_table_are_bounded() {
    use pajamax_test_peer::{Frame, Indexing};

    let limit = 1 << 20;
    let server = server(pajamax::Server::builder().max_request_metadata_bytes(limit));
    let addr = server.local_addr();
    let streams = 4096u32;
    let heard = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let big = "b".repeat(3800);
        let numbers: Vec<String> = (0..streams).map(|i| i.to_string()).collect();
        let mut bytes = Vec::new();
        for i in 0..streams {
            let mut fields = pajamax_test_peer::grpc::request_fields("/test.Probe/Echo").to_vec();
            fields.extend([("x-big", big.as_str()); 3]);
            fields.push(("x-n", numbers[i as usize].as_str()));
            let mut block = Vec::new();
            if i == 0 {
                // The large value goes into the table once.
                block = peer.client.block(&[("x-big", &big)], Indexing::Incremental);
            }
            block.extend(peer.client.block(&fields, Indexing::None));
            Frame::headers(1 + 2 * i, &block, false).write(&mut bytes);
        }
        assert!(bytes.len() < 400 << 10, "{} bytes sent", bytes.len());
        peer.send(&bytes);
        peer.listen(Duration::from_secs(2), |heard| heard.resets.len() >= 3900)
    })
    .await;
    assert_eq!(heard.goaway, None);
    let refused = heard
        .resets
        .iter()
        .filter(|(_, reason)| *reason == Reason::REFUSED_STREAM)
        .count();
    // Some 11.5 KiB of metadata each: about 90 fit in 1 MiB.
    assert!(refused >= 3900, "{refused} streams refused");
    let stats = server.stats();
    assert!(stats.peak_open_streams <= 200, "{stats:?}");
    good_client_is_served(&server).await;
    stop(server).await;
}

/// A peer that goes on sending as fast as it can after the server's final
/// GOAWAY: the worker still serves its other connections meanwhile (what
/// the peer sends is read and dropped a bounded amount per turn). On
/// loopback the worker often empties the socket faster than the peer fills
/// it, so this passes without the bound too; the bound itself is
/// `runtime::worker`'s `a_lingering_connection_reads_a_bounded_amount_a_turn`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_sends_on_after_the_final_goaway_does_not_hold_the_worker() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    let stop_flood = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let halt = stop_flood.clone();
    let flooder = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        // DATA on stream 0: a connection error.
        peer.send(&frame_bytes(kind::DATA, 0, 0, b"x"));
        let heard = peer.expect_goaway();
        assert_eq!(heard.goaway, Some(Reason::PROTOCOL_ERROR));
        let mut socket = peer.socket.try_clone().unwrap();
        std::thread::spawn(move || {
            use std::io::Write;
            let chunk = vec![0u8; 1 << 20];
            let mut sent = 0usize;
            while !halt.load(std::sync::atomic::Ordering::Relaxed) {
                match socket.write(&chunk) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            sent
        })
    })
    .await;
    // Let the flood run, then ask on the same worker.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let served =
        tokio::time::timeout(Duration::from_secs(10), good_client_is_served(&server)).await;
    stop_flood.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = blocking(move || flooder.join().unwrap()).await;
    served.expect("the worker was held by the lingering connection");
    assert!(sent > 1 << 20, "the flood sent {sent} bytes");
    stop(server).await;
}

/// A peer that sends more after the final GOAWAY than one turn reads, then
/// closes: the rest is still read, and the connection let go at the end of
/// the peer's input rather than held for the linger time (1 s) and closed
/// with the input unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_closes_after_a_burst_past_the_final_goaway_is_let_go_at_once() {
    let server = server(pajamax::Server::builder());
    let addr = server.local_addr();
    let (peer, goaway_heard) = blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        // DATA on stream 0: a connection error.
        peer.send(&frame_bytes(kind::DATA, 0, 0, b"x"));
        let heard = peer.expect_goaway();
        let goaway_heard = std::time::Instant::now();
        assert_eq!(heard.goaway, Some(Reason::PROTOCOL_ERROR));
        // Many turns' worth of reads, then the end of the peer's input.
        peer.send_in_background(vec![0; 1 << 20]).join().unwrap();
        // Fails if the server has let the connection go already.
        let _ = peer.socket.shutdown(std::net::Shutdown::Write);
        (peer, goaway_heard)
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.stats().connections > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let held = goaway_heard.elapsed();
    assert_eq!(server.stats().connections, 0);
    // The linger time is 1 s; reading 1 MiB takes a few milliseconds.
    assert!(
        held < Duration::from_millis(900),
        "the lingering connection was held {held:?} after the GOAWAY"
    );
    drop(peer);
    good_client_is_served(&server).await;
    stop(server).await;
}
