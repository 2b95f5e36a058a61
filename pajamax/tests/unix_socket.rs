//! Serving on a Unix domain socket: tonic reaches it with a connector of
//! its own; calls of every kind work as on TCP, calls have no peer address,
//! and the socket file is the server's to remove.
#![cfg(unix)]

mod common;

use common::streams::{self, Ask, Streams};
use common::{call, Probe};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint, Uri};

/// A socket path of this test's own, with no file left there.
fn socket_path(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("pajamax-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn start(path: &Path) -> pajamax::ServerHandle {
    pajamax::Server::builder()
        .workers(2)
        .pin_workers(false)
        .add_service(Probe)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind_unix(path)
        .expect("bind")
}

/// A tonic channel over the Unix socket at `path` (the URI is not used).
async fn connect_unix(path: &Path) -> Channel {
    let path = path.to_path_buf();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .expect("connect")
}

#[tokio::test]
async fn unary_and_server_streaming_calls_over_a_unix_socket() {
    let path = socket_path("calls");
    let server = start(&path);
    assert_eq!(server.unix_path(), Some(path.as_path()));
    let channel = connect_unix(&path).await;

    let reply = call(channel.clone(), "Echo", common::text("over uds"))
        .await
        .unwrap();
    assert_eq!(reply.get_ref().text, "over uds");
    assert_eq!(reply.get_ref().peer, "", "no peer address on a Unix socket");

    // Answers made on the worker, then on a thread of their own.
    for method in ["Count", "CountThread"] {
        let ask = Ask {
            count: 50,
            size: 10_000,
            ..Default::default()
        };
        let response = streams::server_stream(channel.clone(), method, tonic::Request::new(ask))
            .await
            .unwrap();
        let (items, end, _) = streams::collect(response.into_inner()).await;
        end.unwrap();
        let values: Vec<u64> = items.iter().map(|item| item.value).collect();
        assert_eq!(values, (1..=50).collect::<Vec<u64>>(), "{method}");
        assert!(items.iter().all(|item| item.blob.len() == 10_000));
    }

    // Many calls at once share the connection.
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let channel = channel.clone();
            tokio::spawn(
                async move { call(channel, "Echo", common::text(&format!("call {i}"))).await },
            )
        })
        .collect();
    for (i, task) in calls.into_iter().enumerate() {
        assert_eq!(
            task.await.unwrap().unwrap().get_ref().text,
            format!("call {i}")
        );
    }

    common::stop(server).await;
    assert!(!path.exists(), "the server removes its socket file");
}

#[tokio::test]
async fn calls_in_flight_are_answered_on_shutdown() {
    let path = socket_path("shutdown");
    let server = start(&path);
    // A second name for the socket, which the server does not remove: it
    // tells whether the server still listens once its own file is gone.
    let link = socket_path("shutdown-link");
    std::fs::hard_link(&path, &link).unwrap();
    UnixStream::connect(&link).expect("the server is reached through the link");
    let channel = connect_unix(&path).await;
    let in_flight = tokio::spawn(async move {
        let request = tonic::Request::new(common::ProbeRequest {
            text: "late".into(),
            sleep_ms: 300,
            ..Default::default()
        });
        call(channel, "Defer", request).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stop = tokio::spawn(common::stop(server));
    let reply = in_flight.await.unwrap().expect("answered");
    assert_eq!(reply.get_ref().text, "late");
    tokio::time::timeout(Duration::from_secs(10), stop)
        .await
        .expect("shutdown finishes")
        .unwrap();
    assert!(!path.exists(), "the server removes its socket file");
    let refused = UnixStream::connect(&link).expect_err("the server stopped listening");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    std::fs::remove_file(&link).unwrap();
}

#[test]
fn binding_fails_where_a_file_is() {
    let path = socket_path("taken");
    std::fs::write(&path, b"not a socket").unwrap();
    let err = pajamax::Server::builder()
        .workers(1)
        .add_service(Probe)
        .bind_unix(&path)
        .err()
        .expect("bind fails");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket", "left alone");
    std::fs::remove_file(&path).unwrap();

    // Nor does a second server take the socket of a running one.
    let first = start(&path);
    let err = pajamax::Server::builder()
        .workers(1)
        .add_service(Probe)
        .bind_unix(&path)
        .err()
        .expect("bind fails");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    UnixStream::connect(&path).expect("the first server still listens there");
    first.shutdown();
    assert!(!path.exists());
}

#[test]
fn a_socket_file_replaced_meanwhile_is_left_alone() {
    let path = socket_path("replaced");
    let first = start(&path);
    // Someone removes the file and starts another server at the same path.
    std::fs::remove_file(&path).unwrap();
    let second = start(&path);
    first.shutdown();
    assert!(path.exists(), "the second server's file stays");
    UnixStream::connect(&path).expect("the second server answers");
    second.shutdown();
    assert!(!path.exists());
}

#[test]
#[should_panic(expected = "Unix socket")]
fn local_addr_of_a_unix_socket_server_panics() {
    let path = socket_path("local-addr");
    let server = start(&path);
    let _ = std::fs::remove_file(&path);
    server.local_addr();
}
