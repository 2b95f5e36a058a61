//! Generated code of every kind of method, in both modes, implemented and
//! called through `pajamax::Service` as the server calls it.

#![deny(warnings, missing_docs)]

/// The `routeguide` package, in local mode.
pub mod routeguide {
    pajamax::include_proto!("routeguide");
}

/// The `feed` package, in dispatch mode.
pub mod feed {
    pajamax::include_proto!("feed");
}

/// The `names` package: services named `Send` (local mode) and `Sync`
/// (dispatch mode), with wrapper types as requests and answers.
pub mod names {
    pajamax::include_proto!("names");
}

use feed::feed_server::{FeedCall, FeedDispatch, FeedRequest, FeedShard};
use feed::{Item, Key};
use pajamax::dispatch::Sender;
use pajamax::{
    BidiStream, ClientStream, ClientStreamHandler, Context, ServerStream, Sink, Status, Streaming,
};
use routeguide::route_guide_server::RouteGuide;
use routeguide::{Feature, Point, Rectangle, RouteNote, RouteSummary};

/// Serves the route guide, one method of each kind on the worker or on a
/// thread, and leaves `Type` alone.
pub struct Guide;

/// Counts the points of a route.
struct Count(i32);

impl ClientStreamHandler<Point, RouteSummary> for Count {
    fn on_message(&mut self, _ctx: &mut Context<'_>, _point: Point) -> Result<(), Status> {
        self.0 += 1;
        Ok(())
    }

    fn on_end(&mut self, _ctx: &mut Context<'_>) -> Result<RouteSummary, Status> {
        Ok(RouteSummary {
            point_count: self.0,
        })
    }
}

impl RouteGuide for Guide {
    fn get_feature(&self, request: Point) -> Result<Feature, Status> {
        Ok(Feature {
            name: format!("at {}", request.latitude),
            location: Some(request),
        })
    }

    fn list_features(&self, request: Rectangle) -> Result<ServerStream<Feature>, Status> {
        let corners = [request.lo, request.hi];
        Ok(ServerStream::iter(corners.into_iter().map(|location| {
            Ok(Feature {
                name: "corner".into(),
                location,
            })
        })))
    }

    fn record_route(&self) -> Result<ClientStream<Point, RouteSummary>, Status> {
        Ok(ClientStream::on_worker(Count(0)))
    }

    fn route_chat_with_context(
        &self,
        ctx: &mut Context<'_>,
    ) -> Result<BidiStream<RouteNote, RouteNote>, Status> {
        let (stream, notes, mut sink) = BidiStream::channel(ctx);
        std::thread::spawn(move || {
            for note in notes {
                match note {
                    Ok(note) if sink.send(&note).is_ok() => {}
                    Ok(_) => return,
                    Err(status) => return sink.finish(Err(status)),
                }
            }
            sink.finish(Ok(()));
        });
        Ok(stream)
    }

    fn ping(&self, _request: ()) -> Result<(), Status> {
        Ok(())
    }

    fn beats(&self, _request: ()) -> Result<ServerStream<()>, Status> {
        Ok(ServerStream::iter([Ok(()), Ok(())]))
    }
}

/// A shard of items: the versions seen of each key.
#[derive(Debug, Default)]
pub struct Store {
    versions: std::collections::HashMap<String, u32>,
}

impl FeedShard for Store {
    fn get(&mut self, request: Key) -> Result<Item, Status> {
        let version = self.versions.entry(request.key.clone()).or_default();
        *version += 1;
        Ok(Item {
            key: request.key,
            version: *version,
        })
    }

    fn watch(&mut self, request: Key, mut sink: Sink<Item>) {
        for version in 1..=3 {
            let item = Item {
                key: request.key.clone(),
                version,
            };
            if sink.send(&item).is_err() {
                return;
            }
        }
        sink.finish(Ok(()));
    }

    fn upload(&mut self, requests: Streaming<Item>) -> Result<Key, Status> {
        let mut keys = Vec::new();
        for item in requests {
            let item = item?;
            self.versions.insert(item.key.clone(), item.version);
            keys.push(item.key);
        }
        Ok(Key {
            key: keys.join(","),
        })
    }

    fn chat(&mut self, requests: Streaming<Item>, mut sink: Sink<Item>) {
        for item in requests {
            let Ok(mut item) = item else {
                return;
            };
            item.version += 1;
            if sink.send(&item).is_err() {
                return;
            }
        }
        sink.finish(Ok(()));
    }

    fn ping(&mut self, _request: ()) -> Result<(), Status> {
        Ok(())
    }
}

/// Sends every call to one queue.
pub struct OneQueue(pub Sender<FeedCall>);

impl FeedDispatch for OneQueue {
    fn dispatch_to(&self, _request: &FeedRequest) -> &Sender<FeedCall> {
        &self.0
    }
}

/// Sends uploads to its first queue; `Idle` has no call to send.
pub struct Nowhere(
    pub Sender<feed::uploads_server::UploadsCall>,
    pub Sender<feed::idle_server::IdleCall>,
);

impl feed::uploads_server::UploadsDispatch for Nowhere {
    fn dispatch_to(
        &self,
        _request: &feed::uploads_server::UploadsRequest,
    ) -> &Sender<feed::uploads_server::UploadsCall> {
        &self.0
    }
}

impl feed::idle_server::IdleDispatch for Nowhere {
    fn dispatch_to(
        &self,
        request: &feed::idle_server::IdleRequest,
    ) -> &Sender<feed::idle_server::IdleCall> {
        match *request {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use feed::feed_server::{FeedAnswer, FeedServer};
    use pajamax::grpc::context::ResponseMetadata;
    use pajamax::grpc::metadata::Metadata;
    use pajamax::{Code, Reply, Service};
    use prost::Message;
    use routeguide::route_guide_server::{self, RouteGuideServer};

    /// Runs `call` with a context of no server, as the server would.
    fn with_context<R>(call: impl FnOnce(&mut Context<'_>) -> R) -> R {
        let metadata = Metadata::new();
        let mut response = ResponseMetadata::default();
        let mut ctx = Context::new(&metadata, None, None, &mut response);
        call(&mut ctx)
    }

    fn number(service: &dyn Service, name: &str) -> usize {
        service
            .methods()
            .iter()
            .position(|m| m.name == name)
            .unwrap()
    }

    fn unary(service: &dyn Service, name: &str, request: &[u8]) -> Result<Vec<u8>, Status> {
        let method = number(service, name);
        let mut buf = Vec::new();
        with_context(|ctx| service.unary(method, ctx, request, &mut Reply::new(&mut buf)))?;
        Ok(buf)
    }

    #[test]
    fn local_mode_serves_every_kind() {
        let server = RouteGuideServer::new(Guide);
        assert_eq!(server.name(), "routeguide.RouteGuide");
        assert_eq!(route_guide_server::METHODS.len(), 7);
        let kinds: Vec<_> = server.methods().iter().map(|m| m.kind).collect();
        use pajamax::MethodKind::*;
        assert_eq!(
            kinds,
            [
                Unary,
                ServerStreaming,
                ClientStreaming,
                BidiStreaming,
                Unary,
                ServerStreaming,
                ServerStreaming
            ]
        );

        let point = Point {
            latitude: 7,
            longitude: 8,
        };
        let answer = unary(&server, "GetFeature", &point.encode_to_vec()).unwrap();
        let feature = Feature::decode(answer.as_slice()).unwrap();
        assert_eq!(feature.name, "at 7");
        assert_eq!(unary(&server, "Ping", &[]).unwrap(), Vec::<u8>::new());

        let rectangle = Rectangle::default().encode_to_vec();
        with_context(|ctx| server.server_streaming(1, ctx, &rectangle)).unwrap();
        with_context(|ctx| server.server_streaming(6, ctx, &[])).unwrap();
        with_context(|ctx| server.client_streaming(2, ctx)).unwrap();
        with_context(|ctx| server.bidi_streaming(3, ctx)).unwrap();

        // A malformed request never reaches the handler.
        let err = with_context(|ctx| server.server_streaming(1, ctx, &[0x0a, 0x09])).unwrap_err();
        assert_eq!(err.code(), Code::Internal);
        // A method left alone, here one named by a keyword.
        let err = with_context(|ctx| server.server_streaming(5, ctx, &[])).unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert_eq!(
            err.message(),
            "routeguide.RouteGuide/Type is not implemented"
        );
        // A number of another kind.
        let err = unary(&server, "ListFeatures", &[]).unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert_eq!(
            err.message(),
            "routeguide.RouteGuide has no unary method number 1"
        );
    }

    #[test]
    fn a_service_without_methods_answers_nothing() {
        struct Nothing;
        impl routeguide::void_server::Void for Nothing {}
        let server = routeguide::void_server::VoidServer::new(Nothing);
        assert!(server.methods().is_empty());
        assert_eq!(unary_at(&server, 0).code(), Code::Unimplemented);
    }

    fn unary_at(service: &dyn Service, method: usize) -> Status {
        let mut buf = Vec::new();
        with_context(|ctx| service.unary(method, ctx, &[], &mut Reply::new(&mut buf))).unwrap_err()
    }

    #[test]
    fn dispatch_mode_queues_unary_and_server_streaming_calls() {
        let (sender, queue) = pajamax::dispatch::channel(1);
        let server = FeedServer::new(OneQueue(sender));
        let mut store = Store::default();

        let key = Key { key: "k".into() }.encode_to_vec();
        // Unary: the answer goes back through the call.
        assert!(unary(&server, "Get", &key).unwrap().is_empty());
        let call = queue.try_recv().unwrap();
        assert!(matches!(&call.request, FeedRequest::Get(key) if key.key == "k"));
        call.handle(&mut store);
        assert_eq!(store.versions["k"], 1);

        // Server streaming: the stream is returned at once, the call queued
        // with its sink.
        with_context(|ctx| server.server_streaming(1, ctx, &key)).unwrap();
        let mut call = queue.try_recv().unwrap();
        call.trailers_mut().insert("x-shard", "0").unwrap();
        let (request, answer) = call.into_parts();
        assert!(matches!(request, FeedRequest::Watch(_)));
        let FeedAnswer::Watch(sink) = answer else {
            panic!("a sink expected")
        };
        store.watch(Key { key: "k".into() }, sink);

        // Empty requests are unit.
        assert!(unary(&server, "Ping", &[]).unwrap().is_empty());
        assert!(matches!(
            queue.try_recv().unwrap().request,
            FeedRequest::Ping(())
        ));
        with_context(|ctx| server.server_streaming(5, ctx, &[])).unwrap();
        let call = queue.try_recv().unwrap();
        assert!(matches!(call.request, FeedRequest::Beats(())));
        // Left alone, it finishes its sink with UNIMPLEMENTED.
        call.handle(&mut store);

        // A full queue turns calls away, streaming ones too: their stream
        // is still returned, and ends with the reason.
        assert!(unary(&server, "Get", &key).unwrap().is_empty());
        assert!(unary(&server, "Get", &key).unwrap().is_empty());
        with_context(|ctx| server.server_streaming(1, ctx, &key)).unwrap();
        assert!(queue.try_recv().is_ok());
        assert!(queue.try_recv().is_err());
    }

    #[test]
    fn dispatch_mode_queues_client_and_bidi_streaming_calls() {
        let (sender, queue) = pajamax::dispatch::channel(4);
        let server = FeedServer::new(OneQueue(sender));
        // The stream is returned at once, the call queued with its stream
        // of requests and where its answer goes.
        with_context(|ctx| server.client_streaming(2, ctx)).unwrap();
        let call = queue.try_recv().unwrap();
        assert!(matches!(call.request, FeedRequest::Upload(_)));
        let (_, answer) = call.into_parts();
        assert!(matches!(answer, FeedAnswer::Upload(_)));
        with_context(|ctx| server.bidi_streaming(3, ctx)).unwrap();
        let call = queue.try_recv().unwrap();
        assert!(matches!(call.request, FeedRequest::Chat(_)));
        let (_, answer) = call.into_parts();
        assert!(matches!(answer, FeedAnswer::Chat(_)));

        let (uploads, uploaded) = pajamax::dispatch::channel(1);
        let (idle, _) = pajamax::dispatch::channel(1);
        let nowhere = std::sync::Arc::new(Nowhere(uploads, idle));
        let server = feed::uploads_server::UploadsServer::from_arc(nowhere.clone());
        with_context(|ctx| server.client_streaming(0, ctx)).unwrap();
        assert!(matches!(
            uploaded.try_recv().unwrap().request,
            feed::uploads_server::UploadsRequest::Upload(_)
        ));
        let server = feed::idle_server::IdleServer::from_arc(nowhere);
        assert!(server.methods().is_empty());
        assert_eq!(format!("{server:?}"), "IdleServer { .. }");
    }

    #[test]
    fn shard_methods_left_alone_answer_unimplemented() {
        struct Nothing;
        impl FeedShard for Nothing {}
        let (sender, queue) = pajamax::dispatch::channel(4);
        let server = FeedServer::new(OneQueue(sender));
        assert!(unary(&server, "Get", &[]).is_ok());
        queue.try_recv().unwrap().handle(&mut Nothing);
    }

    #[test]
    fn every_package_with_a_service_embeds_the_run_s_descriptor_set() {
        // Both packages come from one run: both constants hold its set,
        // which names both files.
        assert_eq!(routeguide::FILE_DESCRIPTOR_SET, feed::FILE_DESCRIPTOR_SET);
        let set = routeguide::FILE_DESCRIPTOR_SET;
        let holds = |name: &[u8]| set.windows(name.len()).any(|w| w == name);
        assert!(holds(b"routeguide.proto"));
        assert!(holds(b"feed.proto"));
        assert!(holds(b"google/protobuf/empty.proto"));
        assert!(holds(b"RouteGuide"));
    }
}
