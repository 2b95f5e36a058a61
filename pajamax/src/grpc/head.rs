//! The head of a gRPC request: what its header fields say about the call.

use crate::grpc::compression::{Accepts, Encoding};
use crate::grpc::metadata::Metadata;
use crate::grpc::timeout;
use crate::h2::fields::{ClassifiedField, FieldKind};
use std::time::Duration;

/// What a request's headers decide.
pub(crate) struct RequestHead<'f> {
    /// `:path`, the method called.
    pub path: &'f [u8],
    /// The decoder's id for the `:path` value (0 if none): the same id means
    /// the same path, so its route can be remembered.
    pub path_id: u64,
    /// `POST` with a gRPC content-type; anything else is answered with
    /// HTTP 405 (another method) or 415 (another content-type).
    pub is_grpc: bool,
    /// How long the client waits, from `grpc-timeout`.
    pub timeout: Option<Duration>,
    /// How the request's messages are compressed (`grpc-encoding`); `None`
    /// for an encoding not served.
    pub encoding: Option<Encoding>,
    /// The compressions the client accepts for answers
    /// (`grpc-accept-encoding`, in any of its fields).
    pub accepts: Accepts,
}

impl RequestHead<'_> {
    /// How the call's answer goes when it is compressed
    /// ([`Accepts::answer`]); identity when the client accepts no
    /// compression.
    pub fn answer_compression(&self) -> Encoding {
        self.accepts
            .answer(self.encoding.unwrap_or(Encoding::Identity))
    }
}

/// Reads a request's fields; the custom ones (metadata) are appended to
/// `metadata`. The caller makes the deadline from `timeout`, at the time
/// of the read's step (`grpc/clock.rs`).
pub(crate) fn parse<'f>(
    fields: impl Iterator<Item = ClassifiedField<'f>>,
    metadata: &mut Metadata,
) -> RequestHead<'f> {
    let mut method_post = false;
    let mut is_grpc = false;
    let mut head = RequestHead {
        path: b"",
        path_id: 0,
        is_grpc: false,
        timeout: None,
        encoding: Some(Encoding::Identity),
        accepts: Accepts::default(),
    };
    for field in fields {
        match field.kind {
            FieldKind::Method => method_post = field.flag,
            FieldKind::Path => {
                head.path = field.value;
                head.path_id = field.id;
            }
            FieldKind::ContentType => is_grpc = field.flag,
            FieldKind::GrpcTimeout => head.timeout = timeout::parse(field.value),
            FieldKind::GrpcEncoding => head.encoding = Encoding::from_name(field.value),
            // The list may come split over several fields.
            FieldKind::GrpcAcceptEncoding => {
                head.accepts = head.accepts.and(Accepts::from_list(field.value))
            }
            FieldKind::Other => metadata.push(field.name, field.value),
            FieldKind::Scheme
            | FieldKind::Authority
            | FieldKind::UnknownPseudo
            | FieldKind::Te
            | FieldKind::ContentLength => {}
        }
    }
    head.is_grpc = method_post && is_grpc;
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_of(fields: &[(&str, &str)]) -> (bool, Option<Duration>, bool, Metadata) {
        let mut list = crate::h2::fields::Fields::default();
        for (name, value) in fields {
            let info = crate::h2::fields::classify(name.as_bytes(), value.as_bytes());
            list.push_classified(name.as_bytes(), value.as_bytes(), &info, 0);
        }
        let mut md = Metadata::new();
        let head = parse(list.classified(0..list.len()), &mut md);
        (
            head.is_grpc,
            head.timeout,
            head.encoding == Some(Encoding::Identity),
            md,
        )
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

    #[test]
    fn accepted_encodings_add_up_over_repeated_fields() {
        // A list split over several fields is the same list (RFC 9110
        // section 5.3).
        for split in [["gzip", "deflate"], ["deflate", "gzip,identity"]] {
            let mut list = crate::h2::fields::Fields::default();
            for value in split {
                let name = b"grpc-accept-encoding";
                let info = crate::h2::fields::classify(name, value.as_bytes());
                list.push_classified(name, value.as_bytes(), &info, 0);
            }
            let head = parse(list.classified(0..list.len()), &mut Metadata::new());
            assert_eq!(
                head.accepts,
                Accepts::from_list(b"gzip,deflate"),
                "{split:?}"
            );
        }
    }
}
