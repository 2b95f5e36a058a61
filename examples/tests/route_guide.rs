//! The `route_guide` binary answers tonic's client on every method.

mod common;

use common::{
    bidi, client_streaming, connect, server_streaming, start_listening, unary, KillOnDrop,
};
use pajamax_examples::route_guide::{
    distance, features, Feature, Point, Rectangle, RouteNote, RouteSummary,
};
use std::process::Command;
use tokio::sync::mpsc;

fn start() -> (KillOnDrop, String) {
    start_listening(Command::new(env!("CARGO_BIN_EXE_route_guide")).arg("127.0.0.1:0"))
}

fn point(latitude: i32, longitude: i32) -> Point {
    Point {
        latitude,
        longitude,
    }
}

#[tokio::test]
async fn get_feature_names_known_points_only() {
    let (_server, addr) = start();
    let channel = connect(&addr).await;
    let known = features()[3].clone();
    let found: Feature = unary(
        channel.clone(),
        "/routeguide.RouteGuide/GetFeature",
        known.location.unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(found, known);
    let nowhere: Feature = unary(channel, "/routeguide.RouteGuide/GetFeature", point(0, 0))
        .await
        .unwrap();
    assert_eq!(nowhere.name, "");
    assert_eq!(nowhere.location, Some(point(0, 0)));
}

#[tokio::test]
async fn list_features_streams_those_in_the_rectangle() {
    let (_server, addr) = start();
    let channel = connect(&addr).await;
    let all = features();
    // The first two columns of the grid: eight features.
    let lo = all[0].location.unwrap();
    let hi = all[7].location.unwrap();
    let listed: Vec<Feature> = server_streaming(
        channel.clone(),
        "/routeguide.RouteGuide/ListFeatures",
        tonic::Request::new(Rectangle {
            lo: Some(hi),
            hi: Some(lo),
        }),
    )
    .await
    .unwrap();
    assert_eq!(listed, all[..8].to_vec());
    let everywhere: Vec<Feature> = server_streaming(
        channel.clone(),
        "/routeguide.RouteGuide/ListFeatures",
        tonic::Request::new(Rectangle {
            lo: Some(point(-900_000_000, -1_800_000_000)),
            hi: Some(point(900_000_000, 1_800_000_000)),
        }),
    )
    .await
    .unwrap();
    assert_eq!(everywhere, all);
    let status = server_streaming::<_, Feature>(
        channel,
        "/routeguide.RouteGuide/ListFeatures",
        tonic::Request::new(Rectangle::default()),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn record_route_sums_up_the_points() {
    let (_server, addr) = start();
    let channel = connect(&addr).await;
    let all = features();
    let mut route: Vec<Point> = all.iter().map(|f| f.location.unwrap()).collect();
    route.push(point(1, 1));
    let expected_distance: i32 = route.windows(2).map(|w| distance(&w[0], &w[1])).sum();
    let summary: RouteSummary =
        client_streaming(channel, "/routeguide.RouteGuide/RecordRoute", route.clone())
            .await
            .unwrap();
    assert_eq!(summary.point_count, route.len() as i32);
    assert_eq!(summary.feature_count, all.len() as i32);
    assert_eq!(summary.distance, expected_distance);
}

#[tokio::test]
async fn record_route_refuses_a_distance_past_an_int32() {
    let (_server, addr) = start();
    let channel = connect(&addr).await;
    // Back and forth across the globe: about 20,000 km a leg, so the
    // distance passes i32::MAX metres after 108 legs.
    let route: Vec<Point> = (0..200)
        .map(|i| point(0, if i % 2 == 0 { 0 } else { 1_800_000_000 }))
        .collect();
    let status = client_streaming::<_, RouteSummary>(
        channel.clone(),
        "/routeguide.RouteGuide/RecordRoute",
        route,
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
    // A route short of the limit is summed up as ever.
    let route: Vec<Point> = (0..100)
        .map(|i| point(0, if i % 2 == 0 { 0 } else { 1_800_000_000 }))
        .collect();
    let summary: RouteSummary =
        client_streaming(channel, "/routeguide.RouteGuide/RecordRoute", route)
            .await
            .unwrap();
    assert_eq!(
        summary.distance,
        99 * distance(&point(0, 0), &point(0, 1_800_000_000))
    );
}

#[tokio::test]
async fn route_chat_answers_with_earlier_notes_at_the_same_point() {
    let (_server, addr) = start();
    let channel = connect(&addr).await;
    let note = |latitude, text: &str| RouteNote {
        location: Some(point(latitude, 0)),
        message: text.into(),
    };
    let (tx, rx) = mpsc::channel(8);
    for (latitude, text) in [(1, "first"), (2, "second"), (1, "third"), (1, "fourth")] {
        tx.send(note(latitude, text)).await.unwrap();
    }
    drop(tx);
    let mut answers =
        bidi::<RouteNote, RouteNote>(channel.clone(), "/routeguide.RouteGuide/RouteChat", rx)
            .await
            .unwrap();
    let mut heard = Vec::new();
    while let Some(answer) = answers.message().await.unwrap() {
        heard.push(answer.message);
    }
    // "third" hears "first"; "fourth" hears "first" and "third".
    assert_eq!(heard, ["first", "first", "third"]);

    // Notes are shared by all the calls: a second chat hears the first.
    let (tx, rx) = mpsc::channel(1);
    tx.send(note(2, "again")).await.unwrap();
    drop(tx);
    let mut answers = bidi::<RouteNote, RouteNote>(channel, "/routeguide.RouteGuide/RouteChat", rx)
        .await
        .unwrap();
    assert_eq!(answers.message().await.unwrap().unwrap().message, "second");
    assert!(answers.message().await.unwrap().is_none());
}
