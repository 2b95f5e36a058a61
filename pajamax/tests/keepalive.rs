//! Keepalive: a connection that stays quiet is sent a PING; one whose
//! client answers nothing in time is dropped, and the calls it held end.
//! PINGs do not count as calls for the idle timeout, whose GOAWAY loses no
//! call already on its way.

mod common;

use common::raw::{frame_bytes, RawPeer};
use common::streams::{self, Ask};
use pajamax::h2::frame::{flag, kind, setting, Reason};
use pajamax_test_peer::{Heard, TcpClient};
use prost::Message;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Long enough for anything the tests wait for; they end as soon as it
/// happens.
const WAIT: Duration = Duration::from_secs(10);

/// Reads until the server sends a PING or closes; what was heard.
fn next_ping(peer: &mut RawPeer) -> Heard {
    TcpClient::listen(peer, WAIT, |h| !h.pings.is_empty() || h.closed)
}

/// A PING's acknowledgement.
fn ack(payload: &[u8; 8]) -> Vec<u8> {
    frame_bytes(kind::PING, flag::ACK, 0, payload)
}

fn keepalive(interval_ms: u64, timeout_ms: u64) -> pajamax::Builder {
    pajamax::Server::builder()
        .workers(1)
        .keepalive_interval(Some(Duration::from_millis(interval_ms)))
        .keepalive_timeout(Duration::from_millis(timeout_ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_answers_no_ping_is_dropped() {
    let server = common::start(keepalive(100, 200));
    let addr = server.local_addr();
    let (first, last) = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let first = next_ping(&mut peer);
        // Silent from here on: no ACK, nothing else.
        let last = TcpClient::listen(&mut peer, WAIT, |h| h.closed);
        (first, last)
    })
    .await
    .unwrap();
    assert_eq!(first.pings.len(), 1, "{first:?}");
    assert!(!first.closed, "closed before its PING: {first:?}");
    assert!(last.closed, "still open: {last:?}");
    // The peer is taken for gone: no GOAWAY, no second PING.
    assert!(last.pings.is_empty() && last.goaway.is_none(), "{last:?}");
    common::stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_answers_its_pings_keeps_its_connection() {
    let (server, _seen) = streams::start(keepalive(100, 200));
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        for _ in 0..4 {
            let heard = next_ping(&mut peer);
            assert!(!heard.closed, "closed while answering: {heard:?}");
            assert_eq!(heard.pings.len(), 1, "{heard:?}");
            peer.send(&ack(&heard.pings[0]));
        }
        // Four timeouts later, the connection still serves a call.
        let request = Ask {
            value: 7,
            ..Ask::default()
        }
        .encode_to_vec();
        let bytes = peer.request(1, "/test.Streams/Unary", &request);
        peer.send(&bytes);
        TcpClient::listen(&mut peer, WAIT, |h| h.status(1).is_some() || h.closed)
    })
    .await
    .unwrap();
    assert_eq!(heard.status(1), Some("0"), "{heard:?}");
    assert!(!heard.closed);
    common::stop(server).await;
}

/// A client that vanished in the middle of a server stream, its windows
/// shut so that the thread feeding the stream waits for room: the thread
/// learns that the call ended once the PING goes unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_to_a_client_that_vanished_is_cancelled() {
    let (server, seen) = streams::start(keepalive(100, 200));
    let addr = server.local_addr();
    let request = Ask {
        endless: true,
        size: 1024,
        ..Ask::default()
    }
    .encode_to_vec();
    let heard = tokio::task::spawn_blocking(move || {
        // A stream window of 4 KiB the client never opens further.
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 4096)]);
        let bytes = peer.request(1, "/test.Streams/CountThread", &request);
        peer.send(&bytes);
        TcpClient::listen(&mut peer, WAIT, |h| h.closed)
    })
    .await
    .unwrap();
    assert!(heard.closed, "{heard:?}");
    assert!(heard.data_bytes > 0 && !heard.pings.is_empty(), "{heard:?}");
    for _ in 0..500 {
        if seen.sends_cancelled.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(seen.threads_done.load(Ordering::SeqCst), 0);
    common::stop(server).await;
}

/// Until the server says goodbye, a client that answers each of the
/// server's PINGs and, with `own_pings`, sends one of its own every 20 ms;
/// what it heard.
fn talk_until_goodbye(addr: std::net::SocketAddr, own_pings: bool) -> Heard {
    let mut peer = RawPeer::handshake(addr, &[]);
    let mut all = Heard::default();
    // At most 5 s (250 rounds of 20 ms).
    for _ in 0..250 {
        if all.goaway.is_some() || all.closed {
            break;
        }
        if own_pings {
            peer.send(&frame_bytes(kind::PING, 0, 0, b"client!!"));
        }
        let heard = TcpClient::listen(&mut peer, Duration::from_millis(20), |h| {
            h.goaway.is_some() || h.closed
        });
        for payload in &heard.pings {
            peer.send(&ack(payload));
        }
        all.goaway = heard.goaway.or(all.goaway);
        all.closed |= heard.closed;
        all.pings.extend(heard.pings);
    }
    all
}

/// PINGs are not calls: a connection with none is closed at the idle
/// timeout, whether the client answers the server's PINGs or sends its
/// own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_do_not_keep_an_idle_connection_open() {
    let server = common::start(keepalive(50, 5_000).idle_timeout(Duration::from_millis(400)));
    let addr = server.local_addr();
    let (answering, pinging) = tokio::task::spawn_blocking(move || {
        (
            talk_until_goodbye(addr, false),
            talk_until_goodbye(addr, true),
        )
    })
    .await
    .unwrap();
    assert!(
        !answering.pings.is_empty(),
        "no keepalive PING: {answering:?}"
    );
    for heard in [answering, pinging] {
        assert_eq!(
            heard.goaway.map(|code| Reason(code.0)),
            Some(Reason::NO_ERROR),
            "{heard:?}"
        );
    }
    common::stop(server).await;
}

/// The idle timeout's GOAWAY comes in two steps, as a shutdown's: a call
/// the client sent before it saw the first GOAWAY (it answers the PING
/// after it) is answered, and the connection then closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_sent_as_the_idle_timeout_strikes_is_answered() {
    let server = common::start(
        pajamax::Server::builder()
            .workers(1)
            .idle_timeout(Duration::from_millis(300)),
    );
    let addr = server.local_addr();
    let (first, last) = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let first = TcpClient::listen(&mut peer, WAIT, |h| {
            h.goaway.is_some() && !h.pings.is_empty() || h.closed
        });
        // The call, on its way as the GOAWAY came, then the PING's answer.
        let mut bytes = peer.request(1, "/test.Probe/Echo", b"\x0a\x02hi");
        for payload in &first.pings {
            bytes.extend(ack(payload));
        }
        peer.send(&bytes);
        let last = TcpClient::listen(&mut peer, WAIT, |h| h.closed);
        (first, last)
    })
    .await
    .unwrap();
    assert_eq!(
        first.goaway.map(|code| Reason(code.0)),
        Some(Reason::NO_ERROR),
        "{first:?}"
    );
    assert!(!first.closed, "{first:?}");
    assert_eq!(last.status(1), Some("0"), "{last:?}");
    assert_eq!(last.last_stream, Some(1), "{last:?}");
    assert!(last.closed, "{last:?}");
    common::stop(server).await;
}

/// A client that answers nothing to the idle timeout's GOAWAY and PING is
/// closed all the same, with a GOAWAY naming no stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_that_answers_no_goaway_is_closed() {
    let server = common::start(
        pajamax::Server::builder()
            .workers(1)
            .keepalive_interval(None)
            .idle_timeout(Duration::from_millis(200)),
    );
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        TcpClient::listen(&mut peer, WAIT, |h| h.closed)
    })
    .await
    .unwrap();
    assert!(heard.closed, "{heard:?}");
    assert_eq!(heard.last_stream, Some(0), "{heard:?}");
    assert_eq!(
        heard.goaway.map(|code| Reason(code.0)),
        Some(Reason::NO_ERROR)
    );
    common::stop(server).await;
}

/// A client that closed its sending half right after its request cannot
/// answer a PING: its paced stream, longer than the keepalive interval and
/// timeout together, still arrives whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_has_closed_its_sending_half_is_not_pinged_away() {
    let (server, _seen) = streams::start(keepalive(50, 100));
    let addr = server.local_addr();
    // 20 small answers, 30 ms apart: some 600 ms.
    let request = Ask {
        count: 20,
        interval_ms: 30,
        ..Ask::default()
    }
    .encode_to_vec();
    let heard = tokio::task::spawn_blocking(move || {
        RawPeer::ask_then_fin(addr, "/test.Streams/Count", &request)
    })
    .await
    .unwrap();
    assert_eq!(heard.statuses, [(1, "0".to_string())], "{heard:?}");
    common::stop(server).await;
}

/// A client that reads its answers slowly, so that the server stops
/// reading from it for a while, is not taken for gone: the PING's answer
/// could not be read meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_reading_is_paused_is_not_pinged_away() {
    let server = common::start(keepalive(50, 100).max_pending_output(64 << 10));
    let addr = server.local_addr();
    let request = |reply_size| {
        common::ProbeRequest {
            reply_size,
            ..Default::default()
        }
        .encode_to_vec()
    };
    let (answered, last) = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
        let mut bytes = frame_bytes(kind::WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
        // 1000 answers of 64 KiB: far more than the pending-output limit
        // and the sockets' buffers, so the server stops reading.
        for i in 0..1000u32 {
            bytes.extend(peer.request(1 + 2 * i, "/test.Probe/Echo", &request(64 << 10)));
        }
        peer.send(&bytes);
        // Nothing read for longer than the keepalive interval and timeout.
        std::thread::sleep(Duration::from_millis(600));
        let mut answered = 0;
        loop {
            let heard = TcpClient::listen(&mut peer, WAIT, |h| h.closed || !h.statuses.is_empty());
            for payload in &heard.pings {
                peer.send(&ack(payload));
            }
            answered += heard.statuses.len();
            if heard.closed || heard.statuses.is_empty() || answered == 1000 {
                break;
            }
        }
        // The connection still serves a call.
        let bytes = peer.request(2001, "/test.Probe/Echo", &request(1));
        peer.send(&bytes);
        let last = TcpClient::listen(&mut peer, WAIT, |h| h.closed || h.status(2001).is_some());
        (answered, last)
    })
    .await
    .unwrap();
    assert_eq!(answered, 1000);
    assert_eq!(last.status(2001), Some("0"), "{last:?}");
    common::stop(server).await;
}

/// A client that asked for more than the socket takes and reads nothing,
/// so that the server stops reading from it, is closed by the idle
/// timeout once its calls are answered, and dropped since it does not
/// take that last output, instead of being held for as long as it does
/// not read.
#[test]
fn an_idle_client_that_reads_nothing_is_dropped() {
    let server = common::start(
        pajamax::Server::builder()
            .workers(1)
            .keepalive_interval(None)
            .max_pending_output(256 << 10)
            .idle_timeout(Duration::from_millis(200)),
    );
    let addr = server.local_addr();
    let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
    let mut bytes = frame_bytes(kind::WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
    let request = common::ProbeRequest {
        reply_size: 1 << 20,
        ..Default::default()
    }
    .encode_to_vec();
    for i in 0..16u32 {
        bytes.extend(peer.request(1 + 2 * i, "/test.Probe/Echo", &request));
    }
    peer.send(&bytes);
    let deadline = std::time::Instant::now() + WAIT;
    while server.connections() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.connections(), 0, "the connection is kept");
    drop(peer);
    server.shutdown();
}
