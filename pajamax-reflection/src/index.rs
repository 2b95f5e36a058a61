//! The file descriptors a reflection service answers from, indexed by file
//! name, by symbol and by extension.

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

/// A `google.protobuf.FileDescriptorSet` whose files are kept as they were
/// encoded, so that they are served byte for byte (custom options and all).
#[derive(Clone, PartialEq, Message)]
struct RawFileDescriptorSet {
    #[prost(bytes = "vec", repeated, tag = "1")]
    file: Vec<Vec<u8>>,
}

/// An encoded file descriptor set that does not decode.
///
/// ```
/// let err = pajamax_reflection::ReflectionService::new(&[b"\x0a\x05abc"]).unwrap_err();
/// assert_eq!(err.set(), 0);
/// assert!(err.to_string().starts_with("file descriptor set 0"));
/// ```
#[derive(Debug, Clone)]
pub struct DescriptorError {
    set: usize,
    file: Option<usize>,
    source: prost::DecodeError,
}

impl DescriptorError {
    /// The position of the set in the slice it was given in.
    pub fn set(&self) -> usize {
        self.set
    }

    /// The position of the file in its set, when the set itself decoded.
    pub fn file(&self) -> Option<usize> {
        self.file
    }
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.file {
            Some(file) => write!(
                f,
                "file descriptor set {}, file {file}: {}",
                self.set, self.source
            ),
            None => write!(f, "file descriptor set {}: {}", self.set, self.source),
        }
    }
}

impl std::error::Error for DescriptorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// One file descriptor.
#[derive(Debug)]
pub(crate) struct File {
    /// Its name, such as `google/protobuf/empty.proto`.
    pub(crate) name: String,
    /// The encoded `FileDescriptorProto`.
    pub(crate) encoded: Vec<u8>,
    /// The names of the files it imports.
    import_names: Vec<String>,
    /// The files it imports that the index holds, by number.
    pub(crate) imports: Vec<usize>,
}

/// Files by name, and where every symbol and extension is defined.
#[derive(Debug, Default)]
pub(crate) struct Index {
    files: Vec<File>,
    by_name: HashMap<String, usize>,
    /// Fully qualified names, without the leading dot, of packages,
    /// services, methods, messages, fields, oneofs, enums, enum values and
    /// extensions: the file defining each (the first one, for a package).
    symbols: HashMap<String, usize>,
    /// The fully qualified names of message types.
    messages: HashSet<String>,
    /// `(extended message, field number)`: the file defining the extension.
    extensions: HashMap<(String, i32), usize>,
    /// Every extended message's extension numbers.
    extension_numbers: HashMap<String, BTreeSet<i32>>,
}

impl Index {
    /// Adds the files of an encoded set; a file whose name is already in
    /// is skipped. `set` numbers the set in errors.
    pub(crate) fn add_set(&mut self, set: usize, encoded: &[u8]) -> Result<(), DescriptorError> {
        let raw = RawFileDescriptorSet::decode(encoded).map_err(|source| DescriptorError {
            set,
            file: None,
            source,
        })?;
        for (number, encoded) in raw.file.into_iter().enumerate() {
            let file = FileDescriptorProto::decode(encoded.as_slice()).map_err(|source| {
                DescriptorError {
                    set,
                    file: Some(number),
                    source,
                }
            })?;
            self.add_file(file, encoded);
        }
        Ok(())
    }

    fn add_file(&mut self, file: FileDescriptorProto, encoded: Vec<u8>) {
        let name = file.name().to_owned();
        if self.by_name.contains_key(&name) {
            return;
        }
        let at = self.files.len();
        self.by_name.insert(name.clone(), at);
        self.files.push(File {
            name,
            encoded,
            import_names: file.dependency.clone(),
            imports: Vec::new(),
        });

        let package = file.package();
        if !package.is_empty() {
            self.symbol(package.to_owned(), at);
        }
        for message in &file.message_type {
            self.add_message(package, message, at);
        }
        for enumeration in &file.enum_type {
            self.add_enum(package, enumeration, at);
        }
        for extension in &file.extension {
            self.add_extension(package, extension, at);
        }
        for service in &file.service {
            let service_name = qualified(package, service.name());
            for method in &service.method {
                self.symbol(qualified(&service_name, method.name()), at);
            }
            self.symbol(service_name, at);
        }
    }

    fn add_message(&mut self, scope: &str, message: &DescriptorProto, at: usize) {
        let name = qualified(scope, message.name());
        for field in &message.field {
            self.symbol(qualified(&name, field.name()), at);
        }
        for oneof in &message.oneof_decl {
            self.symbol(qualified(&name, oneof.name()), at);
        }
        for nested in &message.nested_type {
            self.add_message(&name, nested, at);
        }
        for enumeration in &message.enum_type {
            self.add_enum(&name, enumeration, at);
        }
        for extension in &message.extension {
            self.add_extension(&name, extension, at);
        }
        self.messages.insert(name.clone());
        self.symbol(name, at);
    }

    fn add_enum(&mut self, scope: &str, enumeration: &EnumDescriptorProto, at: usize) {
        // Enum values are scoped as siblings of their enum, as in C++.
        for value in &enumeration.value {
            self.symbol(qualified(scope, value.name()), at);
        }
        self.symbol(qualified(scope, enumeration.name()), at);
    }

    fn add_extension(&mut self, scope: &str, extension: &FieldDescriptorProto, at: usize) {
        let extendee = extension.extendee();
        let extendee = extendee.strip_prefix('.').unwrap_or(extendee).to_owned();
        let number = extension.number();
        self.extensions
            .entry((extendee.clone(), number))
            .or_insert(at);
        self.extension_numbers
            .entry(extendee)
            .or_default()
            .insert(number);
        self.symbol(qualified(scope, extension.name()), at);
    }

    /// Records where `name` is defined, unless an earlier file defines it.
    fn symbol(&mut self, name: String, at: usize) {
        self.symbols.entry(name).or_insert(at);
    }

    /// Resolves the imports of every file to the files the index holds;
    /// an import it does not hold is left out.
    pub(crate) fn link(&mut self) {
        for at in 0..self.files.len() {
            let imports = self.files[at]
                .import_names
                .iter()
                .filter_map(|name| self.by_name.get(name).copied())
                .collect();
            self.files[at].imports = imports;
        }
    }

    /// The number of files.
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }

    /// The file named `name`.
    pub(crate) fn file_by_name(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The file defining the fully qualified `symbol` (a leading dot is
    /// allowed).
    pub(crate) fn file_containing_symbol(&self, symbol: &str) -> Option<usize> {
        let symbol = symbol.strip_prefix('.').unwrap_or(symbol);
        self.symbols.get(symbol).copied()
    }

    /// The file defining extension `number` of message `extendee`.
    pub(crate) fn file_containing_extension(&self, extendee: &str, number: i32) -> Option<usize> {
        let extendee = extendee.strip_prefix('.').unwrap_or(extendee);
        self.extensions.get(&(extendee.to_owned(), number)).copied()
    }

    /// The extension numbers of message `name`, ascending; `None` when no
    /// message has that name.
    pub(crate) fn extension_numbers(&self, name: &str) -> Option<Vec<i32>> {
        let name = name.strip_prefix('.').unwrap_or(name);
        if !self.messages.contains(name) {
            return None;
        }
        Some(
            self.extension_numbers
                .get(name)
                .map(|numbers| numbers.iter().copied().collect())
                .unwrap_or_default(),
        )
    }

    /// File number `at`.
    pub(crate) fn file(&self, at: usize) -> &File {
        &self.files[at]
    }

    /// Every file, in the order added.
    pub(crate) fn files(&self) -> impl Iterator<Item = &File> {
        self.files.iter()
    }
}

/// `scope.name`, or `name` alone in the empty scope.
fn qualified(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_owned()
    } else {
        format!("{scope}.{name}")
    }
}
