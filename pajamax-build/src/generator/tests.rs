//! The generated code, parsed back with `syn`: its items and signatures
//! per kind of method and mode, its docs, and what it reports.

use super::*;
use prost_build::{Comments, Method};
use quote::ToTokens;
use syn::{
    Attribute, FnArg, ImplItem, Item, ItemEnum, ItemImpl, ItemMod, ItemStruct, ItemTrait,
    ReturnType, TraitItem, Visibility,
};

fn method(proto_name: &str, input: &str, output: &str) -> Method {
    Method {
        name: crate::ident::method_name(proto_name),
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

fn server_streaming(proto_name: &str, input: &str, output: &str) -> Method {
    Method {
        server_streaming: true,
        ..method(proto_name, input, output)
    }
}

fn client_streaming(proto_name: &str, input: &str, output: &str) -> Method {
    Method {
        client_streaming: true,
        ..method(proto_name, input, output)
    }
}

fn bidi_streaming(proto_name: &str, input: &str, output: &str) -> Method {
    Method {
        client_streaming: true,
        server_streaming: true,
        ..method(proto_name, input, output)
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

/// `routeguide.RouteGuide`, one method of each kind.
fn route_guide() -> Service {
    let mut get = method("GetFeature", "Point", "Feature");
    get.comments.leading = vec![" Obtains the feature at a given position.".to_owned()];
    let mut guide = service(
        "routeguide",
        "RouteGuide",
        vec![
            get,
            server_streaming("ListFeatures", "Rectangle", "Feature"),
            client_streaming("RecordRoute", "Point", "RouteSummary"),
            bidi_streaming("RouteChat", "RouteNote", "RouteNote"),
        ],
    );
    guide.comments.leading = vec![" Interface exported by the server.".to_owned()];
    guide
}

/// `dict_store.DictStore` with a unary and a server-streaming method.
fn dict_store() -> Service {
    let mut get = method("Get", "Key", "Value");
    get.comments.leading = vec![" Reads a key.".to_owned()];
    service(
        "dict_store",
        "DictStore",
        vec![get, server_streaming("Watch", "Key", "Value")],
    )
}

/// The generated code of `service` in `mode`, its module parsed, and the
/// warnings.
struct Output {
    code: String,
    module: ItemMod,
    warnings: Vec<String>,
}

fn generate(service: &Service, mode: ServiceMode) -> Output {
    let Generated { code, warnings } = generate_service(service, mode);
    let file = syn::parse_file(&code).unwrap_or_else(|err| panic!("{err}\n{code}"));
    let [Item::Mod(module)] = &file.items[..] else {
        panic!("one module expected in\n{code}")
    };
    Output {
        module: module.clone(),
        code,
        warnings,
    }
}

fn local(service: &Service) -> Output {
    generate(service, ServiceMode::Local)
}

fn dispatched(service: &Service) -> Output {
    generate(service, ServiceMode::Dispatch)
}

/// Tokens as text without spaces nor the trailing commas the formatter
/// adds to lists it breaks over lines, to compare types and code.
fn compact(tokens: impl ToTokens) -> String {
    compact_code(&tokens.to_token_stream().to_string())
}

/// Code as text, as [`compact`] gives it.
fn compact_code(code: &str) -> String {
    let mut text: String = code.split_whitespace().collect();
    for close in [">", ")", "]", "}"] {
        text = text.replace(&format!(",{close}"), close);
    }
    text
}

impl Output {
    fn items(&self) -> &[Item] {
        &self.module.content.as_ref().expect("an inline module").1
    }

    fn item_trait(&self, name: &str) -> &ItemTrait {
        self.items()
            .iter()
            .find_map(|item| match item {
                Item::Trait(t) if t.ident == name => Some(t),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no trait {name} in\n{}", self.code))
    }

    fn item_enum(&self, name: &str) -> &ItemEnum {
        self.items()
            .iter()
            .find_map(|item| match item {
                Item::Enum(e) if e.ident == name => Some(e),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no enum {name} in\n{}", self.code))
    }

    fn item_struct(&self, name: &str) -> &ItemStruct {
        self.items()
            .iter()
            .find_map(|item| match item {
                Item::Struct(s) if s.ident == name => Some(s),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no struct {name} in\n{}", self.code))
    }

    /// The impl of `trait_name` (its last path segment), or the inherent
    /// impl for `None`, on type `self_ty`.
    fn item_impl(&self, trait_name: Option<&str>, self_ty: &str) -> &ItemImpl {
        self.items()
            .iter()
            .find_map(|item| match item {
                Item::Impl(i)
                    if i.trait_
                        .as_ref()
                        .map(|(_, path, _)| path.segments.last().unwrap().ident.to_string())
                        == trait_name.map(str::to_owned)
                        && compact(&i.self_ty).starts_with(self_ty) =>
                {
                    Some(i)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no impl {trait_name:?} for {self_ty} in\n{}", self.code))
    }

    /// The `pajamax::Service` impl of the server.
    fn service_impl(&self, server: &str) -> &ItemImpl {
        self.item_impl(Some("Service"), server)
    }

    /// The `compile_error!` messages at the top of the module.
    fn compile_errors(&self) -> Vec<String> {
        self.items()
            .iter()
            .filter_map(|item| match item {
                Item::Macro(m) if m.mac.path.segments.last().unwrap().ident == "compile_error" => {
                    let message: syn::LitStr = m.mac.parse_body().unwrap();
                    Some(message.value())
                }
                _ => None,
            })
            .collect()
    }

    fn has_warning(&self, expected: &str) -> bool {
        self.warnings.iter().any(|w| w == expected)
    }
}

/// A function's signature: its arguments after `self` (`name: type`) and
/// its return type, without spaces.
struct Signature {
    receiver: String,
    args: Vec<String>,
    output: String,
}

fn signature(sig: &syn::Signature) -> Signature {
    let mut receiver = String::new();
    let mut args = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(r) => receiver = compact(r),
            FnArg::Typed(t) => args.push(format!("{}:{}", compact(&t.pat), compact(&t.ty))),
        }
    }
    let output = match &sig.output {
        ReturnType::Default => String::new(),
        ReturnType::Type(_, ty) => compact(ty),
    };
    Signature {
        receiver,
        args,
        output,
    }
}

fn trait_methods(t: &ItemTrait) -> Vec<(String, Signature)> {
    t.items
        .iter()
        .filter_map(|item| match item {
            TraitItem::Fn(f) => Some((f.sig.ident.to_string(), signature(&f.sig))),
            _ => None,
        })
        .collect()
}

fn impl_fns(i: &ItemImpl) -> Vec<&syn::ImplItemFn> {
    i.items
        .iter()
        .filter_map(|item| match item {
            ImplItem::Fn(f) => Some(f),
            _ => None,
        })
        .collect()
}

fn impl_fn_names(i: &ItemImpl) -> Vec<String> {
    impl_fns(i)
        .iter()
        .map(|f| f.sig.ident.to_string())
        .collect()
}

fn impl_fn<'i>(i: &'i ItemImpl, name: &str) -> &'i syn::ImplItemFn {
    impl_fns(i)
        .into_iter()
        .find(|f| f.sig.ident == name)
        .unwrap_or_else(|| panic!("no fn {name}"))
}

/// The method numbers an entry point routes: the literal patterns of its
/// outermost `match method`.
fn routed(f: &syn::ImplItemFn) -> Vec<usize> {
    let Some(syn::Stmt::Expr(syn::Expr::Match(m), None)) = f.block.stmts.last() else {
        panic!("{} does not end in a match", f.sig.ident)
    };
    m.arms
        .iter()
        .filter_map(|arm| match &arm.pat {
            syn::Pat::Lit(lit) => Some(compact(lit).parse().unwrap()),
            _ => None,
        })
        .collect()
}

fn variants(e: &ItemEnum) -> Vec<(String, String)> {
    e.variants
        .iter()
        .map(|v| (v.ident.to_string(), compact(&v.fields)))
        .collect()
}

fn doc_text(attrs: &[Attribute]) -> String {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => s.value(),
                _ => panic!("a doc string"),
            },
            _ => panic!("a doc string"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const RESULT: &str = "::core::result::Result";

#[test]
fn local_mode_has_a_handler_pair_per_method_of_each_kind() {
    let out = local(&route_guide());
    assert_eq!(out.module.ident, "route_guide_server");
    let handlers = trait_methods(out.item_trait("RouteGuide"));
    let names: Vec<&str> = handlers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "get_feature",
            "get_feature_with_context",
            "list_features",
            "list_features_with_context",
            "record_route",
            "record_route_with_context",
            "route_chat",
            "route_chat_with_context",
        ]
    );
    let ctx = "ctx:&mutpajamax::Context<'_>";
    let expected: [(&[&str], String); 8] = [
        (
            &["request:super::Point"],
            format!("{RESULT}<super::Feature,pajamax::Status>"),
        ),
        (
            &[ctx, "request:super::Point"],
            format!("{RESULT}<super::Feature,pajamax::Status>"),
        ),
        (
            &["request:super::Rectangle"],
            format!("{RESULT}<pajamax::ServerStream<super::Feature>,pajamax::Status>"),
        ),
        (
            &[ctx, "request:super::Rectangle"],
            format!("{RESULT}<pajamax::ServerStream<super::Feature>,pajamax::Status>"),
        ),
        (
            &[],
            format!(
                "{RESULT}<pajamax::ClientStream<super::Point,super::RouteSummary>,pajamax::Status>"
            ),
        ),
        (
            &[ctx],
            format!(
                "{RESULT}<pajamax::ClientStream<super::Point,super::RouteSummary>,pajamax::Status>"
            ),
        ),
        (
            &[],
            format!(
                "{RESULT}<pajamax::BidiStream<super::RouteNote,super::RouteNote>,pajamax::Status>"
            ),
        ),
        (
            &[ctx],
            format!(
                "{RESULT}<pajamax::BidiStream<super::RouteNote,super::RouteNote>,pajamax::Status>"
            ),
        ),
    ];
    for ((name, sig), (args, output)) in handlers.iter().zip(expected) {
        assert_eq!(sig.receiver, "&self", "{name}");
        assert_eq!(sig.args, args, "{name}");
        assert_eq!(sig.output, output, "{name}");
    }
    // Every handler has a default.
    for item in &out.item_trait("RouteGuide").items {
        let TraitItem::Fn(f) = item else { continue };
        assert!(f.default.is_some(), "{} has no default", f.sig.ident);
    }
    let supertraits = compact(&out.item_trait("RouteGuide").supertraits);
    // By path: a service may be named `Send` or `Sync`.
    assert_eq!(
        supertraits,
        "::core::marker::Send+::core::marker::Sync+'static"
    );
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert!(out.compile_errors().is_empty());
}

#[test]
fn local_mode_serves_each_kind_through_its_entry_point() {
    let out = local(&route_guide());
    let service = out.service_impl("RouteGuideServer");
    assert_eq!(compact(&service.generics), "<T:RouteGuide>");
    assert_eq!(
        impl_fn_names(service),
        [
            "name",
            "methods",
            "unary",
            "server_streaming",
            "client_streaming",
            "bidi_streaming"
        ]
    );
    let entry = |name| impl_fn(service, name);
    assert_eq!(routed(entry("unary")), [0]);
    assert_eq!(routed(entry("server_streaming")), [1]);
    assert_eq!(routed(entry("client_streaming")), [2]);
    assert_eq!(routed(entry("bidi_streaming")), [3]);

    let sig = signature(&entry("unary").sig);
    assert_eq!(
        sig.args,
        [
            "method:usize",
            "ctx:&mutpajamax::Context<'_>",
            "request:&[u8]",
            "reply:&mutpajamax::Reply<'_>"
        ]
    );
    assert_eq!(sig.output, format!("{RESULT}<(),pajamax::Status>"));
    let sig = signature(&entry("server_streaming").sig);
    assert_eq!(
        sig.args,
        [
            "method:usize",
            "ctx:&mutpajamax::Context<'_>",
            "request:&[u8]"
        ]
    );
    assert_eq!(
        sig.output,
        format!("{RESULT}<pajamax::RawServerStream,pajamax::Status>")
    );
    for name in ["client_streaming", "bidi_streaming"] {
        let sig = signature(&entry(name).sig);
        assert_eq!(sig.args, ["method:usize", "ctx:&mutpajamax::Context<'_>"]);
        assert_eq!(
            sig.output,
            format!("{RESULT}<pajamax::RawInbound,pajamax::Status>")
        );
    }

    // Each entry point calls the `_with_context` handler and passes the
    // stream on untyped.
    let body = |name| compact(&entry(name).block);
    assert!(body("unary").contains(
        "letmutdecoded=<super::Pointas::core::default::Default>::default();\
         pajamax::decode_request_into(&mutdecoded,request)?;\
         letrequest=decoded;\
         letanswer=self.inner.get_feature_with_context(ctx,request)?;\
         reply.encode(&answer);"
    ));
    assert!(body("server_streaming").contains(
        "letmutdecoded=<super::Rectangleas::core::default::Default>::default();\
         pajamax::decode_request_into(&mutdecoded,request)?;\
         letrequest=decoded;\
         letstream=self.inner.list_features_with_context(ctx,request)?;\
         Ok(stream.into_raw())"
    ));
    assert!(body("client_streaming")
        .contains("letstream=self.inner.record_route_with_context(ctx)?;Ok(stream.into_raw())"));
    assert!(body("bidi_streaming")
        .contains("letstream=self.inner.route_chat_with_context(ctx)?;Ok(stream.into_raw())"));
    // A number that is no method of the kind answers UNIMPLEMENTED.
    assert!(body("client_streaming").contains(
        "_=>{Err(pajamax::Status::unimplemented(format!(\
         \"{SERVICE_NAME}hasnoclient-streamingmethodnumber{method}\")))}"
    ));
}

#[test]
fn methods_lists_every_method_with_its_kind_in_proto_order() {
    for out in [local(&route_guide()), dispatched(&route_guide())] {
        let methods = out
            .items()
            .iter()
            .find_map(|item| match item {
                Item::Const(c) if c.ident == "METHODS" => Some(compact(&c.expr)),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            methods,
            "&[\
             pajamax::Method{name:\"GetFeature\",kind:pajamax::MethodKind::Unary},\
             pajamax::Method{name:\"ListFeatures\",kind:pajamax::MethodKind::ServerStreaming},\
             pajamax::Method{name:\"RecordRoute\",kind:pajamax::MethodKind::ClientStreaming},\
             pajamax::Method{name:\"RouteChat\",kind:pajamax::MethodKind::BidiStreaming}]"
        );
        assert!(compact_code(&out.code)
            .contains("pubconstSERVICE_NAME:&str=\"routeguide.RouteGuide\";"));
    }
}

#[test]
fn the_service_impl_has_only_the_entry_points_of_its_kinds() {
    let cases: [(Vec<Method>, &[&str]); 4] = [
        (vec![method("Get", "A", "B")], &["unary"]),
        (
            vec![server_streaming("Watch", "A", "B")],
            &["server_streaming"],
        ),
        (
            vec![
                client_streaming("Up", "A", "B"),
                bidi_streaming("Chat", "A", "B"),
            ],
            &["client_streaming", "bidi_streaming"],
        ),
        (Vec::new(), &[]),
    ];
    for (methods, entry_points) in cases {
        let svc = service("some", "Thing", methods);
        for out in [local(&svc), dispatched(&svc)] {
            let names = impl_fn_names(out.service_impl("ThingServer"));
            assert_eq!(names[..2], ["name", "methods"]);
            assert_eq!(names[2..], *entry_points, "in\n{}", out.code);
        }
    }
}

#[test]
fn local_mode_warns_of_nothing_it_serves() {
    let out = local(&route_guide());
    assert!(out.warnings.is_empty());
    // And says nothing of streaming being unsupported.
    assert!(!out.code.contains("not supported"), "{}", out.code);
    assert!(!out.code.contains("not served"), "{}", out.code);
}

#[test]
fn the_trait_explains_the_kinds_it_has() {
    let out = local(&route_guide());
    let docs = doc_text(&out.item_trait("RouteGuide").attrs);
    assert!(
        docs.starts_with(" Interface exported by the server.\n\n"),
        "{docs}"
    );
    for link in [
        "(pajamax::ServerStream::iter)",
        "(pajamax::ServerStream::channel)",
        "(pajamax::ClientStream::on_worker)",
        "(pajamax::ClientStream::channel)",
        "(pajamax::BidiStream::on_worker)",
        "(pajamax::BidiStream::channel)",
    ] {
        assert!(docs.contains(link), "no {link} in {docs}");
    }
    // Only the kinds the service has.
    let greeter = local(&service(
        "helloworld",
        "Greeter",
        vec![method("SayHello", "A", "B")],
    ));
    let docs = doc_text(&greeter.item_trait("Greeter").attrs);
    assert!(
        docs.contains("A unary method returns its answer."),
        "{docs}"
    );
    assert!(!docs.contains("ServerStream"), "{docs}");
    assert!(!docs.contains("BidiStream"), "{docs}");
}

#[test]
fn dispatch_mode_has_the_expected_items() {
    let out = dispatched(&dict_store());
    assert_eq!(out.module.ident, "dict_store_server");
    assert_eq!(
        variants(out.item_enum("DictStoreRequest")),
        [
            ("Get".to_owned(), "(super::Key)".to_owned()),
            ("Watch".to_owned(), "(super::Key)".to_owned()),
        ]
    );
    assert_eq!(
        variants(out.item_enum("DictStoreAnswer")),
        [
            ("Get".to_owned(), "(pajamax::Responder)".to_owned()),
            (
                "Watch".to_owned(),
                "(pajamax::Sink<super::Value>)".to_owned()
            ),
        ]
    );
    assert!(matches!(
        out.item_enum("DictStoreAnswer").vis,
        Visibility::Public(_)
    ));

    // The call: a public request, and a private answer.
    let call = out.item_struct("DictStoreCall");
    let fields: Vec<(String, bool, String)> = call
        .fields
        .iter()
        .map(|f| {
            (
                f.ident.as_ref().unwrap().to_string(),
                matches!(f.vis, Visibility::Public(_)),
                compact(&f.ty),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("request".to_owned(), true, "DictStoreRequest".to_owned()),
            ("answer".to_owned(), false, "DictStoreAnswer".to_owned()),
        ]
    );
    let call_impl = out.item_impl(None, "DictStoreCall");
    assert_eq!(
        impl_fn_names(call_impl),
        ["handle", "trailers_mut", "is_cancelled", "into_parts"]
    );
    let sig = signature(&impl_fn(call_impl, "handle").sig);
    assert_eq!(
        (sig.receiver.as_str(), &sig.args[..]),
        ("self", &["shard:&mutS".to_owned()][..])
    );
    let sig = signature(&impl_fn(call_impl, "into_parts").sig);
    assert_eq!(sig.output, "(DictStoreRequest,DictStoreAnswer)");
    let sig = signature(&impl_fn(call_impl, "trailers_mut").sig);
    assert_eq!(sig.output, "&mutpajamax::Metadata");
    // handle runs the shard method with the matching answer.
    let handle = compact(&impl_fn(call_impl, "handle").block);
    assert!(handle.contains(
        "(DictStoreRequest::Get(request),DictStoreAnswer::Get(responder))=>{responder.respond(shard.get(request));}"
    ), "{handle}");
    assert!(handle.contains(
        "(DictStoreRequest::Watch(request),DictStoreAnswer::Watch(sink))=>{shard.watch(request,sink);}"
    ), "{handle}");
    // A call that ended while it waited runs no handler.
    assert!(
        handle.starts_with("{ifself.answer.is_cancelled(){return;}"),
        "{handle}"
    );
    // A request replaced by one of another method still ends the call.
    assert!(
        handle.contains("(_,answer)=>{answer.fail(pajamax::Status::internal("),
        "{handle}"
    );
    let answer_impl = out.item_impl(None, "DictStoreAnswer");
    assert_eq!(
        impl_fn_names(answer_impl),
        ["fail", "trailers_mut", "is_cancelled"]
    );
    let cancelled = compact(&impl_fn(answer_impl, "is_cancelled").block);
    assert!(cancelled.contains("Self::Get(responder)=>responder.is_cancelled()"));
    assert!(cancelled.contains("Self::Watch(sink)=>sink.is_cancelled()"));
    let fail = compact(&impl_fn(answer_impl, "fail").block);
    assert!(fail.contains("Self::Get(responder)=>responder.respond::<()>(Err(status))"));
    assert!(fail.contains("Self::Watch(sink)=>sink.finish(Err(status))"));

    // The shard's handlers take `&mut self`; a server-streaming one gets
    // the sink and returns nothing.
    let shard = trait_methods(out.item_trait("DictStoreShard"));
    let [(get, get_sig), (watch, watch_sig)] = &shard[..] else {
        panic!("two shard methods expected")
    };
    assert_eq!((get.as_str(), watch.as_str()), ("get", "watch"));
    assert_eq!(get_sig.receiver, "&mutself");
    assert_eq!(get_sig.args, ["request:super::Key"]);
    assert_eq!(
        get_sig.output,
        format!("{RESULT}<super::Value,pajamax::Status>")
    );
    assert_eq!(watch_sig.receiver, "&mutself");
    assert_eq!(
        watch_sig.args,
        ["request:super::Key", "sink:pajamax::Sink<super::Value>"]
    );
    assert_eq!(watch_sig.output, "");
    let watch_default = out
        .item_trait("DictStoreShard")
        .items
        .iter()
        .find_map(|item| match item {
            TraitItem::Fn(f) if f.sig.ident == "watch" => f.default.as_ref(),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        compact(watch_default),
        compact_code(
            "{ sink.finish(Err(pajamax::Status::unimplemented(\
             \"dict_store.DictStore/Watch is not implemented\"))); }"
        )
    );

    let dispatch = trait_methods(out.item_trait("DictStoreDispatch"));
    assert_eq!(dispatch.len(), 1);
    assert_eq!(dispatch[0].0, "dispatch_to");
    assert_eq!(dispatch[0].1.args, ["request:&DictStoreRequest"]);
    assert_eq!(
        dispatch[0].1.output,
        "&pajamax::dispatch::Sender<DictStoreCall>"
    );

    // Nothing of local mode is written, and nothing is reported.
    assert!(!out.code.contains("_with_context"));
    assert!(!out
        .items()
        .iter()
        .any(|item| matches!(item, Item::Trait(t) if t.ident == "DictStore")));
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert!(out.compile_errors().is_empty());
}

#[test]
fn dispatch_mode_queues_unary_and_server_streaming_calls() {
    let out = dispatched(&dict_store());
    let service = out.service_impl("DictStoreServer");
    assert_eq!(compact(&service.generics), "<D:DictStoreDispatch>");
    assert_eq!(
        impl_fn_names(service),
        ["name", "methods", "unary", "server_streaming"]
    );
    let unary = impl_fn(service, "unary");
    assert_eq!(routed(unary), [0]);
    // The reply is not used: the answer comes through the responder.
    assert_eq!(
        signature(&unary.sig).args[3],
        "_reply:&mutpajamax::Reply<'_>"
    );
    assert!(compact(&unary.block).contains(
        "letrequest=DictStoreRequest::Get(pajamax::decode_request(request)?);\
         letsender=self.dispatch.dispatch_to(&request);\
         letanswer=DictStoreAnswer::Get(ctx.defer());\
         letcall=DictStoreCall{request,answer};\
         ifcall.is_cancelled(){drop(call);}\
         elseifletErr((status,call))=sender.try_dispatch(call){call.answer.fail(status);}\
         Ok(())"
    ));
    let streaming = impl_fn(service, "server_streaming");
    assert_eq!(routed(streaming), [1]);
    // The stream is returned whether or not the call could be queued: a
    // call that could not has its sink finished with the reason.
    assert!(compact(&streaming.block).contains(
        "letrequest=DictStoreRequest::Watch(pajamax::decode_request(request)?);\
         letsender=self.dispatch.dispatch_to(&request);\
         let(stream,sink)=pajamax::ServerStream::channel(ctx);\
         letanswer=DictStoreAnswer::Watch(sink);\
         letcall=DictStoreCall{request,answer};\
         ifcall.is_cancelled(){drop(call);}\
         elseifletErr((status,call))=sender.try_dispatch(call){call.answer.fail(status);}\
         Ok(stream.into_raw())"
    ));
}

#[test]
fn dispatch_mode_queues_client_and_bidi_streaming_calls() {
    let out = dispatched(&route_guide());
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert!(out.compile_errors().is_empty());
    let service = out.service_impl("RouteGuideServer");
    assert_eq!(
        impl_fn_names(service),
        [
            "name",
            "methods",
            "unary",
            "server_streaming",
            "client_streaming",
            "bidi_streaming"
        ]
    );
    // The call is queued with its stream of requests as soon as it opens;
    // the stream is returned whether or not it could be, as for a server
    // stream.
    let client = impl_fn(service, "client_streaming");
    assert_eq!(routed(client), [2]);
    assert_eq!(
        signature(&client.sig).args[1],
        "ctx:&mutpajamax::Context<'_>"
    );
    assert!(compact(&client.block).contains(
        "let(stream,requests,responder)=\
         pajamax::ClientStream::<super::Point,super::RouteSummary>::channel(ctx);\
         letrequest=RouteGuideRequest::RecordRoute(requests);\
         letsender=self.dispatch.dispatch_to(&request);\
         letanswer=RouteGuideAnswer::RecordRoute(responder);\
         letcall=RouteGuideCall{request,answer};\
         ifcall.is_cancelled(){drop(call);}\
         elseifletErr((status,call))=sender.try_dispatch(call){call.answer.fail(status);}\
         Ok(stream.into_raw())"
    ));
    let bidi = impl_fn(service, "bidi_streaming");
    assert_eq!(routed(bidi), [3]);
    assert!(compact(&bidi.block).contains(
        "let(stream,requests,sink)=\
         pajamax::BidiStream::<super::RouteNote,super::RouteNote>::channel(ctx);\
         letrequest=RouteGuideRequest::RouteChat(requests);\
         letsender=self.dispatch.dispatch_to(&request);\
         letanswer=RouteGuideAnswer::RouteChat(sink);\
         letcall=RouteGuideCall{request,answer};\
         ifcall.is_cancelled(){drop(call);}\
         elseifletErr((status,call))=sender.try_dispatch(call){call.answer.fail(status);}\
         Ok(stream.into_raw())"
    ));
    assert_eq!(
        variants(out.item_enum("RouteGuideRequest")),
        [
            ("GetFeature".to_owned(), "(super::Point)".to_owned()),
            ("ListFeatures".to_owned(), "(super::Rectangle)".to_owned()),
            (
                "RecordRoute".to_owned(),
                "(pajamax::Streaming<super::Point>)".to_owned()
            ),
            (
                "RouteChat".to_owned(),
                "(pajamax::Streaming<super::RouteNote>)".to_owned()
            ),
        ]
    );
    assert_eq!(
        variants(out.item_enum("RouteGuideAnswer")),
        [
            ("GetFeature".to_owned(), "(pajamax::Responder)".to_owned()),
            (
                "ListFeatures".to_owned(),
                "(pajamax::Sink<super::Feature>)".to_owned()
            ),
            ("RecordRoute".to_owned(), "(pajamax::Responder)".to_owned()),
            (
                "RouteChat".to_owned(),
                "(pajamax::Sink<super::RouteNote>)".to_owned()
            ),
        ]
    );
    let shard = trait_methods(out.item_trait("RouteGuideShard"));
    let names: Vec<&str> = shard.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["get_feature", "list_features", "record_route", "route_chat"]
    );
    let sig = |name: &str| &shard.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(
        sig("record_route").args,
        ["requests:pajamax::Streaming<super::Point>"]
    );
    assert_eq!(
        sig("record_route").output,
        format!("{RESULT}<super::RouteSummary,pajamax::Status>")
    );
    assert_eq!(
        sig("route_chat").args,
        [
            "requests:pajamax::Streaming<super::RouteNote>",
            "sink:pajamax::Sink<super::RouteNote>"
        ]
    );
    let code = compact_code(&out.code);
    assert!(code.contains(
        "(RouteGuideRequest::RecordRoute(requests),RouteGuideAnswer::RecordRoute(responder))\
         =>{responder.respond(shard.record_route(requests));}"
    ));
    assert!(code.contains(
        "(RouteGuideRequest::RouteChat(requests),RouteGuideAnswer::RouteChat(sink))\
         =>{shard.route_chat(requests,sink);}"
    ));
    // The defaults answer UNIMPLEMENTED.
    assert!(code.contains(&compact_code(
        "Err(pajamax::Status::unimplemented(\"routeguide.RouteGuide/RecordRoute is not \
         implemented\"))"
    )));
    assert!(code.contains(&compact_code(
        "sink.finish(Err(pajamax::Status::unimplemented(\"routeguide.RouteGuide/RouteChat is \
         not implemented\")));"
    )));
}

#[test]
fn dispatch_mode_without_methods_still_has_a_call() {
    let out = dispatched(&service("", "Nothing", vec![]));
    assert!(variants(out.item_enum("NothingRequest")).is_empty());
    assert!(variants(out.item_enum("NothingAnswer")).is_empty());
    let code = compact_code(&out.code);
    assert!(
        code.contains("pubfnhandle<S:NothingShard+?Sized>(self,_shard:&mutS){matchself.request{}}")
    );
    assert!(code.contains("matchself{}"));
    assert!(code.contains("match*self{}"));
    assert!(!code.contains("try_dispatch"));
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn empty_messages_are_unit() {
    let svc = service(
        "health",
        "Health",
        vec![
            method("Ping", "()", "()"),
            server_streaming("Beats", "()", "()"),
            client_streaming("Report", "()", "()"),
            bidi_streaming("Chat", "()", "()"),
            method("Now", "()", "::prost_types::Timestamp"),
            method("Lookup", "crate::ids::Id", "super::common::Record"),
        ],
    );
    let out = local(&svc);
    let handlers = trait_methods(out.item_trait("Health"));
    let sig = |name: &str| &handlers.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(sig("ping").args, ["request:()"]);
    assert_eq!(sig("ping").output, format!("{RESULT}<(),pajamax::Status>"));
    assert_eq!(sig("beats").args, ["request:()"]);
    assert_eq!(
        sig("beats").output,
        format!("{RESULT}<pajamax::ServerStream<()>,pajamax::Status>")
    );
    assert_eq!(
        sig("report").output,
        format!("{RESULT}<pajamax::ClientStream<(),()>,pajamax::Status>")
    );
    assert_eq!(
        sig("chat").output,
        format!("{RESULT}<pajamax::BidiStream<(),()>,pajamax::Status>")
    );
    assert_eq!(
        sig("now").output,
        format!("{RESULT}<::prost_types::Timestamp,pajamax::Status>")
    );
    assert_eq!(sig("lookup").args, ["request:crate::ids::Id"]);
    assert_eq!(
        sig("lookup").output,
        format!("{RESULT}<super::super::common::Record,pajamax::Status>")
    );
    let code = compact_code(&out.code);
    // Unit is decoded as such and passed as a literal.
    assert!(code.contains(
        "0=>{pajamax::decode_request::<()>(request)?;self.inner.ping_with_context(ctx,())?;reply.encode(&());Ok(())}"
    ), "{code}");
    assert!(code.contains(
        "1=>{pajamax::decode_request::<()>(request)?;letstream=self.inner.beats_with_context(ctx,())?;Ok(stream.into_raw())}"
    ), "{code}");
    assert!(code.contains("self.ping(())"));
    assert!(code.contains("self.beats(())"));

    let out = dispatched(&svc);
    let request = variants(out.item_enum("HealthRequest"));
    assert_eq!(
        request[..2],
        [
            ("Ping".to_owned(), "(())".to_owned()),
            ("Beats".to_owned(), "(())".to_owned())
        ]
    );
    assert_eq!(
        variants(out.item_enum("HealthAnswer"))[1].1,
        "(pajamax::Sink<()>)"
    );
    let code = compact_code(&out.code);
    assert!(
        code.contains(
            "pajamax::decode_request::<()>(request)?;letrequest=HealthRequest::Ping(());"
        ),
        "{code}"
    );
    assert!(code.contains(
        "(HealthRequest::Ping(()),HealthAnswer::Ping(responder))=>{responder.respond(shard.ping(()));}"
    ), "{code}");
    assert!(
        code.contains(
            "(HealthRequest::Beats(()),HealthAnswer::Beats(sink))=>{shard.beats((),sink);}"
        ),
        "{code}"
    );
}

#[test]
fn keyword_methods_are_escaped() {
    let svc = service(
        "kw",
        "Keywords",
        vec![
            method("Type", "A", "B"),
            server_streaming("Self", "A", "B"),
            client_streaming("Match", "A", "B"),
        ],
    );
    let out = local(&svc);
    let names: Vec<String> = trait_methods(out.item_trait("Keywords"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "r#type",
            "type_with_context",
            "self_",
            "self_with_context",
            "r#match",
            "match_with_context"
        ]
    );
    let code = compact_code(&out.code);
    assert!(code.contains("self.r#type(request)"));
    assert!(code.contains("self.r#match()"));
    // A raw name is not linked, as doc links do not take it everywhere.
    let docs = |name: &str| {
        out.item_trait("Keywords")
            .items
            .iter()
            .find_map(|item| match item {
                TraitItem::Fn(f) if f.sig.ident == name => Some(
                    doc_text(&f.attrs)
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                _ => None,
            })
            .unwrap()
    };
    assert!(docs("type_with_context").contains("calls `type`."));
    assert!(docs("self_with_context").contains("calls [`self_`](Self::self_)."));

    let out = dispatched(&svc);
    assert_eq!(
        variants(out.item_enum("KeywordsRequest"))
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>(),
        ["Type", "Self_", "Match"]
    );
    let shard: Vec<String> = trait_methods(out.item_trait("KeywordsShard"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(shard, ["r#type", "self_", "r#match"]);
    assert!(compact_code(&out.code).contains("responder.respond(shard.r#type(request));"));
    assert!(out.compile_errors().is_empty());
}

#[test]
fn a_service_named_by_a_keyword_gives_camel_case_names() {
    // prost writes a service named `Self` as `Self_`: the trait keeps that
    // name, the names made from it leave the `_` out, as a lint of
    // non-camel-case names would fail a build that denies warnings.
    let mut svc = service("kw", "Self_", vec![method("Get", "A", "B")]);
    svc.proto_name = "Self".to_owned();
    let out = local(&svc);
    out.item_trait("Self_");
    out.item_struct("SelfServer");
    out.service_impl("SelfServer");
    assert!(!out.code.contains("Self_Server"), "{}", out.code);

    let out = dispatched(&svc);
    out.item_enum("SelfRequest");
    out.item_enum("SelfAnswer");
    out.item_struct("SelfCall");
    out.item_trait("SelfShard");
    out.item_trait("SelfDispatch");
    out.item_struct("SelfServer");
    assert!(!out.code.contains("Self_"), "{}", out.code);
    assert_eq!(out.module.ident, "self_server");
}

#[test]
fn a_service_named_t_is_no_type_parameter() {
    // The server's type parameter is `T` unless the trait has that name.
    let svc = service("names", "T", vec![method("Get", "A", "B")]);
    let out = local(&svc);
    let code = compact_code(&out.code);
    assert!(code.contains("pubstructTServer<H>{"), "{code}");
    assert!(code.contains("impl<H:T>TServer<H>{"), "{code}");
    assert!(code.contains("impl<H:T>pajamax::Service"), "{code}");

    let out = local(&route_guide());
    let code = compact_code(&out.code);
    assert!(
        code.contains("impl<T:RouteGuide>RouteGuideServer<T>{"),
        "{code}"
    );
}

#[test]
fn handlers_may_be_named_against_rust_conventions() {
    // `new` that takes `self`, `into_*` that borrows it, `from_*` that
    // takes it: named so by the proto, allowed by the handler traits.
    let svc = service(
        "names",
        "Conventions",
        vec![
            method("New", "A", "B"),
            server_streaming("IntoParts", "A", "B"),
            method("FromBytes", "A", "B"),
        ],
    );
    let allowed = |attrs: &[Attribute]| {
        attrs.iter().any(|attr| {
            compact(attr) == "#[allow(clippy::new_ret_no_self,clippy::wrong_self_convention)]"
        })
    };
    let out = local(&svc);
    assert!(
        allowed(&out.item_trait("Conventions").attrs),
        "{}",
        out.code
    );
    let out = dispatched(&svc);
    assert!(
        allowed(&out.item_trait("ConventionsShard").attrs),
        "{}",
        out.code
    );
}

/// Asserts that every public item of the module has a doc comment: what
/// `#![warn(missing_docs)]` checks in a crate that includes the code.
fn assert_documented(out: &Output) {
    let missing = |what: String| panic!("no doc comment on {what} in\n{}", out.code);
    let documented = |attrs: &[Attribute]| !doc_text(attrs).trim().is_empty();
    if !documented(&out.module.attrs) {
        missing(format!("mod {}", out.module.ident));
    }
    for item in out.items() {
        match item {
            Item::Trait(t) => {
                if !documented(&t.attrs) {
                    missing(format!("trait {}", t.ident));
                }
                for item in &t.items {
                    if let TraitItem::Fn(f) = item {
                        if !documented(&f.attrs) {
                            missing(format!("{}::{}", t.ident, f.sig.ident));
                        }
                    }
                }
            }
            Item::Struct(s) => {
                if !documented(&s.attrs) {
                    missing(format!("struct {}", s.ident));
                }
                for field in &s.fields {
                    if matches!(field.vis, Visibility::Public(_)) && !documented(&field.attrs) {
                        missing(format!("{}.{:?}", s.ident, field.ident));
                    }
                }
            }
            Item::Enum(e) => {
                if !documented(&e.attrs) {
                    missing(format!("enum {}", e.ident));
                }
                for variant in &e.variants {
                    if !documented(&variant.attrs) {
                        missing(format!("{}::{}", e.ident, variant.ident));
                    }
                }
            }
            Item::Const(c) => {
                if !documented(&c.attrs) {
                    missing(format!("const {}", c.ident));
                }
            }
            Item::Impl(i) if i.trait_.is_none() => {
                for f in impl_fns(i) {
                    if matches!(f.vis, Visibility::Public(_)) && !documented(&f.attrs) {
                        missing(format!("{}::{}", compact(&i.self_ty), f.sig.ident));
                    }
                }
            }
            Item::Impl(_) | Item::Macro(_) => {}
            other => missing(format!("unexpected item {}", compact(other))),
        }
    }
}

#[test]
fn every_public_item_has_a_doc_comment() {
    let empty = service("empty", "Nothing", Vec::new());
    for svc in [route_guide(), dict_store(), empty] {
        assert_documented(&local(&svc));
        assert_documented(&dispatched(&svc));
    }
}

#[test]
fn proto_comments_come_first_in_the_docs() {
    let out = local(&route_guide());
    let get = out
        .item_trait("RouteGuide")
        .items
        .iter()
        .find_map(|item| match item {
            TraitItem::Fn(f) if f.sig.ident == "get_feature" => Some(doc_text(&f.attrs)),
            _ => None,
        })
        .unwrap();
    assert!(
        get.starts_with(" Obtains the feature at a given position.\n\n Handles `routeguide.RouteGuide/GetFeature`"),
        "{get}"
    );
    let out = dispatched(&dict_store());
    let shard = out.item_trait("DictStoreShard");
    let TraitItem::Fn(get) = &shard.items[0] else {
        panic!()
    };
    assert!(doc_text(&get.attrs).starts_with(" Reads a key.\n\n"));
    // The shard's server-streaming handler says how the sink paces it.
    let TraitItem::Fn(watch) = &shard.items[1] else {
        panic!()
    };
    let docs = doc_text(&watch.attrs).replace('\n', "");
    assert!(docs.contains("waits for flow-control credit"), "{docs}");
    assert!(docs.contains("fails once the call has ended"), "{docs}");
}

#[test]
fn clashing_method_names_give_a_compile_error_and_a_warning() {
    let out = local(&service(
        "clash",
        "Clash",
        vec![method("Get", "A", "B"), method("GetWithContext", "A", "B")],
    ));
    assert_eq!(
        out.compile_errors(),
        ["pajamax-build: two methods of clash.Clash map to the Rust name `get_with_context`"]
    );
    assert!(
        out.has_warning(
            "pajamax-build: clash.Clash/GetWithContext: its Rust name `get_with_context` is also \
         that of clash.Clash/Get; the generated code does not compile"
        ),
        "{:?}",
        out.warnings
    );

    let out = dispatched(&service(
        "clash",
        "Clash",
        vec![
            method("GetItem", "A", "B"),
            server_streaming("get_item", "A", "B"),
        ],
    ));
    assert_eq!(
        out.compile_errors(),
        [
            "pajamax-build: two methods of clash.Clash map to the Rust name `get_item`",
            "pajamax-build: two methods of clash.Clash map to the Rust name `GetItem`",
        ]
    );
    assert_eq!(out.warnings.len(), 2);

    // Streaming methods clash like the others, in both modes.
    let clashing = service(
        "clash",
        "Clash",
        vec![method("Up", "A", "B"), client_streaming("up", "A", "B")],
    );
    assert_eq!(local(&clashing).compile_errors().len(), 2);
    assert_eq!(dispatched(&clashing).compile_errors().len(), 2);
}

#[test]
fn a_method_without_a_rust_name_is_reported_and_not_served() {
    let svc = service(
        "odd",
        "Odd",
        vec![method("_", "A", "B"), method("Fine", "A", "B")],
    );
    for out in [local(&svc), dispatched(&svc)] {
        assert_eq!(
            out.warnings,
            ["pajamax-build: odd.Odd/_: its name gives no Rust identifier (``); its calls answer \
              UNIMPLEMENTED"]
        );
        // Its route still exists, and falls to the entry point's default.
        assert!(out.code.contains("name: \"_\""));
        let service = out.service_impl("OddServer");
        assert_eq!(routed(impl_fn(service, "unary")), [1]);
    }
}

#[test]
fn a_method_named_by_an_underscore_and_a_digit_is_served() {
    // `_0` gives the Rust name `_0`, as prost (and tonic) name it; its
    // context form is named after it.
    let svc = service(
        "odd",
        "Odd",
        vec![method("_0", "A", "B"), method("_2Get", "A", "B")],
    );
    let out = local(&svc);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let names: Vec<String> = trait_methods(out.item_trait("Odd"))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        names,
        ["_0", "_0_with_context", "_2get", "_2get_with_context"]
    );
    assert_eq!(
        routed(impl_fn(out.service_impl("OddServer"), "unary")),
        [0, 1]
    );

    let out = dispatched(&svc);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let names: Vec<String> = trait_methods(out.item_trait("OddShard"))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names, ["_0", "_2get"]);
    assert_eq!(
        routed(impl_fn(out.service_impl("OddServer"), "unary")),
        [0, 1]
    );
}

#[test]
fn a_service_without_a_rust_name_is_reported_and_not_generated() {
    // prost names a service `_` with the empty name; `_0` keeps its name,
    // but its module would be `0_server`.
    for (proto_name, name, rust) in [("_", "", ""), ("_0", "_0", "0_server")] {
        let svc = Service {
            name: name.to_owned(),
            ..service("odd", proto_name, vec![method("Get", "A", "B")])
        };
        for mode in [ServiceMode::Local, ServiceMode::Dispatch] {
            let Generated { code, warnings } = generate_service(&svc, mode);
            // A comment, no item: the file is not left without code.
            assert!(code.starts_with("// "), "{code}");
            assert!(syn::parse_file(&code).unwrap().items.is_empty(), "{code}");
            assert_eq!(
                warnings,
                [format!(
                    "pajamax-build: odd.{proto_name}: its name gives no Rust identifier \
                     (`{rust}`); the service is not generated, its calls answer UNIMPLEMENTED"
                )]
            );
        }
    }
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
fn the_generator_follows_the_modes_and_appends() {
    use prost_build::ServiceGenerator;
    let mut modes = Modes::default();
    modes.dispatch.insert("dict_store.DictStore".to_owned());
    let mut generator = PajamaxGenerator::new(modes);
    let mut buf = String::from("// before\n");
    generator.generate(dict_store(), &mut buf);
    generator.generate(
        service("helloworld", "Greeter", vec![method("SayHello", "A", "B")]),
        &mut buf,
    );
    assert!(buf.starts_with("// before\n"));
    let file = syn::parse_file(&buf).unwrap();
    let modules: Vec<String> = file
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(modules, ["dict_store_server", "greeter_server"]);
    assert!(buf.contains("pub trait DictStoreShard {"));
    assert!(
        buf.contains("pub trait Greeter: ::core::marker::Send + ::core::marker::Sync + 'static {")
    );
    assert!(!buf.contains("GreeterShard"));
}

#[test]
fn services_of_a_package_whose_modules_meet_give_a_compile_error_and_a_warning() {
    let mut generator = PajamaxGenerator::new(Modes::default());
    let get = || vec![method("Get", "A", "B")];
    let first = generator.service_code(&service("z", "FooBar", get()));
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    // prost names both `FooBar`; both modules are `foo_bar_server`.
    let second = generator.service_code(&Service {
        name: "FooBar".to_owned(),
        ..service("z", "Foo_Bar", get())
    });
    assert_eq!(
        second.warnings,
        [
            "pajamax-build: z.Foo_Bar: its module `foo_bar_server` is also that of z.FooBar; \
          the generated code does not compile"
        ]
    );
    let file = syn::parse_file(&second.code).unwrap();
    let Item::Macro(error) = &file.items[0] else {
        panic!("no compile_error! first in\n{}", second.code)
    };
    assert_eq!(
        error.mac.path.segments.last().unwrap().ident,
        "compile_error"
    );
    let message: syn::LitStr = error.mac.parse_body().unwrap();
    assert_eq!(
        message.value(),
        "pajamax-build: the services z.FooBar and z.Foo_Bar both map to the module \
         `foo_bar_server`"
    );
    assert!(matches!(&file.items[1], Item::Mod(m) if m.ident == "foo_bar_server"));

    // The same name in another package, or another name in the same one,
    // meets no module.
    let other = generator.service_code(&service("y", "FooBar", get()));
    assert!(other.warnings.is_empty(), "{:?}", other.warnings);
    assert!(!other.code.contains("compile_error"), "{}", other.code);
    let other = generator.service_code(&service("z", "Foo", get()));
    assert!(other.warnings.is_empty(), "{:?}", other.warnings);
}

#[test]
fn type_paths_are_seen_from_the_server_module() {
    assert_eq!(type_path("HelloRequest"), "super::HelloRequest");
    assert_eq!(type_path("super::other::Msg"), "super::super::other::Msg");
    assert_eq!(type_path("()"), "()");
    // The wrappers prost maps to primitives (`google.protobuf.BoolValue`...).
    for primitive in ["bool", "i32", "i64", "u32", "u64", "f32", "f64"] {
        assert_eq!(type_path(primitive), primitive);
    }
    assert_eq!(type_path("::prost_types::Any"), "::prost_types::Any");
    assert_eq!(type_path("crate::x::Y"), "crate::x::Y");
}

#[test]
fn packages_end_with_their_descriptor_set_when_one_was_written() {
    use prost_build::ServiceGenerator;

    // None written (no output directory known): no constant.
    let mut buf = String::new();
    PajamaxGenerator::new(Modes::default()).finalize_package("helloworld", &mut buf);
    assert_eq!(buf, "");

    let mut generator =
        PajamaxGenerator::new(Modes::default()).with_descriptor_set(DescriptorSetPlace::OutDir);
    generator.finalize_package("grpc.testing", &mut buf);
    let file = syn::parse_file(&buf).unwrap();
    let Item::Const(constant) = &file.items[0] else {
        panic!("not a constant: {buf}");
    };
    assert_eq!(constant.ident, "FILE_DESCRIPTOR_SET");
    // Documented, and no warning where it goes unused (a binary's
    // private module, without reflection).
    assert!(constant.attrs.iter().any(|a| a.path().is_ident("doc")));
    let allowed: Vec<String> = constant
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("allow"))
        .map(|a| a.to_token_stream().to_string())
        .collect();
    assert_eq!(allowed, ["# [allow (dead_code)]"]);
    assert_eq!(
        constant.expr.to_token_stream().to_string(),
        "include_bytes ! (concat ! (env ! (\"OUT_DIR\") , \"/grpc.testing.file_descriptor_set.bin\"))"
    );

    let mut buf = String::new();
    PajamaxGenerator::new(Modes::default())
        .with_descriptor_set(DescriptorSetPlace::NextToCode)
        .finalize_package("", &mut buf);
    assert!(
        buf.contains("include_bytes!(\"_.file_descriptor_set.bin\")"),
        "{buf}"
    );
}
