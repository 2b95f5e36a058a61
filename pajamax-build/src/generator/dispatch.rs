//! Dispatch mode: the worker decodes a request and sends it, with where its
//! answer goes, to a thread the application owns, whose shard handlers take
//! `&mut self`.

use super::model::{doc, proto_doc, Kind, MethodCode, Problems, ServiceCode};
use super::skeleton::{self, Routes, Server};
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

/// The names of the items a dispatch-mode module holds.
struct Names {
    /// `DictStoreRequest`.
    request: Ident,
    /// `DictStoreAnswer`.
    answer: Ident,
    /// `DictStoreCall`.
    call: Ident,
    /// `DictStoreShard`.
    shard: Ident,
    /// `DictStoreDispatch`.
    dispatch: Ident,
}

/// What one served method adds to the module.
struct Parts {
    /// Its variant of the request enum.
    request_variant: TokenStream,
    /// Its variant of the answer enum, and that variant's arms.
    answer: Answer,
    /// Its shard trait method.
    shard_method: TokenStream,
    /// Its arm of `handle`'s match on `(request, answer)`.
    handle: TokenStream,
    /// What its entry point's arm does.
    route: TokenStream,
}

/// Where a method's answer goes: a `Responder` (one answer: unary and
/// client-streaming methods) or a `Sink` (a stream of them).
#[derive(Clone, Copy, PartialEq)]
enum Through {
    Responder,
    Sink,
}

/// A method's variant of the answer enum and its arms of the enum's
/// methods.
struct Answer {
    variant: TokenStream,
    /// Its arm of `fail`, which ends the call with `status`.
    fail: TokenStream,
    /// Its arm of `trailers_mut`.
    trailers: TokenStream,
    /// Its arm of `is_cancelled`.
    cancelled: TokenStream,
}

impl Answer {
    fn new(method: &MethodCode<'_>, through: Through) -> Answer {
        let MethodCode {
            variant, output, ..
        } = method;
        if through == Through::Responder {
            let variant_doc = doc(&format!(
                "Where the answer of a `{}` call goes.",
                method.route
            ));
            Answer {
                variant: quote! {
                    #variant_doc
                    #variant(pajamax::Responder),
                },
                fail: quote!(Self::#variant(responder) => responder.respond::<()>(Err(status)),),
                trailers: quote!(Self::#variant(responder) => responder.trailers_mut(),),
                cancelled: quote!(Self::#variant(responder) => responder.is_cancelled(),),
            }
        } else {
            let variant_doc = doc(&format!(
                "Where the answers of a `{}` call go.",
                method.route
            ));
            Answer {
                variant: quote! {
                    #variant_doc
                    #variant(pajamax::Sink<#output>),
                },
                fail: quote!(Self::#variant(sink) => sink.finish(Err(status)),),
                trailers: quote!(Self::#variant(sink) => sink.trailers_mut(),),
                cancelled: quote!(Self::#variant(sink) => sink.is_cancelled(),),
            }
        }
    }
}

/// The request variant of a unary or server-streaming method.
fn request_variant(method: &MethodCode<'_>) -> TokenStream {
    let MethodCode { variant, input, .. } = method;
    let variant_doc = doc(&format!("A `{}` request.", method.route));
    quote! {
        #variant_doc
        #variant(#input),
    }
}

/// Decodes the request bytes into the request enum's variant `request`,
/// picks the queue and makes the call with `answer`, then queues it; a call
/// that cannot be queued is answered at once with the reason, and one its
/// connection refused (no room for its request among those waiting for
/// threads: `answer` is cancelled) is not queued. `answer` may use `ctx`;
/// it is made once the queue is chosen.
fn dispatch_route(method: &MethodCode<'_>, names: &Names, answer: TokenStream) -> TokenStream {
    let Names { request, .. } = names;
    let variant = &method.variant;
    let decoded = if method.input_is_unit {
        quote! {
            pajamax::decode_request::<()>(request)?;
            let request = #request::#variant(());
        }
    } else {
        quote!(let request = #request::#variant(pajamax::decode_request(request)?);)
    };
    queue(names, decoded, answer)
}

/// Makes the request enum's variant `request` with `request`, picks the
/// queue and makes the call with `answer`, then queues it, as
/// [`dispatch_route`] does.
fn queue(names: &Names, request: TokenStream, answer: TokenStream) -> TokenStream {
    let call = &names.call;
    quote! {
        #request
        let sender = self.dispatch.dispatch_to(&request);
        #answer
        let call = #call { request, answer };
        if call.is_cancelled() {
            // Refused, without room for its request among its connection's
            // requests waiting for threads: answered already.
            drop(call);
        } else if let Err((status, call)) = sender.try_dispatch(call) {
            call.answer.fail(status);
        }
    }
}

/// A unary method: the shard returns the answer, which the call's
/// `Responder` takes back to the worker.
fn unary(method: &MethodCode<'_>, names: &Names) -> Parts {
    let MethodCode {
        name,
        variant,
        input,
        output,
        ..
    } = method;
    let Names {
        request, answer, ..
    } = names;
    let proto = proto_doc(&method.proto.comments);
    let shard_doc = doc(&format!(
        "Handles `{}`: one request, one answer. The default answers `UNIMPLEMENTED`.\n\
         \n\
         # Errors\n\
         \n\
         The [`Status`](pajamax::Status) to end the call with instead of an answer.",
        method.route
    ));
    let unimplemented = method.unimplemented();
    let argument = method.argument();
    let route = dispatch_route(
        method,
        names,
        quote!(let answer = #answer::#variant(ctx.defer());),
    );
    Parts {
        request_variant: request_variant(method),
        answer: Answer::new(method, Through::Responder),
        shard_method: quote! {
            #proto
            #shard_doc
            #[allow(unused_variables)]
            fn #name(&mut self, request: #input) -> ::core::result::Result<#output, pajamax::Status> {
                Err(#unimplemented)
            }
        },
        handle: quote! {
            (#request::#variant(#argument), #answer::#variant(responder)) => {
                responder.respond(shard.#name(#argument));
            }
        },
        route: quote!({
            #route
            Ok(())
        }),
    }
}

/// A server-streaming method: the shard sends the answers through the
/// call's `Sink`.
fn server_streaming(method: &MethodCode<'_>, names: &Names) -> Parts {
    let MethodCode {
        name,
        variant,
        input,
        output,
        ..
    } = method;
    let Names {
        request, answer, ..
    } = names;
    let proto = proto_doc(&method.proto.comments);
    let shard_doc = doc(&format!(
        "Handles `{}`: one request, a stream of answers, sent through `sink`.\n\
         \n\
         [`Sink::send`](pajamax::Sink::send) waits for flow-control credit: a client that\n\
         reads slowly slows the thread that sends, and the calls queued behind it, so\n\
         a long stream may be better moved to a thread of its own. `send` fails once\n\
         the call has ended (the client cancelled, the deadline passed, the connection\n\
         closed): stop then. End with [`Sink::finish`](pajamax::Sink::finish); a sink\n\
         dropped unfinished ends the call `INTERNAL`. The default finishes with\n\
         `UNIMPLEMENTED`.",
        method.route
    ));
    let unimplemented = method.unimplemented();
    let argument = method.argument();
    let route = dispatch_route(
        method,
        names,
        quote! {
            let (stream, sink) = pajamax::ServerStream::channel(ctx);
            let answer = #answer::#variant(sink);
        },
    );
    Parts {
        request_variant: request_variant(method),
        answer: Answer::new(method, Through::Sink),
        shard_method: quote! {
            #proto
            #shard_doc
            #[allow(unused_variables)]
            fn #name(&mut self, request: #input, sink: pajamax::Sink<#output>) {
                sink.finish(Err(#unimplemented));
            }
        },
        handle: quote! {
            (#request::#variant(#argument), #answer::#variant(sink)) => {
                shard.#name(#argument, sink);
            }
        },
        // When the call could not be queued, its sink has finished it:
        // the stream returned ends with that status.
        route: quote!({
            #route
            Ok(stream.into_raw())
        }),
    }
}

/// The request variant of a client-streaming or bidirectional method: the
/// stream of its request messages, which the shard reads.
fn inbound_request_variant(method: &MethodCode<'_>) -> TokenStream {
    let MethodCode { variant, input, .. } = method;
    let variant_doc = doc(&format!(
        "A `{}` call: its request messages, read as they come (the choice of\n\
         queue can only go by the method).",
        method.route
    ));
    quote! {
        #variant_doc
        #variant(pajamax::Streaming<#input>),
    }
}

/// A client-streaming or bidirectional method: the shard reads the request
/// messages from the call's `Streaming`, and returns the answer, which the
/// call's `Responder` takes back to the worker (client streaming), or sends
/// the answers through the call's `Sink` (bidirectional).
fn inbound(method: &MethodCode<'_>, names: &Names) -> Parts {
    let MethodCode {
        name,
        variant,
        input,
        output,
        ..
    } = method;
    let Names {
        request, answer, ..
    } = names;
    let proto = proto_doc(&method.proto.comments);
    let unimplemented = method.unimplemented();
    let (through, channel, to, shard_doc) = if method.kind == Kind::ClientStreaming {
        (
            Through::Responder,
            quote!(pajamax::ClientStream::<#input, #output>),
            format_ident!("responder"),
            "a stream of requests, read from `requests`, one answer. The default\n\
             answers `UNIMPLEMENTED`.\n\
             \n\
             [`Streaming`](pajamax::Streaming) blocks until the next message comes: the\n\
             thread reads at the client's pace, and the calls queued behind it wait, so a\n\
             long stream may be better moved to a thread of its own. It yields an error\n\
             once the call has ended (the client cancelled, the deadline passed, the\n\
             connection closed): stop then.\n\
             \n\
             # Errors\n\
             \n\
             The [`Status`](pajamax::Status) to end the call with instead of an answer.",
        )
    } else {
        (
            Through::Sink,
            quote!(pajamax::BidiStream::<#input, #output>),
            format_ident!("sink"),
            "a stream of requests, read from `requests`, and a stream of answers,\n\
             sent through `sink`.\n\
             \n\
             [`Streaming`](pajamax::Streaming) blocks until the next message comes and\n\
             [`Sink::send`](pajamax::Sink::send) waits for flow-control credit: the thread\n\
             goes at the client's pace, and the calls queued behind it wait, so a long\n\
             stream may be better moved to a thread of its own. Both fail once the call has\n\
             ended (the client cancelled, the deadline passed, the connection closed): stop\n\
             then. End with [`Sink::finish`](pajamax::Sink::finish); a sink dropped\n\
             unfinished ends the call `INTERNAL`. The default finishes with\n\
             `UNIMPLEMENTED`.",
        )
    };
    let shard_doc = doc(&format!("Handles `{}`: {shard_doc}", method.route));
    let (shard_method, handle) = if through == Through::Responder {
        (
            quote! {
                fn #name(
                    &mut self,
                    requests: pajamax::Streaming<#input>,
                ) -> ::core::result::Result<#output, pajamax::Status> {
                    Err(#unimplemented)
                }
            },
            quote!(responder.respond(shard.#name(requests));),
        )
    } else {
        (
            quote! {
                fn #name(
                    &mut self,
                    requests: pajamax::Streaming<#input>,
                    sink: pajamax::Sink<#output>,
                ) {
                    sink.finish(Err(#unimplemented));
                }
            },
            quote!(shard.#name(requests, sink);),
        )
    };
    let route = queue(
        names,
        quote! {
            let (stream, requests, #to) = #channel::channel(ctx);
            let request = #request::#variant(requests);
        },
        quote!(let answer = #answer::#variant(#to);),
    );
    Parts {
        request_variant: inbound_request_variant(method),
        answer: Answer::new(method, through),
        shard_method: quote! {
            #proto
            #shard_doc
            #[allow(unused_variables)]
            #shard_method
        },
        handle: quote! {
            (#request::#variant(requests), #answer::#variant(#to)) => {
                #handle
            }
        },
        // When the call could not be queued, its responder or sink has
        // ended it: the stream returned ends with that status.
        route: quote!({
            #route
            Ok(stream.into_raw())
        }),
    }
}

/// The request and answer enums, and the call that carries them.
fn call_items(code: &ServiceCode<'_>, names: &Names, parts: &[Parts]) -> TokenStream {
    let full_name = &code.full_name;
    let Names {
        request,
        answer,
        call,
        shard,
        ..
    } = names;
    let request_doc = doc(&format!(
        "A `{full_name}` request: one variant per method, named as the method is; the\n\
         decoded request of a unary or server-streaming method, the stream of request\n\
         messages of a client-streaming or bidirectional one."
    ));
    let answer_doc = doc(&format!(
        "Where the answer of a `{full_name}` call goes, with a variant named as the\n\
         [`{request}`] one: a [`Responder`](pajamax::Responder) for a unary or\n\
         client-streaming method, a [`Sink`](pajamax::Sink) for a server-streaming or\n\
         bidirectional one."
    ));
    let call_doc = doc(&format!(
        "A `{full_name}` call on its way to the thread that serves it: the request\n\
         (decoded, or the stream of request messages) and where its answer goes. A\n\
         call dropped without an answer is answered `INTERNAL`."
    ));
    let request_variants = parts.iter().map(|p| &p.request_variant);
    let answer_variants = parts.iter().map(|p| &p.answer.variant);
    let fail_arms = parts.iter().map(|p| &p.answer.fail);
    let trailer_arms = parts.iter().map(|p| &p.answer.trailers);
    let cancelled_arms = parts.iter().map(|p| &p.answer.cancelled);
    let handle_arms = parts.iter().map(|p| &p.handle);
    // A reference to an enum without variants is not itself empty: match
    // on the enum.
    let status = if parts.is_empty() {
        format_ident!("_status")
    } else {
        format_ident!("status")
    };
    let trailers_body = if parts.is_empty() {
        quote!(match *self {})
    } else {
        quote!(match self { #(#trailer_arms)* })
    };
    let cancelled_body = if parts.is_empty() {
        quote!(match *self {})
    } else {
        quote!(match self { #(#cancelled_arms)* })
    };
    let handle = match parts.len() {
        0 => quote! {
            pub fn handle<S: #shard + ?Sized>(self, _shard: &mut S) {
                match self.request {}
            }
        },
        1 => quote! {
            pub fn handle<S: #shard + ?Sized>(self, shard: &mut S) {
                if self.answer.is_cancelled() {
                    return;
                }
                match (self.request, self.answer) {
                    #(#handle_arms)*
                }
            }
        },
        _ => {
            let replaced = format!(
                "the request of this {full_name} call was replaced by one for another method"
            );
            quote! {
                pub fn handle<S: #shard + ?Sized>(self, shard: &mut S) {
                    if self.answer.is_cancelled() {
                        return;
                    }
                    match (self.request, self.answer) {
                        #(#handle_arms)*
                        (_, answer) => answer.fail(pajamax::Status::internal(#replaced)),
                    }
                }
            }
        }
    };
    let handle_doc = doc(
        "Runs the handler of `shard` that the request is for: a unary or\n\
         client-streaming handler's result answers the call, a server-streaming or\n\
         bidirectional handler gets the call's sink.\n\
         \n\
         A call that has ended while it waited in the queue (the client cancelled,\n\
         the deadline passed, the connection closed or the server shut down) is\n\
         dropped without running a handler: its client has had its status already,\n\
         and an answer would go nowhere.",
    );
    let cancelled_doc = doc(
        "Whether the call has ended without an answer (the client cancelled, the\n\
         deadline passed, the connection closed or the server shut down): an answer\n\
         sent now is dropped, and the work for it is better skipped.",
    );
    let fail_doc = doc("Ends the call with `status` instead of an answer.");
    let trailers_doc = doc("Metadata sent with the trailers of the answer.");
    let into_parts_doc = doc(&format!(
        "The request and where its answer goes, to answer the call some other way\n\
         than with [`handle`](Self::handle): the [`{answer}`] variant of the request's\n\
         method."
    ));
    // The variants are named as the rpcs are, which often share a word
    // (`GetUser`, `GetOrder`, `GetItem`): clippy would have them differ.
    quote! {
        #request_doc
        #[derive(Debug)]
        #[allow(clippy::large_enum_variant, clippy::enum_variant_names)]
        pub enum #request {
            #(#request_variants)*
        }

        #answer_doc
        #[derive(Debug)]
        #[allow(clippy::enum_variant_names)]
        pub enum #answer {
            #(#answer_variants)*
        }

        impl #answer {
            #fail_doc
            pub fn fail(self, #status: pajamax::Status) {
                match self {
                    #(#fail_arms)*
                }
            }

            #trailers_doc
            pub fn trailers_mut(&mut self) -> &mut pajamax::Metadata {
                #trailers_body
            }

            #cancelled_doc
            pub fn is_cancelled(&self) -> bool {
                #cancelled_body
            }
        }

        #call_doc
        #[derive(Debug)]
        pub struct #call {
            /// The request: decoded, or the stream of request messages.
            pub request: #request,
            answer: #answer,
        }

        impl #call {
            #handle_doc
            #handle

            #trailers_doc
            pub fn trailers_mut(&mut self) -> &mut pajamax::Metadata {
                self.answer.trailers_mut()
            }

            #cancelled_doc
            pub fn is_cancelled(&self) -> bool {
                self.answer.is_cancelled()
            }

            #into_parts_doc
            pub fn into_parts(self) -> (#request, #answer) {
                (self.request, self.answer)
            }
        }
    }
}

/// The shard trait's docs.
fn shard_doc(code: &ServiceCode<'_>, names: &Names) -> TokenStream {
    let full_name = &code.full_name;
    let call = &names.call;
    let text = format!(
        "The handlers of the `{full_name}` service in dispatch mode, run by a thread\n\
         that owns its state: they take `&mut self`, so no lock is needed. Pass the\n\
         state to [`{call}::handle`]. A method left alone answers `UNIMPLEMENTED`."
    );
    let proto = proto_doc(&code.service.comments);
    let generated = doc(&text);
    quote!(#proto #generated)
}

/// The server module of a service in dispatch mode, and what it could not
/// serve.
pub(crate) fn generate(code: &ServiceCode<'_>) -> (TokenStream, Problems) {
    let names = Names {
        request: code.named("Request"),
        answer: code.named("Answer"),
        call: code.named("Call"),
        shard: code.named("Shard"),
        dispatch: code.named("Dispatch"),
    };
    let mut problems = Problems::default();
    problems.check_clashes(
        &code.full_name,
        code.methods
            .iter()
            .map(|m| (m.route.as_str(), m.name.to_string())),
    );
    problems.check_clashes(
        &code.full_name,
        code.methods
            .iter()
            .map(|m| (m.route.as_str(), m.variant.to_string())),
    );

    let mut parts = Vec::new();
    // Unary answers go through the call's responder, not `reply`; the
    // inbound methods make their channels with `ctx`.
    let mut routes = Routes::new(false, true);
    for method in &code.methods {
        let method_parts = match method.kind {
            Kind::Unary => unary(method, &names),
            Kind::ServerStreaming => server_streaming(method, &names),
            Kind::ClientStreaming | Kind::BidiStreaming => inbound(method, &names),
        };
        routes.add(
            method.kind,
            method.index_literal(),
            method_parts.route.clone(),
        );
        parts.push(method_parts);
    }

    let Names {
        request,
        call,
        shard,
        dispatch,
        ..
    } = &names;
    let full_name = &code.full_name;
    let call_items = call_items(code, &names, &parts);
    let shard_doc = shard_doc(code, &names);
    let shard_methods = parts.iter().map(|p| &p.shard_method);
    let dispatch_doc = doc(&format!(
        "Chooses the thread that serves each `{full_name}` call, by the queue it is\n\
         sent to. A full queue answers the call `RESOURCE_EXHAUSTED`, a queue whose\n\
         receiver is gone `UNAVAILABLE`."
    ));
    let dispatch_to_doc = doc("The queue of the thread that serves `request`.");
    let items = quote! {
        #call_items

        #shard_doc
        // Handlers are named as the proto says, whatever Rust's conventions
        // expect of a `new`, `from_*` or `into_*`.
        #[allow(clippy::new_ret_no_self, clippy::wrong_self_convention)]
        pub trait #shard {
            #(#shard_methods)*
        }

        #dispatch_doc
        pub trait #dispatch: ::core::marker::Send + ::core::marker::Sync + 'static {
            #dispatch_to_doc
            fn dispatch_to(&self, request: &#request) -> &pajamax::dispatch::Sender<#call>;
        }
    };
    let server = Server {
        param: format_ident!("D"),
        bound: dispatch.clone(),
        field: format_ident!("dispatch"),
        doc: format!(
            "Decodes calls and sends them where a [`{dispatch}`] says: add it to a\n\
             pajamax server."
        ),
        new_doc: "Sends calls where `dispatch` says.",
        from_arc_doc: "Sends calls where a `dispatch` shared with other code says.",
    };
    let module = &code.module;
    let module_doc = format!(
        "Server code for the `{full_name}` service in dispatch mode: calls are sent to\n\
         threads the application owns. Implement [`{module}::{shard}`] for the state a\n\
         thread owns and [`{module}::{dispatch}`] to choose the thread of each call."
    );
    let mut errors = code.problems.errors.clone();
    errors.extend(problems.errors.iter().cloned());
    let tokens = skeleton::module(code, &module_doc, &errors, items, &server, &routes);
    (tokens, problems)
}
