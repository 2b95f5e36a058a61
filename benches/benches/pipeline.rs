//! The request path of one connection, without sockets: N complex_proto
//! calls as a grpc-go client sends them (HEADERS, then DATA), in one buffer,
//! through `GrpcConnection::recv` with an echo handler, to the answers in
//! the connection's output buffer. Reported per request.
//!
//! Each sample takes a new connection that has done its handshake and
//! served 64 calls (not timed), as a long-lived connection would have: every
//! header field is indexed but for the changing `grpc-timeout`.
//!
//! Run: `cargo bench -p pajamax-benches --bench pipeline`

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pajamax_benches::pipeline::{client_bytes, connection, router, serve};

fn pipeline(c: &mut Criterion) {
    let router = router();
    let mut g = c.benchmark_group("pipeline_complex_proto");
    for n in [1, 16, 100, 1000] {
        let client = client_bytes(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("{n}_requests"), |b| {
            b.iter_batched_ref(
                || connection(&router, &client),
                |conn| serve(conn, black_box(&client.requests), Instant::now()),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
