//! grpc_bench's `helloworld.Greeter` on tonic, set up as grpc_bench's
//! `rust_tonic_mt_bench`: jemalloc, TCP_NODELAY, and a multi-threaded tokio
//! runtime with one worker per CPU given in `GRPC_SERVER_CPUS` (default 1).
//! Every `SayHello` answers with the `Hello` it was sent. Serves over TLS
//! (rustls on ring, ALPN h2) when `GRPC_TLS_CERT` and `GRPC_TLS_KEY` name a
//! PEM certificate chain and key (`benches/whole_server.sh --tls`), in
//! plaintext otherwise.

use helloworld::greeter_server::{Greeter, GreeterServer};
use helloworld::{HelloReply, HelloRequest};
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

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

/// `GRPC_TLS_CERT` and `GRPC_TLS_KEY`: both set for TLS, neither for
/// plaintext.
fn tls_files() -> Result<Option<(String, String)>, Box<dyn std::error::Error>> {
    match (
        std::env::var("GRPC_TLS_CERT"),
        std::env::var("GRPC_TLS_KEY"),
    ) {
        (Ok(cert), Ok(key)) => Ok(Some((cert, key))),
        (Err(_), Err(_)) => Ok(None),
        _ => Err("GRPC_TLS_CERT and GRPC_TLS_KEY go together: set both or neither".into()),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workers = server_cpus();
    let mut builder = Server::builder().tcp_nodelay(true);
    let tls = tls_files()?;
    if let Some((cert, key)) = &tls {
        // tonic offers ALPN h2 itself.
        let identity = Identity::from_pem(std::fs::read(cert)?, std::fs::read(key)?);
        builder = builder.tls_config(ServerTlsConfig::new().identity(identity))?;
    }
    let over = if tls.is_some() { "TLS" } else { "plaintext" };
    println!("tonic greeter on 0.0.0.0:50051 ({over}) with {workers} worker threads");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(async {
            builder
                .add_service(GreeterServer::new(EchoGreeter))
                .serve("0.0.0.0:50051".parse()?)
                .await?;
            Ok(())
        })
}
