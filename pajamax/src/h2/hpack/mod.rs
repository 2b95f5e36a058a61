//! HPACK header compression (RFC 7541).
//!
//! A [`Decoder`] turns the peer's header blocks into fields and an
//! [`Encoder`] turns ours into blocks; each keeps the dynamic table of one
//! direction of one connection.
//!
//! - `table`: the static table and the dynamic table (one byte buffer plus
//!   a ring of entry records, so entries are not allocated one by one).
//! - `huffman`: the Huffman code; decoding looks up 12 bits at a time in a
//!   table computed at compile time.
//! - `integer`: prefix-coded integers.
//! - `decoder` and `encoder`: the field representations.
//!
//! Every length the peer sends is checked against what is left of the block
//! before it is used, integers above 2^32 - 1 are rejected, a Huffman string
//! decodes to at most 8/5 of its length, and the dynamic table is bounded by
//! the size we advertise, so peer input can neither panic nor grow memory
//! past those bounds.

mod decoder;
mod encoder;
mod huffman;
mod integer;
mod table;

#[cfg(test)]
mod rfc_vectors;
#[cfg(test)]
mod tests;

pub use decoder::{DecodeError, Decoder};
pub use encoder::{Encoder, Indexing};
pub(crate) use table::{entry_size, ENTRY_OVERHEAD};

/// A dynamic table's entries, newest first, and its size.
#[cfg(test)]
type TableContents = (Vec<(Vec<u8>, Vec<u8>)>, usize);

/// Parses hex digits, ignoring whitespace (for RFC examples).
#[cfg(test)]
fn hex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}
