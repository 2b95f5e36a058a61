//! The stream bench on tonic, set up as the grpc_bench `rust_tonic_bench`:
//! jemalloc, TCP_NODELAY, and a multi-threaded tokio runtime with one worker
//! per CPU given in `GRPC_SERVER_CPUS` (default 1). `Subscribe` is an
//! iterator turned into a stream; `Echo` answers with the request stream
//! itself, so each item goes back as it is decoded, with no task or channel
//! in between.
//!
//! Listens on `0.0.0.0:$STREAMING_BENCH_PORT` (50061).

use streaming_bench::tonic_proto::stream_bench_server::{StreamBench, StreamBenchServer};
use streaming_bench::tonic_proto::{Ask, Item};
use streaming_bench::{listen_addr, payload, server_cpus, MAX_SIZE};
use tonic::{transport::Server, Request, Response, Status, Streaming};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The items of one `Subscribe` call.
struct Items {
    next: u64,
    count: u64,
    payload: Vec<u8>,
}

impl Iterator for Items {
    type Item = Result<Item, Status>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next == self.count {
            return None;
        }
        let seq = self.next;
        self.next += 1;
        Some(Ok(Item {
            seq,
            payload: self.payload.clone(),
        }))
    }
}

struct Bench;

#[tonic::async_trait]
impl StreamBench for Bench {
    type SubscribeStream = tokio_stream::Iter<Items>;
    type EchoStream = Streaming<Item>;

    async fn subscribe(
        &self,
        request: Request<Ask>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let ask = request.into_inner();
        if ask.size > MAX_SIZE {
            return Err(Status::invalid_argument("size above 1 MiB"));
        }
        Ok(Response::new(tokio_stream::iter(Items {
            next: 0,
            count: u64::from(ask.count),
            payload: payload(ask.size),
        })))
    }

    async fn echo(
        &self,
        request: Request<Streaming<Item>>,
    ) -> Result<Response<Self::EchoStream>, Status> {
        Ok(Response::new(request.into_inner()))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workers = server_cpus();
    let addr = listen_addr();
    println!("tonic stream bench on {addr} with {workers} worker threads");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(async {
            Server::builder()
                .tcp_nodelay(true)
                .add_service(StreamBenchServer::new(Bench))
                .serve(addr.parse()?)
                .await?;
            Ok(())
        })
}
