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

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use pajamax::grpc::context::Context;
use pajamax::grpc::router::Router;
use pajamax::grpc::streaming::{RawInbound, RawServerStream};
use pajamax::{
    decode_request, BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Code, Method,
    MethodKind, Next, Producer, Reply, Responses, ServerStream, Service, Status,
};

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

/// `Split`: the request after its first byte, in pieces of 1 to 8 bytes
/// (the first byte's low three bits plus one), each sent as a message; a
/// piece that fails [`check`] ends the stream there.
fn split(request: Vec<u8>) -> impl Iterator<Item = Result<Vec<u8>, Status>> {
    let (size, rest) = match request.split_first() {
        Some((&first, rest)) => (usize::from(first & 7) + 1, rest.to_vec()),
        None => (1, Vec::new()),
    };
    let pieces: Vec<Vec<u8>> = rest.chunks(size).map(<[u8]>::to_vec).collect();
    pieces
        .into_iter()
        .map(|piece| check(&piece).map(|()| piece))
}

/// `Tick`: one message per request byte, `byte % 4` milliseconds after the
/// previous one, without holding the worker meanwhile; a 0xff byte ends the
/// stream with an error, 0xfe panics.
struct Ticker {
    bytes: std::vec::IntoIter<u8>,
    due: Option<Instant>,
}

impl Producer<Vec<u8>> for Ticker {
    fn next(&mut self, now: Instant) -> Next<Vec<u8>> {
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
        Next::Message(vec![byte])
    }
}

/// `Sum`: counts the messages and their bytes; answers with both (eight
/// bytes) and an `x-count` trailer.
#[derive(Default)]
struct Summer {
    count: u32,
    bytes: u32,
}

impl ClientStreamHandler<Vec<u8>, Vec<u8>> for Summer {
    fn on_message(&mut self, _ctx: &mut Context<'_>, message: Vec<u8>) -> Result<(), Status> {
        check(&message)?;
        self.count += 1;
        self.bytes += message.len() as u32;
        Ok(())
    }

    fn on_end(&mut self, ctx: &mut Context<'_>) -> Result<Vec<u8>, Status> {
        let _ = ctx
            .trailers_mut()
            .insert("x-count", &self.count.to_string());
        let mut answer = self.count.to_be_bytes().to_vec();
        answer.extend(self.bytes.to_be_bytes());
        Ok(answer)
    }
}

/// `Chat`: answers each message with 0 to 2 copies of it (its length modulo
/// 3); an empty message asks for the response headers at once. At the end,
/// one message with the count of messages seen.
#[derive(Default)]
struct Chatter {
    seen: u32,
}

impl BidiHandler<Vec<u8>, Vec<u8>> for Chatter {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        message: Vec<u8>,
        responses: &mut Responses<'_, Vec<u8>>,
    ) -> Result<(), Status> {
        check(&message)?;
        self.seen += 1;
        if message.is_empty() {
            responses.send_headers();
        }
        for _ in 0..message.len() % 3 {
            responses.send(&message);
        }
        Ok(())
    }

    fn on_end(
        &mut self,
        ctx: &mut Context<'_>,
        responses: &mut Responses<'_, Vec<u8>>,
    ) -> Result<(), Status> {
        let _ = ctx.trailers_mut().insert("x-seen", &self.seen.to_string());
        responses.send(&self.seen.to_be_bytes().to_vec());
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
            // requests become INVALID_ARGUMENT.
            0 => {
                let message: Vec<u8> = decode_request(request)?;
                reply.encode(&message);
                Ok(())
            }
            // The raw request wrapped as a `bytes` message: always succeeds.
            1 => {
                reply.encode(&request.to_vec());
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
