//! Running handler code on the worker. Every call into user code is caught:
//! a panic ends only its own call, with `INTERNAL`.

use crate::grpc::context::Context;
use crate::grpc::framing;
use crate::grpc::intercept::{CallInfo, FinishedCall, Hooks};
use crate::grpc::service::{MethodKind, Reply, Service};
use crate::grpc::status::Status;
use crate::grpc::streaming::{Inbound, Outgoing, Production, RawHandler, RawNext, RawProducer};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

fn panicked() -> Status {
    log::error!("a handler panicked");
    Status::internal("handler panicked")
}

/// Runs the server's interceptors before a handler.
pub(crate) fn intercept(
    hooks: &Hooks,
    call: &CallInfo<'_>,
    ctx: &mut Context<'_>,
) -> Result<(), Status> {
    catch_unwind(AssertUnwindSafe(|| hooks.intercept(call, ctx)))
        .unwrap_or_else(|_| Err(panicked()))
}

/// Shows a finished call to the server's observers.
pub(crate) fn observe(hooks: &Hooks, call: &FinishedCall<'_>) {
    if catch_unwind(AssertUnwindSafe(|| hooks.finished(call))).is_err() {
        log::error!("a call observer panicked");
    }
}

/// Runs a unary handler; `reply` ends with room for the message prefix,
/// and on success the framed answer fills it and follows it. The outer
/// error is a panic, the inner one the handler's status.
pub(crate) fn unary(
    service: &dyn Service,
    method: usize,
    ctx: &mut Context<'_>,
    message: &[u8],
    reply: &mut Vec<u8>,
) -> Result<Result<(), Status>, Status> {
    let prefix = reply.len() - framing::PREFIX_LEN;
    let mut encoder = Reply::after_prefix_room(reply);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        service.unary(method, ctx, message, &mut encoder)
    }))
    .map_err(|_| panicked())?;
    if outcome.is_ok() {
        framing::patch_len(reply, prefix);
    }
    Ok(outcome)
}

/// Runs a server-streaming handler: the producer of its answer.
pub(crate) fn server_stream(
    service: &dyn Service,
    method: usize,
    ctx: &mut Context<'_>,
    message: &[u8],
) -> Result<Production, Status> {
    catch_unwind(AssertUnwindSafe(|| {
        service.server_streaming(method, ctx, message)
    }))
    .unwrap_or_else(|_| Err(panicked()))
    .map(|raw| raw.0)
}

/// Runs the handler of a client-streaming or bidirectional call as it
/// starts: what takes its messages.
pub(crate) fn inbound(
    service: &dyn Service,
    kind: MethodKind,
    method: usize,
    ctx: &mut Context<'_>,
) -> Result<Inbound, Status> {
    catch_unwind(AssertUnwindSafe(|| match kind {
        MethodKind::BidiStreaming => service.bidi_streaming(method, ctx),
        _ => service.client_streaming(method, ctx),
    }))
    .unwrap_or_else(|_| Err(panicked()))
    .map(|raw| raw.0)
}

/// Hands one request message (without its prefix) to a handler.
pub(crate) fn on_message(
    handler: &mut dyn RawHandler,
    ctx: &mut Context<'_>,
    message: &[u8],
    out: &mut Outgoing,
) -> Result<(), Status> {
    catch_unwind(AssertUnwindSafe(|| handler.on_message(ctx, message, out)))
        .unwrap_or_else(|_| Err(panicked()))
}

/// Tells a handler the client is done sending. The outer error is a
/// panic, the inner one the handler's status.
pub(crate) fn on_end(
    handler: &mut dyn RawHandler,
    ctx: &mut Context<'_>,
    out: &mut Outgoing,
) -> Result<Result<(), Status>, Status> {
    catch_unwind(AssertUnwindSafe(|| handler.on_end(ctx, out))).map_err(|_| panicked())
}

/// Asks a producer for its next step; a panic ends the stream, and leaves
/// `out` as it was.
pub(crate) fn pull(producer: &mut dyn RawProducer, now: Instant, out: &mut Vec<u8>) -> RawNext {
    let before = out.len();
    match catch_unwind(AssertUnwindSafe(|| producer.next(now, out))) {
        Ok(next) => next,
        Err(_) => {
            out.truncate(before);
            RawNext::End(Err(panicked()))
        }
    }
}
