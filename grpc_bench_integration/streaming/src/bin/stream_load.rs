//! Load for the stream bench: C connections carrying S streams in all
//! (stream i on connection i mod C), on one thread: the raw client
//! (`--client raw`, the default; `streaming_bench::raw_client`, HTTP/2 as
//! bytes, far cheaper per message than either server) or tonic's client
//! on a current-thread tokio runtime (`--client tonic`).
//!
//! ```text
//! stream-load --mode subscribe|echo [--addr HOST:PORT] [-c C] [-s S]
//!             [--count N] [--size B] [--window W]
//!             [--warmup SECONDS] [--duration SECONDS] [--server-pid PID]
//!             [--items N] [--client raw|tonic]
//! ```
//!
//! - `subscribe`: each stream calls `Subscribe(count = N, size = B)` again
//!   and again, reading every item.
//! - `echo`: each stream is one `Echo` call that keeps W items in flight:
//!   W are sent first, then one more for each answer.
//!
//! Every item is checked: its number must be the next one of its call and
//! its payload B bytes long; a `Subscribe` call must bring exactly N items,
//! an `Echo` call must not end. After the warm-up, the items received in
//! the measured window are counted, with the CPU time the server (all its
//! threads, `/proc/PID/task/*/schedstat`) and this client spent in it.
//! Prints one line of `key=value`; CPU figures are in CPUs (CPU-seconds
//! per second); `server_system_share` is the kernel's part of the server's
//! CPU time (`/proc/PID/stat` stime over utime + stime, in clock ticks).
//!
//! With `--items N` the load is counted instead of timed: each stream
//! receives exactly N items and stops (a `Subscribe` stream asks for
//! `count` items per call, the last call for what is left; an `Echo`
//! stream sends N items, then ends its half, and its call must end OK
//! after the N answers). No warm-up: the line is printed when every stream
//! is done, with the figures of the whole run.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use streaming_bench::raw_client::{self, Load};
use streaming_bench::tonic_proto::stream_bench_client::StreamBenchClient;
use streaming_bench::tonic_proto::{Ask, Item};
use streaming_bench::{payload, Faults, Received};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::Status;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Subscribe,
    Echo,
}

struct Args {
    mode: Mode,
    addr: String,
    connections: usize,
    streams: usize,
    count: u32,
    size: u32,
    window: usize,
    warmup: f64,
    duration: f64,
    server_pid: Option<u32>,
    items: Option<u64>,
    raw: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: stream-load --mode subscribe|echo [--addr HOST:PORT] [-c C] [-s S] \
         [--count N] [--size B] [--window W] [--warmup SECONDS] [--duration SECONDS] \
         [--server-pid PID] [--items N] [--client raw|tonic]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        mode: Mode::Subscribe,
        addr: "127.0.0.1:50061".to_owned(),
        connections: 1,
        streams: 1,
        count: 10_000,
        size: 32,
        window: 16,
        warmup: 2.0,
        duration: 5.0,
        server_pid: None,
        items: None,
        raw: true,
    };
    let mut mode = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage());
        fn num<T: std::str::FromStr>(v: &str) -> T {
            v.parse().unwrap_or_else(|_| usage())
        }
        match flag.as_str() {
            "--mode" => {
                mode = Some(match value.as_str() {
                    "subscribe" => Mode::Subscribe,
                    "echo" => Mode::Echo,
                    _ => usage(),
                })
            }
            "--addr" => args.addr = value,
            "-c" | "--connections" => args.connections = num(&value),
            "-s" | "--streams" => args.streams = num(&value),
            "--count" => args.count = num(&value),
            "--size" => args.size = num(&value),
            "--window" => args.window = num(&value),
            "--warmup" => args.warmup = num(&value),
            "--duration" => args.duration = num(&value),
            "--server-pid" => args.server_pid = Some(num(&value)),
            "--items" => args.items = Some(num(&value)),
            "--client" => {
                args.raw = match value.as_str() {
                    "raw" => true,
                    "tonic" => false,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    args.mode = mode.unwrap_or_else(|| usage());
    if args.connections == 0
        || args.streams == 0
        || args.window == 0
        || args.count == 0
        || args.items == Some(0)
    {
        usage();
    }
    args
}

fn call_failed(faults: &Faults, status: Status) {
    faults.note(&faults.errors, format!("error: {status:?}"));
}

/// Calls `Subscribe` again and again; with `items`, until that many items
/// came.
async fn subscribe_stream(
    mut client: StreamBenchClient<Channel>,
    count: u32,
    size: u32,
    items_wanted: Option<u64>,
    received: Arc<Received>,
    faults: Arc<Faults>,
) {
    let mut left = items_wanted.unwrap_or(u64::MAX);
    while left > 0 {
        let count = u64::from(count).min(left) as u32;
        let mut items = match client.subscribe(Ask { count, size }).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                call_failed(&faults, status);
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let mut next = 0u64;
        loop {
            match items.message().await {
                Ok(Some(item)) => {
                    if item.seq != next || item.payload.len() != size as usize {
                        faults.note(
                            &faults.bad_items,
                            format!(
                                "subscribe: item {} of {} bytes where item {next} of {size} was due",
                                item.seq,
                                item.payload.len()
                            ),
                        );
                    }
                    next += 1;
                    received.add_one();
                }
                Ok(None) => {
                    left = left.saturating_sub(next);
                    if next != u64::from(count) {
                        faults.note(
                            &faults.short_calls,
                            format!("subscribe: call ended OK after {next} of {count} items"),
                        );
                    }
                    break;
                }
                Err(status) => {
                    call_failed(&faults, status);
                    if items_wanted.is_some() {
                        // A counted run cannot be made whole again.
                        return;
                    }
                    break;
                }
            }
        }
    }
}

/// One `Echo` call with `window` items in flight; with `items`, it sends
/// that many, ends its half, and expects the call to end OK after the last
/// answer.
async fn echo_stream(
    mut client: StreamBenchClient<Channel>,
    window: usize,
    size: u32,
    items_wanted: Option<u64>,
    received: Arc<Received>,
    faults: Arc<Faults>,
) {
    let payload = payload(size);
    let limit = items_wanted.unwrap_or(u64::MAX);
    loop {
        let (requests, outgoing) = tokio::sync::mpsc::unbounded_channel();
        let mut requests = Some(requests);
        let mut sent = 0u64;
        let mut send = |sent: &mut u64| {
            if let Some(sender) = &requests {
                let _ = sender.send(Item {
                    seq: *sent,
                    payload: payload.clone(),
                });
                *sent += 1;
                if *sent == limit {
                    // The last item: the request stream ends after it.
                    requests = None;
                }
            }
        };
        // A tonic client's call returns once the response headers arrive,
        // which a server may send with the first answer: the first items
        // are queued before the call.
        for _ in 0..window {
            send(&mut sent);
        }
        let mut answers = match client.echo(UnboundedReceiverStream::new(outgoing)).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                call_failed(&faults, status);
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let mut next = 0u64;
        loop {
            match answers.message().await {
                Ok(Some(item)) => {
                    if item.seq != next || item.payload.len() != size as usize {
                        faults.note(
                            &faults.bad_items,
                            format!(
                                "echo: item {} of {} bytes where item {next} of {size} was due",
                                item.seq,
                                item.payload.len()
                            ),
                        );
                    }
                    next += 1;
                    received.add_one();
                    send(&mut sent);
                }
                Ok(None) => {
                    if next == limit {
                        return;
                    }
                    faults.note(
                        &faults.short_calls,
                        format!("echo: call ended OK after {next} items"),
                    );
                    break;
                }
                Err(status) => {
                    call_failed(&faults, status);
                    if items_wanted.is_some() {
                        return;
                    }
                    break;
                }
            }
        }
    }
}

/// Nanoseconds on a CPU of all the threads of `pid` ("self" for this
/// process), from `/proc/PID/task/*/schedstat`.
fn cpu_ns(pid: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// utime and stime of `/proc/PID/stat` (all threads of `pid`), in clock
/// ticks.
fn user_system_ticks(pid: &str) -> (u64, u64) {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return (0, 0);
    };
    // The command name may hold spaces: the fields start after the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').map_or(0, |i| i + 2)..]
        .split_whitespace()
        .collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
    (tick(11), tick(12))
}

struct Snapshot {
    at: Instant,
    per_stream: Vec<u64>,
    server_ns: u64,
    client_ns: u64,
    server_ticks: (u64, u64),
}

fn snapshot(received: &[Arc<Received>], server_pid: &Option<String>) -> Snapshot {
    Snapshot {
        at: Instant::now(),
        per_stream: received.iter().map(|r| r.0.load(Relaxed)).collect(),
        server_ns: server_pid.as_deref().map_or(0, cpu_ns),
        client_ns: cpu_ns("self"),
        server_ticks: server_pid.as_deref().map_or((0, 0), user_system_ticks),
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let endpoint = Endpoint::from_shared(format!("http://{}", args.addr))?.tcp_nodelay(true);
    let mut channels = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        channels.push(endpoint.connect().await?);
    }
    let faults = Arc::new(Faults::default());
    let received: Vec<Arc<Received>> = (0..args.streams).map(|_| Arc::default()).collect();
    let server_pid = args.server_pid.map(|pid| pid.to_string());
    // Counted: the whole run, from before the first call.
    let start = args.items.map(|_| snapshot(&received, &server_pid));
    let mut tasks = Vec::with_capacity(args.streams);
    for (i, counter) in received.iter().enumerate() {
        let client = StreamBenchClient::new(channels[i % args.connections].clone());
        let counter = counter.clone();
        let faults = faults.clone();
        tasks.push(match args.mode {
            Mode::Subscribe => tokio::spawn(subscribe_stream(
                client, args.count, args.size, args.items, counter, faults,
            )),
            Mode::Echo => tokio::spawn(echo_stream(
                client,
                args.window,
                args.size,
                args.items,
                counter,
                faults,
            )),
        });
    }

    let (start, end) = match start {
        Some(start) => {
            for task in tasks {
                task.await?;
            }
            (start, snapshot(&received, &server_pid))
        }
        None => {
            tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
            let start = snapshot(&received, &server_pid);
            tokio::time::sleep(Duration::from_secs_f64(args.duration)).await;
            (start, snapshot(&received, &server_pid))
        }
    };

    report(&args, &start, &end, &faults, &server_pid);
    Ok(())
}

/// Prints the run's line: the items of the streams between `start` and
/// `end`, the CPU both sides spent, the faults.
fn report(
    args: &Args,
    start: &Snapshot,
    end: &Snapshot,
    faults: &Faults,
    server_pid: &Option<String>,
) {
    let secs = (end.at - start.at).as_secs_f64();
    let deltas: Vec<u64> = end
        .per_stream
        .iter()
        .zip(&start.per_stream)
        .map(|(e, s)| e - s)
        .collect();
    let messages: u64 = deltas.iter().sum();
    let cpus = |from: u64, to: u64| (to - from) as f64 / 1e9 / secs;
    println!(
        "mode={} c={} s={} count={} size={} window={} secs={secs:.3} messages={messages} \
         rate={:.0} server_cpu={:.4} client_cpu={:.4} errors={} bad_items={} short_calls={} \
         idle_streams={} min_stream={} max_stream={} server_system_share={:.2} client={}",
        match args.mode {
            Mode::Subscribe => "subscribe",
            Mode::Echo => "echo",
        },
        args.connections,
        args.streams,
        args.count,
        args.size,
        args.window,
        messages as f64 / secs,
        if server_pid.is_some() {
            cpus(start.server_ns, end.server_ns)
        } else {
            f64::NAN
        },
        cpus(start.client_ns, end.client_ns),
        faults.errors.load(Relaxed),
        faults.bad_items.load(Relaxed),
        faults.short_calls.load(Relaxed),
        deltas.iter().filter(|&&d| d == 0).count(),
        deltas.iter().min().unwrap_or(&0),
        deltas.iter().max().unwrap_or(&0),
        {
            let user = end.server_ticks.0 - start.server_ticks.0;
            let system = end.server_ticks.1 - start.server_ticks.1;
            system as f64 / (user + system).max(1) as f64
        },
        if args.raw { "raw" } else { "tonic" },
    );
}

/// The load from the raw client, on a thread of its own.
fn run_raw(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let load = Load {
        addr: args.addr.parse()?,
        mode: match args.mode {
            Mode::Subscribe => raw_client::Mode::Subscribe,
            Mode::Echo => raw_client::Mode::Echo,
        },
        connections: args.connections,
        streams: args.streams,
        count: args.count,
        size: args.size,
        window: args.window,
        items: args.items,
    };
    let faults = Arc::new(Faults::default());
    let received: Vec<Arc<Received>> = (0..args.streams).map(|_| Arc::default()).collect();
    let server_pid = args.server_pid.map(|pid| pid.to_string());
    let start = snapshot(&received, &server_pid);
    let load_thread = {
        let (received, faults) = (received.clone(), faults.clone());
        std::thread::spawn(move || {
            if let Err(e) = raw_client::run(&load, &received, &faults) {
                faults.note(&faults.errors, format!("connection failed: {e}"));
            }
        })
    };
    let (start, end) = if args.items.is_some() {
        load_thread.join().map_err(|_| "the load thread panicked")?;
        (start, snapshot(&received, &server_pid))
    } else {
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        let start = snapshot(&received, &server_pid);
        std::thread::sleep(Duration::from_secs_f64(args.duration));
        (start, snapshot(&received, &server_pid))
    };
    report(&args, &start, &end, &faults, &server_pid);
    Ok(())
}

fn main() {
    let args = parse_args();
    if args.raw {
        if let Err(e) = run_raw(args) {
            eprintln!("stream-load: {e}");
            std::process::exit(1);
        }
        // In a timed run the streams are still running.
        std::process::exit(0);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = runtime.block_on(run(args)) {
        eprintln!("stream-load: {e}");
        std::process::exit(1);
    }
    // The streams are still running: leave without waiting for them.
    std::process::exit(0);
}
