//! The generated services over the network, called with tonic: the paths
//! and encodings of types from other packages, nested types, well-known
//! types, packages with dots, underscores, keywords and none, and method
//! names that are keywords or the names of generated items.

use build_cases::{dispatch as d, extra, local as l};
use pajamax::{BidiStream, ServerStream, Status};
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::tokio_stream;
use tonic::transport::{Channel, Endpoint};

/// `builder` on one worker, on a port of the system's choice.
fn serve(builder: pajamax::Builder) -> pajamax::ServerHandle {
    builder
        .workers(1)
        .pin_workers(false)
        .bind("127.0.0.1:0")
        .unwrap()
}

/// Stops `server` without blocking the runtime.
async fn shutdown(server: pajamax::ServerHandle) {
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}

/// A tonic client of `server`.
async fn client(server: &pajamax::ServerHandle) -> tonic::client::Grpc<Channel> {
    let channel = Endpoint::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic::client::Grpc::new(channel)
}

/// A unary call to `path`.
async fn unary<Req, Resp>(
    client: &mut tonic::client::Grpc<Channel>,
    path: &'static str,
    request: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + 'static,
    Resp: prost::Message + Default + 'static,
{
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    let path: PathAndQuery = path.parse().unwrap();
    Ok(client
        .unary(tonic::Request::new(request), path, codec)
        .await?
        .into_inner())
}

/// A bidirectional call to `path` (any kind takes it): the answers, or the
/// status that ended them.
async fn streaming<Req, Resp>(
    client: &mut tonic::client::Grpc<Channel>,
    path: &'static str,
    requests: Vec<Req>,
) -> Result<Vec<Resp>, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + 'static,
{
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    let path: PathAndQuery = path.parse().unwrap();
    let mut stream = client
        .streaming(
            tonic::Request::new(tokio_stream::iter(requests)),
            path,
            codec,
        )
        .await?
        .into_inner();
    let mut out = Vec::new();
    while let Some(m) = stream.message().await? {
        out.push(m);
    }
    Ok(out)
}

/// `pkg.other.Cross` in local mode: every method but `Val`.
struct Cross;

impl l::pkg::other::cross_server::Cross for Cross {
    fn get(&self, request: l::pkg::a_b::v1::Item) -> Result<l::pkg::other::Item, Status> {
        Ok(l::pkg::other::Item {
            id: request.name.len() as u64,
        })
    }

    fn nested(
        &self,
        request: l::pkg::a_b::v1::outer::Inner,
    ) -> Result<l::pkg::a_b::v1::Outer, Status> {
        Ok(l::pkg::a_b::v1::Outer {
            inner: Some(request),
        })
    }

    fn local(
        &self,
        request: l::pkg::other::holder::Inner,
    ) -> Result<ServerStream<l::pkg::other::holder::Inner>, Status> {
        Ok(ServerStream::iter([Ok(request.clone()), Ok(request)]))
    }

    fn empty(&self, _request: ()) -> Result<(), Status> {
        Ok(())
    }

    fn time(&self, request: prost_types::Timestamp) -> Result<prost_types::Duration, Status> {
        Ok(prost_types::Duration {
            seconds: request.seconds,
            nanos: request.nanos,
        })
    }

    fn any_one(&self, request: prost_types::Any) -> Result<prost_types::Struct, Status> {
        let mut answer = prost_types::Struct::default();
        answer.fields.insert(
            request.type_url,
            prost_types::Value {
                kind: Some(prost_types::value::Kind::NumberValue(
                    request.value.len() as f64
                )),
            },
        );
        Ok(answer)
    }

    fn echo_with_context(
        &self,
        ctx: &mut pajamax::Context<'_>,
    ) -> Result<BidiStream<l::pkg::other::Item, l::pkg::other::Item>, Status> {
        let (stream, items, mut sink) = BidiStream::channel(ctx);
        std::thread::spawn(move || {
            for item in items {
                match item {
                    Ok(item) if sink.send(&item).is_ok() => {}
                    Ok(_) => return,
                    Err(status) => return sink.finish(Err(status)),
                }
            }
            sink.finish(Ok(()));
        });
        Ok(stream)
    }
}

#[tokio::test]
async fn types_of_other_packages_nested_and_well_known() {
    use l::pkg::{a_b::v1, other};
    let server =
        serve(pajamax::Server::builder().add_service(other::cross_server::CrossServer::new(Cross)));
    let mut client = client(&server).await;

    let item: other::Item = unary(
        &mut client,
        "/pkg.other.Cross/Get",
        v1::Item { name: "abc".into() },
    )
    .await
    .unwrap();
    assert_eq!(item.id, 3);
    let inner = v1::outer::Inner { value: 5 };
    let outer: v1::Outer = unary(&mut client, "/pkg.other.Cross/Nested", inner)
        .await
        .unwrap();
    assert_eq!(outer.inner, Some(inner));
    let inner = other::holder::Inner { s: "x".into() };
    let inners: Vec<other::holder::Inner> =
        streaming(&mut client, "/pkg.other.Cross/Local", vec![inner.clone()])
            .await
            .unwrap();
    assert_eq!(inners, [inner.clone(), inner]);
    let () = unary(&mut client, "/pkg.other.Cross/Empty", ())
        .await
        .unwrap();
    let time = prost_types::Timestamp {
        seconds: 9,
        nanos: 7,
    };
    let duration: prost_types::Duration = unary(&mut client, "/pkg.other.Cross/Time", time)
        .await
        .unwrap();
    assert_eq!((duration.seconds, duration.nanos), (9, 7));
    let any = prost_types::Any {
        type_url: "type.googleapis.com/x".into(),
        value: vec![1, 2],
    };
    let answer: prost_types::Struct = unary(&mut client, "/pkg.other.Cross/AnyOne", any)
        .await
        .unwrap();
    assert_eq!(answer.fields.len(), 1);
    // Left alone.
    let status = unary::<_, prost_types::ListValue>(
        &mut client,
        "/pkg.other.Cross/Val",
        prost_types::Value::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    assert_eq!(status.message(), "pkg.other.Cross/Val is not implemented");
    let items = vec![other::Item { id: 1 }, other::Item { id: 2 }];
    let echoed: Vec<other::Item> = streaming(&mut client, "/pkg.other.Cross/Echo", items.clone())
        .await
        .unwrap();
    assert_eq!(echoed, items);
    shutdown(server).await;
}

/// The package-less `Naked`: echoes.
struct Naked;

impl l::nopkg::naked_server::Naked for Naked {
    fn r#do(&self, request: l::nopkg::Bare) -> Result<l::nopkg::Bare, Status> {
        Ok(request)
    }
}

/// Answers the rpcs named by keywords and generated items with their names.
struct Keywords;

impl l::kw::r#type::r#match::service_server::Service for Keywords {
    fn r#type(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: "type".into() })
    }
    fn self_(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: "self".into() })
    }
    fn new(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: "new".into() })
    }
    fn name(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: "name".into() })
    }
    fn unary(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: "unary".into() })
    }
    fn r#gen(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: "gen".into() })
    }
    fn _0(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: "_0".into() })
    }
}

/// Answers `Get` with the name of its service.
struct Named(&'static str);

impl l::kw::r#type::r#match::same1_server::Same1 for Named {
    fn get(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: self.0.into() })
    }
}

impl l::kw::r#type::r#match::same2_server::Same2 for Named {
    fn get(&self, _: l::kw::r#type::r#match::M) -> Result<l::kw::r#type::r#match::M, Status> {
        Ok(l::kw::r#type::r#match::M { s: self.0.into() })
    }
}

#[tokio::test]
async fn no_package_and_keyword_names() {
    use l::kw::r#type::r#match as kw;
    let server = serve(
        pajamax::Server::builder()
            .add_service(l::nopkg::naked_server::NakedServer::new(Naked))
            .add_service(kw::service_server::ServiceServer::new(Keywords))
            .add_service(kw::same1_server::Same1Server::new(Named("one")))
            .add_service(kw::same2_server::Same2Server::new(Named("two"))),
    );
    let mut client = client(&server).await;
    let bare: l::nopkg::Bare = unary(&mut client, "/Naked/Do", l::nopkg::Bare { s: "b".into() })
        .await
        .unwrap();
    assert_eq!(bare.s, "b");
    for (method, answer) in [
        ("Type", "type"),
        ("Self", "self"),
        ("New", "new"),
        ("Name", "name"),
        ("Unary", "unary"),
        ("Gen", "gen"),
        ("_0", "_0"),
    ] {
        let path: &'static str =
            Box::leak(format!("/kw.type.match_.Service/{method}").into_boxed_str());
        let m: kw::M = unary(&mut client, path, kw::M::default()).await.unwrap();
        assert_eq!(m.s, answer);
    }
    // Two services of one file with the same method names.
    for (path, answer) in [
        ("/kw.type.match_.Same1/Get", "one"),
        ("/kw.type.match_.Same2/Get", "two"),
    ] {
        let m: kw::M = unary(&mut client, path, kw::M::default()).await.unwrap();
        assert_eq!(m.s, answer);
    }
    shutdown(server).await;
}

/// `pkg.other.Cross` in dispatch mode.
struct Shard;

impl d::pkg::other::cross_server::CrossShard for Shard {
    fn get(&mut self, request: d::pkg::a_b::v1::Item) -> Result<d::pkg::other::Item, Status> {
        Ok(d::pkg::other::Item {
            id: request.name.len() as u64,
        })
    }
    fn empty(&mut self, _request: ()) -> Result<(), Status> {
        Ok(())
    }
    fn local(
        &mut self,
        request: d::pkg::other::holder::Inner,
        mut sink: pajamax::Sink<d::pkg::other::holder::Inner>,
    ) {
        let _ = sink.send(&request);
        sink.finish(Ok(()));
    }
}

/// Sends every `pkg.other.Cross` call to one queue.
struct OneQueue(pajamax::dispatch::Sender<d::pkg::other::cross_server::CrossCall>);

impl d::pkg::other::cross_server::CrossDispatch for OneQueue {
    fn dispatch_to(
        &self,
        _request: &d::pkg::other::cross_server::CrossRequest,
    ) -> &pajamax::dispatch::Sender<d::pkg::other::cross_server::CrossCall> {
        &self.0
    }
}

/// `pkg.other.Cross` served in dispatch mode by one backend thread, with
/// `shard`; the thread ends once the server is gone.
fn serve_cross(
    mut shard: impl d::pkg::other::cross_server::CrossShard + Send + 'static,
) -> (pajamax::ServerHandle, std::thread::JoinHandle<()>) {
    use d::pkg::other::cross_server::{CrossCall, CrossServer};
    let (sender, queue) = pajamax::dispatch::channel::<CrossCall>(16);
    let backend = std::thread::spawn(move || {
        for call in queue {
            call.handle(&mut shard);
        }
    });
    let server = serve(pajamax::Server::builder().add_service(CrossServer::new(OneQueue(sender))));
    (server, backend)
}

#[tokio::test]
async fn dispatch_mode_across_packages() {
    use d::pkg::{a_b::v1, other};
    let (server, backend) = serve_cross(Shard);
    let mut client = client(&server).await;
    let item: other::Item = unary(
        &mut client,
        "/pkg.other.Cross/Get",
        v1::Item {
            name: "abcd".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(item.id, 4);
    let () = unary(&mut client, "/pkg.other.Cross/Empty", ())
        .await
        .unwrap();
    let inner = other::holder::Inner { s: "y".into() };
    let inners: Vec<other::holder::Inner> =
        streaming(&mut client, "/pkg.other.Cross/Local", vec![inner.clone()])
            .await
            .unwrap();
    assert_eq!(inners, [inner]);
    shutdown(server).await;
    backend.join().unwrap();
}

/// The proto2 service: says what the request held.
struct Legacy;

impl extra::legacy::legacy_server::Legacy for Legacy {
    fn get_foo(&self, request: extra::legacy::Req) -> Result<extra::legacy::Resp, Status> {
        Ok(extra::legacy::Resp {
            text: Some(format!(
                "{}:{}:{}",
                request.name,
                request.n(),
                request.blobs.len()
            )),
            raw: request.blobs.into_iter().next(),
        })
    }
}

#[tokio::test]
async fn proto2_with_bytes_config() {
    use extra::legacy;
    let server = serve(
        pajamax::Server::builder().add_service(legacy::legacy_server::LegacyServer::new(Legacy)),
    );
    let mut client = client(&server).await;
    let resp: legacy::Resp = unary(
        &mut client,
        "/legacy.Legacy/GetFoo",
        legacy::Req {
            name: "n".into(),
            n: None,
            blobs: vec![bytes::Bytes::from_static(b"ab")],
        },
    )
    .await
    .unwrap();
    assert_eq!(resp.text(), "n:7:1");
    assert_eq!(resp.raw.as_deref(), Some(&b"ab"[..]));
    shutdown(server).await;
}

/// `modern.v2.Modern` in dispatch mode: counts `n` up.
struct ModernShard;

impl extra::modern::v2::modern_server::ModernShard for ModernShard {
    fn get(&mut self, request: extra::modern::v2::Opt) -> Result<extra::modern::v2::Opt, Status> {
        Ok(extra::modern::v2::Opt {
            n: request.n.map(|n| n + 1),
            ..request
        })
    }
}

/// Sends every `modern.v2.Modern` call to one queue.
struct ModernQueue(pajamax::dispatch::Sender<extra::modern::v2::modern_server::ModernCall>);

impl extra::modern::v2::modern_server::ModernDispatch for ModernQueue {
    fn dispatch_to(
        &self,
        _request: &extra::modern::v2::modern_server::ModernRequest,
    ) -> &pajamax::dispatch::Sender<extra::modern::v2::modern_server::ModernCall> {
        &self.0
    }
}

#[tokio::test]
async fn proto3_optional_oneof_and_map_in_dispatch_mode() {
    use extra::modern::v2::{self as modern, modern_server};
    let (sender, queue) = pajamax::dispatch::channel::<modern_server::ModernCall>(4);
    let backend = std::thread::spawn(move || {
        for call in queue {
            call.handle(&mut ModernShard);
        }
    });
    let server = serve(
        pajamax::Server::builder()
            .add_service(modern_server::ModernServer::new(ModernQueue(sender))),
    );
    let mut client = client(&server).await;
    let sent = modern::Opt {
        name: Some(String::new()),
        n: Some(0),
        raw: bytes::Bytes::from_static(b"r"),
        m: [("k".to_owned(), bytes::Bytes::from_static(b"v"))].into(),
        pick: Some(modern::opt::Pick::B(0)),
    };
    let answer: modern::Opt = unary(&mut client, "/modern.v2.Modern/Get", sent.clone())
        .await
        .unwrap();
    // Present but zero stays present, as tonic's peers expect.
    assert_eq!(answer, modern::Opt { n: Some(1), ..sent });
    let status = unary::<_, String>(&mut client, "/modern.v2.Modern/Wrap", b"x".to_vec())
        .await
        .unwrap_err();
    assert_eq!(status.message(), "modern.v2.Modern/Wrap is not implemented");
    shutdown(server).await;
    backend.join().unwrap();
}

/// `wkt.svc.Clock`, on compiled well-known types and an extern path.
struct Clock;

impl build_cases::wkt_out::wkt::svc::clock_server::Clock for Clock {
    fn now(
        &self,
        _request: build_cases::wkt_out::google::protobuf::Empty,
    ) -> Result<build_cases::wkt_out::google::protobuf::Timestamp, Status> {
        Ok(build_cases::wkt_out::google::protobuf::Timestamp {
            seconds: 5,
            nanos: 0,
        })
    }

    fn extern_(
        &self,
        request: l::pkg::a_b::v1::Item,
    ) -> Result<l::pkg::a_b::v1::outer::Inner, Status> {
        Ok(l::pkg::a_b::v1::outer::Inner {
            value: request.name.len() as i32,
        })
    }
}

/// `wkt.svc.T`: echoes.
struct NamedT;

impl build_cases::wkt_out::wkt::svc::t_server::T for NamedT {
    fn get(
        &self,
        request: build_cases::wkt_out::google::protobuf::Empty,
    ) -> Result<build_cases::wkt_out::google::protobuf::Empty, Status> {
        Ok(request)
    }
}

#[tokio::test]
async fn compiled_well_known_types_and_extern_paths() {
    use build_cases::wkt_out::{google::protobuf as wkt, wkt::svc};
    let server = serve(
        pajamax::Server::builder()
            .add_service(svc::clock_server::ClockServer::new(Clock))
            .add_service(svc::t_server::TServer::new(NamedT)),
    );
    let mut client = client(&server).await;
    let now: prost_types::Timestamp = unary(&mut client, "/wkt.svc.Clock/Now", ()).await.unwrap();
    assert_eq!(now.seconds, 5);
    let inner: l::pkg::a_b::v1::outer::Inner = unary(
        &mut client,
        "/wkt.svc.Clock/Extern",
        l::pkg::a_b::v1::Item { name: "ab".into() },
    )
    .await
    .unwrap();
    assert_eq!(inner.value, 2);
    let () = unary(&mut client, "/wkt.svc.T/Get", wkt::Empty {})
        .await
        .unwrap();
    let status = streaming::<bool, ()>(&mut client, "/wkt.svc.Clock/Flag", vec![true])
        .await
        .unwrap_err();
    assert_eq!(status.message(), "wkt.svc.Clock/Flag is not implemented");
    shutdown(server).await;
}

/// `pkg.other.Cross` in dispatch mode whose `Local` streams copies of the
/// request until a send fails, then says how it ended.
struct Endless(std::sync::mpsc::Sender<pajamax::Cancelled>);

impl d::pkg::other::cross_server::CrossShard for Endless {
    fn local(
        &mut self,
        request: d::pkg::other::holder::Inner,
        mut sink: pajamax::Sink<d::pkg::other::holder::Inner>,
    ) {
        loop {
            if let Err(cancelled) = sink.send(&request) {
                self.0.send(cancelled).unwrap();
                return;
            }
        }
    }
}

#[tokio::test]
async fn a_dispatched_stream_stops_when_its_client_goes() {
    use d::pkg::other;
    let (ended_tx, ended) = std::sync::mpsc::channel();
    let (server, backend) = serve_cross(Endless(ended_tx));
    let ended = std::sync::Arc::new(std::sync::Mutex::new(ended));
    let next_end = || {
        let ended = ended.clone();
        tokio::task::spawn_blocking(move || ended.lock().unwrap().recv().unwrap())
    };
    let open = |mut client: tonic::client::Grpc<Channel>| async move {
        client.ready().await.unwrap();
        let codec =
            tonic_prost::ProstCodec::<other::holder::Inner, other::holder::Inner>::default();
        // Messages larger than a client counts as small frames.
        let request = tonic::Request::new(other::holder::Inner { s: "x".repeat(300) });
        let mut stream = client
            .server_streaming(request, "/pkg.other.Cross/Local".parse().unwrap(), codec)
            .await
            .unwrap()
            .into_inner();
        assert_eq!(stream.message().await.unwrap().unwrap().s.len(), 300);
        stream
    };

    // The client drops the stream (it resets it): the backend's next send
    // fails, and the shard serves the next call.
    let client = client(&server).await;
    let stream = open(client.clone()).await;
    drop(stream);
    assert_eq!(
        next_end().await.unwrap().reason,
        pajamax::CancelReason::Cancelled
    );

    // A client whose connection closes with its stream open.
    let other = self::client(&server).await;
    let stream = open(other.clone()).await;
    drop((stream, other));
    next_end().await.unwrap();
    // The first client, still connected, is served again.
    drop(open(client.clone()).await);
    assert_eq!(
        next_end().await.unwrap().reason,
        pajamax::CancelReason::Cancelled
    );
    drop(client);

    shutdown(server).await;
    backend.join().unwrap();
}

/// `kw.type.match_.Same1` in dispatch mode whose `Put` says what it read,
/// as it reads it: a message's first characters, or the error that ended
/// the stream. Before that, it says on its second channel that it took
/// something.
struct Reader(
    std::sync::mpsc::SyncSender<Result<String, tonic::Code>>,
    std::sync::mpsc::Sender<()>,
);

impl d::kw::r#type::r#match::same1_server::Same1Shard for Reader {
    fn put(
        &mut self,
        requests: pajamax::Streaming<d::kw::r#type::r#match::M>,
    ) -> Result<d::kw::r#type::r#match::M, Status> {
        let mut read = 0;
        for m in requests {
            let _ = self.1.send(());
            match m {
                Ok(m) => {
                    read += 1;
                    self.0.send(Ok(m.s.chars().take(8).collect())).unwrap();
                }
                Err(status) => {
                    let code = tonic::Code::from_i32(status.code() as i32);
                    self.0.send(Err(code)).unwrap();
                    return Err(status);
                }
            }
        }
        Ok(d::kw::r#type::r#match::M {
            s: read.to_string(),
        })
    }
}

/// Sends every `kw.type.match_.Same1` call to one queue.
struct Same1Queue(pajamax::dispatch::Sender<d::kw::r#type::r#match::same1_server::Same1Call>);

impl d::kw::r#type::r#match::same1_server::Same1Dispatch for Same1Queue {
    fn dispatch_to(
        &self,
        _request: &d::kw::r#type::r#match::same1_server::Same1Request,
    ) -> &pajamax::dispatch::Sender<d::kw::r#type::r#match::same1_server::Same1Call> {
        &self.0
    }
}

/// A `Same1/Put` call fed through the returned sender, with its answer.
fn put(
    client: &tonic::client::Grpc<Channel>,
) -> (
    tokio::sync::mpsc::UnboundedSender<d::kw::r#type::r#match::M>,
    tokio::task::JoinHandle<Result<d::kw::r#type::r#match::M, tonic::Status>>,
) {
    let (sender, requests) = tokio::sync::mpsc::unbounded_channel();
    let mut client = client.clone();
    let call = tokio::spawn(async move {
        client.ready().await.unwrap();
        let requests = tokio_stream::wrappers::UnboundedReceiverStream::new(requests);
        let codec = tonic_prost::ProstCodec::<d::kw::r#type::r#match::M, _>::default();
        let path: PathAndQuery = "/kw.type.match_.Same1/Put".parse().unwrap();
        Ok(client
            .client_streaming(tonic::Request::new(requests), path, codec)
            .await?
            .into_inner())
    });
    (sender, call)
}

/// One backend thread serving `Same1` calls with a [`Reader`], and what it
/// read.
struct Backend {
    read: std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<Result<String, tonic::Code>>>>,
    took: std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Backend {
    /// The backend and the sender of its queue.
    fn start() -> (
        pajamax::dispatch::Sender<d::kw::r#type::r#match::same1_server::Same1Call>,
        Backend,
    ) {
        Backend::reporting_ahead(64)
    }

    /// A backend that goes on reading only while at most `ahead` of the
    /// messages it read are not yet taken by [`Backend::next_read`]: with
    /// 0 it is busy with each message it takes until the test takes what
    /// it read.
    fn reporting_ahead(
        ahead: usize,
    ) -> (
        pajamax::dispatch::Sender<d::kw::r#type::r#match::same1_server::Same1Call>,
        Backend,
    ) {
        let (sender, queue) =
            pajamax::dispatch::channel::<d::kw::r#type::r#match::same1_server::Same1Call>(16);
        let (read_tx, read) = std::sync::mpsc::sync_channel(ahead);
        let (took_tx, took) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut shard = Reader(read_tx, took_tx);
            for call in queue {
                call.handle(&mut shard);
            }
        });
        let read = std::sync::Arc::new(std::sync::Mutex::new(read));
        let took = std::sync::Arc::new(std::sync::Mutex::new(took));
        (sender, Backend { read, took, thread })
    }

    /// Waits until the backend has taken one more message (or error) from
    /// a request stream (10 s at most).
    fn next_taken(&self) -> tokio::task::JoinHandle<()> {
        let took = self.took.clone();
        tokio::task::spawn_blocking(move || {
            took.lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
        })
    }

    /// What the backend reads next (10 s at most).
    fn next_read(&self) -> tokio::task::JoinHandle<Result<String, tonic::Code>> {
        let read = self.read.clone();
        tokio::task::spawn_blocking(move || {
            read.lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
        })
    }

    /// Waits for the thread, once its queue's senders are gone.
    fn join(self) {
        self.thread.join().unwrap();
    }
}

/// The count a client stream opened by `put` is answered with (10 s at
/// most).
async fn answered(
    answer: tokio::task::JoinHandle<Result<d::kw::r#type::r#match::M, tonic::Status>>,
) -> String {
    let answer = tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("the call is answered")
        .unwrap()
        .unwrap();
    answer.s
}

fn m(s: &str) -> d::kw::r#type::r#match::M {
    d::kw::r#type::r#match::M { s: s.into() }
}

/// Two client streams of one connection dispatched to one backend: the
/// second waits in the queue while the backend reads the first, and its
/// client sends a message that takes all the room the connection has for
/// queued request messages. The first call's next message still reaches
/// the backend, which finishes it and goes on to the second.
#[tokio::test]
async fn a_dispatched_client_stream_is_not_starved_by_the_calls_queued_behind_it() {
    use d::kw::r#type::r#match::same1_server::Same1Server;
    let (sender, backend) = Backend::start();
    let server = serve(
        pajamax::Server::builder()
            .max_buffered_request_bytes(1000)
            .add_service(Same1Server::new(Same1Queue(sender))),
    );
    let client = client(&server).await;
    let next_read = || backend.next_read();

    let (first, first_answer) = put(&client);
    first.send(m("first")).unwrap();
    assert_eq!(next_read().await.unwrap(), Ok("first".into()));
    let (second, second_answer) = put(&client);
    second.send(m(&"b".repeat(900))).unwrap();
    // Long enough for the worker to queue it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.send(m(&"c".repeat(300))).unwrap();
    assert_eq!(next_read().await.unwrap(), Ok("cccccccc".into()));
    drop((first, second));
    assert_eq!(answered(first_answer).await, "2");
    assert_eq!(answered(second_answer).await, "1");
    shutdown(server).await;
    backend.join();
}

/// Two client streams of one connection dispatched to one backend: the
/// second waits in the queue while the backend reads the first, and its
/// client sends two stream windows' worth (one queued for the backend, one
/// held on the worker), most of what the connection may hold there. The
/// first call's next message, which the backend waits for, is still taken
/// and read, not ended RESOURCE_EXHAUSTED for the room the queued call
/// holds; the second call is read in full after it.
#[tokio::test]
async fn a_dispatched_client_stream_is_not_ended_for_the_bytes_of_the_calls_queued_behind_it() {
    read_on_past_the_calls_queued_behind(false).await;
}

/// As above, but the backend is still busy with the first call's message
/// (it has not asked for the next one) when the next one comes: that call
/// is being read, so its next message is kept all the same, and the
/// backend reads it once it asks.
#[tokio::test]
async fn a_dispatched_client_stream_whose_backend_is_busy_is_not_ended_for_the_calls_queued_behind_it(
) {
    read_on_past_the_calls_queued_behind(true).await;
}

/// The two cases above: with `busy`, the backend holds on to the first
/// message (until the test takes what it read) while the rest comes.
async fn read_on_past_the_calls_queued_behind(busy: bool) {
    use d::kw::r#type::r#match::same1_server::Same1Server;
    let (sender, backend) = Backend::reporting_ahead(if busy { 0 } else { 64 });
    // The default stream window, 1 MiB.
    let server = serve(
        pajamax::Server::builder()
            .max_buffered_request_bytes(1536 << 10)
            .add_service(Same1Server::new(Same1Queue(sender))),
    );
    let client = client(&server).await;
    let next_read = || backend.next_read();

    let (first, first_answer) = put(&client);
    first.send(m("first")).unwrap();
    if busy {
        // The backend has taken "first" and waits until the test takes
        // what it read: it is not waiting for the call's next message.
        backend.next_taken().await.unwrap();
    } else {
        assert_eq!(next_read().await.unwrap(), Ok("first".into()));
    }
    let (second, second_answer) = put(&client);
    for _ in 0..22 {
        second.send(m(&"b".repeat(100_000))).unwrap();
    }
    // Long enough for the worker to take all the client may send.
    tokio::time::sleep(Duration::from_millis(500)).await;
    first.send(m(&"c".repeat(600_000))).unwrap();
    if busy {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(next_read().await.unwrap(), Ok("first".into()));
    }
    assert_eq!(next_read().await.unwrap(), Ok("cccccccc".into()));
    drop(first);
    assert_eq!(answered(first_answer).await, "2");
    drop(second);
    for _ in 0..22 {
        assert_eq!(next_read().await.unwrap(), Ok("bbbbbbbb".into()));
    }
    assert_eq!(answered(second_answer).await, "22");
    shutdown(server).await;
    backend.join();
}

/// Dispatched client streams end with the status their clients expect,
/// and the shard reading one learns why it ended: a client that cancels
/// mid-stream (CANCELLED), the server's call timeout (DEADLINE_EXCEEDED);
/// a call its backend's full queue cannot take is answered
/// RESOURCE_EXHAUSTED while its client still sends, one whose backend has
/// stopped UNAVAILABLE, and one dropped unanswered with its queue INTERNAL.
#[tokio::test]
async fn dispatched_client_streams_end_with_the_right_status() {
    use d::kw::r#type::r#match::same1_server::{Same1Call, Same1Server};
    let (sender, backend) = Backend::start();
    let server = serve(
        pajamax::Server::builder()
            .call_timeout(Duration::from_millis(300))
            .add_service(Same1Server::new(Same1Queue(sender))),
    );
    let client = client(&server).await;
    let next_read = || backend.next_read();

    // The client cancels mid-stream.
    let (requests, answer) = put(&client);
    requests.send(m("a")).unwrap();
    assert_eq!(next_read().await.unwrap(), Ok("a".into()));
    answer.abort();
    assert!(answer.await.unwrap_err().is_cancelled());
    assert_eq!(next_read().await.unwrap(), Err(tonic::Code::Cancelled));
    drop(requests);

    // The deadline passes mid-stream.
    let (requests, answer) = put(&client);
    requests.send(m("b")).unwrap();
    assert_eq!(next_read().await.unwrap(), Ok("b".into()));
    let status = answer.await.unwrap().unwrap_err();
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert_eq!(
        next_read().await.unwrap(),
        Err(tonic::Code::DeadlineExceeded)
    );
    drop(requests);
    shutdown(server).await;
    backend.join();

    // A queue of one that no backend takes from.
    let (sender, queue) = pajamax::dispatch::channel::<Same1Call>(1);
    let server =
        serve(pajamax::Server::builder().add_service(Same1Server::new(Same1Queue(sender))));
    let client = self::client(&server).await;
    let (queued, queued_answer) = put(&client);
    queued.send(m("queued")).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (full, answer) = put(&client);
    full.send(m("no room")).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("answered while its client still sends")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    // The backend stops: the call it held is answered, the next refused.
    drop(queue);
    let status = queued_answer.await.unwrap().unwrap_err();
    assert_eq!(status.code(), tonic::Code::Internal, "{status:?}");
    let (stopped, answer) = put(&client);
    stopped.send(m("stopped")).unwrap();
    let status = answer.await.unwrap().unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    drop((queued, full, stopped));
    shutdown(server).await;
}

/// `pkg.other.Cross` in dispatch mode whose `Echo` answers the first
/// message, then drops its sink unfinished.
struct Forgetful;

impl d::pkg::other::cross_server::CrossShard for Forgetful {
    fn echo(
        &mut self,
        mut requests: pajamax::Streaming<d::pkg::other::Item>,
        mut sink: pajamax::Sink<d::pkg::other::Item>,
    ) {
        if let Some(Ok(item)) = requests.next() {
            let _ = sink.send(&item);
        }
    }
}

/// A dispatched bidirectional call whose shard drops its sink unfinished
/// ends INTERNAL after the answers it sent, while its client still sends.
#[tokio::test]
async fn a_dispatched_bidi_call_whose_sink_is_dropped_ends_internal() {
    use d::pkg::other;
    let (server, backend) = serve_cross(Forgetful);
    let mut client = client(&server).await;
    client.ready().await.unwrap();
    let (items, requests) = tokio::sync::mpsc::unbounded_channel();
    items.send(other::Item { id: 1 }).unwrap();
    let codec = tonic_prost::ProstCodec::<other::Item, other::Item>::default();
    let mut answers = client
        .streaming(
            tonic::Request::new(tokio_stream::wrappers::UnboundedReceiverStream::new(
                requests,
            )),
            "/pkg.other.Cross/Echo".parse().unwrap(),
            codec,
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answers.message().await.unwrap().unwrap().id, 1);
    let status = answers.message().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Internal, "{status:?}");
    assert_eq!(
        status.message(),
        "the handler dropped its sink without finishing"
    );
    drop(items);
    shutdown(server).await;
    backend.join().unwrap();
}

/// `Streams` in dispatch mode: `Type` wants two empty messages, `Self`
/// echoes each.
struct EmptyStreams;

impl d::nopkg::streams_server::StreamsShard for EmptyStreams {
    fn r#type(&mut self, requests: pajamax::Streaming<()>) -> Result<(), Status> {
        let count = requests.collect::<Result<Vec<()>, Status>>()?.len();
        if count == 2 {
            Ok(())
        } else {
            Err(Status::invalid_argument(format!("{count} messages")))
        }
    }

    fn self_(&mut self, requests: pajamax::Streaming<()>, mut sink: pajamax::Sink<()>) {
        for request in requests {
            match request {
                Ok(()) if sink.send(&()).is_ok() => {}
                Ok(()) => return,
                Err(status) => return sink.finish(Err(status)),
            }
        }
        sink.finish(Ok(()));
    }
}

/// Sends every `Streams` call to one queue.
struct StreamsQueue(pajamax::dispatch::Sender<d::nopkg::streams_server::StreamsCall>);

impl d::nopkg::streams_server::StreamsDispatch for StreamsQueue {
    fn dispatch_to(
        &self,
        _request: &d::nopkg::streams_server::StreamsRequest,
    ) -> &pajamax::dispatch::Sender<d::nopkg::streams_server::StreamsCall> {
        &self.0
    }
}

#[tokio::test]
async fn dispatched_streams_of_empty_messages_named_by_keywords() {
    use d::nopkg::streams_server::{StreamsCall, StreamsServer};
    let (sender, queue) = pajamax::dispatch::channel::<StreamsCall>(4);
    let backend = std::thread::spawn(move || {
        for call in queue {
            call.handle(&mut EmptyStreams);
        }
    });
    let server =
        serve(pajamax::Server::builder().add_service(StreamsServer::new(StreamsQueue(sender))));
    let mut client = client(&server).await;
    let answers: Vec<()> = streaming(&mut client, "/Streams/Type", vec![(), ()])
        .await
        .unwrap();
    assert_eq!(answers.len(), 1);
    let answers: Vec<()> = streaming(&mut client, "/Streams/Self", vec![(), (), ()])
        .await
        .unwrap();
    assert_eq!(answers.len(), 3);
    shutdown(server).await;
    backend.join().unwrap();
}
