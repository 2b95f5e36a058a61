//! A key-value store served in dispatch mode.
//!
//! The entries are split over `n` shards by a hash of their key. Each shard
//! is a plain [`HashMap`] owned by one backend thread; the server's workers
//! decode the calls and send them to the thread of their shard through a
//! bounded queue, and the backend answers them. No lock guards the entries.
//!
//! This module holds the generated code of the `dict_store` proto package
//! (the messages, and the server code in [`dict_store_server`]) and what the
//! example adds to it: the [`Shard`], the [`DictStoreRouter`] that picks the
//! shard of a call, and [`spawn_backends`].
//!
//! ```
//! use pajamax_examples::dict_store::{dict_store_server::DictStoreServer, spawn_backends};
//!
//! let (router, backends) = spawn_backends(4, pajamax::dispatch::DEFAULT_QUEUE_SIZE);
//! let server = pajamax::Server::builder()
//!     .workers(1)
//!     .add_service(DictStoreServer::new(router))
//!     .bind("127.0.0.1:0")?;
//! // ... serve calls at server.local_addr() ...
//! server.shutdown();
//! for backend in backends {
//!     // Once the server is gone, the queues close and the backends end.
//!     let shard = backend.join().unwrap();
//!     assert!(shard.is_empty());
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

pajamax::include_proto!("dict_store");

use dict_store_server::{DictStoreCall, DictStoreDispatch, DictStoreRequest, DictStoreShard};
use pajamax::dispatch::{self, Receiver, Sender};
use pajamax::Status;
use std::collections::HashMap;
use std::thread::JoinHandle;

/// The entries of one shard, owned by its backend thread.
///
/// ```
/// use pajamax_examples::dict_store::{dict_store_server::DictStoreShard, Entry, Key, Shard};
///
/// let mut shard = Shard::default();
/// let entry = Entry { key: "x".into(), value: 1.25 };
/// assert_eq!(shard.set(entry).unwrap().old_value, None);
/// assert_eq!(shard.get(Key { key: "x".into() }).unwrap().value, 1.25);
/// assert_eq!(shard.delete(Key { key: "x".into() }).unwrap().value, 1.25);
/// assert!(shard.get(Key { key: "x".into() }).is_err());
/// ```
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Shard {
    entries: HashMap<String, f64>,
}

impl Shard {
    /// How many entries the shard holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the shard holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value stored under `key`.
    pub fn value(&self, key: &str) -> Option<f64> {
        self.entries.get(key).copied()
    }

    /// Serves the calls `queue` brings until every sender is gone, then gives
    /// the shard back.
    pub fn serve(mut self, queue: Receiver<DictStoreCall>) -> Shard {
        for call in queue {
            call.handle(&mut self);
        }
        self
    }
}

fn not_found(key: &str) -> Status {
    Status::not_found(format!("no entry for key {key:?}"))
}

impl DictStoreShard for Shard {
    fn get(&mut self, request: Key) -> Result<Value, Status> {
        match self.entries.get(&request.key) {
            Some(&value) => Ok(Value { value }),
            None => Err(not_found(&request.key)),
        }
    }

    fn set(&mut self, request: Entry) -> Result<SetReply, Status> {
        let old_value = self.entries.insert(request.key, request.value);
        Ok(SetReply { old_value })
    }

    fn delete(&mut self, request: Key) -> Result<Value, Status> {
        match self.entries.remove(&request.key) {
            Some(value) => Ok(Value { value }),
            None => Err(not_found(&request.key)),
        }
    }

    fn list_shard(&mut self, _request: ListShardRequest) -> Result<ListShardReply, Status> {
        let mut entries: Vec<Entry> = self
            .entries
            .iter()
            .map(|(key, &value)| Entry {
                key: key.clone(),
                value,
            })
            .collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        let count = u32::try_from(entries.len())
            .map_err(|_| Status::out_of_range("the shard holds too many entries to count"))?;
        Ok(ListShardReply { count, entries })
    }
}

/// Sends each call to the queue of its shard: by a hash of the key for
/// `Get`, `Set` and `Delete`, and shard `n` modulo the shard count for
/// `ListShard`.
///
/// ```
/// use pajamax_examples::dict_store::DictStoreRouter;
///
/// let (senders, _receivers): (Vec<_>, Vec<_>) =
///     (0..3).map(|_| pajamax::dispatch::channel(8)).unzip();
/// let router = DictStoreRouter::new(senders);
/// assert_eq!(router.shard_count(), 3);
/// assert!(router.shard_of("some key") < 3);
/// assert_eq!(router.shard_of("some key"), router.shard_of("some key"));
/// ```
#[derive(Debug, Clone)]
pub struct DictStoreRouter {
    senders: Vec<Sender<DictStoreCall>>,
}

impl DictStoreRouter {
    /// Routes to `senders`, shard `i` being served through `senders[i]`.
    ///
    /// # Panics
    ///
    /// When `senders` is empty.
    pub fn new(senders: Vec<Sender<DictStoreCall>>) -> DictStoreRouter {
        assert!(!senders.is_empty(), "a dict store needs at least one shard");
        DictStoreRouter { senders }
    }

    /// The number of shards.
    pub fn shard_count(&self) -> usize {
        self.senders.len()
    }

    /// The shard that holds `key`: a 64-bit FNV-1a hash of it, modulo the
    /// shard count. The same key goes to the same shard in every run.
    pub fn shard_of(&self, key: &str) -> usize {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in key.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        // The remainder is below the shard count, which is a usize.
        (hash % self.senders.len() as u64) as usize
    }
}

impl DictStoreDispatch for DictStoreRouter {
    fn dispatch_to(&self, request: &DictStoreRequest) -> &Sender<DictStoreCall> {
        let shard = match request {
            DictStoreRequest::Get(key) | DictStoreRequest::Delete(key) => self.shard_of(&key.key),
            DictStoreRequest::Set(entry) => self.shard_of(&entry.key),
            DictStoreRequest::ListShard(list) => list.shard as usize % self.senders.len(),
        };
        &self.senders[shard]
    }
}

/// Starts `shards` backend threads (at least one), each owning an empty
/// [`Shard`] behind a queue of `queue_size` calls, and gives the router that
/// reaches them with the threads' handles. A backend ends, giving its shard
/// back, once the router and all its clones are dropped.
pub fn spawn_backends(
    shards: usize,
    queue_size: usize,
) -> (DictStoreRouter, Vec<JoinHandle<Shard>>) {
    let (senders, handles) = (0..shards.max(1))
        .map(|index| {
            let (sender, receiver) = dispatch::channel(queue_size);
            let handle = std::thread::Builder::new()
                .name(format!("dict-shard-{index}"))
                .spawn(move || Shard::default().serve(receiver))
                .expect("spawn a dict store backend thread");
            (sender, handle)
        })
        .unzip();
    (DictStoreRouter::new(senders), handles)
}
