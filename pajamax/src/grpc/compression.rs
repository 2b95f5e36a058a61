//! Message compression (gRPC's `grpc-encoding`): gzip, deflate and
//! identity, per message, both ways.
//!
//! A request message with the compressed flag is inflated only when the
//! request named a compression it may use (`grpc-encoding: gzip` or
//! `deflate`), and never past the receive limit: a small message that
//! would inflate to gigabytes (a gzip bomb) is stopped at the limit and
//! answered `RESOURCE_EXHAUSTED`. Answers are compressed when the server or
//! the handler asks for it and the client accepts gzip or deflate
//! (`grpc-accept-encoding`): with the request's own compression if the
//! client accepts it, else gzip, else deflate. Calls without compression
//! take none of these paths.
//!
//! `deflate` is the zlib format (RFC 1950), as gRPC's C core, tonic and
//! HTTP's `Content-Encoding: deflate` take it; gzip is RFC 1952.

use crate::grpc::framing::{PLAIN, PREFIX_LEN};
use crate::grpc::status::Status;
use flate2::read::{MultiGzDecoder, ZlibDecoder};
use flate2::{Compress, Compression, Crc, FlushCompress};
use std::cell::RefCell;
use std::io::Read;

/// A message encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Encoding {
    /// No compression.
    #[default]
    Identity,
    /// gzip (RFC 1952).
    Gzip,
    /// deflate in the zlib format (RFC 1950).
    Deflate,
}

impl Encoding {
    /// The name in `grpc-encoding`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
        }
    }

    /// The encoding a `grpc-encoding` value names, if served.
    pub fn from_name(name: &[u8]) -> Option<Encoding> {
        match name {
            b"identity" => Some(Encoding::Identity),
            b"gzip" => Some(Encoding::Gzip),
            b"deflate" => Some(Encoding::Deflate),
            _ => None,
        }
    }
}

/// The encodings served, as `grpc-accept-encoding` lists them.
pub(crate) const ACCEPTED: &[u8] = b"gzip,deflate,identity";

/// The compressions a client accepts for its answers, from the lists of
/// its `grpc-accept-encoding` fields (identity is always accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Accepts(u8);

impl Accepts {
    const GZIP: u8 = 1;
    const DEFLATE: u8 = 2;

    /// What one `grpc-accept-encoding` value lists.
    pub(crate) fn from_list(value: &[u8]) -> Accepts {
        let mut accepts = 0;
        for name in value.split(|&b| b == b',') {
            match name.trim_ascii() {
                b"gzip" => accepts |= Accepts::GZIP,
                b"deflate" => accepts |= Accepts::DEFLATE,
                _ => {}
            }
        }
        Accepts(accepts)
    }

    /// What this and `other` list together (the list may come split over
    /// several fields).
    pub(crate) fn and(self, other: Accepts) -> Accepts {
        Accepts(self.0 | other.0)
    }

    /// The compression of a compressed answer to a request compressed
    /// with `request`: the same if the client accepts it, else gzip, else
    /// deflate; identity if it accepts neither.
    pub(crate) fn answer(self, request: Encoding) -> Encoding {
        let accepted = |encoding| self.0 & Accepts::bit(encoding) != 0;
        [request, Encoding::Gzip, Encoding::Deflate]
            .into_iter()
            .find(|&encoding| accepted(encoding))
            .unwrap_or(Encoding::Identity)
    }

    fn bit(encoding: Encoding) -> u8 {
        match encoding {
            Encoding::Identity => 0,
            Encoding::Gzip => Accepts::GZIP,
            Encoding::Deflate => Accepts::DEFLATE,
        }
    }
}

/// Inflates the message framed at the start of `framed` (its prefix
/// included), compressed with `encoding`, into `out`, framed again without
/// compression and replacing what `out` held; reads at most `limit` bytes
/// of the message. Every gzip member is inflated, as gzip readers do (RFC
/// 1952 section 2.2).
///
/// # Errors
///
/// `RESOURCE_EXHAUSTED` past `limit` (the rest is not inflated),
/// `INTERNAL` for data that is not of `encoding`.
pub(crate) fn inflate_framed(
    framed: &[u8],
    encoding: Encoding,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), Status> {
    // The prefix of the message framed again holds its length in 32 bits.
    let limit = limit.min(u32::MAX as usize);
    out.clear();
    out.extend_from_slice(&[0; PREFIX_LEN]);
    let compressed = &framed[PREFIX_LEN..];
    let read = match encoding {
        Encoding::Gzip => MultiGzDecoder::new(compressed)
            .take(limit as u64 + 1)
            .read_to_end(out),
        Encoding::Deflate => {
            let mut decoder = ZlibDecoder::new(compressed);
            let read = (&mut decoder).take(limit as u64 + 1).read_to_end(out);
            // Bytes after the zlib stream are an error, as bytes after
            // the last gzip member are, not ignored (unless the limit
            // stopped the reading first).
            match read {
                Ok(_)
                    if out.len() - PREFIX_LEN <= limit
                        && decoder.total_in() != compressed.len() as u64 =>
                {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "bytes after the end of the zlib stream",
                    ))
                }
                read => read,
            }
        }
        // A message flagged compressed in a call without compression is
        // refused before it gets here (`framing::check_prefix`).
        Encoding::Identity => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "flagged compressed without grpc-encoding",
        )),
    };
    read.map_err(|err| Status::internal(format!("invalid {} message: {err}", encoding.as_str())))?;
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

/// Re-frames the framed messages of `framed` compressed with `encoding`
/// (gzip or deflate) into `out` (appended), each with the compressed flag;
/// those marked [`PLAIN`] are copied as they are, flagged uncompressed.
pub(crate) fn deflate_frames(framed: &[u8], encoding: Encoding, out: &mut Vec<u8>) {
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
        if rest[0] == PLAIN || encoding == Encoding::Identity {
            out.push(0);
            out.extend_from_slice(&rest[1..PREFIX_LEN + len]);
            rest = &rest[PREFIX_LEN + len..];
            continue;
        }
        let start = out.len();
        out.extend_from_slice(&[1, 0, 0, 0, 0]);
        compress(message, encoding, out);
        let compressed = (out.len() - start - PREFIX_LEN) as u32;
        out[start + 1..start + PREFIX_LEN].copy_from_slice(&compressed.to_be_bytes());
        rest = &rest[PREFIX_LEN + len..];
    }
}

/// This thread's deflaters (a worker's): raw deflate, which gzip members
/// wrap, and zlib's format, each made at its first use and reset for each
/// message: making one (flate2's `GzEncoder` made one per message) zeroes
/// its whole state, 84 µs for a 40-byte message on the benchmark machine,
/// where resetting it and deflating take 2.7 µs (`docs/decisions.md`).
#[derive(Default)]
struct Deflaters {
    raw: Option<Compress>,
    zlib: Option<Compress>,
}

thread_local! {
    static DEFLATERS: RefCell<Deflaters> = RefCell::new(Deflaters::default());
}

/// gzip's member header (RFC 1952): its magic, deflate, no flags, no time,
/// no extra flags, an unknown system.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// Appends `message` compressed with `encoding` to `out`: as one gzip
/// member (the header, the message deflated, then its CRC-32 and length
/// modulo 2^32, little-endian), or as one zlib stream (whose header and
/// Adler-32 the deflater writes itself).
fn compress(message: &[u8], encoding: Encoding, out: &mut Vec<u8>) {
    DEFLATERS.with(|deflaters| {
        let mut deflaters = deflaters.borrow_mut();
        let gzip = encoding == Encoding::Gzip;
        let deflater = if gzip {
            &mut deflaters.raw
        } else {
            &mut deflaters.zlib
        };
        let deflater = deflater.get_or_insert_with(|| Compress::new(Compression::fast(), !gzip));
        deflater.reset();
        if gzip {
            out.extend_from_slice(&GZIP_HEADER);
        }
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
        if gzip {
            let mut crc = Crc::new();
            crc.update(message);
            out.extend_from_slice(&crc.sum().to_le_bytes());
            out.extend_from_slice(&(message.len() as u32).to_le_bytes());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{GzEncoder, ZlibEncoder};
    use std::io::Write;

    /// The thread's deflaters serve message after message of every size,
    /// in turn, each a whole gzip member or zlib stream that readers of the
    /// format take.
    #[test]
    fn messages_from_the_reused_deflaters_inflate() {
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
            for encoding in [Encoding::Gzip, Encoding::Deflate] {
                let mut out = vec![9];
                compress(message, encoding, &mut out);
                assert_eq!(out[0], 9, "appended");
                let mut inflated = Vec::new();
                if encoding == Encoding::Gzip {
                    MultiGzDecoder::new(&out[1..]).read_to_end(&mut inflated)
                } else {
                    ZlibDecoder::new(&out[1..]).read_to_end(&mut inflated)
                }
                .unwrap();
                assert_eq!(inflated, message, "{encoding:?}, {} bytes", message.len());
            }
        }
    }

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend((message.len() as u32).to_be_bytes());
        out.extend(message);
        out
    }

    #[test]
    fn frames_round_trip_through_gzip_and_deflate() {
        for encoding in [Encoding::Gzip, Encoding::Deflate] {
            let mut input = framed(b"hello hello hello");
            input.extend(framed(b""));
            let mut out = Vec::new();
            deflate_frames(&input, encoding, &mut out);
            assert_eq!(out[0], 1, "flagged compressed");
            let first = u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize;
            let message = &out[5..5 + first];
            match encoding {
                Encoding::Gzip => assert_eq!(&message[..2], &[0x1f, 0x8b], "a gzip member"),
                // CMF: deflate with a 32 KiB window; the header's check.
                _ => assert!(
                    message[0] == 0x78 && u16::from_be_bytes([message[0], message[1]]) % 31 == 0
                ),
            }
            let mut inflated = Vec::new();
            inflate_framed(&out[..5 + first], encoding, 100, &mut inflated).unwrap();
            assert_eq!(inflated, framed(b"hello hello hello"));
            let second = &out[5 + first..];
            assert_eq!(second[0], 1);
            inflate_framed(second, encoding, 100, &mut inflated).unwrap();
            assert_eq!(inflated, framed(b""));
            // Read as the other format, it is not valid.
            let other = if encoding == Encoding::Gzip {
                Encoding::Deflate
            } else {
                Encoding::Gzip
            };
            let err = inflate_framed(&out[..5 + first], other, 100, &mut inflated).unwrap_err();
            assert_eq!(err.code(), crate::Code::Internal, "{other:?}");
            assert!(err.message().contains(other.as_str()), "{err:?}");
            // Bytes after the stream (or the last gzip member) are an
            // error, not ignored.
            let mut trailing = out[..5 + first].to_vec();
            trailing.extend_from_slice(b"more");
            let len = (trailing.len() - 5) as u32;
            trailing[1..5].copy_from_slice(&len.to_be_bytes());
            let err = inflate_framed(&trailing, encoding, 100, &mut inflated).unwrap_err();
            assert_eq!(err.code(), crate::Code::Internal, "{encoding:?}");
        }
    }

    #[test]
    fn messages_marked_plain_stay_uncompressed() {
        let mut input = framed(b"squeeze me squeeze me");
        let mut plain = framed(b"as is");
        plain[0] = PLAIN;
        input.extend(&plain);
        input.extend(framed(b"again again again"));
        let mut out = Vec::new();
        deflate_frames(&input, Encoding::Gzip, &mut out);
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
        inflate_framed(&rest[10..], Encoding::Gzip, 100, &mut inflated).unwrap();
        assert_eq!(inflated, framed(b"again again again"));
    }

    #[test]
    fn gzip_and_deflate_bombs_stop_at_the_limit() {
        // 64 MiB of zeros compress to about 64 KiB.
        let zeros = vec![0u8; 1 << 20];
        let mut gzip = GzEncoder::new(Vec::new(), flate2::Compression::best());
        let mut zlib = ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        for _ in 0..64 {
            gzip.write_all(&zeros).unwrap();
            zlib.write_all(&zeros).unwrap();
        }
        let bombs = [
            (Encoding::Gzip, gzip.finish().unwrap()),
            (Encoding::Deflate, zlib.finish().unwrap()),
        ];
        for (encoding, compressed) in bombs {
            let mut bomb = vec![1, 0, 0, 0, 0];
            bomb.extend(compressed);
            assert!(bomb.len() < 128 << 10);
            let mut out = Vec::new();
            let err = inflate_framed(&bomb, encoding, 4 << 20, &mut out).unwrap_err();
            assert_eq!(err.code(), crate::Code::ResourceExhausted, "{encoding:?}");
            assert!(out.capacity() <= 64 << 10, "the room is given back");
            let mut garbage = vec![1, 0, 0, 0, 8];
            garbage.extend(b"not gzip");
            assert_eq!(
                inflate_framed(&garbage, encoding, 100, &mut out)
                    .unwrap_err()
                    .code(),
                crate::Code::Internal
            );
        }
    }

    /// A limit of `usize::MAX` (no limit) inflates the whole message: the
    /// reader's bound, a byte past the limit, does not wrap to nothing.
    #[test]
    fn the_largest_limit_inflates_the_whole_message() {
        for encoding in [Encoding::Gzip, Encoding::Deflate] {
            let mut compressed = Vec::new();
            deflate_frames(&framed(b"no limit at all"), encoding, &mut compressed);
            let mut out = Vec::new();
            inflate_framed(&compressed, encoding, usize::MAX, &mut out).unwrap();
            assert_eq!(out, framed(b"no limit at all"));
        }
    }

    #[test]
    fn accepted_encodings_are_read_from_lists() {
        let gzip = Accepts::from_list(b"identity, gzip");
        assert_eq!(gzip.answer(Encoding::Identity), Encoding::Gzip);
        assert_eq!(gzip, Accepts::from_list(b"gzip"));
        let deflate = Accepts::from_list(b"deflate,identity");
        assert_eq!(deflate.answer(Encoding::Identity), Encoding::Deflate);
        for none in [b"identity, snappy,zstd", &b"gzipx,xdeflate"[..], b""] {
            assert_eq!(Accepts::from_list(none), Accepts::default());
        }
        assert_eq!(gzip.and(deflate), Accepts::from_list(b" deflate , gzip "));
        assert_eq!(Encoding::from_name(b"gzip"), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_name(b"deflate"), Some(Encoding::Deflate));
        assert_eq!(Encoding::from_name(b"identity"), Some(Encoding::Identity));
        assert_eq!(Encoding::from_name(b"snappy"), None);
        assert_eq!(Encoding::from_name(b"Gzip"), None, "names are lower case");
    }

    /// An answer takes the request's compression if the client accepts
    /// it, else gzip, else deflate.
    #[test]
    fn answers_take_the_requests_compression_then_gzip_then_deflate() {
        let both = Accepts::from_list(b"deflate,gzip");
        let gzip = Accepts::from_list(b"gzip");
        let deflate = Accepts::from_list(b"deflate");
        let none = Accepts::from_list(b"identity");
        for (accepts, request, answer) in [
            (both, Encoding::Identity, Encoding::Gzip),
            (both, Encoding::Gzip, Encoding::Gzip),
            (both, Encoding::Deflate, Encoding::Deflate),
            (gzip, Encoding::Deflate, Encoding::Gzip),
            (deflate, Encoding::Identity, Encoding::Deflate),
            (deflate, Encoding::Gzip, Encoding::Deflate),
            (none, Encoding::Gzip, Encoding::Identity),
            (none, Encoding::Identity, Encoding::Identity),
        ] {
            assert_eq!(accepts.answer(request), answer, "{accepts:?} {request:?}");
        }
    }
}
