//! A worker thread: one `mio::Poll`, the connections it owns, and the loop
//! that reads, runs handlers and writes.

use crate::grpc::connection::{GrpcConnection, SpareRoom};
use crate::grpc::remote::{Delivery, Inbox};
use crate::grpc::router::Router;
use crate::h2::frame::Reason;
use crate::h2::Event;
use crate::runtime::readiness::Readiness;
use crate::runtime::slots::SlotList;
use crate::runtime::ticker::Ticker;
#[cfg(feature = "tls")]
use crate::runtime::tls::TlsSession;
use crate::runtime::{RuntimeConfig, Shared, Socket, WorkerCounters};
use mio::{Interest, Poll, Token, Waker};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKER: Token = Token(0);
/// The ticker's events; connections have the tokens from 1 up.
const TICK: Token = Token(usize::MAX);

/// How many reads one connection gets before the others have their turn.
const READS_PER_TURN: usize = 8;

/// How long a closed connection waits for the peer to close after the
/// server's GOAWAY, so the GOAWAY is not lost to a TCP reset.
const LINGER: Duration = Duration::from_secs(1);

/// The most output room a worker keeps across a sweep for the connections
/// it serves (`Worker::spare`).
const SPARE_KEPT: usize = 64 << 10;

/// The most answer parts from other threads a worker keeps room for across
/// a sweep, in its inbox and in its list of deliveries each (a part takes
/// some 150 bytes).
const KEPT_DELIVERIES: usize = 256;

/// A connection handed from the acceptor to a worker.
pub(crate) struct NewConnection {
    pub socket: Socket,
    /// The peer's address; none on a Unix socket.
    pub peer: Option<SocketAddr>,
    /// The server is full: answer with a GOAWAY and close.
    pub reject: bool,
}

/// What a worker waits on, made before its thread starts: its poll, the
/// waker others reach it with, and the ticker of its sweep.
pub(crate) struct Waits {
    pub poll: Poll,
    pub waker: Arc<Waker>,
    pub ticker: Ticker,
}

/// The acceptor's way to reach a worker.
#[derive(Clone)]
pub(crate) struct WorkerHandle {
    pub sender: Sender<NewConnection>,
    pub waker: Arc<Waker>,
}

struct Conn {
    socket: Socket,
    /// The TLS layer between the socket and the codec, on a TLS server.
    #[cfg(feature = "tls")]
    tls: Option<Box<TlsSession>>,
    grpc: GrpcConnection,
    /// Input not processed yet: the start of a frame whose rest has not
    /// come, or what waits while reading is paused. Reads go to the
    /// worker's buffer.
    input: Vec<u8>,
    /// When a read last brought bytes, as of the sweeps: the first sweep
    /// after such a read sets it (a read itself only sets
    /// `read_since_sweep`, and the turn needs no clock for it).
    last_read: Instant,
    /// A read brought bytes since the last sweep.
    read_since_sweep: bool,
    /// When the connection was last seen with a call: open, or opened
    /// since the sweep before (`last_stream` moved).
    last_call: Instant,
    /// The highest stream id the peer had opened at the last sweep.
    last_stream: u32,
    /// The idle timeout's graceful GOAWAY went out: the next idle timeout
    /// closes the connection.
    idle_goaway: bool,
    /// When a sweep first found the connection's graceful GOAWAY waiting
    /// for its PING's answer (`DRAIN_PING_TIMEOUT`).
    draining_since: Option<Instant>,
    /// When the keepalive PING still unanswered was sent.
    ping_sent: Option<Instant>,
    /// When the connection is to be retired (`max_connection_age`).
    retire_at: Option<Instant>,
    /// When it was, for the grace its calls have.
    retired_since: Option<Instant>,
    opened: Instant,
    read_paused: bool,
    /// The peer closed its sending half (readiness said so): reads go on
    /// to the end of the input.
    read_closed: bool,
    /// A read found the end of the peer's input while calls were open:
    /// the connection stays while what it can still send without the peer
    /// goes out (a later read finds the end again, and reads no more).
    read_ended: bool,
    /// Whether a connection error has been counted in the stats.
    error_counted: bool,
    /// When the write side was shut down after the final GOAWAY.
    lingering_since: Option<Instant>,
    /// The shutdown's grace period, the connection's
    /// `max_connection_age_grace` or its second idle timeout ended with
    /// the connection still open: it was closed, and the next sweep drops
    /// it if its output has not left by then (a client that does not read
    /// would otherwise hold it for good).
    forced: bool,
    /// The time this connection is on the worker's timer for.
    timer: Option<Instant>,
    /// Reads that brought bytes, and writes that sent some, since the
    /// worker last counted them.
    reads: u64,
    writes: u64,
}

impl Conn {
    /// A connection opened `now`, served by `grpc`, with nothing read or
    /// sent yet and no age limit.
    fn new(
        socket: Socket,
        #[cfg(feature = "tls")] tls: Option<Box<TlsSession>>,
        grpc: GrpcConnection,
        now: Instant,
    ) -> Conn {
        Conn {
            socket,
            #[cfg(feature = "tls")]
            tls,
            grpc,
            input: Vec::new(),
            last_read: now,
            read_since_sweep: false,
            last_call: now,
            last_stream: 0,
            idle_goaway: false,
            draining_since: None,
            ping_sent: None,
            retire_at: None,
            retired_since: None,
            opened: now,
            read_paused: false,
            read_closed: false,
            read_ended: false,
            error_counted: false,
            lingering_since: None,
            forced: false,
            timer: None,
            reads: 0,
            writes: 0,
        }
    }
}

/// The most any connection of a worker has had, as far as the worker has
/// published it: unwritten output, answer bytes held for the client's
/// windows, request bytes held for calls, open streams.
#[derive(Debug, Default, Clone, Copy)]
struct Peaks {
    output: usize,
    held: usize,
    buffered: usize,
    queued: usize,
    streams: usize,
}

pub(crate) struct Worker {
    index: usize,
    poll: Poll,
    receiver: Receiver<NewConnection>,
    router: Arc<Router>,
    config: RuntimeConfig,
    shared: Arc<Shared>,
    /// This worker's totals, among `shared`'s.
    counters: Arc<WorkerCounters>,
    conns: Vec<Option<Conn>>,
    /// Bumped each time a slot is freed, so an answer for an earlier
    /// connection in the same slot is recognised and dropped.
    generations: Vec<u32>,
    free: Vec<usize>,
    inbox: Arc<Inbox>,
    /// The parts taken from the inbox, as they are handed to their
    /// connections; its room, and the inbox's, past [`KEPT_DELIVERIES`]
    /// parts is dropped at each sweep.
    deliveries: Vec<Delivery>,
    /// Connections to serve in the next turn even without an event.
    again: SlotList,
    /// Connections the last deliveries reached.
    delivered: SlotList,
    /// Where every connection's reads go: a connection holds on to input
    /// only while it is an incomplete frame or reading is paused.
    read_buf: Vec<u8>,
    /// The room of the largest output a connection needed in a turn, lent
    /// to each connection while it is served: one room for the worker
    /// instead of each connection's growing and shrinking in every burst;
    /// and the list every read's h2 events go into. Its output room is
    /// dropped at each sweep when above [`SPARE_KEPT`].
    spare: SpareRoom,
    /// Where TLS connections' reads go before they are decrypted into
    /// `read_buf`; sized at the first TLS read.
    #[cfg(feature = "tls")]
    cipher_buf: Vec<u8>,
    /// When connections need their timeouts handled: (time, slot,
    /// generation). Stale entries are skipped when they come up.
    timers: BinaryHeap<Reverse<(Instant, usize, u32)>>,
    /// The peaks published so far: the shared ones are raised only when
    /// this worker's rise above them.
    published: Peaks,
    /// Brings the sweep once per tick.
    ticker: Ticker,
    shutting_down_since: Option<Instant>,
    /// When the shutdown's grace period ends, until the sweep that ends it.
    grace_ends: Option<Instant>,
    /// The shutdown's grace period was cut short.
    stopping_now: bool,
    /// When the connections' counts of frames that moved no request
    /// forward start again (`UNPRODUCTIVE_WINDOW`).
    unproductive_window_ends: Instant,
}

/// How often a connection's count of frames that moved no request forward
/// (`h2::Config::max_unproductive_frames`) starts again even though no
/// answer completed: a stream that lives for days, and the client's
/// keepalive PINGs on its connection, never reach the limit, while a flood
/// still does within the window.
const UNPRODUCTIVE_WINDOW: Duration = Duration::from_secs(60);

/// How long a graceful GOAWAY waits for the client to answer its PING
/// before the second GOAWAY goes anyway (grpc-go's wait): a client that
/// does not answer can no longer open streams on a connection being
/// retired, shut down or closed for idleness.
const DRAIN_PING_TIMEOUT: Duration = Duration::from_secs(5);

enum Outcome {
    Open,
    Closed,
}

impl Worker {
    pub fn new(
        index: usize,
        router: Arc<Router>,
        config: RuntimeConfig,
        shared: Arc<Shared>,
        receiver: Receiver<NewConnection>,
        waits: Waits,
    ) -> Worker {
        let Waits {
            poll,
            waker,
            ticker,
        } = waits;
        let read_buf = vec![0; read_buffer(&config)];
        let inbox = Inbox::new(move || {
            if let Err(err) = waker.wake() {
                log::error!("could not wake a worker for its answers: {err}");
            }
        });
        Worker {
            index,
            counters: shared.counters[index].clone(),
            poll,
            receiver,
            router,
            config,
            shared,
            conns: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            inbox,
            deliveries: Vec::new(),
            again: SlotList::default(),
            delivered: SlotList::default(),
            read_buf,
            spare: SpareRoom::default(),
            #[cfg(feature = "tls")]
            cipher_buf: Vec::new(),
            timers: BinaryHeap::new(),
            published: Peaks::default(),
            ticker,
            shutting_down_since: None,
            grace_ends: None,
            stopping_now: false,
            unproductive_window_ends: Instant::now() + UNPRODUCTIVE_WINDOW,
        }
    }

    /// A poll and the waker the acceptor uses to reach it.
    pub fn poll_and_waker() -> io::Result<(Poll, Arc<Waker>)> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        Ok((poll, waker))
    }

    /// What a worker with `config` is to wait on.
    pub fn waits(config: &RuntimeConfig) -> io::Result<Waits> {
        let (poll, waker) = Worker::poll_and_waker()?;
        let ticker = Ticker::new(&poll, TICK, sweep_tick(config))?;
        Ok(Waits {
            poll,
            waker,
            ticker,
        })
    }

    /// Serves connections until the shutdown ends.
    // Called once, from the thread's closure: inlined there, the loop keeps
    // the worker in registers (11 instructions per turn when it was not).
    #[inline(always)]
    pub fn run(mut self) {
        let mut events = Readiness::with_capacity(1024);
        // Connections to serve later in the turn: the last turn's `again`,
        // and those timers and other threads bring.
        let mut due = SlotList::default();
        loop {
            let timeout = if self.again.is_empty() {
                self.wait_limit()
            } else {
                Some(Duration::ZERO)
            };
            if let Err(err) = events.wait(&mut self.poll, timeout) {
                if err.kind() != io::ErrorKind::Interrupted {
                    log::error!("worker {}: poll failed: {err}", self.index);
                    break;
                }
            }
            if !self.again.is_empty() {
                self.again.move_to(&mut due);
            }
            // The shutdown's flags are set before the workers are woken: a
            // turn without the waker's event need not look at them.
            let mut woken = false;
            for ready in events.iter() {
                match ready.token {
                    WAKER => {
                        woken = true;
                        self.take_new_connections(Instant::now());
                        self.deliver(&mut due);
                    }
                    TICK => self.ticker.on_event(),
                    Token(t) => {
                        let slot = t - 1;
                        // Served now: not again in this turn.
                        if !due.is_empty() {
                            due.strike(slot);
                        }
                        self.on_ready(slot, ready.read_closed);
                    }
                }
            }
            self.expire_timers(&mut due);
            if !due.is_empty() {
                let mut from = 0;
                while let Some(slot) = due.pop_front(&mut from) {
                    self.on_ready(slot, false);
                }
            }
            if woken {
                self.hear_shutdown();
            }
            if self.shutting_down_since.is_some() {
                if self.shutdown_turn_ends() {
                    break;
                }
            } else if self.ticker.take_due() {
                self.sweep(Instant::now());
            }
        }
    }

    /// After a wake-up: whether the server began to shut down, or is to
    /// stop now.
    fn hear_shutdown(&mut self) {
        if self.shared.is_shutting_down() && self.shutting_down_since.is_none() {
            let now = Instant::now();
            self.begin_shutdown(now);
            // The sweep that ends the grace period comes on time; a grace
            // too long to end at a point in time never ends.
            self.grace_ends = now.checked_add(self.config.shutdown_grace);
        }
        if self.shutting_down_since.is_some() && self.shared.must_stop_now() {
            self.stopping_now = true;
        }
    }

    /// The end of a turn while shutting down: the sweep when the ticker or
    /// the grace period calls for it, and every turn once the shutdown is
    /// cut short (connections are closed and dropped without lingering).
    /// Returns whether the worker is done: no connection left.
    #[cold]
    fn shutdown_turn_ends(&mut self) -> bool {
        let sweep_now = self.stopping_now || self.grace_over();
        if self.ticker.take_due() || sweep_now {
            self.sweep(Instant::now());
        }
        if self.conns.iter().all(Option::is_none) {
            // The acceptor has stopped: a connection it handed over as it
            // did, with no wake-up seen yet, still gets its GOAWAY and its
            // calls answered.
            self.take_new_connections(Instant::now());
            return self.conns.iter().all(Option::is_none);
        }
        false
    }

    /// How long the next wait may last: until the first timer, the sweep
    /// (where the ticker's event does not wake the worker) or the
    /// shutdown's next sweep; none, and no clock read, when nothing waits
    /// for a time. Rounded up, so that a timer is not woken for just before
    /// its time.
    #[inline(always)]
    fn wait_limit(&self) -> Option<Duration> {
        let mut until = self.ticker.wait_limit();
        if let Some(Reverse((at, _, _))) = self.timers.peek() {
            until = earlier(until, at.saturating_duration_since(Instant::now()));
        }
        if self.shutting_down_since.is_some() {
            until = self.grace_limit(until);
        }
        until.map(|until| until + Duration::from_micros(500))
    }

    /// [`Worker::wait_limit`] while shutting down: no later than
    /// `grace_ends`, and no wait at all once the shutdown is cut short
    /// (each turn sweeps).
    #[cold]
    fn grace_limit(&self, until: Option<Duration>) -> Option<Duration> {
        if self.stopping_now {
            return Some(Duration::ZERO);
        }
        match self.grace_ends {
            Some(end) => earlier(until, end.saturating_duration_since(Instant::now())),
            None => until,
        }
    }

    /// Whether the grace period has just ended: its sweep is due (once).
    #[cold]
    fn grace_over(&mut self) -> bool {
        let over = self.grace_ends.is_some_and(|end| Instant::now() >= end);
        if over {
            self.grace_ends = None;
        }
        over
    }

    fn take_new_connections(&mut self, now: Instant) {
        while let Ok(new) = self.receiver.try_recv() {
            if let Err(err) = self.add_connection(new, now) {
                log::warn!("worker {}: could not take a connection: {err}", self.index);
                self.shared.loads[self.index].fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn add_connection(&mut self, new: NewConnection, now: Instant) -> io::Result<()> {
        let mut socket = new.socket;
        socket.prepare()?;
        #[cfg(feature = "tls")]
        let tls = match &self.config.tls {
            Some(reloader) => Some(Box::new(TlsSession::new(reloader.current())?)),
            None => None,
        };
        // The slot is taken only once the socket is registered: a failed
        // registration (the kernel's limit on watched descriptors) loses
        // no slot.
        let slot = self.free.last().copied().unwrap_or(self.conns.len());
        self.poll.registry().register(
            &mut socket,
            Token(slot + 1),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        if self.free.pop().is_none() {
            self.conns.push(None);
            self.generations.push(0);
        }
        let mut grpc = GrpcConnection::new(self.router.clone(), &self.config.grpc, new.peer);
        grpc.set_inbox(
            self.inbox.clone(),
            connection_id(slot, self.generations[slot]),
        );
        if new.reject {
            grpc.close(Reason::NO_ERROR, "too many connections");
        } else if self.shutting_down_since.is_some() {
            // Taken from the listener's queue at shutdown: the calls it
            // already carries are answered.
            grpc.go_away();
        }
        let mut conn = Conn::new(
            socket,
            #[cfg(feature = "tls")]
            tls,
            grpc,
            now,
        );
        // An age too large to be a point in time: for good.
        conn.retire_at = self
            .config
            .max_connection_age
            .and_then(|age| now.checked_add(jittered(age)));
        conn.error_counted = new.reject;
        self.conns[slot] = Some(conn);
        self.again.push(slot);
        Ok(())
    }

    /// Serves the connection in `slot`; `read_closed`: its readiness says
    /// the peer closed its sending half.
    fn on_ready(&mut self, slot: usize, read_closed: bool) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        conn.read_closed |= read_closed;
        conn.grpc.lend_room(&mut self.spare);
        let outcome = serve(
            conn,
            &self.config,
            &mut self.again,
            slot,
            &mut self.read_buf,
            self.spare.events(),
            #[cfg(feature = "tls")]
            &mut self.cipher_buf,
        );
        conn.grpc.reclaim_room(&mut self.spare);
        let counters = &*self.counters;
        add(&counters.answered, conn.grpc.take_answered());
        add(&counters.reads, std::mem::take(&mut conn.reads));
        add(&counters.writes, std::mem::take(&mut conn.writes));
        record_peaks(conn, &mut self.published, &self.shared);
        if let Outcome::Closed = outcome {
            return self.remove(slot);
        }
        if let Some(at) = conn.grpc.poll_timeout() {
            if conn.timer.is_none_or(|armed| at < armed) {
                conn.timer = Some(at);
                self.timers
                    .push(Reverse((at, slot, self.generations[slot])));
                if self.timers.len() > 2 * self.conns.len() + 64 {
                    self.prune_timers();
                }
            }
        }
    }

    /// Drops the timer entries no connection waits for any more (an earlier
    /// time armed since, or the connection gone): a peer that keeps moving
    /// its deadlines earlier cannot grow the heap.
    fn prune_timers(&mut self) {
        let (conns, generations) = (&self.conns, &self.generations);
        self.timers.retain(|Reverse((at, slot, generation))| {
            generations[*slot] == *generation
                && conns[*slot]
                    .as_ref()
                    .is_some_and(|conn| conn.timer == Some(*at))
        });
    }

    /// Hands the connections whose time has come their timeouts, and
    /// queues them to be served.
    fn expire_timers(&mut self, touched: &mut SlotList) {
        if self.timers.is_empty() {
            return;
        }
        let now = Instant::now();
        while let Some(Reverse((at, slot, generation))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            if self.generations[slot] != generation {
                continue;
            }
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            if conn.timer != Some(at) {
                continue;
            }
            conn.timer = None;
            conn.grpc.handle_timeout(now);
            touched.push(slot);
        }
    }

    fn begin_shutdown(&mut self, now: Instant) {
        self.shutting_down_since = Some(now);
        for slot in 0..self.conns.len() {
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.grpc.go_away();
                self.again.push(slot);
            }
        }
    }

    /// Closes idle connections, ends lingering ones, and forces the end of
    /// a shutdown that takes longer than its grace period.
    fn sweep(&mut self, now: Instant) {
        // Once per tick.
        self.spare.trim(SPARE_KEPT);
        if self.deliveries.capacity() > KEPT_DELIVERIES {
            self.deliveries = Vec::new();
        }
        self.inbox.trim(KEPT_DELIVERIES);
        let force = self.stopping_now
            || self
                .shutting_down_since
                .is_some_and(|since| now.duration_since(since) >= self.config.shutdown_grace);
        let forgive = now >= self.unproductive_window_ends;
        if forgive {
            self.unproductive_window_ends = now + UNPRODUCTIVE_WINDOW;
        }
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            if forgive {
                conn.grpc.forgive_unproductive();
            }
            if conn.input.is_empty() && conn.input.capacity() > KEPT_INPUT {
                conn.input = Vec::new();
            }
            conn.grpc.trim_tables();
            if let Some(since) = conn.lingering_since {
                if now.duration_since(since) > LINGER || force {
                    self.remove(slot);
                }
                continue;
            }
            if tls_handshaking(conn) {
                // Nothing can be sent before the handshake ends: a client
                // that stalls in it is dropped.
                if force || now.duration_since(conn.opened) > self.config.handshake_timeout {
                    self.remove(slot);
                }
                continue;
            }
            if conn.grpc.is_draining() {
                let since = *conn.draining_since.get_or_insert(now);
                if now.duration_since(since) >= DRAIN_PING_TIMEOUT {
                    // Its client has not answered the GOAWAY's PING: the
                    // GOAWAY naming the last stream goes anyway.
                    conn.grpc.end_draining();
                    conn.draining_since = None;
                    self.again.push(slot);
                }
            } else {
                conn.draining_since = None;
            }
            if force {
                if conn.forced && output_waits(conn) {
                    // Its client does not take what is left: the shutdown
                    // does not wait for it.
                    self.remove(slot);
                    continue;
                }
                conn.forced = true;
                conn.grpc.close_with_status(
                    &crate::Status::unavailable("the server is shutting down"),
                    "shutdown grace period over",
                );
                self.again.push(slot);
                continue;
            }
            if conn.forced {
                // Closed at the end of its `max_connection_age_grace`, or
                // at its second idle timeout: its client has not taken the
                // last output since.
                if output_waits(conn) {
                    self.remove(slot);
                }
                continue;
            }
            if !conn.grpc.handshake_done()
                && now.duration_since(conn.opened) > self.config.handshake_timeout
            {
                conn.grpc
                    .close(Reason::PROTOCOL_ERROR, "no preface in time");
                self.again.push(slot);
                continue;
            }
            if conn.retire_at.is_some_and(|at| now >= at) {
                conn.retire_at = None;
                conn.retired_since = Some(now);
                conn.grpc.go_away();
                self.again.push(slot);
            }
            if let (Some(since), Some(grace)) =
                (conn.retired_since, self.config.max_connection_age_grace)
            {
                if now.duration_since(since) >= grace {
                    conn.grpc.close_with_status(
                        &crate::Status::unavailable("the connection reached its maximum age"),
                        "max connection age grace period over",
                    );
                    conn.retired_since = None;
                    conn.forced = true;
                    self.again.push(slot);
                    continue;
                }
            }
            if std::mem::take(&mut conn.read_since_sweep) {
                conn.last_read = now;
            }
            if !conn.grpc.is_idle() || conn.grpc.h2().last_peer_stream() != conn.last_stream {
                conn.last_stream = conn.grpc.h2().last_peer_stream();
                conn.last_call = now;
            }
            if self
                .config
                .idle_timeout
                .is_some_and(|limit| now.duration_since(conn.last_call) > limit)
            {
                if conn.idle_goaway {
                    // Still there, and with no call, an idle timeout
                    // after that GOAWAY: its PING went unanswered.
                    conn.grpc.close(Reason::NO_ERROR, "idle timeout");
                    conn.forced = true;
                } else {
                    // The two-step GOAWAY of a shutdown: a call the client
                    // sent before it saw the GOAWAY is still taken and
                    // answered, and the connection closes once the PING is
                    // answered and its calls are done.
                    conn.grpc.go_away();
                    conn.idle_goaway = true;
                    conn.last_call = now;
                }
                self.again.push(slot);
                continue;
            }
            match keepalive(conn, &self.config, now) {
                Keepalive::Nothing => {}
                Keepalive::Ping => {
                    conn.grpc.ping();
                    conn.ping_sent = Some(now);
                    self.again.push(slot);
                }
                Keepalive::Gone => {
                    log::debug!(
                        "worker {}: no answer to a keepalive PING in {:?}: connection dropped",
                        self.index,
                        self.config.keepalive_timeout
                    );
                    self.remove(slot);
                }
            }
        }
    }

    /// Hands the answer parts that came back from other threads to their
    /// connections; each connection touched is then served once, so all
    /// its answers leave in one write.
    fn deliver(&mut self, touched: &mut SlotList) {
        let mut deliveries = std::mem::take(&mut self.deliveries);
        self.inbox.drain(&mut deliveries);
        let mut delivered = std::mem::take(&mut self.delivered);
        for delivery in deliveries.drain(..) {
            let slot = (delivery.connection & u64::from(u32::MAX)) as usize;
            if connection_id(slot, *self.generations.get(slot).unwrap_or(&0)) != delivery.connection
            {
                continue;
            }
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.grpc.deliver(delivery);
                delivered.push(slot);
            }
        }
        let mut from = 0;
        while let Some(slot) = delivered.pop_front(&mut from) {
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.grpc.settle_at(None);
                touched.push(slot);
            }
        }
        self.deliveries = deliveries;
        self.delivered = delivered;
    }

    fn remove(&mut self, slot: usize) {
        if let Some(mut conn) = self.conns[slot].take() {
            self.generations[slot] = self.generations[slot].wrapping_add(1);
            let _ = self.poll.registry().deregister(&mut conn.socket);
            self.free.push(slot);
            self.shared.loads[self.index].fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The id that deferred answers carry: the slot and its generation.
fn connection_id(slot: usize, generation: u32) -> u64 {
    u64::from(generation) << 32 | slot as u64
}

/// Writes what is waiting, reads what is there, runs the requests, writes
/// the answers. Returns whether the connection goes on.
fn serve(
    conn: &mut Conn,
    config: &RuntimeConfig,
    again: &mut SlotList,
    slot: usize,
    buf: &mut Vec<u8>,
    events: &mut Vec<Event>,
    #[cfg(feature = "tls")] cipher: &mut Vec<u8>,
) -> Outcome {
    if flush(conn).is_err() || produce(conn, again, slot).is_err() {
        return Outcome::Closed;
    }
    if conn.read_paused && conn.grpc.output_len() <= config.max_pending_output / 2 {
        conn.read_paused = false;
        // Requests read before the pause may still wait.
        let input = std::mem::take(&mut conn.input);
        match process(conn, &input, config, events) {
            Ok(used) => keep_input(conn, &input[used..]),
            Err(_) => return Outcome::Closed,
        }
    }
    let mut reads = 0;
    while !conn.read_paused && reads < READS_PER_TURN {
        if conn.lingering_since.is_some() {
            return linger(conn, again, slot);
        }
        if conn.grpc.is_closed() && !tls_handshaking(conn) {
            // A TLS connection closed before its handshake ended (one past
            // `max_connections`) reads on: its GOAWAY goes once the
            // handshake is over.
            break;
        }
        reads += 1;
        // The incomplete frame kept from the last read goes first.
        let kept = conn.input.len();
        if kept > 0 {
            if buf.len() < kept + 1024 {
                buf.resize(kept + 1024, 0);
            }
            buf[..kept].copy_from_slice(&conn.input);
            // The room stays for the next incomplete frame (a large message
            // read in pieces leaves one at most reads); the sweep lets go
            // of it once it is not needed.
            conn.input.clear();
        }
        let room = buf.len() - kept;
        #[cfg(feature = "tls")]
        let read = match conn.tls.as_deref_mut() {
            None => conn.socket.read(&mut buf[kept..]).map(|n| (n, n < room)),
            Some(tls) => tls.read(
                &mut conn.socket,
                &mut conn.grpc,
                cipher,
                buf,
                kept,
                &mut conn.writes,
            ),
        };
        #[cfg(not(feature = "tls"))]
        let read = conn.socket.read(&mut buf[kept..]).map(|n| (n, n < room));
        let (n, drained) = match read {
            Ok((0, _)) => {
                // Output that waits can still leave, unless the TLS
                // handshake it waits for can no longer end.
                if (conn.grpc.is_idle() || conn.grpc.is_closed())
                    && (!output_waits(conn) || tls_handshaking(conn))
                {
                    return Outcome::Closed;
                }
                // The peer is done sending, not necessarily reading: the
                // answers it asked for go out as far as they can.
                conn.read_ended = true;
                break;
            }
            Ok(read) => read,
            Err(err) => {
                keep_input(conn, &buf[..kept]);
                match err.kind() {
                    // With the peer's FIN in, a read that brought only TLS
                    // handshake bytes is not the end: no event follows
                    // for the FIN, so the next read has to find it.
                    io::ErrorKind::WouldBlock if !conn.read_closed => break,
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {
                        if reads == READS_PER_TURN {
                            again.push(slot);
                        }
                        continue;
                    }
                    // A TLS error: the alert is sent, the writing half
                    // shut down.
                    #[cfg(feature = "tls")]
                    io::ErrorKind::ConnectionAborted if conn.tls.is_some() => {
                        conn.lingering_since = Some(Instant::now());
                        return linger(conn, again, slot);
                    }
                    _ => return Outcome::Closed,
                }
            }
        };
        conn.reads += 1;
        conn.read_since_sweep = true;
        let filled = kept + n;
        match process(conn, &buf[..filled], config, events) {
            Ok(used) => keep_input(conn, &buf[used..filled]),
            Err(_) => return Outcome::Closed,
        }
        if drained && !conn.read_closed {
            // A short read emptied the socket. With edge-triggered
            // readiness, bytes that arrive from now on raise a new event,
            // so the read that would only say WouldBlock is saved. Not once
            // the peer has closed: its FIN may have come with the bytes
            // just read, and raises no event of its own after them; the
            // next read finds the end.
            break;
        }
        if reads == READS_PER_TURN {
            again.push(slot);
        }
    }
    // What the reads made ready to produce, as far as the socket takes it.
    if produce(conn, again, slot).is_err() {
        return Outcome::Closed;
    }
    if conn.read_ended && after_fin(conn, config) {
        return Outcome::Closed;
    }
    if conn.grpc.is_closed() && !output_waits(conn) && conn.lingering_since.is_none() {
        #[cfg(feature = "tls")]
        if let Some(tls) = conn.tls.as_deref_mut() {
            match tls.close(&mut conn.socket, &mut conn.writes) {
                Ok(true) => {}
                // close_notify goes when the socket takes it.
                Ok(false) => return Outcome::Open,
                Err(_) => return Outcome::Closed,
            }
        }
        let _ = conn.socket.shutdown(Shutdown::Write);
        conn.lingering_since = Some(Instant::now());
        return linger(conn, again, slot);
    }
    Outcome::Open
}

/// What a turn of a connection whose peer has sent its FIN does at its
/// end; returns whether the connection is done. Out of line: inlined, it
/// moved the register use of `serve` for every read (+3 instructions per
/// request at M=1; +1 out of line).
#[cold]
#[inline(never)]
fn after_fin(conn: &mut Conn, config: &RuntimeConfig) -> bool {
    // The peer can no longer open its windows or send: what waits for its
    // windows ends, and once nothing more goes out without it, the
    // connection is done.
    if conn.grpc.end_calls_stuck_on_windows() && flush(conn).is_err() {
        return true;
    }
    if !output_waits(conn)
        && !conn.grpc.wants_to_produce()
        && !conn.grpc.waits_for_time()
        && !conn.grpc.awaits_other_threads()
    {
        return true;
    }
    // Kept for what goes on without the peer. A peer that is gone (its
    // process ended, its kernel sent the FIN) answers what comes next with
    // a reset, which reads after the FIN do not report: a PING as the FIN
    // comes (and one every keepalive interval, see `keepalive`) finds out,
    // and the socket's error tells.
    if let Ok(Some(_)) = conn.socket.take_error() {
        return true;
    }
    // Not while output waits: the peer has not taken it, and a peer gone
    // answers that with a reset already.
    if conn.ping_sent.is_none() && config.keepalive_interval.is_some() && !output_waits(conn) {
        conn.grpc.ping();
        conn.ping_sent = Some(Instant::now());
        return flush(conn).is_err();
    }
    false
}

/// Runs every complete request in `input` and writes the answers: once at
/// the end, or earlier whenever the output passes its limit. If the socket
/// does not take it, reading pauses. Returns how much of `input` was used:
/// the rest is an incomplete frame, or waits for the pause to end.
// Inlined into `serve`, its one caller: 28 instructions per read at M=1
// (13 per request at M=100) when it was not.
#[inline(always)]
fn process(
    conn: &mut Conn,
    input: &[u8],
    config: &RuntimeConfig,
    events: &mut Vec<Event>,
) -> io::Result<usize> {
    let mut used = 0;
    // The time of the read, once a batch has read it (for a deadline, or
    // for observers): the later batches of the same read share it, so a
    // call in one of them is timed from the read that brought it.
    let mut read_at = None;
    loop {
        let taken = conn.grpc.recv_at(&input[used..], read_at, events);
        used += taken;
        if conn.grpc.output_len() > config.max_pending_output {
            flush(conn)?;
            if conn.grpc.output_len() > config.max_pending_output {
                conn.read_paused = true;
                return Ok(used);
            }
        }
        if taken == 0 || used == input.len() || conn.grpc.is_closed() {
            flush(conn)?;
            return Ok(used);
        }
        // Another batch of the same read follows.
        read_at = conn.grpc.step_time();
    }
}

/// The most room a connection keeps for input it holds no bytes of, past
/// a sweep.
const KEPT_INPUT: usize = 4 << 10;

/// Keeps `rest`, input not processed, in the connection until it can be.
/// Room above [`KEPT_INPUT`] that holds nothing goes at the next sweep, not
/// at a test after every read.
#[inline(always)]
fn keep_input(conn: &mut Conn, rest: &[u8]) {
    if !rest.is_empty() {
        conn.input.extend_from_slice(rest);
    }
}

/// Pulls the connection's producers while the socket takes what they make;
/// a connection with more to make and a socket still taking it is served
/// again after the others.
#[inline(always)]
fn produce(conn: &mut Conn, again: &mut SlotList, slot: usize) -> io::Result<()> {
    if !conn.grpc.wants_to_produce() {
        return Ok(());
    }
    produce_more(conn, again, slot)
}

fn produce_more(conn: &mut Conn, again: &mut SlotList, slot: usize) -> io::Result<()> {
    for _ in 0..READS_PER_TURN {
        if !conn.grpc.wants_to_produce() || output_waits(conn) {
            return Ok(());
        }
        conn.grpc.produce_at(None);
        flush(conn)?;
    }
    if conn.grpc.wants_to_produce() && !output_waits(conn) {
        again.push(slot);
    }
    Ok(())
}

/// Adds `n` to a counter only this worker writes: a plain load and store,
/// no locked instruction.
#[inline(always)]
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// Raises a peak shared by all workers to `now`, if it rose above what
/// this worker `published` before.
#[inline(always)]
fn raise(global: &AtomicUsize, now: usize, published: &mut usize) {
    if now > *published {
        global.fetch_max(now, Ordering::Relaxed);
        *published = now;
    }
}

/// Folds what the connection holds now into the server's high-water marks.
/// A connection at rest (no stream open, no output waiting) holds no
/// output, held answer bytes or buffered request bytes (they all belong to
/// open streams); request bytes queued for other threads are the
/// exception: they stay queued after their stream is gone (reset by the
/// client in the turn that queued them) until the thread lets go of them.
fn record_peaks(conn: &mut Conn, published: &mut Peaks, shared: &Shared) {
    let h2 = conn.grpc.h2();
    // A failed connection is an ending one: one test while it is neither.
    if h2.is_ending()
        && !conn.error_counted
        && h2.error().is_some_and(|e| e.reason != Reason::NO_ERROR)
    {
        conn.error_counted = true;
        shared.connection_errors.fetch_add(1, Ordering::Relaxed);
    }
    let queued = conn.grpc.queued_request_bytes();
    raise(&shared.peak_queued, queued, &mut published.queued);
    let streams = h2.open_streams();
    let output = h2.output_len();
    if streams == 0 && output == 0 {
        return;
    }
    raise(&shared.peak_output, output, &mut published.output);
    raise(&shared.peak_held, h2.held_bytes(), &mut published.held);
    let buffered = conn.grpc.buffered_request_bytes();
    raise(&shared.peak_buffered, buffered, &mut published.buffered);
    raise(&shared.peak_streams, streams, &mut published.streams);
}

/// What keepalive asks of a connection at a sweep.
enum Keepalive {
    Nothing,
    /// Quiet for the keepalive interval: a PING.
    Ping,
    /// Its PING went unanswered for the keepalive timeout: drop it.
    Gone,
}

/// Whether `conn` is due a keepalive PING, or taken for gone. A peer that
/// has closed its sending half cannot answer: what it still waits for ends
/// as the FIN rules say (`serve`), and its PING is only a probe that a peer
/// gone answers with a reset. Nor is an answer read while reading is
/// paused for a client that reads its answers slowly: a dead one there
/// leaves its output unacknowledged, and TCP gives up on it.
fn keepalive(conn: &mut Conn, config: &RuntimeConfig, now: Instant) -> Keepalive {
    let Some(interval) = config.keepalive_interval else {
        return Keepalive::Nothing;
    };
    if conn.read_paused {
        return Keepalive::Nothing;
    }
    if conn.read_ended {
        // No answer can come; the PING is a probe of the peer's socket
        // (`serve`), sent again every interval. Not while output waits:
        // a peer that does not take it would have its output grow by a
        // PING each interval, and one that is gone answers what waits
        // with a reset already.
        if output_waits(conn) {
            return Keepalive::Nothing;
        }
        return match conn.ping_sent {
            Some(sent) if now.duration_since(sent) < interval => Keepalive::Nothing,
            _ => Keepalive::Ping,
        };
    }
    if conn.ping_sent.is_some_and(|sent| conn.last_read > sent) {
        // Answered, or the client spoke since.
        conn.ping_sent = None;
    }
    match conn.ping_sent {
        Some(sent) if now.duration_since(sent) >= config.keepalive_timeout => Keepalive::Gone,
        None if now.duration_since(conn.last_read) >= interval => Keepalive::Ping,
        _ => Keepalive::Nothing,
    }
}

/// The shorter of a wait limit `until` (`None`: no limit) and `left`.
#[inline(always)]
fn earlier(until: Option<Duration>, left: Duration) -> Option<Duration> {
    Some(until.map_or(left, |until| until.min(left)))
}

/// How often a worker sweeps its connections: a quarter of the shortest
/// of the timeouts it checks, between 10 ms and 1 s.
fn sweep_tick(config: &RuntimeConfig) -> Duration {
    let shortest = [
        config.idle_timeout,
        config.keepalive_interval,
        config.keepalive_interval.map(|_| config.keepalive_timeout),
        config.max_connection_age,
        config.max_connection_age_grace,
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(Duration::from_secs(4));
    (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// `age` give or take a tenth, at random: connections opened together are
/// not all retired together. An age whose tenth more no `Duration` holds
/// stays as it is.
fn jittered(age: Duration) -> Duration {
    use std::hash::BuildHasher;
    // A fresh hasher's keys differ each time: enough randomness here.
    let random = std::collections::hash_map::RandomState::new().hash_one(0u8);
    let fraction = (random >> 11) as f64 / (1u64 << 53) as f64;
    Duration::try_from_secs_f64(age.as_secs_f64() * (0.9 + 0.2 * fraction)).unwrap_or(age)
}

/// The size of a worker's read buffer: the configured size, and at least
/// one largest frame and its header, with room.
fn read_buffer(config: &RuntimeConfig) -> usize {
    let frame = config.grpc.h2.max_frame_size as usize + 1024;
    frame.max(config.read_buffer_size)
}

/// Whether the connection's TLS handshake is still going on.
#[inline]
fn tls_handshaking(conn: &Conn) -> bool {
    #[cfg(feature = "tls")]
    if conn.tls.as_ref().is_some_and(|tls| tls.is_handshaking()) {
        return true;
    }
    let _ = conn;
    false
}

/// Whether answer bytes wait for the socket: the codec's output, or
/// records TLS holds.
#[inline]
fn output_waits(conn: &Conn) -> bool {
    #[cfg(feature = "tls")]
    if conn.tls.as_ref().is_some_and(|tls| tls.wants_write()) {
        return true;
    }
    conn.grpc.output_len() != 0
}

/// Writes as much of the output as the socket takes.
#[inline(always)]
fn flush(conn: &mut Conn) -> io::Result<()> {
    if !output_waits(conn) {
        return Ok(());
    }
    flush_waiting(conn)
}

// Inlined where `flush` finds output waiting: 19 instructions per turn when
// it was not.
#[inline(always)]
fn flush_waiting(conn: &mut Conn) -> io::Result<()> {
    #[cfg(feature = "tls")]
    if let Some(tls) = conn.tls.as_deref_mut() {
        return tls.flush(&mut conn.socket, &mut conn.grpc, &mut conn.writes);
    }
    while conn.grpc.output_len() != 0 {
        match conn.socket.write(conn.grpc.output()) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                conn.writes += 1;
                conn.grpc.advance_output(n);
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// After the final GOAWAY: discard input until the peer closes, at most
/// [`READS_PER_TURN`] reads a turn, so that a peer sending on as fast as
/// it can does not keep the worker from its other connections. Input left
/// unread raises no new event if nothing more comes (nor does the FIN
/// behind it): the connection is served again later in the turn, as any
/// other that used up its reads. The sweep lets it go once it has lingered
/// [`LINGER`].
fn linger(conn: &mut Conn, again: &mut SlotList, slot: usize) -> Outcome {
    let mut sink = [0u8; 4096];
    for _ in 0..READS_PER_TURN {
        match conn.socket.read(&mut sink) {
            Ok(0) => return Outcome::Closed,
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Outcome::Open,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Outcome::Closed,
        }
    }
    again.push(slot);
    Outcome::Open
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::grpc::connection::GrpcConfig;

    /// A connection past its final GOAWAY, on `socket`.
    fn lingering(socket: Socket) -> Conn {
        let now = Instant::now();
        let grpc = GrpcConnection::new(Arc::new(Router::new()), &GrpcConfig::default(), None);
        let mut conn = Conn::new(
            socket,
            #[cfg(feature = "tls")]
            None,
            grpc,
            now,
        );
        conn.lingering_since = Some(now);
        conn
    }

    /// One worker without keepalive, idle timeout or age limit.
    fn config() -> RuntimeConfig {
        RuntimeConfig {
            workers: 1,
            pin_workers: false,
            max_connections: 1,
            idle_timeout: None,
            keepalive_interval: None,
            keepalive_timeout: Duration::from_secs(20),
            max_connection_age: None,
            max_connection_age_grace: None,
            handshake_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            max_pending_output: 1 << 20,
            read_buffer_size: 4096,
            grpc: GrpcConfig::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// What `socket` holds now, read to its end or until it would block;
    /// `None` at the end of the peer's input.
    fn unread(socket: &mut Socket) -> Option<usize> {
        let mut sink = [0u8; 4096];
        let mut total = 0;
        loop {
            match socket.read(&mut sink) {
                Ok(0) => return None,
                Ok(n) => total += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Some(total),
                Err(err) => panic!("{err}"),
            }
        }
    }

    /// A peer whose input outlasts a turn's reads: each turn reads at most
    /// `READS_PER_TURN` reads' worth and lists the connection again (its
    /// edge-triggered readiness says nothing more of what is left); a later
    /// turn finds the end behind the rest.
    #[test]
    fn a_lingering_connection_reads_a_bounded_amount_a_turn() {
        let (ours, mut theirs) = mio::net::UnixStream::pair().unwrap();
        let mut conn = lingering(Socket::Unix(ours));
        let burst = vec![0u8; 3 * READS_PER_TURN * 4096];
        let mut sent = 0;
        while sent < burst.len() {
            match theirs.write(&burst[sent..]) {
                Ok(n) => sent += n,
                Err(err) => panic!("the socket took {sent} bytes: {err}"),
            }
        }
        let slot = 3;
        let mut again = SlotList::default();
        assert!(matches!(linger(&mut conn, &mut again, slot), Outcome::Open));
        let mut from = 0;
        assert_eq!(again.pop_front(&mut from), Some(slot), "not served again");
        // Each turn read no more than its share.
        assert!(matches!(linger(&mut conn, &mut again, slot), Outcome::Open));
        let left = unread(&mut conn.socket).expect("the peer is still there");
        assert_eq!(left, burst.len() - 2 * READS_PER_TURN * 4096);

        // Less than a turn's worth, then the end: found in that turn.
        theirs.write_all(&[0; 4096]).unwrap();
        drop(theirs);
        let mut again = SlotList::default();
        assert!(matches!(
            linger(&mut conn, &mut again, slot),
            Outcome::Closed
        ));
    }

    /// A peer past its FIN whose output waits (it does not read) is not
    /// sent a probe PING every keepalive interval: each would be added to
    /// the output it does not take, growing it for as long as it holds the
    /// connection; a peer that is gone answers the waiting output itself.
    /// Once the output has left, the probes go again.
    #[test]
    fn a_half_closed_peer_whose_output_waits_is_not_probed() {
        let (ours, _theirs) = mio::net::UnixStream::pair().unwrap();
        let mut conn = lingering(Socket::Unix(ours));
        conn.lingering_since = None;
        conn.read_ended = true;
        let interval = Duration::from_millis(10);
        let config = RuntimeConfig {
            keepalive_interval: Some(interval),
            keepalive_timeout: interval,
            ..config()
        };
        // The server's SETTINGS wait in the output.
        let waiting = conn.grpc.output_len();
        assert!(waiting > 0);
        let mut now = Instant::now();
        for _ in 0..10 {
            now += interval;
            if let Keepalive::Ping = keepalive(&mut conn, &config, now) {
                conn.grpc.ping();
                conn.ping_sent = Some(now);
            }
        }
        assert_eq!(conn.grpc.output_len(), waiting, "PINGs piled up");
        let output = conn.grpc.output_len();
        conn.grpc.advance_output(output);
        now += interval;
        assert!(matches!(
            keepalive(&mut conn, &config, now),
            Keepalive::Ping
        ));
    }

    /// A worker of [`config`] serving no service, with no connection handed
    /// to it.
    fn worker() -> Worker {
        let config = config();
        let waits = Worker::waits(&config).unwrap();
        let (_sender, receiver) = std::sync::mpsc::channel();
        Worker::new(
            0,
            Arc::new(Router::new()),
            config,
            Arc::new(Shared::new(1)),
            receiver,
            waits,
        )
    }

    /// A burst of answer parts from other threads (many sinks of tiny
    /// messages, many deferred answers at once) grows the worker's inbox
    /// and its list of deliveries: the sweep gives that room back, as it
    /// does the output's, so a worker does not hold its largest burst for
    /// good.
    #[test]
    fn the_sweep_gives_back_the_room_of_a_burst_of_answer_parts() {
        const BURST: usize = 50_000;
        let mut worker = worker();
        // For a connection long gone (slot 0, an earlier generation): the
        // parts are dropped as they are delivered.
        for stream in 0..BURST {
            worker.inbox.push(Delivery {
                connection: connection_id(0, 1),
                stream: 2 * stream as u32 + 1,
                part: crate::grpc::remote::Part::Message(vec![0; 5]),
            });
        }
        let mut due = SlotList::default();
        worker.deliver(&mut due);
        assert!(worker.deliveries.is_empty());
        worker.sweep(Instant::now());
        let kept = worker.deliveries.capacity() + worker.inbox.room();
        assert!(
            kept <= 2 * KEPT_DELIVERIES,
            "room for {kept} parts kept after a burst of {BURST}"
        );
    }

    /// A burst of streams open at once grows the tables of a connection's
    /// open streams and calls; once they have ended, the sweep gives that
    /// room back, so a connection does not hold its largest burst for as
    /// long as it lives.
    #[test]
    fn the_sweep_gives_back_the_room_of_a_burst_of_streams() {
        use pajamax_test_peer::{Client, Frame};
        const BURST: u32 = 3000;
        let mut worker = worker();
        let (ours, _theirs) = mio::net::UnixStream::pair().unwrap();
        let mut conn = lingering(Socket::Unix(ours));
        conn.lingering_since = None;
        // Requests that are not gRPC wait for their body (to answer 415
        // once it ends): all of them open at once, then all ended.
        let mut client = Client::new();
        let mut input = Client::handshake(&[]);
        // Room for every answer's body.
        Frame::window_update(0, 1 << 30).write(&mut input);
        let fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/x"),
            (":authority", "localhost"),
            ("content-type", "text/plain"),
        ];
        for stream in (0..BURST).map(|i| 2 * i + 1) {
            let block = client.block(&fields, pajamax_test_peer::hpack::Indexing::Incremental);
            Frame::headers(stream, &block, false).write(&mut input);
        }
        let now = Instant::now();
        let mut used = 0;
        while used < input.len() {
            used += conn.grpc.recv(&input[used..], now);
        }
        assert_eq!(conn.grpc.open_calls(), BURST as usize);
        let mut ends = Vec::new();
        for stream in (0..BURST).map(|i| 2 * i + 1) {
            Frame::data(stream, b"", true).write(&mut ends);
        }
        let mut used = 0;
        while used < ends.len() {
            used += conn.grpc.recv(&ends[used..], now);
        }
        assert!(conn.grpc.is_idle());
        let (calls, streams) = conn.grpc.table_places();
        assert!(calls >= BURST as usize && streams >= BURST as usize);
        worker.conns.push(Some(conn));
        worker.generations.push(0);
        worker.sweep(now);
        let conn = worker.conns[0].as_ref().expect("kept");
        let (calls, streams) = conn.grpc.table_places();
        assert!(
            calls <= 256 && streams <= 256,
            "places for {calls} calls and {streams} streams kept after a burst of {BURST}"
        );
    }
}
