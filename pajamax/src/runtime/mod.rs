//! Worker threads and the acceptor: the only part of pajamax that does I/O.

pub(crate) mod acceptor;
pub(crate) mod worker;

use crate::grpc::connection::GrpcConfig;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Runtime settings, filled by the [`Builder`](crate::server::Builder).
#[derive(Debug, Clone)]
pub(crate) struct RuntimeConfig {
    pub workers: usize,
    pub pin_workers: bool,
    pub max_connections: usize,
    pub idle_timeout: Option<Duration>,
    pub handshake_timeout: Duration,
    pub shutdown_grace: Duration,
    pub max_pending_output: usize,
    pub read_buffer_size: usize,
    pub grpc: GrpcConfig,
}

/// State shared by the acceptor, the workers and the server handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub shutdown: AtomicBool,
    /// Connections each worker holds now.
    pub loads: Vec<AtomicUsize>,
    /// The most unwritten output one connection has had after a batch.
    pub peak_output: AtomicUsize,
    /// The most response bytes one connection has held for flow control.
    pub peak_held: AtomicUsize,
    /// The most incomplete request bytes one connection has buffered.
    pub peak_buffered: AtomicUsize,
    /// The most streams one connection has had open at once.
    pub peak_streams: AtomicUsize,
    /// Connections closed by the server with a GOAWAY carrying an error.
    pub connection_errors: AtomicUsize,
    /// What each worker has done, published by the worker once per turn
    /// of its loop.
    pub counters: Vec<WorkerCounters>,
}

/// The running totals of one worker.
#[derive(Debug, Default)]
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
            shutdown: AtomicBool::new(false),
            loads: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
            peak_output: AtomicUsize::new(0),
            peak_held: AtomicUsize::new(0),
            peak_buffered: AtomicUsize::new(0),
            peak_streams: AtomicUsize::new(0),
            connection_errors: AtomicUsize::new(0),
            counters: (0..workers).map(|_| WorkerCounters::default()).collect(),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub fn total_connections(&self) -> usize {
        self.loads.iter().map(|l| l.load(Ordering::Relaxed)).sum()
    }

    /// The worker holding the fewest connections.
    pub fn least_loaded(&self) -> usize {
        self.loads
            .iter()
            .enumerate()
            .min_by_key(|(_, load)| load.load(Ordering::Relaxed))
            .map(|(index, _)| index)
            .unwrap_or(0)
    }
}
