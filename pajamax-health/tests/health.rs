//! The health service answers a tonic client: Check, List and Watch, status
//! changes through the reporter, and a graceful shutdown that tells the
//! watchers before their streams end.
//!
//! The client's messages are declared here from the protocol's field
//! numbers, independently of the crate's generated code.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct CheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct CheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// `grpc.health.v1.HealthListRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct ListRequest {}

/// `grpc.health.v1.HealthListResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct ListResponse {
    #[prost(map = "string, message", tag = "1")]
    statuses: HashMap<String, CheckResponse>,
}

const UNKNOWN: i32 = 0;
const SERVING: i32 = 1;
const NOT_SERVING: i32 = 2;
const SERVICE_UNKNOWN: i32 = 3;

/// A service with no methods, to be registered beside the health service.
struct Named(&'static str);

impl pajamax::Service for Named {
    fn name(&self) -> &'static str {
        self.0
    }
    fn methods(&self) -> &'static [pajamax::Method] {
        &[]
    }
}

/// A server with `test.Greeter` and `test.Echo` and the health service.
fn start() -> (pajamax_health::HealthReporter, pajamax::ServerHandle) {
    let builder = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Named("test.Greeter"))
        .add_service(Named("test.Echo"));
    let (health, builder) = pajamax_health::serve(builder);
    (health, builder.bind("127.0.0.1:0").unwrap())
}

async fn connect(server: &pajamax::ServerHandle) -> Channel {
    Endpoint::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn check(channel: &Channel, service: &str) -> Result<i32, tonic::Status> {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<CheckRequest, CheckResponse>::default();
    let request = tonic::Request::new(CheckRequest {
        service: service.to_owned(),
    });
    let response = client
        .unary(
            request,
            "/grpc.health.v1.Health/Check".parse().unwrap(),
            codec,
        )
        .await?;
    Ok(response.into_inner().status)
}

async fn list(channel: &Channel) -> HashMap<String, i32> {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<ListRequest, ListResponse>::default();
    let response = client
        .unary(
            tonic::Request::new(ListRequest {}),
            "/grpc.health.v1.Health/List".parse().unwrap(),
            codec,
        )
        .await
        .unwrap();
    response
        .into_inner()
        .statuses
        .into_iter()
        .map(|(name, status)| (name, status.status))
        .collect()
}

async fn watch(
    channel: &Channel,
    service: &str,
) -> Result<tonic::Streaming<CheckResponse>, tonic::Status> {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<CheckRequest, CheckResponse>::default();
    let request = tonic::Request::new(CheckRequest {
        service: service.to_owned(),
    });
    let response = client
        .server_streaming(
            request,
            "/grpc.health.v1.Health/Watch".parse().unwrap(),
            codec,
        )
        .await?;
    Ok(response.into_inner())
}

/// The next status a watch sends (waiting at most 5 s).
async fn next(stream: &mut tonic::Streaming<CheckResponse>) -> i32 {
    tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("a status within 5 s")
        .expect("the watch goes on")
        .expect("a message, not the end")
        .status
}

/// Shuts the server down on a blocking thread; the time it took.
async fn shut_down(server: pajamax::ServerHandle) -> Duration {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        server.shutdown();
        started.elapsed()
    })
    .await
    .unwrap()
}

/// Waits (at most 5 s) until the reporter counts `n` watchers.
async fn watchers_become(health: &pajamax_health::HealthReporter, n: usize) {
    let started = Instant::now();
    while health.watchers() != n {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{} watchers, not {n}",
            health.watchers()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn check_answers_the_server_the_services_and_not_found() {
    let (health, server) = start();
    let channel = connect(&server).await;
    assert_eq!(check(&channel, "").await.unwrap(), SERVING);
    assert_eq!(check(&channel, "test.Greeter").await.unwrap(), SERVING);
    assert_eq!(
        check(&channel, "grpc.health.v1.Health").await.unwrap(),
        SERVING
    );
    let err = check(&channel, "test.Nobody").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);

    health.set_not_serving("test.Greeter");
    health.set_status("test.Late", pajamax_health::ServingStatus::Unknown);
    assert_eq!(check(&channel, "test.Greeter").await.unwrap(), NOT_SERVING);
    assert_eq!(check(&channel, "test.Late").await.unwrap(), UNKNOWN);
    health.clear_status("test.Greeter");
    let err = check(&channel, "test.Greeter").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    shut_down(server).await;
}

#[tokio::test]
async fn list_answers_every_status() {
    let (health, server) = start();
    health.set_not_serving("test.Echo");
    let channel = connect(&server).await;
    let statuses = list(&channel).await;
    let expected: HashMap<String, i32> = [
        ("", SERVING),
        ("grpc.health.v1.Health", SERVING),
        ("test.Greeter", SERVING),
        ("test.Echo", NOT_SERVING),
    ]
    .into_iter()
    .map(|(name, status)| (name.to_owned(), status))
    .collect();
    assert_eq!(statuses, expected);
    shut_down(server).await;
}

#[tokio::test]
async fn watch_sends_the_status_then_each_change() {
    let (health, server) = start();
    let channel = connect(&server).await;
    let mut greeter = watch(&channel, "test.Greeter").await.unwrap();
    let mut whole = watch(&channel, "").await.unwrap();
    assert_eq!(next(&mut greeter).await, SERVING);
    assert_eq!(next(&mut whole).await, SERVING);

    health.set_not_serving("test.Greeter");
    assert_eq!(next(&mut greeter).await, NOT_SERVING);
    // No message for a status set again, nor for another service's change:
    // the next one is the next change.
    health.set_not_serving("test.Greeter");
    health.set_not_serving("test.Echo");
    health.set_serving("test.Greeter");
    assert_eq!(next(&mut greeter).await, SERVING);
    health.set_not_serving("");
    assert_eq!(next(&mut whole).await, NOT_SERVING);

    // A status cleared is SERVICE_UNKNOWN to its watchers.
    health.clear_status("test.Greeter");
    assert_eq!(next(&mut greeter).await, SERVICE_UNKNOWN);
    assert_eq!(health.watchers(), 2);
    drop((greeter, whole));
    shut_down(server).await;
}

#[tokio::test]
async fn watching_an_unknown_service_waits_for_its_status() {
    let (health, server) = start();
    let channel = connect(&server).await;
    let mut later = watch(&channel, "test.Later").await.unwrap();
    assert_eq!(next(&mut later).await, SERVICE_UNKNOWN);
    // The call stays open, with nothing more to say.
    let quiet = tokio::time::timeout(Duration::from_millis(300), later.message()).await;
    assert!(quiet.is_err(), "nothing until the service has a status");
    health.set_serving("test.Later");
    assert_eq!(next(&mut later).await, SERVING);
    assert_eq!(check(&channel, "test.Later").await.unwrap(), SERVING);
    drop(later);
    shut_down(server).await;
}

#[tokio::test]
async fn graceful_shutdown_tells_the_watchers_and_ends_their_streams() {
    let (health, server) = start();
    let channel = connect(&server).await;
    let mut greeter = watch(&channel, "test.Greeter").await.unwrap();
    let mut unknown = watch(&channel, "test.Nobody").await.unwrap();
    let mut down = watch(&channel, "test.Echo").await.unwrap();
    assert_eq!(next(&mut greeter).await, SERVING);
    assert_eq!(next(&mut unknown).await, SERVICE_UNKNOWN);
    assert_eq!(next(&mut down).await, SERVING);
    health.set_not_serving("test.Echo");
    assert_eq!(next(&mut down).await, NOT_SERVING);
    watchers_become(&health, 3).await;

    // The default grace is 30 s: the watches must not hold it up.
    let shutdown = tokio::spawn(shut_down(server));
    assert_eq!(next(&mut greeter).await, NOT_SERVING);
    assert_eq!(next(&mut unknown).await, NOT_SERVING);
    for stream in [&mut greeter, &mut unknown, &mut down] {
        let end = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .expect("the stream ends within 5 s");
        assert!(matches!(end, Ok(None)), "ends with OK: {end:?}");
    }
    let took = tokio::time::timeout(Duration::from_secs(10), shutdown)
        .await
        .expect("shutdown within 10 s")
        .unwrap();
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    assert_eq!(health.watchers(), 0);
    assert!(health.is_shut_down());
    let statuses = health.statuses();
    assert!(statuses.contains_key("test.Echo"), "{statuses:?}");
    assert!(statuses
        .values()
        .all(|s| *s == pajamax_health::ServingStatus::NotServing));
}

#[tokio::test]
async fn a_watch_after_the_shutdown_hook_ends_at_once() {
    let (health, server) = start();
    let channel = connect(&server).await;
    // As the hook does first, before the server itself stops.
    tokio::task::spawn_blocking({
        let health = health.clone();
        move || health.shutdown()
    })
    .await
    .unwrap();
    assert_eq!(check(&channel, "").await.unwrap(), NOT_SERVING);
    let mut stream = watch(&channel, "test.Greeter").await.unwrap();
    assert_eq!(next(&mut stream).await, NOT_SERVING);
    let end = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap();
    assert!(matches!(end, Ok(None)));
    shut_down(server).await;
}

#[tokio::test]
async fn a_cancelled_watch_ends_its_thread() {
    let (health, server) = start();
    let channel = connect(&server).await;
    let mut stream = watch(&channel, "test.Greeter").await.unwrap();
    assert_eq!(next(&mut stream).await, SERVING);
    watchers_become(&health, 1).await;
    drop(stream);
    watchers_become(&health, 0).await;
    shut_down(server).await;
}

#[tokio::test]
async fn watchers_past_the_limit_are_refused() {
    let (health, server) = start();
    health.set_max_watchers(2);
    let channel = connect(&server).await;
    let mut first = watch(&channel, "").await.unwrap();
    let mut second = watch(&channel, "test.Echo").await.unwrap();
    assert_eq!(next(&mut first).await, SERVING);
    assert_eq!(next(&mut second).await, SERVING);
    let refused = match watch(&channel, "test.Greeter").await {
        Err(status) => status,
        Ok(mut stream) => stream.message().await.unwrap_err(),
    };
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    drop(first);
    watchers_become(&health, 1).await;
    let mut third = watch(&channel, "test.Greeter").await.unwrap();
    assert_eq!(next(&mut third).await, SERVING);
    drop((second, third));
    shut_down(server).await;
}

#[tokio::test]
async fn a_watcher_that_does_not_read_holds_up_no_other() {
    let (health, server) = start();
    let stalled_channel = connect(&server).await;
    let channel = connect(&server).await;
    // Never read: its answers pile up until its windows close.
    let stalled = watch(&stalled_channel, "test.Echo").await.unwrap();
    let mut reader = watch(&channel, "test.Echo").await.unwrap();
    assert_eq!(next(&mut reader).await, SERVING);
    let flip = tokio::task::spawn_blocking({
        let health = health.clone();
        move || {
            for _ in 0..20_000 {
                health.set_not_serving("test.Echo");
                health.set_serving("test.Echo");
            }
            health.set_status("test.Echo", pajamax_health::ServingStatus::Unknown);
        }
    });
    // The reader keeps up and sees the last status.
    let deadline = Instant::now() + Duration::from_secs(20);
    while next(&mut reader).await != UNKNOWN {
        assert!(Instant::now() < deadline, "the reader fell behind");
    }
    flip.await.unwrap();
    drop((stalled, reader));
    shut_down(server).await;
}
