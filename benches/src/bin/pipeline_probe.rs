//! Runs the pipeline of `benches/pipeline.rs` ROUNDS times, for counting
//! instructions with callgrind (see `benches/callgrind.sh`) and for timing
//! it by CPU time rather than by the clock.
//!
//! Usage: `pipeline_probe ROUNDS [REQUESTS_PER_ROUND]` (default 100
//! requests). Each round takes a new connection through its handshake and
//! 64 warm-up calls, then serves the requests with
//! `pajamax_benches::pipeline::serve`, the function callgrind is told to
//! count.
//!
//! Then, on Linux, it prints the CPU time per request: the thread's time on
//! a CPU (`/proc/thread-self/schedstat`) over the rounds, less that of as
//! many rounds of new connections, handshakes and warm-ups alone. Time the thread spends
//! preempted is not in it, so it holds on a busy machine where criterion's
//! clock-based figures do not.

use pajamax_benches::pipeline::{client_bytes, connection, router, serve};
use std::time::Instant;

/// Nanoseconds this thread has spent on a CPU, where Linux tells.
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: pipeline_probe ROUNDS [REQUESTS_PER_ROUND]");
    let requests: usize = args.next().map_or(100, |a| a.parse().expect("a number"));
    let client = client_bytes(requests);
    let router = router();
    let now = Instant::now();

    let start = cpu_ns();
    let mut written = 0;
    for _ in 0..rounds {
        let mut conn = connection(&router, &client);
        written += serve(&mut conn, &client.requests, now);
    }
    let middle = cpu_ns();
    for _ in 0..rounds {
        std::hint::black_box(connection(&router, &client));
    }
    let end = cpu_ns();

    println!(
        "{rounds} rounds of {requests} requests ({} bytes each), {written} bytes of answers",
        client.requests.len()
    );
    if let (Some(start), Some(middle), Some(end)) = (start, middle, end) {
        let served = (middle - start).saturating_sub(end - middle);
        let per_request = served as f64 / (rounds * requests) as f64;
        println!("cpu time per request: {per_request:.0} ns");
    }
}
