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
    let builder = pajamax::Server::builder().add_service(GreeterServer::new(GreeterService));
    // Health checking (grpc.health.v1.Health): every service SERVING.
    let (_health, builder) = pajamax_health::serve(builder);
    // Server reflection (grpc.reflection.v1 and v1alpha) for every service above.
    let sets = [
        pajamax_examples::helloworld::FILE_DESCRIPTOR_SET,
        pajamax_health::proto::FILE_DESCRIPTOR_SET,
    ];
    let builder = pajamax_reflection::serve(builder, &sets);
    builder.serve_until_signal(addr.as_str())
}
