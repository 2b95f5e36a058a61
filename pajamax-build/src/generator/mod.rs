//! The `prost_build::ServiceGenerator` that writes pajamax server code.
//!
//! Each service becomes one module, built with `quote!` from a template per
//! kind of method ([`local`] and [`dispatch`]) inside a [`skeleton`] both
//! modes share, then formatted with `prettyplease`. What the code cannot
//! serve is reported as a `cargo:warning`.

mod dispatch;
mod local;
mod model;
mod skeleton;
#[cfg(test)]
mod tests;

use model::ServiceCode;
use prost_build::Service;
use std::collections::BTreeSet;

/// How the code for a service serves its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ServiceMode {
    /// Handlers run on the worker thread that received the request.
    #[default]
    Local,
    /// Decoded requests are sent to threads the application owns, and
    /// answered from there through the call's `Responder` or `Sink`.
    Dispatch,
}

/// Which mode each service is generated in: a mode for every service, and
/// services named to be generated otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Modes {
    /// The mode of services not named below.
    pub(crate) default: ServiceMode,
    /// Fully qualified names of services generated in local mode.
    pub(crate) local: BTreeSet<String>,
    /// Fully qualified names of services generated in dispatch mode.
    pub(crate) dispatch: BTreeSet<String>,
}

impl Modes {
    /// The mode of the service named `full_name` (`package.Service`).
    pub(crate) fn mode_of(&self, full_name: &str) -> ServiceMode {
        if self.dispatch.contains(full_name) {
            ServiceMode::Dispatch
        } else if self.local.contains(full_name) {
            ServiceMode::Local
        } else {
            self.default
        }
    }
}

/// Writes a server module for every service prost-build meets.
#[derive(Debug, Default)]
pub(crate) struct PajamaxGenerator {
    modes: Modes,
}

impl PajamaxGenerator {
    pub(crate) fn new(modes: Modes) -> PajamaxGenerator {
        PajamaxGenerator { modes }
    }
}

impl prost_build::ServiceGenerator for PajamaxGenerator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        let mode = self.modes.mode_of(&full_service_name(&service));
        let generated = generate_service(&service, mode);
        for warning in &generated.warnings {
            println!("cargo:warning={warning}");
        }
        buf.push_str(&generated.code);
    }
}

/// The code of one service, and what it could not serve.
#[derive(Debug)]
pub(crate) struct Generated {
    /// The server module, formatted.
    pub(crate) code: String,
    /// One line per problem, for `cargo:warning=`: `pajamax-build:
    /// package.Service/Method: what`.
    pub(crate) warnings: Vec<String>,
}

/// Writes the server module of `service` in `mode`.
pub(crate) fn generate_service(service: &Service, mode: ServiceMode) -> Generated {
    let code = ServiceCode::new(service);
    let (tokens, problems) = match mode {
        ServiceMode::Local => local::generate(&code),
        ServiceMode::Dispatch => dispatch::generate(&code),
    };
    let mut all = code.problems;
    all.extend(problems);
    let file = syn::parse2::<syn::File>(tokens)
        .unwrap_or_else(|err| panic!("pajamax-build wrote code that does not parse: {err}"));
    Generated {
        code: prettyplease::unparse(&file),
        warnings: all.warnings,
    }
}

/// A type path from prost-build (relative to the package module) as seen from
/// the server module one level below it.
///
/// `()` (what prost maps `google.protobuf.Empty` to) and absolute paths such
/// as `::prost_types::Timestamp` or `crate::common::Id` stay as they are.
pub(crate) fn type_path(prost_path: &str) -> String {
    if prost_path == "()" || prost_path.starts_with("::") || prost_path.starts_with("crate::") {
        prost_path.to_owned()
    } else {
        format!("super::{prost_path}")
    }
}

/// The fully qualified service name: `package.Service`, or `Service` alone
/// outside any package.
pub(crate) fn full_service_name(service: &Service) -> String {
    if service.package.is_empty() {
        service.proto_name.clone()
    } else {
        format!("{}.{}", service.package, service.proto_name)
    }
}
