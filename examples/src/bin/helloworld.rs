//! Serves the `helloworld.Greeter` service.
//!
//! Usage: `helloworld [ADDRESS]`, where the address defaults to
//! `127.0.0.1:50051`.

use pajamax_examples::helloworld::greeter_server::GreeterServer;
use pajamax_examples::GreeterService;

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:50051".to_owned());
    pajamax::Server::builder()
        .add_service(GreeterServer::new(GreeterService))
        .serve(addr.as_str())
}
