//! The gRPC health checking service, `grpc.health.v1.Health`, for pajamax
//! servers.
//!
//! Load balancers, orchestrators and probes such as `grpc-health-probe`
//! ask a server whether it, or one of its services, can take calls:
//!
//! - `Check` answers the current status of one service (`""` is the server
//!   as a whole), or `NOT_FOUND` for a service with no status;
//! - `Watch` sends the current status, then each change of it, for as long
//!   as the call lasts; a service with no status is `SERVICE_UNKNOWN` until
//!   it gets one;
//! - `List` answers every status the server knows, or `RESOURCE_EXHAUSTED`
//!   when there are more than [`MAX_LISTED`] of them.
//!
//! [`serve`] adds the service to a server builder and gives back the
//! [`HealthReporter`] that sets the statuses. Every service of the builder,
//! and the server as a whole, start as `SERVING`; when the server shuts down
//! gracefully ([`ServerHandle::shutdown`](pajamax::ServerHandle::shutdown)),
//! every status turns `NOT_SERVING`, and every `Watch` call gets
//! `NOT_SERVING` and then ends, before the connections close.
//!
//! ```
//! use pajamax_health::ServingStatus;
//! # struct Greeter;
//! # impl pajamax::Service for Greeter {
//! #     fn name(&self) -> &'static str { "helloworld.Greeter" }
//! #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
//! # }
//!
//! let builder = pajamax::Server::builder()
//!     .workers(1)
//!     .pin_workers(false)
//!     .add_service(Greeter);
//! let (health, builder) = pajamax_health::serve(builder);
//! assert_eq!(health.status("helloworld.Greeter"), Some(ServingStatus::Serving));
//!
//! // Not ready yet: say so until it is.
//! health.set_not_serving("helloworld.Greeter");
//! let server = builder.bind("127.0.0.1:0")?;
//! health.set_serving("helloworld.Greeter");
//!
//! server.shutdown();
//! assert_eq!(health.status(""), Some(ServingStatus::NotServing));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Watch calls
//!
//! Each `Watch` call is served by a thread of its own, which waits for a
//! change of the statuses and sends it through the call's [`Sink`]: the
//! worker never waits for a watcher, and a client that does not read its
//! answers only holds up its own thread. A thread ends with its call: when
//! the client cancels, at the call's deadline, when the connection closes
//! (each wakes it at once, through [`Sink::on_cancel`]), or at shutdown.
//! At most [`DEFAULT_MAX_WATCHERS`] calls are watched at once
//! ([`HealthReporter::set_max_watchers`]); one more is answered
//! `RESOURCE_EXHAUSTED`.

#![forbid(unsafe_code)]

use pajamax::{Builder, Context, ServerStream, Sink, Status};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The messages and the service code of the `grpc.health.v1` proto
/// package, as `pajamax-build` generates them.
pub mod proto {
    pajamax::include_proto!("grpc.health.v1");
}

pub use proto::health_check_response::ServingStatus;
use proto::health_server::Health;
pub use proto::health_server::HealthServer;
use proto::{HealthCheckRequest, HealthCheckResponse, HealthListRequest, HealthListResponse};

/// The fully qualified name of the service, `grpc.health.v1.Health`.
pub const SERVICE_NAME: &str = proto::health_server::SERVICE_NAME;

/// How many `Watch` calls may be open at once unless
/// [`HealthReporter::set_max_watchers`] says otherwise.
pub const DEFAULT_MAX_WATCHERS: usize = 1024;

/// The most statuses `List` answers; with more, it answers
/// `RESOURCE_EXHAUSTED`, as the protocol says.
pub const MAX_LISTED: usize = 100;

/// How long [`HealthReporter::shutdown`] waits for the watchers to hand
/// over their last answer.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

/// The stack of a watcher thread: it only waits, encodes a small message
/// and hands it over.
const WATCHER_STACK: usize = 256 << 10;

/// Adds the health service to `builder` and gives back the
/// [`HealthReporter`] that sets its statuses, with the builder.
///
/// The server as a whole (`""`) and every service added to `builder` so
/// far (the health service included) start as `SERVING`; a service added
/// later has no status until [`HealthReporter::set_serving`] gives it one,
/// so call this after the last [`add_service`](pajamax::Builder::add_service).
/// A graceful shutdown of the server calls [`HealthReporter::shutdown`]
/// (through [`Builder::on_shutdown`]).
///
/// ```
/// # struct Greeter;
/// # impl pajamax::Service for Greeter {
/// #     fn name(&self) -> &'static str { "helloworld.Greeter" }
/// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
/// # }
/// let builder = pajamax::Server::builder().add_service(Greeter);
/// let (health, builder) = pajamax_health::serve(builder);
/// health.set_not_serving("helloworld.Greeter");
/// # let _ = builder;
/// ```
pub fn serve(builder: Builder) -> (HealthReporter, Builder) {
    let (reporter, service) = health_reporter();
    let builder = builder.add_service(service);
    for name in builder.service_names() {
        reporter.set_serving(name);
    }
    let on_shutdown = reporter.clone();
    let builder = builder.on_shutdown(move || on_shutdown.shutdown());
    (reporter, builder)
}

/// The health service and the [`HealthReporter`] that sets its statuses,
/// for a server put together by hand; [`serve`] does all of it.
///
/// Only the server as a whole (`""`) has a status to begin with,
/// `SERVING`. Add the service to the server, give each service its status,
/// and have the server's shutdown call [`HealthReporter::shutdown`]:
///
/// ```
/// let (health, service) = pajamax_health::health_reporter();
/// let on_shutdown = health.clone();
/// let builder = pajamax::Server::builder()
///     .add_service(service)
///     .on_shutdown(move || on_shutdown.shutdown());
/// health.set_serving("helloworld.Greeter");
/// # let _ = builder;
/// ```
pub fn health_reporter() -> (HealthReporter, HealthServer<HealthService>) {
    let registry = Arc::new(Registry::new());
    let reporter = HealthReporter {
        registry: registry.clone(),
    };
    reporter.set_serving("");
    (reporter, HealthServer::new(HealthService { registry }))
}

/// Sets the statuses the health service reports: of the server as a whole
/// (`""`) and of each service, by its fully qualified name
/// (`helloworld.Greeter`). Cheap to clone; every clone sets the same
/// statuses.
///
/// A change reaches every `Watch` call of that service at once. After
/// [`shutdown`](HealthReporter::shutdown), every status is `NOT_SERVING`
/// for good: later changes are ignored.
///
/// ```
/// use pajamax_health::ServingStatus;
///
/// let (health, _service) = pajamax_health::health_reporter();
/// assert_eq!(health.status(""), Some(ServingStatus::Serving));
/// assert_eq!(health.status("helloworld.Greeter"), None);
///
/// health.set_not_serving("helloworld.Greeter");
/// assert_eq!(health.status("helloworld.Greeter"), Some(ServingStatus::NotServing));
///
/// health.clear_status("helloworld.Greeter");
/// assert_eq!(health.status("helloworld.Greeter"), None);
/// ```
#[derive(Clone)]
pub struct HealthReporter {
    registry: Arc<Registry>,
}

impl fmt::Debug for HealthReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.registry.lock();
        f.debug_struct("HealthReporter")
            .field("statuses", &state.statuses)
            .field("watchers", &state.watchers)
            .field("shut_down", &state.shut_down)
            .finish()
    }
}

impl HealthReporter {
    /// Marks `service` (`""` for the server as a whole) `SERVING`.
    pub fn set_serving(&self, service: &str) {
        self.set_status(service, ServingStatus::Serving);
    }

    /// Marks `service` (`""` for the server as a whole) `NOT_SERVING`.
    pub fn set_not_serving(&self, service: &str) {
        self.set_status(service, ServingStatus::NotServing);
    }

    /// Sets the status of `service` (`""` for the server as a whole).
    /// `SERVICE_UNKNOWN` is no status: it does what
    /// [`clear_status`](HealthReporter::clear_status) does.
    ///
    /// ```
    /// use pajamax_health::ServingStatus;
    ///
    /// let (health, _service) = pajamax_health::health_reporter();
    /// health.set_status("", ServingStatus::NotServing);
    /// assert_eq!(health.status(""), Some(ServingStatus::NotServing));
    /// ```
    pub fn set_status(&self, service: &str, status: ServingStatus) {
        let mut state = self.registry.lock();
        if state.shut_down {
            log::debug!("health: {service:?} stays NOT_SERVING after the shutdown");
            return;
        }
        let changed = if status == ServingStatus::ServiceUnknown {
            state.statuses.remove(service).is_some()
        } else {
            state.statuses.insert(service.to_owned(), status) != Some(status)
        };
        drop(state);
        if changed {
            self.registry.changed.notify_all();
        }
    }

    /// Forgets the status of `service`: `Check` answers `NOT_FOUND` for it
    /// again, and its `Watch` calls get `SERVICE_UNKNOWN`.
    pub fn clear_status(&self, service: &str) {
        self.set_status(service, ServingStatus::ServiceUnknown);
    }

    /// The status of `service`, if it has one.
    pub fn status(&self, service: &str) -> Option<ServingStatus> {
        self.registry.lock().statuses.get(service).copied()
    }

    /// Every status, by service name (the server as a whole under `""`).
    ///
    /// ```
    /// let (health, _service) = pajamax_health::health_reporter();
    /// health.set_serving("helloworld.Greeter");
    /// let names: Vec<String> = health.statuses().into_keys().collect();
    /// assert_eq!(names, ["", "helloworld.Greeter"]);
    /// ```
    pub fn statuses(&self) -> BTreeMap<String, ServingStatus> {
        let state = self.registry.lock();
        state
            .statuses
            .iter()
            .map(|(name, status)| (name.clone(), *status))
            .collect()
    }

    /// The number of `Watch` calls being served.
    pub fn watchers(&self) -> usize {
        self.registry.lock().watchers
    }

    /// Sets how many `Watch` calls may be open at once (each has a thread
    /// of its own); one more is answered `RESOURCE_EXHAUSTED`. Default:
    /// [`DEFAULT_MAX_WATCHERS`]. Calls open beyond a lowered limit go on.
    pub fn set_max_watchers(&self, max: usize) {
        self.registry.lock().max_watchers = max;
    }

    /// Whether [`shutdown`](HealthReporter::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.registry.lock().shut_down
    }

    /// The server is going away: every status turns `NOT_SERVING` for
    /// good, and every `Watch` call gets `NOT_SERVING` (unless that is
    /// what it last got) and then ends with `OK`. A `Watch` call made
    /// later gets `NOT_SERVING` and ends at once.
    ///
    /// Waits (up to a second) until every watcher has handed its last
    /// answer over to the server, so that the answers are on their way
    /// before the connections are told to go away. [`serve`] registers it
    /// as a shutdown hook of the server.
    ///
    /// ```
    /// use pajamax_health::ServingStatus;
    ///
    /// let (health, _service) = pajamax_health::health_reporter();
    /// health.shutdown();
    /// health.set_serving("");
    /// assert_eq!(health.status(""), Some(ServingStatus::NotServing));
    /// ```
    pub fn shutdown(&self) {
        let mut state = self.registry.lock();
        state.shut_down = true;
        for status in state.statuses.values_mut() {
            *status = ServingStatus::NotServing;
        }
        self.registry.changed.notify_all();
        let until = Instant::now() + SHUTDOWN_WAIT;
        while state.watchers > 0 {
            let now = Instant::now();
            if now >= until {
                log::debug!(
                    "health: {} watcher(s) still busy at shutdown",
                    state.watchers
                );
                break;
            }
            state = self
                .registry
                .watcher_ended
                .wait_timeout(state, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The statuses and the watchers, shared by the reporter, the service and
/// the watcher threads.
struct Registry {
    state: Mutex<State>,
    /// Signalled when a status changes, and at shutdown.
    changed: Condvar,
    /// Signalled when a watcher thread ends.
    watcher_ended: Condvar,
}

struct State {
    statuses: HashMap<String, ServingStatus>,
    shut_down: bool,
    /// Watcher threads running.
    watchers: usize,
    max_watchers: usize,
}

impl State {
    /// What a watcher of `service` is to report now.
    fn watched(&self, service: &str) -> ServingStatus {
        if self.shut_down {
            return ServingStatus::NotServing;
        }
        self.statuses
            .get(service)
            .copied()
            .unwrap_or(ServingStatus::ServiceUnknown)
    }
}

impl Registry {
    fn new() -> Registry {
        Registry {
            state: Mutex::new(State {
                statuses: HashMap::new(),
                shut_down: false,
                watchers: 0,
                max_watchers: DEFAULT_MAX_WATCHERS,
            }),
            changed: Condvar::new(),
            watcher_ended: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a watcher thread for as long as it lives, panics included.
struct WatcherSlot(Arc<Registry>);

impl Drop for WatcherSlot {
    fn drop(&mut self) {
        self.0.lock().watchers -= 1;
        self.0.watcher_ended.notify_all();
    }
}

/// The handlers of `grpc.health.v1.Health` over the statuses a
/// [`HealthReporter`] sets; made by [`health_reporter`] (or [`serve`]),
/// served wrapped in a [`HealthServer`].
pub struct HealthService {
    registry: Arc<Registry>,
}

impl fmt::Debug for HealthService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthService").finish_non_exhaustive()
    }
}

fn response(status: ServingStatus) -> HealthCheckResponse {
    HealthCheckResponse {
        status: status as i32,
    }
}

impl Health for HealthService {
    fn check(&self, request: HealthCheckRequest) -> Result<HealthCheckResponse, Status> {
        match self.registry.lock().statuses.get(&request.service) {
            Some(status) => Ok(response(*status)),
            None => Err(Status::not_found(format!(
                "no health status for service {:?}",
                request.service
            ))),
        }
    }

    fn list(&self, _request: HealthListRequest) -> Result<HealthListResponse, Status> {
        let state = self.registry.lock();
        if state.statuses.len() > MAX_LISTED {
            return Err(Status::resource_exhausted(format!(
                "{} health statuses, more than List answers (at most {MAX_LISTED})",
                state.statuses.len()
            )));
        }
        let statuses = state
            .statuses
            .iter()
            .map(|(name, status)| (name.clone(), response(*status)))
            .collect();
        Ok(HealthListResponse { statuses })
    }

    fn watch_with_context(
        &self,
        ctx: &mut Context<'_>,
        request: HealthCheckRequest,
    ) -> Result<ServerStream<HealthCheckResponse>, Status> {
        {
            let mut state = self.registry.lock();
            if state.watchers >= state.max_watchers {
                return Err(Status::resource_exhausted(format!(
                    "too many health watchers (at most {})",
                    state.max_watchers
                )));
            }
            state.watchers += 1;
        }
        let slot = WatcherSlot(self.registry.clone());
        let (stream, sink) = ServerStream::channel(ctx);
        let spawned = std::thread::Builder::new()
            .name("pajamax-health-watch".into())
            .stack_size(WATCHER_STACK)
            .spawn(move || {
                watch(&slot.0, &request.service, sink);
                drop(slot);
            });
        if let Err(err) = spawned {
            // The closure, its sink with it, is dropped: the call ends with
            // INTERNAL, and the slot is given back.
            log::error!("health: no thread for a watcher: {err}");
        }
        Ok(stream)
    }
}

/// Serves one `Watch` call of `service`: the status now, then each change,
/// until the call ends or the server shuts down.
fn watch(registry: &Arc<Registry>, service: &str, mut sink: Sink<HealthCheckResponse>) {
    // The end of the call wakes the watcher as a change does: under the
    // registry's lock, so that it cannot come between the watcher's look
    // at the call and its wait.
    let woken = registry.clone();
    sink.on_cancel(move |_| {
        let _state = woken.lock();
        woken.changed.notify_all();
    });
    let mut sent: Option<ServingStatus> = None;
    loop {
        let (status, shut_down) = {
            let mut state = registry.lock();
            loop {
                if sink.is_cancelled() {
                    return;
                }
                let status = state.watched(service);
                if sent != Some(status) || state.shut_down {
                    break (status, state.shut_down);
                }
                state = registry
                    .changed
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
            }
        };
        if sent != Some(status) {
            if sink.send(&response(status)).is_err() {
                return; // the call has ended
            }
            sent = Some(status);
        }
        if shut_down {
            sink.finish(Ok(()));
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_set_cleared_and_listed() {
        let (health, _service) = health_reporter();
        assert_eq!(health.statuses().len(), 1);
        health.set_serving("a.A");
        health.set_status("b.B", ServingStatus::Unknown);
        health.set_not_serving("a.A");
        assert_eq!(health.status("a.A"), Some(ServingStatus::NotServing));
        assert_eq!(health.status("b.B"), Some(ServingStatus::Unknown));
        health.set_status("b.B", ServingStatus::ServiceUnknown);
        assert_eq!(health.status("b.B"), None);
        let all: Vec<_> = health.statuses().into_iter().collect();
        assert_eq!(
            all,
            [
                (String::new(), ServingStatus::Serving),
                ("a.A".to_owned(), ServingStatus::NotServing)
            ]
        );
    }

    #[test]
    fn check_and_list_answer_from_the_statuses() {
        let (health, _service) = health_reporter();
        let service = HealthService {
            registry: health.registry.clone(),
        };
        health.set_not_serving("a.A");
        let ask = |name: &str| {
            service.check(HealthCheckRequest {
                service: name.to_owned(),
            })
        };
        assert_eq!(ask("").unwrap().status(), ServingStatus::Serving);
        assert_eq!(ask("a.A").unwrap().status(), ServingStatus::NotServing);
        let err = ask("b.B").unwrap_err();
        assert_eq!(err.code(), pajamax::Code::NotFound);
        let list = service.list(HealthListRequest {}).unwrap();
        assert_eq!(list.statuses.len(), 2);
        assert_eq!(list.statuses["a.A"].status(), ServingStatus::NotServing);
    }

    #[test]
    fn list_answers_at_most_the_maximum() {
        let (health, _service) = health_reporter();
        let service = HealthService {
            registry: health.registry.clone(),
        };
        // With the server as a whole, MAX_LISTED statuses: all listed.
        for n in 1..MAX_LISTED {
            health.set_serving(&format!("s.S{n}"));
        }
        let list = service.list(HealthListRequest {}).unwrap();
        assert_eq!(list.statuses.len(), MAX_LISTED);
        // One more: refused, as the protocol says.
        health.set_serving("s.More");
        let err = service.list(HealthListRequest {}).unwrap_err();
        assert_eq!(err.code(), pajamax::Code::ResourceExhausted);
        health.clear_status("s.More");
        assert_eq!(
            service.list(HealthListRequest {}).unwrap().statuses.len(),
            MAX_LISTED
        );
    }

    #[test]
    fn shutdown_is_final_and_does_not_wait_without_watchers() {
        let (health, _service) = health_reporter();
        health.set_serving("a.A");
        let started = Instant::now();
        health.shutdown();
        assert!(started.elapsed() < SHUTDOWN_WAIT);
        assert!(health.is_shut_down());
        health.set_serving("a.A");
        health.set_serving("c.C");
        assert_eq!(health.status("a.A"), Some(ServingStatus::NotServing));
        assert_eq!(health.status(""), Some(ServingStatus::NotServing));
        assert_eq!(health.status("c.C"), None);
    }

    #[test]
    fn serve_marks_every_service_of_the_builder() {
        struct Named;
        impl pajamax::Service for Named {
            fn name(&self) -> &'static str {
                "test.Named"
            }
            fn methods(&self) -> &'static [pajamax::Method] {
                &[]
            }
        }
        let (health, builder) = serve(pajamax::Server::builder().add_service(Named));
        let names: Vec<_> = health.statuses().into_keys().collect();
        assert_eq!(names, ["", SERVICE_NAME, "test.Named"]);
        assert!(builder.service_names().contains(&SERVICE_NAME));
    }
}
