//! Code generation for pajamax services.
//!
//! `pajamax-build` turns `.proto` files into Rust at build time: the message
//! types come from [`prost_build`], and every service gets a module with a
//! handler trait and a server type that implements `pajamax::Service`. The
//! protos are parsed in Rust by [`protox`], so no `protoc` needs to be
//! installed.
//!
//! In `build.rs`:
//!
//! ```no_run
//! fn main() -> std::io::Result<()> {
//!     pajamax_build::compile_protos(&["proto/helloworld.proto"], &["proto"])
//! }
//! ```
//!
//! and in the crate, for the proto package `helloworld`:
//!
//! ```ignore
//! pub mod helloworld {
//!     pajamax::include_proto!("helloworld");
//! }
//! ```
//!
//! # What a service turns into
//!
//! For `service RouteGuide` in `package routeguide;` the package module gets
//! a `route_guide_server` module holding:
//!
//! - `trait RouteGuide`, with two methods per rpc, both with defaults: the
//!   plain one answers `UNIMPLEMENTED`, and the one ending in
//!   `_with_context` calls the plain one. An implementation overrides
//!   whichever it needs; the second also gets the call's
//!   `pajamax::Context` (request metadata, deadline, peer, response
//!   metadata). By kind of rpc:
//!
//!   | rpc | handlers |
//!   | --- | --- |
//!   | `GetFeature(Point) returns (Feature)` | `fn get_feature(&self, request: Point) -> Result<Feature, Status>` |
//!   | `ListFeatures(Rectangle) returns (stream Feature)` | `fn list_features(&self, request: Rectangle) -> Result<ServerStream<Feature>, Status>` |
//!   | `RecordRoute(stream Point) returns (RouteSummary)` | `fn record_route(&self) -> Result<ClientStream<Point, RouteSummary>, Status>` |
//!   | `RouteChat(stream RouteNote) returns (stream RouteNote)` | `fn route_chat(&self) -> Result<BidiStream<RouteNote, RouteNote>, Status>` |
//!
//!   each with its `_with_context(&self, ctx, ...)` twin (`Status`,
//!   `ServerStream`, `ClientStream` and `BidiStream` are pajamax's). A
//!   server stream is made on the worker (`ServerStream::iter`,
//!   `ServerStream::from_producer`) or sent from another thread
//!   (`ServerStream::channel`); a client-streaming or bidirectional handler
//!   runs when the call starts and returns who takes the request messages:
//!   a handler on the worker (`ClientStream::on_worker`,
//!   `BidiStream::on_worker`) or another thread (`ClientStream::channel`,
//!   `BidiStream::channel`).
//! - `RouteGuideServer<T: RouteGuide>`, built with `RouteGuideServer::new(handler)`
//!   or `RouteGuideServer::from_arc(shared)`, which implements
//!   `pajamax::Service` (the entry point of each kind the service has) and
//!   is what gets added to a server.
//! - `SERVICE_NAME` (`"routeguide.RouteGuide"`) and `METHODS`, every rpc's
//!   name and kind in proto order.
//!
//! Method names are the `snake_case` of the proto names, with Rust keywords
//! escaped as prost escapes field names (`Type` becomes `r#type`).
//! `google.protobuf.Empty` is `()`, as in prost. Proto comments become doc
//! comments, on messages and services alike; a code block in one (an
//! indented command line, a fenced example) becomes a `text` block, so it
//! never runs as a doctest of the crate that includes the code. A block
//! fenced as ```` ```rust ```` is the exception: prost keeps it Rust and
//! marks it `compile_fail`, so `cargo test --doc` fails on one that
//! compiles; fence such examples as `text` in the proto. Two rpcs whose
//! Rust names meet give a `compile_error!` naming the name, as do two
//! services of a package whose modules meet (`HTTPServer` and `HttpServer`
//! both give `http_server_server`). A service named `Self` has the trait `Self_`, as prost names
//! it, and `SelfServer` (`SelfShard`, ... in dispatch mode); one named `T`
//! has `TServer<H: T>`.
//!
//! # File descriptor set (server reflection)
//!
//! Each run also writes the encoded `google.protobuf.FileDescriptorSet` of
//! every proto file it compiled, the files they import included (the
//! well-known `google/protobuf/*.proto` too), with their source info
//! (comments) and custom options. Every package module that defines a
//! service gets it as a constant:
//!
//! ```ignore
//! /// The encoded `google.protobuf.FileDescriptorSet` of every proto file ...
//! pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(...);
//! ```
//!
//! so that server reflection (the `pajamax-reflection` crate) can describe
//! every service of the server, and every message they use, in one line:
//!
//! ```ignore
//! let builder = pajamax::Server::builder()
//!     .add_service(GreeterServer::new(MyGreeter));
//! pajamax_reflection::serve(builder, &[helloworld::FILE_DESCRIPTOR_SET])
//!     .serve("127.0.0.1:50051")
//! ```
//!
//! Every package of one run holds the same set (the run's), so one
//! package's constant is enough for all the services compiled together; a
//! server with services from several runs passes one constant per run. The
//! set is written as `<package>.file_descriptor_set.bin` (`_` for no
//! package) in [`Builder::out_dir`] when one is given, and read from there
//! relative to the generated file; otherwise in Cargo's `OUT_DIR`, and read
//! with `include_bytes!(concat!(env!("OUT_DIR"), ...))`. A run with neither
//! (outside a build script, the output directory set only in the
//! [`prost_config`](Builder::prost_config)) writes no set and emits no
//! constant. A package that defines no service gets no constant.
//!
//! # Dispatch mode
//!
//! The code above runs every handler on the worker thread that read the
//! request (local mode, the default). A service can instead be generated in
//! dispatch mode, where the worker decodes the request and sends it to a
//! thread the application owns, which answers it later. Each such thread
//! owns a shard of the state, so handlers take `&mut self` and need no lock.
//!
//! ```no_run
//! // build.rs
//! fn main() -> std::io::Result<()> {
//!     pajamax_build::configure()
//!         .dispatch_services(["dict_store.DictStore"])
//!         .compile(&["proto/dict_store.proto"], &["proto"])
//! }
//! ```
//!
//! For `service DictStore { rpc Get (Key) returns (Value); rpc Watch (Key)
//! returns (stream Value); ... }` in `package dict_store;`, the
//! `dict_store_server` module then holds, beside `SERVICE_NAME` and
//! `METHODS`:
//!
//! - `enum DictStoreRequest { Get(super::Key), Watch(super::Key), ... }`,
//!   the request, one variant per rpc, named as the rpc is: the decoded
//!   request of a unary or server-streaming rpc, the stream of request
//!   messages (`pajamax::Streaming<_>`) of a client-streaming or
//!   bidirectional one.
//! - `enum DictStoreAnswer { Get(pajamax::Responder),
//!   Watch(pajamax::Sink<super::Value>), ... }`, where the answer goes,
//!   with the same variants; `fail(status)` ends the call with an error.
//! - `struct DictStoreCall`, a request (`pub request`) with its answer;
//!   `call.handle(&mut shard)` runs the matching handler (none for a call
//!   that ended while it waited: the client cancelled, the deadline passed,
//!   the connection closed), `is_cancelled()` says whether it has ended,
//!   `trailers_mut()` adds trailers to the answer, `into_parts()` gives the
//!   request and the `DictStoreAnswer` to answer some other way.
//! - `trait DictStoreShard`, the handlers: `fn get(&mut self, request:
//!   super::Key) -> Result<super::Value, pajamax::Status>` for a unary rpc,
//!   `fn watch(&mut self, request: super::Key, sink:
//!   pajamax::Sink<super::Value>)` for a server-streaming one, which sends
//!   the answers and finishes the sink; `fn upload(&mut self, requests:
//!   pajamax::Streaming<super::Entry>) -> Result<super::Count,
//!   pajamax::Status>` for a client-streaming one, and `fn chat(&mut self,
//!   requests: pajamax::Streaming<super::Note>, sink:
//!   pajamax::Sink<super::Note>)` for a bidirectional one. The sink's `send`
//!   waits for the client's flow-control credit and the requests' iterator
//!   for the next message, so a slow client slows the thread that serves
//!   it; both fail once the client has cancelled. Each handler answers
//!   `UNIMPLEMENTED` unless overridden.
//! - `trait DictStoreDispatch`, with `fn dispatch_to(&self, request:
//!   &DictStoreRequest) -> &pajamax::dispatch::Sender<DictStoreCall>`: the
//!   application's choice of thread for each call.
//! - `DictStoreServer<D: DictStoreDispatch>`, built with `new` or
//!   `from_arc`, which implements `pajamax::Service`. A call whose queue is
//!   full is answered `RESOURCE_EXHAUSTED`, one whose thread has stopped
//!   `UNAVAILABLE` (a streaming call through its sink or responder).
//!
//! A client-streaming or bidirectional call is queued as soon as it opens,
//! with the stream of its request messages: `dispatch_to` can choose its
//! thread by the method only.
//!
//! See [`Builder::dispatch_services`], [`Builder::dispatch_all`] and
//! [`Builder::local_services`] for choosing the mode of each service.
//!
//! # Build-time warnings
//!
//! Whatever the generated code cannot serve is reported as
//! `cargo:warning=pajamax-build: package.Service/Method: ...`, never skipped
//! silently: rpc names that give no Rust identifier, services whose names give none (such as `_`: no code is
//! generated for them, so their calls answer `UNIMPLEMENTED`), and names
//! that clash, of rpcs or of services' modules (which also fail the build
//! with a `compile_error!`).

#![forbid(unsafe_code)]

mod generator;
mod ident;

use generator::{
    descriptor_set_file_name, DescriptorSetPlace, Modes, PajamaxGenerator, ServiceMode,
};
use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Compiles `protos` into Rust in Cargo's `OUT_DIR`, with the default
/// settings; meant to be called from `build.rs`.
///
/// `includes` are the directories that imports (and the `protos` themselves)
/// are looked up in; the well-known `google/protobuf/*.proto` files are
/// always available. Each proto package becomes one file, `<package>.rs`,
/// for `pajamax::include_proto!`.
///
/// Parsing is done in Rust: no `protoc` is needed.
///
/// # Errors
///
/// As [`Builder::compile`]: a proto that cannot be read, parsed or
/// type-checked gives an error naming the file, line and problem.
///
/// ```no_run
/// // build.rs
/// fn main() -> std::io::Result<()> {
///     pajamax_build::compile_protos(
///         &["proto/helloworld.proto", "proto/echo.proto"],
///         &["proto"],
///     )
/// }
/// ```
pub fn compile_protos(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> io::Result<()> {
    configure().compile(protos, includes)
}

/// Starts a [`Builder`] with the default settings, for builds that need more
/// than [`compile_protos`].
///
/// ```no_run
/// // build.rs
/// fn main() -> std::io::Result<()> {
///     let mut config = prost_build::Config::new();
///     config.bytes(["."]);
///     pajamax_build::configure()
///         .prost_config(config)
///         .compile(&["proto/store.proto"], &["proto"])
/// }
/// ```
pub fn configure() -> Builder {
    Builder {
        config: None,
        out_dir: None,
        emit_rerun_if_changed: true,
        modes: Modes::default(),
    }
}

/// Settings for a code generation run; made by [`configure`].
///
/// Its methods take and return the builder, so that they chain; nothing is
/// done until [`Builder::compile`].
///
/// ```no_run
/// let out = std::env::temp_dir().join("protos");
/// std::fs::create_dir_all(&out)?;
/// pajamax_build::configure()
///     .out_dir(&out)
///     .emit_rerun_if_changed(false)
///     .compile(&["proto/helloworld.proto"], &["proto"])?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "a Builder does nothing until `compile` is called"]
pub struct Builder {
    config: Option<prost_build::Config>,
    out_dir: Option<PathBuf>,
    emit_rerun_if_changed: bool,
    /// How each generated service serves its calls.
    modes: Modes,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("config", &self.config)
            .field("out_dir", &self.out_dir)
            .field("emit_rerun_if_changed", &self.emit_rerun_if_changed)
            .field("modes", &self.modes)
            .finish()
    }
}

impl Builder {
    /// Writes the generated files to `dir` instead of Cargo's `OUT_DIR`.
    ///
    /// This takes precedence over an output directory set in the
    /// [`prost_config`](Builder::prost_config).
    ///
    /// ```no_run
    /// pajamax_build::configure()
    ///     .out_dir("src/generated")
    ///     .compile(&["proto/helloworld.proto"], &["proto"])?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Builder {
        self.out_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Uses `config` for the message code, for whatever prost-build offers:
    /// type and field attributes, `bytes` fields, extern paths, map types...
    ///
    /// pajamax-build installs its own service generator into it, replacing
    /// any set there.
    ///
    /// ```no_run
    /// let mut config = prost_build::Config::new();
    /// // prost derives `Eq` and `Hash` itself where the fields allow it.
    /// config.type_attribute(".helloworld", "#[derive(PartialOrd)]");
    /// pajamax_build::configure()
    ///     .prost_config(config)
    ///     .compile(&["proto/helloworld.proto"], &["proto"])?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn prost_config(mut self, config: prost_build::Config) -> Builder {
        self.config = Some(config);
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for every proto file read
    /// from disk, so that Cargo runs the build script again when one
    /// changes. On by default; turn it off when calling from elsewhere than
    /// a build script.
    ///
    /// ```no_run
    /// pajamax_build::configure()
    ///     .emit_rerun_if_changed(false)
    ///     .out_dir("src/generated")
    ///     .compile(&["proto/helloworld.proto"], &["proto"])?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn emit_rerun_if_changed(mut self, enabled: bool) -> Builder {
        self.emit_rerun_if_changed = enabled;
        self
    }

    /// Generates the named services in dispatch mode: their calls are sent to
    /// threads the application owns (see the [crate docs](crate#dispatch-mode)).
    ///
    /// Names are fully qualified, as in `package.Service`; a name may start
    /// with a `.`. Calls add to the names given before.
    ///
    /// ```no_run
    /// pajamax_build::configure()
    ///     .dispatch_services(["dict_store.DictStore"])
    ///     .compile(&["proto/dict_store.proto"], &["proto"])?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Builder::compile`] fails when a named service is in none of the
    /// compiled protos, or is named here and in [`Builder::local_services`]
    /// too.
    pub fn dispatch_services<I, S>(mut self, services: I) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.modes.dispatch.extend(service_names(services));
        self
    }

    /// Generates the named services in local mode, where handlers run on the
    /// worker thread that read the request. That is the default; this is for
    /// exceptions to [`Builder::dispatch_all`].
    ///
    /// ```no_run
    /// pajamax_build::configure()
    ///     .dispatch_all()
    ///     .local_services(["grpc.health.v1.Health"])
    ///     .compile(&["proto/store.proto", "proto/health.proto"], &["proto"])?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`Builder::dispatch_services`].
    pub fn local_services<I, S>(mut self, services: I) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.modes.local.extend(service_names(services));
        self
    }

    /// Generates every service in dispatch mode, except those named in
    /// [`Builder::local_services`].
    ///
    /// ```no_run
    /// pajamax_build::configure()
    ///     .dispatch_all()
    ///     .compile(&["proto/dict_store.proto"], &["proto"])?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn dispatch_all(mut self) -> Builder {
        self.modes.default = ServiceMode::Dispatch;
        self
    }

    /// Compiles `protos`, looking imports up in `includes`, and writes one
    /// `<package>.rs` file per proto package, and for each package with a
    /// service the run's encoded file descriptor set, which its
    /// `FILE_DESCRIPTOR_SET` constant holds (see the
    /// [crate docs](crate#file-descriptor-set-server-reflection)).
    ///
    /// A file given in `protos` must lie in one of the `includes`, or be a
    /// path relative to one of them; the two may be spelled differently (a
    /// relative include path and an absolute file, say). Files that `protos` import are
    /// compiled too, except the well-known `google/protobuf` ones, which
    /// prost maps to `prost-types` (and `google.protobuf.Empty` to `()`).
    ///
    /// # Errors
    ///
    /// When a proto cannot be read, parsed or type-checked (the message
    /// names the file and, where known, the line and column), or when the
    /// output cannot be written. A missing proto or import gives
    /// [`io::ErrorKind::NotFound`] (for a file of `protos`, the message says
    /// it is not found and names the include paths it was looked for
    /// under; a file that exists outside them is "not in any include
    /// path"), a malformed one [`io::ErrorKind::InvalidInput`]. A service named in
    /// [`Builder::dispatch_services`] or [`Builder::local_services`] that no
    /// proto defines, or that is named in both, gives
    /// [`io::ErrorKind::InvalidInput`] too, naming it.
    ///
    /// ```no_run
    /// pajamax_build::configure().compile(&["helloworld.proto"], &["proto"])?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn compile(
        self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> io::Result<()> {
        let mut compiler =
            protox::Compiler::new(includes.iter().map(AsRef::as_ref)).map_err(proto_error)?;
        compiler.include_source_info(true).include_imports(true);
        for proto in protos {
            let proto = proto.as_ref();
            let opened = compiler.open_file(proto).map(|_| ());
            if let Err(err) = opened {
                // The file may lie under an include path spelled otherwise
                // (one relative, one absolute, or through `..`): open it
                // by its name under that include path.
                let Some(name) = name_under_includes(proto, includes) else {
                    return Err(open_error(err, proto, includes));
                };
                compiler
                    .open_file(&name)
                    .map_err(|_| open_error(err, proto, includes))?;
            }
        }
        if self.emit_rerun_if_changed {
            for file in compiler.files() {
                if let Some(path) = file.path() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
        let descriptors = compiler.file_descriptor_set();
        let defined: BTreeSet<String> = descriptors
            .file
            .iter()
            .flat_map(|file| {
                let package = file.package();
                file.service.iter().map(move |service| {
                    if package.is_empty() {
                        service.name().to_owned()
                    } else {
                        format!("{package}.{}", service.name())
                    }
                })
            })
            .collect();
        check_modes(&self.modes, &defined)?;

        // The encoded set, extension options included, for reflection:
        // one copy per package with a service, next to its code.
        let (set_dir, place) = match (&self.out_dir, std::env::var_os("OUT_DIR")) {
            (Some(dir), _) => (Some(dir.clone()), DescriptorSetPlace::NextToCode),
            (None, Some(dir)) => (Some(PathBuf::from(dir)), DescriptorSetPlace::OutDir),
            (None, None) => (None, DescriptorSetPlace::OutDir),
        };
        let mut generator = PajamaxGenerator::new(self.modes);
        if let Some(dir) = set_dir {
            let encoded = compiler.encode_file_descriptor_set();
            let packages: BTreeSet<&str> = descriptors
                .file
                .iter()
                .filter(|file| !file.service.is_empty())
                .map(|file| file.package())
                .collect();
            for package in packages {
                write_if_changed(&dir.join(descriptor_set_file_name(package)), &encoded)?;
            }
            generator = generator.with_descriptor_set(place);
        }

        let mut config = self.config.unwrap_or_default();
        if let Some(dir) = self.out_dir {
            config.out_dir(dir);
        }
        config.service_generator(Box::new(generator));
        config.compile_fds(descriptors)
    }
}

/// Writes `contents` to `path` unless it already holds them, so that what
/// includes the file is not rebuilt for nothing.
fn write_if_changed(path: &Path, contents: &[u8]) -> io::Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(contents) {
        return Ok(());
    }
    std::fs::write(path, contents)
        .map_err(|err| io::Error::new(err.kind(), format!("writing {}: {err}", path.display())))
}

/// Service names as given to the builder, without a leading `.`.
fn service_names<I, S>(services: I) -> impl Iterator<Item = String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    services.into_iter().map(|name| {
        let name = name.as_ref();
        name.strip_prefix('.').unwrap_or(name).to_owned()
    })
}

/// Checks that every service named for a mode is `defined`, and is named for
/// one mode only.
fn check_modes(modes: &Modes, defined: &BTreeSet<String>) -> io::Result<()> {
    if let Some(name) = modes.dispatch.intersection(&modes.local).next() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("service `{name}` is named for both dispatch and local mode"),
        ));
    }
    for (name, mode) in modes
        .dispatch
        .iter()
        .map(|name| (name, "dispatch_services"))
        .chain(modes.local.iter().map(|name| (name, "local_services")))
    {
        if !defined.contains(name) {
            let known: Vec<&str> = defined.iter().map(String::as_str).collect();
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "service `{name}` given to {mode} is not defined in the compiled protos \
                     (they define: {})",
                    if known.is_empty() {
                        "no service".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// The name of `proto` relative to the first of `includes` it lies under,
/// both resolved on the file system; `None` when it lies under none, does
/// not exist, or when that name finds another file first (under an earlier
/// include path).
fn name_under_includes(proto: &Path, includes: &[impl AsRef<Path>]) -> Option<PathBuf> {
    let file = std::fs::canonicalize(proto).ok()?;
    let name = includes.iter().find_map(|dir| {
        let dir = std::fs::canonicalize(dir.as_ref()).ok()?;
        file.strip_prefix(dir).ok().map(Path::to_path_buf)
    })?;
    let found = includes
        .iter()
        .map(|dir| dir.as_ref().join(&name))
        .find(|path| path.exists())?;
    (std::fs::canonicalize(found).ok()? == file).then_some(name)
}

/// Turns the error of opening `proto`, one of the files to compile, into an
/// `io::Error` that says what is wrong. protox reports a file that does not
/// exist as "not in any include path"; here such a file is "not found",
/// with the include paths it was looked for in. A file that exists outside
/// the include paths keeps protox's message, with the include paths added.
fn open_error(err: protox::Error, proto: &Path, includes: &[impl AsRef<Path>]) -> io::Error {
    if !err.is_file_not_found() {
        return proto_error(err);
    }
    let looked_in = if includes.is_empty() {
        "no include path was given".to_owned()
    } else {
        let dirs: Vec<String> = includes
            .iter()
            .map(|dir| format!("`{}`", dir.as_ref().display()))
            .collect();
        format!("include paths: {}", dirs.join(", "))
    };
    let exists = proto.exists()
        || (proto.is_relative() && includes.iter().any(|dir| dir.as_ref().join(proto).exists()));
    if !exists {
        return io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "proto file `{}` not found: no such file at that path, nor under an \
                 include path ({looked_in})",
                proto.display()
            ),
        );
    }
    let err = proto_error(err);
    io::Error::new(
        err.kind(),
        format!("{err} ({looked_in}; a proto file to compile must lie under one of them)"),
    )
}

/// Turns a protox error into an `io::Error` whose message says where and
/// what the problem is, such as
/// `helloworld.proto:3:5: expected ';', but found 'message'`.
fn proto_error(err: protox::Error) -> io::Error {
    use miette::Diagnostic;

    let mut place = err.file().map(str::to_owned);
    if let (Some(source), Some(label)) =
        (err.source_code(), err.labels().and_then(|mut l| l.next()))
    {
        if let Ok(contents) = source.read_span(label.inner(), 0, 0) {
            let file = contents
                .name()
                .map(str::to_owned)
                .or(place)
                .unwrap_or_default();
            place = Some(format!(
                "{file}:{}:{}",
                contents.line() + 1,
                contents.column() + 1
            ));
        }
    }
    let mut message = match place {
        Some(place) => format!("{place}: {err}"),
        None => err.to_string(),
    };
    let mut cause = std::error::Error::source(&err);
    while let Some(inner) = cause {
        message = format!("{message}: {inner}");
        cause = inner.source();
    }
    if let Some(help) = err.help() {
        message = format!("{message} (help: {help})");
    }
    let kind = if err.is_file_not_found() {
        io::ErrorKind::NotFound
    } else if err.is_io() {
        io::ErrorKind::Other
    } else {
        io::ErrorKind::InvalidInput
    };
    io::Error::new(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under the system temp dir, holding `files`.
    fn scratch(files: &[(&str, &str)]) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pajamax-build-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("out")).unwrap();
        for (name, text) in files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        dir
    }

    fn compile_in(dir: &Path, protos: &[&str]) -> io::Result<()> {
        configure()
            .out_dir(dir.join("out"))
            .emit_rerun_if_changed(false)
            .compile(protos, &[dir])
    }

    const GREETER: &str = r#"
syntax = "proto3";
package helloworld;

// The greeting service.
service Greeter {
  // Sends a greeting.
  rpc SayHello (HelloRequest) returns (HelloReply);
}

message HelloRequest { string name = 1; }
message HelloReply { string message = 1; }
"#;

    #[test]
    fn compiles_a_service_without_protoc() {
        // Nothing here looks for `protoc` or reads `PROTOC`: the protos are
        // parsed by protox.
        let dir = scratch(&[("helloworld.proto", GREETER)]);
        compile_in(&dir, &["helloworld.proto"]).unwrap();
        let code = fs::read_to_string(dir.join("out/helloworld.rs")).unwrap();
        syn::parse_file(&code).unwrap();
        for expected in [
            "pub struct HelloRequest",
            "pub mod greeter_server {",
            "/// The greeting service.",
            "/// Sends a greeting.",
            "pub trait Greeter: ::core::marker::Send + ::core::marker::Sync + 'static {",
            "fn say_hello(",
            "fn say_hello_with_context(",
            "pub const SERVICE_NAME: &str = \"helloworld.Greeter\";",
            "pub struct GreeterServer<T>",
            "impl<T: Greeter> pajamax::Service for GreeterServer<T>",
        ] {
            assert!(code.contains(expected), "missing {expected:?} in\n{code}");
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn imports_empty_and_other_packages() {
        let common = r#"
syntax = "proto3";
package common;
message Id { uint64 value = 1; }
"#;
        let store = r#"
syntax = "proto3";
package store.v1;
import "common/id.proto";
import "google/protobuf/empty.proto";
service Store {
  rpc Get (common.Id) returns (Item);
  rpc Clear (google.protobuf.Empty) returns (google.protobuf.Empty);
  rpc Watch (common.Id) returns (stream Item);
}
message Item { common.Id id = 1; }
"#;
        let dir = scratch(&[("common/id.proto", common), ("store/v1/store.proto", store)]);
        compile_in(&dir, &["store/v1/store.proto"]).unwrap();
        let code = fs::read_to_string(dir.join("out/store.v1.rs")).unwrap();
        assert!(
            code.contains("request: super::super::super::common::Id"),
            "{code}"
        );
        assert!(code.contains("fn clear(&self, request: ())"), "{code}");
        assert!(code.contains("pub const SERVICE_NAME: &str = \"store.v1.Store\";"));
        let methods: Vec<&str> = code
            .match_indices("name: \"")
            .map(|(at, _)| code[at + 7..].split('"').next().unwrap())
            .collect();
        assert_eq!(methods, ["Get", "Clear", "Watch"], "{code}");
        // The server-streaming method is served like the others.
        assert!(code.contains("fn watch("), "{code}");
        assert!(
            code.contains("pajamax::ServerStream<super::Item>"),
            "{code}"
        );
        // The imported package is generated too; the well-known one is not.
        assert!(dir.join("out/common.rs").exists());
        assert!(!dir.join("out/google.protobuf.rs").exists());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_descriptor_set_is_embedded_with_imports_and_source_info() {
        use prost::Message;

        let common = "syntax = \"proto3\";\npackage common;\nmessage Id { uint64 value = 1; }\n";
        let store = r#"
syntax = "proto3";
package store.v1;
import "common/id.proto";
import "google/protobuf/empty.proto";
// Keeps items.
service Store {
  rpc Get (common.Id) returns (Item);
  rpc Clear (google.protobuf.Empty) returns (google.protobuf.Empty);
}
message Item { common.Id id = 1; }
"#;
        let dir = scratch(&[("common/id.proto", common), ("store/v1/store.proto", store)]);
        compile_in(&dir, &["store/v1/store.proto"]).unwrap();

        // The package with a service refers to its copy of the set, next
        // to its code; the package without one has no constant.
        let code = fs::read_to_string(dir.join("out/store.v1.rs")).unwrap();
        let squeezed: String = code.split_whitespace().collect();
        assert!(
            squeezed.contains(
                "pubconstFILE_DESCRIPTOR_SET:&[u8]=include_bytes!(\"store.v1.file_descriptor_set.bin\");"
            ),
            "{code}"
        );
        let common_code = fs::read_to_string(dir.join("out/common.rs")).unwrap();
        assert!(
            !common_code.contains("FILE_DESCRIPTOR_SET"),
            "{common_code}"
        );
        assert!(!dir.join("out/common.file_descriptor_set.bin").exists());

        let encoded = fs::read(dir.join("out/store.v1.file_descriptor_set.bin")).unwrap();
        let set = prost_types::FileDescriptorSet::decode(encoded.as_slice()).unwrap();
        let names: Vec<&str> = set.file.iter().map(|file| file.name()).collect();
        // Every file, imports first.
        assert_eq!(
            names,
            [
                "common/id.proto",
                "google/protobuf/empty.proto",
                "store/v1/store.proto"
            ],
            "{names:?}"
        );
        let store = &set.file[2];
        assert_eq!(store.service[0].name(), "Store");
        assert_eq!(
            store.dependency,
            ["common/id.proto", "google/protobuf/empty.proto"]
        );
        // With the comments, for reflection clients that show them.
        let comments: Vec<&str> = store
            .source_code_info
            .as_ref()
            .unwrap()
            .location
            .iter()
            .filter_map(|l| l.leading_comments.as_deref())
            .collect();
        assert_eq!(comments, [" Keeps items.\n"]);
        assert_eq!(set.file[1].message_type[0].name(), "Empty");

        // A second run with the same protos leaves the file alone.
        let written = fs::metadata(dir.join("out/store.v1.file_descriptor_set.bin"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        compile_in(&dir, &["store/v1/store.proto"]).unwrap();
        let again = fs::metadata(dir.join("out/store.v1.file_descriptor_set.bin"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(written, again);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn every_package_of_a_run_gets_the_whole_set() {
        let dir = scratch(&[
            ("dict_store.proto", DICT_STORE),
            ("helloworld.proto", GREETER),
        ]);
        compile_in(&dir, &["dict_store.proto", "helloworld.proto"]).unwrap();
        let one = fs::read(dir.join("out/dict_store.file_descriptor_set.bin")).unwrap();
        let other = fs::read(dir.join("out/helloworld.file_descriptor_set.bin")).unwrap();
        assert_eq!(one, other);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_syntax_error_is_an_error_naming_the_problem() {
        let broken = "syntax = \"proto3\";\npackage broken;\nmessage A {\n  string name = 1\n}\n";
        let dir = scratch(&[("broken.proto", broken)]);
        let err = compile_in(&dir, &["broken.proto"]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let message = err.to_string();
        assert!(message.contains("broken.proto:5:1"), "{message}");
        assert!(message.contains("expected ';'"), "{message}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unknown_type_is_an_error_naming_it() {
        let proto =
            "syntax = \"proto3\";\nservice S {\n  rpc Get (Missing) returns (Missing);\n}\n";
        let dir = scratch(&[("s.proto", proto)]);
        let message = compile_in(&dir, &["s.proto"]).unwrap_err().to_string();
        assert!(message.contains("s.proto:3:"), "{message}");
        assert!(message.contains("Missing"), "{message}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_not_found() {
        let dir = scratch(&[]);
        let err = compile_in(&dir, &["nowhere.proto"]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let message = err.to_string();
        assert!(
            message.contains("proto file `nowhere.proto` not found"),
            "{message}"
        );
        assert!(!message.contains("not in any include path"), "{message}");
        // The include paths it was looked for in are named.
        assert!(
            message.contains(&format!("`{}`", dir.display())),
            "{message}"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_file_under_an_include_path_is_not_found() {
        // As a build script names it: the include path, then the file.
        let dir = scratch(&[("proto/helloworld.proto", GREETER)]);
        let missing = dir.join("proto/missing.proto");
        let err = configure()
            .out_dir(dir.join("out"))
            .emit_rerun_if_changed(false)
            .compile(&[&missing], &[dir.join("proto"), dir.join("vendor")])
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let message = err.to_string();
        assert!(
            message.contains(&format!("proto file `{}` not found", missing.display())),
            "{message}"
        );
        assert!(!message.contains("not in any include path"), "{message}");
        for include in ["proto", "vendor"] {
            let shown = format!("`{}`", dir.join(include).display());
            assert!(message.contains(&shown), "{message}");
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_outside_the_include_paths_says_so() {
        let dir = scratch(&[
            ("proto/helloworld.proto", GREETER),
            (
                "elsewhere/other.proto",
                "syntax = \"proto3\";\npackage other;\n",
            ),
        ]);
        let outside = dir.join("elsewhere/other.proto");
        let err = configure()
            .out_dir(dir.join("out"))
            .emit_rerun_if_changed(false)
            .compile(&[&outside], &[dir.join("proto")])
            .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("not in any include path"), "{message}");
        assert!(!message.contains("not found"), "{message}");
        let shown = format!("`{}`", dir.join("proto").display());
        assert!(message.contains(&shown), "{message}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_spelled_otherwise_than_its_include_path_is_found() {
        // The same file, once through `..`, once with the include path
        // given relative to the working directory: both name a file under
        // the include path, as a build script may.
        let dir = scratch(&[("proto/helloworld.proto", GREETER)]);
        let roundabout = dir.join("proto/../proto/helloworld.proto");
        configure()
            .out_dir(dir.join("out"))
            .emit_rerun_if_changed(false)
            .compile(&[&roundabout], &[dir.join("proto")])
            .unwrap();
        assert!(dir.join("out/helloworld.rs").exists());
        let cwd = std::env::current_dir().unwrap();
        let up: PathBuf = cwd.components().skip(1).map(|_| "..").collect();
        let relative_include = up.join(dir.join("proto").strip_prefix("/").unwrap());
        fs::remove_file(dir.join("out/helloworld.rs")).unwrap();
        configure()
            .out_dir(dir.join("out"))
            .emit_rerun_if_changed(false)
            .compile(&[dir.join("proto/helloworld.proto")], &[relative_include])
            .unwrap();
        assert!(dir.join("out/helloworld.rs").exists());
        // A name that an earlier include path holds another file under is
        // not taken for this one.
        let shadowed = scratch(&[
            (
                "first/helloworld.proto",
                "syntax = \"proto3\";\npackage first;\n",
            ),
            ("second/helloworld.proto", GREETER),
        ]);
        let includes = [shadowed.join("first"), shadowed.join("second")];
        let roundabout = shadowed.join("second/../second/helloworld.proto");
        assert_eq!(name_under_includes(&roundabout, &includes), None);
        let direct = shadowed.join("first/../first/helloworld.proto");
        assert_eq!(
            name_under_includes(&direct, &includes),
            Some(PathBuf::from("helloworld.proto"))
        );
        fs::remove_dir_all(shadowed).unwrap();
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unreadable_file_says_why() {
        // A directory where a file should be cannot be read as one.
        let dir = scratch(&[("dir.proto/placeholder", "")]);
        let err = compile_in(&dir, &["dir.proto"]).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("error opening file"), "{message}");
        assert!(message.contains("dir.proto"), "{message}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_service_outside_any_package_uses_its_bare_name() {
        let proto =
            "syntax = \"proto3\";\nservice Bare {\n  rpc Type (M) returns (M);\n}\nmessage M {}\n";
        let dir = scratch(&[("bare.proto", proto)]);
        compile_in(&dir, &["bare.proto"]).unwrap();
        let code = fs::read_to_string(dir.join("out/_.rs")).unwrap();
        assert!(
            code.contains("pub const SERVICE_NAME: &str = \"Bare\";"),
            "{code}"
        );
        assert!(code.contains("fn r#type("), "{code}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn services_whose_modules_meet_are_named_in_a_compile_error() {
        // Two services of a package, in two files, both give the module
        // `http_server_server`.
        let dir = scratch(&[
            (
                "one.proto",
                "syntax = \"proto3\";\npackage web;\nmessage M {}\n\
                 service HTTPServer { rpc Get (M) returns (M); }\n",
            ),
            (
                "two.proto",
                "syntax = \"proto3\";\npackage web;\nimport \"one.proto\";\n\
                 service HttpServer { rpc Get (M) returns (M); }\n",
            ),
        ]);
        compile_in(&dir, &["one.proto", "two.proto"]).unwrap();
        let code = fs::read_to_string(dir.join("out/web.rs")).unwrap();
        let file = syn::parse_file(&code).unwrap();
        let errors: Vec<String> = file
            .items
            .iter()
            .filter_map(|item| match item {
                syn::Item::Macro(m) => Some(m.mac.parse_body::<syn::LitStr>().unwrap().value()),
                _ => None,
            })
            .collect();
        assert_eq!(
            errors,
            [
                "pajamax-build: the services web.HTTPServer and web.HttpServer both map to the \
              module `http_server_server`"
            ],
            "{code}"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_of_only_a_service_without_a_rust_name_compiles() {
        // The service is not generated (a warning says so), yet the file
        // holds nothing else: its package still gets its module, with the
        // descriptor set that describes the service.
        for (proto, package) in [
            ("syntax = \"proto3\";\npackage p;\nservice _ {}\n", "p"),
            (
                "syntax = \"proto3\";\npackage q;\nservice _0 { rpc Get (M) returns (M); }\nmessage M {}\n",
                "q",
            ),
            ("syntax = \"proto3\";\nservice _ {}\n", "_"),
        ] {
            let dir = scratch(&[("unnamed.proto", proto)]);
            compile_in(&dir, &["unnamed.proto"]).unwrap();
            let code = fs::read_to_string(dir.join(format!("out/{package}.rs"))).unwrap();
            syn::parse_file(&code).unwrap();
            assert!(code.contains("FILE_DESCRIPTOR_SET"), "{code}");
            assert!(!code.contains("_server"), "{code}");
            assert!(dir
                .join(format!("out/{package}.file_descriptor_set.bin"))
                .exists());
            fs::remove_dir_all(dir).unwrap();
        }
    }

    const DICT_STORE: &str = r#"
syntax = "proto3";
package dict_store;
service DictStore {
  rpc Get (Key) returns (Value);
}
message Key { string key = 1; }
message Value { double value = 1; }
"#;

    fn compile_with(dir: &Path, builder: Builder, protos: &[&str]) -> io::Result<String> {
        builder
            .out_dir(dir.join("out"))
            .emit_rerun_if_changed(false)
            .compile(protos, &[dir])?;
        let mut code = String::new();
        for entry in fs::read_dir(dir.join("out")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|ext| ext == "rs") {
                code.push_str(&fs::read_to_string(path).unwrap());
            }
        }
        syn::parse_file(&code).unwrap();
        Ok(code)
    }

    #[test]
    fn named_services_are_generated_in_dispatch_mode() {
        let dir = scratch(&[
            ("dict_store.proto", DICT_STORE),
            ("helloworld.proto", GREETER),
        ]);
        let protos = ["dict_store.proto", "helloworld.proto"];
        let code = compile_with(
            &dir,
            configure().dispatch_services(["dict_store.DictStore"]),
            &protos,
        )
        .unwrap();
        assert!(code.contains("pub trait DictStoreShard {"), "{code}");
        assert!(code.contains(
            "pub trait DictStoreDispatch: ::core::marker::Send + ::core::marker::Sync + 'static {"
        ));
        assert!(code.contains(
            "pub trait Greeter: ::core::marker::Send + ::core::marker::Sync + 'static {"
        ));
        assert!(!code.contains("pub trait DictStore:"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn dispatch_all_with_local_exceptions() {
        let dir = scratch(&[
            ("dict_store.proto", DICT_STORE),
            ("helloworld.proto", GREETER),
        ]);
        let protos = ["dict_store.proto", "helloworld.proto"];
        let code = compile_with(&dir, configure().dispatch_all(), &protos).unwrap();
        assert!(code.contains("pub trait DictStoreShard {"));
        assert!(code.contains("pub trait GreeterShard {"));

        // A leading dot is allowed, as in proto type references.
        let code = compile_with(
            &dir,
            configure()
                .dispatch_all()
                .local_services([".helloworld.Greeter"]),
            &protos,
        )
        .unwrap();
        assert!(code.contains("pub trait DictStoreShard {"));
        assert!(code.contains(
            "pub trait Greeter: ::core::marker::Send + ::core::marker::Sync + 'static {"
        ));
        assert!(!code.contains("GreeterShard"));

        // Local is the default.
        let code = compile_with(&dir, configure(), &protos).unwrap();
        assert!(!code.contains("Shard {"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unknown_named_service_is_an_error_naming_it() {
        let dir = scratch(&[("dict_store.proto", DICT_STORE)]);
        let err = compile_with(
            &dir,
            configure().dispatch_services(["dict_store.DictStor"]),
            &["dict_store.proto"],
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let message = err.to_string();
        assert!(message.contains("`dict_store.DictStor`"), "{message}");
        assert!(message.contains("dispatch_services"), "{message}");
        assert!(message.contains("dict_store.DictStore"), "{message}");

        let err = compile_with(
            &dir,
            configure().local_services(["DictStore"]),
            &["dict_store.proto"],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("`DictStore` given to local_services"),
            "{err}"
        );
        // Nothing was written.
        assert_eq!(fs::read_dir(dir.join("out")).unwrap().count(), 0);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_service_named_for_both_modes_is_an_error() {
        let dir = scratch(&[("dict_store.proto", DICT_STORE)]);
        let err = compile_with(
            &dir,
            configure()
                .dispatch_services(["dict_store.DictStore"])
                .local_services(["dict_store.DictStore"]),
            &["dict_store.proto"],
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("`dict_store.DictStore`"), "{err}");
        assert!(err.to_string().contains("both"), "{err}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_prost_config_is_honoured() {
        let dir = scratch(&[("helloworld.proto", GREETER)]);
        let mut config = prost_build::Config::new();
        config.type_attribute(".helloworld.HelloRequest", "#[derive(Eq, Hash)]");
        configure()
            .prost_config(config)
            .out_dir(dir.join("out"))
            .emit_rerun_if_changed(false)
            .compile(&["helloworld.proto"], &[&dir])
            .unwrap();
        let code = fs::read_to_string(dir.join("out/helloworld.rs")).unwrap();
        assert!(code.contains("#[derive(Eq, Hash)]"), "{code}");
        assert!(code.contains("pub mod greeter_server"), "{code}");
        fs::remove_dir_all(dir).unwrap();
    }
}
