//! What the templates are written from: a service and its methods with
//! their Rust names and types, doc comment helpers, and the problems met on
//! the way (build-time warnings, and errors for the generated code).

use crate::ident;
use proc_macro2::{Ident, Literal, TokenStream};
use prost_build::{Comments, Method, Service};
use quote::{format_ident, quote};
use std::collections::HashMap;

/// How a method's messages flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One request, one answer.
    Unary,
    /// One request, a stream of answers.
    ServerStreaming,
    /// A stream of requests, one answer.
    ClientStreaming,
    /// A stream each way.
    BidiStreaming,
}

impl Kind {
    pub(crate) fn of(method: &Method) -> Kind {
        match (method.client_streaming, method.server_streaming) {
            (false, false) => Kind::Unary,
            (false, true) => Kind::ServerStreaming,
            (true, false) => Kind::ClientStreaming,
            (true, true) => Kind::BidiStreaming,
        }
    }

    /// The `pajamax::MethodKind` variant.
    pub(crate) fn method_kind(self) -> TokenStream {
        match self {
            Kind::Unary => quote!(pajamax::MethodKind::Unary),
            Kind::ServerStreaming => quote!(pajamax::MethodKind::ServerStreaming),
            Kind::ClientStreaming => quote!(pajamax::MethodKind::ClientStreaming),
            Kind::BidiStreaming => quote!(pajamax::MethodKind::BidiStreaming),
        }
    }

    /// The kind in words, as in "a {} method".
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::Unary => "unary",
            Kind::ServerStreaming => "server-streaming",
            Kind::ClientStreaming => "client-streaming",
            Kind::BidiStreaming => "bidirectional-streaming",
        }
    }
}

/// A proto method as the templates see it.
pub(crate) struct MethodCode<'a> {
    pub(crate) proto: &'a Method,
    /// Its number: its index in `METHODS`.
    pub(crate) index: usize,
    pub(crate) kind: Kind,
    /// `helloworld.Greeter/SayHello`, for messages.
    pub(crate) route: String,
    /// `say_hello`, or `r#type` for a keyword.
    pub(crate) name: Ident,
    /// `say_hello_with_context`.
    pub(crate) context_name: Ident,
    /// `SayHello`: its variant of the request and answer enums in dispatch
    /// mode.
    pub(crate) variant: Ident,
    /// The request type as seen from the server module.
    pub(crate) input: syn::Type,
    /// The answer type as seen from the server module.
    pub(crate) output: syn::Type,
    /// The request is `google.protobuf.Empty`, which prost maps to `()`.
    pub(crate) input_is_unit: bool,
    /// The answer is `google.protobuf.Empty`.
    pub(crate) output_is_unit: bool,
}

impl MethodCode<'_> {
    /// The method number as a match pattern.
    pub(crate) fn index_literal(&self) -> Literal {
        Literal::usize_unsuffixed(self.index)
    }

    /// The expression that passes the decoded request on: unit is written
    /// as a literal, which clippy prefers to a unit variable.
    pub(crate) fn argument(&self) -> TokenStream {
        if self.input_is_unit {
            quote!(())
        } else {
            quote!(request)
        }
    }

    /// Statements that decode the request bytes in `request` into a
    /// `request` of the input type (nothing is bound for unit).
    pub(crate) fn decode(&self) -> TokenStream {
        let input = &self.input;
        if self.input_is_unit {
            quote!(pajamax::decode_request::<()>(request)?;)
        } else {
            quote! {
                let mut decoded = <#input as ::core::default::Default>::default();
                pajamax::decode_request_into(&mut decoded, request)?;
                let request = decoded;
            }
        }
    }

    /// The status of a method left unimplemented.
    pub(crate) fn unimplemented(&self) -> TokenStream {
        let text = format!("{} is not implemented", self.route);
        quote!(pajamax::Status::unimplemented(#text))
    }

    /// A doc link to the plain trait method; raw identifiers are left
    /// unlinked, as doc links do not take them everywhere.
    pub(crate) fn doc_link(&self) -> String {
        let name = self.name.to_string();
        match name.strip_prefix("r#") {
            Some(bare) => format!("`{bare}`"),
            None => format!("[`{name}`](Self::{name})"),
        }
    }
}

/// Everything the server module of one service is written from.
pub(crate) struct ServiceCode<'a> {
    pub(crate) service: &'a Service,
    /// `helloworld.Greeter`.
    pub(crate) full_name: String,
    /// `greeter_server`.
    pub(crate) module: Ident,
    /// `Greeter`: the service name as prost writes it, the name of the
    /// local-mode trait.
    pub(crate) base: String,
    /// What the other names start with: `base` without the `_` prost
    /// puts after a keyword (`Self_` gives `Self`), so that they are camel
    /// case (`SelfServer`, not `Self_Server`).
    pub(crate) stem: String,
    /// `GreeterServer`.
    pub(crate) server: Ident,
    /// The methods that have Rust names and types, in proto order.
    pub(crate) methods: Vec<MethodCode<'a>>,
    /// What could not be served or generated.
    pub(crate) problems: Problems,
}

impl<'a> ServiceCode<'a> {
    pub(crate) fn new(service: &'a Service) -> ServiceCode<'a> {
        let full_name = super::full_service_name(service);
        let mut problems = Problems::default();
        let methods = service
            .methods
            .iter()
            .enumerate()
            .filter_map(|(index, method)| {
                let route = format!("{full_name}/{}", method.proto_name);
                match method_code(index, method, route.clone()) {
                    Ok(code) => Some(code),
                    Err(why) => {
                        problems.warn(&route, format!("{why}; its calls answer UNIMPLEMENTED"));
                        None
                    }
                }
            })
            .collect();
        ServiceCode {
            service,
            module: format_ident!("{}", ident::server_module_name(&service.proto_name)),
            base: service.name.clone(),
            stem: name_stem(&service.name).to_owned(),
            server: format_ident!("{}Server", name_stem(&service.name)),
            full_name,
            methods,
            problems,
        }
    }

    /// The name of the local-mode trait: the service name as prost writes
    /// it, `Greeter` (`Self_` for a service named `Self`).
    pub(crate) fn trait_name(&self) -> Ident {
        format_ident!("{}", self.base)
    }

    /// A name made of the service name and `suffix`: `GreeterShard`.
    pub(crate) fn named(&self, suffix: &str) -> Ident {
        format_ident!("{}{suffix}", self.stem)
    }
}

/// The first name of the service's items that is no Rust identifier (the
/// trait as prost names the service, or the module), for a service named
/// such as `_` or `_0`; `None` when every name is one.
pub(crate) fn unnamed_item(service: &Service) -> Option<String> {
    [
        service.name.clone(),
        ident::server_module_name(&service.proto_name),
    ]
    .into_iter()
    .find(|name| syn::parse_str::<Ident>(name).is_err())
}

/// The start of the names made from a service name as prost writes it:
/// without the `_` prost puts after a keyword (prost's camel case names end
/// with `_` for no other reason).
fn name_stem(name: &str) -> &str {
    name.strip_suffix('_').unwrap_or(name)
}

/// The Rust side of one proto method, or why it has none.
fn method_code(index: usize, method: &Method, route: String) -> Result<MethodCode<'_>, String> {
    let rust_ident = |name: String| {
        syn::parse_str::<Ident>(&name)
            .map_err(|_| format!("its name gives no Rust identifier (`{name}`)"))
    };
    let rust_type = |path: &str| {
        let path = super::type_path(path);
        syn::parse_str::<syn::Type>(&path)
            .map_err(|_| format!("its type `{path}` is not a Rust type"))
    };
    Ok(MethodCode {
        proto: method,
        index,
        kind: Kind::of(method),
        route,
        name: rust_ident(ident::method_name(&method.proto_name))?,
        context_name: rust_ident(ident::context_method_name(&method.proto_name))?,
        variant: rust_ident(ident::variant_name(&method.proto_name))?,
        input: rust_type(&method.input_type)?,
        output: rust_type(&method.output_type)?,
        input_is_unit: method.input_type == "()",
        output_is_unit: method.output_type == "()",
    })
}

/// What a service's code could not do.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    /// Lines for `cargo:warning=`.
    pub(crate) warnings: Vec<String>,
    /// Messages of the `compile_error!`s written into the module.
    pub(crate) errors: Vec<String>,
}

impl Problems {
    /// A method `route` (`package.Service/Method`) that is not served as
    /// the proto says.
    pub(crate) fn warn(&mut self, route: &str, text: impl AsRef<str>) {
        self.warnings
            .push(format!("pajamax-build: {route}: {}", text.as_ref()));
    }

    /// A problem that keeps the generated code from compiling: a warning
    /// now, and `error` when the code is compiled.
    pub(crate) fn fail(&mut self, route: &str, text: impl AsRef<str>, error: String) {
        self.warn(
            route,
            format!("{}; the generated code does not compile", text.as_ref()),
        );
        self.errors.push(error);
    }

    /// Reports every Rust name that more than one method of `full_name`
    /// gives (names are `(route, name)`): the code would not compile, so a
    /// `compile_error!` says why instead of leaving the user with a puzzle.
    pub(crate) fn check_clashes<'m>(
        &mut self,
        full_name: &str,
        names: impl IntoIterator<Item = (&'m str, String)>,
    ) {
        let mut owners: HashMap<String, &str> = HashMap::new();
        for (route, name) in names {
            match owners.get(&name) {
                Some(&first) if first != route => self.fail(
                    route,
                    format!("its Rust name `{name}` is also that of {first}"),
                    format!(
                        "pajamax-build: two methods of {full_name} map to the Rust name `{name}`"
                    ),
                ),
                Some(_) => {}
                None => {
                    owners.insert(name, route);
                }
            }
        }
    }

    /// Adds `other`'s problems after these.
    pub(crate) fn extend(&mut self, other: Problems) {
        self.warnings.extend(other.warnings);
        self.errors.extend(other.errors);
    }
}

/// The width that generated doc text is wrapped to.
const DOC_WIDTH: usize = 80;

/// `#[doc]` attributes for `text`, a small Markdown: paragraphs are
/// separated by empty lines and wrapped to [`DOC_WIDTH`], `- ` starts a list
/// item, and a `#` heading stays on its own line.
pub(crate) fn doc(text: &str) -> TokenStream {
    let lines = wrap(text).into_iter().map(|line| {
        if line.is_empty() {
            line
        } else {
            format!(" {line}")
        }
    });
    quote!(#(#[doc = #lines])*)
}

/// The lines of `text`, as [`doc`] describes.
fn wrap(text: &str) -> Vec<String> {
    /// A run of words written with `first` before its first line and
    /// `rest` before the others.
    struct Block {
        first: &'static str,
        rest: &'static str,
        words: String,
        wrap: bool,
    }
    let mut lines = Vec::new();
    for (i, paragraph) in text.split("\n\n").enumerate() {
        if i > 0 {
            lines.push(String::new());
        }
        let mut blocks: Vec<Block> = Vec::new();
        for line in paragraph.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(item) = line.strip_prefix("- ") {
                blocks.push(Block {
                    first: "- ",
                    rest: "  ",
                    words: item.to_owned(),
                    wrap: true,
                });
            } else if line.starts_with('#') {
                blocks.push(Block {
                    first: "",
                    rest: "",
                    words: line.to_owned(),
                    wrap: false,
                });
            } else if let Some(last) = blocks.last_mut().filter(|b| b.wrap) {
                last.words.push(' ');
                last.words.push_str(line);
            } else {
                blocks.push(Block {
                    first: "",
                    rest: "",
                    words: line.to_owned(),
                    wrap: true,
                });
            }
        }
        for block in blocks {
            if !block.wrap {
                lines.push(block.words);
                continue;
            }
            let mut line = block.first.to_owned();
            let mut empty = true;
            for word in block.words.split_whitespace() {
                if !empty && line.len() + 1 + word.len() > DOC_WIDTH {
                    lines.push(std::mem::replace(&mut line, block.rest.to_owned()));
                    empty = true;
                }
                if !empty {
                    line.push(' ');
                }
                line.push_str(word);
                empty = false;
            }
            lines.push(line);
        }
    }
    lines
}

/// The proto comments of an item as `#[doc]` attributes, then an empty doc
/// line when there were any, so that generated text follows as its own
/// paragraph. prost-build's own rendering is used, so the comments read as
/// they do on the messages.
pub(crate) fn proto_doc(comments: &Comments) -> TokenStream {
    if comments.leading.is_empty() && comments.trailing.is_empty() {
        return TokenStream::new();
    }
    // Detached comments are not about this item; leave them out.
    let item_comments = Comments {
        leading_detached: Vec::new(),
        leading: comments.leading.clone(),
        trailing: comments.trailing.clone(),
    };
    let mut rendered = String::new();
    item_comments.append_with_indent(0, &mut rendered);
    let lines = rendered
        .lines()
        .filter_map(|line| line.strip_prefix("///"))
        .map(str::to_owned)
        .chain(std::iter::once(String::new()));
    quote!(#(#[doc = #lines])*)
}
