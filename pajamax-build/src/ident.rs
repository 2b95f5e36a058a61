//! Rust identifiers for proto names.

use heck::{ToSnakeCase, ToUpperCamelCase};

/// The `snake_case` form of a proto name, before any keyword escaping:
/// `SayHello` gives `say_hello`, `HTTPGet` gives `http_get`.
pub(crate) fn snake_case(proto_name: &str) -> String {
    proto_name.to_snake_case()
}

/// Makes `ident` usable as a Rust identifier, the way prost does for fields:
/// keywords that may be raw identifiers become `r#ident`, the few that may
/// not (`self`, `super`, `crate`, ...) get a trailing underscore.
pub(crate) fn sanitize(ident: &str) -> String {
    match ident {
        // Strict and reserved keywords of every edition.
        "abstract" | "as" | "async" | "await" | "become" | "box" | "break" | "const"
        | "continue" | "do" | "dyn" | "else" | "enum" | "false" | "final" | "fn" | "for"
        | "gen" | "if" | "impl" | "in" | "let" | "loop" | "macro" | "match" | "mod" | "move"
        | "mut" | "override" | "priv" | "pub" | "ref" | "return" | "static" | "struct"
        | "trait" | "true" | "try" | "type" | "typeof" | "unsafe" | "unsized" | "use"
        | "virtual" | "where" | "while" | "yield" => format!("r#{ident}"),
        // Keywords that cannot be raw identifiers.
        "_" | "crate" | "extern" | "self" | "Self" | "super" => format!("{ident}_"),
        _ if ident.starts_with(|c: char| c.is_ascii_digit()) => format!("_{ident}"),
        _ => ident.to_owned(),
    }
}

/// The trait method name for a proto method: `SayHello` gives `say_hello`,
/// `Type` gives `r#type`.
pub(crate) fn method_name(proto_name: &str) -> String {
    sanitize(&snake_case(proto_name))
}

/// The name of the trait method that also receives the call context:
/// `SayHello` gives `say_hello_with_context`. The suffix keeps it clear of
/// keywords, so it is never escaped; a name that would start with a digit
/// gets the `_` the plain one gets (`_0` gives `_0_with_context`).
pub(crate) fn context_method_name(proto_name: &str) -> String {
    let snake = snake_case(proto_name);
    if snake.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{snake}_with_context")
    } else {
        format!("{snake}_with_context")
    }
}

/// The enum variant for a proto method in dispatch mode: `SayHello` stays
/// `SayHello`, `get_item` gives `GetItem`, `Self` gives `Self_`.
pub(crate) fn variant_name(proto_name: &str) -> String {
    sanitize(&proto_name.to_upper_camel_case())
}

/// The module holding a service's server code: `Greeter` gives
/// `greeter_server`.
pub(crate) fn server_module_name(proto_name: &str) -> String {
    format!("{}_server", snake_case(proto_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_are_snake_case() {
        let cases = [
            ("SayHello", "say_hello"),
            ("UnaryCall", "unary_call"),
            ("EmptyCall", "empty_call"),
            ("StreamingOutputCall", "streaming_output_call"),
            ("getFeature", "get_feature"),
            ("HTTPGet", "http_get"),
            ("ListV2Items", "list_v2_items"),
            ("already_snake", "already_snake"),
            ("Echo", "echo"),
        ];
        for (proto, rust) in cases {
            assert_eq!(method_name(proto), rust, "for {proto}");
        }
    }

    #[test]
    fn keywords_are_escaped_like_prost_does() {
        assert_eq!(method_name("Type"), "r#type");
        assert_eq!(method_name("Match"), "r#match");
        assert_eq!(method_name("Async"), "r#async");
        assert_eq!(method_name("Yield"), "r#yield");
        assert_eq!(method_name("Self"), "self_");
        assert_eq!(method_name("Super"), "super_");
        assert_eq!(method_name("Crate"), "crate_");
        assert_eq!(sanitize("9lives"), "_9lives");
        assert_eq!(sanitize("Self"), "Self_");
    }

    #[test]
    fn context_methods_never_need_escaping() {
        assert_eq!(context_method_name("SayHello"), "say_hello_with_context");
        assert_eq!(context_method_name("Type"), "type_with_context");
        assert_eq!(context_method_name("Self"), "self_with_context");
        // A name that would start with a digit starts as the plain one.
        assert_eq!(context_method_name("_0"), "_0_with_context");
        assert_eq!(context_method_name("_2Get"), "_2get_with_context");
    }

    #[test]
    fn variants_are_upper_camel_case() {
        assert_eq!(variant_name("Get"), "Get");
        assert_eq!(variant_name("ListShard"), "ListShard");
        assert_eq!(variant_name("get_item"), "GetItem");
        assert_eq!(variant_name("Self"), "Self_");
    }

    #[test]
    fn server_modules_are_snake_case() {
        assert_eq!(server_module_name("Greeter"), "greeter_server");
        assert_eq!(server_module_name("TestService"), "test_service_server");
        assert_eq!(server_module_name("Self"), "self_server");
    }
}
