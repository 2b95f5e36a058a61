//! Answers as HTTP/2 header blocks and data: response headers, messages,
//! trailers with `grpc-status`, trailers-only answers, and the HTTP 405 or
//! 415 for requests that are not gRPC.

use crate::grpc::compression::{self, Encoding};
use crate::grpc::metadata::Metadata;
use crate::grpc::percent;
use crate::grpc::status::{Code, Status};
use crate::h2::connection::{header_list_size, BlockMemo, Connection, Field};
use crate::h2::hpack::Indexing;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine;

/// `:status: 200` and `content-type: application/grpc`, kept in the HPACK
/// table so that steady-state answers spend one byte on each.
pub(crate) const SUCCESS_HEADERS: [Field<'static>; 2] = [
    Field {
        name: b":status",
        value: b"200",
        indexing: Indexing::Incremental,
    },
    Field {
        name: b"content-type",
        value: b"application/grpc",
        indexing: Indexing::Incremental,
    },
];

const STATUS_OK: Field<'static> = Field {
    name: b"grpc-status",
    value: b"0",
    indexing: Indexing::Incremental,
};

const NOT_GRPC_BODY: &[u8] = b"pajamax serves gRPC: send POST with content-type application/grpc\n";

/// The success headers of an answer whose messages are compressed with
/// gzip.
const GZIP_HEADERS: [Field<'static>; 3] = compressed_headers(b"gzip");

/// The same for deflate.
const DEFLATE_HEADERS: [Field<'static>; 3] = compressed_headers(b"deflate");

/// The success headers of an answer whose messages go with `encoding`.
fn success_headers(encoding: Encoding) -> &'static [Field<'static>] {
    match encoding {
        Encoding::Identity => &SUCCESS_HEADERS,
        Encoding::Gzip => &GZIP_HEADERS,
        Encoding::Deflate => &DEFLATE_HEADERS,
    }
}

const fn compressed_headers(encoding: &'static [u8]) -> [Field<'static>; 3] {
    [
        SUCCESS_HEADERS[0],
        SUCCESS_HEADERS[1],
        Field {
            name: b"grpc-encoding",
            value: encoding,
            indexing: Indexing::Incremental,
        },
    ]
}

/// The encoded blocks every answer repeats, kept per connection.
#[derive(Debug, Default)]
pub(crate) struct Memos {
    /// `:status 200`, `content-type`.
    pub headers: BlockMemo,
    /// The same with `grpc-encoding: gzip`.
    pub gzip_headers: BlockMemo,
    /// The same with `grpc-encoding: deflate`.
    pub deflate_headers: BlockMemo,
    /// `grpc-status 0`.
    pub ok_trailers: BlockMemo,
}

/// Sends a unary answer: the framed message `reply` with the response
/// metadata, then `grpc-status: 0`.
#[inline]
pub(crate) fn send_answer(
    h2: &mut Connection,
    memos: &mut Memos,
    stream: u32,
    reply: &[u8],
    headers: &Metadata,
    trailers: &Metadata,
    text: &mut Vec<u8>,
) {
    if headers.is_empty() && trailers.is_empty() {
        return h2.send_answer(
            stream,
            (&mut memos.headers, &SUCCESS_HEADERS),
            reply,
            (&mut memos.ok_trailers, &[STATUS_OK]),
        );
    }
    send_answer_with(
        h2,
        memos,
        stream,
        Encoding::Identity,
        reply,
        headers,
        trailers,
        text,
    );
}

/// Sends a unary answer whose framed message `reply` goes with `encoding`
/// (compressed unless it is identity), its headers and trailers written
/// out with the response metadata.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_answer_with(
    h2: &mut Connection,
    memos: &mut Memos,
    stream: u32,
    encoding: Encoding,
    reply: &[u8],
    headers: &Metadata,
    trailers: &Metadata,
    text: &mut Vec<u8>,
) {
    if metadata_too_large(h2, success_headers(encoding), headers, trailers) {
        return send_metadata_too_large(h2, stream, text);
    }
    // Checked above: the metadata fits.
    send_headers(h2, memos, stream, headers, encoding);
    h2.send_data(stream, reply, false);
    send_trailers(h2, memos, stream, None, trailers, text);
}

/// Sends the response headers with `metadata`; unless `encoding` is
/// identity, they say how the messages are compressed. Returns `false`
/// when the metadata would pass
/// the client's header list size limit: the headers go without it, and the
/// caller ends the call with `INTERNAL` (as grpc-go resets such a stream).
#[inline]
pub(crate) fn send_headers(
    h2: &mut Connection,
    memos: &mut Memos,
    stream: u32,
    metadata: &Metadata,
    encoding: Encoding,
) -> bool {
    let memo = match encoding {
        Encoding::Identity => &mut memos.headers,
        Encoding::Gzip => &mut memos.gzip_headers,
        Encoding::Deflate => &mut memos.deflate_headers,
    };
    let fields = success_headers(encoding);
    let fits = metadata.is_empty()
        || header_list_size(fields) + metadata.list_size() <= h2.peer_max_header_list();
    if !fits {
        log::warn!("stream {stream}: response headers past the client's header list size limit");
    }
    if !fits || metadata.is_empty() {
        h2.send_headers_memo(stream, memo, fields, false);
        return fits;
    }
    let mut fields = fields.to_vec();
    push_metadata(&mut fields, metadata);
    h2.send_headers(stream, &fields, false);
    true
}

/// Sends the trailers: `grpc-status` (`OK` without a status), its message,
/// and `metadata`. `text` is scratch room for the percent-encoded message.
#[inline]
pub(crate) fn send_trailers(
    h2: &mut Connection,
    memos: &mut Memos,
    stream: u32,
    status: Option<&Status>,
    metadata: &Metadata,
    text: &mut Vec<u8>,
) {
    if status.is_none() && metadata.is_empty() {
        h2.send_trailers_memo(stream, &mut memos.ok_trailers, &[STATUS_OK]);
        return;
    }
    let mut fields = Vec::with_capacity(2 + metadata.len());
    push_status(&mut fields, status, text);
    push_metadata(&mut fields, metadata);
    if header_list_size(&fields) > h2.peer_max_header_list() {
        let mut fields = Vec::with_capacity(2);
        let status = too_large_status();
        push_status(&mut fields, Some(&status), text);
        return h2.send_trailers(stream, &fields);
    }
    h2.send_trailers(stream, &fields);
}

/// Sends a trailers-only answer: one header block with the HTTP status,
/// `grpc-status` and both the headers' and the trailers' metadata.
pub(crate) fn send_status_only(
    h2: &mut Connection,
    stream: u32,
    status: Option<&Status>,
    headers: &Metadata,
    trailers: &Metadata,
    text: &mut Vec<u8>,
) {
    let mut fields = Vec::with_capacity(5 + headers.len() + trailers.len());
    fields.extend(SUCCESS_HEADERS);
    push_status(&mut fields, status, text);
    if status.is_some_and(|s| s.code() == Code::Unimplemented) {
        fields.push(Field::indexed(
            b"grpc-accept-encoding",
            compression::ACCEPTED,
        ));
    }
    push_metadata(&mut fields, headers);
    push_metadata(&mut fields, trailers);
    if header_list_size(&fields) > h2.peer_max_header_list() {
        drop(fields);
        return send_metadata_too_large(h2, stream, text);
    }
    h2.send_headers(stream, &fields, true);
}

/// The status of an answer whose metadata the client would refuse.
fn too_large_status() -> Status {
    Status::internal("the response metadata is larger than the client's header list size limit")
}

/// Whether the headers (`success`, the answer's own fields, with
/// `headers` as metadata) or the trailers (`grpc-status: 0` with
/// `trailers`) of a unary answer pass the header list size the client
/// takes.
fn metadata_too_large(
    h2: &Connection,
    success: &[Field<'_>],
    headers: &Metadata,
    trailers: &Metadata,
) -> bool {
    let limit = h2.peer_max_header_list();
    if limit == usize::MAX {
        return false;
    }
    let size =
        |base: &[Field<'_>], metadata: &Metadata| header_list_size(base) + metadata.list_size();
    size(success, headers) > limit || size(&[STATUS_OK], trailers) > limit
}

/// Answers with [`too_large_status`], trailers-only and without metadata:
/// the client refuses a header block larger than its limit, and would
/// see only a reset stream.
fn send_metadata_too_large(h2: &mut Connection, stream: u32, text: &mut Vec<u8>) {
    log::warn!("stream {stream}: response metadata past the client's header list size limit");
    let status = too_large_status();
    let mut fields = Vec::with_capacity(4);
    fields.extend(SUCCESS_HEADERS);
    push_status(&mut fields, Some(&status), text);
    h2.send_headers(stream, &fields, true);
}

/// Why a request is not gRPC, which decides its HTTP answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum NotGrpc {
    /// A `POST` whose content-type is not gRPC: HTTP 415.
    #[default]
    ContentType,
    /// Another method: HTTP 405.
    Method,
    /// `HEAD`: HTTP 405 without a body, as every answer to `HEAD` (RFC
    /// 9110 section 9.3.2).
    Head,
}

impl NotGrpc {
    /// Why a request with `:method` `method` is not gRPC.
    pub(crate) fn of(method: &[u8]) -> NotGrpc {
        match method {
            b"POST" => NotGrpc::ContentType,
            b"HEAD" => NotGrpc::Head,
            _ => NotGrpc::Method,
        }
    }
}

/// Answers a request that is not gRPC: HTTP 405 with the one method
/// allowed when its method is not `POST` (RFC 9110 section 15.5.6), else
/// HTTP 415 for its content-type.
pub(crate) fn send_not_grpc(h2: &mut Connection, stream: u32, why: NotGrpc) {
    let not_allowed = [
        Field::indexed(b":status", b"405"),
        Field::indexed(b"allow", b"POST"),
        Field::indexed(b"content-type", b"text/plain"),
    ];
    let unsupported = [
        Field::indexed(b":status", b"415"),
        Field::indexed(b"content-type", b"text/plain"),
    ];
    match why {
        NotGrpc::ContentType => {
            h2.send_headers(stream, &unsupported, false);
            h2.send_data(stream, NOT_GRPC_BODY, true);
        }
        NotGrpc::Method => {
            h2.send_headers(stream, &not_allowed, false);
            h2.send_data(stream, NOT_GRPC_BODY, true);
        }
        NotGrpc::Head => h2.send_headers(stream, &not_allowed, true),
    }
}

/// `grpc-status` and, when there are some, `grpc-message` and
/// `grpc-status-details-bin`; `text` (which holds both encoded values) must
/// outlive `fields`.
fn push_status<'f>(fields: &mut Vec<Field<'f>>, status: Option<&Status>, text: &'f mut Vec<u8>) {
    let Some(status) = status else {
        fields.push(STATUS_OK);
        return;
    };
    fields.push(Field::indexed(
        b"grpc-status",
        status.code().as_str().as_bytes(),
    ));
    text.clear();
    percent::encode(status.message(), text);
    let message_len = text.len();
    if !status.details().is_empty() {
        let details = STANDARD_NO_PAD.encode(status.details());
        text.extend_from_slice(details.as_bytes());
    }
    let (message, details) = text.split_at(message_len);
    if !message.is_empty() {
        fields.push(Field::literal(b"grpc-message", message));
    }
    if !details.is_empty() {
        fields.push(Field::literal(b"grpc-status-details-bin", details));
    }
}

/// The fields of `metadata`, less those whose name starts with `grpc-`:
/// gRPC reserves them, and the server sets its own. No handler can insert
/// one, but request metadata sent back whole holds what the client sent,
/// `grpc-status` or `grpc-message` among them.
fn push_metadata<'f>(fields: &mut Vec<Field<'f>>, metadata: &'f Metadata) {
    let own = |field: &Field<'_>| !field.name.starts_with(b"grpc-");
    fields.extend(metadata.fields().to_send().filter(own));
}
