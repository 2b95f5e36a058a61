//! A hand-written service for the connection target: each method takes a
//! different path through the gRPC layer, and none of them answers with more
//! bytes than a small constant plus a few times the request.

use std::sync::{Arc, OnceLock};

use pajamax::grpc::context::Context;
use pajamax::grpc::router::Router;
use pajamax::{decode_request, Code, Reply, Service, Status};

/// The service's methods, in the order [`Service::unary`] numbers them.
pub const METHODS: &[&str] = &["Echo", "Raw", "Fail", "Meta", "Panic"];

/// Echoes requests back in several ways.
pub struct Echo {
    name: &'static str,
}

impl Service for Echo {
    fn name(&self) -> &'static str {
        self.name
    }

    fn methods(&self) -> &'static [pajamax::Method] {
        const DESCRIBED: [pajamax::Method; 5] = [
            pajamax::Method::unary(METHODS[0]),
            pajamax::Method::unary(METHODS[1]),
            pajamax::Method::unary(METHODS[2]),
            pajamax::Method::unary(METHODS[3]),
            pajamax::Method::unary(METHODS[4]),
        ];
        &DESCRIBED
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
