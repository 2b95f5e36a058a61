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

use crate::ident;
use model::ServiceCode;
use prost_build::Service;
use std::collections::{BTreeSet, HashMap};

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

/// Where the encoded file descriptor set of a compile run was written, as
/// the generated `FILE_DESCRIPTOR_SET` constant finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DescriptorSetPlace {
    /// In the directory of the generated code: `include_bytes!("<file>")`,
    /// relative to the generated file.
    NextToCode,
    /// In Cargo's `OUT_DIR`: `include_bytes!(concat!(env!("OUT_DIR"),
    /// "/<file>"))`, whichever directory the code itself went to.
    OutDir,
}

/// The name of the file holding the encoded file descriptor set for the
/// generated code of `package` (`_` stands for no package, as in prost).
pub(crate) fn descriptor_set_file_name(package: &str) -> String {
    let package = if package.is_empty() { "_" } else { package };
    format!("{package}.file_descriptor_set.bin")
}

/// Writes a server module for every service prost-build meets.
#[derive(Debug, Default)]
pub(crate) struct PajamaxGenerator {
    modes: Modes,
    /// Where the run's descriptor set is, for `FILE_DESCRIPTOR_SET`; none
    /// when it was not written.
    descriptor_set: Option<DescriptorSetPlace>,
    /// The server modules written so far, by package: the service each
    /// one is for (`package.Service`).
    modules: HashMap<String, HashMap<String, String>>,
}

impl PajamaxGenerator {
    pub(crate) fn new(modes: Modes) -> PajamaxGenerator {
        PajamaxGenerator {
            modes,
            descriptor_set: None,
            modules: HashMap::new(),
        }
    }

    /// The code of `service`, and what it could not serve. A service whose
    /// server module is that of a service of its package generated before
    /// (`FooBar` and `Foo_Bar` both give `foo_bar_server`) gets a
    /// `compile_error!` naming both before its module, and a warning.
    pub(crate) fn service_code(&mut self, service: &Service) -> Generated {
        let full_name = full_service_name(service);
        let mut generated = generate_service(service, self.modes.mode_of(&full_name));
        if model::unnamed_item(service).is_some() {
            return generated; // no module
        }
        let module = ident::server_module_name(&service.proto_name);
        let modules = self.modules.entry(service.package.clone()).or_default();
        let Some(first) = modules.get(&module) else {
            modules.insert(module, full_name);
            return generated;
        };
        generated.warnings.push(format!(
            "pajamax-build: {full_name}: its module `{module}` is also that of {first}; the \
             generated code does not compile"
        ));
        let error = format!(
            "pajamax-build: the services {first} and {full_name} both map to the module \
             `{module}`"
        );
        let error = quote::quote!(::core::compile_error!(#error););
        generated.code = format!("{error}\n{}", generated.code);
        generated
    }

    /// Emits a `FILE_DESCRIPTOR_SET` constant into every package with a
    /// service, reading the set from `place`.
    pub(crate) fn with_descriptor_set(mut self, place: DescriptorSetPlace) -> PajamaxGenerator {
        self.descriptor_set = Some(place);
        self
    }
}

impl prost_build::ServiceGenerator for PajamaxGenerator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        let generated = self.service_code(&service);
        for warning in &generated.warnings {
            println!("cargo:warning={warning}");
        }
        buf.push_str(&generated.code);
    }

    fn finalize_package(&mut self, package: &str, buf: &mut String) {
        if let Some(place) = self.descriptor_set {
            buf.push_str(&descriptor_set_const(package, place));
        }
    }
}

/// The `FILE_DESCRIPTOR_SET` constant of `package`'s module.
pub(crate) fn descriptor_set_const(package: &str, place: DescriptorSetPlace) -> String {
    let file = descriptor_set_file_name(package);
    let path = match place {
        DescriptorSetPlace::NextToCode => format!("{file:?}"),
        DescriptorSetPlace::OutDir => {
            format!("concat!(env!(\"OUT_DIR\"), {:?})", format!("/{file}"))
        }
    };
    format!(
        "/// The encoded `google.protobuf.FileDescriptorSet` of every proto file\n\
         /// compiled in the same `pajamax-build` run as this package, the files\n\
         /// they import included (well-known types too), with their source info:\n\
         /// what server reflection serves, as in\n\
         /// `pajamax_reflection::serve(builder, &[FILE_DESCRIPTOR_SET])`.\n\
         #[allow(dead_code)]\n\
         pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!({path});\n"
    )
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

/// Writes the server module of `service` in `mode`; for a service whose
/// name gives no Rust identifier, a warning and only a comment that says
/// so.
///
/// The comment is not for nothing: prost-build drops the code of a file
/// that generated none, and then fails on the package of a file that has a
/// service but no code (a file holding only such a service).
pub(crate) fn generate_service(service: &Service, mode: ServiceMode) -> Generated {
    if let Some(name) = model::unnamed_item(service) {
        let full_name = full_service_name(service);
        return Generated {
            code: format!(
                "// The service `{full_name}` is not generated: its name gives no Rust identifier.\n"
            ),
            warnings: vec![format!(
                "pajamax-build: {full_name}: its name gives no Rust identifier (`{name}`); the \
                 service is not generated, its calls answer UNIMPLEMENTED"
            )],
        };
    }
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
/// `()` (what prost maps `google.protobuf.Empty` to), the primitive types
/// prost maps the wrappers `google.protobuf.BoolValue`, `Int32Value`, ...
/// to, and absolute paths such as `::prost_types::Timestamp` or
/// `crate::common::Id` stay as they are.
pub(crate) fn type_path(prost_path: &str) -> String {
    const PRIMITIVES: [&str; 8] = ["()", "bool", "i32", "i64", "u32", "u64", "f32", "f64"];
    if PRIMITIVES.contains(&prost_path)
        || prost_path.starts_with("::")
        || prost_path.starts_with("crate::")
    {
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
