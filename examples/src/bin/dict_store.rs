//! Serves the `dict_store.DictStore` service in dispatch mode: the entries
//! are split over shards, each owned by a backend thread.
//!
//! Usage: `dict_store [ADDRESS]`, where the address defaults to
//! `127.0.0.1:50051`. Settings from the environment:
//!
//! - `DICT_STORE_SHARDS`: the number of shards, hence of backend threads
//!   (default 4).
//! - `DICT_STORE_QUEUE_SIZE`: how many calls each backend's queue holds
//!   before further calls are answered `RESOURCE_EXHAUSTED` (default
//!   `pajamax::dispatch::DEFAULT_QUEUE_SIZE`, 1024; at most 1,048,576, as
//!   a queue takes room for all its calls when it is made).

use pajamax_examples::dict_store::dict_store_server::DictStoreServer;
use pajamax_examples::dict_store::spawn_backends;
use std::io;

/// The number of shards when `DICT_STORE_SHARDS` is not set.
const DEFAULT_SHARDS: usize = 4;
/// The most calls `DICT_STORE_QUEUE_SIZE` may ask a queue to hold.
const MAX_QUEUE_SIZE: usize = 1 << 20;

/// The positive number the environment variable `name` holds, or `default`
/// when it is not set.
fn env_count(name: &str, default: usize) -> io::Result<usize> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name} must be a positive number, not {text:?}"),
            )),
        },
        Err(err) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name}: {err}"),
        )),
    }
}

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:50051".to_owned());
    let shards = env_count("DICT_STORE_SHARDS", DEFAULT_SHARDS)?;
    let queue_size = env_count(
        "DICT_STORE_QUEUE_SIZE",
        pajamax::dispatch::DEFAULT_QUEUE_SIZE,
    )?;
    if queue_size > MAX_QUEUE_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("DICT_STORE_QUEUE_SIZE must be at most {MAX_QUEUE_SIZE}, not {queue_size}"),
        ));
    }
    let (router, _backends) = spawn_backends(shards, queue_size);
    let builder = pajamax::Server::builder().add_service(DictStoreServer::new(router));
    // Health checking (grpc.health.v1.Health): every service SERVING.
    let (_health, builder) = pajamax_health::serve(builder);
    // Server reflection (grpc.reflection.v1 and v1alpha) for every service above.
    let sets = [
        pajamax_examples::dict_store::FILE_DESCRIPTOR_SET,
        pajamax_health::proto::FILE_DESCRIPTOR_SET,
    ];
    let builder = pajamax_reflection::serve(builder, &sets);
    pajamax_examples::serve_until_signal(builder, &addr)
}
