//! Running out of file descriptors: a connection the kernel queued while
//! the server could not take it is served once descriptors are free again,
//! and a server that cannot start leaves no thread behind.
//!
//! The tests lower this process's descriptor limit and fill the table, so
//! they have a test binary of their own and run one at a time.
#![cfg(target_os = "linux")]

mod common;

use common::raw::RawPeer;
use std::fs::File;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Held by each test: the descriptor table and its limit are the
/// process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Passes on the acceptor's warnings that `accept` failed.
struct AcceptFailures(Mutex<Sender<String>>);

impl log::Log for AcceptFailures {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let message = record.args().to_string();
        if message.starts_with("acceptor: accept failed") {
            let _ = self.0.lock().unwrap().send(message);
        }
    }

    fn flush(&self) {}
}

/// Warnings that `accept` failed, from the first call on.
fn accept_failures() -> &'static Mutex<Receiver<String>> {
    static FAILURES: OnceLock<Mutex<Receiver<String>>> = OnceLock::new();
    FAILURES.get_or_init(|| {
        let (sender, receiver) = mpsc::channel();
        log::set_boxed_logger(Box::new(AcceptFailures(Mutex::new(sender)))).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
        Mutex::new(receiver)
    })
}

/// The limit on open descriptors lowered to `spare` more than are open
/// now, for as long as it lives.
struct DescriptorLimit(rustix::process::Rlimit);

impl DescriptorLimit {
    fn lower(spare: u64) -> DescriptorLimit {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        let before = getrlimit(Resource::Nofile);
        let current = (open + spare).min(before.maximum.unwrap_or(u64::MAX));
        let lowered = Rlimit {
            current: Some(current),
            maximum: before.maximum,
        };
        setrlimit(Resource::Nofile, lowered).unwrap();
        DescriptorLimit(before)
    }
}

impl Drop for DescriptorLimit {
    fn drop(&mut self) {
        let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, self.0);
    }
}

/// This process's threads whose name begins with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn a_connection_queued_while_descriptors_ran_out_is_served_after() {
    let _alone = one_at_a_time();
    let failures = accept_failures().lock().unwrap();
    while failures.try_recv().is_ok() {}
    let server = common::start(pajamax::Server::builder().workers(1));
    let addr = server.local_addr();
    let _limit = DescriptorLimit::lower(32);
    // Every descriptor taken, but the one the client's socket takes.
    let mut fillers = Vec::new();
    while let Ok(file) = File::open("/dev/null") {
        fillers.push(file);
    }
    assert!(!fillers.is_empty());
    fillers.pop();
    let mut peer = RawPeer::connect(addr);
    // The kernel has completed the connection; the server cannot take it.
    let failure = failures
        .recv_timeout(Duration::from_secs(20))
        .expect("the acceptor found no descriptor for the connection");
    // EMFILE.
    assert!(failure.contains("os error 24"), "{failure}");
    assert_eq!(server.connections(), 0);
    // Descriptors are free again, and no other connection comes to wake
    // the acceptor: the one queued is taken and answered all the same.
    drop(fillers);
    let mut bytes = pajamax_test_peer::frame::handshake(&[]);
    bytes.extend(peer.request(1, "/test.Probe/Echo", &[]));
    peer.send(&bytes);
    let heard = peer.listen(Duration::from_secs(20), |h| !h.statuses.is_empty());
    assert_eq!(heard.statuses, vec![(1, "0".to_string())], "{heard:?}");
    drop(peer);
    server.shutdown();
}

#[test]
fn a_server_that_cannot_start_leaves_no_worker_behind() {
    let _alone = one_at_a_time();
    let before = threads_named("pajamax-worker");
    // Each worker takes two descriptors (its poll and its waker): the
    // descriptors run out after a few workers.
    let limit = DescriptorLimit::lower(16);
    let started = pajamax::Server::builder()
        .workers(64)
        .pin_workers(false)
        .add_service(common::Probe)
        .bind("127.0.0.1:0");
    drop(limit);
    assert!(started.is_err());
    assert_eq!(threads_named("pajamax-worker"), before);
}
