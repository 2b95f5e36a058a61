//! Includes `routeguide` and `feed` in private modules of a binary and
//! serves them without reflection: what the generated code holds for
//! reflection (its file descriptor set), and what a server leaves unused
//! (the constructor it does not call, a call's `into_parts` and trailers,
//! services it does not serve), give no warning.

#![deny(warnings)]

mod routeguide {
    pajamax::include_proto!("routeguide");
}

mod feed {
    pajamax::include_proto!("feed");
}

use feed::feed_server::{FeedCall, FeedDispatch, FeedRequest, FeedServer, FeedShard};
use pajamax::dispatch::{self, Sender};
use routeguide::route_guide_server::{RouteGuide, RouteGuideServer};
use routeguide::void_server::{Void, VoidServer};
use std::sync::Arc;

/// Serves nothing: every method answers UNIMPLEMENTED.
struct Nothing;

impl RouteGuide for Nothing {}
impl Void for Nothing {}
impl FeedShard for Nothing {}

/// Sends every `feed.Feed` call to one thread.
struct OneThread(Sender<FeedCall>);

impl FeedDispatch for OneThread {
    fn dispatch_to(&self, _request: &FeedRequest) -> &Sender<FeedCall> {
        &self.0
    }
}

fn main() {
    let (sender, receiver) = dispatch::channel::<FeedCall>(dispatch::DEFAULT_QUEUE_SIZE);
    std::thread::spawn(move || {
        for call in receiver {
            call.handle(&mut Nothing);
        }
    });
    let builder = pajamax::Server::builder()
        .add_service(RouteGuideServer::from_arc(Arc::new(Nothing)))
        .add_service(VoidServer::new(Nothing))
        .add_service(FeedServer::new(OneThread(sender)));
    assert_eq!(
        builder.service_names(),
        ["routeguide.RouteGuide", "routeguide.Void", "feed.Feed"]
    );
}
