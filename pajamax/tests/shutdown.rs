//! Graceful shutdown: calls in flight are answered, then the server stops.

mod common;

use common::{call, connect, start, ProbeRequest};
use std::time::Duration;

#[tokio::test]
async fn calls_in_flight_are_all_answered() {
    let server = start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let channel = connect(&server).await;
    let calls: Vec<_> = (0..10)
        .map(|i| {
            let channel = channel.clone();
            tokio::spawn(async move {
                let request = tonic::Request::new(ProbeRequest {
                    text: format!("slow {i}"),
                    sleep_ms: 100,
                    ..Default::default()
                });
                call(channel, "Sleep", request).await
            })
        })
        .collect();
    // Let the requests reach the server, then shut down while it is busy.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let shutdown = tokio::task::spawn_blocking(move || server.shutdown());
    for (i, task) in calls.into_iter().enumerate() {
        let reply = task.await.unwrap().expect("a call in flight is answered");
        assert_eq!(reply.get_ref().text, format!("slow {i}"));
    }
    tokio::time::timeout(Duration::from_secs(10), shutdown)
        .await
        .expect("shutdown finishes")
        .unwrap();
    // The listener is gone.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[tokio::test]
async fn shutdown_of_an_idle_server_is_prompt() {
    let server = start(pajamax::Server::builder().workers(2));
    let channel = connect(&server).await;
    call(channel, "Echo", common::text("x")).await.unwrap();
    let started = std::time::Instant::now();
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn shutdown_hooks_run_first_and_service_names_are_known() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let order = Arc::new(AtomicUsize::new(0));
    let (first, second) = (order.clone(), order.clone());
    let builder = pajamax::Server::builder()
        .workers(1)
        .on_shutdown(move || {
            assert_eq!(first.fetch_add(1, Ordering::SeqCst), 0);
        })
        .on_shutdown(move || {
            assert_eq!(second.fetch_add(1, Ordering::SeqCst), 1);
        });
    let builder = builder.add_service(common::Probe);
    assert_eq!(builder.service_names(), ["test.Probe"]);
    let server = builder.pin_workers(false).bind("127.0.0.1:0").unwrap();
    let channel = connect(&server).await;
    common::echo_works(channel, "before").await;
    assert_eq!(order.load(Ordering::SeqCst), 0, "not before shutdown");
    common::stop(server).await;
    assert_eq!(order.load(Ordering::SeqCst), 2);
}

/// Clients that keep opening connections and making a call while the server
/// shuts down: a connection the server took has its call answered, none is
/// reset or turned away once the server has spoken on it (a gateway could
/// not retry those calls). A connection the kernel queued but the server
/// never took (it hears nothing, and the listener's close resets it) counts
/// as refused: the server never read its call. And the listener is closed
/// before any GOAWAY goes out: a client that reconnects on a GOAWAY is
/// refused at once, not queued on a listener about to close. One connection
/// held open idle across the shutdown always hears that GOAWAY; the busy
/// clients hear it only when it lands while their call is open.
#[test]
fn connections_opened_during_a_shutdown_are_answered_or_refused() {
    use pajamax_test_peer::TcpClient;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let server = start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut answered, mut refused, mut lost) = (0u32, 0u32, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut peer) = TcpClient::handshake(addr, &[]) else {
                        refused += 1;
                        continue;
                    };
                    // The server speaks first (its SETTINGS) once it has
                    // taken the connection.
                    let first = peer.listen(Duration::from_secs(10), |h| h.frames > 0);
                    if first.frames == 0 {
                        refused += 1;
                        continue;
                    }
                    // ProbeRequest { text: "hi" }
                    let request = peer.client.request(1, "/test.Probe/Echo", b"\x0a\x02hi");
                    if let Err(err) = peer.send(&request) {
                        lost.push(format!("write failed: {err}"));
                        continue;
                    }
                    let heard = peer.listen(Duration::from_secs(10), |h| {
                        h.statuses.iter().any(|(stream, _)| *stream == 1)
                    });
                    match heard.statuses.iter().find(|(stream, _)| *stream == 1) {
                        Some((_, status)) if status == "0" => answered += 1,
                        other => lost.push(format!(
                            "status {other:?}, GOAWAY {:?} last stream {:?}, closed {}",
                            heard.goaway, heard.last_stream, heard.closed
                        )),
                    }
                    if first.goaway.is_some() || heard.goaway.is_some() {
                        match std::net::TcpStream::connect(addr) {
                            Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => {}
                            other => lost.push(format!(
                                "a connection after a GOAWAY was not refused: {other:?}"
                            )),
                        }
                    }
                }
                (answered, refused, lost)
            })
        })
        .collect();
    // A connection the server has taken and that stays open and idle.
    let mut idle = TcpClient::handshake(addr, &[]).expect("connects before the shutdown");
    let first = idle.listen(Duration::from_secs(10), |h| h.frames > 0);
    assert!(first.frames > 0, "the server took the idle connection");
    let idle = std::thread::spawn(move || {
        let heard = idle.listen_for_goaway(Duration::from_secs(10));
        let reconnect = std::net::TcpStream::connect(addr);
        (heard.goaway, reconnect)
    });
    std::thread::sleep(Duration::from_millis(300));
    server.shutdown();
    let (goaway, reconnect) = idle.join().unwrap();
    assert!(goaway.is_some(), "the idle connection hears a GOAWAY");
    assert!(
        matches!(&reconnect, Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused),
        "a connection after the GOAWAY is refused: {reconnect:?}"
    );
    // Clients keep trying for a while against the closed listener.
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let (mut answered, mut refused) = (0, 0);
    for client in clients {
        let (a, r, lost) = client.join().unwrap();
        assert!(lost.is_empty(), "calls lost at shutdown: {lost:?}");
        answered += a;
        refused += r;
    }
    assert!(answered > 0, "calls were answered before the shutdown");
    assert!(refused > 0, "connections were refused after it");
}

/// A client that asked for more than the socket takes and never reads:
/// once the grace period is over its connection is closed with the others,
/// and the shutdown ends instead of waiting for output that never leaves.
#[test]
fn a_client_that_never_reads_does_not_hold_the_shutdown_up() {
    use common::raw::{frame_bytes, RawPeer};
    use pajamax::h2::frame::{kind, setting};
    use prost::Message;

    let server = start(
        pajamax::Server::builder()
            .workers(1)
            .max_pending_output(256 << 10)
            .shutdown_grace(Duration::from_millis(200)),
    );
    let addr = server.local_addr();
    // Large windows, answers far larger than the socket buffers, no reads.
    let mut peer = RawPeer::handshake(addr, &[(setting::INITIAL_WINDOW_SIZE, 1 << 30)]);
    peer.send(&frame_bytes(
        kind::WINDOW_UPDATE,
        0,
        0,
        &(1u32 << 30).to_be_bytes(),
    ));
    let request = ProbeRequest {
        text: "x".into(),
        reply_size: 1 << 20,
        ..Default::default()
    }
    .encode_to_vec();
    let mut bytes = Vec::new();
    for i in 0..64u32 {
        bytes.extend(peer.request(1 + 2 * i, "/test.Probe/Echo", &request));
    }
    peer.send(&bytes);
    // The answers fill the socket buffers, then the server's output past
    // the limit that pauses reading.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let paused = || server.stats().peak_output_bytes > 256 << 10;
    while !paused() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(paused(), "{:?}", server.stats());
    let (done, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        server.shutdown();
        let _ = done.send(());
    });
    let ended = stopped.recv_timeout(Duration::from_secs(20));
    drop(peer);
    assert!(
        ended.is_ok(),
        "the shutdown waits for a client that never reads"
    );
}

/// A grace period too long to end at a point in time (`Duration::MAX`: wait
/// for the calls however long they take) is as any other: the call in
/// flight is answered, then the server stops.
#[tokio::test]
async fn a_grace_period_too_long_for_a_clock_waits_for_the_calls() {
    let server = start(
        pajamax::Server::builder()
            .workers(1)
            .shutdown_grace(Duration::MAX),
    );
    let channel = connect(&server).await;
    let deferred = tokio::spawn(async move {
        let request = tonic::Request::new(ProbeRequest {
            text: "late".into(),
            sleep_ms: 300,
            ..Default::default()
        });
        call(channel, "Defer", request).await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let shutdown = tokio::task::spawn_blocking(move || server.shutdown());
    let reply = deferred
        .await
        .unwrap()
        .expect("the call in flight is answered");
    assert_eq!(reply.get_ref().text, "late");
    tokio::time::timeout(Duration::from_secs(10), shutdown)
        .await
        .expect("shutdown finishes")
        .unwrap();
}
