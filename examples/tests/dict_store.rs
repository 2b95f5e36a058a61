//! The dict_store example in dispatch mode, through a tonic client: every
//! operation, many clients at once, and what full or stopped backends answer.

mod common;

use common::{connect, start_listening, unary};
use pajamax::dispatch;
use pajamax_examples::dict_store::dict_store_server::{
    DictStoreAnswer, DictStoreCall, DictStoreRequest, DictStoreServer,
};
use pajamax_examples::dict_store::{
    spawn_backends, DictStoreRouter, Entry, Key, ListShardReply, ListShardRequest, SetReply, Shard,
    Value,
};
use std::collections::BTreeMap;
use std::process::Command;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::task::JoinSet;
use tonic::transport::Channel;
use tonic::Code;

async fn get(channel: &Channel, key: &str) -> Result<f64, tonic::Status> {
    let key = Key { key: key.into() };
    let value: Value = unary(channel.clone(), "/dict_store.DictStore/Get", key).await?;
    Ok(value.value)
}

async fn set(channel: &Channel, key: &str, value: f64) -> Result<Option<f64>, tonic::Status> {
    let entry = Entry {
        key: key.into(),
        value,
    };
    let reply: SetReply = unary(channel.clone(), "/dict_store.DictStore/Set", entry).await?;
    Ok(reply.old_value)
}

async fn delete(channel: &Channel, key: &str) -> Result<f64, tonic::Status> {
    let key = Key { key: key.into() };
    let value: Value = unary(channel.clone(), "/dict_store.DictStore/Delete", key).await?;
    Ok(value.value)
}

async fn list_shard(channel: &Channel, shard: u32) -> Result<ListShardReply, tonic::Status> {
    let request = ListShardRequest { shard };
    unary(channel.clone(), "/dict_store.DictStore/ListShard", request).await
}

/// A dict store server on a free port, with its backend threads.
struct Store {
    server: pajamax::ServerHandle,
    backends: Vec<JoinHandle<Shard>>,
    shards: usize,
}

impl Store {
    fn start(workers: usize, shards: usize, queue_size: usize) -> Store {
        let (router, backends) = spawn_backends(shards, queue_size);
        Store {
            server: serve(workers, router),
            backends,
            shards,
        }
    }

    async fn channel(&self) -> Channel {
        connect(&self.server.local_addr().to_string()).await
    }

    /// Stops the server, then the backends, and gives their shards back.
    async fn stop(self) -> Vec<Shard> {
        let Store {
            server, backends, ..
        } = self;
        tokio::task::spawn_blocking(move || {
            server.shutdown();
            backends
                .into_iter()
                .map(|backend| backend.join().unwrap())
                .collect()
        })
        .await
        .unwrap()
    }
}

fn serve(workers: usize, router: DictStoreRouter) -> pajamax::ServerHandle {
    pajamax::Server::builder()
        .workers(workers)
        .pin_workers(false)
        .add_service(DictStoreServer::new(router))
        .bind("127.0.0.1:0")
        .unwrap()
}

async fn shutdown(server: pajamax::ServerHandle) {
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn every_operation() {
    let store = Store::start(1, 3, dispatch::DEFAULT_QUEUE_SIZE);
    let channel = store.channel().await;

    assert_eq!(set(&channel, "x", 1.25).await.unwrap(), None);
    assert_eq!(get(&channel, "x").await.unwrap(), 1.25);
    assert_eq!(set(&channel, "x", 1.5).await.unwrap(), Some(1.25));
    assert_eq!(get(&channel, "x").await.unwrap(), 1.5);
    assert_eq!(set(&channel, "y", 4.75).await.unwrap(), None);
    assert_eq!(set(&channel, "zero", 0.0).await.unwrap(), None);
    // A stored zero is a previous value too.
    assert_eq!(set(&channel, "zero", -1.0).await.unwrap(), Some(0.0));

    // The shards together hold every entry, each once, ordered by key.
    let mut all = BTreeMap::new();
    for shard in 0..store.shards as u32 {
        let reply = list_shard(&channel, shard).await.unwrap();
        assert_eq!(reply.count as usize, reply.entries.len());
        let keys: Vec<&str> = reply.entries.iter().map(|e| e.key.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
        for entry in reply.entries {
            assert!(all.insert(entry.key, entry.value).is_none());
        }
    }
    let expected: BTreeMap<String, f64> = [("y", 4.75), ("x", 1.5), ("zero", -1.0)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert_eq!(all, expected);

    // A shard number past the count wraps around.
    let wrapped = list_shard(&channel, store.shards as u32 + 1).await.unwrap();
    assert_eq!(wrapped, list_shard(&channel, 1).await.unwrap());

    assert_eq!(delete(&channel, "x").await.unwrap(), 1.5);
    assert_eq!(get(&channel, "x").await.unwrap_err().code(), Code::NotFound);

    let shards = store.stop().await;
    assert_eq!(shards.iter().map(Shard::len).sum::<usize>(), 2);
    assert!(shards.iter().any(|shard| shard.value("y") == Some(4.75)));
}

#[tokio::test]
async fn missing_keys_are_not_found() {
    let store = Store::start(1, 2, 16);
    let channel = store.channel().await;
    let status = get(&channel, "nothing").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("nothing"), "{}", status.message());
    let status = delete(&channel, "nothing").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);

    set(&channel, "once", 1.0).await.unwrap();
    assert_eq!(delete(&channel, "once").await.unwrap(), 1.0);
    let status = delete(&channel, "once").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);

    let empty = list_shard(&channel, 0).await.unwrap();
    assert_eq!((empty.count, empty.entries.len()), (0, 0));
    store.stop().await;
}

#[tokio::test]
async fn a_malformed_request_is_internal() {
    let store = Store::start(1, 1, 16);
    let channel = store.channel().await;
    // A `Key` whose string is not UTF-8, sent through a message with a
    // `bytes` field of the same number.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Raw {
        #[prost(bytes = "vec", tag = "1")]
        key: Vec<u8>,
    }
    let broken = Raw {
        key: vec![0xff, 0xfe],
    };
    let status = unary::<Raw, Value>(channel, "/dict_store.DictStore/Get", broken)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Internal);
    store.stop().await;
}

#[tokio::test]
async fn many_clients_write_and_read_at_once() {
    const CLIENTS: usize = 20;
    const KEYS_PER_CLIENT: usize = 50;
    let store = Store::start(2, 4, dispatch::DEFAULT_QUEUE_SIZE);
    let addr = store.server.local_addr().to_string();

    let mut clients = JoinSet::new();
    for client in 0..CLIENTS {
        let addr = addr.clone();
        clients.spawn(async move {
            // Its own connection.
            let channel = connect(&addr).await;
            for i in 0..KEYS_PER_CLIENT {
                let key = format!("c{client}-k{i}");
                let value = (client * 1000 + i) as f64;
                assert_eq!(set(&channel, &key, value).await.unwrap(), None);
                assert_eq!(get(&channel, &key).await.unwrap(), value);
                // Every other key is written twice.
                if i % 2 == 0 {
                    assert_eq!(set(&channel, &key, value + 0.5).await.unwrap(), Some(value));
                }
            }
            // And every fifth one removed.
            for i in (0..KEYS_PER_CLIENT).step_by(5) {
                delete(&channel, &format!("c{client}-k{i}")).await.unwrap();
            }
        });
    }
    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }

    let mut expected = BTreeMap::new();
    for client in 0..CLIENTS {
        for i in 0..KEYS_PER_CLIENT {
            if i % 5 == 0 {
                continue;
            }
            let value = (client * 1000 + i) as f64 + if i % 2 == 0 { 0.5 } else { 0.0 };
            expected.insert(format!("c{client}-k{i}"), value);
        }
    }

    let channel = store.channel().await;
    let mut listed = BTreeMap::new();
    for shard in 0..store.shards as u32 {
        let reply = list_shard(&channel, shard).await.unwrap();
        assert_eq!(reply.count as usize, reply.entries.len());
        for entry in reply.entries {
            assert!(listed.insert(entry.key, entry.value).is_none());
        }
    }
    assert_eq!(listed, expected);
    for (key, value) in &expected {
        assert_eq!(get(&channel, key).await.unwrap(), *value, "{key}");
    }
    for client in 0..CLIENTS {
        let key = format!("c{client}-k0");
        assert_eq!(
            get(&channel, &key).await.unwrap_err().code(),
            Code::NotFound
        );
    }

    let shards = store.stop().await;
    assert_eq!(shards.iter().map(Shard::len).sum::<usize>(), expected.len());
    // The hash spreads the keys over every shard.
    assert!(shards.iter().all(|shard| !shard.is_empty()));
}

#[tokio::test]
async fn a_full_queue_answers_resource_exhausted() {
    const CALLS: usize = 10;
    // One shard whose queue holds one call, and no backend draining it yet.
    let (sender, receiver) = dispatch::channel::<DictStoreCall>(1);
    let server = serve(1, DictStoreRouter::new(vec![sender]));
    let channel = connect(&server.local_addr().to_string()).await;

    let mut calls = JoinSet::new();
    for i in 0..CALLS {
        let channel = channel.clone();
        calls.spawn(async move { set(&channel, &format!("k{i}"), i as f64).await });
    }
    // One call waits in the queue; every other one is turned away at once.
    for _ in 0..CALLS - 1 {
        let status = tokio::time::timeout(Duration::from_secs(10), calls.join_next())
            .await
            .expect("a full queue answers at once")
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert!(
            status.message().contains("queue is full"),
            "{}",
            status.message()
        );
    }
    assert!(calls.try_join_next().is_none());

    // Once the backend drains its queue, the waiting call is answered.
    let backend = std::thread::spawn(move || Shard::default().serve(receiver));
    let queued = tokio::time::timeout(Duration::from_secs(10), calls.join_next())
        .await
        .expect("the queued call is answered")
        .unwrap()
        .unwrap();
    assert_eq!(queued.unwrap(), None);
    // And calls go through again.
    set(&channel, "later", 1.0).await.unwrap();
    assert_eq!(get(&channel, "later").await.unwrap(), 1.0);

    shutdown(server).await;
    assert_eq!(backend.join().unwrap().len(), 2);
}

#[tokio::test]
async fn a_blocked_backend_fills_its_queue() {
    // The backend takes the first call and blocks until released, so the
    // queue behind it fills up.
    let (sender, receiver) = dispatch::channel::<DictStoreCall>(2);
    let (backend, started_rx, release_tx) = held_backend(receiver);
    let server = serve(1, DictStoreRouter::new(vec![sender]));
    let channel = connect(&server.local_addr().to_string()).await;

    let first = {
        let channel = channel.clone();
        tokio::spawn(async move { set(&channel, "first", 1.0).await })
    };
    tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
        .await
        .unwrap();
    // Two more calls fill the queue; the others are turned away.
    let mut calls = JoinSet::new();
    for i in 0..6 {
        let channel = channel.clone();
        calls.spawn(async move { set(&channel, &format!("k{i}"), 0.0).await });
    }
    let mut exhausted = 0;
    for _ in 0..4 {
        let status = calls.join_next().await.unwrap().unwrap().unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().contains("queue is full"));
        exhausted += 1;
    }
    release_tx.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), None);
    while let Some(done) = calls.join_next().await {
        assert_eq!(done.unwrap().unwrap(), None);
    }
    assert_eq!(exhausted, 4);
    shutdown(server).await;
    assert_eq!(backend.join().unwrap().len(), 3);
}

#[tokio::test]
async fn a_stopped_backend_answers_unavailable() {
    // Two shards; the second one's backend has stopped.
    let (live, live_queue) = dispatch::channel::<DictStoreCall>(16);
    let (stopped, stopped_queue) = dispatch::channel::<DictStoreCall>(16);
    drop(stopped_queue);
    let router = DictStoreRouter::new(vec![live, stopped]);
    let backend = std::thread::spawn(move || Shard::default().serve(live_queue));
    let server = serve(1, router.clone());
    let channel = connect(&server.local_addr().to_string()).await;

    let status = list_shard(&channel, 1).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(status.message().contains("stopped"), "{}", status.message());
    assert_eq!(list_shard(&channel, 0).await.unwrap().count, 0);

    // Keys of the stopped shard are unavailable, the others are served.
    let on = |shard: usize| {
        (0..)
            .map(|i| format!("key{i}"))
            .find(|key| router.shard_of(key) == shard)
            .unwrap()
    };
    let status = set(&channel, &on(1), 1.0).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(set(&channel, &on(0), 1.0).await.unwrap(), None);

    drop(router);
    shutdown(server).await;
    assert_eq!(backend.join().unwrap().len(), 1);
}

#[tokio::test]
async fn a_backend_may_answer_through_the_parts_of_a_call() {
    // A read-only backend: it answers `Get` itself, and fails the rest.
    let (sender, receiver) = dispatch::channel::<DictStoreCall>(16);
    let backend = std::thread::spawn(move || {
        for call in receiver {
            let (request, mut answer) = call.into_parts();
            answer
                .trailers_mut()
                .insert("x-answered-by", "parts")
                .unwrap();
            match (request, answer) {
                (DictStoreRequest::Get(key), DictStoreAnswer::Get(responder)) => {
                    responder.respond(Ok(Value {
                        value: key.key.len() as f64,
                    }));
                }
                (_, answer) => answer.fail(pajamax::Status::failed_precondition("read-only")),
            }
        }
    });
    let server = serve(1, DictStoreRouter::new(vec![sender]));
    let channel = connect(&server.local_addr().to_string()).await;

    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let response = client
        .unary(
            tonic::Request::new(Key {
                key: "five!".into(),
            }),
            "/dict_store.DictStore/Get".parse().unwrap(),
            tonic_prost::ProstCodec::<Key, Value>::default(),
        )
        .await
        .unwrap();
    assert_eq!(response.get_ref().value, 5.0);
    assert_eq!(response.metadata().get("x-answered-by").unwrap(), "parts");

    let status = set(&channel, "x", 1.0).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(status.message(), "read-only");
    assert_eq!(status.metadata().get("x-answered-by").unwrap(), "parts");

    shutdown(server).await;
    backend.join().unwrap();
}

#[tokio::test]
async fn the_binary_serves_with_settings_from_the_environment() {
    let (_server, addr) = start_listening(
        Command::new(env!("CARGO_BIN_EXE_dict_store"))
            .arg("127.0.0.1:0")
            .env("DICT_STORE_SHARDS", "3")
            .env("DICT_STORE_QUEUE_SIZE", "64"),
    );
    let channel = connect(&addr).await;
    assert_eq!(set(&channel, "a", 1.5).await.unwrap(), None);
    assert_eq!(get(&channel, "a").await.unwrap(), 1.5);
    // Three shards: shard 3 is shard 0 again.
    let mut total = 0;
    for shard in 0..3 {
        let reply = list_shard(&channel, shard).await.unwrap();
        assert_eq!(reply, list_shard(&channel, shard + 3).await.unwrap());
        total += reply.count;
    }
    assert_eq!(total, 1);
}

/// The standard error of the binary run with `name` set to `value`,
/// which must make it fail.
fn the_binary_fails_with(name: &str, value: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_dict_store"))
        .arg("127.0.0.1:0")
        .env(name, value)
        .output()
        .unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_binary_rejects_a_bad_setting() {
    let stderr = the_binary_fails_with("DICT_STORE_SHARDS", "none");
    assert!(stderr.contains("DICT_STORE_SHARDS"), "{stderr}");
}

#[test]
fn the_binary_rejects_a_queue_too_large_to_make() {
    // A queue takes room for all its calls when it is made.
    let stderr = the_binary_fails_with("DICT_STORE_QUEUE_SIZE", "18446744073709551615");
    assert!(stderr.contains("DICT_STORE_QUEUE_SIZE"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A backend whose first call waits until `release` gets a message, so
/// the calls after it wait in the queue; `started` tells when it holds the
/// first call.
fn held_backend(
    receiver: dispatch::Receiver<DictStoreCall>,
) -> (
    JoinHandle<Shard>,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::Sender<()>,
) {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let backend = std::thread::spawn(move || {
        let mut shard = Shard::default();
        let mut first = true;
        for call in receiver {
            if first {
                first = false;
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            }
            call.handle(&mut shard);
        }
        shard
    });
    (backend, started_rx, release_tx)
}

#[tokio::test]
async fn a_call_that_ended_in_the_queue_is_not_run() {
    // Shard 0's backend is held on its first call; shard 1 serves.
    let (held, held_queue) = dispatch::channel::<DictStoreCall>(8);
    let (free, free_queue) = dispatch::channel::<DictStoreCall>(8);
    let (backend, started, release) = held_backend(held_queue);
    let free_backend = std::thread::spawn(move || Shard::default().serve(free_queue));
    let router = DictStoreRouter::new(vec![held, free]);
    let on_held = |n: usize| {
        (0..)
            .map(|i| format!("key{i}"))
            .filter(|key| router.shard_of(key) == 0)
            .nth(n)
            .unwrap()
    };
    let (first_key, late_key) = (on_held(0), on_held(1));
    let server = serve(1, router.clone());
    let channel = connect(&server.local_addr().to_string()).await;

    let first = {
        let channel = channel.clone();
        tokio::spawn(async move { set(&channel, &first_key, 1.0).await })
    };
    tokio::task::spawn_blocking(move || started.recv().unwrap())
        .await
        .unwrap();
    // A write whose deadline passes while it waits behind the held call.
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let mut request = tonic::Request::new(Entry {
        key: late_key.clone(),
        value: 2.0,
    });
    request.set_timeout(Duration::from_millis(100));
    let status = client
        .unary(
            request,
            "/dict_store.DictStore/Set".parse().unwrap(),
            tonic_prost::ProstCodec::<Entry, SetReply>::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    // A call the worker reads after the late call's end has been read (its
    // reset, or its deadline) and served by the other shard.
    assert_eq!(list_shard(&channel, 1).await.unwrap().count, 0);

    release.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), None);
    // The write the client was told had failed did not happen.
    let status = get(&channel, &late_key).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    drop(router);
    shutdown(server).await;
    let shard = backend.join().unwrap();
    assert_eq!(shard.value(&late_key), None);
    free_backend.join().unwrap();
}

#[tokio::test]
async fn calls_queued_past_the_shutdown_grace_are_unavailable_and_not_run() {
    const CALLS: usize = 10;
    let (sender, receiver) = dispatch::channel::<DictStoreCall>(3);
    let (backend, started, release) = held_backend(receiver);
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .shutdown_grace(Duration::from_millis(300))
        .add_service(DictStoreServer::new(DictStoreRouter::new(vec![sender])))
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server.local_addr().to_string()).await;

    let mut calls = JoinSet::new();
    {
        let channel = channel.clone();
        calls.spawn(async move { set(&channel, "held", 1.0).await });
    }
    tokio::task::spawn_blocking(move || started.recv().unwrap())
        .await
        .unwrap();
    for i in 0..CALLS {
        let channel = channel.clone();
        calls.spawn(async move { set(&channel, &format!("queued{i}"), 1.0).await });
    }
    // Three calls fill the queue, and the others are turned away.
    for _ in 0..CALLS - 3 {
        let status = calls.join_next().await.unwrap().unwrap().unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    }
    // The shutdown ends every call still waiting once its grace is over,
    // while the backend holds the first one.
    shutdown(server).await;
    while let Some(done) = calls.join_next().await {
        let status = done.unwrap().unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
    // The backend, released, runs none of the calls that were answered.
    release.send(()).unwrap();
    let shard = backend.join().unwrap();
    assert!(shard.is_empty(), "{shard:?}");
}
