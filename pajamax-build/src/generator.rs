//! The `prost_build::ServiceGenerator` that writes pajamax server code.

use crate::ident;
use prost_build::{Comments, Method, Service};
use std::collections::HashSet;

/// How the code for a service serves its calls.
///
/// Only [`ServiceMode::Local`] exists so far: every call is handled on the
/// worker thread that read it. A mode that hands calls to other threads may
/// follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ServiceMode {
    /// Handlers run on the worker thread that received the request.
    #[default]
    Local,
}

/// Writes a server module for every service prost-build meets.
#[derive(Debug, Default)]
pub(crate) struct PajamaxGenerator {
    mode: ServiceMode,
}

impl PajamaxGenerator {
    pub(crate) fn new(mode: ServiceMode) -> PajamaxGenerator {
        PajamaxGenerator { mode }
    }
}

impl prost_build::ServiceGenerator for PajamaxGenerator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        match self.mode {
            ServiceMode::Local => generate_local(&service, buf),
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
                let mut j = i - 1;
                while lines[j].starts_with("#[") {
                    j -= 1;
                }
                assert!(
                    lines[j].starts_with("///"),
                    "no doc comment on {text:?} in\n{code}"
                );
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

    #[test]
    fn type_paths_are_seen_from_the_server_module() {
        assert_eq!(type_path("HelloRequest"), "super::HelloRequest");
        assert_eq!(type_path("super::other::Msg"), "super::super::other::Msg");
        assert_eq!(type_path("()"), "()");
        assert_eq!(type_path("::prost_types::Any"), "::prost_types::Any");
        assert_eq!(type_path("crate::x::Y"), "crate::x::Y");
    }
}
