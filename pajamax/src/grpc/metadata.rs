//! gRPC metadata: the custom headers of a request or a response.

use crate::h2::fields::Fields;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use std::fmt;

/// An ordered list of metadata entries (custom headers).
///
/// Keys are lower-case ASCII. Keys ending in `-bin` carry binary values,
/// base64-encoded on the wire; [`Metadata::get_bin`] and
/// [`Metadata::insert_bin`] do the encoding.
///
/// ```
/// let mut md = pajamax::Metadata::new();
/// md.insert("x-user", "alice").unwrap();
/// md.insert_bin("x-token-bin", &[0, 1, 2]).unwrap();
/// assert_eq!(md.get("x-user"), Some("alice"));
/// assert_eq!(md.get_bin("x-token-bin"), Some(vec![0, 1, 2]));
/// assert_eq!(md.len(), 2);
/// ```
#[derive(Default, Clone, PartialEq, Eq)]
pub struct Metadata {
    fields: Fields,
}

/// A metadata key or value that HTTP/2 or gRPC does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidMetadata(&'static str);

impl fmt::Display for InvalidMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for InvalidMetadata {}

impl Metadata {
    /// An empty list; it allocates nothing until an entry is added.
    pub fn new() -> Metadata {
        Metadata::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The bytes the entries take, as HPACK counts a header list.
    pub(crate) fn list_size(&self) -> usize {
        self.fields.list_size()
    }

    /// Removes every entry, keeping the allocated room.
    pub fn clear(&mut self) {
        self.fields.clear();
    }

    /// The room the list holds, in bytes.
    pub(crate) fn room(&self) -> usize {
        self.fields.room()
    }

    /// Removes every entry and lets go of the room.
    pub(crate) fn let_go_room(&mut self) {
        self.fields.clear_keeping(0);
    }

    /// The raw value of the first entry named `name`.
    pub fn get_bytes(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }

    /// The raw values of every entry named `name`, in order: a key may
    /// come more than once.
    ///
    /// ```
    /// let mut md = pajamax::Metadata::new();
    /// md.insert("x-tag", "a").unwrap();
    /// md.insert("x-other", "b").unwrap();
    /// md.insert("x-tag", "c").unwrap();
    /// let tags: Vec<&[u8]> = md.get_all("x-tag").collect();
    /// assert_eq!(tags, [&b"a"[..], &b"c"[..]]);
    /// ```
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |(key, _)| *key == name)
            .map(|(_, value)| value)
    }

    /// Removes every entry named `name`, keeping the others in order, and
    /// says how many there were.
    ///
    /// ```
    /// let mut md = pajamax::Metadata::new();
    /// md.insert("x-tag", "a").unwrap();
    /// md.insert("x-other", "b").unwrap();
    /// md.insert("x-tag", "c").unwrap();
    /// assert_eq!(md.remove("x-tag"), 2);
    /// assert_eq!(md.get("x-tag"), None);
    /// assert_eq!(md.get("x-other"), Some("b"));
    /// assert_eq!(md.remove("x-tag"), 0);
    /// ```
    pub fn remove(&mut self, name: &str) -> usize {
        let removed = self.get_all(name).count();
        if removed > 0 {
            let mut kept = Fields::default();
            for (key, value) in self.fields.iter_all() {
                if key != name.as_bytes() {
                    kept.push(key, value);
                }
            }
            self.fields = kept;
        }
        removed
    }

    /// The value of the first entry named `name`, if it is valid UTF-8.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.get_bytes(name)
            .and_then(|value| std::str::from_utf8(value).ok())
    }

    /// The base64-decoded value of the first entry named `name` (a `-bin` key).
    ///
    /// Padded and unpadded base64 are both accepted. An entry that carries
    /// several values joined by commas (as an HTTP intermediary may join
    /// repeated fields) gives its first one, as gRPC splits binary values on
    /// `,` before decoding them.
    pub fn get_bin(&self, name: &str) -> Option<Vec<u8>> {
        let raw = self.get_bytes(name)?;
        let first = raw.split(|&b| b == b',').next().unwrap_or(raw);
        decode_base64(first.trim_ascii())
    }

    /// Every entry in order, as `(key, raw value)`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields
            .iter_all()
            .map(|(name, value)| (std::str::from_utf8(name).unwrap_or(""), value))
    }

    /// The entries as header fields, for the codec.
    pub(crate) fn fields(&self) -> &Fields {
        &self.fields
    }

    /// Appends an ASCII entry. The key must be a valid lower-case header name
    /// not ending in `-bin`; the value printable ASCII, without a space at
    /// either end (HTTP/2 takes a field value that has one as malformed).
    pub fn insert(&mut self, name: &str, value: &str) -> Result<(), InvalidMetadata> {
        check_name(name)?;
        if name.ends_with("-bin") {
            return Err(InvalidMetadata("a -bin key takes insert_bin"));
        }
        if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(InvalidMetadata("a metadata value must be printable ASCII"));
        }
        if value.starts_with(' ') || value.ends_with(' ') {
            return Err(InvalidMetadata(
                "a metadata value must not start or end with a space",
            ));
        }
        self.push(name.as_bytes(), value.as_bytes());
        Ok(())
    }

    /// Appends a binary entry; the key must end in `-bin`.
    pub fn insert_bin(&mut self, name: &str, value: &[u8]) -> Result<(), InvalidMetadata> {
        check_name(name)?;
        if !name.ends_with("-bin") {
            return Err(InvalidMetadata("a binary key must end in -bin"));
        }
        let encoded = STANDARD_NO_PAD.encode(value);
        self.push(name.as_bytes(), encoded.as_bytes());
        Ok(())
    }

    /// Appends an entry in its wire form, the form [`Metadata::get_bytes`]
    /// gives: for sending back what a request carried, whatever its value.
    /// The key as for [`Metadata::insert`] or [`Metadata::insert_bin`];
    /// the value any bytes an HTTP/2 field value may hold (no NUL, CR or
    /// LF, no space or tab at either end), which is every value a request
    /// brings. A `-bin` value is taken as the base64 text it is on the
    /// wire, unchecked.
    ///
    /// ```
    /// let mut request = pajamax::Metadata::new();
    /// request.insert_raw("x-name", "Zoë".as_bytes()).unwrap();
    /// let mut answer = pajamax::Metadata::new();
    /// if let Some(value) = request.get_bytes("x-name") {
    ///     answer.insert_raw("x-name", value).unwrap();
    /// }
    /// assert_eq!(answer.get("x-name"), Some("Zoë"));
    /// assert!(answer.insert_raw("x-name", b"a\r\nb").is_err());
    /// ```
    pub fn insert_raw(&mut self, name: &str, value: &[u8]) -> Result<(), InvalidMetadata> {
        check_name(name)?;
        if let Some(problem) = crate::h2::fields::value_problem(value) {
            return Err(InvalidMetadata(problem));
        }
        self.push(name.as_bytes(), value);
        Ok(())
    }

    /// Appends an entry as it came off the wire, unchecked.
    pub(crate) fn push(&mut self, name: &[u8], value: &[u8]) {
        self.fields.push(name, value);
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(key, value)| (key, String::from_utf8_lossy(value))),
            )
            .finish()
    }
}

/// Header names a response must not carry as metadata: the
/// connection-specific fields HTTP/2 forbids (RFC 9113 section 8.2.2; a
/// client drops a response with one as malformed), and the fields the
/// server sets itself.
const RESERVED: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "content-type",
    "content-length",
];

fn check_name(name: &str) -> Result<(), InvalidMetadata> {
    let valid = !name.is_empty()
        && !name.starts_with("grpc-")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
    if !valid {
        return Err(InvalidMetadata(
            "a metadata key must be lower-case [0-9a-z-_.] and not start with grpc-",
        ));
    }
    if RESERVED.contains(&name) {
        return Err(InvalidMetadata(
            "a metadata key must not be a connection-specific field, te, content-type or content-length",
        ));
    }
    Ok(())
}

fn decode_base64(raw: &[u8]) -> Option<Vec<u8>> {
    let trimmed = raw.strip_suffix(b"==").or_else(|| raw.strip_suffix(b"="));
    STANDARD_NO_PAD
        .decode(trimmed.unwrap_or(raw))
        .or_else(|_| STANDARD.decode(raw))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_first_match() {
        let mut md = Metadata::new();
        md.push(b"a", b"1");
        md.push(b"b", b"2");
        md.push(b"a", b"3");
        assert_eq!(md.get("a"), Some("1"));
        let all: Vec<_> = md.iter().collect();
        assert_eq!(
            all,
            vec![("a", &b"1"[..]), ("b", &b"2"[..]), ("a", &b"3"[..])]
        );
        md.clear();
        assert!(md.is_empty());
    }

    #[test]
    fn binary_values_accept_padded_and_unpadded_base64() {
        let mut md = Metadata::new();
        md.push(b"x-bin", b"AAEC");
        md.push(b"y-bin", b"AQ==");
        md.push(b"z-bin", b"AQ");
        md.push(b"bad-bin", b"!!");
        assert_eq!(md.get_bin("x-bin"), Some(vec![0, 1, 2]));
        assert_eq!(md.get_bin("y-bin"), Some(vec![1]));
        assert_eq!(md.get_bin("z-bin"), Some(vec![1]));
        assert_eq!(md.get_bin("bad-bin"), None);
        // Values joined by commas: the first one.
        md.push(b"joined-bin", b"AAE=, AAI=");
        md.push(b"joined2-bin", b"AAE,AAI");
        assert_eq!(md.get_bin("joined-bin"), Some(vec![0, 1]));
        assert_eq!(md.get_bin("joined2-bin"), Some(vec![0, 1]));
    }

    #[test]
    fn raw_entries_go_as_given() {
        let mut md = Metadata::new();
        md.insert_raw("x-latin", b"caf\xe9").unwrap();
        md.insert_raw("x-inner", b"a\tb  c").unwrap();
        md.insert_raw("x-empty", b"").unwrap();
        md.insert_raw("x-raw-bin", b"not base64!").unwrap();
        md.insert_raw("x-ok-bin", b"AAEC").unwrap();
        assert_eq!(md.get_bytes("x-latin"), Some(&b"caf\xe9"[..]));
        assert_eq!(md.get("x-latin"), None, "not UTF-8");
        assert_eq!(md.get("x-inner"), Some("a\tb  c"));
        assert_eq!(md.get_bytes("x-raw-bin"), Some(&b"not base64!"[..]));
        assert_eq!(md.get_bin("x-ok-bin"), Some(vec![0, 1, 2]));
        assert_eq!(md.len(), 5);
    }

    #[test]
    fn rejects_invalid_keys_and_values() {
        let mut md = Metadata::new();
        assert!(md.insert("Upper", "v").is_err());
        assert!(md.insert("grpc-status", "0").is_err());
        assert!(md.insert("x-bin", "v").is_err());
        assert!(md.insert("x", "line\nbreak").is_err());
        // A field value must not start or end with white space (RFC 9113
        // section 8.2.1): the client would take the answer as malformed.
        for padded in [" v", "v ", " "] {
            assert!(md.insert("x", padded).is_err(), "{padded:?}");
        }
        assert!(md.insert_bin("x", b"v").is_err());
        // In wire form: anything a field value may hold, with a valid key.
        for bad in [&b"a\rb"[..], b"a\nb", b"a\0b", b" a", b"a\t"] {
            assert!(md.insert_raw("x", bad).is_err(), "{bad:?}");
        }
        assert!(md.insert_raw("X", b"v").is_err());
        assert!(md.insert_raw("grpc-x", b"v").is_err());
        assert!(md.insert_raw("te", b"trailers").is_err());
        for reserved in ["connection", "te", "transfer-encoding", "content-type"] {
            assert!(md.insert(reserved, "v").is_err(), "{reserved}");
        }
        assert!(md.is_empty());
    }
}
