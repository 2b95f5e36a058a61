//! Local mode: the handlers of a trait run on the worker thread that read
//! the request.

use super::model::{doc, proto_doc, Kind, MethodCode, Problems, ServiceCode};
use super::skeleton::{self, Routes, Server};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// What one method adds to the module.
struct Parts {
    /// Its two trait methods.
    handlers: TokenStream,
    /// What its entry point's arm does.
    route: TokenStream,
}

/// The `# Errors` section of a unary handler's docs.
const ERRORS: &str = "\n\
    # Errors\n\
    \n\
    The [`Status`](pajamax::Status) to end the call with instead of an answer.";

/// The `# Errors` section of a streaming handler's docs.
const STREAM_ERRORS: &str = "\n\
    # Errors\n\
    \n\
    The [`Status`](pajamax::Status) to end the call with at once.";

/// The doc of a `_with_context` form.
fn context_doc(method: &MethodCode<'_>, what: &str) -> TokenStream {
    let errors = if method.kind == Kind::Unary {
        ERRORS
    } else {
        STREAM_ERRORS
    };
    doc(&format!(
        "Handles `{}` with the call's [`Context`](pajamax::Context): its request metadata,\n\
         deadline and peer, and the metadata to send back{what}. The default ignores\n\
         the context and calls {}.\n{errors}",
        method.route,
        method.doc_link()
    ))
}

/// A unary method: a request in, an answer out.
fn unary(method: &MethodCode<'_>) -> Parts {
    let MethodCode {
        name,
        context_name,
        input,
        output,
        ..
    } = method;
    let proto = proto_doc(&method.proto.comments);
    let plain_doc = doc(&format!(
        "Handles `{}`: one request, one answer. The default answers `UNIMPLEMENTED`.\n{ERRORS}",
        method.route
    ));
    let context_doc = context_doc(
        method,
        "; it may also [`defer`](pajamax::Context::defer) the answer to another thread",
    );
    let unimplemented = method.unimplemented();
    let argument = method.argument();
    let handlers = quote! {
        #proto
        #plain_doc
        #[allow(unused_variables)]
        fn #name(&self, request: #input) -> ::core::result::Result<#output, pajamax::Status> {
            Err(#unimplemented)
        }

        #context_doc
        #[allow(unused_variables)]
        fn #context_name(
            &self,
            ctx: &mut pajamax::Context<'_>,
            request: #input,
        ) -> ::core::result::Result<#output, pajamax::Status> {
            self.#name(#argument)
        }
    };
    let decode = method.decode();
    let route = if method.output_is_unit {
        quote!({
            #decode
            self.inner.#context_name(ctx, #argument)?;
            reply.encode(&());
            Ok(())
        })
    } else {
        quote!({
            #decode
            let answer = self.inner.#context_name(ctx, #argument)?;
            reply.encode(&answer);
            Ok(())
        })
    };
    Parts { handlers, route }
}

/// A server-streaming method: a request in, a stream of answers out.
fn server_streaming(method: &MethodCode<'_>) -> Parts {
    let MethodCode {
        name,
        context_name,
        input,
        output,
        ..
    } = method;
    let proto = proto_doc(&method.proto.comments);
    let plain_doc = doc(&format!(
        "Handles `{}`: one request, a stream of answers. The messages are made on the\n\
         worker, as the client's flow-control windows allow, by\n\
         [`ServerStream::iter`](pajamax::ServerStream::iter) or\n\
         [`ServerStream::from_producer`](pajamax::ServerStream::from_producer); to send them\n\
         from another thread, implement the `_with_context` form and use\n\
         [`ServerStream::channel`](pajamax::ServerStream::channel). The default answers\n\
         `UNIMPLEMENTED`.\n{STREAM_ERRORS}",
        method.route
    ));
    let context_doc = context_doc(
        method,
        ", or to send the messages from another thread with\n\
         [`ServerStream::channel`](pajamax::ServerStream::channel)",
    );
    let unimplemented = method.unimplemented();
    let argument = method.argument();
    let handlers = quote! {
        #proto
        #plain_doc
        #[allow(unused_variables)]
        fn #name(
            &self,
            request: #input,
        ) -> ::core::result::Result<pajamax::ServerStream<#output>, pajamax::Status> {
            Err(#unimplemented)
        }

        #context_doc
        #[allow(unused_variables)]
        fn #context_name(
            &self,
            ctx: &mut pajamax::Context<'_>,
            request: #input,
        ) -> ::core::result::Result<pajamax::ServerStream<#output>, pajamax::Status> {
            self.#name(#argument)
        }
    };
    let decode = method.decode();
    let route = quote!({
        #decode
        let stream = self.inner.#context_name(ctx, #argument)?;
        Ok(stream.into_raw())
    });
    Parts { handlers, route }
}

/// A client-streaming or bidirectional method: the handler runs when the
/// call starts and says who takes the request messages.
fn inbound(method: &MethodCode<'_>) -> Parts {
    let MethodCode {
        name,
        context_name,
        input,
        output,
        ..
    } = method;
    let (stream, flow, on_worker, handler, answers) = if method.kind == Kind::ClientStreaming {
        (
            quote!(pajamax::ClientStream),
            "a stream of requests, one answer",
            "ClientStream::on_worker",
            "ClientStreamHandler",
            "answer with the [`Responder`](pajamax::Responder)",
        )
    } else {
        (
            quote!(pajamax::BidiStream),
            "a stream each way",
            "BidiStream::on_worker",
            "BidiHandler",
            "send the answers through the [`Sink`](pajamax::Sink)",
        )
    };
    let channel = on_worker.replace("on_worker", "channel");
    let proto = proto_doc(&method.proto.comments);
    let plain_doc = doc(&format!(
        "Handles `{}`: {flow}. Called when the call starts, it returns who\n\
         takes the request messages: a [`{handler}`](pajamax::{handler}) that sees them\n\
         on the worker, with [`{on_worker}`](pajamax::{on_worker}). To read them on another\n\
         thread and {answers}, implement the `_with_context` form and use\n\
         [`{channel}`](pajamax::{channel}). The default answers `UNIMPLEMENTED`.\n{STREAM_ERRORS}",
        method.route
    ));
    let context_doc = context_doc(
        method,
        &format!(
            ", or to take the messages on another thread with\n\
             [`{channel}`](pajamax::{channel})"
        ),
    );
    let unimplemented = method.unimplemented();
    let handlers = quote! {
        #proto
        #plain_doc
        fn #name(&self) -> ::core::result::Result<#stream<#input, #output>, pajamax::Status> {
            Err(#unimplemented)
        }

        #context_doc
        #[allow(unused_variables)]
        fn #context_name(
            &self,
            ctx: &mut pajamax::Context<'_>,
        ) -> ::core::result::Result<#stream<#input, #output>, pajamax::Status> {
            self.#name()
        }
    };
    let route = quote!({
        let stream = self.inner.#context_name(ctx)?;
        Ok(stream.into_raw())
    });
    Parts { handlers, route }
}

/// The trait's docs: the proto comments, how to implement it, and a word on
/// each kind of method it has.
fn trait_doc(code: &ServiceCode<'_>) -> TokenStream {
    let ServiceCode {
        full_name, server, ..
    } = code;
    let has = |kind| code.methods.iter().any(|m| m.kind == kind);
    let mut text = format!(
        "The handlers of the `{full_name}` service. Implement the methods you serve\n\
         and add the implementation to a server wrapped in [`{server}`].\n\
         \n\
         Each method comes in two forms: override the plain one, or the one ending in\n\
         `_with_context` to see the call's [`Context`](pajamax::Context). A method left\n\
         alone answers `UNIMPLEMENTED`."
    );
    let mut kinds = Vec::new();
    if has(Kind::Unary) {
        kinds.push("- A unary method returns its answer.");
    }
    if has(Kind::ServerStreaming) {
        kinds.push(
            "- A server-streaming method returns a [`ServerStream`](pajamax::ServerStream) of\n  \
             answers, made on the worker ([`ServerStream::iter`](pajamax::ServerStream::iter))\n  \
             or sent from another thread ([`ServerStream::channel`](pajamax::ServerStream::channel)).",
        );
    }
    if has(Kind::ClientStreaming) {
        kinds.push(
            "- A client-streaming method returns a [`ClientStream`](pajamax::ClientStream): who\n  \
             takes the request messages and answers, on the worker\n  \
             ([`ClientStream::on_worker`](pajamax::ClientStream::on_worker)) or on another thread\n  \
             ([`ClientStream::channel`](pajamax::ClientStream::channel)).",
        );
    }
    if has(Kind::BidiStreaming) {
        kinds.push(
            "- A bidirectional method returns a [`BidiStream`](pajamax::BidiStream): who takes\n  \
             the request messages and sends answers, on the worker\n  \
             ([`BidiStream::on_worker`](pajamax::BidiStream::on_worker)) or on another thread\n  \
             ([`BidiStream::channel`](pajamax::BidiStream::channel)).",
        );
    }
    if !kinds.is_empty() {
        text.push_str("\n\n");
        text.push_str(&kinds.join("\n"));
    }
    let proto = proto_doc(&code.service.comments);
    let generated = doc(&text);
    quote!(#proto #generated)
}

/// The server module of a service in local mode, and what it could not
/// serve.
pub(crate) fn generate(code: &ServiceCode<'_>) -> (TokenStream, Problems) {
    let mut problems = Problems::default();
    problems.check_clashes(
        &code.full_name,
        code.methods.iter().flat_map(|m| {
            [
                (m.route.as_str(), m.name.to_string()),
                (m.route.as_str(), m.context_name.to_string()),
            ]
        }),
    );

    let mut handlers = Vec::new();
    let mut routes = Routes::new(true, true);
    for method in &code.methods {
        let parts = match method.kind {
            Kind::Unary => unary(method),
            Kind::ServerStreaming => server_streaming(method),
            Kind::ClientStreaming | Kind::BidiStreaming => inbound(method),
        };
        handlers.push(parts.handlers);
        routes.add(method.kind, method.index_literal(), parts.route);
    }

    let trait_name = code.trait_name();
    let trait_doc = trait_doc(code);
    let items = quote! {
        #trait_doc
        // The marker traits by path: a service may be named `Send` or `Sync`.
        // Handlers are named as the proto says, whatever Rust's conventions
        // expect of a `new`, `from_*` or `into_*`.
        #[allow(clippy::new_ret_no_self, clippy::wrong_self_convention)]
        pub trait #trait_name: ::core::marker::Send + ::core::marker::Sync + 'static {
            #(#handlers)*
        }
    };
    // The server's type parameter, named apart from the trait it is bound
    // by: a service may be named `T`.
    let param = if trait_name == "T" {
        format_ident!("H")
    } else {
        format_ident!("T")
    };
    let server = Server {
        param,
        bound: trait_name.clone(),
        field: format_ident!("inner"),
        doc: format!("Serves an implementation of [`{trait_name}`]: add it to a pajamax server."),
        new_doc: "Serves `inner`.",
        from_arc_doc: "Serves an `inner` that is shared with other code.",
    };
    let ServiceCode {
        full_name,
        module,
        server: server_name,
        ..
    } = code;
    let module_doc = format!(
        "Server code for the `{full_name}` service: the [`{module}::{trait_name}`] trait to\n\
         implement and the [`{module}::{server_name}`] that serves an implementation."
    );
    let mut errors = code.problems.errors.clone();
    errors.extend(problems.errors.iter().cloned());
    let tokens = skeleton::module(code, &module_doc, &errors, items, &server, &routes);
    (tokens, problems)
}
