//! gRPC's Length-Prefixed-Message framing: a compressed flag, a 32-bit
//! big-endian length, then the message. [`MessageBuf`] gathers a call's
//! request bytes and yields each complete message.

use crate::grpc::status::Status;
use std::ops::Range;

/// Length of the prefix: the compressed flag and the length.
pub(crate) const PREFIX_LEN: usize = 5;

/// The prefix of an uncompressed message of `len` bytes.
pub(crate) fn prefix(len: usize) -> [u8; PREFIX_LEN] {
    let [a, b, c, d] = (len as u32).to_be_bytes();
    [0, a, b, c, d]
}

/// `message` with its prefix, in a buffer of its own of just that size.
pub(crate) fn framed<M: prost::Message>(message: &M) -> Vec<u8> {
    let len = message.encoded_len();
    let mut buf = Vec::with_capacity(PREFIX_LEN + len);
    buf.extend_from_slice(&prefix(len));
    message.encode_raw(&mut buf);
    buf
}

/// The total length (prefix included) of the message that `buf` starts
/// with, once its prefix is there.
pub(crate) fn message_len(buf: &[u8]) -> Option<usize> {
    let prefix = buf.get(..PREFIX_LEN)?;
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    Some(PREFIX_LEN + len)
}

/// Why a message with `flag` (not 0) is refused: a flag other than 0 or
/// 1, or compressed without an encoding named.
#[cold]
fn flag_refused(flag: u8) -> Status {
    if flag != 1 {
        Status::internal("request message with a flag other than 0 or 1")
    } else {
        Status::internal("compressed message without grpc-encoding")
    }
}

/// Checks the prefix at the start of `buf`: a flag of 0 or 1, compressed
/// only when `compressed_ok` (the request named an encoding), and not
/// larger than `max_message`. Nothing to say until the prefix is complete.
pub(crate) fn check_prefix(
    buf: &[u8],
    max_message: usize,
    compressed_ok: bool,
) -> Result<(), Status> {
    let Some(total) = message_len(buf) else {
        return Ok(());
    };
    if buf[0] != 0 && (buf[0] != 1 || !compressed_ok) {
        return Err(flag_refused(buf[0]));
    }
    if total - PREFIX_LEN > max_message {
        return Err(Status::resource_exhausted(format!(
            "request message of {} bytes is larger than the limit of {max_message}",
            total - PREFIX_LEN
        )));
    }
    Ok(())
}

/// Whether the message framed at the start of `buf` is flagged compressed.
pub(crate) fn is_compressed(buf: &[u8]) -> bool {
    buf.first().is_some_and(|&flag| flag != 0)
}

/// Appends `message` with its prefix to `out`. The length goes into the
/// prefix once the message is written: prost's `encoded_len` walks the
/// whole message (nested ones again when they are encoded), so it is not
/// asked for; `out` is a buffer kept from call to call. A panic in the
/// message's `encode_raw` takes back what it wrote, prefix and all, as it
/// unwinds, whoever catches it (the executor, or a handler around its own
/// `send`): the messages before it stay whole, and no part of it is sent.
pub(crate) fn encode<M: prost::Message>(message: &M, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX_LEN]);
    let unfinished = Unfinished {
        out: &mut *out,
        start,
    };
    message.encode_raw(&mut *unfinished.out);
    std::mem::forget(unfinished);
    patch_len(out, start);
}

/// A message [`encode`] has begun: dropped (only while a panic in its
/// encoding unwinds), it cuts `out` back to where the message started.
struct Unfinished<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        self.out.truncate(self.start);
    }
}

/// A mark in the flag byte of a framed answer message, never sent: this
/// message leaves uncompressed even when its call's answers are
/// compressed. Before the bytes go out, [`deflate_frames`] (compressing)
/// or [`unmark_plain`] (not compressing) write 0 in its place; for the one
/// message of a part from another thread, the worker's `send_remote` does.
///
/// [`deflate_frames`]: crate::grpc::compression::deflate_frames
pub(crate) const PLAIN: u8 = 0x80;

/// As [`encode`], with the message marked [`PLAIN`].
pub(crate) fn encode_plain<M: prost::Message>(message: &M, out: &mut Vec<u8>) {
    let start = out.len();
    encode(message, out);
    out[start] = PLAIN;
}

/// Writes the flag 0 in place of every [`PLAIN`] mark of the framed
/// messages of `framed`: they go out as they are.
pub(crate) fn unmark_plain(framed: &mut [u8]) {
    let mut at = 0;
    while let Some(total) = message_len(&framed[at..]).filter(|&t| at + t <= framed.len()) {
        if framed[at] == PLAIN {
            framed[at] = 0;
        }
        at += total;
    }
}

/// Writes the length of the message framed at `out[start..]` into its
/// prefix, which was reserved with zeros.
pub(crate) fn patch_len(out: &mut [u8], start: usize) {
    let len = (out.len() - start - PREFIX_LEN) as u32;
    out[start + 1..start + PREFIX_LEN].copy_from_slice(&len.to_be_bytes());
}

/// The request bytes of one call that are not consumed yet.
#[derive(Debug, Default)]
pub(crate) struct MessageBuf {
    buf: Vec<u8>,
    /// Where the unconsumed bytes start.
    start: usize,
}

impl MessageBuf {
    /// Bytes held (consumed ones not counted).
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The room allocated, to decide whether the buffer is worth keeping.
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.start = 0;
    }

    /// Empties it and lets go of the room.
    pub(crate) fn let_go_room(&mut self) {
        self.buf = Vec::new();
        self.start = 0;
    }

    pub(crate) fn extend(&mut self, data: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.clear();
        }
        self.buf.extend_from_slice(data);
    }

    /// The unconsumed bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Where the next complete message is (prefix included) in
    /// [`MessageBuf::bytes`]; an error for a prefix that is not allowed,
    /// `Ok(None)` while the message is incomplete. Compressed messages are
    /// allowed when `compressed_ok`.
    pub(crate) fn next_message(
        &self,
        max_message: usize,
        compressed_ok: bool,
    ) -> Result<Option<Range<usize>>, Status> {
        let bytes = self.bytes();
        check_prefix(bytes, max_message, compressed_ok)?;
        match message_len(bytes) {
            Some(total) if total <= bytes.len() => Ok(Some(0..total)),
            _ => Ok(None),
        }
    }

    /// Marks the first `n` unconsumed bytes consumed.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.buf.len() {
            self.clear();
        } else if self.start > 4096 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_yielded_one_by_one_across_chunks() {
        let mut buf = MessageBuf::default();
        buf.extend(&[0, 0, 0]);
        assert_eq!(buf.next_message(100, false), Ok(None));
        buf.extend(&[0, 2, 7, 8, 0, 0, 0, 0, 1]);
        assert_eq!(buf.next_message(100, false), Ok(Some(0..7)));
        assert_eq!(&buf.bytes()[5..7], [7, 8]);
        buf.consume(7);
        assert_eq!(
            buf.next_message(100, false),
            Ok(None),
            "the second is cut short"
        );
        buf.extend(&[9]);
        assert_eq!(buf.next_message(100, false), Ok(Some(0..6)));
        buf.consume(6);
        assert!(buf.is_empty());
    }

    #[test]
    fn prefixes_are_checked() {
        let mut buf = MessageBuf::default();
        buf.extend(&[0, 0, 0, 1, 0]);
        let err = buf.next_message(100, false).unwrap_err();
        assert_eq!(err.code(), crate::Code::ResourceExhausted);
        let mut buf = MessageBuf::default();
        buf.extend(&[1, 0, 0, 0, 0]);
        assert_eq!(
            buf.next_message(100, false).unwrap_err().code(),
            crate::Code::Internal
        );
        // The flag is 0 or 1, whatever the encoding.
        let mut buf = MessageBuf::default();
        buf.extend(&[2, 0, 0, 0, 0]);
        assert_eq!(
            buf.next_message(100, true).unwrap_err().code(),
            crate::Code::Internal
        );
    }

    #[test]
    fn plain_marks_are_written_over_with_zero() {
        let mut out = Vec::new();
        encode(&1u32, &mut out);
        encode_plain(&150u32, &mut out);
        encode_plain(&2u32, &mut out);
        assert_eq!(out[0], 0);
        assert_eq!(out[7], PLAIN);
        unmark_plain(&mut out);
        assert_eq!(
            out,
            [0, 0, 0, 0, 2, 0x08, 1, 0, 0, 0, 0, 3, 0x08, 0x96, 0x01, 0, 0, 0, 0, 2, 0x08, 2]
        );
    }

    /// An answer whose encoding writes part of itself, then panics.
    struct Brittle;

    impl prost::Message for Brittle {
        fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
            prost::encoding::uint64::encode(1, &7, buf);
            panic!("the encoding panics on purpose");
        }

        fn merge_field(
            &mut self,
            tag: u32,
            wire_type: prost::encoding::WireType,
            buf: &mut impl prost::bytes::Buf,
            ctx: prost::encoding::DecodeContext,
        ) -> Result<(), prost::DecodeError> {
            prost::encoding::skip_field(wire_type, tag, buf, ctx)
        }

        fn encoded_len(&self) -> usize {
            2
        }

        fn clear(&mut self) {}
    }

    /// A message whose encoding panics leaves nothing of itself, whoever
    /// catches the panic; the messages before it stay as they were.
    #[test]
    fn a_message_whose_encoding_panics_leaves_nothing() {
        let mut out = Vec::new();
        encode(&1u32, &mut out);
        encode_plain(&150u32, &mut out);
        let whole = out.clone();
        for plain in [false, true] {
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if plain {
                    encode_plain(&Brittle, &mut out);
                } else {
                    encode(&Brittle, &mut out);
                }
            }));
            assert!(caught.is_err());
            assert_eq!(out, whole, "plain {plain}");
        }
        encode(&2u32, &mut out);
        assert_eq!(&out[..whole.len()], &whole[..]);
        assert_eq!(&out[whole.len()..], [0, 0, 0, 0, 2, 0x08, 2]);
    }

    #[test]
    fn encode_frames_a_message() {
        let mut out = vec![9];
        encode(&150u32, &mut out);
        assert_eq!(out, [9, 0, 0, 0, 0, 3, 0x08, 0x96, 0x01]);
    }
}
