//! Message compression (gRPC's `grpc-encoding`): gzip and identity, per
//! message, both ways.
//!
//! A request message with the compressed flag is inflated only when the
//! request said `grpc-encoding: gzip`, and never past the receive limit: a
//! small message that would inflate to gigabytes (a gzip bomb) is stopped
//! at the limit and answered `RESOURCE_EXHAUSTED`. Answers are compressed
//! when the server or the handler asks for it and the client accepts gzip
//! (`grpc-accept-encoding`). Calls without compression take none of these
//! paths.

use crate::grpc::framing::{PLAIN, PREFIX_LEN};
use crate::grpc::status::Status;
use flate2::read::MultiGzDecoder;
use flate2::{Compress, Compression, Crc, FlushCompress};
use std::cell::RefCell;
use std::io::Read;

/// A message encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    /// No compression.
    #[default]
    Identity,
    /// gzip (RFC 1952).
    Gzip,
}

impl Encoding {
    /// The name in `grpc-encoding`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
        }
    }

    /// The encoding a `grpc-encoding` value names, if served.
    pub fn from_name(name: &[u8]) -> Option<Encoding> {
        match name {
            b"identity" => Some(Encoding::Identity),
            b"gzip" => Some(Encoding::Gzip),
            _ => None,
        }
    }
}

/// The encodings served, as `grpc-accept-encoding` lists them.
pub(crate) const ACCEPTED: &[u8] = b"gzip,identity";

/// Whether a `grpc-accept-encoding` value lists gzip.
pub(crate) fn accepts_gzip(value: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|name| name.trim_ascii() == b"gzip")
}

/// Inflates the compressed message framed at the start of `framed` (its
/// prefix included) into `out`, framed again without compression and
/// replacing what `out` held; reads at most `limit` bytes of the message.
/// Every gzip member is inflated, as gzip readers do (RFC 1952 section 2.2).
///
/// # Errors
///
/// `RESOURCE_EXHAUSTED` past `limit` (the rest is not inflated),
/// `INTERNAL` for data that is not gzip.
pub(crate) fn inflate_framed(framed: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), Status> {
    // The prefix of the message framed again holds its length in 32 bits.
    let limit = limit.min(u32::MAX as usize);
    out.clear();
    out.extend_from_slice(&[0; PREFIX_LEN]);
    let mut decoder = MultiGzDecoder::new(&framed[PREFIX_LEN..]).take(limit as u64 + 1);
    decoder
        .read_to_end(out)
        .map_err(|err| Status::internal(format!("invalid gzip message: {err}")))?;
    let len = out.len() - PREFIX_LEN;
    if len > limit {
        out.clear();
        out.shrink_to(64 << 10);
        return Err(Status::resource_exhausted(format!(
            "request message inflates past the limit of {limit} bytes"
        )));
    }
    out[1..PREFIX_LEN].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// Re-frames the framed messages of `framed` compressed with gzip into
/// `out` (appended), each with the compressed flag; those marked
/// [`PLAIN`] are copied as they are, flagged uncompressed.
pub(crate) fn deflate_frames(framed: &[u8], out: &mut Vec<u8>) {
    let mut rest = framed;
    while rest.len() >= PREFIX_LEN {
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let Some(message) = rest.get(PREFIX_LEN..PREFIX_LEN + len) else {
            // Cut short, which a worker's own framing never leaves
            // (`framing::encode` takes back a message whose encoding
            // panicked); a user's `encode_raw` that writes other than its
            // `encoded_len` (a sink's message) could.
            break;
        };
        if rest[0] == PLAIN {
            out.push(0);
            out.extend_from_slice(&rest[1..PREFIX_LEN + len]);
            rest = &rest[PREFIX_LEN + len..];
            continue;
        }
        let start = out.len();
        out.extend_from_slice(&[1, 0, 0, 0, 0]);
        gzip(message, out);
        let compressed = (out.len() - start - PREFIX_LEN) as u32;
        out[start + 1..start + PREFIX_LEN].copy_from_slice(&compressed.to_be_bytes());
        rest = &rest[PREFIX_LEN + len..];
    }
}

thread_local! {
    /// This thread's deflater (a worker's), made at its first compressed
    /// answer and reset for each message: making one (flate2's
    /// `GzEncoder` made one per message) zeroes its whole state, 84 µs for
    /// a 40-byte message on the benchmark machine, where resetting it and
    /// deflating take 2.7 µs (`docs/decisions.md`).
    static DEFLATER: RefCell<Option<Compress>> = const { RefCell::new(None) };
}

/// gzip's member header (RFC 1952): its magic, deflate, no flags, no time,
/// no extra flags, an unknown system.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// Appends `message` as one gzip member to `out`: the header, the message
/// deflated, then its CRC-32 and length (modulo 2^32), little-endian.
fn gzip(message: &[u8], out: &mut Vec<u8>) {
    DEFLATER.with(|deflater| {
        let mut deflater = deflater.borrow_mut();
        let deflater = deflater.get_or_insert_with(|| Compress::new(Compression::fast(), false));
        deflater.reset();
        out.extend_from_slice(&GZIP_HEADER);
        loop {
            let taken = deflater.total_in() as usize;
            // `compress_vec` writes into the room there is: at least 64
            // bytes each round, so that every round makes progress.
            out.reserve(message.len() - taken + 64);
            let done = deflater
                .compress_vec(&message[taken..], out, FlushCompress::Finish)
                .expect("deflating into memory does not fail");
            if done == flate2::Status::StreamEnd {
                break;
            }
        }
        let mut crc = Crc::new();
        crc.update(message);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(message.len() as u32).to_le_bytes());
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use std::io::Write;

    /// The one deflater of the thread serves message after message of
    /// every size, each a whole gzip member that gzip readers take.
    #[test]
    fn gzip_members_from_the_reused_deflater_inflate() {
        // Bytes that deflate poorly, so that the output needs several
        // rounds of room.
        let mut noise = Vec::with_capacity(1 << 20);
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        while noise.len() < 1 << 20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            noise.extend_from_slice(&x.to_le_bytes());
        }
        for message in [
            &b""[..],
            b"hello hello hello",
            &noise,
            &[7; 40],
            &noise[..1000],
        ] {
            let mut out = vec![9];
            gzip(message, &mut out);
            assert_eq!(out[0], 9, "appended");
            let mut inflated = Vec::new();
            MultiGzDecoder::new(&out[1..])
                .read_to_end(&mut inflated)
                .unwrap();
            assert_eq!(inflated, message, "{} bytes", message.len());
        }
    }

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend((message.len() as u32).to_be_bytes());
        out.extend(message);
        out
    }

    #[test]
    fn frames_round_trip_through_gzip() {
        let mut input = framed(b"hello hello hello");
        input.extend(framed(b""));
        let mut out = Vec::new();
        deflate_frames(&input, &mut out);
        assert_eq!(out[0], 1, "flagged compressed");
        let first = u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize;
        let mut inflated = Vec::new();
        inflate_framed(&out[..5 + first], 100, &mut inflated).unwrap();
        assert_eq!(inflated, framed(b"hello hello hello"));
        let second = &out[5 + first..];
        assert_eq!(second[0], 1);
        inflate_framed(second, 100, &mut inflated).unwrap();
        assert_eq!(inflated, framed(b""));
    }

    #[test]
    fn messages_marked_plain_stay_uncompressed() {
        let mut input = framed(b"squeeze me squeeze me");
        let mut plain = framed(b"as is");
        plain[0] = PLAIN;
        input.extend(&plain);
        input.extend(framed(b"again again again"));
        let mut out = Vec::new();
        deflate_frames(&input, &mut out);
        let first = u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize;
        assert_eq!(out[0], 1);
        let rest = &out[5 + first..];
        assert_eq!(
            &rest[..10],
            &framed(b"as is")[..],
            "flag 0, bytes as they were"
        );
        assert_eq!(rest[10], 1, "the next one is compressed again");
        let mut inflated = Vec::new();
        inflate_framed(&rest[10..], 100, &mut inflated).unwrap();
        assert_eq!(inflated, framed(b"again again again"));
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit() {
        // 64 MiB of zeros compress to about 64 KiB.
        let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            encoder.write_all(&zeros).unwrap();
        }
        let mut bomb = vec![1, 0, 0, 0, 0];
        bomb.extend(encoder.finish().unwrap());
        assert!(bomb.len() < 128 << 10);
        let mut out = Vec::new();
        let err = inflate_framed(&bomb, 4 << 20, &mut out).unwrap_err();
        assert_eq!(err.code(), crate::Code::ResourceExhausted);
        assert!(out.capacity() <= 64 << 10, "the room is given back");
        let mut not_gzip = vec![1, 0, 0, 0, 8];
        not_gzip.extend(b"not gzip");
        assert_eq!(
            inflate_framed(&not_gzip, 100, &mut out).unwrap_err().code(),
            crate::Code::Internal
        );
    }

    /// A limit of `usize::MAX` (no limit) inflates the whole message: the
    /// reader's bound, a byte past the limit, does not wrap to nothing.
    #[test]
    fn the_largest_limit_inflates_the_whole_message() {
        let mut compressed = Vec::new();
        deflate_frames(&framed(b"no limit at all"), &mut compressed);
        let mut out = Vec::new();
        inflate_framed(&compressed, usize::MAX, &mut out).unwrap();
        assert_eq!(out, framed(b"no limit at all"));
    }

    #[test]
    fn accepted_encodings_are_read_from_lists() {
        assert!(accepts_gzip(b"identity, gzip"));
        assert!(accepts_gzip(b"gzip"));
        assert!(!accepts_gzip(b"deflate,identity"));
        assert_eq!(Encoding::from_name(b"gzip"), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_name(b"snappy"), None);
    }
}
