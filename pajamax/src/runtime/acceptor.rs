//! The acceptor thread: takes new connections and hands each to the worker
//! that holds the fewest.

use crate::runtime::worker::{NewConnection, WorkerHandle};
use crate::runtime::{Listener, Shared};
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SendError;
use std::sync::Arc;
use std::time::Duration;

const LISTENER: Token = Token(0);
/// Token of the waker that tells the acceptor to stop.
pub(crate) const STOP: Token = Token(1);

/// The first wait before `accept` is tried again after it failed for want
/// of a resource (file descriptors, memory); each failure in a row doubles
/// it, up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(5);
/// The longest wait between two tries of a failing `accept`.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// How far one round of `accept` went.
enum Accepted {
    /// Every connection queued was taken.
    All,
    /// `accept` failed, not for one connection but for the server (out of
    /// file descriptors and the like): the connections still queued raise
    /// no new readiness event, so the acceptor tries again after a wait.
    Failed,
}

pub(crate) struct Acceptor {
    pub poll: Poll,
    pub listener: Listener,
    pub workers: Vec<WorkerHandle>,
    pub shared: Arc<Shared>,
    pub max_connections: usize,
    /// Workers whose thread has ended (a panic that escaped a handler's
    /// guard, a failed poll): their channel is closed, and no connection
    /// is handed to them any more.
    pub gone: Vec<bool>,
}

impl Acceptor {
    /// A poll for `listener` and the waker that stops the acceptor.
    pub fn prepare(listener: &mut Listener) -> io::Result<(Poll, Arc<Waker>)> {
        let poll = Poll::new()?;
        poll.registry()
            .register(listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), STOP)?);
        Ok((poll, waker))
    }

    pub fn run(mut self) {
        let mut events = Events::with_capacity(64);
        // The wait before `accept` is tried again, while it fails.
        let mut retry: Option<Duration> = None;
        loop {
            if let Err(err) = self.poll.poll(&mut events, retry) {
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                log::error!("acceptor: poll failed: {err}");
                return;
            }
            if self.shared.stop_accepting.load(Ordering::Acquire) {
                // Connections the kernel completed before now are taken
                // and served like the others; the listener closes when
                // this returns, before any GOAWAY goes out, so a client
                // that reconnects when it sees one is refused (and can
                // try another server) rather than reset after sending.
                self.accept_all();
                return;
            }
            retry = match self.accept_all() {
                Accepted::All => None,
                Accepted::Failed => {
                    Some(retry.map_or(RETRY_FIRST, |wait| (wait * 2).min(RETRY_MAX)))
                }
            };
        }
    }

    fn accept_all(&mut self) -> Accepted {
        loop {
            let (socket, peer) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Accepted::All,
                // Interrupted, or a peer that gave up before it was
                // taken: the next one.
                Err(err)
                    if matches!(
                        err.kind(),
                        io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                    ) =>
                {
                    continue
                }
                Err(err) => {
                    // Out of file descriptors and the like: neither spin
                    // nor wait for a readiness event that the connections
                    // already queued will not raise.
                    log::warn!("acceptor: accept failed: {err}");
                    return Accepted::Failed;
                }
            };
            let reject = self.shared.total_connections() >= self.max_connections;
            let mut new = NewConnection {
                socket,
                peer,
                reject,
            };
            // A worker that has ended would otherwise stay the least
            // loaded, and every connection would go to it and be dropped.
            while let Some(index) = self.least_loaded() {
                let load = &self.shared.loads[index];
                load.fetch_add(1, Ordering::Relaxed);
                let worker = &self.workers[index];
                match worker.sender.send(new) {
                    Ok(()) => {
                        // The connection is the worker's now: it takes it
                        // at its next wake-up, whatever wakes it.
                        if let Err(err) = worker.waker.wake() {
                            log::error!("acceptor: could not wake worker {index}: {err}");
                        }
                        break;
                    }
                    Err(SendError(back)) => {
                        // Its connections went with it.
                        load.store(0, Ordering::Relaxed);
                        self.gone[index] = true;
                        log::error!("acceptor: worker {index} has stopped");
                        new = back;
                    }
                }
            }
        }
    }

    /// The worker still running that holds the fewest connections.
    fn least_loaded(&self) -> Option<usize> {
        self.shared
            .loads
            .iter()
            .enumerate()
            .filter(|(index, _)| !self.gone[*index])
            .min_by_key(|(_, load)| load.load(Ordering::Relaxed))
            .map(|(index, _)| index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::worker::Worker;
    use std::sync::mpsc;

    /// A connection made to `acceptor`'s listener, once the acceptor has
    /// taken it.
    fn connect_and_accept(
        acceptor: &mut Acceptor,
        addr: std::net::SocketAddr,
    ) -> std::net::TcpStream {
        let client = std::net::TcpStream::connect(addr).unwrap();
        let mut events = Events::with_capacity(4);
        acceptor.poll.poll(&mut events, None).unwrap();
        acceptor.accept_all();
        client
    }

    #[test]
    fn connections_go_past_a_worker_that_has_ended() {
        let socket = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = socket.local_addr().unwrap();
        let mut listener = Listener::Tcp(socket);
        let (poll, _stop) = Acceptor::prepare(&mut listener).unwrap();
        let shared = Arc::new(Shared::new(2));
        let mut workers = Vec::new();
        let mut receivers = Vec::new();
        for _ in 0..2 {
            let (worker_poll, waker) = Worker::poll_and_waker().unwrap();
            let (sender, receiver) = mpsc::channel();
            workers.push(WorkerHandle { sender, waker });
            receivers.push((receiver, worker_poll));
        }
        // Worker 0's thread has ended (its channel is closed) with
        // connections counted on it.
        drop(receivers.remove(0));
        shared.loads[0].store(3, Ordering::Relaxed);
        shared.loads[1].store(3, Ordering::Relaxed);
        let mut acceptor = Acceptor {
            poll,
            listener,
            workers,
            shared: shared.clone(),
            max_connections: 100,
            gone: vec![false; 2],
        };
        let (alive, _) = &receivers[0];
        let _first = connect_and_accept(&mut acceptor, addr);
        let _second = connect_and_accept(&mut acceptor, addr);
        assert!(alive.try_recv().is_ok_and(|new| !new.reject));
        assert!(alive.try_recv().is_ok_and(|new| !new.reject));
        // The connections the ended worker held are gone with it.
        assert_eq!(shared.total_connections(), 5);
    }
}
