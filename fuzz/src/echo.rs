//! A hand-written service for the connection target: each method takes a
//! different path through the gRPC layer, and none of them answers with more
//! bytes than a small constant plus a few times the request.
//!
//! The unary methods are `Echo`, `Raw`, `Fail`, `Meta` and `Panic`; the
//! streaming ones, all served on the worker and without threads (so a run
//! depends on its input alone), are `Split` (server streaming, an iterator),
//! `Tick` (server streaming, a paced `Producer`), `Sum` (client streaming,
//! a `ClientStreamHandler`) and `Chat` (bidirectional, a `BidiHandler`).
//! Their messages are `bytes` messages (field 1), as `Echo`'s; a message
//! whose first byte is 0xff ends the call with an error status, 0xfe makes
//! the handler panic.
//!
//! A message (or a byte of `Tick`'s request) whose first byte is 0xe0 to
//! 0xfd is a [`Choice`]: its low bits turn compression on or off for the
//! call (which a client that sent `grpc-accept-encoding: gzip` or
//! `deflate` gets), send
//! answers uncompressed in a call that compresses
//! (`Responses::send_uncompressed`, `Next::Uncompressed`), or answer with a
//! message whose encoding panics halfway ([`Answer`]). (`Sink`'s
//! `send_uncompressed`, from another thread, is not reached: nothing here
//! runs on threads.)

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use pajamax::grpc::context::Context;
use pajamax::grpc::router::Router;
use pajamax::grpc::streaming::{RawInbound, RawServerStream};
use pajamax::{
    decode_request, BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Code, Method,
    MethodKind, Next, Producer, Reply, Responses, ServerStream, Service, Status,
};
use prost::bytes::BufMut;
use prost::encoding::{encode_key, encode_varint, DecodeContext, WireType};
use prost::DecodeError;

/// The service's methods, in the order the entry points number them.
pub const METHODS: &[Method] = &[
    Method::unary("Echo"),
    Method::unary("Raw"),
    Method::unary("Fail"),
    Method::unary("Meta"),
    Method::unary("Panic"),
    Method {
        name: "Split",
        kind: MethodKind::ServerStreaming,
    },
    Method {
        name: "Tick",
        kind: MethodKind::ServerStreaming,
    },
    Method {
        name: "Sum",
        kind: MethodKind::ClientStreaming,
    },
    Method {
        name: "Chat",
        kind: MethodKind::BidiStreaming,
    },
];

/// What a streamed message asks for by its first byte: an error status
/// (0xff, the second byte picks the code) or a panic (0xfe).
fn check(message: &[u8]) -> Result<(), Status> {
    match message {
        [0xff, rest @ ..] => Err(Status::new(
            Code::from_i32(i32::from(rest.first().copied().unwrap_or(2))),
            "asked to fail",
        )),
        [0xfe, ..] => crate::panic_quietly("streaming handler panics on purpose"),
        _ => Ok(()),
    }
}

/// What a message whose first byte is 0xe0 to 0xfd (below the bytes that
/// [`check`] reads) chooses, by the low bits of that byte:
/// - 0x01: compression on for the call (`compress_response(true)`);
/// - 0x02: compression off (after 0x01: off wins);
/// - 0x04: answers go uncompressed even when the call compresses
///   (`send_uncompressed`, `Next::Uncompressed`);
/// - 0x08: an answer whose encoding panics halfway ([`Answer::cut`]).
///
/// Compression reaches the wire only for a client that sent
/// `grpc-accept-encoding: gzip` (or `deflate`), and only while the
/// response headers have not gone.
#[derive(Clone, Copy, Default)]
struct Choice(u8);

impl Choice {
    fn of(message: &[u8]) -> Choice {
        match message.first() {
            Some(&byte @ 0xe0..=0xfd) => {
                if crate::trace_enabled() {
                    eprintln!("echo: choice {byte:#04x}");
                }
                Choice(byte & 0x1f)
            }
            _ => Choice(0),
        }
    }

    /// Turns the call's compression on or off, as chosen.
    fn compress(self, ctx: &mut Context<'_>) {
        if self.0 & 0x01 != 0 {
            ctx.compress_response(true);
        }
        if self.0 & 0x02 != 0 {
            ctx.compress_response(false);
        }
    }

    fn uncompressed(self) -> bool {
        self.0 & 0x04 != 0
    }

    fn cut(self) -> bool {
        self.0 & 0x08 != 0
    }
}

/// The service's answers: a `bytes` message (field 1), encoded as a
/// `Vec<u8>` is, unless `cut`: then its encoding writes the field's key,
/// its length and half its bytes, and panics. The connection must drop
/// what was written of it (`framing::encode` flags it 0xff until done).
#[derive(Clone, Default, PartialEq)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub cut: bool,
}

impl Answer {
    fn new(bytes: Vec<u8>) -> Answer {
        Answer { bytes, cut: false }
    }

    /// `bytes`, cut if `choice` says so.
    fn chosen(bytes: Vec<u8>, choice: Choice) -> Answer {
        Answer {
            bytes,
            cut: choice.cut(),
        }
    }
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Answer({:02x?}, cut: {})", self.bytes, self.cut)
    }
}

impl prost::Message for Answer {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if !self.cut {
            return self.bytes.encode_raw(buf);
        }
        encode_key(1, WireType::LengthDelimited, buf);
        encode_varint(self.bytes.len() as u64, buf);
        buf.put_slice(&self.bytes[..self.bytes.len() / 2]);
        if crate::trace_enabled() {
            eprintln!("echo: an answer's encoding panics halfway");
        }
        crate::panic_quietly("an answer's encoding panics on purpose")
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        self.bytes.merge_field(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.bytes.encoded_len()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.cut = false;
    }
}

/// `Split`: the request after its first byte, in pieces of 1 to 8 bytes
/// (the first byte's low three bits plus one), each sent as a message; a
/// piece that fails [`check`] ends the stream there, one whose [`Choice`]
/// says cut ends it with a panic in its encoding. (The first byte's
/// [`Choice`] picks the call's compression.)
fn split(request: Vec<u8>) -> impl Iterator<Item = Result<Answer, Status>> {
    let (size, rest) = match request.split_first() {
        Some((&first, rest)) => (usize::from(first & 7) + 1, rest.to_vec()),
        None => (1, Vec::new()),
    };
    let pieces: Vec<Vec<u8>> = rest.chunks(size).map(<[u8]>::to_vec).collect();
    pieces.into_iter().map(|piece| {
        check(&piece)?;
        let choice = Choice::of(&piece);
        Ok(Answer::chosen(piece, choice))
    })
}

/// `Tick`: one message per request byte, `byte % 4` milliseconds after the
/// previous one, without holding the worker meanwhile; a 0xff byte ends the
/// stream with an error, 0xfe panics; a [`Choice`] byte goes uncompressed
/// (`Next::Uncompressed`) or panics in its encoding, as it says. (The
/// first byte's [`Choice`] picks the call's compression.)
struct Ticker {
    bytes: std::vec::IntoIter<u8>,
    due: Option<Instant>,
}

impl Producer<Answer> for Ticker {
    fn next(&mut self, now: Instant) -> Next<Answer> {
        if let Some(due) = self.due {
            if due > now {
                return Next::Wait(due);
            }
        }
        let Some(byte) = self.bytes.next() else {
            return Next::End(Ok(()));
        };
        if let Err(status) = check(&[byte, 0]) {
            return Next::End(Err(status));
        }
        self.due = Some(now + Duration::from_millis(u64::from(byte % 4)));
        let choice = Choice::of(&[byte]);
        let answer = Answer::chosen(vec![byte], choice);
        if choice.uncompressed() {
            Next::Uncompressed(answer)
        } else {
            Next::Message(answer)
        }
    }
}

/// `Sum`: counts the messages and their bytes; answers with both (eight
/// bytes) and an `x-count` trailer. A [`Choice`] message picks the call's
/// compression, or an answer whose encoding panics.
#[derive(Default)]
struct Summer {
    count: u32,
    bytes: u32,
    cut: bool,
}

impl ClientStreamHandler<Vec<u8>, Answer> for Summer {
    fn on_message(&mut self, ctx: &mut Context<'_>, message: Vec<u8>) -> Result<(), Status> {
        check(&message)?;
        let choice = Choice::of(&message);
        choice.compress(ctx);
        self.cut |= choice.cut();
        self.count += 1;
        self.bytes += message.len() as u32;
        Ok(())
    }

    fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<Answer, Status> {
        let _ = ctx
            .trailers_mut()
            .insert("x-count", &self.count.to_string());
        let mut answer = self.count.to_be_bytes().to_vec();
        answer.extend(self.bytes.to_be_bytes());
        Ok(Answer {
            bytes: answer,
            cut: self.cut,
        })
    }
}

/// `Chat`: answers each message with 0 to 2 copies of it (its length modulo
/// 3); an empty message asks for the response headers at once. A
/// [`Choice`] message picks the call's compression (until the headers
/// go), sends its copies uncompressed and compressed in turn (the first
/// uncompressed), or adds after them a copy whose encoding panics. At the
/// end, one message with the count of messages seen.
#[derive(Default)]
struct Chatter {
    seen: u32,
}

impl BidiHandler<Vec<u8>, Answer> for Chatter {
    fn on_message(
        &mut self,
        ctx: &mut Context<'_>,
        message: Vec<u8>,
        responses: &mut Responses<'_, Answer>,
    ) -> Result<(), Status> {
        check(&message)?;
        let choice = Choice::of(&message);
        choice.compress(ctx);
        self.seen += 1;
        if message.is_empty() {
            responses.send_headers();
        }
        let answer = Answer::new(message);
        for i in 0..answer.bytes.len() % 3 {
            if choice.uncompressed() && i % 2 == 0 {
                responses.send_uncompressed(&answer);
            } else {
                responses.send(&answer);
            }
        }
        if choice.cut() {
            responses.send(&Answer {
                cut: true,
                ..answer
            });
        }
        Ok(())
    }

    fn on_end(
        &mut self,
        ctx: &mut Context<'_>,
        responses: &mut Responses<'_, Answer>,
    ) -> Result<(), Status> {
        let _ = ctx.trailers_mut().insert("x-seen", &self.seen.to_string());
        responses.send(&Answer::new(self.seen.to_be_bytes().to_vec()));
        Ok(())
    }
}

/// Echoes requests back in several ways.
pub struct Echo {
    name: &'static str,
}

impl Service for Echo {
    fn name(&self) -> &'static str {
        self.name
    }

    fn methods(&self) -> &'static [Method] {
        METHODS
    }

    fn unary(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        match method {
            // A `bytes` message (field 1) decoded and sent back: malformed
            // requests become INTERNAL. Its `Choice` picks the
            // compression, or an answer whose encoding panics.
            0 => {
                let message: Vec<u8> = decode_request(request)?;
                let choice = Choice::of(&message);
                choice.compress(ctx);
                reply.encode(&Answer::chosen(message, choice));
                Ok(())
            }
            // The raw request wrapped as a `bytes` message: succeeds unless
            // its `Choice` says to cut the answer's encoding.
            1 => {
                let choice = Choice::of(request);
                choice.compress(ctx);
                reply.encode(&Answer::chosen(request.to_vec(), choice));
                Ok(())
            }
            // An error status: the first byte picks the code, the rest is
            // the message (percent-encoded on the wire).
            2 => {
                let (&code, text) = request.split_first().unwrap_or((&2, b""));
                Err(Status::new(
                    Code::from_i32(i32::from(code)),
                    String::from_utf8_lossy(text).into_owned(),
                ))
            }
            // Response metadata of bounded size derived from the request.
            3 => {
                let count = ctx.metadata().len() as u32;
                let _ = ctx
                    .headers_mut()
                    .insert("x-request-len", &request.len().to_string());
                let _ = ctx
                    .trailers_mut()
                    .insert_bin("x-head-bin", &request[..request.len().min(32)]);
                if ctx.deadline().is_some() {
                    let _ = ctx.trailers_mut().insert("x-deadline", "set");
                }
                reply.encode(&count);
                Ok(())
            }
            // A handler that panics; the connection must answer INTERNAL.
            _ => crate::panic_quietly("handler panics on purpose"),
        }
    }

    fn server_streaming(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        let request: Vec<u8> = decode_request(request)?;
        let _ = ctx.headers_mut().insert("x-kind", "server");
        Choice::of(&request).compress(ctx);
        match METHODS[method].name {
            "Split" => Ok(ServerStream::iter(split(request)).into_raw()),
            _ => Ok(ServerStream::from_producer(Ticker {
                bytes: request.into_iter(),
                due: None,
            })
            .into_raw()),
        }
    }

    fn client_streaming(
        &self,
        _method: usize,
        _ctx: &mut Context<'_>,
    ) -> Result<RawInbound, Status> {
        Ok(ClientStream::on_worker(Summer::default()).into_raw())
    }

    fn bidi_streaming(&self, _method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        if ctx.metadata().get("x-refuse").is_some() {
            return Err(Status::permission_denied("refused at the start"));
        }
        Ok(BidiStream::on_worker(Chatter::default()).into_raw())
    }
}

/// A router with two instances of [`Echo`], so both the unknown-method and
/// the unknown-service answers are reachable. Built once per process.
pub fn router() -> Arc<Router> {
    static ROUTER: OnceLock<Arc<Router>> = OnceLock::new();
    ROUTER
        .get_or_init(|| {
            let mut router = Router::new();
            router.add(Arc::new(Echo { name: "fuzz.Echo" }));
            router.add(Arc::new(Echo { name: "e.E" }));
            Arc::new(router)
        })
        .clone()
}
