//! Decoding request messages: prost reads them from a [`MessageBytes`], a
//! slice that differs from `&[u8]` only in what a `bytes` field costs.

use bytes::{Buf, Bytes};

use crate::grpc::status::Status;

/// A request message's bytes, as prost decodes them.
///
/// prost decodes a `bytes` field through [`Buf::copy_to_bytes`], then (for
/// a `Vec<u8>` field) copies the result into the field. On a plain slice,
/// `bytes`' default `copy_to_bytes` fills a growable `BytesMut` chunk by
/// chunk and freezes it; here it is one exact allocation and one copy.
/// Everything else is the slice's own.
pub(crate) struct MessageBytes<'a>(pub &'a [u8]);

impl Buf for MessageBytes<'_> {
    #[inline]
    fn remaining(&self) -> usize {
        self.0.remaining()
    }

    #[inline]
    fn chunk(&self) -> &[u8] {
        self.0.chunk()
    }

    #[inline]
    fn advance(&mut self, cnt: usize) {
        self.0.advance(cnt);
    }

    #[inline]
    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        // Panics past the end, as `Buf` asks (prost checks the length
        // before it calls).
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        Bytes::copy_from_slice(taken)
    }
}

/// Decodes `bytes` into `message` (a default one), mapping a malformed
/// message to `INTERNAL` (as the gRPC status codes guide, tonic and
/// grpc-go map a request that does not parse). The message is built where it is kept,
/// rather than returned and moved there.
#[inline]
pub(crate) fn merge<M: prost::Message>(message: &mut M, bytes: &[u8]) -> Result<(), Status> {
    message.merge(MessageBytes(bytes)).map_err(Status::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::service::decode_request as decode;
    use crate::grpc::status::Code;
    use prost::Message;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Item {
        #[prost(uint64, tag = "1")]
        seq: u64,
        #[prost(bytes = "vec", tag = "2")]
        payload: Vec<u8>,
        #[prost(bytes = "bytes", tag = "3")]
        shared: Bytes,
        #[prost(string, tag = "4")]
        name: String,
        #[prost(bytes = "vec", repeated, tag = "5")]
        chunks: Vec<Vec<u8>>,
    }

    fn item() -> Item {
        Item {
            seq: 300,
            payload: (0..=255).collect(),
            shared: Bytes::from_static(b"shared bytes"),
            name: "n\u{e4}me".to_owned(),
            chunks: vec![Vec::new(), b"a".to_vec(), vec![7; 70_000]],
        }
    }

    #[test]
    fn messages_decode_as_from_a_slice() {
        let encoded = item().encode_to_vec();
        let ours: Item = decode(&encoded).unwrap();
        assert_eq!(ours, item());
        assert_eq!(ours, Item::decode(encoded.as_slice()).unwrap());
    }

    #[test]
    fn a_merge_keeps_what_the_message_held_as_prost_does() {
        let encoded = Item {
            seq: 0,
            payload: b"new".to_vec(),
            shared: Bytes::new(),
            name: String::new(),
            chunks: vec![b"more".to_vec()],
        }
        .encode_to_vec();
        let mut ours = item();
        merge(&mut ours, &encoded).unwrap();
        let mut theirs = item();
        theirs.merge(encoded.as_slice()).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(ours.payload, b"new");
        assert_eq!(ours.chunks.len(), 4);
    }

    #[test]
    fn every_cut_of_a_message_fails_as_internal() {
        let encoded = item().encode_to_vec();
        for end in 1..encoded.len() {
            let cut = &encoded[..end];
            match (decode::<Item>(cut), Item::decode(cut)) {
                (Ok(ours), Ok(theirs)) => assert_eq!(ours, theirs, "cut at {end}"),
                (Err(status), Err(_)) => assert_eq!(status.code(), Code::Internal),
                (ours, theirs) => panic!("cut at {end}: {ours:?} against {theirs:?}"),
            }
        }
    }

    #[test]
    fn bytes_are_copied_out_in_order() {
        let mut buf = MessageBytes(b"abcdef");
        assert_eq!(buf.copy_to_bytes(2), Bytes::from_static(b"ab"));
        assert_eq!(buf.remaining(), 4);
        assert_eq!(buf.copy_to_bytes(0), Bytes::new());
        buf.advance(1);
        assert_eq!(buf.chunk(), b"def");
        assert_eq!(buf.copy_to_bytes(3), Bytes::from_static(b"def"));
        assert!(!buf.has_remaining());
    }

    #[test]
    #[should_panic]
    fn bytes_past_the_end_panic_as_a_buf_must() {
        MessageBytes(b"ab").copy_to_bytes(3);
    }
}
