//! The acceptor thread: takes new connections and hands each to the worker
//! that holds the fewest.

use crate::runtime::worker::{NewConnection, WorkerHandle};
use crate::runtime::{Listener, Shared};
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const LISTENER: Token = Token(0);
/// Token of the waker that tells the acceptor to stop.
pub(crate) const STOP: Token = Token(1);

pub(crate) struct Acceptor {
    pub poll: Poll,
    pub listener: Listener,
    pub workers: Vec<WorkerHandle>,
    pub shared: Arc<Shared>,
    pub max_connections: usize,
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
        loop {
            if let Err(err) = self.poll.poll(&mut events, None) {
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
            self.accept_all();
        }
    }

    fn accept_all(&mut self) {
        loop {
            let (socket, peer) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    // Out of file descriptors and the like: try again on the
                    // next readiness event rather than spinning.
                    log::warn!("acceptor: accept failed: {err}");
                    return;
                }
            };
            let reject = self.shared.total_connections() >= self.max_connections;
            let index = self.shared.least_loaded();
            self.shared.loads[index].fetch_add(1, Ordering::Relaxed);
            let worker = &self.workers[index];
            let new = NewConnection {
                socket,
                peer,
                reject,
            };
            if worker.sender.send(new).is_err() || worker.waker.wake().is_err() {
                self.shared.loads[index].fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
