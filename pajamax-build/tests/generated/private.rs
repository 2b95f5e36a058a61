//! Includes `routeguide` in a private module of a binary and serves it
//! without reflection: what the generated code holds for reflection (its
//! file descriptor set) gives no warning where it goes unused.

#![deny(warnings)]

mod routeguide {
    pajamax::include_proto!("routeguide");
}

use routeguide::route_guide_server::{RouteGuide, RouteGuideServer};
use routeguide::void_server::{Void, VoidServer};

/// Serves nothing: every method answers UNIMPLEMENTED.
struct Nothing;

impl RouteGuide for Nothing {}
impl Void for Nothing {}

fn main() {
    let builder = pajamax::Server::builder()
        .add_service(RouteGuideServer::new(Nothing))
        .add_service(VoidServer::new(Nothing));
    assert_eq!(
        builder.service_names(),
        ["routeguide.RouteGuide", "routeguide.Void"]
    );
}
