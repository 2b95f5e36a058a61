//! Request checks and server limits seen from a raw client.

mod common;

use common::raw::{frame_bytes, RawPeer};
use common::{connect, start, stop, ProbeRequest};
use pajamax::h2::frame::{flag, kind, Reason};
use prost::Message;
use std::time::Duration;

fn request_with_content_type(peer: &mut RawPeer, stream: u32, content_type: &str) -> Vec<u8> {
    let mut block = Vec::new();
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/test.Probe/Echo"),
        ("content-type", content_type),
    ];
    block.extend(peer.literal_block(&fields));
    let mut out = frame_bytes(kind::HEADERS, flag::END_HEADERS, stream, &block);
    let message = ProbeRequest {
        text: "ct".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut body = vec![0];
    body.extend((message.len() as u32).to_be_bytes());
    body.extend(message);
    out.extend(frame_bytes(kind::DATA, flag::END_STREAM, stream, &body));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_type_is_checked() {
    let server = start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let mut bytes = request_with_content_type(&mut peer, 1, "application/grpc+proto");
        bytes.extend(request_with_content_type(
            &mut peer,
            3,
            "application/grpc;charset=utf-8",
        ));
        bytes.extend(request_with_content_type(&mut peer, 5, "application/json"));
        peer.send(&bytes);
        peer.listen(Duration::from_secs(5), |h| {
            h.statuses.len() >= 2 && h.data_frames >= 3
        })
    })
    .await
    .unwrap();
    // Both gRPC content types are served; the JSON request gets HTTP 415
    // with a text body and no grpc-status.
    assert_eq!(
        heard.statuses,
        vec![(1, "0".to_string()), (3, "0".to_string())]
    );
    assert_eq!(heard.data_frames, 3, "{heard:?}");
    assert_eq!(heard.goaway, None);
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_other_than_post_gets_405() {
    let server = start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let mut bytes = Vec::new();
        for (stream, method, content_type) in [
            (1, "GET", "application/grpc"),
            (3, "PUT", "application/grpc"),
            (5, "POST", "text/html"),
        ] {
            let block = peer.literal_block(&[
                (":method", method),
                (":scheme", "http"),
                (":path", "/test.Probe/Echo"),
                ("content-type", content_type),
            ]);
            let flags = flag::END_HEADERS | flag::END_STREAM;
            bytes.extend(frame_bytes(kind::HEADERS, flags, stream, &block));
        }
        peer.send(&bytes);
        pajamax_test_peer::TcpClient::listen(&mut peer, Duration::from_secs(5), |h| {
            h.blocks.len() >= 3
        })
    })
    .await
    .unwrap();
    // The content type is right but the method is not: 405 Method Not
    // Allowed, with the one method allowed (RFC 9110 section 15.5.6); a
    // wrong content type is still 415.
    let answer = |stream: u32| {
        let block = heard.blocks.iter().find(|b| b.stream == stream).unwrap();
        (block.get(":status"), block.get("allow"))
    };
    assert_eq!(
        answer(1),
        (Some(&b"405"[..]), Some(&b"POST"[..])),
        "{heard:?}"
    );
    assert_eq!(
        answer(3),
        (Some(&b"405"[..]), Some(&b"POST"[..])),
        "{heard:?}"
    );
    assert_eq!(answer(5), (Some(&b"415"[..]), None), "{heard:?}");
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_to_head_has_no_body() {
    let server = start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        let block = peer.literal_block(&[
            (":method", "HEAD"),
            (":scheme", "http"),
            (":path", "/test.Probe/Echo"),
            ("content-type", "application/grpc"),
        ]);
        let flags = flag::END_HEADERS | flag::END_STREAM;
        peer.send(&frame_bytes(kind::HEADERS, flags, 1, &block));
        pajamax_test_peer::TcpClient::listen(&mut peer, Duration::from_secs(5), |h| {
            h.blocks.iter().any(|b| b.end_stream) || h.data_frames > 0
        })
    })
    .await
    .unwrap();
    // A response to HEAD has no content (RFC 9110 section 9.3.2): the
    // header block ends the stream, and no DATA follows.
    let answer = &heard.blocks[0];
    assert_eq!(answer.get(":status"), Some(&b"405"[..]), "{heard:?}");
    assert!(answer.end_stream, "{heard:?}");
    assert_eq!(heard.data_frames, 0, "{heard:?}");
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_is_not_grpc_gets_415_when_its_deadline_passes() {
    let server = start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        // The body never ends; the request's grpc-timeout passes first.
        let block = peer.literal_block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/test.Probe/Echo"),
            ("content-type", "application/json"),
            ("grpc-timeout", "100m"),
        ]);
        peer.send(&frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &block));
        pajamax_test_peer::TcpClient::listen(&mut peer, Duration::from_secs(5), |h| {
            !h.blocks.is_empty()
        })
    })
    .await
    .unwrap();
    // Still HTTP 415, not a gRPC answer (HTTP 200 with DEADLINE_EXCEEDED)
    // that an HTTP client would take for a success.
    let answer = &heard.blocks[0];
    assert_eq!(answer.get(":status"), Some(&b"415"[..]), "{heard:?}");
    assert_eq!(answer.get("grpc-status"), None, "{heard:?}");
    assert_eq!(
        heard.resets,
        vec![(1, pajamax_test_peer::ErrorCode::NO_ERROR)]
    );
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_get_goaway_and_a_clean_close() {
    let server = start(pajamax::Server::builder().workers(2).max_connections(2));
    let _first = connect(&server).await;
    let _second = connect(&server).await;
    let addr = server.local_addr();
    let heard = tokio::task::spawn_blocking(move || {
        let mut peer = RawPeer::handshake(addr, &[]);
        peer.listen(Duration::from_secs(5), |h| h.closed)
    })
    .await
    .unwrap();
    assert_eq!(heard.goaway, Some(Reason::NO_ERROR), "{heard:?}");
    assert!(heard.closed);
    // The rejected connection goes away; the two admitted ones stay.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.connections() != 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.connections(), 2);
    stop(server).await;
}

/// Settings HTTP/2 does not let the server announce fail `bind`, rather
/// than every client closing its connection at the server's SETTINGS.
#[test]
fn settings_outside_http2_ranges_are_refused_at_bind() {
    let outside = [
        pajamax::H2Config {
            max_frame_size: 1000,
            ..Default::default()
        },
        pajamax::H2Config {
            max_frame_size: 1 << 24,
            ..Default::default()
        },
        pajamax::H2Config {
            initial_stream_window: 1 << 31,
            ..Default::default()
        },
        pajamax::H2Config {
            connection_window: 1 << 31,
            ..Default::default()
        },
    ];
    for config in outside {
        let shown = format!("{config:?}");
        let bound = pajamax::Server::builder()
            .workers(1)
            .pin_workers(false)
            .h2_config(config)
            .bind("127.0.0.1:0");
        let err = bound.err().unwrap_or_else(|| panic!("bound with {shown}"));
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{shown}");
    }
}

/// Settings with which no call could be served fail `bind`: with no
/// connection allowed, every client is sent away; with no
/// stream allowed, clients wait for one for good; with a stream window of
/// 0, no request message can be sent; with no frame budget, the client's
/// first SETTINGS closes every connection; with a call timeout, idle
/// timeout, connection age or handshake timeout of 0, calls or connections
/// end as they begin; with a keepalive interval of 0, a quiet connection is
/// pinged at every sweep, and with a keepalive timeout of 0 it is dropped
/// before it can answer.
#[test]
fn settings_that_serve_no_call_are_refused_at_bind() {
    let h2 = |change: fn(&mut pajamax::H2Config)| {
        let mut config = pajamax::H2Config::default();
        change(&mut config);
        pajamax::Server::builder().h2_config(config)
    };
    let refused = [
        (
            "max_connections",
            pajamax::Server::builder().max_connections(0),
        ),
        (
            "call_timeout",
            pajamax::Server::builder().call_timeout(std::time::Duration::ZERO),
        ),
        (
            "idle_timeout",
            pajamax::Server::builder().idle_timeout(std::time::Duration::ZERO),
        ),
        (
            "keepalive_interval",
            pajamax::Server::builder().keepalive_interval(Some(std::time::Duration::ZERO)),
        ),
        (
            "keepalive_timeout",
            pajamax::Server::builder().keepalive_timeout(std::time::Duration::ZERO),
        ),
        (
            "max_connection_age",
            pajamax::Server::builder().max_connection_age(std::time::Duration::ZERO),
        ),
        (
            "handshake_timeout",
            pajamax::Server::builder().handshake_timeout(std::time::Duration::ZERO),
        ),
        (
            "max_concurrent_streams",
            pajamax::Server::builder().max_concurrent_streams(0),
        ),
        (
            "initial_stream_window",
            pajamax::Server::builder().initial_stream_window(0),
        ),
        (
            "max_concurrent_streams",
            h2(|c| c.max_concurrent_streams = 0),
        ),
        ("initial_stream_window", h2(|c| c.initial_stream_window = 0)),
        (
            "max_unproductive_frames",
            h2(|c| c.max_unproductive_frames = 0),
        ),
        ("stream_send_buffer", h2(|c| c.stream_send_buffer = 0)),
    ];
    for (name, builder) in refused {
        let bound = builder.workers(1).pin_workers(false).bind("127.0.0.1:0");
        let err = bound.err().unwrap_or_else(|| panic!("bound with {name} 0"));
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{name}");
        assert!(err.to_string().contains(name), "{err}");
    }
    // The smallest that serve are taken.
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .max_connections(1)
        .max_concurrent_streams(1)
        .initial_stream_window(1)
        .call_timeout(std::time::Duration::from_millis(1))
        .idle_timeout(std::time::Duration::from_millis(1))
        .keepalive_interval(Some(std::time::Duration::from_millis(1)))
        .keepalive_timeout(std::time::Duration::from_millis(1))
        .max_connection_age(std::time::Duration::from_millis(1))
        .handshake_timeout(std::time::Duration::from_millis(1))
        .bind("127.0.0.1:0")
        .unwrap();
    server.shutdown();
    // A keepalive timeout of 0 means nothing without keepalive PINGs.
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .keepalive_interval(None)
        .keepalive_timeout(std::time::Duration::ZERO)
        .bind("127.0.0.1:0")
        .unwrap();
    server.shutdown();
}

/// More workers than a machine could run are an error at `bind`, not a
/// panic (or an abort, out of memory) while the server starts.
#[test]
fn too_many_workers_are_refused_at_bind() {
    for workers in [usize::MAX, 1 << 40, (1 << 16) + 1] {
        let bound = pajamax::Server::builder()
            .workers(workers)
            .pin_workers(false)
            .bind("127.0.0.1:0");
        let err = bound
            .err()
            .unwrap_or_else(|| panic!("bound with {workers} workers"));
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{workers}");
    }
}

/// Server streams that the client's windows hold back, on the worker and
/// on a thread, and client streams: all served to their end, within ten
/// seconds.
async fn streams_are_served(server: &pajamax::ServerHandle) {
    use common::streams::{client_stream, collect, server_stream, Ask};
    let channel = connect(server).await;
    for method in ["Count", "CountThread"] {
        // 2 MiB of answers, twice the default stream window.
        let ask = Ask {
            count: 20,
            size: 100 << 10,
            ..Default::default()
        };
        let served = tokio::time::timeout(Duration::from_secs(10), async {
            let response = server_stream(channel.clone(), method, tonic::Request::new(ask))
                .await
                .unwrap();
            collect(response.into_inner()).await
        })
        .await
        .unwrap_or_else(|_| panic!("{method}: not served in time"));
        let (items, end, _) = served;
        end.unwrap();
        assert_eq!(items.len(), 20, "{method}");
    }
    for method in ["Sum", "SumThread"] {
        let asks = (1..=10)
            .map(|value| Ask {
                value,
                ..Default::default()
            })
            .collect();
        let sum = tokio::time::timeout(
            Duration::from_secs(10),
            client_stream(channel.clone(), method, asks),
        )
        .await
        .unwrap_or_else(|_| panic!("{method}: not served in time"))
        .unwrap();
        assert_eq!(sum.get_ref().value, 55, "{method}");
    }
}

/// `max_held_bytes` of 0: nothing waits for the client's windows, and
/// producers are pulled whenever nothing does (they were never pulled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_served_with_no_bytes_held() {
    let (server, _) = common::streams::start(pajamax::Server::builder().workers(1).h2_config(
        pajamax::H2Config {
            max_held_bytes: 0,
            ..Default::default()
        },
    ));
    streams_are_served(&server).await;
    stop(server).await;
}

/// A stream send buffer without a limit (`usize::MAX`): streams are served
/// (the worker panicked on the first stream's capacity).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_served_with_the_largest_send_buffer() {
    let (server, _) = common::streams::start(pajamax::Server::builder().workers(1).h2_config(
        pajamax::H2Config {
            stream_send_buffer: usize::MAX,
            ..Default::default()
        },
    ));
    streams_are_served(&server).await;
    stop(server).await;
}
