//! Serves gRPC's `routeguide.RouteGuide` example service.
//!
//! Usage: `route_guide [ADDRESS]`, where the address defaults to
//! `127.0.0.1:10000`.

use pajamax_examples::route_guide::route_guide_server::RouteGuideServer;
use pajamax_examples::route_guide::RouteGuideService;

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:10000".to_owned());
    let builder =
        pajamax::Server::builder().add_service(RouteGuideServer::new(RouteGuideService::new()));
    // Health checking (grpc.health.v1.Health): every service SERVING.
    let (_health, builder) = pajamax_health::serve(builder);
    // Server reflection (grpc.reflection.v1 and v1alpha) for every service above.
    let sets = [
        pajamax_examples::route_guide::FILE_DESCRIPTOR_SET,
        pajamax_health::proto::FILE_DESCRIPTOR_SET,
    ];
    let builder = pajamax_reflection::serve(builder, &sets);
    pajamax_examples::serve_until_signal(builder, &addr)
}
