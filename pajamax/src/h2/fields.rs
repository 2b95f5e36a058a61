//! Header fields stored end to end in one reusable buffer, and the checks
//! RFC 9113 section 8.2 and 8.3 put on a request's fields.
//!
//! [`Fields`] is the one name/value list of the crate: the decoded request
//! fields of a batch, gRPC [`Metadata`](crate::grpc::metadata::Metadata)
//! (which wraps it), and the trailers a stream keeps while its data waits
//! for the peer's windows.

use crate::h2::hpack::Indexing;
use crate::h2::output::Field;
use std::ops::Range;

/// An ordered list of header fields, names and values kept end to end in
/// one byte buffer, each with how it should be encoded.
///
/// An [`Event::Request`](crate::h2::connection::Event) names its fields by a
/// range of indexes into the connection's list. The storage is reused from
/// batch to batch, so steady-state decoding allocates nothing.
///
/// ```
/// use pajamax::h2::fields::Fields;
/// let mut fields = Fields::default();
/// fields.push(b"x-user", b"alice");
/// assert_eq!(fields.get(0), (&b"x-user"[..], &b"alice"[..]));
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fields {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Where the name starts, where it ends (and the value starts), and
    /// where the value ends, in `bytes`.
    start: u32,
    mid: u32,
    end: u32,
    indexing: Indexing,
    kind: FieldKind,
    /// [`FieldInfo::flag`].
    flag: bool,
    /// The decoder's id for the value (0 if none), see
    /// [`Decoder::decode_classified`](crate::h2::hpack::Decoder::decode_classified).
    id: u64,
}

/// One field of a [`Fields`] list with what the decoder knew of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassifiedField<'a> {
    /// The name.
    pub name: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Which field it is.
    pub kind: FieldKind,
    /// [`FieldInfo::flag`].
    pub flag: bool,
    /// An id for the value that stays the same while the same table entry
    /// or remembered literal provides it; 0 for a value decoded afresh.
    pub id: u64,
}

impl Fields {
    /// The bytes the fields take, counted as HPACK counts a header list:
    /// names and values, and 32 bytes for each field.
    pub(crate) fn list_size(&self) -> usize {
        self.bytes.len() + crate::h2::hpack::ENTRY_OVERHEAD * self.entries.len()
    }

    /// The number of fields stored.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no field is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Field number `index` as `(name, value)`.
    pub fn get(&self, index: usize) -> (&[u8], &[u8]) {
        let entry = self.entries[index];
        (
            &self.bytes[entry.start as usize..entry.mid as usize],
            &self.bytes[entry.mid as usize..entry.end as usize],
        )
    }

    /// The fields in `range`, in order.
    pub fn iter(&self, range: Range<usize>) -> impl Iterator<Item = (&[u8], &[u8])> {
        range.map(move |i| self.get(i))
    }

    /// Every field, in order.
    pub fn iter_all(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.iter(0..self.len())
    }

    /// The fields in `range` with their kind and id.
    #[inline]
    pub fn classified(&self, range: Range<usize>) -> impl Iterator<Item = ClassifiedField<'_>> {
        self.entries[range]
            .iter()
            .map(move |entry| ClassifiedField {
                name: &self.bytes[entry.start as usize..entry.mid as usize],
                value: &self.bytes[entry.mid as usize..entry.end as usize],
                kind: entry.kind,
                flag: entry.flag,
                id: entry.id,
            })
    }

    /// Every field as a [`Field`] to encode, with its indexing.
    pub fn to_send(&self) -> impl Iterator<Item = Field<'_>> {
        (0..self.len()).map(move |i| {
            let (name, value) = self.get(i);
            Field {
                name,
                value,
                indexing: self.entries[i].indexing,
            }
        })
    }

    /// Appends a field sent as a literal.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        self.push_with(name, value, Indexing::None);
    }

    /// Appends a field with how it should be encoded.
    pub fn push_with(&mut self, name: &[u8], value: &[u8], indexing: Indexing) {
        self.push_entry(name, value, indexing, FieldKind::Other, false, 0);
    }

    /// Appends a decoded field with what the decoder knew of it.
    #[inline]
    pub(crate) fn push_classified(&mut self, name: &[u8], value: &[u8], info: &FieldInfo, id: u64) {
        self.push_entry(name, value, Indexing::None, info.kind, info.flag, id);
    }

    #[inline]
    fn push_entry(
        &mut self,
        name: &[u8],
        value: &[u8],
        indexing: Indexing,
        kind: FieldKind,
        flag: bool,
        id: u64,
    ) {
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.entries.push(Entry {
            start,
            mid,
            end: self.bytes.len() as u32,
            indexing,
            kind,
            flag,
            id,
        });
    }

    /// Keeps the first `len` fields.
    pub fn truncate(&mut self, len: usize) {
        if let Some(entry) = self.entries.get(len) {
            self.bytes.truncate(entry.start as usize);
        }
        self.entries.truncate(len);
    }

    /// Removes every field, keeping the room.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    /// The room the list holds, in bytes: its names and values, and its
    /// entries.
    pub(crate) fn room(&self) -> usize {
        self.bytes.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// Removes every field, keeping the room up to about `bytes` bytes of
    /// names and values.
    pub fn clear_keeping(&mut self, bytes: usize) {
        self.clear();
        if self.bytes.capacity() > bytes {
            self.bytes.shrink_to(bytes);
            self.entries.shrink_to(bytes / 32);
        }
    }
}

/// What a header field is, as far as the codec and the gRPC layer above it
/// care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// `:method`.
    Method,
    /// `:scheme`.
    Scheme,
    /// `:path`.
    Path,
    /// `:authority`.
    Authority,
    /// Any other pseudo-header: not allowed in a request.
    UnknownPseudo,
    /// `te`.
    Te,
    /// `content-length`.
    ContentLength,
    /// `content-type`.
    ContentType,
    /// `grpc-timeout`.
    GrpcTimeout,
    /// `grpc-encoding`.
    GrpcEncoding,
    /// `grpc-accept-encoding`.
    GrpcAcceptEncoding,
    /// Any other field: custom metadata for gRPC.
    Other,
}

/// What a field's name and value alone say about it. Computed once per
/// HPACK table entry (and for the static table, at compile time), so that a
/// field that comes whole from a table costs a look-up, not a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldInfo {
    /// Which field it is.
    pub kind: FieldKind,
    /// For `:method`, whether it is `POST`; for `content-type`, whether it
    /// is a gRPC content type (`application/grpc`, `+format` or
    /// `;parameters` after it).
    pub flag: bool,
    /// A problem with the field's bytes (an empty name, upper case or
    /// other bytes a name may not hold, NUL, CR or LF in the value, white
    /// space around it): the request is malformed wherever the field is.
    pub name_problem: Option<&'static str>,
    /// A problem with this field in a request (an unknown pseudo-header, an
    /// empty `:path`, a connection-specific field, a `te` other than
    /// `trailers`, an invalid `content-length`).
    pub problem: Option<&'static str>,
    /// The value of a valid `content-length`.
    pub number: u64,
}

impl FieldInfo {
    /// A field of no interest, with no problem: what the encoder's table
    /// entries carry.
    pub const OTHER: FieldInfo = FieldInfo {
        kind: FieldKind::Other,
        flag: false,
        name_problem: None,
        problem: None,
        number: 0,
    };
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn starts_with(a: &[u8], prefix: &[u8]) -> bool {
    if a.len() < prefix.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if a[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `application/grpc`, optionally followed by `+format` or `;parameters`.
const fn is_grpc_content_type(value: &[u8]) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    if !starts_with(value, GRPC) {
        return false;
    }
    value.len() == GRPC.len() || value[GRPC.len()] == b'+' || value[GRPC.len()] == b';'
}

/// The decimal value of a `content-length`, if valid.
const fn parse_decimal(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    let mut i = 0;
    while i < value.len() {
        let digit = value[i];
        if !digit.is_ascii_digit() {
            return None;
        }
        n = match n.checked_mul(10) {
            Some(m) => match m.checked_add((digit - b'0') as u64) {
                Some(sum) => sum,
                None => return None,
            },
            None => return None,
        };
        i += 1;
    }
    Some(n)
}

/// What makes a field value invalid in HTTP/2 (RFC 9113 section 8.2.1):
/// NUL, CR or LF anywhere, or white space at either end.
pub(crate) const fn value_problem(value: &[u8]) -> Option<&'static str> {
    let mut i = 0;
    while i < value.len() {
        if matches!(value[i], 0 | b'\r' | b'\n') {
            return Some("NUL, CR or LF in a header value");
        }
        i += 1;
    }
    if let (Some(&first), Some(&last)) = (value.first(), value.last()) {
        if matches!(first, b' ' | b'\t') || matches!(last, b' ' | b'\t') {
            return Some("white space around a header value");
        }
    }
    None
}

/// Classifies a request field by its name and value (RFC 9113 sections
/// 8.2 and 8.3, and the gRPC fields).
///
/// ```
/// use pajamax::h2::fields::{classify, FieldKind};
/// let info = classify(b":method", b"POST");
/// assert_eq!((info.kind, info.flag), (FieldKind::Method, true));
/// assert!(classify(b"X-Upper", b"1").name_problem.is_some());
/// assert_eq!(classify(b"content-length", b"42").number, 42);
/// ```
pub const fn classify(name: &[u8], value: &[u8]) -> FieldInfo {
    let mut info = FieldInfo::OTHER;
    if name.is_empty() {
        info.name_problem = Some("empty header name");
        return info;
    }
    let mut i = 0;
    while i < name.len() {
        let b = name[i];
        if b.is_ascii_uppercase() {
            info.name_problem = Some("upper-case header name");
            return info;
        }
        // RFC 9113 section 8.2.1: no control bytes, space, DEL or bytes
        // past ASCII, and a colon only to start a pseudo-header.
        if b <= 0x20 || b >= 0x7f || (b == b':' && i > 0) {
            info.name_problem = Some("invalid byte in a header name");
            return info;
        }
        i += 1;
    }
    if let Some(problem) = value_problem(value) {
        info.name_problem = Some(problem);
        return info;
    }
    if name[0] == b':' {
        if eq(name, b":method") {
            info.kind = FieldKind::Method;
            info.flag = eq(value, b"POST");
        } else if eq(name, b":scheme") {
            info.kind = FieldKind::Scheme;
        } else if eq(name, b":path") {
            info.kind = FieldKind::Path;
            if value.is_empty() {
                info.problem = Some("empty :path");
            }
        } else if eq(name, b":authority") {
            info.kind = FieldKind::Authority;
        } else {
            info.kind = FieldKind::UnknownPseudo;
            info.problem = Some("unknown pseudo-header");
        }
        return info;
    }
    if eq(name, b"connection")
        || eq(name, b"keep-alive")
        || eq(name, b"proxy-connection")
        || eq(name, b"transfer-encoding")
        || eq(name, b"upgrade")
    {
        info.problem = Some("connection-specific header");
    } else if eq(name, b"te") {
        info.kind = FieldKind::Te;
        if !eq(value, b"trailers") {
            info.problem = Some("te other than trailers");
        }
    } else if eq(name, b"content-length") {
        info.kind = FieldKind::ContentLength;
        match parse_decimal(value) {
            Some(n) => info.number = n,
            None => info.problem = Some("invalid content-length"),
        }
    } else if eq(name, b"content-type") {
        info.kind = FieldKind::ContentType;
        info.flag = is_grpc_content_type(value);
    } else if eq(name, b"grpc-timeout") {
        info.kind = FieldKind::GrpcTimeout;
    } else if eq(name, b"grpc-encoding") {
        info.kind = FieldKind::GrpcEncoding;
    } else if eq(name, b"grpc-accept-encoding") {
        info.kind = FieldKind::GrpcAcceptEncoding;
    }
    info
}

/// Tracks one header block while it is decoded and finds what makes it
/// malformed: upper-case names, pseudo-headers out of place, unknown or
/// repeated, connection-specific fields, a `te` other than `trailers`,
/// `content-length` fields that disagree.
#[derive(Debug, Clone)]
pub(crate) struct FieldCheck {
    trailers: bool,
    seen_regular: bool,
    pseudo_seen: u8,
    /// Sum of name + value + 32 over the fields (RFC 9113 section 6.5.2).
    pub list_size: usize,
    /// The first problem found, if any.
    pub malformed: Option<&'static str>,
    /// The value of `content-length`, when present and valid.
    pub content_length: Option<u64>,
}

const METHOD: u8 = 1;
const SCHEME: u8 = 2;
const PATH: u8 = 4;
const AUTHORITY: u8 = 8;

impl FieldCheck {
    pub(crate) fn new(trailers: bool) -> FieldCheck {
        FieldCheck {
            trailers,
            seen_regular: false,
            pseudo_seen: 0,
            list_size: 0,
            malformed: None,
            content_length: None,
        }
    }

    /// Looks at one field; returns whether it is well-formed so far.
    #[cfg(test)]
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) -> bool {
        self.field_info(&classify(name, value), name.len() + value.len())
    }

    /// Looks at one field of `len` bytes (name and value) classified as
    /// `info`; returns whether the block is well-formed so far.
    #[inline]
    pub(crate) fn field_info(&mut self, info: &FieldInfo, len: usize) -> bool {
        self.list_size += len + crate::h2::hpack::ENTRY_OVERHEAD;
        if self.malformed.is_some() {
            return false;
        }
        if let Err(problem) = self.check(info) {
            self.malformed = Some(problem);
            return false;
        }
        true
    }

    #[inline]
    fn check(&mut self, info: &FieldInfo) -> Result<(), &'static str> {
        if let Some(problem) = info.name_problem {
            return Err(problem);
        }
        let bit = match info.kind {
            FieldKind::Method => METHOD,
            FieldKind::Scheme => SCHEME,
            FieldKind::Path => PATH,
            FieldKind::Authority => AUTHORITY,
            FieldKind::UnknownPseudo => 0,
            _ => {
                self.seen_regular = true;
                if let Some(problem) = info.problem {
                    return Err(problem);
                }
                if info.kind == FieldKind::ContentLength {
                    // Two lengths that differ cannot both match the body
                    // (RFC 9113 section 8.1.1).
                    if self.content_length.is_some_and(|n| n != info.number) {
                        return Err("conflicting content-length");
                    }
                    self.content_length = Some(info.number);
                }
                return Ok(());
            }
        };
        if self.trailers {
            return Err("pseudo-header in trailers");
        }
        if self.seen_regular {
            return Err("pseudo-header after a regular header");
        }
        if bit == 0 {
            return Err("unknown pseudo-header");
        }
        if self.pseudo_seen & bit != 0 {
            return Err("repeated pseudo-header");
        }
        if let Some(problem) = info.problem {
            return Err(problem);
        }
        self.pseudo_seen |= bit;
        Ok(())
    }

    /// The verdict once the whole block is decoded.
    pub(crate) fn finish(&self) -> Result<(), &'static str> {
        if let Some(problem) = self.malformed {
            return Err(problem);
        }
        let required = METHOD | SCHEME | PATH;
        if !self.trailers && self.pseudo_seen & required != required {
            return Err("missing :method, :scheme or :path");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(trailers: bool, fields: &[(&str, &str)]) -> Result<(), &'static str> {
        let mut check = FieldCheck::new(trailers);
        for (name, value) in fields {
            check.field(name.as_bytes(), value.as_bytes());
        }
        check.finish()
    }

    const GOOD: [(&str, &str); 4] = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/a.B/C"),
        ("te", "trailers"),
    ];

    #[test]
    fn accepts_a_grpc_request_and_trailers() {
        assert_eq!(verdict(false, &GOOD), Ok(()));
        assert_eq!(verdict(true, &[("x-checksum", "1")]), Ok(()));
    }

    #[test]
    fn finds_each_malformation() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[(":method", "POST"), (":scheme", "http")],
                "missing :method, :scheme or :path",
            ),
            (
                &[(":method", "POST"), (":scheme", "http"), (":path", "")],
                "empty :path",
            ),
            (
                &[(":method", "POST"), (":method", "GET")],
                "repeated pseudo-header",
            ),
            (&[(":status", "200")], "unknown pseudo-header"),
            (
                &[("x", "1"), (":method", "POST")],
                "pseudo-header after a regular header",
            ),
            (&[("X-Upper", "1")], "upper-case header name"),
            (
                &[("connection", "keep-alive")],
                "connection-specific header",
            ),
            (&[("te", "gzip")], "te other than trailers"),
            (&[("content-length", "ten")], "invalid content-length"),
        ];
        for (fields, problem) in cases {
            assert_eq!(verdict(false, fields), Err(*problem), "{fields:?}");
        }
        assert_eq!(
            verdict(true, &[(":path", "/")]),
            Err("pseudo-header in trailers")
        );
    }

    #[test]
    fn content_lengths_that_disagree_are_malformed() {
        // Whatever the body's length, one of them does not match it.
        let with = |lengths: &[&'static str]| {
            let mut fields = GOOD.to_vec();
            fields.extend(lengths.iter().map(|n| ("content-length", *n)));
            verdict(false, &fields)
        };
        assert_eq!(with(&["0", "5"]), Err("conflicting content-length"));
        assert_eq!(with(&["5", "5", "7"]), Err("conflicting content-length"));
        // The same length twice says one thing.
        assert_eq!(with(&["5", "5"]), Ok(()));
        let mut check = FieldCheck::new(false);
        check.field(b"content-length", b"5");
        check.field(b"content-length", b"005");
        assert_eq!(check.content_length, Some(5));
    }

    #[test]
    fn records_content_length_and_list_size() {
        let mut check = FieldCheck::new(false);
        check.field(b"content-length", b"42");
        assert_eq!(check.content_length, Some(42));
        assert_eq!(check.list_size, 14 + 2 + 32);
    }

    #[test]
    fn fields_keep_their_indexing_for_sending() {
        let mut fields = Fields::default();
        fields.push_with(b"grpc-status", b"0", Indexing::Incremental);
        fields.push(b"x-a", b"1");
        let sent: Vec<_> = fields.to_send().map(|f| (f.name, f.indexing)).collect();
        assert_eq!(
            sent,
            vec![
                (&b"grpc-status"[..], Indexing::Incremental),
                (&b"x-a"[..], Indexing::None)
            ]
        );
    }

    #[test]
    fn fields_store_and_truncate() {
        let mut fields = Fields::default();
        fields.push(b"a", b"1");
        fields.push(b"bb", b"22");
        fields.push(b"c", b"3");
        assert_eq!(fields.get(1), (&b"bb"[..], &b"22"[..]));
        fields.truncate(1);
        assert_eq!(fields.len(), 1);
        fields.push(b"d", b"4");
        assert_eq!(
            fields.iter(0..2).collect::<Vec<_>>(),
            vec![(&b"a"[..], &b"1"[..]), (&b"d"[..], &b"4"[..])]
        );
        fields.clear();
        assert!(fields.is_empty());
    }
}
