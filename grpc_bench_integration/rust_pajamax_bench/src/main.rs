//! grpc_bench's `helloworld.Greeter` on pajamax: every `SayHello` answers
//! with the `Hello` it was sent.
//!
//! Listens on 0.0.0.0:50051 with one worker thread per CPU given in
//! `GRPC_SERVER_CPUS` (default 1), each pinned to one of the CPUs the
//! process may run on. Serves over TLS when `GRPC_TLS_CERT` and
//! `GRPC_TLS_KEY` name a PEM certificate chain and key (built with the
//! `tls` feature; `benches/whole_server.sh --tls`), in plaintext otherwise.

use helloworld::greeter_server::{Greeter, GreeterServer};
use helloworld::{HelloReply, HelloRequest};
use pajamax::{Builder, Status};
use std::io;

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

/// `GRPC_TLS_CERT` and `GRPC_TLS_KEY`: both set for TLS, neither for
/// plaintext.
fn tls_files() -> io::Result<Option<(String, String)>> {
    match (
        std::env::var("GRPC_TLS_CERT"),
        std::env::var("GRPC_TLS_KEY"),
    ) {
        (Ok(cert), Ok(key)) => Ok(Some((cert, key))),
        (Err(_), Err(_)) => Ok(None),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "GRPC_TLS_CERT and GRPC_TLS_KEY go together: set both or neither",
        )),
    }
}

#[cfg(feature = "tls")]
fn with_tls(builder: Builder, cert: &str, key: &str) -> io::Result<Builder> {
    Ok(builder.tls(pajamax::TlsConfig::from_pem_files(cert, key)?))
}

#[cfg(not(feature = "tls"))]
fn with_tls(_: Builder, _: &str, _: &str) -> io::Result<Builder> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "GRPC_TLS_CERT is set but this server was built without its `tls` feature",
    ))
}

fn main() -> io::Result<()> {
    let workers = server_cpus();
    let mut builder = pajamax::Server::builder().workers(workers);
    let tls = tls_files()?;
    if let Some((cert, key)) = &tls {
        builder = with_tls(builder, cert, key)?;
    }
    let over = if tls.is_some() { "TLS" } else { "plaintext" };
    println!("pajamax greeter on 0.0.0.0:50051 ({over}) with {workers} worker threads");
    builder
        .add_service(GreeterServer::new(EchoGreeter))
        .serve("0.0.0.0:50051")
}
