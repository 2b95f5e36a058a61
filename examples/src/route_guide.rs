//! gRPC's route guide: one method of every kind, all served on the worker.
//!
//! - `GetFeature` (unary): the feature at a point.
//! - `ListFeatures` (server streaming): the features in a rectangle, pulled
//!   from an iterator as the client's flow-control windows allow.
//! - `RecordRoute` (client streaming): a [`ClientStreamHandler`] that sums up
//!   the points of a route as they arrive.
//! - `RouteChat` (bidirectional): a [`BidiHandler`] that answers each note
//!   with the notes left earlier at the same point, by any client.
//!
//! This module holds the generated code of the `routeguide` proto package
//! and [`RouteGuideService`], which implements it over a built-in map of
//! features ([`features`]).
//!
//! ```
//! use pajamax_examples::route_guide::route_guide_server::RouteGuide;
//! use pajamax_examples::route_guide::{Point, RouteGuideService};
//!
//! let guide = RouteGuideService::new();
//! let feature = guide.get_feature(Point { latitude: 409_146_138, longitude: -746_188_906 })?;
//! assert_eq!(feature.name, "Quarry Lookout");
//! # Ok::<(), pajamax::Status>(())
//! ```

pajamax::include_proto!("routeguide");

use pajamax::{
    BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Context, Responses, ServerStream,
    Status,
};
use route_guide_server::RouteGuide;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The features the guide knows: made-up names at points of a small grid in
/// the hills of northern New Jersey, as in gRPC's example (the names and
/// points here are the example's own).
pub fn features() -> Vec<Feature> {
    const NAMES: [&str; 12] = [
        "Quarry Lookout",
        "Old Mill Bridge",
        "Fire Tower Ridge",
        "Beaver Pond",
        "Stone Chapel",
        "Cedar Swamp Trailhead",
        "Hawk Watch",
        "Lime Kiln",
        "Twin Oaks Farm",
        "Ridge Road Overlook",
        "Iron Furnace",
        "Lakeside Meadow",
    ];
    NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| Feature {
            name: (*name).to_owned(),
            location: Some(Point {
                latitude: 409_146_138 + 1_000_000 * (i as i32 % 4),
                longitude: -746_188_906 + 1_500_000 * (i as i32 / 4),
            }),
        })
        .collect()
}

/// The notes left by `RouteChat` calls, by point.
type Notes = Arc<Mutex<HashMap<(i32, i32), Vec<RouteNote>>>>;

/// The route guide over [`features`]. Notes left by `RouteChat` calls are
/// shared by all the calls (behind a lock: the example's state is global).
#[derive(Debug, Clone)]
pub struct RouteGuideService {
    features: Arc<Vec<Feature>>,
    notes: Notes,
}

impl RouteGuideService {
    /// A guide over the built-in [`features`], with no notes yet.
    pub fn new() -> RouteGuideService {
        RouteGuideService {
            features: Arc::new(features()),
            notes: Arc::default(),
        }
    }

    fn feature_at(&self, point: &Point) -> Option<&Feature> {
        self.features
            .iter()
            .find(|feature| feature.location.as_ref() == Some(point))
    }
}

impl Default for RouteGuideService {
    fn default() -> RouteGuideService {
        RouteGuideService::new()
    }
}

impl RouteGuide for RouteGuideService {
    fn get_feature(&self, point: Point) -> Result<Feature, Status> {
        Ok(match self.feature_at(&point) {
            Some(feature) => feature.clone(),
            None => Feature {
                name: String::new(),
                location: Some(point),
            },
        })
    }

    fn list_features(&self, rectangle: Rectangle) -> Result<ServerStream<Feature>, Status> {
        let (Some(lo), Some(hi)) = (rectangle.lo, rectangle.hi) else {
            return Err(Status::invalid_argument("a rectangle needs both corners"));
        };
        let features = self.features.clone();
        let inside = (0..features.len()).filter_map(move |i| {
            let feature = &features[i];
            let point = feature.location.as_ref()?;
            in_range(point, &lo, &hi).then(|| Ok(feature.clone()))
        });
        Ok(ServerStream::iter(inside))
    }

    fn record_route(&self) -> Result<ClientStream<Point, RouteSummary>, Status> {
        Ok(ClientStream::on_worker(RouteRecorder {
            guide: self.clone(),
            started: Instant::now(),
            last: None,
            summary: RouteSummary::default(),
        }))
    }

    fn route_chat(&self) -> Result<BidiStream<RouteNote, RouteNote>, Status> {
        Ok(BidiStream::on_worker(Chat {
            notes: self.notes.clone(),
        }))
    }
}

/// Whether `point` lies in the rectangle with corners `a` and `b`.
fn in_range(point: &Point, a: &Point, b: &Point) -> bool {
    let (lat_lo, lat_hi) = (a.latitude.min(b.latitude), a.latitude.max(b.latitude));
    let (lon_lo, lon_hi) = (a.longitude.min(b.longitude), a.longitude.max(b.longitude));
    (lat_lo..=lat_hi).contains(&point.latitude) && (lon_lo..=lon_hi).contains(&point.longitude)
}

/// `RecordRoute` on the worker: the summary grows with each point. A
/// distance past what an int32 holds ends the call with `OUT_OF_RANGE`.
struct RouteRecorder {
    guide: RouteGuideService,
    started: Instant,
    last: Option<Point>,
    summary: RouteSummary,
}

impl ClientStreamHandler<Point, RouteSummary> for RouteRecorder {
    fn on_message(&mut self, _ctx: &mut Context<'_>, point: Point) -> Result<(), Status> {
        self.summary.point_count += 1;
        if self.guide.feature_at(&point).is_some() {
            self.summary.feature_count += 1;
        }
        if let Some(last) = &self.last {
            self.summary.distance = self
                .summary
                .distance
                .checked_add(distance(last, &point))
                .ok_or_else(|| Status::out_of_range("a route longer than an int32 of metres"))?;
        }
        self.last = Some(point);
        Ok(())
    }

    fn on_end(&mut self, _ctx: &mut Context<'_>) -> Result<RouteSummary, Status> {
        let mut summary = std::mem::take(&mut self.summary);
        summary.elapsed_time = self.started.elapsed().as_secs() as i32;
        Ok(summary)
    }
}

/// The great-circle distance between two points, in metres (haversine).
pub fn distance(a: &Point, b: &Point) -> i32 {
    const EARTH_RADIUS_M: f64 = 6_371_000.0;
    let radians = |e7: i32| f64::from(e7) / 1e7 * std::f64::consts::PI / 180.0;
    let (lat1, lat2) = (radians(a.latitude), radians(b.latitude));
    let dlat = lat2 - lat1;
    let dlon = radians(b.longitude) - radians(a.longitude);
    let h = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlon / 2.0).sin().powi(2);
    // Rounding may put `h` a hair above one for points nearly opposite.
    let h = h.min(1.0);
    (2.0 * EARTH_RADIUS_M * h.sqrt().atan2((1.0 - h).sqrt())) as i32
}

/// `RouteChat` on the worker.
struct Chat {
    notes: Notes,
}

impl BidiHandler<RouteNote, RouteNote> for Chat {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        note: RouteNote,
        responses: &mut Responses<'_, RouteNote>,
    ) -> Result<(), Status> {
        let location = note.location.unwrap_or_default();
        let key = (location.latitude, location.longitude);
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        let earlier = notes.entry(key).or_default();
        for earlier_note in earlier.iter() {
            responses.send(earlier_note);
        }
        earlier.push(note);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_are_great_circle_metres() {
        let a = Point {
            latitude: 0,
            longitude: 0,
        };
        let b = Point {
            latitude: 10_000_000,
            longitude: 0,
        };
        // One degree of latitude is about 111 km.
        assert!((111_000..111_400).contains(&distance(&a, &b)));
        assert_eq!(distance(&a, &a), 0);
    }

    #[test]
    fn antipodal_points_are_half_a_circumference_apart() {
        // Rounding puts the haversine of these points a hair above one.
        let a = Point {
            latitude: 17_283_938,
            longitude: 0,
        };
        let b = Point {
            latitude: -17_283_938,
            longitude: 1_800_000_000,
        };
        // Half of the earth's circumference: about 20,015 km.
        assert!((20_000_000..20_030_000).contains(&distance(&a, &b)));
    }

    #[test]
    fn rectangles_take_either_corner_order() {
        let p = |latitude, longitude| Point {
            latitude,
            longitude,
        };
        assert!(in_range(&p(5, 5), &p(10, 10), &p(0, 0)));
        assert!(!in_range(&p(11, 5), &p(0, 0), &p(10, 10)));
    }

    #[test]
    fn unknown_points_have_unnamed_features() {
        let guide = RouteGuideService::new();
        let point = Point {
            latitude: 1,
            longitude: 2,
        };
        let feature = guide.get_feature(point).unwrap();
        assert_eq!(feature.name, "");
        assert_eq!(feature.location, Some(point));
    }

    /// The streaming methods, run without a server or a client.
    #[test]
    fn streaming_methods_answer_in_a_test_call() {
        use pajamax::testing::TestCall;
        let guide = RouteGuideService::new();
        let call = TestCall::new();
        let corner = |latitude, longitude| {
            Some(Point {
                latitude,
                longitude,
            })
        };
        // The whole grid: all twelve features, in order.
        let rectangle = Rectangle {
            lo: corner(400_000_000, -750_000_000),
            hi: corner(420_000_000, -740_000_000),
        };
        let listed = call.server_stream(|_| guide.list_features(rectangle));
        assert!(listed.result.is_ok());
        let names: Vec<_> = listed.messages.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            features()
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
        );
        let half_open = Rectangle {
            hi: None,
            ..rectangle
        };
        let refused = call.server_stream(|_| guide.list_features(half_open));
        assert_eq!(refused.status().code(), pajamax::Code::InvalidArgument);

        // Two known points and one unknown, in a route.
        let known: Vec<Point> = features()
            .iter()
            .take(2)
            .filter_map(|f| f.location)
            .collect();
        let route = [known[0], Point::default(), known[1]];
        let recorded = call.client_stream(|_| guide.record_route(), route);
        let summary = &recorded.messages[0];
        assert_eq!((summary.point_count, summary.feature_count), (3, 2));
        assert_eq!(
            summary.distance,
            distance(&route[0], &route[1]) + distance(&route[1], &route[2])
        );

        // Each note is answered with those left at its point before.
        let note = |message: &str| RouteNote {
            location: corner(1, 1),
            message: message.to_owned(),
        };
        let chat = call.bidi(|_| guide.route_chat(), [note("a"), note("b"), note("c")]);
        let said: Vec<_> = chat.messages.iter().map(|n| n.message.as_str()).collect();
        assert_eq!(said, ["a", "a", "b"]);

        // A ping-pong: each note says how many it heard back for the last.
        let guide = RouteGuideService::new();
        let mut chat = TestCall::new().open_bidi(|_| guide.route_chat());
        let mut heard = 0;
        for _ in 0..4 {
            assert!(chat.send(note(&heard.to_string())));
            heard = std::iter::from_fn(|| chat.recv()).count();
        }
        // Each note brings back all those before it: 0, 1, 2, then 3
        // ("0", "0", "1", "2" sent).
        assert_eq!(heard, 3);
        let answer = chat.finish();
        let said: Vec<_> = answer.messages.iter().map(|n| n.message.as_str()).collect();
        assert_eq!(said, ["0", "0", "0", "0", "0", "1"]);
        assert!(answer.result.is_ok());
    }
}
