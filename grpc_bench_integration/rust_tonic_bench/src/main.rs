//! grpc_bench's `helloworld.Greeter` on tonic, set up as grpc_bench's
//! `rust_tonic_mt_bench`: jemalloc, TCP_NODELAY, and a multi-threaded tokio
//! runtime with one worker per CPU given in `GRPC_SERVER_CPUS` (default 1).
//! Every `SayHello` answers with the `Hello` it was sent.

use helloworld::greeter_server::{Greeter, GreeterServer};
use helloworld::{HelloReply, HelloRequest};
use tonic::{transport::Server, Request, Response, Status};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod helloworld {
    tonic::include_proto!("helloworld");
}

struct EchoGreeter;

#[tonic::async_trait]
impl Greeter for EchoGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(HelloReply {
            response: request.into_inner().request,
        }))
    }
}

/// `GRPC_SERVER_CPUS`, which Docker's `--cpus` lets be fractional, rounded
/// up to whole threads.
fn server_cpus() -> usize {
    std::env::var("GRPC_SERVER_CPUS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|cpus| cpus.is_finite() && *cpus > 0.0)
        .map_or(1, |cpus| cpus.ceil() as usize)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workers = server_cpus();
    println!("tonic greeter on 0.0.0.0:50051 with {workers} worker threads");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(async {
            Server::builder()
                .tcp_nodelay(true)
                .add_service(GreeterServer::new(EchoGreeter))
                .serve("0.0.0.0:50051".parse()?)
                .await?;
            Ok(())
        })
}
