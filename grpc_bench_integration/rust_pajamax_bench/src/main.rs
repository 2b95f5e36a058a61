//! grpc_bench's `helloworld.Greeter` on pajamax: every `SayHello` answers
//! with the `Hello` it was sent.
//!
//! Listens on 0.0.0.0:50051 with one worker thread per CPU given in
//! `GRPC_SERVER_CPUS` (default 1), each pinned to one of the CPUs the
//! process may run on.

use helloworld::greeter_server::{Greeter, GreeterServer};
use helloworld::{HelloReply, HelloRequest};
use pajamax::Status;

mod helloworld {
    pajamax::include_proto!("helloworld");
}

struct EchoGreeter;

impl Greeter for EchoGreeter {
    fn say_hello(&self, request: HelloRequest) -> Result<HelloReply, Status> {
        Ok(HelloReply {
            response: request.request,
        })
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

fn main() -> std::io::Result<()> {
    let workers = server_cpus();
    println!("pajamax greeter on 0.0.0.0:50051 with {workers} worker threads");
    pajamax::Server::builder()
        .workers(workers)
        .add_service(GreeterServer::new(EchoGreeter))
        .serve("0.0.0.0:50051")
}
