//! Worker threads and the acceptor: the only part of pajamax that does I/O.

pub(crate) mod acceptor;
mod readiness;
mod slots;
mod ticker;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub(crate) mod worker;

use crate::grpc::connection::GrpcConfig;
use mio::event::Source;
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Runtime settings, filled by the [`Builder`](crate::server::Builder).
#[derive(Debug, Clone)]
pub(crate) struct RuntimeConfig {
    pub workers: usize,
    pub pin_workers: bool,
    pub max_connections: usize,
    pub idle_timeout: Option<Duration>,
    /// How long a connection may stay quiet before it is sent a PING;
    /// `None`: never.
    pub keepalive_interval: Option<Duration>,
    /// How long the peer has to answer that PING (or send anything)
    /// before the connection is dropped.
    pub keepalive_timeout: Duration,
    /// How long a connection serves new calls before it is sent a
    /// GOAWAY (give or take a tenth); `None`: for good.
    pub max_connection_age: Option<Duration>,
    /// How long its calls then have before they are ended with
    /// UNAVAILABLE; `None`: as long as they take.
    pub max_connection_age_grace: Option<Duration>,
    pub handshake_timeout: Duration,
    pub shutdown_grace: Duration,
    pub max_pending_output: usize,
    pub read_buffer_size: usize,
    pub grpc: GrpcConfig,
    /// Where TLS connections get their configuration; `None`: plain.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::tls::TlsReloader>,
}

/// State shared by the acceptor, the workers and the server handle.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The acceptor is to take what the kernel has queued and close the
    /// listener.
    pub stop_accepting: AtomicBool,
    /// The server is shutting down. Whoever sets it, or `stop_now`, wakes
    /// every worker after: a worker looks at both only after a wake-up.
    pub shutdown: AtomicBool,
    /// The shutdown's grace period is cut short: connections still open
    /// are closed now.
    pub stop_now: AtomicBool,
    /// Connections each worker holds now.
    pub loads: Vec<AtomicUsize>,
    /// The most unwritten output one connection has had after a batch.
    pub peak_output: AtomicUsize,
    /// The most response bytes one connection has held for flow control.
    pub peak_held: AtomicUsize,
    /// The most incomplete request bytes one connection has buffered.
    pub peak_buffered: AtomicUsize,
    /// The most request bytes one connection has had queued for handlers
    /// on other threads.
    pub peak_queued: AtomicUsize,
    /// The most streams one connection has had open at once.
    pub peak_streams: AtomicUsize,
    /// Connections closed by the server with a GOAWAY carrying an error.
    pub connection_errors: AtomicUsize,
    /// What each worker has done, published by the worker as each
    /// connection's turn ends.
    pub counters: Vec<Arc<WorkerCounters>>,
}

/// The running totals of one worker, each worker's on cache lines of its
/// own: every worker stores its totals after each connection it serves,
/// and neighbours in one line would make each store take the line from
/// another core (128 bytes: x86's prefetcher fetches lines in pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct WorkerCounters {
    /// Calls answered (a status sent).
    pub answered: AtomicU64,
    /// Reads that brought bytes in.
    pub reads: AtomicU64,
    /// Writes that sent bytes out.
    pub writes: AtomicU64,
}

impl Shared {
    pub fn new(workers: usize) -> Shared {
        Shared {
            stop_accepting: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            stop_now: AtomicBool::new(false),
            loads: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
            peak_output: AtomicUsize::new(0),
            peak_held: AtomicUsize::new(0),
            peak_buffered: AtomicUsize::new(0),
            peak_queued: AtomicUsize::new(0),
            peak_streams: AtomicUsize::new(0),
            connection_errors: AtomicUsize::new(0),
            counters: (0..workers)
                .map(|_| Arc::new(WorkerCounters::default()))
                .collect(),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Whether a shutdown is to close the connections still open now,
    /// without waiting for the rest of its grace period.
    pub fn must_stop_now(&self) -> bool {
        self.stop_now.load(Ordering::Acquire)
    }

    pub fn total_connections(&self) -> usize {
        self.loads.iter().map(|l| l.load(Ordering::Relaxed)).sum()
    }
}

/// What the server listens on: a TCP port or a Unix socket.
pub(crate) enum Listener {
    Tcp(TcpListener),
    #[cfg(unix)]
    Unix(unix::Listener),
}

impl Listener {
    /// A new connection and the peer's address (none on a Unix socket).
    pub fn accept(&self) -> io::Result<(Socket, Option<SocketAddr>)> {
        match self {
            Listener::Tcp(listener) => listener
                .accept()
                .map(|(socket, peer)| (Socket::Tcp(socket), Some(peer))),
            #[cfg(unix)]
            Listener::Unix(listener) => listener
                .socket
                .accept()
                .map(|(socket, _)| (Socket::Unix(socket), None)),
        }
    }
}

impl Source for Listener {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Listener::Tcp(listener) => listener.register(registry, token, interests),
            #[cfg(unix)]
            Listener::Unix(listener) => listener.socket.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Listener::Tcp(listener) => listener.reregister(registry, token, interests),
            #[cfg(unix)]
            Listener::Unix(listener) => listener.socket.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Listener::Tcp(listener) => listener.deregister(registry),
            #[cfg(unix)]
            Listener::Unix(listener) => listener.socket.deregister(registry),
        }
    }
}

/// A connection's socket. Reads and writes go straight to the stream
/// inside: the only cost of the choice is the match.
pub(crate) enum Socket {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(mio::net::UnixStream),
}

impl Socket {
    /// Sets a new connection up: answers leave as soon as they are written
    /// (no Nagle delay on TCP).
    pub fn prepare(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.set_nodelay(true),
            #[cfg(unix)]
            Socket::Unix(_) => Ok(()),
        }
    }

    /// The socket's descriptor, for the system calls made without libc's
    /// wrappers (see `readiness`).
    #[cfg(target_os = "linux")]
    #[inline]
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            Socket::Tcp(socket) => socket.as_fd(),
            Socket::Unix(socket) => socket.as_fd(),
        }
    }

    /// The error the socket holds, if any (`SO_ERROR`), taken: a reset by
    /// the peer after its FIN, which reads do not report.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Socket::Tcp(socket) => socket.take_error(),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.take_error(),
        }
    }

    /// Shuts down the reading or writing half, or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.shutdown(how),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.shutdown(how),
        }
    }
}

impl Read for Socket {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(target_os = "linux")]
        return rustix::io::read(self.fd(), buf).map_err(io::Error::from);
        #[cfg(not(target_os = "linux"))]
        match self {
            Socket::Tcp(socket) => socket.read(buf),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.read(buf),
        }
    }
}

impl Write for Socket {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // As the standard library writes to sockets: a peer that has gone
        // is an error, not a SIGPIPE.
        #[cfg(target_os = "linux")]
        return rustix::net::send(self.fd(), buf, rustix::net::SendFlags::NOSIGNAL)
            .map_err(io::Error::from);
        #[cfg(not(target_os = "linux"))]
        match self {
            Socket::Tcp(socket) => socket.write(buf),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.write(buf),
        }
    }

    /// One system call for the records TLS queues: on Linux a `sendmsg`
    /// with `MSG_NOSIGNAL`, as `write` sends (a `writev` to a peer that
    /// has gone raises SIGPIPE in a program that has not ignored it).
    #[cfg(feature = "tls")]
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        #[cfg(target_os = "linux")]
        return rustix::net::sendmsg(
            self.fd(),
            bufs,
            &mut rustix::net::SendAncillaryBuffer::default(),
            rustix::net::SendFlags::NOSIGNAL,
        )
        .map_err(io::Error::from);
        #[cfg(not(target_os = "linux"))]
        match self {
            Socket::Tcp(socket) => socket.write_vectored(bufs),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.flush(),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.flush(),
        }
    }
}

impl Source for Socket {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.register(registry, token, interests),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.reregister(registry, token, interests),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.deregister(registry),
            #[cfg(unix)]
            Socket::Unix(socket) => socket.deregister(registry),
        }
    }
}

#[cfg(unix)]
pub(crate) mod unix {
    //! Listening on a Unix socket.

    use std::io;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    /// A listening Unix socket that removes its file when it goes away, if
    /// the file is still the one it made.
    pub(crate) struct Listener {
        pub socket: mio::net::UnixListener,
        pub path: PathBuf,
        /// The device and inode of the socket file made by `bind`.
        file: (u64, u64),
    }

    impl Listener {
        /// Binds `path`; fails with `AddrInUse` if a file is there.
        pub fn bind(path: &Path) -> io::Result<Listener> {
            let socket = mio::net::UnixListener::bind(path)?;
            let meta = std::fs::symlink_metadata(path)?;
            Ok(Listener {
                socket,
                path: path.to_path_buf(),
                file: (meta.dev(), meta.ino()),
            })
        }
    }

    impl Drop for Listener {
        fn drop(&mut self) {
            // Another server may have replaced the file since: leave that
            // one alone.
            let ours = std::fs::symlink_metadata(&self.path)
                .is_ok_and(|meta| (meta.dev(), meta.ino()) == self.file);
            if ours {
                if let Err(err) = std::fs::remove_file(&self.path) {
                    log::warn!("could not remove {}: {err}", self.path.display());
                }
            }
        }
    }
}
