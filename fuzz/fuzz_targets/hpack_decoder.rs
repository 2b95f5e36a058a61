//! HPACK decoding of arbitrary header blocks, several on one decoder.
//!
//! Input: a control byte (dynamic table size, how fields are re-encoded),
//! optionally a two-byte table size, then length-prefixed blocks (see
//! `Input::chunk`).
//!
//! Asserted:
//! - decoding never panics, whatever the blocks;
//! - differential: while both decoders have accepted every block so far,
//!   a block that both decode gives the same field list from ours and from
//!   the `hpack` crate. Once either rejects a block (or the `hpack` crate
//!   panics, which it does on some inputs) the two tables can no longer be
//!   compared and only ours goes on. hpack 0.3.0's static entry 15 is
//!   `accept-` instead of `accept-charset`, so a block in which ours yields
//!   that name also ends the comparison (the entry sizes differ, so the
//!   tables drift apart from there);
//! - round trip: the fields of every block ours accepts, encoded by our
//!   encoder, decode back to the same list on a second decoder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pajamax::h2::hpack::{Decoder, Encoder, Indexing};
use pajamax_fuzz::{catch_quietly, trace_enabled, Input};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Table sizes picked by the low three bits of the control byte.
const SIZES: [usize; 8] = [4096, 0, 1, 32, 64, 256, 1024, 65_536];

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let control = input.byte();
    let table_size = if control & 0x08 != 0 {
        usize::from(input.u16())
    } else {
        SIZES[usize::from(control & 7)]
    };
    let indexing = (control >> 4) & 3;

    let mut ours = Decoder::new(table_size);
    let mut reference = hpack::Decoder::new();
    reference.set_max_table_size(table_size);
    let mut comparing = true;

    let mut encoder = Encoder::new();
    if control & 0x40 != 0 {
        encoder.set_max_table_size(table_size);
    }
    let mut round_trip = Decoder::new(4096);
    let mut encoded = Vec::new();

    while !input.is_empty() {
        let block = input.chunk();
        let mut fields: Fields = Vec::new();
        let result = ours.decode(block, |name, value| {
            fields.push((name.to_vec(), value.to_vec()))
        });

        if comparing {
            comparing = result.is_ok() && !fields.iter().any(|(name, _)| name == b"accept-charset");
        }
        if comparing {
            match catch_quietly(|| reference.decode(block)) {
                Some(Ok(theirs)) => assert_eq!(
                    fields, theirs,
                    "field lists differ from the hpack crate's for block {block:02x?}"
                ),
                _ => comparing = false,
            }
        }
        if trace_enabled() {
            eprintln!(
                "block of {} bytes: {:?}, {} fields, compared: {comparing}",
                block.len(),
                result,
                fields.len()
            );
        }

        if result.is_ok() {
            encoded.clear();
            encoder.begin_block(&mut encoded);
            for (i, (name, value)) in fields.iter().enumerate() {
                let how = match (indexing, i % 3) {
                    (0, _) | (3, 0) => Indexing::Incremental,
                    (1, _) | (3, 1) => Indexing::None,
                    _ => Indexing::Never,
                };
                encoder.encode(name, value, how, &mut encoded);
            }
            let mut again: Fields = Vec::new();
            round_trip
                .decode(&encoded, |name, value| {
                    again.push((name.to_vec(), value.to_vec()))
                })
                .unwrap_or_else(|err| panic!("our own block does not decode: {err}"));
            assert_eq!(fields, again, "round trip through our encoder");
        }
    }
});
