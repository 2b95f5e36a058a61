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
}

impl Fields {
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
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.entries.push(Entry {
            start,
            mid,
            end: self.bytes.len() as u32,
            indexing,
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
}

/// Tracks one header block while it is decoded and finds what makes it
/// malformed: upper-case names, pseudo-headers out of place, unknown or
/// repeated, connection-specific fields, a `te` other than `trailers`.
#[derive(Debug)]
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
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) -> bool {
        self.list_size += name.len() + value.len() + 32;
        if self.malformed.is_some() {
            return false;
        }
        if let Err(problem) = self.check(name, value) {
            self.malformed = Some(problem);
            return false;
        }
        true
    }

    fn check(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if name.is_empty() {
            return Err("empty header name");
        }
        if name.iter().any(|b| b.is_ascii_uppercase()) {
            return Err("upper-case header name");
        }
        if name[0] == b':' {
            if self.trailers {
                return Err("pseudo-header in trailers");
            }
            if self.seen_regular {
                return Err("pseudo-header after a regular header");
            }
            let bit = match name {
                b":method" => METHOD,
                b":scheme" => SCHEME,
                b":path" => PATH,
                b":authority" => AUTHORITY,
                _ => return Err("unknown pseudo-header"),
            };
            if self.pseudo_seen & bit != 0 {
                return Err("repeated pseudo-header");
            }
            if bit == PATH && value.is_empty() {
                return Err("empty :path");
            }
            self.pseudo_seen |= bit;
            return Ok(());
        }
        self.seen_regular = true;
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => Err("connection-specific header"),
            b"te" if value != b"trailers" => Err("te other than trailers"),
            b"content-length" => {
                let parsed = std::str::from_utf8(value)
                    .ok()
                    .and_then(|text| text.parse::<u64>().ok());
                match parsed {
                    Some(n) => {
                        self.content_length = Some(n);
                        Ok(())
                    }
                    None => Err("invalid content-length"),
                }
            }
            _ => Ok(()),
        }
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
