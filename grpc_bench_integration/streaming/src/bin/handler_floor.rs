//! The least a server can spend on an `Echo` item: what both servers'
//! `Echo` handlers do with it, and nothing else. Items framed as on the
//! wire (a gRPC prefix, then the message) are decoded one by one from a
//! buffer, each encoded back framed into another, and dropped; with the
//! same prost types and jemalloc as the servers, and no I/O, HTTP/2 or
//! call state. Each round goes through `--batch` items, as a server does
//! with the items of one read.
//!
//! Two ways of decoding a `bytes` field are timed, the cheaper one being
//! the floor: from a slice whose `copy_to_bytes` makes one exact copy (as
//! pajamax decodes), and from a `Bytes` whose `copy_to_bytes` shares the
//! buffer (as tonic decodes from its `BytesMut`; the field's `Vec<u8>` is
//! its one allocation).
//!
//! Usage: handler-floor [--size B] [--batch N] [--seconds S]
//! (defaults 32, 256, 2). Prints the nanoseconds per item of each way;
//! pin it where the servers run (`taskset -c 0`).

use prost::bytes::{Buf, Bytes};
use prost::Message;
use std::time::{Duration, Instant};
use streaming_bench::pajamax_proto::Item;
use streaming_bench::payload;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A slice whose `copy_to_bytes` is one exact allocation and one copy.
struct Slice<'a>(&'a [u8]);

impl Buf for Slice<'_> {
    fn remaining(&self) -> usize {
        self.0.remaining()
    }

    fn chunk(&self) -> &[u8] {
        self.0.chunk()
    }

    fn advance(&mut self, cnt: usize) {
        self.0.advance(cnt);
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        Bytes::copy_from_slice(taken)
    }
}

/// The framed items of one batch.
fn framed_items(size: u32, batch: usize) -> Vec<u8> {
    let mut framed = Vec::new();
    for seq in 0..batch as u64 {
        let item = Item {
            seq: 20_000 + seq,
            payload: payload(size),
        };
        framed.push(0);
        framed.extend_from_slice(&(item.encoded_len() as u32).to_be_bytes());
        item.encode_raw(&mut framed);
    }
    framed
}

/// Appends `item` framed to `out`.
fn encode_framed(item: &Item, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 5]);
    item.encode_raw(out);
    let len = (out.len() - start - 5) as u32;
    out[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
}

/// The length of the message framed at the start of `framed`.
fn message_len(framed: &[u8]) -> usize {
    u32::from_be_bytes(framed[1..5].try_into().expect("4 bytes")) as usize
}

/// Echoes a batch, decoding from slices.
fn echo_from_slices(framed: &[u8], out: &mut Vec<u8>) {
    let mut rest = framed;
    while !rest.is_empty() {
        let len = message_len(rest);
        let mut item = Item::default();
        item.merge(Slice(&rest[5..5 + len])).expect("a valid item");
        encode_framed(&item, out);
        rest = &rest[5 + len..];
    }
}

/// A message's `len` bytes at the start of a shared buffer, as tonic's
/// `DecodeBuf` shows them to prost: `copy_to_bytes` shares the buffer.
struct Window<'a> {
    buf: &'a mut Bytes,
    len: usize,
}

impl Buf for Window<'_> {
    fn remaining(&self) -> usize {
        self.len
    }

    fn chunk(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn advance(&mut self, cnt: usize) {
        assert!(cnt <= self.len);
        self.buf.advance(cnt);
        self.len -= cnt;
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        assert!(len <= self.len);
        self.len -= len;
        self.buf.copy_to_bytes(len)
    }
}

/// Echoes a batch, decoding from shared `Bytes`.
fn echo_from_bytes(framed: &Bytes, out: &mut Vec<u8>) {
    let mut rest = framed.clone();
    while rest.has_remaining() {
        let len = message_len(&rest);
        rest.advance(5);
        let mut item = Item::default();
        let window = Window {
            buf: &mut rest,
            len,
        };
        item.merge(window).expect("a valid item");
        encode_framed(&item, out);
    }
}

/// Nanoseconds per item of `echo` over `seconds`.
fn time(batch: usize, seconds: f64, mut echo: impl FnMut(&mut Vec<u8>)) -> f64 {
    let mut out = Vec::new();
    // Warm up: the allocator's caches, the output's room.
    for _ in 0..1000 {
        out.clear();
        echo(&mut out);
    }
    let until = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < until {
        for _ in 0..100 {
            out.clear();
            echo(&mut out);
            std::hint::black_box(&out);
        }
        rounds += 100;
    }
    start.elapsed().as_nanos() as f64 / (rounds as f64 * batch as f64)
}

fn main() {
    let mut size = 32u32;
    let mut batch = 256usize;
    let mut seconds = 2.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        let ok = match arg.as_str() {
            "--size" => value.parse().map(|v| size = v).is_ok(),
            "--batch" => value.parse().map(|v| batch = v).is_ok(),
            "--seconds" => value.parse().map(|v| seconds = v).is_ok(),
            _ => false,
        };
        if !ok || batch == 0 {
            eprintln!("usage: handler-floor [--size B] [--batch N] [--seconds S]");
            std::process::exit(2);
        }
    }
    let framed = framed_items(size, batch);
    // Both ways give back exactly what came.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    echo_from_slices(&framed, &mut a);
    echo_from_bytes(&Bytes::from(framed.clone()), &mut b);
    assert!(a == framed && b == framed, "the echo changed the items");

    let slices = time(batch, seconds, |out| echo_from_slices(&framed, out));
    let shared = Bytes::from(framed.clone());
    let bytes = time(batch, seconds, |out| echo_from_bytes(&shared, out));
    println!(
        "handler floor: size={size} batch={batch} from_slice_ns={slices:.1} from_bytes_ns={bytes:.1} floor_ns={:.1}",
        slices.min(bytes)
    );
}
