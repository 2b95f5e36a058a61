//! The request path of one connection, without sockets: N complex_proto
//! calls as a grpc-go client sends them (HEADERS, then DATA), in one buffer,
//! through `GrpcConnection::recv` with an echo handler, to the answers in
//! the connection's output buffer. Reported per request.
//!
//! Each sample starts from a new connection that has done its handshake
//! (not timed), so the first request's header block is literals and the
//! others are indexed but for the changing `grpc-timeout`.
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
                || connection(&router, &client.handshake),
                |conn| serve(conn, black_box(&client.requests), Instant::now()),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
