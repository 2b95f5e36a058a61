//! What the two servers and the load client share: the generated code of
//! `proto/streambench.proto` (for pajamax and for tonic), the server's
//! settings, the payload of an item, and the load's raw client with what it
//! counts.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

pub mod raw_client;

/// pajamax's messages and service trait.
pub mod pajamax_proto {
    include!(concat!(env!("OUT_DIR"), "/pajamax/streambench.rs"));
}

/// tonic's messages, service trait and client.
pub mod tonic_proto {
    include!(concat!(env!("OUT_DIR"), "/tonic/streambench.rs"));
}

/// The most payload bytes an item may be asked to carry.
pub const MAX_SIZE: u32 = 1 << 20;

/// `GRPC_SERVER_CPUS`, which Docker's `--cpus` lets be fractional, rounded
/// up to whole threads (as the grpc_bench servers read it).
pub fn server_cpus() -> usize {
    std::env::var("GRPC_SERVER_CPUS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|cpus| cpus.is_finite() && *cpus > 0.0)
        .map_or(1, |cpus| cpus.ceil() as usize)
}

/// `0.0.0.0:$STREAMING_BENCH_PORT`, port 50061 by default (not grpc_bench's
/// 50051, so that both benches can run on one machine).
pub fn listen_addr() -> String {
    let port = std::env::var("STREAMING_BENCH_PORT").unwrap_or_else(|_| "50061".to_owned());
    format!("0.0.0.0:{port}")
}

/// The payload of an item of `size` bytes.
pub fn payload(size: u32) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

/// What went wrong, over all streams.
#[derive(Default)]
pub struct Faults {
    /// Calls that failed or ended with an error status.
    pub errors: AtomicU64,
    /// Items out of order or of the wrong size.
    pub bad_items: AtomicU64,
    /// `Subscribe` calls that ended OK with fewer or more items than asked;
    /// `Echo` calls that ended OK.
    pub short_calls: AtomicU64,
    /// The first fault, as printed.
    pub first: Mutex<Option<String>>,
}

impl Faults {
    /// Counts a fault in `counter`; the first one is printed.
    pub fn note(&self, counter: &AtomicU64, what: String) {
        counter.fetch_add(1, Relaxed);
        let mut first = self.first.lock().unwrap();
        if first.is_none() {
            eprintln!("stream-load: {what}");
            *first = Some(what);
        }
    }
}

/// Items received by one stream. Only its own task adds to it.
#[derive(Default)]
pub struct Received(pub AtomicU64);

impl Received {
    /// One more item.
    pub fn add_one(&self) {
        self.0.store(self.0.load(Relaxed) + 1, Relaxed);
    }
}
