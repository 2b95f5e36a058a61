//! `pajamax::testing::TestCall`'s answers for the interop service and the
//! route guide are what tonic's client gets from a server running them.

use pajamax::testing::{Answer, TestCall};
use pajamax::Metadata;
use pajamax_examples::grpc_testing::test_service_server::{TestService, TestServiceServer};
use pajamax_examples::grpc_testing::*;
use pajamax_examples::interop::{ECHO_INITIAL, ECHO_TRAILING};
use pajamax_examples::route_guide::route_guide_server::{RouteGuide, RouteGuideServer};
use pajamax_examples::route_guide::{features, Point, Rectangle, RouteGuideService, RouteNote};
use pajamax_examples::InteropService;
use std::fmt::Debug;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

/// What a client saw of a call: the `x-` metadata of its headers and
/// trailers (sorted), its messages and its status.
#[derive(Debug, Clone, PartialEq)]
struct Seen<M> {
    headers: Vec<(String, String)>,
    messages: Vec<M>,
    code: i32,
    message: String,
    trailers: Vec<(String, String)>,
}

impl<M> Seen<M> {
    fn all(&self) -> Vec<(String, String)> {
        let mut all: Vec<_> = self.headers.iter().chain(&self.trailers).cloned().collect();
        all.sort();
        all
    }
}

/// The `x-` entries of `m`, sorted.
fn entries(m: &Metadata) -> Vec<(String, String)> {
    let mut v: Vec<_> = m
        .iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| (k.to_owned(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    v.sort();
    v
}

/// The `x-` entries of tonic's `m`, sorted.
fn tonic_entries(m: &tonic::metadata::MetadataMap) -> Vec<(String, String)> {
    let mut v: Vec<_> = m
        .clone()
        .into_headers()
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("x-"))
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

/// What `TestCall`'s answer `a` shows a client.
fn seen_in<M: Clone>(a: &Answer<M>) -> Seen<M> {
    let s = a.status();
    Seen {
        headers: entries(&a.headers),
        messages: a.messages.clone(),
        code: s.code() as i32,
        message: s.message().to_owned(),
        trailers: entries(&a.trailers),
    }
}

/// A tonic request carrying `meta`.
fn request<T>(m: T, meta: &[(&str, &str)]) -> tonic::Request<T> {
    let mut r = tonic::Request::new(m);
    for (k, v) in meta {
        if k.ends_with("-bin") {
            r.metadata_mut().insert_bin(
                tonic::metadata::MetadataKey::from_bytes(k.as_bytes()).unwrap(),
                tonic::metadata::MetadataValue::from_bytes(v.as_bytes()),
            );
        } else {
            r.metadata_mut().insert(
                tonic::metadata::MetadataKey::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
    }
    r
}

/// A `TestCall` whose request carries `meta`.
fn call_with(meta: &[(&str, &str)]) -> TestCall {
    let mut c = TestCall::new();
    for (k, v) in meta {
        if k.ends_with("-bin") {
            c.metadata_mut().insert_bin(k, v.as_bytes()).unwrap();
        } else {
            c.metadata_mut().insert(k, v).unwrap();
        }
    }
    c
}

/// A unary call through the server, with tonic's client.
async fn wire_unary<Q, R>(ch: &Channel, path: &str, r: tonic::Request<Q>) -> Seen<R>
where
    Q: prost::Message + Send + Sync + 'static,
    R: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(ch.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Q, R>::default();
    match client
        .unary(r, PathAndQuery::try_from(path.to_owned()).unwrap(), codec)
        .await
    {
        Ok(r) => Seen {
            headers: tonic_entries(r.metadata()),
            messages: vec![r.into_inner()],
            code: 0,
            message: String::new(),
            trailers: vec![],
        },
        Err(s) => Seen {
            headers: vec![],
            messages: vec![],
            code: s.code() as i32,
            message: s.message().to_owned(),
            trailers: tonic_entries(s.metadata()),
        },
    }
}

/// What tonic's client gets of a streamed answer.
async fn read_stream<R: prost::Message + Default + Send + 'static>(
    response: Result<tonic::Response<tonic::Streaming<R>>, tonic::Status>,
) -> Seen<R> {
    let response = match response {
        Ok(r) => r,
        Err(s) => {
            return Seen {
                headers: vec![],
                messages: vec![],
                code: s.code() as i32,
                message: s.message().to_owned(),
                trailers: tonic_entries(s.metadata()),
            }
        }
    };
    let headers = tonic_entries(response.metadata());
    let mut stream = response.into_inner();
    let mut messages = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(m)) => messages.push(m),
            Ok(None) => {
                let t = stream.trailers().await.unwrap().unwrap_or_default();
                return Seen {
                    headers,
                    messages,
                    code: 0,
                    message: String::new(),
                    trailers: tonic_entries(&t),
                };
            }
            Err(s) => {
                return Seen {
                    headers,
                    messages,
                    code: s.code() as i32,
                    message: s.message().to_owned(),
                    trailers: tonic_entries(s.metadata()),
                }
            }
        }
    }
}

/// A server-streaming call through the server, with tonic's client.
async fn wire_server_stream<Q, R>(ch: &Channel, path: &str, r: tonic::Request<Q>) -> Seen<R>
where
    Q: prost::Message + Send + Sync + 'static,
    R: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(ch.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Q, R>::default();
    let path = PathAndQuery::try_from(path.to_owned()).unwrap();
    read_stream(client.server_streaming(r, path, codec).await).await
}

/// A client-streaming or bidirectional call through the server, with
/// tonic's client.
async fn wire_streaming<Q, R>(
    ch: &Channel,
    path: &str,
    requests: Vec<Q>,
    meta: &[(&str, &str)],
) -> Seen<R>
where
    Q: prost::Message + Send + Sync + 'static,
    R: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(ch.clone());
    client.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Q, R>::default();
    let path = PathAndQuery::try_from(path.to_owned()).unwrap();
    let r = request(tokio_stream::iter(requests), meta);
    read_stream(client.streaming(r, path, codec).await).await
}

/// Checks that `TestCall` (`t`) and the server with tonic's client (`w`)
/// agree on `what`: the same messages, status and metadata. tonic merges
/// a unary answer's trailers into its headers, and gives a trailers-only
/// answer's metadata as headers when its status is OK: the metadata is
/// compared as a whole, and a trailers-only error has no headers on
/// either side.
fn compare<M: PartialEq + Debug>(what: &str, t: &Seen<M>, w: &Seen<M>) {
    assert_eq!(t.messages, w.messages, "{what}");
    assert_eq!((t.code, &t.message), (w.code, &w.message), "{what}");
    assert_eq!(t.all(), w.all(), "{what}");
    if w.code != 0 && w.messages.is_empty() {
        assert!(t.headers.is_empty() && w.headers.is_empty(), "{what}");
    }
}

/// Response parameters of the given sizes and intervals.
fn params(sizes: &[(i32, i32)]) -> Vec<ResponseParameters> {
    sizes
        .iter()
        .map(|&(size, interval_us)| ResponseParameters {
            size,
            interval_us,
            compressed: None,
        })
        .collect()
}

/// The status for an interop request to echo.
fn status(code: i32, message: &str) -> Option<EchoStatus> {
    Some(EchoStatus {
        code,
        message: message.into(),
    })
}

const T: &str = "/grpc.testing.TestService/";

#[tokio::test]
async fn interop_and_route_guide_answers_match_the_servers() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(TestServiceServer::new(InteropService))
        .add_service(RouteGuideServer::new(RouteGuideService::new()))
        .bind("127.0.0.1:0")
        .unwrap();
    let ch = Endpoint::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let s = InteropService;
    let echo: &[(&str, &str)] = &[
        (ECHO_INITIAL, "test_initial_metadata_value"),
        (ECHO_TRAILING, "\u{ab}\u{ab}"),
    ];

    // EmptyCall.
    let t = seen_in(&TestCall::new().unary(|ctx| s.empty_call_with_context(ctx, Empty {})));
    let w = wire_unary(&ch, &format!("{T}EmptyCall"), request(Empty {}, &[])).await;
    compare("EmptyCall", &t, &w);

    // UnaryCall: plain, with echo metadata, with a status.
    for (name, req) in [
        (
            "UnaryCall size 10",
            SimpleRequest {
                response_type: 0,
                response_size: 10,
                ..Default::default()
            },
        ),
        (
            "UnaryCall status 2",
            SimpleRequest {
                response_status: status(2, "\t\ntest with whitespace ☺ 😈"),
                ..Default::default()
            },
        ),
        (
            "UnaryCall bad size",
            SimpleRequest {
                response_size: -1,
                ..Default::default()
            },
        ),
    ] {
        let t = seen_in(&call_with(echo).unary(|ctx| s.unary_call_with_context(ctx, req.clone())));
        let w = wire_unary(&ch, &format!("{T}UnaryCall"), request(req, echo)).await;
        compare(name, &t, &w);
    }

    // StreamingOutputCall, paced.
    for (name, req) in [
        (
            "StreamingOutputCall paced",
            StreamingOutputCallRequest {
                response_parameters: params(&[(3, 0), (5, 20_000), (1, 10_000)]),
                ..Default::default()
            },
        ),
        (
            "StreamingOutputCall status",
            StreamingOutputCallRequest {
                response_parameters: params(&[(3, 0), (5, 1000)]),
                response_status: status(5, "not here"),
                ..Default::default()
            },
        ),
        (
            "StreamingOutputCall none, status",
            StreamingOutputCallRequest {
                response_status: status(5, "not here"),
                ..Default::default()
            },
        ),
        (
            "StreamingOutputCall negative interval",
            StreamingOutputCallRequest {
                response_parameters: params(&[(3, -1)]),
                ..Default::default()
            },
        ),
    ] {
        let t = seen_in(
            &call_with(echo)
                .server_stream(|ctx| s.streaming_output_call_with_context(ctx, req.clone())),
        );
        let w =
            wire_server_stream(&ch, &format!("{T}StreamingOutputCall"), request(req, echo)).await;
        compare(name, &t, &w);
    }
    // StreamingInputCall.
    let payload = |n: usize| StreamingInputCallRequest {
        payload: Some(Payload {
            r#type: 0,
            body: vec![0; n],
        }),
        expect_compressed: None,
    };
    let reqs = vec![payload(27182), payload(8), payload(1828), payload(45904)];
    let t = seen_in(
        &call_with(echo)
            .client_stream(|ctx| s.streaming_input_call_with_context(ctx), reqs.clone()),
    );
    let w = wire_streaming(&ch, &format!("{T}StreamingInputCall"), reqs, echo).await;
    compare("StreamingInputCall", &t, &w);
    let t = seen_in(
        &call_with(echo).client_stream(|ctx| s.streaming_input_call_with_context(ctx), Vec::new()),
    );
    let w = wire_streaming::<StreamingInputCallRequest, StreamingInputCallResponse>(
        &ch,
        &format!("{T}StreamingInputCall"),
        vec![],
        echo,
    )
    .await;
    compare("StreamingInputCall empty", &t, &w);

    // FullDuplexCall and HalfDuplexCall.
    let out_req = |sizes: &[(i32, i32)], st: Option<EchoStatus>| StreamingOutputCallRequest {
        response_parameters: params(sizes),
        response_status: st,
        ..Default::default()
    };
    for (name, reqs) in [
        (
            "ping-pong",
            vec![
                out_req(&[(31415, 0)], None),
                out_req(&[(9, 1000)], None),
                out_req(&[(2653, 0), (1, 0)], None),
            ],
        ),
        (
            "status",
            vec![out_req(&[(1, 0)], None), out_req(&[], status(2, "asked"))],
        ),
        ("status first", vec![out_req(&[], status(7, "denied"))]),
        ("empty", vec![]),
    ] {
        for method in ["FullDuplexCall", "HalfDuplexCall"] {
            let t = seen_in(&call_with(echo).bidi(
                |ctx| {
                    if method == "FullDuplexCall" {
                        s.full_duplex_call_with_context(ctx)
                    } else {
                        s.half_duplex_call_with_context(ctx)
                    }
                },
                reqs.clone(),
            ));
            let w = wire_streaming(&ch, &format!("{T}{method}"), reqs.clone(), echo).await;
            compare(&format!("{method} {name}"), &t, &w);
        }
    }

    // Route guide.
    let g = RouteGuideService::new();
    const R: &str = "/routeguide.RouteGuide/";
    let p = features()[3].location.unwrap();
    let t = seen_in(&TestCall::new().unary(|ctx| g.get_feature_with_context(ctx, p)));
    let w = wire_unary(&ch, &format!("{R}GetFeature"), request(p, &[])).await;
    compare("GetFeature", &t, &w);
    let rect = Rectangle {
        lo: features()[0].location,
        hi: features()[7].location,
    };
    let t = seen_in(&TestCall::new().server_stream(|ctx| g.list_features_with_context(ctx, rect)));
    let w = wire_server_stream(&ch, &format!("{R}ListFeatures"), request(rect, &[])).await;
    compare("ListFeatures", &t, &w);
    let half = Rectangle { hi: None, ..rect };
    let t = seen_in(&TestCall::new().server_stream(|ctx| g.list_features_with_context(ctx, half)));
    let w = wire_server_stream(&ch, &format!("{R}ListFeatures"), request(half, &[])).await;
    compare("ListFeatures refused", &t, &w);
    let route: Vec<Point> = features()
        .iter()
        .take(3)
        .filter_map(|f| f.location)
        .collect();
    let t = seen_in(
        &TestCall::new().client_stream(|ctx| g.record_route_with_context(ctx), route.clone()),
    );
    let w = wire_streaming(&ch, &format!("{R}RecordRoute"), route, &[]).await;
    compare("RecordRoute", &t, &w);
    let note = |m: &str, x: i32| RouteNote {
        location: Some(Point {
            latitude: x,
            longitude: x,
        }),
        message: m.into(),
    };
    // Distinct points per side: the notes are shared by both services'
    // calls only within one service value.
    let notes = vec![note("a", 1), note("b", 1), note("c", 2), note("d", 1)];
    let t = seen_in(&TestCall::new().bidi(|ctx| g.route_chat_with_context(ctx), notes.clone()));
    let w = wire_streaming(&ch, &format!("{R}RouteChat"), notes, &[]).await;
    compare("RouteChat", &t, &w);

    // Off the runtime: the client answers the server's shutdown meanwhile.
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}
