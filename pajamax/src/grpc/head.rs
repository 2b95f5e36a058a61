//! The head of a gRPC request: what its header fields say about the call.

use crate::grpc::metadata::Metadata;
use crate::grpc::timeout;
use std::time::Instant;

/// What a request's headers decide.
pub(crate) struct RequestHead<'f> {
    /// `:path`, the method called.
    pub path: &'f [u8],
    /// `POST` with a gRPC content-type; anything else is answered with
    /// HTTP 415.
    pub is_grpc: bool,
    /// When the client gives up, from `grpc-timeout`.
    pub deadline: Option<Instant>,
    /// The messages are not compressed (no `grpc-encoding`, or `identity`).
    pub identity: bool,
}

/// Reads a request's fields; the custom ones (metadata) are appended to
/// `metadata`. `now` is when the request arrived, for the deadline.
pub(crate) fn parse<'f>(
    fields: impl Iterator<Item = (&'f [u8], &'f [u8])>,
    now: Instant,
    metadata: &mut Metadata,
) -> RequestHead<'f> {
    let mut method_post = false;
    let mut is_grpc = false;
    let mut head = RequestHead {
        path: b"",
        is_grpc: false,
        deadline: None,
        identity: true,
    };
    for (name, value) in fields {
        match name {
            b":method" => method_post = value == b"POST",
            b":path" => head.path = value,
            b"content-type" => is_grpc = is_grpc_content_type(value),
            b"grpc-timeout" => {
                head.deadline = timeout::parse(value).and_then(|d| now.checked_add(d))
            }
            b"grpc-encoding" => head.identity = value == b"identity",
            b"te" | b"grpc-accept-encoding" => {}
            _ if name.starts_with(b":") => {}
            _ => metadata.push(name, value),
        }
    }
    head.is_grpc = method_post && is_grpc;
    head
}

/// `application/grpc`, optionally followed by `+format` or `;parameters`.
fn is_grpc_content_type(value: &[u8]) -> bool {
    match value.strip_prefix(b"application/grpc") {
        Some(rest) => rest.is_empty() || rest[0] == b'+' || rest[0] == b';',
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_of(fields: &[(&str, &str)]) -> (bool, Option<Instant>, bool, Metadata) {
        let mut md = Metadata::new();
        let now = Instant::now();
        let head = parse(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            now,
            &mut md,
        );
        (head.is_grpc, head.deadline, head.identity, md)
    }

    #[test]
    fn reads_the_grpc_fields_and_keeps_the_rest_as_metadata() {
        let (grpc, deadline, identity, md) = head_of(&[
            (":method", "POST"),
            (":path", "/a.B/C"),
            ("content-type", "application/grpc+proto"),
            ("grpc-timeout", "1S"),
            ("te", "trailers"),
            ("x-user", "alice"),
        ]);
        assert!(grpc && identity);
        assert!(deadline.is_some());
        assert_eq!(md.len(), 1);
        assert_eq!(md.get("x-user"), Some("alice"));
    }

    #[test]
    fn tells_what_is_not_grpc() {
        assert!(!head_of(&[(":method", "GET"), ("content-type", "application/grpc")]).0);
        assert!(!head_of(&[(":method", "POST"), ("content-type", "application/grpcx")]).0);
        assert!(!head_of(&[(":method", "POST"), ("grpc-encoding", "gzip")]).2);
    }
}
