//! Calls with one request message: unary and server-streaming calls, from
//! their request to their handler (and the observers' record of a call,
//! which every kind shares).

use super::*;

impl GrpcConnection {
    /// The client is done sending a unary or server-streaming request (or
    /// a request that is not gRPC): answer with what it sent.
    pub(super) fn finish_collecting(&mut self, stream: u32, call: Box<Call>) {
        if call.route.is_none() {
            let why = call.not_grpc;
            self.recycle(call);
            self.answered += 1;
            return response::send_not_grpc(&mut self.h2, stream, why);
        }
        let bytes = call.inbound.bytes();
        if bytes.is_empty() {
            let status = Status::internal("call without a request message");
            return self.refuse(stream, call, &status);
        }
        if framing::message_len(bytes) != Some(bytes.len()) {
            let status = Status::internal("request message truncated");
            return self.refuse(stream, call, &status);
        }
        if framing::is_compressed(bytes) {
            return self.run_compressed(stream, call);
        }
        // The message is borrowed from the call's buffer while the call is
        // run; move the buffer out for that.
        let mut call = call;
        let inbound = std::mem::take(&mut call.inbound);
        self.run_single(stream, call, &inbound.bytes()[PREFIX_LEN..]);
        // The call took another buffer if it lives on; keep this one.
        let mut inbound = inbound;
        inbound.clear();
        if inbound.capacity() <= 64 << 10 {
            if let Some(spare) = self.spare.last_mut() {
                if spare.inbound.capacity() == 0 {
                    spare.inbound = inbound;
                }
            }
        }
    }

    /// Runs a call whose one request message, held in its buffer, is
    /// compressed.
    #[cold]
    pub(super) fn run_compressed(&mut self, stream: u32, mut call: Box<Call>) {
        let mut inflated = std::mem::take(&mut self.inflated);
        let result = compression::inflate_framed(
            call.inbound.bytes(),
            call.encoding,
            self.max_message,
            &mut inflated,
        );
        call.inbound.clear();
        match result {
            Ok(()) => {
                call.compressed_request = true;
                self.run_single(stream, call, &inflated[PREFIX_LEN..]);
            }
            Err(status) => self.refuse(stream, call, &status),
        }
        fit_room(&mut inflated);
        self.inflated = inflated;
    }

    /// Whether the answer to a call is compressed: the client accepts a
    /// compression, and the handler's `choice`, or else the server's
    /// default, says so.
    #[inline]
    pub(super) fn compress_answer(&self, call: &Call, choice: Option<bool>) -> bool {
        call.accepts_compression() && choice.unwrap_or(self.send_compressed)
    }

    /// Whether `deadline` has passed before the call to `route` on
    /// `stream` could start; if so the call is answered with
    /// DEADLINE_EXCEEDED, and observed with its `request` bytes.
    #[inline(always)]
    pub(super) fn started_too_late(
        &mut self,
        stream: u32,
        route: Route,
        deadline: Option<Instant>,
        request: u64,
    ) -> bool {
        match deadline {
            Some(deadline) => self.passed_before_start(stream, route, deadline, request),
            None => false,
        }
    }

    /// [`GrpcConnection::started_too_late`] for a call with a deadline:
    /// apart, so that a call without one reads no clock.
    #[inline(never)]
    pub(super) fn passed_before_start(
        &mut self,
        stream: u32,
        route: Route,
        deadline: Instant,
        request: u64,
    ) -> bool {
        let now = self.clock.now();
        if deadline > now {
            return false;
        }
        let status = Status::deadline_exceeded("deadline passed before the call started");
        if self.observing {
            self.observe(route, status.code(), now, request, 0);
        }
        self.answer_status(stream, &status);
        true
    }

    /// Answers a routed call with `status` before its handler ran (its
    /// request broke a limit or the protocol), and shows it to the
    /// observers.
    #[cold]
    pub(super) fn refuse(&mut self, stream: u32, call: Box<Call>, status: &Status) {
        if let (true, Some(route)) = (self.observing, call.route) {
            let started = call.started.unwrap_or_else(|| self.clock.now());
            self.observe(route, status.code(), started, call.request_bytes, 0);
        }
        self.recycle(call);
        self.answer_status(stream, status);
    }

    /// Runs the handler of a call whose one request message is `message`.
    pub(super) fn run_single(&mut self, stream: u32, mut call: Box<Call>, message: &[u8]) {
        let route = call.route.expect("only gRPC calls run");
        let request = (message.len() + PREFIX_LEN) as u64;
        if self.started_too_late(stream, route, call.deadline, request) {
            return self.recycle(call);
        }
        if call.capped && route.kind == MethodKind::ServerStreaming {
            // The cap held while the request was awaited; the stream runs
            // (or waits to run) to the client's own deadline, much as with
            // tonic's timeout.
            let longest = self.call_timeout.expect("a capped call");
            call.deadline = uncapped_deadline(call.deadline, call.asked_timeout, longest);
            call.capped = false;
        }
        if self.waits_to_run() {
            return self.park(stream, call, message);
        }
        match route.kind {
            MethodKind::ServerStreaming => self.start_server_stream(stream, call, route, message),
            _ => self.run_unary(stream, Running::Boxed(call), route, message),
        }
    }

    /// As [`GrpcConnection::run_single`] for a call still in its light
    /// record: a unary call runs without a box. Inlined into its two
    /// callers: passing the record to it cost 21 instructions per request.
    #[inline(always)]
    pub(super) fn run_light(&mut self, stream: u32, waiting: Waiting, message: &[u8]) {
        let route = waiting.head.route;
        if route.kind != MethodKind::Unary {
            let call = self.resume(waiting);
            return self.run_single(stream, call, message);
        }
        let request = (message.len() + PREFIX_LEN) as u64;
        if self.started_too_late(stream, route, waiting.deadline(self.epoch), request) {
            return;
        }
        if self.waits_to_run() {
            // Behind the calls that wait already.
            let call = self.resume(waiting);
            return self.park(stream, call, message);
        }
        self.run_unary(stream, Running::Light(waiting), route, message)
    }

    /// Whether the answers held for the client's flow-control windows are
    /// past [`h2::Config::max_held_bytes`](crate::h2::Config): new calls
    /// then wait to run, or are refused (a stream of requests), until the
    /// client reads.
    #[inline(always)]
    pub(super) fn crowded(&self) -> bool {
        self.h2.held_bytes() > self.max_held
    }

    /// Whether a call ready to run waits instead: the connection is
    /// [`crowded`](GrpcConnection::crowded), or other calls wait already
    /// (it goes behind them).
    #[inline(always)]
    pub(super) fn waits_to_run(&self) -> bool {
        self.crowded() || !self.parked.is_empty()
    }

    /// Keeps a call whose request `message` is complete until the client
    /// has read enough of the answers held for it ([`GrpcConnection::crowded`]):
    /// a client that sends many calls at once and reads their answers is
    /// served in turn, not refused, and one that never reads holds its
    /// requests (within `max_buffered_request_bytes`), not their answers.
    #[cold]
    #[inline(never)]
    pub(super) fn park(&mut self, stream: u32, mut call: Box<Call>, message: &[u8]) {
        let framed = PREFIX_LEN + message.len();
        if self.buffered + framed > self.max_buffered {
            let status =
                Status::resource_exhausted("the connection buffers too many incomplete requests");
            return self.refuse(stream, call, &status);
        }
        call.inbound.clear();
        call.inbound.extend(&framing::prefix(message.len()));
        call.inbound.extend(message);
        call.recv_done = true;
        self.buffered += framed;
        if self.parked.len() > 2 * self.calls.len() {
            // Calls that ended while they waited (their deadline passed,
            // the client reset them) left their stream here; while the
            // client does not read, none is taken out.
            let calls = &self.calls;
            self.parked.retain(|&stream| calls.contains_key(stream));
        }
        self.parked.push_back(stream);
        #[cfg(test)]
        {
            self.parks += 1;
        }
        self.keep(stream, call);
    }

    /// Runs the parked calls, in order, while the held answers are within
    /// the limit; a call reset or ended meanwhile is gone from the table.
    #[cold]
    #[inline(never)]
    pub(super) fn run_parked(&mut self) {
        // Taken out while they run, so that none waits behind the others
        // again; calls parked meanwhile (the limit reached again) go after
        // those still waiting.
        let mut parked = std::mem::take(&mut self.parked);
        while !self.crowded() {
            let Some(stream) = parked.pop_front() else {
                break;
            };
            // Gone if it ended meanwhile (reset, deadline): this runs after
            // a read's events, so a reset in that read was seen.
            if let Some(call) = self.take_call(stream) {
                self.finish_collecting(stream, call);
            }
        }
        parked.append(&mut self.parked);
        self.parked = parked;
    }

    pub(super) fn run_unary(
        &mut self,
        stream: u32,
        running: Running,
        route: Route,
        message: &[u8],
    ) {
        // Every answer empties it once sent (`answer_message`,
        // `answer_status`), as does a call that goes to another thread: no
        // call finds another's metadata, and none pays to empty it first.
        debug_assert!(self.response_metadata.is_empty());
        let service = self.router.service(route.service);
        let (metadata, deadline, compressed, compression) = match &running {
            Running::Boxed(call) => (
                call.request_metadata(),
                call.deadline,
                call.compressed_request,
                call.answer_compression,
            ),
            Running::Light(waiting) => (
                &waiting.head.metadata,
                waiting.deadline(self.epoch),
                false,
                waiting.head.answer_compression,
            ),
        };
        // While the kept blocks hold, the message is encoded straight into
        // the output behind its HEADERS frame instead of being copied there.
        // Not for answers that are compressed unless the handler says
        // otherwise: they would be taken back every time.
        let in_place =
            if self.observing || (self.send_compressed && compression != Encoding::Identity) {
                None
            } else {
                self.h2
                    .begin_answer(stream, &self.memos.headers, PREFIX_LEN)
            };
        let reply = if in_place.is_some() {
            self.h2.answer_body()
        } else {
            self.reply.clear();
            self.reply.extend_from_slice(&[0; PREFIX_LEN]);
            &mut self.reply
        };
        let mut ctx = self.env.context(
            stream,
            metadata,
            deadline,
            &mut self.response_metadata,
            true,
            compressed,
        );
        let intercepted = if self.intercepting {
            let info = self.router.call_info(route);
            executor::intercept(self.router.hooks(), &info, &mut ctx)
        } else {
            Ok(())
        };
        ctx.set_request_bytes(message.len());
        let mut outcome = match intercepted {
            Ok(()) => executor::unary(service, route.method as usize, &mut ctx, message, reply),
            Err(status) => Ok(Err(status)),
        };
        let compress = compression != Encoding::Identity
            && ctx.compression_choice().unwrap_or(self.send_compressed);
        let remote = ctx.take_remote();
        if let Some(answer) = in_place {
            // An answer to send, not a status or a deferral.
            let answer_due = matches!(outcome, Ok(Ok(()))) && remote.is_none();
            let plain = answer_due && !compress && self.response_metadata.is_empty();
            let answer = if plain {
                self.h2.finish_answer(answer, &self.memos.ok_trailers)
            } else {
                Err(answer)
            };
            match answer {
                Ok(()) => {
                    self.answered += 1;
                    #[cfg(test)]
                    {
                        self.answered_in_place += 1;
                    }
                    if let Running::Boxed(call) = running {
                        self.recycle(call);
                    }
                    // `Ok(Ok(()))` (`answer_due`): nothing to drop, and the
                    // status's drop glue, called for it, costs 11
                    // instructions per call.
                    std::mem::forget(outcome);
                    return;
                }
                // An answer that did not go goes the general way, from
                // `self.reply`; what else was written is dropped.
                Err(answer) if answer_due => self.h2.take_back_answer(answer, &mut self.reply),
                Err(answer) => self.h2.drop_answer(answer),
            }
        }
        if let Some(shared) = remote {
            if shared.is_refused() {
                outcome = Ok(Err(refused_for_room()));
            } else if outcome.is_ok() {
                // Deferred: the answer comes back through the inbox; what
                // the handler returned does not count.
                let mut call = match running {
                    Running::Boxed(call) => call,
                    Running::Light(waiting) => self.resume(waiting),
                };
                call.compress = compress;
                call.state = State::Remote(Box::new(RemoteCall::new(shared, false)));
                if self.observing {
                    call.started = Some(self.clock.now());
                    call.request_bytes = (message.len() + PREFIX_LEN) as u64;
                }
                // The answer brings its own metadata when it comes back.
                self.response_metadata.clear();
                return self.keep(stream, call);
            }
            shared.cancel(CancelReason::Ended);
        }
        if let Running::Boxed(call) = running {
            self.recycle(call);
        }
        let outcome = outcome.and_then(|inner| inner);
        if self.observing {
            let (code, sent) = match &outcome {
                Ok(()) => (Code::Ok, self.reply.len() as u64),
                Err(status) => (status.code(), 0),
            };
            let request = (message.len() + PREFIX_LEN) as u64;
            self.observe_from_read(route, code, request, sent);
        }
        match outcome {
            Ok(()) => {
                let encoding = if compress {
                    compression
                } else {
                    Encoding::Identity
                };
                self.answer_message(stream, encoding)
            }
            Err(status) => self.answer_status(stream, &status),
        }
    }

    /// Shows the observers a call that ran from the read under way (the
    /// step's time) to now.
    #[inline(never)]
    pub(super) fn observe_from_read(&self, route: Route, code: Code, request: u64, response: u64) {
        self.observe(route, code, self.clock.now(), request, response);
    }

    /// Shows a finished call to the observers.
    pub(super) fn observe(
        &self,
        route: Route,
        code: Code,
        started: Instant,
        request: u64,
        response: u64,
    ) {
        let info = self.router.call_info(route);
        executor::observe(
            self.router.hooks(),
            &FinishedCall {
                service: info.service,
                method: info.method,
                code,
                duration: started.elapsed(),
                request_bytes: request,
                response_bytes: response,
            },
        );
    }

    pub(super) fn start_server_stream(
        &mut self,
        stream: u32,
        mut call: Box<Call>,
        route: Route,
        message: &[u8],
    ) {
        if self.observing {
            call.started = Some(self.clock.now());
            call.request_bytes = (message.len() + PREFIX_LEN) as u64;
        }
        debug_assert!(!call.capped, "lifted as the request came in");
        let service = self.router.service(route.service);
        let compressed = call.compressed_request;
        let mut ctx = self.env.call_context(stream, &mut call, true, compressed);
        ctx.set_request_bytes(message.len());
        let outcome = if self.intercepting {
            let info = self.router.call_info(route);
            executor::intercept(self.router.hooks(), &info, &mut ctx)
        } else {
            Ok(())
        }
        .and_then(|()| executor::server_stream(service, route.method as usize, &mut ctx, message));
        let choice = ctx.compression_choice();
        let remote = ctx.take_remote();
        call.compress = self.compress_answer(&call, choice);
        match (outcome, remote) {
            (Ok(Production::Local(producer)), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                call.state = State::Producing {
                    producer,
                    wake_at: None,
                };
                call.queued = true;
                self.ready.push_back(stream);
                self.keep(stream, call);
            }
            (Ok(Production::Remote), Some(shared)) if shared.is_refused() => {
                self.end_call(stream, call, Some(refused_for_room()));
            }
            (Ok(Production::Remote), Some(shared)) => {
                call.state = State::Remote(Box::new(RemoteCall::new(shared, false)));
                self.keep(stream, call);
            }
            (Ok(Production::Remote), None) => {
                // A channel made outside a server: nothing will answer.
                self.end_call(
                    stream,
                    call,
                    Some(Status::internal("the stream's sink goes nowhere")),
                );
            }
            (Err(status), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                self.end_call(stream, call, Some(status));
            }
        }
    }
}
