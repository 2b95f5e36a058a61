//! Running handler code on the worker. Every call into user code is caught:
//! a panic ends only its own call, with `INTERNAL`. So is the drop of what
//! served a call on the worker (a producer, a handler), and that of a
//! panic's payload: either may run user code in its `Drop`.

use crate::grpc::context::Context;
use crate::grpc::framing;
use crate::grpc::intercept::{CallInfo, FinishedCall, Hooks};
use crate::grpc::service::{MethodKind, Reply, Service};
use crate::grpc::status::Status;
use crate::grpc::streaming::{Inbound, Outgoing, Production, RawHandler, RawNext, RawProducer};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

fn panicked(payload: Box<dyn Any + Send>) -> Status {
    log::error!("a handler panicked");
    discard(payload);
    Status::internal("handler panicked")
}

/// How many panics in a row, each raised by dropping the payload of the
/// one before, [`discard`] catches before it leaks the last payload.
const NESTED_PAYLOADS: usize = 8;

/// Drops a panic's payload, catching a panic in its `Drop` (a payload
/// given to `std::panic::panic_any` is any type).
fn discard(mut payload: Box<dyn Any + Send>) {
    for _ in 0..NESTED_PAYLOADS {
        match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return,
            Err(next) => payload = next,
        }
    }
    std::mem::forget(payload);
}

/// Drops `value`, what served a call on the worker (its producer or its
/// handler), catching a panic in its `Drop`: the error is the status that
/// panic gives the call, if the call has no other yet.
pub(crate) fn dispose<T>(value: T) -> Result<(), Status> {
    catch_unwind(AssertUnwindSafe(move || drop(value))).map_err(|payload| {
        log::error!("a producer or handler panicked as it was dropped");
        discard(payload);
        Status::internal("handler panicked as it was dropped")
    })
}

/// Runs the server's interceptors before a handler.
pub(crate) fn intercept(
    hooks: &Hooks,
    call: &CallInfo<'_>,
    ctx: &mut Context<'_>,
) -> Result<(), Status> {
    catch_unwind(AssertUnwindSafe(|| hooks.intercept(call, ctx)))
        .unwrap_or_else(|p| Err(panicked(p)))
}

/// Shows a finished call to the server's observers.
pub(crate) fn observe(hooks: &Hooks, call: &FinishedCall<'_>) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| hooks.finished(call))) {
        log::error!("a call observer panicked");
        discard(payload);
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
    .map_err(panicked)?;
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
    .unwrap_or_else(|p| Err(panicked(p)))
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
    .unwrap_or_else(|p| Err(panicked(p)))
    .map(|raw| raw.0)
}

/// Hands one request message (without its prefix) to a handler. After a
/// panic, the messages it sent before go (as what it sent before an
/// error it returned), but nothing of one whose encoding the panic cut
/// short: [`framing::encode`] takes that back as the panic unwinds.
pub(crate) fn on_message(
    handler: &mut dyn RawHandler,
    ctx: &mut Context<'_>,
    message: &[u8],
    out: &mut Outgoing,
) -> Result<(), Status> {
    catch_unwind(AssertUnwindSafe(|| handler.on_message(ctx, message, out)))
        .unwrap_or_else(|p| Err(panicked(p)))
}

/// Tells a handler the client is done sending, then drops it: its part in
/// the call is over. The outer error is a panic, the inner one the
/// handler's status. A panic as the handler is dropped ends a call it
/// answered `INTERNAL` (what it sent does not go), and leaves the status
/// of one it failed.
pub(crate) fn on_end(
    mut handler: Box<dyn RawHandler>,
    ctx: &mut Context<'_>,
    out: &mut Outgoing,
) -> Result<Result<(), Status>, Status> {
    // Not dropped within the same catch: a handler dropped while its
    // `on_end` unwinds, and panicking in its `Drop`, would abort.
    let outcome = catch_unwind(AssertUnwindSafe(|| handler.on_end(ctx, out))).map_err(panicked);
    match (dispose(handler), outcome) {
        (Err(status), Ok(Ok(()))) => Err(status),
        (_, outcome) => outcome,
    }
}

/// Asks a producer for its next step; a panic ends the stream, and leaves
/// `out` as it was.
pub(crate) fn pull(
    producer: &mut dyn RawProducer,
    now: Instant,
    out: &mut Vec<u8>,
    compressing: bool,
) -> RawNext {
    let before = out.len();
    match catch_unwind(AssertUnwindSafe(|| producer.next(now, out, compressing))) {
        Ok(next) => next,
        Err(payload) => {
            out.truncate(before);
            RawNext::End(Err(panicked(payload)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::context::ResponseMetadata;
    use crate::grpc::metadata::Metadata;
    use crate::grpc::status::Code;

    /// A panic payload that panics as it is dropped, with a payload of the
    /// same kind `left` more times.
    struct Nested(usize);

    impl Drop for Nested {
        fn drop(&mut self) {
            if self.0 > 0 {
                std::panic::panic_any(Nested(self.0 - 1));
            }
        }
    }

    /// A handler that panics with a [`Nested`] payload in `on_message`,
    /// answers as told in `on_end`, and panics as it is dropped if told.
    struct Handler {
        nested: usize,
        end: Option<Status>,
        panics_in_drop: bool,
    }

    impl RawHandler for Handler {
        fn on_message(
            &mut self,
            _: &mut Context<'_>,
            _: &[u8],
            _: &mut Outgoing,
        ) -> Result<(), Status> {
            std::panic::panic_any(Nested(self.nested))
        }

        fn on_end(&mut self, _: &mut Context<'_>, out: &mut Outgoing) -> Result<(), Status> {
            out.messages.extend_from_slice(b"answer");
            match self.end.take() {
                Some(status) => Err(status),
                None => Ok(()),
            }
        }
    }

    impl Drop for Handler {
        fn drop(&mut self) {
            if self.panics_in_drop && !std::thread::panicking() {
                panic!("the handler panics as it is dropped");
            }
        }
    }

    fn handler(nested: usize, end: Option<Status>, panics_in_drop: bool) -> Handler {
        Handler {
            nested,
            end,
            panics_in_drop,
        }
    }

    #[test]
    fn a_panic_whose_payload_panics_as_it_is_dropped_ends_only_its_call() {
        let metadata = Metadata::new();
        let mut response = ResponseMetadata::default();
        let mut ctx = Context::new(&metadata, None, None, &mut response);
        let mut out = Outgoing::default();
        // Payloads that panic as they are dropped, once and more times
        // than are caught (the last one is then leaked).
        for nested in [1, 2, NESTED_PAYLOADS + 3] {
            let mut handler = handler(nested, None, false);
            let status = on_message(&mut handler, &mut ctx, b"", &mut out).unwrap_err();
            assert_eq!(status.code(), Code::Internal);
        }
    }

    #[test]
    fn a_panic_as_a_handler_is_dropped_after_its_end_fails_only_an_answered_call() {
        let metadata = Metadata::new();
        let mut response = ResponseMetadata::default();
        let mut ctx = Context::new(&metadata, None, None, &mut response);
        let mut out = Outgoing::default();
        let answered = Box::new(handler(0, None, true));
        let outcome = on_end(answered, &mut ctx, &mut out);
        assert_eq!(outcome.unwrap_err().code(), Code::Internal);
        let failed = Box::new(handler(0, Some(Status::aborted("its own")), true));
        let outcome = on_end(failed, &mut ctx, &mut out);
        assert_eq!(outcome.unwrap().unwrap_err().code(), Code::Aborted);
        let quiet = Box::new(handler(0, None, false));
        assert!(matches!(on_end(quiet, &mut ctx, &mut out), Ok(Ok(()))));
    }

    #[test]
    fn a_value_that_panics_as_it_is_dropped_is_disposed_of_with_a_status() {
        struct Panics;
        impl Drop for Panics {
            fn drop(&mut self) {
                panic!("dropped on purpose");
            }
        }
        assert_eq!(dispose(Panics).unwrap_err().code(), Code::Internal);
        assert!(dispose(Nested(0)).is_ok());
    }
}
