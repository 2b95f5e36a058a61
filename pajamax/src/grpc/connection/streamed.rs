//! Calls with a stream of request messages: client-streaming and
//! bidirectional calls, their messages handed to a handler on the worker or
//! to a thread.

use super::*;

impl GrpcConnection {
    /// Starts a client-streaming or bidirectional call: its handler runs
    /// as the request headers arrive.
    pub(super) fn start_inbound(&mut self, stream: u32, mut call: Box<Call>, route: Route) {
        if self.started_too_late(stream, route, call.deadline, 0) {
            return self.recycle(call);
        }
        if self.observing {
            call.started = Some(self.clock.now());
        }
        let service = self.router.service(route.service);
        let mut ctx = self.env.call_context(stream, &mut call, true, false);
        let outcome = if self.intercepting {
            let info = self.router.call_info(route);
            executor::intercept(self.router.hooks(), &info, &mut ctx)
        } else {
            Ok(())
        }
        .and_then(|()| executor::inbound(service, route.kind, route.method as usize, &mut ctx));
        let choice = ctx.compression_choice();
        let remote = ctx.take_remote();
        call.compress = self.compress_answer(&call, choice);
        match (outcome, remote) {
            (Ok(Inbound::Local(handler)), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                call.state = State::Handling {
                    handler,
                    blocked: false,
                };
            }
            (Ok(Inbound::Remote), Some(shared)) => {
                call.state = State::Remote(Box::new(RemoteCall::new(shared, true)));
            }
            (Ok(Inbound::Remote), None) => {
                let status = Status::internal("the stream's channel goes nowhere");
                return self.end_call(stream, call, Some(status));
            }
            (Err(status), remote) => {
                if let Some(shared) = remote {
                    shared.cancel(CancelReason::Ended);
                }
                return self.end_call(stream, call, Some(status));
            }
        }
        if call.deadline.is_some() {
            self.new_deadlines.push(stream);
        }
        let recv_done = call.recv_done;
        self.calls.insert(stream, call);
        if recv_done {
            self.pump(stream);
        }
    }

    /// Request bytes of a streaming call: kept, then handed on as complete
    /// messages.
    pub(super) fn take_in(&mut self, stream: u32, data: &[u8]) {
        let held = self.buffered + data.len();
        if held > self.max_buffered
            && (held > self.max_buffered.saturating_mul(2) || !self.awaited(stream))
        {
            let call = self.take_call(stream).expect("checked by the caller");
            let status =
                Status::resource_exhausted("the connection buffers too many request messages");
            return self.end_call(stream, call, Some(status));
        }
        let call = self.calls.get_mut(stream).expect("checked by the caller");
        call.inbound.extend(data);
        call.unreleased += data.len();
        self.buffered += data.len();
        self.pump(stream);
    }

    /// Whether the call's thread reads it and takes this stream's next
    /// request message next (it may still be busy with the last one): the
    /// bytes of that message are kept past the connection's limit, as they
    /// are queued past its share once the thread waits for it. The room
    /// may be held by the calls queued behind that very thread (dispatch
    /// mode), which it reads once it is done with this one: ended for
    /// their bytes, the call it reads could not go on. So a connection
    /// holds at most one message more for each call a thread reads,
    /// and never more than twice its limit: a client may leave each of
    /// those messages incomplete for as long as it likes, on as many
    /// streams as it may open.
    #[cold]
    fn awaited(&self, stream: u32) -> bool {
        match self.calls.get(stream).map(|call| &call.state) {
            Some(State::Remote(remote)) => !remote.incoming_blocked && remote.shared.reads_on(),
            _ => false,
        }
    }

    /// Hands the complete request messages of a streaming call to whoever
    /// takes them, as far as they take them; then opens the client's window
    /// for what was taken, and ends the request side once the client is
    /// done.
    pub(super) fn pump(&mut self, stream: u32) {
        // What a handler answers to the messages of one read leaves
        // together, in as few DATA frames as it fills.
        self.outgoing.clear();
        loop {
            let Some(call) = self.calls.get_mut(stream) else {
                return;
            };
            let compressed_ok = call.encoding != Encoding::Identity;
            // Messages are taken until none is complete or the taker holds
            // them back (`Ok(false)`), or until the answers so far are to
            // go out first (`Ok(true)`: then the call is looked up again);
            // an error ends the call.
            let stop: Result<bool, Status> = loop {
                let range = match call.inbound.next_message(self.max_message, compressed_ok) {
                    Ok(Some(range)) => range,
                    Ok(None) => break Ok(false),
                    Err(status) => break Err(status),
                };
                let mut framed = &call.inbound.bytes()[range.clone()];
                let compressed = framing::is_compressed(framed);
                if compressed {
                    let inflated = &mut self.inflated;
                    if let Err(status) = compression::inflate_framed(
                        framed,
                        call.encoding,
                        self.max_message,
                        inflated,
                    ) {
                        break Err(status);
                    }
                    framed = inflated;
                }
                // The message as the handler takes it, inflated: as a unary
                // call's request counts.
                let message_len = framed.len() as u64;
                let taken = match &mut call.state {
                    State::Handling { handler, blocked } => {
                        if *blocked {
                            break Ok(false);
                        }
                        let out = &mut self.outgoing;
                        let metadata = call::request_metadata(&call.shared, &call.metadata);
                        let mut ctx = self.env.context(
                            stream,
                            metadata,
                            call.deadline,
                            &mut call.response,
                            false,
                            compressed,
                        );
                        let message = &framed[PREFIX_LEN..];
                        let outcome =
                            executor::on_message(handler.as_mut(), &mut ctx, message, out);
                        if let Some(choice) = ctx.compression_choice() {
                            if !call.headers_sent {
                                call.compress = call.accepts_compression() && choice;
                            }
                        }
                        if let Err(status) = outcome {
                            // Taken all the same, as a thread's message
                            // that it fails on counts once queued.
                            call.request_bytes += message_len;
                            break Err(status);
                        }
                        true
                    }
                    State::Remote(remote) => {
                        if remote.incoming_blocked {
                            break Ok(false);
                        }
                        match remote.shared.offer(framed) {
                            Offered::Queued => false,
                            Offered::CallFull => {
                                remote.incoming_blocked = true;
                                break Ok(false);
                            }
                            Offered::ConnectionFull => {
                                remote.incoming_blocked = true;
                                if std::mem::replace(&mut remote.starved, true) {
                                    // Listed already, and resumed by its
                                    // thread since.
                                    break Ok(false);
                                }
                                if self.starved.len() > self.calls.len() {
                                    // Rid of calls that ended while they waited.
                                    let calls = &self.calls;
                                    self.starved.retain(|&s| calls.get(s).is_some());
                                }
                                self.starved.push(stream);
                                break Ok(false);
                            }
                        }
                    }
                    _ => return,
                };
                call.inbound.consume(range.len());
                call.request_bytes += message_len;
                self.buffered -= range.len();
                if taken
                    && (self.outgoing.messages.len() >= PRODUCE_CHUNK || self.outgoing.headers_now)
                {
                    break Ok(true);
                }
            };
            fit_room(&mut self.inflated);
            match stop {
                Ok(true) => self.send_outgoing(stream),
                Ok(false) => break,
                Err(status) => {
                    // The answers to the messages before it go first.
                    let mut call = self.take_call(stream).expect("found above");
                    self.flush_outgoing(stream, &mut call);
                    return self.end_call(stream, call, Some(status));
                }
            }
        }
        if !self.outgoing.messages.is_empty() || self.outgoing.headers_now {
            self.send_outgoing(stream);
        }
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let blocked = match &call.state {
            State::Handling { blocked, .. } => *blocked,
            State::Remote(remote) => remote.incoming_blocked,
            _ => false,
        };
        if blocked {
            return;
        }
        // Taken in: what remains is at most one incomplete message, bounded
        // by the message size limit.
        if call.unreleased > 0 {
            let unreleased = std::mem::take(&mut call.unreleased);
            self.h2.release_capacity(stream, unreleased);
        }
        let call = self.calls.get_mut(stream).expect("found above");
        if !call.recv_done {
            return;
        }
        if !call.inbound.is_empty() {
            let call = self.take_call(stream).expect("found above");
            let status = Status::internal("request message truncated");
            return self.end_call(stream, call, Some(status));
        }
        match &mut call.state {
            State::Handling { .. } => {
                // The handler's last turn: `on_end` drops it.
                let State::Handling { handler, .. } = std::mem::take(&mut call.state) else {
                    unreachable!("matched above")
                };
                let out = &mut self.outgoing;
                out.clear();
                // A client-streaming handler may answer from a thread.
                let client_streaming = call
                    .route
                    .is_some_and(|r| r.kind == MethodKind::ClientStreaming);
                let mut ctx = self.env.call_context(stream, call, client_streaming, false);
                let outcome = executor::on_end(handler, &mut ctx, out);
                let choice = ctx.compression_choice();
                let remote = ctx.take_remote();
                let mut call = self.take_call(stream).expect("found above");
                if let (Some(choice), false) = (choice, call.headers_sent) {
                    call.compress = call.accepts_compression() && choice;
                }
                if let Some(shared) = remote {
                    if outcome.is_ok() {
                        call.state = State::Remote(Box::new(RemoteCall::new(shared, false)));
                        return self.keep(stream, call);
                    }
                    shared.cancel(CancelReason::Ended);
                }
                // What the handler sent goes before its status, also
                // before an error it returned (as from `on_message`); not
                // after a panic.
                if outcome.is_ok() {
                    self.flush_outgoing(stream, &mut call);
                }
                let outcome = outcome.and_then(|inner| inner);
                self.end_call(stream, call, outcome.err());
            }
            State::Remote(remote) if remote.incoming => {
                remote.incoming = false;
                remote.shared.end_incoming(None);
            }
            _ => {}
        }
    }

    /// Sends what the handler just produced; marks it blocked when the
    /// stream's send buffer is full.
    pub(super) fn send_outgoing(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        send_produced(
            &mut self.h2,
            &mut self.memos,
            &mut self.overlarge,
            &mut self.deflated,
            &mut self.outgoing,
            stream,
            call,
        );
        if let State::Handling { blocked, .. } = &mut call.state {
            *blocked = call.headers_sent && self.h2.send_capacity(stream) == 0;
        }
        self.outgoing.clear();
    }

    /// Sends what the handler produced on a call already taken out of the
    /// table.
    pub(super) fn flush_outgoing(&mut self, stream: u32, call: &mut Call) {
        send_produced(
            &mut self.h2,
            &mut self.memos,
            &mut self.overlarge,
            &mut self.deflated,
            &mut self.outgoing,
            stream,
            call,
        );
    }
}

/// Sends the response headers of `call` (once) and the messages a handler
/// call put in `out`, if it asked for either. The pump calls a handler
/// only while its stream takes more, so the stream takes them all.
fn send_produced(
    h2: &mut Connection,
    memos: &mut response::Memos,
    overlarge: &mut Vec<u32>,
    deflated: &mut Vec<u8>,
    out: &mut Outgoing,
    stream: u32,
    call: &mut Call,
) {
    if !out.headers_now && out.messages.is_empty() {
        return;
    }
    let encoding = call.answer_encoding();
    send_headers_once(
        h2,
        memos,
        overlarge,
        stream,
        &mut call.headers_sent,
        &call.response.headers,
        encoding,
    );
    if !out.messages.is_empty() {
        call.response_bytes += out.messages.len() as u64;
        let data = out.data(encoding, deflated);
        let sent = h2.send_data(stream, data, false);
        debug_assert!(
            sent == data.len() || h2.error().is_some(),
            "delivery waits for room"
        );
        fit_room(deflated);
        // Sent: a large answer does not leave its room with the
        // connection.
        fit_room(&mut out.messages);
    }
}
