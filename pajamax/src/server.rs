//! The server builder and the handle that shuts a running server down.

use crate::grpc::connection::GrpcConfig;
use crate::grpc::intercept::{CallObserver, Interceptor};
use crate::grpc::router::Router;
use crate::grpc::service::Service;
use crate::runtime::acceptor::Acceptor;
use crate::runtime::worker::{Worker, WorkerHandle};
use crate::runtime::{Listener, RuntimeConfig, Shared};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a shutdown cut short by a second signal still waits for the
/// workers to close their connections (a worker busy in a handler is not
/// waited for longer).
#[cfg(unix)]
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Entry point: `Server::builder()`.
///
/// ```no_run
/// # struct MyService;
/// # impl pajamax::Service for MyService {
/// #     fn name(&self) -> &'static str { "demo.Demo" }
/// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
/// # }
/// pajamax::Server::builder()
///     .workers(2)
///     .add_service(MyService)
///     .serve("127.0.0.1:50051")
///     .unwrap();
/// ```
pub struct Server;

impl Server {
    /// A builder with the defaults documented on each of its methods.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

/// Configures and starts a server; made by [`Server::builder`].
///
/// Its methods take and return the builder, so that they chain: the
/// services ([`add_service`](Builder::add_service)), the hooks
/// ([`intercept`](Builder::intercept), [`observe`](Builder::observe),
/// [`on_shutdown`](Builder::on_shutdown)) and the limits, each with the
/// default its method documents. One of the last calls starts the server:
///
/// - [`serve_until_signal`](Builder::serve_until_signal) serves until
///   SIGTERM or SIGINT, then drains the calls in flight and returns (what a
///   `main` usually ends with);
/// - [`serve_with_shutdown`](Builder::serve_with_shutdown) drains when a
///   closure returns; [`serve`](Builder::serve) serves until the process
///   ends;
/// - [`bind`](Builder::bind) and [`bind_unix`](Builder::bind_unix) return
///   at once with a [`ServerHandle`], to stop the server by hand.
///
/// ```no_run
/// use std::time::Duration;
/// # struct MyService;
/// # impl pajamax::Service for MyService {
/// #     fn name(&self) -> &'static str { "demo.Demo" }
/// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
/// # }
///
/// fn main() -> std::io::Result<()> {
///     pajamax::Server::builder()
///         .workers(4) // default: one per core
///         .max_concurrent_streams(1000) // per connection; default 4096
///         .max_recv_message_size(16 << 20) // default 4 MiB
///         .idle_timeout(Duration::from_secs(300)) // default: never
///         .send_compressed(true) // gzip or deflate, for the clients that accept it
///         .shutdown_grace(Duration::from_secs(20)) // default 30 s
///         .add_service(MyService)
///         .serve_until_signal("0.0.0.0:50051")
/// }
/// ```
///
/// The same, bound to a port the system chooses and stopped at once, as a
/// test would:
///
/// ```
/// # struct MyService;
/// # impl pajamax::Service for MyService {
/// #     fn name(&self) -> &'static str { "demo.Demo" }
/// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
/// # }
/// let builder = pajamax::Server::builder().workers(1).add_service(MyService);
/// assert_eq!(builder.service_names(), ["demo.Demo"]);
/// let server = builder.bind("127.0.0.1:0")?;
/// assert_ne!(server.local_addr().port(), 0);
/// server.shutdown();
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Builder {
    config: RuntimeConfig,
    router: Router,
    on_shutdown: Vec<Box<dyn FnOnce() + Send>>,
    #[cfg(feature = "tls")]
    tls: Option<crate::TlsConfig>,
}

impl Default for Builder {
    fn default() -> Builder {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        Builder {
            config: RuntimeConfig {
                workers,
                pin_workers: true,
                max_connections: 10_000,
                idle_timeout: None,
                keepalive_interval: Some(Duration::from_secs(2 * 60 * 60)),
                keepalive_timeout: Duration::from_secs(20),
                max_connection_age: None,
                max_connection_age_grace: None,
                handshake_timeout: Duration::from_secs(10),
                shutdown_grace: Duration::from_secs(30),
                max_pending_output: 4 << 20,
                read_buffer_size: 64 << 10,
                grpc: GrpcConfig::default(),
                #[cfg(feature = "tls")]
                tls: None,
            },
            router: Router::new(),
            on_shutdown: Vec::new(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl Builder {
    /// Worker threads; default: the number of cores available. 0 is taken
    /// as 1; more than 65 536 makes [`bind`](Builder::bind) fail with
    /// `InvalidInput`.
    pub fn workers(mut self, workers: usize) -> Builder {
        self.config.workers = workers.max(1);
        self
    }

    /// Whether worker `i` is pinned to core `i` (modulo the core count);
    /// default: on.
    pub fn pin_workers(mut self, pin: bool) -> Builder {
        self.config.pin_workers = pin;
        self
    }

    /// Connections served at once; a connection past it gets a GOAWAY and
    /// is closed. Default: 10 000. 0, which would refuse every connection,
    /// makes [`bind`](Builder::bind) fail with `InvalidInput`.
    pub fn max_connections(mut self, max: usize) -> Builder {
        self.config.max_connections = max;
        self
    }

    /// Closes a connection with no open call for this long; default:
    /// never. PINGs, either side's, do not count as calls.
    ///
    /// The GOAWAY comes in two steps, as at a shutdown, so that a call the
    /// client sent before it saw the GOAWAY is still answered: the
    /// connection closes once the client has answered the GOAWAY's PING and
    /// that call is done. A client that answers nothing is closed a second
    /// idle timeout later, and dropped at the next sweep if it does not
    /// take that last output. Zero makes [`bind`](Builder::bind) fail with
    /// `InvalidInput`.
    pub fn idle_timeout(mut self, timeout: Duration) -> Builder {
        self.config.idle_timeout = Some(timeout);
        self
    }

    /// Sends a PING on a connection the client has sent nothing on for
    /// `interval`, and drops the connection if the client sends nothing
    /// back within [`keepalive_timeout`](Builder::keepalive_timeout): a
    /// client that vanished without closing (its host gone, a network
    /// path cut) is found, and the calls it held end, their handlers on
    /// other threads seeing them cancelled. `None` turns the PINGs off.
    /// Default: two hours, as grpc-go's server (tonic's is off). Zero, or
    /// a keepalive timeout of zero, makes [`bind`](Builder::bind) fail with
    /// `InvalidInput`.
    ///
    /// Both are checked at the worker's periodic sweep (at most a second
    /// apart), which also notes when the client last sent something: a
    /// PING may come up to one sweep tick after `interval`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = pajamax::Server::builder()
    ///     .keepalive_interval(Some(Duration::from_secs(60)))
    ///     .keepalive_timeout(Duration::from_secs(10));
    /// ```
    pub fn keepalive_interval(mut self, interval: Option<Duration>) -> Builder {
        self.config.keepalive_interval = interval;
        self
    }

    /// How long a client has to answer a keepalive PING before its
    /// connection is dropped; default: 20 s (as grpc-go and tonic).
    pub fn keepalive_timeout(mut self, timeout: Duration) -> Builder {
        self.config.keepalive_timeout = timeout;
        self
    }

    /// Retires a connection after `age`, give or take a tenth (so that
    /// connections opened together do not all go at once): a graceful
    /// GOAWAY, after which the client opens a new connection for new
    /// calls while the calls in flight finish. Behind a few gateways that
    /// hold their connections for good, this spreads the load over
    /// servers started since. Default: never, as grpc-go; so is an age too
    /// large for the clock (`Duration::MAX`). Zero makes
    /// [`bind`](Builder::bind) fail with `InvalidInput`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = pajamax::Server::builder()
    ///     .max_connection_age(Duration::from_secs(30 * 60))
    ///     .max_connection_age_grace(Duration::from_secs(60));
    /// ```
    pub fn max_connection_age(mut self, age: Duration) -> Builder {
        self.config.max_connection_age = Some(age);
        self
    }

    /// How long the calls of a connection retired by
    /// [`max_connection_age`](Builder::max_connection_age) have to finish
    /// before they are ended with UNAVAILABLE and the connection closed; a
    /// connection whose client does not take that last output is dropped
    /// at the next sweep. Default: as long as they take.
    pub fn max_connection_age_grace(mut self, grace: Duration) -> Builder {
        self.config.max_connection_age_grace = Some(grace);
        self
    }

    /// How long a new connection has to send its preface and SETTINGS
    /// before it is closed; default: 10 s. Over TLS the TLS handshake
    /// counts too: a client that has not finished it by then is dropped
    /// (nothing can be sent to it before), one that has but sends no
    /// preface gets a GOAWAY. Zero makes [`bind`](Builder::bind) fail with
    /// `InvalidInput`.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Builder {
        self.config.handshake_timeout = timeout;
        self
    }

    /// Incomplete request bytes one connection may buffer over all its
    /// calls; a call past it gets RESOURCE_EXHAUSTED, but for the next
    /// message of a call a thread reads (it has asked for a message; it
    /// may be busy with the last one, and may serve the calls holding the
    /// room next, as in dispatch mode), taken up to twice the limit.
    /// Default: 64 MiB.
    ///
    /// The same limit bounds, each counted on its own, two kinds of a
    /// connection's request bytes waiting for handlers on other threads
    /// (each always at least one message), so neither holds the other
    /// back:
    /// - streamed request messages queued and not yet taken: past the
    ///   limit the stream is held back until there is room, unless its
    ///   thread waits for its next message (that one is queued: the room
    ///   may be held by calls that wait for the same thread, as in
    ///   dispatch mode);
    /// - the requests of calls sent to another thread
    ///   ([`Context::defer`](crate::Context::defer), a server stream's
    ///   `channel`, dispatch mode), until that thread answers or starts
    ///   to: a call past the limit is answered RESOURCE_EXHAUSTED at once.
    pub fn max_buffered_request_bytes(mut self, bytes: usize) -> Builder {
        self.config.grpc.max_buffered_request_bytes = bytes;
        self
    }

    /// Request metadata bytes (as HPACK counts a header list) the open
    /// calls of one connection may hold together; a request past it is
    /// refused with REFUSED_STREAM (which clients may retry). Default:
    /// 16 MiB, 4 KiB for each of the 4096 streams a connection may open by
    /// default. A request whose header block repeats one the connection
    /// remembers shares that block's metadata and counts nothing.
    pub fn max_request_metadata_bytes(mut self, bytes: usize) -> Builder {
        self.config.grpc.max_request_metadata_bytes = bytes;
        self
    }

    /// The HTTP/2 codec's settings and limits, for the knobs without a
    /// method of their own (see [`H2Config`](crate::H2Config)). Start from
    /// the default and change what you need:
    ///
    /// ```
    /// let builder = pajamax::Server::builder().h2_config(pajamax::H2Config {
    ///     stream_send_buffer: 256 << 10,
    ///     ..pajamax::H2Config::default()
    /// });
    /// ```
    ///
    /// It replaces the settings made before it with
    /// [`max_concurrent_streams`](Builder::max_concurrent_streams),
    /// [`initial_stream_window`](Builder::initial_stream_window) and
    /// [`max_header_list_size`](Builder::max_header_list_size): call those
    /// after it.
    ///
    /// Values HTTP/2 does not let the server announce (a `max_frame_size`
    /// outside 16 384 ..= 16 777 215, a window above 2^31 - 1) make
    /// [`bind`](Builder::bind) fail with `InvalidInput`, and so do values
    /// with which no call could be served: `max_concurrent_streams`,
    /// `initial_stream_window`, `max_unproductive_frames` or
    /// `stream_send_buffer` of 0.
    pub fn h2_config(mut self, config: crate::h2::Config) -> Builder {
        self.config.grpc.h2 = config;
        self
    }

    /// How long a graceful shutdown waits for open calls before it closes
    /// their connections; default: 30 s. `Duration::MAX` waits as long as
    /// they take.
    ///
    /// When it is over, every connection still open gets a GOAWAY and is
    /// closed: the calls still running on it are answered `UNAVAILABLE`
    /// first (see `docs/deployment.md`), and handlers serving them on other
    /// threads see their call cancelled. A connection whose client does not
    /// take that last output is dropped at the next sweep.
    /// Keep it below the time the process manager waits before it kills
    /// the process (Kubernetes: `terminationGracePeriodSeconds`, 30 s by
    /// default).
    ///
    /// ```
    /// let builder = pajamax::Server::builder().shutdown_grace(std::time::Duration::from_secs(20));
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Builder {
        self.config.shutdown_grace = grace;
        self
    }

    /// Answer bytes a connection may have waiting for a slow reader before
    /// the server stops reading its requests; default: 4 MiB. Calls
    /// already sent to other threads still answer into that output once
    /// reading has stopped (each answer is made whole by its thread
    /// anyway), so a client that does not read can hold up to this much
    /// plus the answers of its calls under way
    /// ([`max_concurrent_streams`](Builder::max_concurrent_streams) at
    /// most).
    pub fn max_pending_output(mut self, bytes: usize) -> Builder {
        self.config.max_pending_output = bytes.max(1);
        self
    }

    /// Streams open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS);
    /// default: 4096. 0, with which clients would wait for a stream that
    /// never comes (grpc-go takes it for no limit), makes
    /// [`bind`](Builder::bind) fail with `InvalidInput`.
    pub fn max_concurrent_streams(mut self, streams: u32) -> Builder {
        self.config.grpc.h2.max_concurrent_streams = streams;
        self
    }

    /// The largest request message; default: 4 MiB. A message is buffered
    /// whole before its handler sees it, so one larger than
    /// [`max_buffered_request_bytes`](Builder::max_buffered_request_bytes)
    /// (64 MiB by default) is refused too: raise both.
    pub fn max_recv_message_size(mut self, bytes: usize) -> Builder {
        self.config.grpc.max_recv_message_size = bytes;
        self
    }

    /// The longest a unary or client-streaming call may take, as tonic's
    /// `Server::timeout`: such a call without a deadline of its own
    /// (`grpc-timeout`) gets `timeout` as its deadline, and one whose
    /// deadline is further off gets this one instead. A call still open
    /// when it passes is ended as when the client's deadline passes: with
    /// `DEADLINE_EXCEEDED` (where tonic answers `CANCELLED`), its
    /// responder or `Streaming` on another thread seeing it cancelled; a
    /// handler running on the worker is not interrupted. A server-streaming
    /// call is held to it only while its request message is awaited, and
    /// a bidirectional call not at all: once their handler has its stream
    /// (a health `Watch`, a subscription), they keep the client's deadline
    /// alone, much as with tonic, whose timeout ends once the handler has
    /// returned its stream. Default: none, as tonic and
    /// grpc-go. 0, which would end every call at once, makes
    /// [`bind`](Builder::bind) fail with `InvalidInput`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = pajamax::Server::builder().call_timeout(Duration::from_secs(30));
    /// ```
    pub fn call_timeout(mut self, timeout: Duration) -> Builder {
        self.config.grpc.call_timeout = Some(timeout);
        self
    }

    /// Compresses answers for the clients that accept gzip or deflate
    /// (`grpc-accept-encoding`): with the request's own compression if the
    /// client accepts it, else gzip, else deflate. A handler decides
    /// otherwise for its call with
    /// [`Context::compress_response`](crate::Context::compress_response).
    /// Default: `false`. Requests compressed with gzip or deflate are taken
    /// either way.
    pub fn send_compressed(mut self, compress: bool) -> Builder {
        self.config.grpc.send_compressed = compress;
        self
    }

    /// The HTTP/2 window a client gets per stream (SETTINGS_INITIAL_WINDOW_SIZE);
    /// default: 1 MiB. At most 2^31 - 1 (HTTP/2's largest window): more is
    /// taken as that. 0, with which no request could send its message,
    /// makes [`bind`](Builder::bind) fail with `InvalidInput`.
    pub fn initial_stream_window(mut self, bytes: u32) -> Builder {
        self.config.grpc.h2.initial_stream_window = bytes.min(crate::h2::frame::MAX_WINDOW);
        self
    }

    /// The largest request header list (SETTINGS_MAX_HEADER_LIST_SIZE);
    /// default: 16 KiB.
    pub fn max_header_list_size(mut self, bytes: u32) -> Builder {
        self.config.grpc.h2.max_header_list_size = bytes;
        self
    }

    /// Serves over TLS (cargo feature `tls`): every connection, on TCP or
    /// on a Unix socket, begins with a TLS handshake with `config`'s
    /// certificate, offering ALPN `h2` only (a client that does not ask
    /// for `h2` fails the handshake). With client CAs set
    /// ([`TlsConfig::client_ca_pem`](crate::TlsConfig::client_ca_pem)),
    /// clients must present a certificate those CAs issued, which
    /// handlers see as [`Context::peer_certificates`](
    /// crate::Context::peer_certificates). The handshake must end within
    /// [`handshake_timeout`](Builder::handshake_timeout). Replace the
    /// certificate on the running server with
    /// [`ServerHandle::reload_tls`]. A configuration that rustls refuses
    /// fails [`bind`](Builder::bind) with `InvalidData`.
    ///
    /// ```no_run
    /// # struct MyService;
    /// # impl pajamax::Service for MyService {
    /// #     fn name(&self) -> &'static str { "demo.Demo" }
    /// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
    /// # }
    /// use pajamax::TlsConfig;
    ///
    /// fn main() -> std::io::Result<()> {
    ///     let tls = TlsConfig::from_pem_files("server.pem", "server.key")?
    ///         // Mutual TLS: only clients with a certificate from this CA.
    ///         .client_ca_file("clients-ca.pem")?;
    ///     pajamax::Server::builder()
    ///         .tls(tls)
    ///         .add_service(MyService)
    ///         .serve_until_signal("0.0.0.0:50051")
    /// }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: crate::TlsConfig) -> Builder {
        self.tls = Some(config);
        self
    }

    /// Adds a service; its methods are routed by `/{name}/{method}`.
    pub fn add_service<S: Service>(mut self, service: S) -> Builder {
        self.router.add(Arc::new(service));
        self
    }

    /// Runs `interceptor` on the worker before the handler of every call
    /// (interceptors run in the order they were added; the first to reject
    /// a call ends it). See [`Interceptor`] and the
    /// [crate docs](crate#interceptors-and-observers); for one service
    /// only, wrap it in [`Intercepted`](crate::Intercepted).
    ///
    /// ```
    /// use pajamax::{CallInfo, Context, Status};
    ///
    /// let builder = pajamax::Server::builder().intercept(
    ///     |_call: &CallInfo<'_>, ctx: &mut Context<'_>| match ctx.metadata().get("x-api-key") {
    ///         Some("secret") => Ok(()),
    ///         _ => Err(Status::unauthenticated("x-api-key required")),
    ///     },
    /// );
    /// ```
    pub fn intercept(mut self, interceptor: impl Interceptor) -> Builder {
        self.router
            .hooks_mut()
            .interceptors
            .push(Arc::new(interceptor));
        self
    }

    /// Shows every answered call to `observer` (method, status code,
    /// duration, message bytes each way), on the worker that served it;
    /// requests turned away before they are read as calls are not shown.
    /// See [`CallObserver`] and the
    /// [crate docs](crate#interceptors-and-observers).
    ///
    /// ```
    /// use pajamax::FinishedCall;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// let failed = Arc::new(AtomicU64::new(0));
    /// let counter = failed.clone();
    /// let builder = pajamax::Server::builder().observe(move |call: &FinishedCall<'_>| {
    ///     if call.code != pajamax::Code::Ok {
    ///         counter.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// });
    /// ```
    pub fn observe(mut self, observer: impl CallObserver) -> Builder {
        self.router.hooks_mut().observers.push(Arc::new(observer));
        self
    }

    /// The fully qualified names of the services added so far, such as
    /// `helloworld.Greeter`, in the order they were added; a name added
    /// twice (the later service replaces the earlier) is listed once.
    pub fn service_names(&self) -> Vec<&'static str> {
        self.router.service_names().collect()
    }

    /// Runs `hook` when a graceful shutdown begins, before any connection is
    /// told to go away: for example to tell health watchers that the server
    /// is no longer serving. Hooks run in the order they were added, on the
    /// thread that shuts the server down, whatever started the shutdown:
    /// [`ServerHandle::shutdown`], the end of
    /// [`serve_with_shutdown`](Builder::serve_with_shutdown)'s signal, or
    /// SIGTERM / SIGINT ([`serve_until_signal`](Builder::serve_until_signal)).
    ///
    /// ```
    /// let builder = pajamax::Server::builder().on_shutdown(|| println!("draining"));
    /// ```
    pub fn on_shutdown(mut self, hook: impl FnOnce() + Send + 'static) -> Builder {
        self.on_shutdown.push(Box::new(hook));
        self
    }

    /// Serves on `addr` until the process ends.
    ///
    /// A server that should stop cleanly uses
    /// [`serve_until_signal`](Builder::serve_until_signal) or
    /// [`serve_with_shutdown`](Builder::serve_with_shutdown) instead.
    pub fn serve(self, addr: impl ToSocketAddrs) -> io::Result<()> {
        self.bind(addr)?.wait();
        Ok(())
    }

    /// Serves on `addr` until `signal` returns, then shuts down gracefully
    /// (see [`ServerHandle::shutdown`]), and returns once the server has
    /// stopped. `signal` runs on the calling thread and may block: it is
    /// the synchronous counterpart of tonic's
    /// `serve_with_shutdown(addr, future)`.
    ///
    /// ```no_run
    /// # struct MyService;
    /// # impl pajamax::Service for MyService {
    /// #     fn name(&self) -> &'static str { "demo.Demo" }
    /// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
    /// # }
    /// let (stop, stopped) = std::sync::mpsc::channel::<()>();
    /// // ... hand `stop` to whatever decides that the server stops ...
    /// # drop(stop);
    /// pajamax::Server::builder()
    ///     .add_service(MyService)
    ///     .serve_with_shutdown("127.0.0.1:50051", move || {
    ///         // Returns on `stop.send(())`, or when `stop` is dropped.
    ///         let _ = stopped.recv();
    ///     })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn serve_with_shutdown(
        self,
        addr: impl ToSocketAddrs,
        signal: impl FnOnce(),
    ) -> io::Result<()> {
        let server = self.bind(addr)?;
        signal();
        server.shutdown();
        Ok(())
    }

    /// Serves on `addr` until the process gets SIGTERM or SIGINT (Ctrl-C),
    /// then shuts down gracefully, and returns `Ok(())` once the server
    /// has stopped: a `main` that returns it exits with status 0.
    ///
    /// - The signals are caught from the moment this is called, before
    ///   `addr` is bound, so an early SIGTERM is not lost. They are waited
    ///   for on the calling thread (signal-hook's iterator: the signal
    ///   handler only wakes that thread); the workers never see them.
    /// - On the first signal, the [`on_shutdown`](Builder::on_shutdown)
    ///   hooks run, the listener closes (new connections are refused), and
    ///   every connection gets a GOAWAY; calls in flight go on and are
    ///   answered, for at most [`shutdown_grace`](Builder::shutdown_grace),
    ///   after which the connections still open are closed.
    /// - A second SIGTERM or SIGINT during that drain ends it at once: the
    ///   connections still open are closed, the workers get at most two
    ///   seconds more to exit, and this returns `Ok(())`.
    ///
    /// The signals stay caught (and ignored) after this returns, so the
    /// process should end soon after, as a `main` returning does.
    ///
    /// ```no_run
    /// # struct MyService;
    /// # impl pajamax::Service for MyService {
    /// #     fn name(&self) -> &'static str { "demo.Demo" }
    /// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
    /// # }
    /// fn main() -> std::io::Result<()> {
    ///     pajamax::Server::builder()
    ///         .add_service(MyService)
    ///         .on_shutdown(|| eprintln!("draining"))
    ///         .serve_until_signal("0.0.0.0:50051")
    /// }
    /// ```
    #[cfg(unix)]
    pub fn serve_until_signal(self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let signals = ShutdownSignals::register()?;
        signals.drain(self.bind(addr)?)
    }

    /// Binds `addr`, starts the acceptor and the workers, and returns a
    /// handle to the running server.
    ///
    /// Binding port 0 lets the system choose a free port;
    /// [`ServerHandle::local_addr`] tells which:
    ///
    /// ```
    /// # struct MyService;
    /// # impl pajamax::Service for MyService {
    /// #     fn name(&self) -> &'static str { "demo.Demo" }
    /// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
    /// # }
    /// let server = pajamax::Server::builder()
    ///     .workers(1)
    ///     .add_service(MyService)
    ///     .bind("127.0.0.1:0")?;
    /// assert_ne!(server.local_addr().port(), 0);
    /// server.shutdown();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind(self, addr: impl ToSocketAddrs) -> io::Result<ServerHandle> {
        let addr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to bind"))?;
        let listener = mio::net::TcpListener::bind(addr)?;
        let local_addr = listener.local_addr()?;
        self.start(Listener::Tcp(listener), Some(local_addr), None)
    }

    /// Binds a Unix domain socket at `path`, starts the acceptor and the
    /// workers, and returns a handle to the running server.
    ///
    /// As with any Unix socket, binding fails with
    /// [`io::ErrorKind::AddrInUse`] if a file is already at `path`: a file
    /// left behind by a server that was killed is not removed for you, so
    /// remove it first, as below. The server removes its socket file when
    /// it stops, if the file there is still the one it made.
    ///
    /// Calls on a Unix socket have no peer address:
    /// [`Context::peer_addr`](crate::Context::peer_addr) is `None`, and the
    /// handle's [`local_addr`](ServerHandle::local_addr) gives way to
    /// [`unix_path`](ServerHandle::unix_path). Everything else is as on
    /// TCP. To also stop on SIGTERM, end with
    /// [`shutdown_on_signals`](ServerHandle::shutdown_on_signals).
    ///
    /// ```
    /// # struct MyService;
    /// # impl pajamax::Service for MyService {
    /// #     fn name(&self) -> &'static str { "demo.Demo" }
    /// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
    /// # }
    /// let path = std::env::temp_dir().join(format!("pajamax-doc-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path); // left by an earlier run, if any
    /// let server = pajamax::Server::builder()
    ///     .workers(1)
    ///     .add_service(MyService)
    ///     .bind_unix(&path)?;
    /// assert_eq!(server.unix_path(), Some(path.as_path()));
    /// server.shutdown();
    /// assert!(!path.exists());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[cfg(unix)]
    pub fn bind_unix(self, path: impl AsRef<Path>) -> io::Result<ServerHandle> {
        let listener = crate::runtime::unix::Listener::bind(path.as_ref())?;
        let path = listener.path.clone();
        self.start(Listener::Unix(listener), None, Some(path))
    }

    /// Starts the acceptor on `listener` and the workers. If one of them
    /// cannot start, the workers already started are stopped before the
    /// error is returned: a failed start leaves no thread behind.
    fn start(
        self,
        mut listener: Listener,
        local_addr: Option<SocketAddr>,
        unix_path: Option<PathBuf>,
    ) -> io::Result<ServerHandle> {
        #[allow(unused_mut)]
        let mut config = self.config;
        check(&config)?;
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            config.tls = Some(crate::TlsReloader::new(tls)?);
        }
        let router = Arc::new(self.router);
        let shared = Arc::new(Shared::new(config.workers));
        let cores = if config.pin_workers {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };

        let mut started = Starting {
            shared: shared.clone(),
            wakers: Vec::with_capacity(config.workers),
            threads: Vec::with_capacity(config.workers + 1),
        };
        let mut handles = Vec::with_capacity(config.workers);
        for index in 0..config.workers {
            let waits = Worker::waits(&config)?;
            let waker = waits.waker.clone();
            let (sender, receiver) = mpsc::channel();
            handles.push(WorkerHandle {
                sender,
                waker: waker.clone(),
            });
            started.wakers.push(waker);
            let (router, config, shared) = (router.clone(), config.clone(), shared.clone());
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let thread = std::thread::Builder::new()
                .name(format!("pajamax-worker-{index}"))
                .spawn(move || {
                    if let Some(core) = core {
                        if !core_affinity::set_for_current(core) {
                            log::warn!("worker {index}: could not pin to core {}", core.id);
                        }
                    }
                    // Made on its own thread: the calls it will hold stay
                    // there.
                    Worker::new(index, router, config, shared, receiver, waits).run();
                })?;
            started.threads.push(thread);
        }

        let (poll, acceptor_waker) = Acceptor::prepare(&mut listener)?;
        let acceptor = Acceptor {
            poll,
            listener,
            workers: handles,
            shared: shared.clone(),
            max_connections: config.max_connections,
            gone: vec![false; config.workers],
        };
        let acceptor = std::thread::Builder::new()
            .name("pajamax-acceptor".into())
            .spawn(move || acceptor.run())?;
        let (worker_wakers, threads) = started.finish();
        let shown = match (&local_addr, &unix_path) {
            (Some(addr), _) => addr.to_string(),
            (None, Some(path)) => format!("unix:{}", path.display()),
            (None, None) => String::new(),
        };
        log::info!("pajamax serving on {shown} with {} workers", config.workers);
        Ok(ServerHandle {
            #[cfg(feature = "tls")]
            tls: config.tls.clone(),
            on_shutdown: self.on_shutdown,
            local_addr,
            unix_path,
            shared,
            wakers: worker_wakers,
            acceptor_waker,
            acceptor: Some(acceptor),
            threads,
        })
    }
}

/// The workers of a start that has not finished. Dropped before
/// [`finish`](Starting::finish) (the start failed), it tells them to stop
/// and waits for them.
struct Starting {
    shared: Arc<Shared>,
    wakers: Vec<Arc<mio::Waker>>,
    threads: Vec<JoinHandle<()>>,
}

impl Starting {
    /// The workers' wakers and threads, now the server's.
    fn finish(mut self) -> (Vec<Arc<mio::Waker>>, Vec<JoinHandle<()>>) {
        (
            std::mem::take(&mut self.wakers),
            std::mem::take(&mut self.threads),
        )
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        // They hold no connection: told to stop at once, they exit at
        // their next turn.
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.stop_now.store(true, Ordering::Release);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The most worker threads a server starts ([`Builder::workers`]).
const MAX_WORKERS: usize = 1 << 16;

/// Refuses, before anything starts, settings that HTTP/2 does not allow
/// the server to announce (every client would close the connection at
/// the server's first SETTINGS), settings with which no call could be
/// served, and more workers than [`MAX_WORKERS`] (whose bookkeeping
/// alone could exhaust memory).
fn check(config: &RuntimeConfig) -> io::Result<()> {
    use crate::h2::frame::{DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE, MAX_WINDOW};
    let h2 = &config.grpc.h2;
    let invalid = |what: String| Err(io::Error::new(io::ErrorKind::InvalidInput, what));
    if config.workers > MAX_WORKERS {
        return invalid(format!("workers {} is above {MAX_WORKERS}", config.workers));
    }
    if config.max_connections == 0 {
        return invalid("max_connections 0: every connection would be refused".to_string());
    }
    for (name, value, why) in [
        (
            "call_timeout",
            config.grpc.call_timeout,
            "every call would end at once",
        ),
        (
            "idle_timeout",
            config.idle_timeout,
            "every connection would be sent away as soon as it had no call",
        ),
        (
            "keepalive_interval",
            config.keepalive_interval,
            "every quiet connection would be sent a PING at every sweep",
        ),
        (
            "keepalive_timeout",
            config.keepalive_interval.map(|_| config.keepalive_timeout),
            "a connection would be dropped before its client could answer a PING",
        ),
        (
            "max_connection_age",
            config.max_connection_age,
            "every connection would be retired as it opened",
        ),
        (
            "handshake_timeout",
            Some(config.handshake_timeout),
            "every connection would be closed before its preface",
        ),
    ] {
        if value == Some(Duration::ZERO) {
            return invalid(format!("{name} 0: {why}"));
        }
    }
    for (name, value, why) in [
        (
            "max_concurrent_streams",
            h2.max_concurrent_streams,
            "clients could open no stream",
        ),
        (
            "initial_stream_window",
            h2.initial_stream_window,
            "clients could send no request message",
        ),
        (
            "max_unproductive_frames",
            h2.max_unproductive_frames,
            "every connection would close at the client's first SETTINGS",
        ),
    ] {
        if value == 0 {
            return invalid(format!("{name} 0: {why}"));
        }
    }
    if h2.stream_send_buffer == 0 {
        return invalid(
            "stream_send_buffer 0: a streaming handler on the worker waiting for a client's \
             windows would never be woken"
                .to_string(),
        );
    }
    if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&h2.max_frame_size) {
        return invalid(format!(
            "max_frame_size {} is outside {DEFAULT_MAX_FRAME_SIZE}..={MAX_MAX_FRAME_SIZE}",
            h2.max_frame_size
        ));
    }
    for (name, window) in [
        ("initial_stream_window", h2.initial_stream_window),
        ("connection_window", h2.connection_window),
    ] {
        if window > MAX_WINDOW {
            return invalid(format!("{name} {window} is above {MAX_WINDOW}"));
        }
    }
    Ok(())
}

/// A running server, from [`Builder::bind`] or [`Builder::bind_unix`]:
/// where it listens, what it holds, and how it stops.
///
/// [`shutdown`](ServerHandle::shutdown) drains the server gracefully and
/// waits for it; [`shutdown_on_signals`](ServerHandle::shutdown_on_signals)
/// does that on SIGTERM or SIGINT; [`wait`](ServerHandle::wait) waits
/// without stopping it. Dropping the handle does not stop the server: it
/// runs on until the process ends.
///
/// ```
/// # struct MyService;
/// # impl pajamax::Service for MyService {
/// #     fn name(&self) -> &'static str { "demo.Demo" }
/// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
/// # }
/// let server = pajamax::Server::builder()
///     .workers(2)
///     .add_service(MyService)
///     .bind("127.0.0.1:0")?;
/// let addr = server.local_addr(); // the port the system chose
/// println!("clients connect to {addr}");
/// assert_eq!(server.connections(), 0);
/// assert_eq!(server.stats().workers.len(), 2);
/// // Graceful: every connection gets a GOAWAY, the calls in flight are
/// // answered, then the threads exit.
/// server.shutdown();
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// Stopping it from elsewhere, here a thread that decides when:
///
/// ```
/// # struct MyService;
/// # impl pajamax::Service for MyService {
/// #     fn name(&self) -> &'static str { "demo.Demo" }
/// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
/// # }
/// let (stop, stopped) = std::sync::mpsc::channel::<()>();
/// let server = pajamax::Server::builder()
///     .workers(1)
///     .add_service(MyService)
///     .bind("127.0.0.1:0")?;
/// let controller = std::thread::spawn(move || {
///     // ... on whatever event ends the server:
///     stop.send(()).unwrap();
/// });
/// let _ = stopped.recv();
/// server.shutdown();
/// controller.join().unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ServerHandle {
    #[cfg(feature = "tls")]
    tls: Option<crate::TlsReloader>,
    on_shutdown: Vec<Box<dyn FnOnce() + Send>>,
    local_addr: Option<SocketAddr>,
    unix_path: Option<PathBuf>,
    shared: Arc<Shared>,
    wakers: Vec<Arc<mio::Waker>>,
    acceptor_waker: Arc<mio::Waker>,
    /// The acceptor thread, joined when a shutdown begins.
    acceptor: Option<JoinHandle<()>>,
    /// The worker threads.
    threads: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// The address the server listens on (with the port the system chose
    /// when binding port 0).
    ///
    /// # Panics
    ///
    /// If the server listens on a Unix socket ([`Builder::bind_unix`]): see
    /// [`ServerHandle::unix_path`].
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
            .expect("the server listens on a Unix socket: see ServerHandle::unix_path")
    }

    /// The path of the Unix socket the server listens on
    /// ([`Builder::bind_unix`]); `None` on TCP.
    pub fn unix_path(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    /// Replaces the server's TLS certificate (and client CAs) for the
    /// connections accepted from now on; the connections already open keep
    /// the ones they were made with. On an error (or on a server started
    /// without [`Builder::tls`], `InvalidInput`) nothing changes. To
    /// reload from another thread, take a [`tls_reloader`](
    /// ServerHandle::tls_reloader).
    ///
    /// ```no_run
    /// # fn renew(server: &pajamax::ServerHandle) -> std::io::Result<()> {
    /// server.reload_tls(&pajamax::TlsConfig::from_pem_files("server.pem", "server.key")?)?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub fn reload_tls(&self, config: &crate::TlsConfig) -> io::Result<()> {
        match &self.tls {
            Some(reloader) => reloader.reload(config),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the server was started without TLS",
            )),
        }
    }

    /// A handle that replaces the TLS certificate from any thread (see
    /// [`TlsReloader`](crate::TlsReloader)); `None` on a server started
    /// without [`Builder::tls`].
    #[cfg(feature = "tls")]
    pub fn tls_reloader(&self) -> Option<crate::TlsReloader> {
        self.tls.clone()
    }

    /// The number of connections the server holds now.
    pub fn connections(&self) -> usize {
        self.shared.total_connections()
    }

    /// High-water marks of what peers made the server hold, how many
    /// connections it closed for a protocol error, and what each worker
    /// has done.
    ///
    /// ```no_run
    /// # fn show(server: &pajamax::ServerHandle) {
    /// for (i, worker) in server.stats().workers.iter().enumerate() {
    ///     println!("worker {i}: {:.1} answers per write", worker.requests_per_write());
    /// }
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let load = |counter: &std::sync::atomic::AtomicUsize| counter.load(Ordering::Relaxed);
        Stats {
            connections: self.connections(),
            peak_output_bytes: load(&self.shared.peak_output),
            peak_held_bytes: load(&self.shared.peak_held),
            peak_buffered_request_bytes: load(&self.shared.peak_buffered),
            peak_queued_request_bytes: load(&self.shared.peak_queued),
            peak_open_streams: load(&self.shared.peak_streams),
            connection_errors: load(&self.shared.connection_errors),
            workers: self
                .shared
                .counters
                .iter()
                .map(|counters| WorkerStats {
                    requests_answered: counters.answered.load(Ordering::Relaxed),
                    reads: counters.reads.load(Ordering::Relaxed),
                    writes: counters.writes.load(Ordering::Relaxed),
                })
                .collect(),
        }
    }

    /// Connections held by each worker.
    pub fn connections_per_worker(&self) -> Vec<usize> {
        self.shared
            .loads
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect()
    }

    /// Shuts down gracefully and waits: the
    /// [`on_shutdown`](Builder::on_shutdown) hooks run, new connections are
    /// no longer accepted, every connection gets a GOAWAY, calls in flight
    /// finish and are answered (for at most
    /// [`shutdown_grace`](Builder::shutdown_grace)), then the threads exit.
    pub fn shutdown(mut self) {
        self.begin_shutdown();
        self.wait();
    }

    /// Waits for SIGTERM or SIGINT, then shuts down gracefully; a second
    /// signal during the drain ends it at once. Returns once the server has
    /// stopped. This is [`Builder::serve_until_signal`] for a server already
    /// bound, for example on a Unix socket or on port 0; the signals are
    /// caught from the moment this is called.
    ///
    /// ```no_run
    /// # struct MyService;
    /// # impl pajamax::Service for MyService {
    /// #     fn name(&self) -> &'static str { "demo.Demo" }
    /// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
    /// # }
    /// let _ = std::fs::remove_file("/run/demo/grpc.sock");
    /// let server = pajamax::Server::builder()
    ///     .add_service(MyService)
    ///     .bind_unix("/run/demo/grpc.sock")?;
    /// server.shutdown_on_signals()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[cfg(unix)]
    pub fn shutdown_on_signals(self) -> io::Result<()> {
        ShutdownSignals::register()?.drain(self)
    }

    /// Runs the hooks, stops the acceptor, then tells the workers to
    /// drain. The listener is closed before the first GOAWAY: a gateway
    /// that opens a new connection when it sees one is refused at once,
    /// never accepted into a queue that the close then resets.
    fn begin_shutdown(&mut self) {
        for hook in std::mem::take(&mut self.on_shutdown) {
            hook();
        }
        self.shared.stop_accepting.store(true, Ordering::Release);
        let _ = self.acceptor_waker.wake();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.shared.shutdown.store(true, Ordering::Release);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
    }

    /// Waits until the server's threads exit.
    pub fn wait(self) {
        for thread in self.threads {
            let _ = thread.join();
        }
        if let Some(acceptor) = self.acceptor {
            let _ = acceptor.join();
        }
    }
}

/// SIGTERM and SIGINT, caught from the moment this is made until it is
/// dropped. signal-hook's handler only wakes the thread that waits in
/// [`ShutdownSignals::drain`].
#[cfg(unix)]
struct ShutdownSignals(signal_hook::iterator::Signals);

#[cfg(unix)]
impl ShutdownSignals {
    fn register() -> io::Result<ShutdownSignals> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).map(ShutdownSignals)
    }

    /// Waits for a signal and shuts `server` down gracefully; a second
    /// signal cuts the drain short. Returns once the server has stopped, or
    /// [`STOP_WAIT`] after a second signal.
    fn drain(mut self, mut server: ServerHandle) -> io::Result<()> {
        let first = self.0.forever().next();
        log::info!(
            "{}: shutting down gracefully (a second signal stops at once)",
            signal_name(first)
        );
        server.begin_shutdown();
        let (shared, wakers) = (server.shared.clone(), server.wakers.clone());
        let closer = self.0.handle();
        let (done, stopped) = mpsc::channel();
        std::thread::Builder::new()
            .name("pajamax-shutdown".into())
            .spawn(move || {
                server.wait();
                let _ = done.send(());
                // Ends the wait for a second signal below.
                closer.close();
            })?;
        if let Some(second) = self.0.forever().next() {
            log::warn!(
                "{}: closing the connections still open",
                signal_name(Some(second))
            );
            shared.stop_now.store(true, Ordering::Release);
            for waker in &wakers {
                let _ = waker.wake();
            }
            if stopped.recv_timeout(STOP_WAIT).is_err() {
                log::warn!("a worker is still busy in a handler; not waiting for it");
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
fn signal_name(signal: Option<std::os::raw::c_int>) -> &'static str {
    match signal {
        Some(signal_hook::consts::SIGTERM) => "SIGTERM",
        Some(signal_hook::consts::SIGINT) => "SIGINT",
        _ => "signal",
    }
}

/// Counters a running server exposes; see [`ServerHandle::stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Connections held now.
    pub connections: usize,
    /// The most unwritten output one connection has had after a batch
    /// (bounded by `max_pending_output` plus one batch of answers, plus
    /// the answers of the calls served on other threads that were under
    /// way when reading stopped: at most `max_concurrent_streams` of them).
    pub peak_output_bytes: usize,
    /// The most response bytes one connection has held waiting for the
    /// peer's flow-control windows.
    pub peak_held_bytes: usize,
    /// The most incomplete request bytes one connection has buffered.
    pub peak_buffered_request_bytes: usize,
    /// The most request bytes one connection has had waiting for handlers
    /// on other threads: streamed messages not yet taken, and requests of
    /// calls sent to a thread that has not answered yet (each bounded by
    /// `max_buffered_request_bytes`, or one message past it, and, for the
    /// streamed ones, one more for each thread waiting for its next).
    pub peak_queued_request_bytes: usize,
    /// The most streams one connection has had open at once (bounded by
    /// `max_concurrent_streams`).
    pub peak_open_streams: usize,
    /// Connections the server closed with a GOAWAY carrying an error code.
    pub connection_errors: usize,
    /// What each worker has done, in worker order.
    pub workers: Vec<WorkerStats>,
}

/// What one worker has done since the server started (published as each
/// connection's turn ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkerStats {
    /// Calls answered: their status sent.
    pub requests_answered: u64,
    /// Socket reads that brought bytes in.
    pub reads: u64,
    /// Socket writes that sent bytes out.
    pub writes: u64,
}

impl WorkerStats {
    /// Answers per write: how much one write carries, the batching at
    /// work (0 before the first write).
    pub fn requests_per_write(&self) -> f64 {
        if self.writes == 0 {
            0.0
        } else {
            self.requests_answered as f64 / self.writes as f64
        }
    }
}
