//! Routing a request's `:path` to a service method.

use crate::fast_hash::BuildPathHasher;
use crate::grpc::intercept::{CallInfo, Hooks};
use crate::grpc::service::{MethodKind, Service};
use std::collections::HashMap;
use std::sync::Arc;

/// A method found for a `:path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Index of the service.
    pub service: u32,
    /// Index of the method within the service.
    pub method: u32,
    /// How the method's messages flow.
    pub kind: MethodKind,
}

/// The services of a server and the paths of their methods.
///
/// Lookups take the path as bytes straight from the decoded header, so
/// resolving a route allocates nothing.
#[derive(Default, Clone)]
pub struct Router {
    services: Vec<Arc<dyn Service>>,
    routes: HashMap<Box<[u8]>, Route, BuildPathHasher>,
    hooks: Hooks,
}

impl Router {
    /// An empty router.
    pub fn new() -> Router {
        Router::default()
    }

    /// Adds every method of `service` under `/{name}/{method}`. A later
    /// service with the same name replaces the earlier one, in its place.
    pub fn add(&mut self, service: Arc<dyn Service>) {
        let earlier = self
            .services
            .iter()
            .position(|earlier| earlier.name() == service.name());
        let index = earlier.unwrap_or(self.services.len());
        // The earlier service's methods the later one does not have go too.
        self.routes
            .retain(|_, route| route.service as usize != index);
        for (method, described) in service.methods().iter().enumerate() {
            let path = format!("/{}/{}", service.name(), described.name).into_bytes();
            self.routes.insert(
                path.into_boxed_slice(),
                Route {
                    service: index as u32,
                    method: method as u32,
                    kind: described.kind,
                },
            );
        }
        match earlier {
            Some(_) => self.services[index] = service,
            None => self.services.push(service),
        }
    }

    /// The route for `path`, if a service has it.
    pub fn route(&self, path: &[u8]) -> Option<Route> {
        self.routes.get(path).copied()
    }

    /// The service at `index`.
    pub fn service(&self, index: u32) -> &dyn Service {
        &*self.services[index as usize]
    }

    /// The hooks run around every call.
    pub(crate) fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    pub(crate) fn hooks_mut(&mut self) -> &mut Hooks {
        &mut self.hooks
    }

    /// The service and method names of a route.
    pub(crate) fn call_info(&self, route: Route) -> CallInfo<'static> {
        let service = &self.services[route.service as usize];
        CallInfo {
            service: service.name(),
            method: service.methods()[route.method as usize].name,
            kind: route.kind,
        }
    }

    /// The names of the services, in the order they were added, each once:
    /// a service that replaced an earlier one of its name takes its place.
    pub fn service_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.services.iter().map(|service| service.name())
    }

    /// Whether a service named `name` is registered.
    pub fn has_service(&self, name: &[u8]) -> bool {
        self.services.iter().any(|s| s.name().as_bytes() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::service::Method;

    struct Named(&'static [Method]);

    impl Service for Named {
        fn name(&self) -> &'static str {
            "demo.S"
        }

        fn methods(&self) -> &'static [Method] {
            self.0
        }
    }

    #[test]
    fn a_later_service_of_the_same_name_replaces_every_route() {
        const OLD: [Method; 2] = [Method::unary("Kept"), Method::unary("Gone")];
        const NEW: [Method; 1] = [Method::unary("Kept")];
        let mut router = Router::new();
        router.add(Arc::new(Named(&OLD)));
        router.add(Arc::new(Named(&NEW)));
        // The route leads to the later service (the only one of its name).
        let kept = router.route(b"/demo.S/Kept").unwrap();
        assert_eq!(router.service(kept.service).methods(), &NEW);
        assert_eq!(router.route(b"/demo.S/Gone"), None);
    }

    #[test]
    fn a_replaced_service_is_named_once() {
        struct Other;
        impl Service for Other {
            fn name(&self) -> &'static str {
                "demo.Other"
            }

            fn methods(&self) -> &'static [Method] {
                &[]
            }
        }
        const METHODS: [Method; 1] = [Method::unary("Kept")];
        let mut router = Router::new();
        router.add(Arc::new(Named(&METHODS)));
        router.add(Arc::new(Other));
        router.add(Arc::new(Named(&METHODS)));
        let names: Vec<&str> = router.service_names().collect();
        assert_eq!(names, ["demo.S", "demo.Other"]);
    }
}
