//! What local and dispatch mode share: the module around the mode's items,
//! the service's names, the server type and its `pajamax::Service` impl.

use super::model::{doc, Kind, ServiceCode};
use proc_macro2::{Ident, Literal, TokenStream};
use quote::quote;

/// The match arms of one `pajamax::Service` entry point: `(method number,
/// expression)`.
type Arms = Vec<(Literal, TokenStream)>;

/// The routes of a service, one list per entry point; an entry point
/// without routes is left out of the `impl`, so that its default answers.
#[derive(Default)]
pub(crate) struct Routes {
    unary: Arms,
    server_streaming: Arms,
    client_streaming: Arms,
    bidi_streaming: Arms,
    /// The unary arms encode into `reply` (local mode); otherwise the
    /// parameter is unused.
    unary_uses_reply: bool,
    /// The client-streaming and bidirectional arms use `ctx`.
    inbound_uses_ctx: bool,
}

impl Routes {
    /// No routes yet; the flags say which entry point parameters the arms
    /// use.
    pub(crate) fn new(unary_uses_reply: bool, inbound_uses_ctx: bool) -> Routes {
        Routes {
            unary_uses_reply,
            inbound_uses_ctx,
            ..Routes::default()
        }
    }

    /// Routes method number `index`, of `kind`, to `expression`.
    pub(crate) fn add(&mut self, kind: Kind, index: Literal, expression: TokenStream) {
        let arms = match kind {
            Kind::Unary => &mut self.unary,
            Kind::ServerStreaming => &mut self.server_streaming,
            Kind::ClientStreaming => &mut self.client_streaming,
            Kind::BidiStreaming => &mut self.bidi_streaming,
        };
        arms.push((index, expression));
    }
}

/// How the server type holds what it serves.
pub(crate) struct Server {
    /// The type parameter: `T` (the handlers) or `D` (the dispatcher).
    pub(crate) param: Ident,
    /// The trait it must implement.
    pub(crate) bound: Ident,
    /// The field, which is also the name of `new`'s parameter.
    pub(crate) field: Ident,
    /// Docs of the struct, `new` and `from_arc`.
    pub(crate) doc: String,
    pub(crate) new_doc: &'static str,
    pub(crate) from_arc_doc: &'static str,
}

/// The whole module of a service: `items` are the mode's own (traits,
/// enums...).
pub(crate) fn module(
    code: &ServiceCode<'_>,
    module_doc: &str,
    errors: &[String],
    items: TokenStream,
    server: &Server,
    routes: &Routes,
) -> TokenStream {
    let module = &code.module;
    let module_doc = doc(module_doc);
    let names = names(code);
    let server_items = server_type(code, server);
    let service_impl = service_impl(code, server, routes);
    // A server whose code sits in a private module of a binary leaves some
    // of it unused (the constructor it does not call, a call's
    // `into_parts`, a service it does not serve): nothing for it to
    // silence.
    quote! {
        #module_doc
        #[allow(dead_code)]
        pub mod #module {
            #(::core::compile_error!(#errors);)*
            #names
            #items
            #server_items
            #service_impl
        }
    }
}

/// `SERVICE_NAME` and `METHODS`.
fn names(code: &ServiceCode<'_>) -> TokenStream {
    let full_name = &code.full_name;
    let name_doc = doc(&format!(
        "The fully qualified name of the service, `{full_name}`."
    ));
    let methods_doc = doc(
        "The service's methods, in proto order; a method's index here is the number\n\
         the [`pajamax::Service`] entry point of its kind receives.",
    );
    // Every proto method is listed, also one the code could not serve, so
    // that its route exists and answers.
    let methods = code.service.methods.iter().map(|method| {
        let name = &method.proto_name;
        let kind = Kind::of(method).method_kind();
        quote!(pajamax::Method { name: #name, kind: #kind })
    });
    quote! {
        #name_doc
        pub const SERVICE_NAME: &str = #full_name;
        #methods_doc
        pub const METHODS: &[pajamax::Method] = &[#(#methods),*];
    }
}

/// The server struct with `new`, `from_arc`, `Clone` and `Debug`.
fn server_type(code: &ServiceCode<'_>, server: &Server) -> TokenStream {
    let Server {
        param,
        bound,
        field,
        ..
    } = server;
    let name = &code.server;
    let name_text = name.to_string();
    let struct_doc = doc(&server.doc);
    let new_doc = doc(server.new_doc);
    let from_arc_doc = doc(server.from_arc_doc);
    quote! {
        #struct_doc
        pub struct #name<#param> {
            #field: ::std::sync::Arc<#param>,
        }

        impl<#param: #bound> #name<#param> {
            #new_doc
            pub fn new(#field: #param) -> Self {
                Self::from_arc(::std::sync::Arc::new(#field))
            }

            #from_arc_doc
            pub const fn from_arc(#field: ::std::sync::Arc<#param>) -> Self {
                Self { #field }
            }
        }

        impl<#param> ::core::clone::Clone for #name<#param> {
            fn clone(&self) -> Self {
                Self {
                    #field: ::std::sync::Arc::clone(&self.#field),
                }
            }
        }

        impl<#param> ::core::fmt::Debug for #name<#param> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(#name_text).finish_non_exhaustive()
            }
        }
    }
}

/// `impl pajamax::Service`: the names, and the entry points of the kinds the
/// service has.
fn service_impl(code: &ServiceCode<'_>, server: &Server, routes: &Routes) -> TokenStream {
    let Server { param, bound, .. } = server;
    let name = &code.server;
    let unused = |used: bool, name: &str| {
        if used {
            quote::format_ident!("{name}")
        } else {
            quote::format_ident!("_{name}")
        }
    };

    let unary = entry_point(&routes.unary, Kind::Unary, |body| {
        let reply = unused(routes.unary_uses_reply, "reply");
        quote! {
            fn unary(
                &self,
                method: usize,
                ctx: &mut pajamax::Context<'_>,
                request: &[u8],
                #reply: &mut pajamax::Reply<'_>,
            ) -> ::core::result::Result<(), pajamax::Status> {
                #body
            }
        }
    });
    let server_streaming = entry_point(&routes.server_streaming, Kind::ServerStreaming, |body| {
        quote! {
            fn server_streaming(
                &self,
                method: usize,
                ctx: &mut pajamax::Context<'_>,
                request: &[u8],
            ) -> ::core::result::Result<pajamax::RawServerStream, pajamax::Status> {
                #body
            }
        }
    });
    let ctx = unused(routes.inbound_uses_ctx, "ctx");
    let client_streaming = entry_point(&routes.client_streaming, Kind::ClientStreaming, |body| {
        quote! {
            fn client_streaming(
                &self,
                method: usize,
                #ctx: &mut pajamax::Context<'_>,
            ) -> ::core::result::Result<pajamax::RawInbound, pajamax::Status> {
                #body
            }
        }
    });
    let bidi_streaming = entry_point(&routes.bidi_streaming, Kind::BidiStreaming, |body| {
        quote! {
            fn bidi_streaming(
                &self,
                method: usize,
                #ctx: &mut pajamax::Context<'_>,
            ) -> ::core::result::Result<pajamax::RawInbound, pajamax::Status> {
                #body
            }
        }
    });

    quote! {
        impl<#param: #bound> pajamax::Service for #name<#param> {
            fn name(&self) -> &'static str {
                SERVICE_NAME
            }

            fn methods(&self) -> &'static [pajamax::Method] {
                METHODS
            }

            #unary
            #server_streaming
            #client_streaming
            #bidi_streaming
        }
    }
}

/// One entry point, `signature` wrapped around the match of its `arms`;
/// nothing without arms.
fn entry_point(
    arms: &Arms,
    kind: Kind,
    signature: impl FnOnce(TokenStream) -> TokenStream,
) -> TokenStream {
    if arms.is_empty() {
        return TokenStream::new();
    }
    // What the server answers for a number that is no method of this kind.
    let no_such_method = format!(
        "{{SERVICE_NAME}} has no {} method number {{method}}",
        kind.describe()
    );
    let arms = arms
        .iter()
        .map(|(index, expression)| quote!(#index => #expression,));
    signature(quote! {
        match method {
            #(#arms)*
            _ => Err(pajamax::Status::unimplemented(format!(#no_such_method))),
        }
    })
}
