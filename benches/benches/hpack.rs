//! HPACK: pajamax's codec against the `hpack` crate.
//!
//! - decode of a grpc-go unary request block, first on a connection
//!   (literals with incremental indexing, Huffman coded, fresh decoder);
//! - the same fields once the table is warm (all indexed, one byte each);
//! - literals with incremental indexing on a warm decoder (inserts and
//!   evictions, no fresh table);
//! - plain literals on a full table: insert and evict without Huffman;
//! - encode of the response headers and trailers pajamax sends on every
//!   call, once the encoder's table is warm.
//!
//! Run: `cargo bench -p pajamax-benches --bench hpack`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use pajamax::h2::hpack::{Decoder, Encoder, Indexing};

/// What grpc-go (1.6x) sends for a unary call with a deadline.
const REQUEST: [(&[u8], &[u8]); 8] = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/helloworld.Greeter/SayHello"),
    (b":authority", b"localhost:50051"),
    (b"content-type", b"application/grpc"),
    (b"user-agent", b"grpc-go/1.64.0"),
    (b"te", b"trailers"),
    (b"grpc-timeout", b"999857u"),
];

/// The first and the second request block of a connection, encoded the way
/// Go's HPACK encoder does: indexed when the whole field is in a table,
/// otherwise a literal with incremental indexing, the name indexed when
/// possible, Huffman when shorter.
fn request_blocks() -> (Vec<u8>, Vec<u8>) {
    let mut encoder = Encoder::new();
    let mut blocks = [Vec::new(), Vec::new()];
    for block in &mut blocks {
        encoder.begin_block(block);
        for (name, value) in REQUEST {
            encoder.encode(name, value, Indexing::Incremental, block);
        }
    }
    let [first, second] = blocks;
    assert!(second.len() == REQUEST.len(), "second block is all indexed");
    (first, second)
}

fn decode(c: &mut Criterion) {
    let (first, second) = request_blocks();

    // Both decoders agree on the blocks.
    let mut ours = Decoder::new(4096);
    let mut theirs = hpack::Decoder::new();
    for block in [&first, &second] {
        let mut a = Vec::new();
        ours.decode(block, |n, v| a.push((n.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(a, theirs.decode(block).unwrap());
        assert_eq!(a.len(), REQUEST.len());
    }

    let mut g = c.benchmark_group("hpack_decode_first_request");
    g.bench_function("pajamax", |b| {
        b.iter_batched_ref(
            || Decoder::new(4096),
            |d| {
                d.decode(black_box(&first), |n, v| {
                    black_box((n, v));
                })
                .unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("hpack_crate", |b| {
        b.iter_batched_ref(
            hpack::Decoder::new,
            |d| {
                d.decode_with_cb(black_box(&first), |n, v| {
                    black_box((&n, &v));
                })
                .unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("hpack_decode_steady_state");
    g.bench_function("pajamax", |b| {
        let mut d = Decoder::new(4096);
        d.decode(&first, |_, _| {}).unwrap();
        b.iter(|| {
            d.decode(black_box(&second), |n, v| {
                black_box((n, v));
            })
            .unwrap()
        })
    });
    g.bench_function("hpack_crate", |b| {
        let mut d = hpack::Decoder::new();
        d.decode_with_cb(&first, |_, _| {}).unwrap();
        b.iter(|| {
            d.decode_with_cb(black_box(&second), |n, v| {
                black_box((&n, &v));
            })
            .unwrap()
        })
    });
    g.finish();

    // Plain (not Huffman) literals with new names on a full table: the
    // dynamic table's insert and evict, with little else.
    let mut raw = Vec::new();
    for i in 0..8u8 {
        let name = format!("x-custom-{i}");
        let value = format!("value-number-{i}-of-eight");
        raw.push(0x40);
        raw.push(name.len() as u8);
        raw.extend_from_slice(name.as_bytes());
        raw.push(value.len() as u8);
        raw.extend_from_slice(value.as_bytes());
    }
    let mut g = c.benchmark_group("hpack_decode_raw_literals_full_table");
    g.bench_function("pajamax", |b| {
        // 256 bytes hold four of these entries: every insertion evicts.
        let mut d = Decoder::new(256);
        b.iter(|| {
            d.decode(black_box(&raw), |n, v| {
                black_box((n, v));
            })
            .unwrap()
        })
    });
    g.bench_function("hpack_crate", |b| {
        let mut d = hpack::Decoder::new();
        d.set_max_table_size(256);
        b.iter(|| {
            d.decode_with_cb(black_box(&raw), |n, v| {
                black_box((&n, &v));
            })
            .unwrap()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("hpack_decode_literals_warm_table");
    g.bench_function("pajamax", |b| {
        let mut d = Decoder::new(4096);
        b.iter(|| {
            d.decode(black_box(&first), |n, v| {
                black_box((n, v));
            })
            .unwrap()
        })
    });
    g.bench_function("hpack_crate", |b| {
        let mut d = hpack::Decoder::new();
        b.iter(|| {
            d.decode_with_cb(black_box(&first), |n, v| {
                black_box((&n, &v));
            })
            .unwrap()
        })
    });
    g.finish();
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("hpack_encode_response");
    g.bench_function("pajamax", |b| {
        let mut e = Encoder::new();
        let mut headers = Vec::with_capacity(64);
        let mut trailers = Vec::with_capacity(64);
        let response = |e: &mut Encoder, headers: &mut Vec<u8>, trailers: &mut Vec<u8>| {
            headers.clear();
            e.begin_block(headers);
            e.encode(b":status", b"200", Indexing::Incremental, headers);
            e.encode(
                b"content-type",
                b"application/grpc",
                Indexing::Incremental,
                headers,
            );
            trailers.clear();
            e.begin_block(trailers);
            e.encode(b"grpc-status", b"0", Indexing::Incremental, trailers);
        };
        response(&mut e, &mut headers, &mut trailers);
        response(&mut e, &mut headers, &mut trailers);
        assert_eq!((headers.len(), trailers.len()), (2, 1));
        b.iter(|| {
            response(&mut e, &mut headers, &mut trailers);
            black_box((&headers, &trailers));
        })
    });
    g.bench_function("hpack_crate", |b| {
        let mut e = hpack::Encoder::new();
        let mut headers = Vec::with_capacity(64);
        let mut trailers = Vec::with_capacity(64);
        let response = |e: &mut hpack::Encoder, headers: &mut Vec<u8>, trailers: &mut Vec<u8>| {
            headers.clear();
            e.encode_header_into((b":status", b"200"), headers).unwrap();
            e.encode_header_into((b"content-type", b"application/grpc"), headers)
                .unwrap();
            trailers.clear();
            e.encode_header_into((b"grpc-status", b"0"), trailers)
                .unwrap();
        };
        // That encoder adds a field to the table only when its name is in
        // no table, so content-type stays a literal on every response.
        let mut d = Decoder::new(4096);
        for _ in 0..2 {
            response(&mut e, &mut headers, &mut trailers);
            let mut n = 0;
            d.decode(&headers, |_, _| n += 1).unwrap();
            d.decode(&trailers, |_, _| n += 1).unwrap();
            assert_eq!(n, 3);
        }
        b.iter(|| {
            response(&mut e, &mut headers, &mut trailers);
            black_box((&headers, &trailers));
        })
    });
    g.finish();
}

criterion_group!(benches, decode, encode);
criterion_main!(benches);
