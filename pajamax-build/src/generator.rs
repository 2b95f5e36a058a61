//! The `prost_build::ServiceGenerator` that writes pajamax server code.

use crate::ident;
use prost_build::{Comments, Method, Service};
use std::collections::{BTreeSet, HashSet};

/// How the code for a service serves its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ServiceMode {
    /// Handlers run on the worker thread that received the request.
    #[default]
    Local,
    /// Decoded requests are sent to threads the application owns, and
    /// answered from there through the call's `Responder`.
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
        match self.modes.mode_of(&full_service_name(&service)) {
            ServiceMode::Local => generate_local(&service, buf),
            ServiceMode::Dispatch => generate_dispatch(&service, buf),
        }
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

/// Writes the server module of `service`, for handlers that run on the
/// worker thread that read the request.
pub(crate) fn generate_local(service: &Service, buf: &mut String) {
    let code = ServiceCode::new(service);
    let mut out = Writer { buf, depth: 0 };
    code.write_module(&mut out);
}

/// Writes the server module of `service`, for requests that are sent to
/// threads the application owns and answered from there.
pub(crate) fn generate_dispatch(service: &Service, buf: &mut String) {
    let code = ServiceCode::new(service);
    let mut out = Writer { buf, depth: 0 };
    code.write_dispatch_module(&mut out);
}

/// Appends indented lines of code.
struct Writer<'a> {
    buf: &'a mut String,
    depth: usize,
}

impl Writer<'_> {
    /// One line at the current indentation; an empty `text` gives an empty
    /// line.
    fn line(&mut self, text: impl AsRef<str>) {
        let text = text.as_ref();
        if !text.is_empty() {
            for _ in 0..self.depth {
                self.buf.push_str("    ");
            }
            self.buf.push_str(text);
        }
        self.buf.push('\n');
    }

    /// A line that opens a block; what follows is indented one more level.
    fn open(&mut self, text: impl AsRef<str>) {
        self.line(text);
        self.depth += 1;
    }

    /// A line that closes a block, one level less indented.
    fn close(&mut self, text: impl AsRef<str>) {
        self.depth -= 1;
        self.line(text);
    }

    /// Doc comment lines, one per line of `text`; empty lines stay empty
    /// doc lines.
    fn doc(&mut self, text: &str) {
        for line in text.lines() {
            if line.is_empty() {
                self.line("///");
            } else {
                self.line(format!("/// {line}"));
            }
        }
    }

    /// The proto comments as doc lines, then an empty doc line when there
    /// were any, so that generated text follows as its own paragraph.
    fn proto_doc(&mut self, comments: &Comments) {
        if comments.leading.is_empty() && comments.trailing.is_empty() {
            return;
        }
        // Detached comments are not about this item; leave them out.
        let item_comments = Comments {
            leading_detached: Vec::new(),
            leading: comments.leading.clone(),
            trailing: comments.trailing.clone(),
        };
        let depth = u8::try_from(self.depth).unwrap_or(u8::MAX);
        item_comments.append_with_indent(depth, self.buf);
        self.line("///");
    }
}

/// A proto method as the generated code sees it.
struct MethodCode<'a> {
    proto: &'a Method,
    /// `say_hello`, or `r#type` for a keyword.
    name: String,
    /// `say_hello_with_context`.
    context_name: String,
    /// `SayHello`: the variant of the request enum in dispatch mode.
    variant: String,
    /// The request type as seen from the server module.
    input: String,
    /// The answer type as seen from the server module.
    output: String,
}

impl MethodCode<'_> {
    fn is_streaming(&self) -> bool {
        self.proto.client_streaming || self.proto.server_streaming
    }

    /// The argument that passes the decoded request on: unit is written as a
    /// literal, which clippy prefers to a unit variable.
    fn request_argument(&self) -> &'static str {
        if self.input == "()" {
            "()"
        } else {
            "request"
        }
    }

    /// A doc link to the plain trait method; raw identifiers are left
    /// unlinked, as doc links do not take them everywhere.
    fn doc_link(&self) -> String {
        match self.name.strip_prefix("r#") {
            Some(bare) => format!("`{bare}`"),
            None => format!("[`{0}`](Self::{0})", self.name),
        }
    }
}

/// Everything the server module of one service is written from.
struct ServiceCode<'a> {
    service: &'a Service,
    /// `helloworld.Greeter`.
    full_name: String,
    /// `greeter_server`.
    module: String,
    /// `Greeter`.
    trait_name: &'a str,
    /// `GreeterServer`.
    server_name: String,
    /// Every method, in proto order.
    methods: Vec<MethodCode<'a>>,
}

/// What `call` answers for a method number out of range.
const NO_SUCH_METHOD: &str = "Err(pajamax::Status::unimplemented(format!(\"{SERVICE_NAME} has no method number {method}\")))";

impl<'a> ServiceCode<'a> {
    fn new(service: &'a Service) -> ServiceCode<'a> {
        let methods = service
            .methods
            .iter()
            .map(|method| MethodCode {
                proto: method,
                name: ident::method_name(&method.proto_name),
                context_name: ident::context_method_name(&method.proto_name),
                variant: ident::variant_name(&method.proto_name),
                input: type_path(&method.input_type),
                output: type_path(&method.output_type),
            })
            .collect();
        ServiceCode {
            service,
            full_name: full_service_name(service),
            module: ident::server_module_name(&service.proto_name),
            trait_name: &service.name,
            server_name: format!("{}Server", service.name),
            methods,
        }
    }

    fn unary(&self) -> impl Iterator<Item = &MethodCode<'a>> {
        self.methods.iter().filter(|m| !m.is_streaming())
    }

    fn streaming(&self) -> impl Iterator<Item = &MethodCode<'a>> {
        self.methods.iter().filter(|m| m.is_streaming())
    }

    fn write_module(&self, out: &mut Writer<'_>) {
        let Self {
            full_name,
            module,
            trait_name,
            server_name,
            ..
        } = self;
        out.doc(&format!(
            "Server code for the `{full_name}` service: the [`{module}::{trait_name}`] trait to\n\
             implement and the [`{module}::{server_name}`] that serves an implementation."
        ));
        out.open(format!("pub mod {module} {{"));
        self.write_name_clashes(out);
        self.write_trait(out);
        out.line("");
        self.write_names(out);
        out.line("");
        self.write_server(out);
        out.line("");
        self.write_service_impl(out);
        out.close("}");
    }

    /// Two proto methods whose Rust names meet would give a trait that does
    /// not compile; this says why instead of leaving the user with a puzzle.
    fn write_name_clashes(&self, out: &mut Writer<'_>) {
        let mut seen = HashSet::new();
        for method in self.unary() {
            for name in [&method.name, &method.context_name] {
                if !seen.insert(name.as_str()) {
                    out.line(format!(
                        "::core::compile_error!(\"pajamax-build: two methods of {} map to the Rust name `{name}`\");",
                        self.full_name
                    ));
                }
            }
        }
    }

    fn write_trait(&self, out: &mut Writer<'_>) {
        let Self {
            full_name,
            trait_name,
            server_name,
            ..
        } = self;
        out.proto_doc(&self.service.comments);
        out.doc(&format!(
            "The handlers of the `{full_name}` service. Implement the methods you serve\n\
             and add the implementation to a server wrapped in [`{server_name}`].\n\
             \n\
             Each method comes in two forms: override the plain one, or the one ending in\n\
             `_with_context` to see the call's [`Context`](pajamax::Context). A method left\n\
             alone answers `UNIMPLEMENTED`."
        ));
        let streaming: Vec<String> = self
            .streaming()
            .map(|m| format!("`{}`", m.proto.proto_name))
            .collect();
        if !streaming.is_empty() {
            out.doc(&format!(
                "\nStreaming methods have no handler yet and answer `UNIMPLEMENTED`: {}.",
                streaming.join(", ")
            ));
        }
        out.open(format!("pub trait {trait_name}: Send + Sync + 'static {{"));
        for (i, method) in self.unary().enumerate() {
            if i > 0 {
                out.line("");
            }
            self.write_handlers(out, method);
        }
        out.close("}");
    }

    /// The two trait methods of a unary method.
    fn write_handlers(&self, out: &mut Writer<'_>, method: &MethodCode<'_>) {
        let full_name = &self.full_name;
        let MethodCode {
            proto,
            name,
            context_name,
            input,
            output,
            ..
        } = method;
        let proto_name = &proto.proto_name;
        let errors = "\n\
            # Errors\n\
            \n\
            The [`Status`](pajamax::Status) to end the call with instead of an answer.";

        out.proto_doc(&proto.comments);
        out.doc(&format!(
            "Handles `{full_name}/{proto_name}`. The default answers `UNIMPLEMENTED`.\n{errors}"
        ));
        out.line("#[allow(unused_variables)]");
        out.open(format!(
            "fn {name}(&self, request: {input}) -> ::core::result::Result<{output}, pajamax::Status> {{"
        ));
        out.line(format!(
            "Err(pajamax::Status::unimplemented(\"{full_name}/{proto_name} is not implemented\"))"
        ));
        out.close("}");
        out.line("");

        out.doc(&format!(
            "Handles `{full_name}/{proto_name}` with the call's [`Context`](pajamax::Context):\n\
             its request metadata, deadline and peer, and the metadata to send back.\n\
             The default ignores the context and calls {}.\n{errors}",
            method.doc_link()
        ));
        out.line("#[allow(unused_variables)]");
        out.open(format!("fn {context_name}("));
        out.line("&self,");
        out.line("ctx: &mut pajamax::Context<'_>,");
        out.line(format!("request: {input},"));
        out.close(format!(
            ") -> ::core::result::Result<{output}, pajamax::Status> {{"
        ));
        out.depth += 1;
        out.line(format!("self.{name}({})", method.request_argument()));
        out.close("}");
    }

    fn write_names(&self, out: &mut Writer<'_>) {
        let full_name = &self.full_name;
        out.doc(&format!(
            "The fully qualified name of the service, `{full_name}`."
        ));
        out.line(format!("pub const SERVICE_NAME: &str = \"{full_name}\";"));
        out.line("");
        out.doc(
            "The proto names of the service's methods, in proto order; a method's\n\
             index here is the number [`pajamax::Service::call`] receives.",
        );
        let quoted: Vec<String> = self
            .methods
            .iter()
            .map(|m| format!("\"{}\"", m.proto.proto_name))
            .collect();
        out.line(format!(
            "pub const METHODS: &[&str] = &[{}];",
            quoted.join(", ")
        ));
    }

    fn write_server(&self, out: &mut Writer<'_>) {
        let Self {
            trait_name,
            server_name,
            ..
        } = self;
        out.doc(&format!(
            "Serves an implementation of [`{trait_name}`]: add it to a pajamax server."
        ));
        out.open(format!("pub struct {server_name}<T> {{"));
        out.line("inner: ::std::sync::Arc<T>,");
        out.close("}");
        out.line("");

        out.open(format!("impl<T: {trait_name}> {server_name}<T> {{"));
        out.doc("Serves `inner`.");
        out.open("pub fn new(inner: T) -> Self {");
        out.line("Self::from_arc(::std::sync::Arc::new(inner))");
        out.close("}");
        out.line("");
        out.doc("Serves an `inner` that is shared with other code.");
        out.open("pub const fn from_arc(inner: ::std::sync::Arc<T>) -> Self {");
        out.line("Self { inner }");
        out.close("}");
        out.close("}");
        out.line("");

        out.open(format!(
            "impl<T> ::core::clone::Clone for {server_name}<T> {{"
        ));
        out.open("fn clone(&self) -> Self {");
        out.open("Self {");
        out.line("inner: ::std::sync::Arc::clone(&self.inner),");
        out.close("}");
        out.close("}");
        out.close("}");
        out.line("");

        out.open(format!(
            "impl<T> ::core::fmt::Debug for {server_name}<T> {{"
        ));
        out.open("fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {");
        out.line(format!(
            "f.debug_struct(\"{server_name}\").finish_non_exhaustive()"
        ));
        out.close("}");
        out.close("}");
    }

    fn write_service_impl(&self, out: &mut Writer<'_>) {
        let Self {
            trait_name,
            server_name,
            ..
        } = self;
        out.open(format!(
            "impl<T: {trait_name}> pajamax::Service for {server_name}<T> {{"
        ));
        out.open("fn name(&self) -> &'static str {");
        out.line("SERVICE_NAME");
        out.close("}");
        out.line("");
        out.open("fn methods(&self) -> &'static [&'static str] {");
        out.line("METHODS");
        out.close("}");
        out.line("");

        // Without a unary method, nothing uses the call's context, request
        // or reply.
        let unused = if self.unary().next().is_none() {
            "_"
        } else {
            ""
        };
        out.open("fn call(");
        out.line("&self,");
        out.line("method: usize,");
        out.line(format!("{unused}ctx: &mut pajamax::Context<'_>,"));
        out.line(format!("{unused}request: &[u8],"));
        out.line(format!("{unused}reply: &mut pajamax::Reply<'_>,"));
        out.close(") -> ::core::result::Result<(), pajamax::Status> {");
        out.depth += 1;
        if self.methods.is_empty() {
            out.line(NO_SUCH_METHOD);
        } else {
            out.open("match method {");
            for (index, method) in self.methods.iter().enumerate() {
                self.write_route(out, index, method);
            }
            out.line(format!("_ => {NO_SUCH_METHOD},"));
            out.close("}");
        }
        out.close("}");
        out.close("}");
    }

    /// The `match` arm of `call` for method number `index`.
    fn write_route(&self, out: &mut Writer<'_>, index: usize, method: &MethodCode<'_>) {
        if method.is_streaming() {
            out.line(format!(
                "{index} => Err(pajamax::Status::unimplemented(\"{}/{}: streaming calls are not supported yet\")),",
                self.full_name, method.proto.proto_name
            ));
            return;
        }
        let context_name = &method.context_name;
        let argument = method.request_argument();
        out.open(format!("{index} => {{"));
        if method.input == "()" {
            out.line("pajamax::decode_request::<()>(request)?;");
        } else {
            out.line(format!(
                "let request: {} = pajamax::decode_request(request)?;",
                method.input
            ));
        }
        if method.output == "()" {
            out.line(format!("self.inner.{context_name}(ctx, {argument})?;"));
            out.line("reply.encode(&());");
        } else {
            out.line(format!(
                "let answer = self.inner.{context_name}(ctx, {argument})?;"
            ));
            out.line("reply.encode(&answer);");
        }
        out.line("Ok(())");
        out.close("}");
    }
}

/// The names of the items a dispatch-mode service module holds.
struct DispatchNames {
    /// `DictStoreRequest`.
    request: String,
    /// `DictStoreCall`.
    call: String,
    /// `DictStoreShard`.
    shard: String,
    /// `DictStoreDispatch`.
    dispatch: String,
}

impl ServiceCode<'_> {
    fn dispatch_names(&self) -> DispatchNames {
        let name = self.trait_name;
        DispatchNames {
            request: format!("{name}Request"),
            call: format!("{name}Call"),
            shard: format!("{name}Shard"),
            dispatch: format!("{name}Dispatch"),
        }
    }

    fn write_dispatch_module(&self, out: &mut Writer<'_>) {
        let Self {
            full_name, module, ..
        } = self;
        let DispatchNames {
            shard, dispatch, ..
        } = self.dispatch_names();
        out.doc(&format!(
            "Server code for the `{full_name}` service in dispatch mode: calls are sent to\n\
             threads the application owns. Implement [`{module}::{shard}`] for the state a\n\
             thread owns and [`{module}::{dispatch}`] to choose the thread of each call."
        ));
        out.open(format!("pub mod {module} {{"));
        self.write_dispatch_name_clashes(out);
        self.write_names(out);
        out.line("");
        self.write_request_enum(out);
        out.line("");
        self.write_call(out);
        out.line("");
        self.write_shard_trait(out);
        out.line("");
        self.write_dispatch_trait(out);
        out.line("");
        self.write_dispatch_server(out);
        out.line("");
        self.write_dispatch_service_impl(out);
        out.close("}");
    }

    /// As [`ServiceCode::write_name_clashes`], for the shard methods and the
    /// request variants.
    fn write_dispatch_name_clashes(&self, out: &mut Writer<'_>) {
        let mut methods = HashSet::new();
        let mut variants = HashSet::new();
        for method in self.unary() {
            for (seen, name) in [
                (&mut methods, &method.name),
                (&mut variants, &method.variant),
            ] {
                if !seen.insert(name.as_str()) {
                    out.line(format!(
                        "::core::compile_error!(\"pajamax-build: two methods of {} map to the Rust name `{name}`\");",
                        self.full_name
                    ));
                }
            }
        }
    }

    fn write_request_enum(&self, out: &mut Writer<'_>) {
        let full_name = &self.full_name;
        let DispatchNames { request, .. } = self.dispatch_names();
        out.doc(&format!(
            "A decoded `{full_name}` request: one variant per unary method."
        ));
        out.line("#[derive(Debug)]");
        out.line("#[allow(clippy::large_enum_variant)]");
        out.open(format!("pub enum {request} {{"));
        for method in self.unary() {
            out.doc(&format!(
                "A `{full_name}/{}` request.",
                method.proto.proto_name
            ));
            out.line(format!("{}({}),", method.variant, method.input));
        }
        out.close("}");
    }

    fn write_call(&self, out: &mut Writer<'_>) {
        let full_name = &self.full_name;
        let DispatchNames {
            request,
            call,
            shard,
            ..
        } = self.dispatch_names();
        out.doc(&format!(
            "A `{full_name}` call on its way to the thread that serves it: the decoded\n\
             request and where its answer goes. A call dropped without an answer is\n\
             answered `INTERNAL`."
        ));
        out.line("#[derive(Debug)]");
        out.open(format!("pub struct {call} {{"));
        out.doc("The decoded request.");
        out.line(format!("pub request: {request},"));
        out.line("responder: pajamax::Responder,");
        out.close("}");
        out.line("");

        out.open(format!("impl {call} {{"));
        out.doc(
            "Runs the handler of `shard` that the request is for and answers the call\n\
             with its result.",
        );
        let empty = self.unary().next().is_none();
        let shard_arg = if empty { "_shard" } else { "shard" };
        out.open(format!(
            "pub fn handle<S: {shard} + ?Sized>(self, {shard_arg}: &mut S) {{"
        ));
        if empty {
            out.line("match self.request {}");
        } else {
            out.line("let Self { request, responder } = self;");
            out.open("match request {");
            for method in self.unary() {
                let (pattern, argument) = if method.input == "()" {
                    ("()", "()")
                } else {
                    ("request", "request")
                };
                out.line(format!(
                    "{request}::{}({pattern}) => responder.respond(shard.{}({argument})),",
                    method.variant, method.name
                ));
            }
            out.close("}");
        }
        out.close("}");
        out.line("");
        out.doc("Metadata sent with the trailers of the answer.");
        out.open("pub fn trailers_mut(&mut self) -> &mut pajamax::grpc::metadata::Metadata {");
        out.line("self.responder.trailers_mut()");
        out.close("}");
        out.line("");
        out.doc(
            "The request and its [`Responder`](pajamax::Responder), to answer the call\n\
             some other way than with [`handle`](Self::handle).",
        );
        out.open(format!(
            "pub fn into_parts(self) -> ({request}, pajamax::Responder) {{"
        ));
        out.line("(self.request, self.responder)");
        out.close("}");
        out.close("}");
    }

    fn write_shard_trait(&self, out: &mut Writer<'_>) {
        let full_name = &self.full_name;
        let DispatchNames { call, shard, .. } = self.dispatch_names();
        out.proto_doc(&self.service.comments);
        out.doc(&format!(
            "The handlers of the `{full_name}` service in dispatch mode, run by a thread\n\
             that owns its state: they take `&mut self`, so no lock is needed. Pass the\n\
             state to [`{call}::handle`]. A method left alone answers `UNIMPLEMENTED`."
        ));
        let streaming: Vec<String> = self
            .streaming()
            .map(|m| format!("`{}`", m.proto.proto_name))
            .collect();
        if !streaming.is_empty() {
            out.doc(&format!(
                "\nStreaming methods have no handler yet and answer `UNIMPLEMENTED`: {}.",
                streaming.join(", ")
            ));
        }
        out.open(format!("pub trait {shard} {{"));
        for (i, method) in self.unary().enumerate() {
            if i > 0 {
                out.line("");
            }
            let proto_name = &method.proto.proto_name;
            out.proto_doc(&method.proto.comments);
            out.doc(&format!(
                "Handles `{full_name}/{proto_name}`. The default answers `UNIMPLEMENTED`.\n\
                 \n\
                 # Errors\n\
                 \n\
                 The [`Status`](pajamax::Status) to end the call with instead of an answer."
            ));
            out.line("#[allow(unused_variables)]");
            out.open(format!(
                "fn {}(&mut self, request: {}) -> ::core::result::Result<{}, pajamax::Status> {{",
                method.name, method.input, method.output
            ));
            out.line(format!(
                "Err(pajamax::Status::unimplemented(\"{full_name}/{proto_name} is not implemented\"))"
            ));
            out.close("}");
        }
        out.close("}");
    }

    fn write_dispatch_trait(&self, out: &mut Writer<'_>) {
        let full_name = &self.full_name;
        let DispatchNames {
            request,
            call,
            dispatch,
            ..
        } = self.dispatch_names();
        out.doc(&format!(
            "Chooses the thread that serves each `{full_name}` call, by the queue it is\n\
             sent to. A full queue answers the call `RESOURCE_EXHAUSTED`, a queue whose\n\
             receiver is gone `UNAVAILABLE`."
        ));
        out.open(format!("pub trait {dispatch}: Send + Sync + 'static {{"));
        out.doc("The queue of the thread that serves `request`.");
        out.line(format!(
            "fn dispatch_to(&self, request: &{request}) -> &pajamax::dispatch::Sender<{call}>;"
        ));
        out.close("}");
    }

    fn write_dispatch_server(&self, out: &mut Writer<'_>) {
        let Self { server_name, .. } = self;
        let DispatchNames { dispatch, .. } = self.dispatch_names();
        out.doc(&format!(
            "Decodes calls and sends them where a [`{dispatch}`] says: add it to a\n\
             pajamax server."
        ));
        out.open(format!("pub struct {server_name}<D> {{"));
        out.line("dispatch: ::std::sync::Arc<D>,");
        out.close("}");
        out.line("");

        out.open(format!("impl<D: {dispatch}> {server_name}<D> {{"));
        out.doc("Sends calls where `dispatch` says.");
        out.open("pub fn new(dispatch: D) -> Self {");
        out.line("Self::from_arc(::std::sync::Arc::new(dispatch))");
        out.close("}");
        out.line("");
        out.doc("Sends calls where a `dispatch` shared with other code says.");
        out.open("pub const fn from_arc(dispatch: ::std::sync::Arc<D>) -> Self {");
        out.line("Self { dispatch }");
        out.close("}");
        out.close("}");
        out.line("");

        out.open(format!(
            "impl<D> ::core::clone::Clone for {server_name}<D> {{"
        ));
        out.open("fn clone(&self) -> Self {");
        out.open("Self {");
        out.line("dispatch: ::std::sync::Arc::clone(&self.dispatch),");
        out.close("}");
        out.close("}");
        out.close("}");
        out.line("");

        out.open(format!(
            "impl<D> ::core::fmt::Debug for {server_name}<D> {{"
        ));
        out.open("fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {");
        out.line(format!(
            "f.debug_struct(\"{server_name}\").finish_non_exhaustive()"
        ));
        out.close("}");
        out.close("}");
    }

    fn write_dispatch_service_impl(&self, out: &mut Writer<'_>) {
        let Self { server_name, .. } = self;
        let DispatchNames {
            request: request_enum,
            call,
            dispatch,
            ..
        } = self.dispatch_names();
        out.open(format!(
            "impl<D: {dispatch}> pajamax::Service for {server_name}<D> {{"
        ));
        out.open("fn name(&self) -> &'static str {");
        out.line("SERVICE_NAME");
        out.close("}");
        out.line("");
        out.open("fn methods(&self) -> &'static [&'static str] {");
        out.line("METHODS");
        out.close("}");
        out.line("");

        let empty = self.unary().next().is_none();
        let unused = if empty { "_" } else { "" };
        out.open("fn call(");
        out.line("&self,");
        out.line("method: usize,");
        out.line(format!("{unused}ctx: &mut pajamax::Context<'_>,"));
        out.line(format!("{unused}request: &[u8],"));
        out.line("_reply: &mut pajamax::Reply<'_>,");
        out.close(") -> ::core::result::Result<(), pajamax::Status> {");
        out.depth += 1;
        if self.methods.is_empty() {
            out.line(NO_SUCH_METHOD);
        } else if empty {
            out.open("match method {");
            for (index, method) in self.methods.iter().enumerate() {
                self.write_route(out, index, method);
            }
            out.line(format!("_ => {NO_SUCH_METHOD},"));
            out.close("}");
        } else {
            out.open("let request = match method {");
            for (index, method) in self.methods.iter().enumerate() {
                let proto_name = &method.proto.proto_name;
                if method.is_streaming() {
                    out.line(format!(
                        "{index} => return Err(pajamax::Status::unimplemented(\"{}/{proto_name}: streaming calls are not supported yet\")),",
                        self.full_name
                    ));
                } else if method.input == "()" {
                    out.open(format!("{index} => {{"));
                    out.line("pajamax::decode_request::<()>(request)?;");
                    out.line(format!("{request_enum}::{}(())", method.variant));
                    out.close("}");
                } else {
                    out.line(format!(
                        "{index} => {request_enum}::{}(pajamax::decode_request(request)?),",
                        method.variant
                    ));
                }
            }
            out.line(format!("_ => return {NO_SUCH_METHOD},"));
            out.close("};");
            out.line("let sender = self.dispatch.dispatch_to(&request);");
            out.open(format!("let call = {call} {{"));
            out.line("request,");
            out.line("responder: ctx.defer(),");
            out.close("};");
            out.line("// A call that cannot be queued is answered at once, with the reason.");
            out.open("if let Err((status, call)) = sender.try_dispatch(call) {");
            out.line("call.responder.respond::<()>(Err(status));");
            out.close("}");
            out.line("Ok(())");
        }
        out.close("}");
        out.close("}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(proto_name: &str, input: &str, output: &str) -> Method {
        Method {
            name: ident::method_name(proto_name),
            proto_name: proto_name.to_owned(),
            comments: Comments::default(),
            input_type: input.to_owned(),
            output_type: output.to_owned(),
            input_proto_type: String::new(),
            output_proto_type: String::new(),
            options: Default::default(),
            client_streaming: false,
            server_streaming: false,
        }
    }

    fn service(package: &str, name: &str, methods: Vec<Method>) -> Service {
        Service {
            name: name.to_owned(),
            proto_name: name.to_owned(),
            package: package.to_owned(),
            comments: Comments::default(),
            methods,
            options: Default::default(),
        }
    }

    fn generate(service: &Service) -> String {
        let mut buf = String::new();
        generate_local(service, &mut buf);
        syn::parse_file(&buf).unwrap_or_else(|err| panic!("{err}\n{buf}"));
        buf
    }

    #[test]
    fn greeter_has_the_expected_items() {
        let mut say_hello = method("SayHello", "HelloRequest", "HelloReply");
        say_hello.comments.leading = vec![" Sends a greeting.".to_owned()];
        let mut greeter = service("helloworld", "Greeter", vec![say_hello]);
        greeter.comments.leading = vec![" The greeting service.".to_owned()];
        let code = generate(&greeter);

        for expected in [
            "pub mod greeter_server {",
            "/// The greeting service.",
            "pub trait Greeter: Send + Sync + 'static {",
            "/// Sends a greeting.",
            "fn say_hello(&self, request: super::HelloRequest) -> ::core::result::Result<super::HelloReply, pajamax::Status> {",
            "Err(pajamax::Status::unimplemented(\"helloworld.Greeter/SayHello is not implemented\"))",
            "fn say_hello_with_context(",
            "ctx: &mut pajamax::Context<'_>,",
            "self.say_hello(request)",
            "pub const SERVICE_NAME: &str = \"helloworld.Greeter\";",
            "pub const METHODS: &[&str] = &[\"SayHello\"];",
            "pub struct GreeterServer<T> {",
            "impl<T: Greeter> GreeterServer<T> {",
            "pub fn new(inner: T) -> Self {",
            "pub const fn from_arc(inner: ::std::sync::Arc<T>) -> Self {",
            "impl<T> ::core::clone::Clone for GreeterServer<T> {",
            "impl<T: Greeter> pajamax::Service for GreeterServer<T> {",
            "let request: super::HelloRequest = pajamax::decode_request(request)?;",
            "let answer = self.inner.say_hello_with_context(ctx, request)?;",
            "reply.encode(&answer);",
        ] {
            assert!(code.contains(expected), "missing {expected:?} in\n{code}");
        }
        assert!(!code.contains("compile_error"));
    }

    /// Asserts that the item on `lines[i]` has a doc comment above its
    /// attributes.
    fn assert_documented(lines: &[&str], i: usize, code: &str) {
        let mut j = i - 1;
        while lines[j].starts_with("#[") {
            j -= 1;
        }
        assert!(
            lines[j].starts_with("///"),
            "no doc comment on {:?} in\n{code}",
            lines[i]
        );
    }

    #[test]
    fn every_public_item_has_a_doc_comment() {
        let greeter = service(
            "helloworld",
            "Greeter",
            vec![method("SayHello", "HelloRequest", "HelloReply")],
        );
        let code = generate(&greeter);
        let lines: Vec<&str> = code.lines().map(str::trim).collect();
        for (i, text) in lines.iter().enumerate() {
            let is_item = text.starts_with("pub ")
                || (text.starts_with("fn ") && !lines[..i].iter().any(|l| l.starts_with("impl")));
            if is_item {
                assert_documented(&lines, i, &code);
            }
        }
    }

    #[test]
    fn methods_keep_proto_order_and_streaming_ones_answer_unimplemented() {
        let mut stream = method("Subscribe", "Topic", "Event");
        stream.server_streaming = true;
        let mut upload = method("Upload", "Chunk", "Event");
        upload.client_streaming = true;
        let code = generate(&service(
            "feed",
            "Feed",
            vec![method("Get", "Topic", "Event"), stream, upload],
        ));
        assert!(
            code.contains("pub const METHODS: &[&str] = &[\"Get\", \"Subscribe\", \"Upload\"];")
        );
        assert!(code.contains(
            "1 => Err(pajamax::Status::unimplemented(\"feed.Feed/Subscribe: streaming calls are not supported yet\")),"
        ));
        assert!(code.contains(
            "2 => Err(pajamax::Status::unimplemented(\"feed.Feed/Upload: streaming calls are not supported yet\")),"
        ));
        assert!(!code.contains("fn subscribe"));
        assert!(!code.contains("fn upload"));
        assert!(code.contains("`Subscribe`, `Upload`"));
    }

    #[test]
    fn a_service_of_only_streaming_methods_uses_no_handler() {
        let mut stream = method("Watch", "Query", "Update");
        stream.server_streaming = true;
        stream.client_streaming = true;
        let code = generate(&service("", "Watcher", vec![stream]));
        assert!(code.contains("pub const SERVICE_NAME: &str = \"Watcher\";"));
        assert!(code.contains("_ctx: &mut pajamax::Context<'_>,"));
        assert!(code.contains("pub trait Watcher: Send + Sync + 'static {\n    }"));
    }

    #[test]
    fn a_service_without_methods_still_compiles_to_a_route_table() {
        let code = generate(&service("empty", "Nothing", Vec::new()));
        assert!(code.contains("pub const METHODS: &[&str] = &[];"));
        assert!(!code.contains("match method"));
    }

    #[test]
    fn empty_and_external_types_keep_their_paths() {
        let code = generate(&service(
            "health",
            "Health",
            vec![
                method("Ping", "()", "()"),
                method("Now", "()", "::prost_types::Timestamp"),
                method("Lookup", "crate::ids::Id", "super::common::Record"),
            ],
        ));
        assert!(code.contains(
            "fn ping(&self, request: ()) -> ::core::result::Result<(), pajamax::Status>"
        ));
        assert!(code.contains("pajamax::decode_request::<()>(request)?;"));
        assert!(code.contains("self.inner.ping_with_context(ctx, ())?;"));
        assert!(code.contains("reply.encode(&());"));
        assert!(code.contains("self.ping(())"));
        assert!(
            code.contains("-> ::core::result::Result<::prost_types::Timestamp, pajamax::Status>")
        );
        assert!(code.contains("request: crate::ids::Id"));
        assert!(code.contains("super::super::common::Record"));
    }

    #[test]
    fn keyword_methods_are_escaped() {
        let code = generate(&service(
            "kw",
            "Keywords",
            vec![method("Type", "A", "B"), method("Self", "A", "B")],
        ));
        assert!(code.contains("fn r#type(&self"));
        assert!(code.contains("fn type_with_context("));
        assert!(code.contains("self.r#type(request)"));
        assert!(code.contains("fn self_(&self"));
        assert!(code.contains("self.inner.self_with_context(ctx, request)?"));
    }

    #[test]
    fn clashing_method_names_give_a_compile_error() {
        let code = generate(&service(
            "clash",
            "Clash",
            vec![method("Get", "A", "B"), method("GetWithContext", "A", "B")],
        ));
        assert!(code.contains(
            "::core::compile_error!(\"pajamax-build: two methods of clash.Clash map to the Rust name `get_with_context`\");"
        ));
    }

    fn generate_in_dispatch_mode(service: &Service) -> String {
        let mut buf = String::new();
        generate_dispatch(service, &mut buf);
        syn::parse_file(&buf).unwrap_or_else(|err| panic!("{err}\n{buf}"));
        buf
    }

    fn dict_store() -> Service {
        let mut get = method("Get", "Key", "Value");
        get.comments.leading = vec![" Reads a key.".to_owned()];
        let mut watch = method("Watch", "Key", "Value");
        watch.server_streaming = true;
        service(
            "dict_store",
            "DictStore",
            vec![
                get,
                method("Set", "Entry", "SetReply"),
                watch,
                method("ListShard", "ListShardRequest", "ListShardReply"),
            ],
        )
    }

    #[test]
    fn dispatch_mode_has_the_expected_items() {
        let code = generate_in_dispatch_mode(&dict_store());
        for expected in [
            "pub mod dict_store_server {",
            "pub const SERVICE_NAME: &str = \"dict_store.DictStore\";",
            "pub const METHODS: &[&str] = &[\"Get\", \"Set\", \"Watch\", \"ListShard\"];",
            "pub enum DictStoreRequest {",
            "Get(super::Key),",
            "Set(super::Entry),",
            "ListShard(super::ListShardRequest),",
            "pub struct DictStoreCall {",
            "pub request: DictStoreRequest,",
            "responder: pajamax::Responder,",
            "pub fn handle<S: DictStoreShard + ?Sized>(self, shard: &mut S) {",
            "DictStoreRequest::Get(request) => responder.respond(shard.get(request)),",
            "DictStoreRequest::ListShard(request) => responder.respond(shard.list_shard(request)),",
            "pub fn trailers_mut(&mut self) -> &mut pajamax::grpc::metadata::Metadata {",
            "pub fn into_parts(self) -> (DictStoreRequest, pajamax::Responder) {",
            "pub trait DictStoreShard {",
            "/// Reads a key.",
            "fn get(&mut self, request: super::Key) -> ::core::result::Result<super::Value, pajamax::Status> {",
            "Err(pajamax::Status::unimplemented(\"dict_store.DictStore/Set is not implemented\"))",
            "pub trait DictStoreDispatch: Send + Sync + 'static {",
            "fn dispatch_to(&self, request: &DictStoreRequest) -> &pajamax::dispatch::Sender<DictStoreCall>;",
            "pub struct DictStoreServer<D> {",
            "impl<D: DictStoreDispatch> DictStoreServer<D> {",
            "pub fn new(dispatch: D) -> Self {",
            "pub const fn from_arc(dispatch: ::std::sync::Arc<D>) -> Self {",
            "impl<D> ::core::clone::Clone for DictStoreServer<D> {",
            "impl<D: DictStoreDispatch> pajamax::Service for DictStoreServer<D> {",
            "0 => DictStoreRequest::Get(pajamax::decode_request(request)?),",
            "2 => return Err(pajamax::Status::unimplemented(\"dict_store.DictStore/Watch: streaming calls are not supported yet\")),",
            "3 => DictStoreRequest::ListShard(pajamax::decode_request(request)?),",
            "let sender = self.dispatch.dispatch_to(&request);",
            "responder: ctx.defer(),",
            "if let Err((status, call)) = sender.try_dispatch(call) {",
            "call.responder.respond::<()>(Err(status));",
        ] {
            assert!(code.contains(expected), "missing {expected:?} in\n{code}");
        }
        // Streaming methods get no variant and no handler; nothing of local
        // mode is written.
        assert!(!code.contains("Watch(super::Key)"));
        assert!(!code.contains("fn watch"));
        assert!(code.contains("answer `UNIMPLEMENTED`: `Watch`."));
        assert!(!code.contains("_with_context"));
        assert!(!code.contains("pub trait DictStore:"));
        assert!(!code.contains("compile_error"));
    }

    #[test]
    fn dispatch_mode_documents_every_public_item() {
        let code = generate_in_dispatch_mode(&dict_store());
        let lines: Vec<&str> = code.lines().map(str::trim).collect();
        let mut in_enum = false;
        for (i, text) in lines.iter().enumerate() {
            if text.starts_with("pub enum") {
                in_enum = true;
            } else if in_enum && *text == "}" {
                in_enum = false;
            }
            let in_trait_or_impl = lines[..i]
                .iter()
                .rev()
                .find(|l| l.starts_with("impl") || l.starts_with("pub trait"))
                .is_some_and(|l| l.starts_with("impl") && !l.starts_with("impl Dict"));
            let is_item = text.starts_with("pub ")
                || (in_enum && !text.starts_with("///") && *text != "}")
                || (text.starts_with("fn ") && !in_trait_or_impl);
            if is_item {
                assert_documented(&lines, i, &code);
            }
        }
    }

    #[test]
    fn dispatch_mode_passes_empty_messages_as_unit_literals() {
        let code = generate_in_dispatch_mode(&service(
            "health",
            "Health",
            vec![method("Ping", "()", "()")],
        ));
        assert!(code.contains("Ping(()),"), "{code}");
        assert!(code.contains("pajamax::decode_request::<()>(request)?;"));
        assert!(code.contains("HealthRequest::Ping(())\n"), "{code}");
        assert!(code.contains("HealthRequest::Ping(()) => responder.respond(shard.ping(())),"));
        assert!(code.contains(
            "fn ping(&mut self, request: ()) -> ::core::result::Result<(), pajamax::Status>"
        ));
    }

    #[test]
    fn dispatch_mode_without_unary_methods_dispatches_nothing() {
        let mut stream = method("Watch", "Query", "Update");
        stream.server_streaming = true;
        let code = generate_in_dispatch_mode(&service("", "Watcher", vec![stream]));
        assert!(code.contains("pub enum WatcherRequest {\n    }"), "{code}");
        assert!(code.contains("pub fn handle<S: WatcherShard + ?Sized>(self, _shard: &mut S) {"));
        assert!(code.contains("match self.request {}"));
        assert!(code.contains("_ctx: &mut pajamax::Context<'_>,"));
        assert!(!code.contains("try_dispatch"));
        let code = generate_in_dispatch_mode(&service("empty", "Nothing", Vec::new()));
        assert!(code.contains("pub const METHODS: &[&str] = &[];"));
        assert!(!code.contains("match method"));
    }

    #[test]
    fn dispatch_mode_escapes_keywords_and_reports_clashes() {
        let code = generate_in_dispatch_mode(&service(
            "kw",
            "Keywords",
            vec![method("Type", "A", "B"), method("Self", "A", "B")],
        ));
        assert!(code.contains("Type(super::A),"));
        assert!(code.contains("Self_(super::A),"));
        assert!(code.contains(
            "KeywordsRequest::Type(request) => responder.respond(shard.r#type(request)),"
        ));
        assert!(code.contains("fn self_(&mut self"));
        assert!(!code.contains("compile_error"));

        let code = generate_in_dispatch_mode(&service(
            "clash",
            "Clash",
            vec![method("GetItem", "A", "B"), method("get_item", "A", "B")],
        ));
        assert!(code.contains(
            "::core::compile_error!(\"pajamax-build: two methods of clash.Clash map to the Rust name `get_item`\");"
        ));
        assert!(code.contains("map to the Rust name `GetItem`"));
    }

    #[test]
    fn modes_pick_named_services_first() {
        let mut modes = Modes::default();
        assert_eq!(modes.mode_of("a.A"), ServiceMode::Local);
        modes.dispatch.insert("a.A".to_owned());
        assert_eq!(modes.mode_of("a.A"), ServiceMode::Dispatch);
        assert_eq!(modes.mode_of("a.B"), ServiceMode::Local);
        modes.default = ServiceMode::Dispatch;
        modes.local.insert("a.B".to_owned());
        assert_eq!(modes.mode_of("a.B"), ServiceMode::Local);
        assert_eq!(modes.mode_of("a.C"), ServiceMode::Dispatch);
    }

    #[test]
    fn the_generator_follows_the_modes() {
        use prost_build::ServiceGenerator;
        let mut modes = Modes::default();
        modes.dispatch.insert("dict_store.DictStore".to_owned());
        let mut generator = PajamaxGenerator::new(modes);
        let mut buf = String::new();
        generator.generate(dict_store(), &mut buf);
        generator.generate(
            service("helloworld", "Greeter", vec![method("SayHello", "A", "B")]),
            &mut buf,
        );
        assert!(buf.contains("pub trait DictStoreShard {"));
        assert!(buf.contains("pub trait Greeter: Send + Sync + 'static {"));
        assert!(!buf.contains("GreeterShard"));
    }

    #[test]
    fn type_paths_are_seen_from_the_server_module() {
        assert_eq!(type_path("HelloRequest"), "super::HelloRequest");
        assert_eq!(type_path("super::other::Msg"), "super::super::other::Msg");
        assert_eq!(type_path("()"), "()");
        assert_eq!(type_path("::prost_types::Any"), "::prost_types::Any");
        assert_eq!(type_path("crate::x::Y"), "crate::x::Y");
    }
}
