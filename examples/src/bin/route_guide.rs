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
    pajamax::Server::builder()
        .add_service(RouteGuideServer::new(RouteGuideService::new()))
        .serve(addr.as_str())
}
