//! Dispatch mode against local mode: the latency of one call at low load,
//! over loopback, from a tonic client making one call at a time.
//!
//! - `dispatch/get`: `dict_store.DictStore/Get` of the dict_store example,
//!   one worker and one shard thread; the worker decodes the request and
//!   sends it to the shard thread, which answers through the call's
//!   responder.
//! - `local/say_hello`: `helloworld.Greeter/SayHello`, one worker, handled
//!   on the worker itself.
//!
//! Before criterion runs, each case is also timed call by call and the
//! median and 99th percentile are printed.
//!
//! Run: `cargo bench -p pajamax-benches --bench dispatch`

use criterion::{criterion_group, criterion_main, Criterion};
use pajamax_examples::dict_store::dict_store_server::DictStoreServer;
use pajamax_examples::dict_store::{spawn_backends, Entry, Key, SetReply, Value};
use pajamax_examples::helloworld::greeter_server::GreeterServer;
use pajamax_examples::helloworld::{HelloReply, HelloRequest};
use pajamax_examples::GreeterService;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tonic::client::Grpc;
use tonic::transport::{Channel, Endpoint};

/// Calls timed one by one for the printed percentiles.
const TIMED_CALLS: usize = 20_000;

/// A tonic client for one unary method.
struct Client<Req, Reply> {
    grpc: Grpc<Channel>,
    path: tonic::codegen::http::uri::PathAndQuery,
    request: Req,
    _reply: std::marker::PhantomData<Reply>,
}

impl<Req, Reply> Client<Req, Reply>
where
    Req: prost::Message + Clone + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    async fn connect(addr: std::net::SocketAddr, path: &'static str, request: Req) -> Self {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .tcp_nodelay(true)
            .connect()
            .await
            .unwrap();
        Client {
            grpc: Grpc::new(channel),
            path: path.parse().unwrap(),
            request,
            _reply: std::marker::PhantomData,
        }
    }

    async fn call(&mut self) -> Reply {
        self.grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<Req, Reply>::default();
        self.grpc
            .unary(
                tonic::Request::new(self.request.clone()),
                self.path.clone(),
                codec,
            )
            .await
            .unwrap()
            .into_inner()
    }

    /// Times `TIMED_CALLS` calls one by one and prints the median and the
    /// 99th percentile.
    async fn print_percentiles(&mut self, name: &str) {
        for _ in 0..1_000 {
            self.call().await;
        }
        let mut times: Vec<Duration> = Vec::with_capacity(TIMED_CALLS);
        for _ in 0..TIMED_CALLS {
            let started = Instant::now();
            self.call().await;
            times.push(started.elapsed());
        }
        times.sort_unstable();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        eprintln!(
            "{name}: {TIMED_CALLS} sequential calls: median {:.1} µs, p99 {:.1} µs",
            at(0.5).as_secs_f64() * 1e6,
            at(0.99).as_secs_f64() * 1e6
        );
    }
}

fn server(service: impl pajamax::Service) -> pajamax::ServerHandle {
    pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(service)
        .bind("127.0.0.1:0")
        .unwrap()
}

fn bench_latency(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let (router, _backends) = spawn_backends(1, pajamax::dispatch::DEFAULT_QUEUE_SIZE);
    let store = server(DictStoreServer::new(router));
    let greeter = server(GreeterServer::new(GreeterService));

    let mut get = runtime.block_on(async {
        let mut set = Client::<Entry, SetReply>::connect(
            store.local_addr(),
            "/dict_store.DictStore/Set",
            Entry {
                key: "bench".into(),
                value: 1.0,
            },
        )
        .await;
        set.call().await;
        let mut get = Client::<Key, Value>::connect(
            store.local_addr(),
            "/dict_store.DictStore/Get",
            Key {
                key: "bench".into(),
            },
        )
        .await;
        assert_eq!(get.call().await.value, 1.0);
        get
    });
    let mut say_hello = runtime.block_on(Client::<HelloRequest, HelloReply>::connect(
        greeter.local_addr(),
        "/helloworld.Greeter/SayHello",
        HelloRequest {
            name: "bench".into(),
        },
    ));

    runtime.block_on(get.print_percentiles("dispatch/get"));
    runtime.block_on(say_hello.print_percentiles("local/say_hello"));

    let mut group = c.benchmark_group("unary_latency");
    group.bench_function("dispatch/get", |b| {
        b.iter_custom(|iters| timed(&runtime, &mut get, iters))
    });
    group.bench_function("local/say_hello", |b| {
        b.iter_custom(|iters| timed(&runtime, &mut say_hello, iters))
    });
    group.finish();

    drop((get, say_hello));
    store.shutdown();
    greeter.shutdown();
}

/// The time `iters` sequential calls take.
fn timed<Req, Reply>(runtime: &Runtime, client: &mut Client<Req, Reply>, iters: u64) -> Duration
where
    Req: prost::Message + Clone + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(client.call().await);
        }
        started.elapsed()
    })
}

criterion_group!(benches, bench_latency);
criterion_main!(benches);
