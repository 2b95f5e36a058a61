//! One thread feeding the server streams of many calls with
//! `Sink::try_send`: a client that stops reading does not hold up the
//! others, and its call goes on with the events it had room for.

mod common;

use pajamax::{Context, Method, MethodKind, RawServerStream, ServerStream, Service, Sink};
use pajamax::{Status, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;

/// Events of this size: the slow client's windows (tonic's default, about
/// 2 MiB for the stream) fill long before the last one.
const EVENT: usize = 1024;
const EVENTS: u32 = 6000;

/// `test.Feed/Subscribe(Empty) returns (stream bytes)`: each call's sink
/// is handed to the publisher.
struct Feed {
    subscribers: Arc<Mutex<Vec<Sink<Vec<u8>>>>>,
}

impl Service for Feed {
    fn name(&self) -> &'static str {
        "test.Feed"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: [Method; 1] = [Method {
            name: "Subscribe",
            kind: MethodKind::ServerStreaming,
        }];
        &METHODS
    }

    fn server_streaming(
        &self,
        _method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let () = pajamax::decode_request(request)?;
        let (stream, mut sink) = ServerStream::<Vec<u8>>::channel(ctx);
        // The client sees its call open before the first event.
        sink.send_headers().map_err(Status::from)?;
        self.subscribers.lock().unwrap().push(sink);
        Ok(stream.into_raw())
    }
}

/// An event: its number in its first four bytes, then filler.
fn event(n: u32) -> Vec<u8> {
    let mut bytes = vec![b'e'; EVENT];
    bytes[..4].copy_from_slice(&n.to_be_bytes());
    bytes
}

fn number(event: &[u8]) -> u32 {
    u32::from_be_bytes(event[..4].try_into().unwrap())
}

async fn subscribe(channel: tonic::transport::Channel) -> tonic::Streaming<Vec<u8>> {
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<(), Vec<u8>>::default();
    let path = PathAndQuery::from_static("/test.Feed/Subscribe");
    client
        .server_streaming(tonic::Request::new(()), path, codec)
        .await
        .expect("subscribed")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_does_not_hold_up_the_publisher() {
    let subscribers = Arc::new(Mutex::new(Vec::new()));
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Feed {
            subscribers: subscribers.clone(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    // Two clients on connections of their own: one reads as events come,
    // one does not read until the publisher is done.
    let mut slow = subscribe(common::connect(&server).await).await;
    let mut fast = subscribe(common::connect(&server).await).await;
    while subscribers.lock().unwrap().len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(event) = fast.message().await.expect("an event or the end") {
            seen.push(number(&event));
        }
        seen
    });

    // The publisher skips, for a subscriber, an event it has no room for.
    let publisher = {
        let subscribers = subscribers.clone();
        std::thread::spawn(move || {
            let mut sinks = std::mem::take(&mut *subscribers.lock().unwrap());
            let mut skipped = vec![0u32; sinks.len()];
            for n in 0..EVENTS {
                let event = event(n);
                for (sink, skipped) in sinks.iter_mut().zip(&mut skipped) {
                    match sink.try_send(&event) {
                        Ok(()) => {}
                        Err(TrySendError::Full) => *skipped += 1,
                        Err(ended) => panic!("event {n}: {ended}"),
                    }
                }
                if n % 64 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            for sink in sinks {
                sink.finish(Ok(()));
            }
            skipped
        })
    };
    // The publisher is done while the slow client has read nothing: it
    // never waited for it.
    let publishing = tokio::task::spawn_blocking(move || publisher.join().unwrap());
    let skipped = tokio::time::timeout(Duration::from_secs(30), publishing)
        .await
        .expect("the publisher never waits for the client that does not read")
        .unwrap();
    let (slow_skipped, fast_skipped) = (skipped[0], skipped[1]);
    assert!(
        slow_skipped > EVENTS / 4,
        "the slow client's windows filled: skipped {skipped:?}"
    );

    // The fast client has every event the publisher had room for, in order.
    let seen = reader.await.unwrap();
    assert_eq!(seen.len() as u32 + fast_skipped, EVENTS, "{skipped:?}");
    assert!(seen.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(seen.len() > EVENTS as usize / 4, "{skipped:?}");

    // So has the slow one, now that it reads: the events before its
    // windows filled, then those it had room for again, then OK.
    let mut got = Vec::new();
    while let Some(event) = slow.message().await.expect("an event or the end") {
        assert!(event[4..].iter().all(|&b| b == b'e'));
        got.push(number(&event));
    }
    assert_eq!(got.len() as u32 + slow_skipped, EVENTS);
    assert!(got.windows(2).all(|pair| pair[0] < pair[1]));
    common::stop(server).await;
}
