//! The generated servers over the network, called with tonic: every kind in
//! local mode, and dispatch mode with its queues full or gone.

use generated_code::feed::feed_server::{FeedCall, FeedServer};
use generated_code::feed::{Item, Key};
use generated_code::routeguide::route_guide_server::RouteGuideServer;
use generated_code::routeguide::{Feature, Point, Rectangle, RouteNote, RouteSummary};
use generated_code::{Guide, OneQueue, Store};
use pajamax::dispatch;
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::tokio_stream;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

fn serve(service: impl pajamax::Service) -> pajamax::ServerHandle {
    pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(service)
        .bind("127.0.0.1:0")
        .unwrap()
}

async fn shutdown(server: pajamax::ServerHandle) {
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}

/// A client of `server`, ready for a call.
async fn client(server: &pajamax::ServerHandle) -> tonic::client::Grpc<Channel> {
    let channel = Endpoint::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.unwrap();
    client
}

fn path(path: &'static str) -> PathAndQuery {
    path.parse().unwrap()
}

fn codec<Req, Resp>() -> tonic_prost::ProstCodec<Req, Resp>
where
    Req: prost::Message + 'static,
    Resp: prost::Message + Default + 'static,
{
    tonic_prost::ProstCodec::default()
}

/// Every message of a server stream, or the status that ended it.
async fn collect<M>(
    response: Result<tonic::Response<tonic::Streaming<M>>, tonic::Status>,
) -> Result<Vec<M>, tonic::Status> {
    let mut stream = response?.into_inner();
    let mut messages = Vec::new();
    while let Some(message) = stream.message().await? {
        messages.push(message);
    }
    Ok(messages)
}

async fn watch(
    client: &mut tonic::client::Grpc<Channel>,
    key: &str,
) -> Result<Vec<Item>, tonic::Status> {
    client.ready().await.unwrap();
    let request = tonic::Request::new(Key { key: key.into() });
    collect(
        client
            .server_streaming(request, path("/feed.Feed/Watch"), codec::<Key, Item>())
            .await,
    )
    .await
}

#[tokio::test]
async fn local_mode_serves_every_kind() {
    let server = serve(RouteGuideServer::new(Guide));
    let mut client = client(&server).await;
    let point = |latitude| Point {
        latitude,
        longitude: 0,
    };

    let feature = client
        .unary(
            tonic::Request::new(point(7)),
            path("/routeguide.RouteGuide/GetFeature"),
            codec::<Point, Feature>(),
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(feature.name, "at 7");

    client.ready().await.unwrap();
    let rectangle = Rectangle {
        lo: Some(point(1)),
        hi: Some(point(2)),
    };
    let features = collect(
        client
            .server_streaming(
                tonic::Request::new(rectangle),
                path("/routeguide.RouteGuide/ListFeatures"),
                codec::<Rectangle, Feature>(),
            )
            .await,
    )
    .await
    .unwrap();
    assert_eq!(features.len(), 2);
    assert_eq!(features[1].location, Some(point(2)));

    client.ready().await.unwrap();
    let points = tokio_stream::iter([point(1), point(2), point(3)]);
    let summary = client
        .client_streaming(
            tonic::Request::new(points),
            path("/routeguide.RouteGuide/RecordRoute"),
            codec::<Point, RouteSummary>(),
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(summary.point_count, 3);

    client.ready().await.unwrap();
    let note = |message: &str| RouteNote {
        location: None,
        message: message.into(),
    };
    let notes = tokio_stream::iter([note("a"), note("b")]);
    let echoed = collect(
        client
            .streaming(
                tonic::Request::new(notes),
                path("/routeguide.RouteGuide/RouteChat"),
                codec::<RouteNote, RouteNote>(),
            )
            .await,
    )
    .await
    .unwrap();
    assert_eq!(echoed, [note("a"), note("b")]);

    client.ready().await.unwrap();
    client
        .unary(
            tonic::Request::new(()),
            path("/routeguide.RouteGuide/Ping"),
            codec::<(), ()>(),
        )
        .await
        .unwrap();

    client.ready().await.unwrap();
    let status = collect(
        client
            .server_streaming(
                tonic::Request::new(point(0)),
                path("/routeguide.RouteGuide/Type"),
                codec::<Point, Point>(),
            )
            .await,
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert_eq!(
        status.message(),
        "routeguide.RouteGuide/Type is not implemented"
    );

    shutdown(server).await;
}

#[tokio::test]
async fn dispatch_mode_serves_every_kind() {
    let (sender, queue) = dispatch::channel::<FeedCall>(16);
    let backend = std::thread::spawn(move || {
        let mut store = Store::default();
        for call in queue {
            call.handle(&mut store);
        }
    });
    let server = serve(FeedServer::new(OneQueue(sender)));
    let mut client = client(&server).await;

    let item = client
        .unary(
            tonic::Request::new(Key { key: "k".into() }),
            path("/feed.Feed/Get"),
            codec::<Key, Item>(),
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(item.version, 1);

    let items = watch(&mut client, "k").await.unwrap();
    let versions: Vec<u32> = items.iter().map(|item| item.version).collect();
    assert_eq!(versions, [1, 2, 3]);

    // Client streaming: the shard reads the requests as they come.
    let items = (1..=3).map(|version| Item {
        key: format!("u{version}"),
        version,
    });
    client.ready().await.unwrap();
    let keys = client
        .client_streaming(
            tonic::Request::new(tokio_stream::iter(items.clone())),
            path("/feed.Feed/Upload"),
            codec::<Item, Key>(),
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(keys.key, "u1,u2,u3");

    // Bidirectional: each request answered on the shard's thread.
    client.ready().await.unwrap();
    let answers = collect(
        client
            .streaming(
                tonic::Request::new(tokio_stream::iter(items)),
                path("/feed.Feed/Chat"),
                codec::<Item, Item>(),
            )
            .await,
    )
    .await
    .unwrap();
    let versions: Vec<(String, u32)> = answers.into_iter().map(|i| (i.key, i.version)).collect();
    assert_eq!(
        versions,
        [("u1".into(), 2), ("u2".into(), 3), ("u3".into(), 4)]
    );

    shutdown(server).await;
    backend.join().unwrap();
}

#[tokio::test]
async fn a_streaming_call_that_cannot_be_queued_ends_with_the_reason() {
    // A queue of one call, which nothing serves.
    let (sender, queue) = dispatch::channel::<FeedCall>(1);
    let server = serve(FeedServer::new(OneQueue(sender.clone())));
    let mut first_client = client(&server).await;
    let first = tokio::spawn(async move { watch(&mut first_client, "first").await });
    // Take the first call and put it back: the queue is full.
    let (queue, call) = tokio::task::spawn_blocking(move || {
        let call = queue.recv().unwrap();
        (queue, call)
    })
    .await
    .unwrap();
    sender.try_dispatch(call).unwrap();

    // So the next call is turned away, through its stream.
    let mut client = client(&server).await;
    let status = watch(&mut client, "second").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status.message().contains("queue is full"),
        "{}",
        status.message()
    );

    // The queued one is still served.
    let mut queued = queue.try_recv().unwrap();
    queued.trailers_mut().insert("x-served", "late").unwrap();
    queued.handle(&mut Store::default());
    let items = first.await.unwrap().unwrap();
    assert_eq!(items.len(), 3);

    // A backend that has stopped: UNAVAILABLE.
    drop(queue);
    let status = watch(&mut client, "third").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);

    drop(sender);
    shutdown(server).await;
}

/// Calls of one connection waiting in a backend's queue hold their requests
/// in the connection's share of request bytes waiting for threads: past
/// `max_buffered_request_bytes` a call is answered RESOURCE_EXHAUSTED and
/// not queued, whatever room the queue has; once the backend answers, there
/// is room again.
#[tokio::test]
async fn queued_calls_are_bounded_by_their_requests_bytes() {
    // A queue of 16 calls, which nothing serves for now.
    let (sender, queue) = dispatch::channel::<FeedCall>(16);
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .max_buffered_request_bytes(64 << 10)
        .add_service(FeedServer::new(OneQueue(sender)))
        .bind("127.0.0.1:0")
        .unwrap();
    let client = client(&server).await;
    let get = |key: String| {
        let mut client = client.clone();
        async move {
            client.ready().await.unwrap();
            client
                .unary(
                    tonic::Request::new(Key { key }),
                    path("/feed.Feed/Get"),
                    codec::<Key, Item>(),
                )
                .await
        }
    };
    // One request of 40 KiB waits in the queue, on the connection's share.
    let first = tokio::spawn(get("a".repeat(40 << 10)));
    let (queue, call) = tokio::task::spawn_blocking(move || {
        let call = queue.recv().unwrap();
        (queue, call)
    })
    .await
    .unwrap();
    // A second would pass 64 KiB: refused, and not queued (where it was,
    // nothing would answer it).
    let second = tokio::time::timeout(Duration::from_secs(10), get("b".repeat(40 << 10)));
    let status = second.await.expect("answered at once").unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status.message().contains("wait for other threads"),
        "{}",
        status.message()
    );
    assert!(queue.try_recv().is_err());
    // The request message: its key, with a tag and a 3-byte length.
    assert_eq!(server.stats().peak_queued_request_bytes, (40 << 10) + 4);

    // Answered, the first leaves the share: the next is queued.
    call.handle(&mut Store::default());
    assert_eq!(first.await.unwrap().unwrap().into_inner().version, 1);
    let next = tokio::spawn(get("c".repeat(40 << 10)));
    let call = tokio::task::spawn_blocking(move || queue.recv().unwrap())
        .await
        .unwrap();
    call.handle(&mut Store::default());
    assert_eq!(next.await.unwrap().unwrap().into_inner().version, 1);
    shutdown(server).await;
}

/// Answers `New` with the request turned over, in local mode.
struct Flip;

impl generated_code::names::t_server::T for Flip {
    fn new(&self, request: bool) -> Result<bool, pajamax::Status> {
        Ok(!request)
    }
}

/// Answers `New` with the request turned over, in dispatch mode.
struct FlipShard;

impl generated_code::names::self_server::SelfShard for FlipShard {
    fn new(&mut self, request: bool) -> Result<bool, pajamax::Status> {
        Ok(!request)
    }
}

/// Sends every `names.Self` call to one queue.
struct SelfQueue(dispatch::Sender<generated_code::names::self_server::SelfCall>);

impl generated_code::names::self_server::SelfDispatch for SelfQueue {
    fn dispatch_to(
        &self,
        _request: &generated_code::names::self_server::SelfRequest,
    ) -> &dispatch::Sender<generated_code::names::self_server::SelfCall> {
        &self.0
    }
}

#[tokio::test]
async fn services_named_as_the_type_parameter_or_a_keyword_serve() {
    use generated_code::names::self_server::{SelfCall, SelfServer};
    use generated_code::names::t_server::TServer;
    let (sender, queue) = dispatch::channel::<SelfCall>(4);
    let backend = std::thread::spawn(move || {
        for call in queue {
            call.handle(&mut FlipShard);
        }
    });
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(TServer::new(Flip))
        .add_service(SelfServer::new(SelfQueue(sender)))
        .bind("127.0.0.1:0")
        .unwrap();
    let mut client = client(&server).await;
    for route in ["/names.T/New", "/names.Self/New"] {
        client.ready().await.unwrap();
        let flipped = client
            .unary(tonic::Request::new(true), path(route), codec::<bool, bool>())
            .await
            .unwrap()
            .into_inner();
        assert!(!flipped, "{route}");
    }
    // Left alone: the route exists, and answers as the proto names it.
    client.ready().await.unwrap();
    let status = client
        .unary(
            tonic::Request::new(Vec::<u8>::new()),
            path("/names.Self/FromBytes"),
            codec::<Vec<u8>, bool>(),
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert_eq!(status.message(), "names.Self/FromBytes is not implemented");
    shutdown(server).await;
    backend.join().unwrap();
}
