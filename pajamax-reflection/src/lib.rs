//! gRPC server reflection for pajamax servers.
//!
//! Server reflection lets a client ask a server which services it serves
//! and for the file descriptors that define them, so that tools such as
//! [grpcurl](https://github.com/fullstorydev/grpcurl) can list, describe and
//! call the services without the `.proto` files:
//!
//! ```text
//! $ grpcurl -plaintext 127.0.0.1:50051 list
//! grpc.reflection.v1.ServerReflection
//! grpc.reflection.v1alpha.ServerReflection
//! helloworld.Greeter
//! $ grpcurl -plaintext -d '{"name": "world"}' 127.0.0.1:50051 helloworld.Greeter/SayHello
//! {
//!   "message": "Hello world!"
//! }
//! ```
//!
//! Both versions of the protocol are served, `grpc.reflection.v1` and the
//! older `grpc.reflection.v1alpha` that many clients still ask, with the
//! bidirectional `ServerReflectionInfo` method. Its answers are computed in
//! memory on the worker (a [`pajamax::BidiHandler`]), nothing blocks.
//!
//! # Registering
//!
//! `pajamax-build` embeds the encoded file descriptor set of the protos it
//! compiles as a `FILE_DESCRIPTOR_SET` constant in every package module
//! with a service; it holds every file of the build run and the files they
//! import, well-known types included. Add the other services first, then
//! reflection in one line:
//!
//! ```ignore
//! mod helloworld {
//!     pajamax::include_proto!("helloworld");
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     let builder = pajamax::Server::builder()
//!         .add_service(GreeterServer::new(MyGreeter));
//!     pajamax_reflection::serve(builder, &[helloworld::FILE_DESCRIPTOR_SET])
//!         .serve("127.0.0.1:50051")
//! }
//! ```
//!
//! [`serve`] lists the services added to the builder so far, and the two
//! reflection services; it answers from the given sets and from the
//! reflection protos themselves. A server whose services come from several
//! `pajamax-build` runs (other crates, say) passes one set per run. For
//! other choices (the list of services, adding the two versions
//! separately), see [`ReflectionService`].
//!
//! # Answers
//!
//! - `list_services`: the listed services.
//! - `file_by_filename`, `file_containing_symbol` (a package, service,
//!   method, message, field, oneof, enum, enum value or extension, by its
//!   fully qualified name) and `file_containing_extension`: the file, then
//!   the files it imports, transitively, that the stream has not sent yet
//!   (each file goes once per stream, as grpc-go does; the file asked for
//!   always goes). The files are served as they were encoded.
//! - `all_extension_numbers_of_type`: the numbers of the message's known
//!   extensions, possibly none.
//! - Otherwise an `error_response` with the gRPC code `NOT_FOUND` (no such
//!   file, symbol, extension or message type) or `INVALID_ARGUMENT` (an
//!   empty name, or no question at all); the stream goes on.
//!
//! ```
//! use pajamax_reflection::v1::server_reflection_request::MessageRequest;
//! use pajamax_reflection::v1::server_reflection_response::MessageResponse;
//! use pajamax_reflection::v1::ServerReflectionRequest;
//! use pajamax_reflection::ReflectionService;
//! use prost::Message;
//!
//! let service = ReflectionService::new(&[])?;
//! let mut stream = service.session();
//! let answer = stream.answer(ServerReflectionRequest {
//!     host: String::new(),
//!     message_request: Some(MessageRequest::FileContainingSymbol(
//!         "grpc.reflection.v1.ServerReflection".into(),
//!     )),
//! });
//! let Some(MessageResponse::FileDescriptorResponse(files)) = answer.message_response else {
//!     panic!("not found");
//! };
//! let file = prost_types::FileDescriptorProto::decode(&*files.file_descriptor_proto[0])?;
//! assert_eq!(file.name(), "grpc/reflection/v1/reflection.proto");
//! assert_eq!(file.service[0].name(), "ServerReflection");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod index;

pub use index::DescriptorError;

use index::Index;
use pajamax::{BidiHandler, BidiStream, Builder, Code, Context, Responses, Status};
use std::fmt;
use std::sync::Arc;
use v1::server_reflection_request::MessageRequest;
use v1::server_reflection_response::MessageResponse;
use v1::{
    ErrorResponse, ExtensionNumberResponse, FileDescriptorResponse, ListServiceResponse,
    ServerReflectionRequest, ServerReflectionResponse, ServiceResponse,
};

/// The `grpc.reflection.v1` proto package: the messages and the
/// `ServerReflection` service, and the encoded descriptors of both
/// reflection protos (`FILE_DESCRIPTOR_SET`).
pub mod v1 {
    pajamax::include_proto!("grpc.reflection.v1");
}

/// The `grpc.reflection.v1alpha` proto package: its `ServerReflection`
/// service. Its messages are those of [`v1`], which they match field for
/// field on the wire.
pub mod v1alpha {
    pajamax::include_proto!("grpc.reflection.v1alpha");
}

/// The name of the v1 reflection service, `grpc.reflection.v1.ServerReflection`.
pub const V1_SERVICE_NAME: &str = v1::server_reflection_server::SERVICE_NAME;

/// The name of the v1alpha reflection service,
/// `grpc.reflection.v1alpha.ServerReflection`.
pub const V1ALPHA_SERVICE_NAME: &str = v1alpha::server_reflection_server::SERVICE_NAME;

/// Adds server reflection, v1 and v1alpha, to `builder`, listing the
/// services added to it so far and the two reflection services, and
/// answering from `file_descriptor_sets` (such as the `FILE_DESCRIPTOR_SET`
/// constants `pajamax-build` generates) and the reflection protos.
///
/// Add reflection after the other services: those added later are served
/// but not listed.
///
/// ```
/// let builder = pajamax::Server::builder(); // .add_service(...) first
/// let builder = pajamax_reflection::serve(builder, &[]);
/// assert_eq!(
///     builder.service_names(),
///     ["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]
/// );
/// ```
///
/// # Panics
///
/// When a set does not decode; sets from `pajamax-build` always do. Use
/// [`ReflectionService::new`] and [`ReflectionService::add_to`] to handle
/// that error instead.
pub fn serve(builder: Builder, file_descriptor_sets: &[&[u8]]) -> Builder {
    match ReflectionService::new(file_descriptor_sets) {
        Ok(service) => service.add_to(builder),
        Err(err) => panic!("pajamax-reflection: {err}"),
    }
}

/// The reflection service: the indexed file descriptors and the services to
/// list. Cloning it is cheap (they are shared).
///
/// It implements the `ServerReflection` traits of [`v1`] and [`v1alpha`];
/// [`ReflectionService::add_to`] adds both to a server, or
/// [`v1_server`](ReflectionService::v1_server) and
/// [`v1alpha_server`](ReflectionService::v1alpha_server) give them one by
/// one.
///
/// ```
/// use pajamax_reflection::ReflectionService;
///
/// let reflection = ReflectionService::new(&[pajamax_reflection::v1::FILE_DESCRIPTOR_SET])?
///     .with_services(["helloworld.Greeter", pajamax_reflection::V1_SERVICE_NAME]);
/// assert_eq!(reflection.services(), ["helloworld.Greeter", "grpc.reflection.v1.ServerReflection"]);
/// let builder = pajamax::Server::builder().add_service(reflection.v1_server());
/// # Ok::<(), pajamax_reflection::DescriptorError>(())
/// ```
#[derive(Clone)]
pub struct ReflectionService {
    index: Arc<Index>,
    services: Arc<[String]>,
}

impl fmt::Debug for ReflectionService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectionService")
            .field("files", &self.index.len())
            .field("services", &self.services)
            .finish()
    }
}

impl ReflectionService {
    /// Indexes the files of `file_descriptor_sets`, each an encoded
    /// `google.protobuf.FileDescriptorSet`, and those of the reflection
    /// protos. A file whose name came in an earlier set is skipped. No
    /// service is listed yet: see [`with_services`](Self::with_services) and
    /// [`add_to`](Self::add_to).
    ///
    /// ```
    /// use pajamax_reflection::ReflectionService;
    ///
    /// let reflection = ReflectionService::new(&[])?;
    /// let files: Vec<&str> = reflection.file_names().collect();
    /// assert_eq!(
    ///     files,
    ///     ["grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto"]
    /// );
    /// # Ok::<(), pajamax_reflection::DescriptorError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When a set, or a file in it, does not decode.
    pub fn new(file_descriptor_sets: &[&[u8]]) -> Result<ReflectionService, DescriptorError> {
        let mut index = Index::default();
        for (number, set) in file_descriptor_sets.iter().enumerate() {
            index.add_set(number, set)?;
        }
        index.add_set(file_descriptor_sets.len(), v1::FILE_DESCRIPTOR_SET)?;
        index.link();
        Ok(ReflectionService {
            index: Arc::new(index),
            services: Arc::from([]),
        })
    }

    /// Lists `names` (fully qualified, such as `helloworld.Greeter`) in
    /// answer to `list_services`, in this order, instead of the services
    /// listed before.
    pub fn with_services<I, S>(mut self, names: I) -> ReflectionService
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.services = names.into_iter().map(Into::into).collect();
        self
    }

    /// The services listed in answer to `list_services`.
    pub fn services(&self) -> &[String] {
        &self.services
    }

    /// The names of the indexed files, in the order they were given.
    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.index.files().map(|file| file.name.as_str())
    }

    /// Lists the services of `builder` and the two reflection services, and
    /// adds both reflection services to it (a version the builder already
    /// has is not added again).
    ///
    /// ```
    /// use pajamax_reflection::ReflectionService;
    ///
    /// let builder = ReflectionService::new(&[])?.add_to(pajamax::Server::builder());
    /// assert_eq!(builder.service_names().len(), 2);
    /// # Ok::<(), pajamax_reflection::DescriptorError>(())
    /// ```
    pub fn add_to(self, builder: Builder) -> Builder {
        let present = builder.service_names();
        let mut names: Vec<String> = present.iter().map(|&name| name.to_owned()).collect();
        for name in [V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME] {
            if !present.contains(&name) {
                names.push(name.to_owned());
            }
        }
        let service = self.with_services(names);
        let mut builder = builder;
        if !present.contains(&V1_SERVICE_NAME) {
            builder = builder.add_service(service.v1_server());
        }
        if !present.contains(&V1ALPHA_SERVICE_NAME) {
            builder = builder.add_service(service.v1alpha_server());
        }
        builder
    }

    /// The `grpc.reflection.v1.ServerReflection` service, to add to a
    /// server.
    pub fn v1_server(
        &self,
    ) -> v1::server_reflection_server::ServerReflectionServer<ReflectionService> {
        v1::server_reflection_server::ServerReflectionServer::new(self.clone())
    }

    /// The `grpc.reflection.v1alpha.ServerReflection` service, to add to a
    /// server.
    pub fn v1alpha_server(
        &self,
    ) -> v1alpha::server_reflection_server::ServerReflectionServer<ReflectionService> {
        v1alpha::server_reflection_server::ServerReflectionServer::new(self.clone())
    }

    /// The state of one reflection stream: what it answers each request
    /// with, and which files it has sent.
    pub fn session(&self) -> ReflectionSession {
        ReflectionSession {
            service: self.clone(),
            sent: vec![false; self.index.len()],
        }
    }
}

impl v1::server_reflection_server::ServerReflection for ReflectionService {
    fn server_reflection_info(
        &self,
    ) -> Result<BidiStream<ServerReflectionRequest, ServerReflectionResponse>, Status> {
        Ok(BidiStream::on_worker(self.session()))
    }
}

impl v1alpha::server_reflection_server::ServerReflection for ReflectionService {
    fn server_reflection_info(
        &self,
    ) -> Result<BidiStream<ServerReflectionRequest, ServerReflectionResponse>, Status> {
        Ok(BidiStream::on_worker(self.session()))
    }
}

/// One reflection stream: answers its requests in order, and sends each
/// file once (beyond the one asked for). Made by
/// [`ReflectionService::session`]; the server makes one per call.
///
/// ```
/// use pajamax_reflection::v1::server_reflection_request::MessageRequest;
/// use pajamax_reflection::v1::server_reflection_response::MessageResponse;
/// use pajamax_reflection::v1::ServerReflectionRequest;
/// use pajamax_reflection::ReflectionService;
///
/// let mut stream = ReflectionService::new(&[])?.session();
/// let answer = stream.answer(ServerReflectionRequest {
///     host: String::new(),
///     message_request: Some(MessageRequest::FileByFilename("nowhere.proto".into())),
/// });
/// let Some(MessageResponse::ErrorResponse(error)) = answer.message_response else {
///     panic!("found");
/// };
/// assert_eq!(error.error_code, pajamax::Code::NotFound as i32);
/// # Ok::<(), pajamax_reflection::DescriptorError>(())
/// ```
pub struct ReflectionSession {
    service: ReflectionService,
    /// Whether the stream has sent each file, by number.
    sent: Vec<bool>,
}

impl fmt::Debug for ReflectionSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectionSession")
            .field("sent", &self.sent.iter().filter(|&&sent| sent).count())
            .finish_non_exhaustive()
    }
}

impl ReflectionSession {
    /// The answer to `request`: the data asked for, or an `error_response`.
    pub fn answer(&mut self, request: ServerReflectionRequest) -> ServerReflectionResponse {
        let message_response = match &request.message_request {
            Some(MessageRequest::ListServices(_)) => {
                MessageResponse::ListServicesResponse(ListServiceResponse {
                    service: self
                        .service
                        .services
                        .iter()
                        .map(|name| ServiceResponse { name: name.clone() })
                        .collect(),
                })
            }
            Some(MessageRequest::FileByFilename(name)) => {
                if name.is_empty() {
                    invalid("file_by_filename names no file")
                } else {
                    match self.service.index.file_by_name(name) {
                        Some(file) => self.files(file),
                        None => not_found(format!("file {name:?} not found")),
                    }
                }
            }
            Some(MessageRequest::FileContainingSymbol(symbol)) => {
                if symbol.is_empty() {
                    invalid("file_containing_symbol names no symbol")
                } else {
                    match self.service.index.file_containing_symbol(symbol) {
                        Some(file) => self.files(file),
                        None => not_found(format!("symbol {symbol:?} not found")),
                    }
                }
            }
            Some(MessageRequest::FileContainingExtension(extension)) => {
                let extendee = &extension.containing_type;
                let number = extension.extension_number;
                if extendee.is_empty() {
                    invalid("file_containing_extension names no containing type")
                } else {
                    match self
                        .service
                        .index
                        .file_containing_extension(extendee, number)
                    {
                        Some(file) => self.files(file),
                        None => not_found(format!("extension {number} of {extendee:?} not found")),
                    }
                }
            }
            Some(MessageRequest::AllExtensionNumbersOfType(name)) => {
                if name.is_empty() {
                    invalid("all_extension_numbers_of_type names no type")
                } else {
                    match self.service.index.extension_numbers(name) {
                        Some(numbers) => {
                            MessageResponse::AllExtensionNumbersResponse(ExtensionNumberResponse {
                                base_type_name: name.strip_prefix('.').unwrap_or(name).to_owned(),
                                extension_number: numbers,
                            })
                        }
                        None => not_found(format!("message type {name:?} not found")),
                    }
                }
            }
            None => invalid("the request asks nothing: message_request is not set"),
        };
        ServerReflectionResponse {
            valid_host: request.host.clone(),
            original_request: Some(request),
            message_response: Some(message_response),
        }
    }

    /// File `file` and the files it imports, transitively, that the stream
    /// has not sent yet; `file` itself always.
    fn files(&mut self, file: usize) -> MessageResponse {
        let index = &self.service.index;
        let mut encoded = Vec::new();
        let mut seen = vec![false; index.len()];
        let mut queue = std::collections::VecDeque::from([file]);
        while let Some(at) = queue.pop_front() {
            if std::mem::replace(&mut seen[at], true) {
                continue;
            }
            if encoded.is_empty() || !self.sent[at] {
                self.sent[at] = true;
                encoded.push(index.file(at).encoded.clone());
            }
            queue.extend(index.file(at).imports.iter().copied());
        }
        MessageResponse::FileDescriptorResponse(FileDescriptorResponse {
            file_descriptor_proto: encoded,
        })
    }
}

impl BidiHandler<ServerReflectionRequest, ServerReflectionResponse> for ReflectionSession {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        request: ServerReflectionRequest,
        responses: &mut Responses<'_, ServerReflectionResponse>,
    ) -> Result<(), Status> {
        responses.send(&self.answer(request));
        Ok(())
    }
}

/// An `error_response` with `code`.
fn error(code: Code, message: String) -> MessageResponse {
    MessageResponse::ErrorResponse(ErrorResponse {
        error_code: code as i32,
        error_message: message,
    })
}

fn not_found(message: String) -> MessageResponse {
    error(Code::NotFound, message)
}

fn invalid(message: &str) -> MessageResponse {
    error(Code::InvalidArgument, message.to_owned())
}

#[cfg(test)]
mod tests;
