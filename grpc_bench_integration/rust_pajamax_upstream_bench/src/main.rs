//! grpc_bench's `helloworld.Greeter` on the original Pajamax (its published
//! 0.4.0): every `SayHello` answers with the `Hello` it was sent.
//!
//! That Pajamax runs one thread per connection and has no thread-count
//! setting: `GRPC_SERVER_CPUS` is only reported here, the CPU limit comes
//! from outside (Docker's `--cpus`, or `taskset` when run natively). Its
//! default limit of 100 connections is raised so that the widest sweep
//! cells are served.

use helloworld::{Greeter, GreeterServer, HelloReply, HelloRequest};

mod helloworld {
    include!(concat!(env!("OUT_DIR"), "/helloworld.rs"));
}

struct EchoGreeter;

impl Greeter for EchoGreeter {
    fn say_hello(&self, request: HelloRequest) -> pajamax::Response<HelloReply> {
        Ok(HelloReply {
            response: request.request,
        })
    }
}

fn main() -> std::io::Result<()> {
    let cpus = std::env::var("GRPC_SERVER_CPUS").unwrap_or_else(|_| "1".to_owned());
    println!("original pajamax greeter on 0.0.0.0:50051 (GRPC_SERVER_CPUS={cpus}, one thread per connection)");
    pajamax::Config::new()
        .max_concurrent_connections(1000)
        .add_service(GreeterServer::new(EchoGreeter))
        .serve("0.0.0.0:50051")
}
