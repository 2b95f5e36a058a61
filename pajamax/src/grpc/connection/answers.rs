//! Answers: a unary call's message or status written out, and calls ended.

use super::*;

impl GrpcConnection {
    /// The unary answer in `self.reply`, with `self.response_metadata`;
    /// its message compressed with `encoding` unless that is identity.
    pub(super) fn answer_message(&mut self, stream: u32, encoding: Encoding) {
        self.answered += 1;
        let md = &self.response_metadata;
        if encoding != Encoding::Identity {
            self.deflated.clear();
            compression::deflate_frames(&self.reply, encoding, &mut self.deflated);
            response::send_answer_with(
                &mut self.h2,
                &mut self.memos,
                stream,
                encoding,
                &self.deflated,
                &md.headers,
                &md.trailers,
                &mut self.text,
            );
            fit_room(&mut self.deflated);
        } else {
            response::send_answer(
                &mut self.h2,
                &mut self.memos,
                stream,
                &self.reply,
                &md.headers,
                &md.trailers,
                &mut self.text,
            );
        }
        // Sent: none of it may go with another call's answer.
        self.response_metadata.clear();
        // An answer past the windows, made for observers or to compress,
        // was made here rather than in the output: its room goes with it.
        fit_room(&mut self.reply);
    }

    /// A trailers-only answer carrying `status`, with any metadata the
    /// handler set.
    pub(super) fn answer_status(&mut self, stream: u32, status: &Status) {
        self.answered += 1;
        let md = &self.response_metadata;
        response::send_status_only(
            &mut self.h2,
            stream,
            Some(status),
            &md.headers,
            &md.trailers,
            &mut self.text,
        );
        self.response_metadata.clear();
    }

    /// Ends a call taken out of the table: its trailers (or a trailers-only
    /// answer) with `status` (`None` for `OK`), and the thread serving it,
    /// if any, learns that it ended. A request that is not gRPC gets its
    /// HTTP 415 (or 405) instead.
    pub(super) fn end_call(
        &mut self,
        stream: u32,
        mut call: Box<Call>,
        mut status: Option<Status>,
    ) {
        // Its producer or handler goes first: a panic as it is dropped ends
        // a call that has not failed otherwise `INTERNAL`.
        if let Err(panic) = let_go(&mut call.state) {
            status.get_or_insert(panic);
        }
        self.answered += 1;
        if call.route.is_none() {
            // A request that is not gRPC, ended before its body did (its
            // deadline passed): still HTTP 415 (or 405). A gRPC status goes
            // with HTTP 200, which an HTTP client takes for a success.
            let why = call.not_grpc;
            self.recycle(call);
            return response::send_not_grpc(&mut self.h2, stream, why);
        }
        if let (true, Some(route)) = (self.observing, call.route) {
            // A call ended before its handler ran (its deadline passed, or
            // the server stopped, while its body was awaited) has no start:
            // its duration is zero.
            let started = call.started.unwrap_or_else(Instant::now);
            let code = status.as_ref().map_or(Code::Ok, Status::code);
            self.observe(
                route,
                code,
                started,
                call.request_bytes,
                call.response_bytes,
            );
        }
        if let State::Remote(remote) = &call.state {
            if let Some(status) = &status {
                // Ended on the worker (a request message past the limits,
                // one that does not inflate): the thread reads why after
                // the messages before it, as the client does.
                remote.shared.end_incoming(Some(status.clone()));
            }
            remote.shared.cancel(CancelReason::Ended);
        }
        let md = &call.response;
        if call.headers_sent {
            response::send_trailers(
                &mut self.h2,
                &mut self.memos,
                stream,
                status.as_ref(),
                &md.trailers,
                &mut self.text,
            );
        } else {
            response::send_status_only(
                &mut self.h2,
                stream,
                status.as_ref(),
                &md.headers,
                &md.trailers,
                &mut self.text,
            );
        }
        self.recycle(call);
    }

    /// Lets go of a call the client reset, or whose connection closed: its
    /// thread, if any, learns why, and observers see it `CANCELLED`.
    pub(super) fn end_cancelled(&mut self, call: Box<Call>, reason: CancelReason) {
        if let State::Remote(remote) = &call.state {
            remote.shared.cancel(reason);
        }
        if let (true, Some(route)) = (self.observing, call.route) {
            // A call reset before its handler ran has no start.
            let started = call.started.unwrap_or_else(Instant::now);
            let (request, response) = (call.request_bytes, call.response_bytes);
            self.observe(route, Code::Cancelled, started, request, response);
        }
        self.recycle(call);
    }

    /// Observers see a call that waited for its body as a light record,
    /// reset or left by its connection, `CANCELLED`, with no start.
    pub(super) fn observe_waiting_cancelled(&self, waiting: &Waiting) {
        if self.observing {
            self.observe(waiting.head.route, Code::Cancelled, Instant::now(), 0, 0);
        }
    }
}
