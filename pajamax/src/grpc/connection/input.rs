//! The reading of requests: the h2 events of each read turned into calls
//! opened, request bodies taken in, resets and open windows passed on to
//! the calls they concern.

use super::*;

/// A new request, once its headers are read.
enum Opened {
    /// Answered, started, or kept: nothing more to do now.
    Done,
    /// Waits for its body.
    Full(Box<Call>),
    /// Waits for its body, as a light record.
    Light(Waiting),
}

impl GrpcConnection {
    /// Processes the complete frames at the start of `input`, runs every
    /// request they complete, and returns how many bytes it used. `now` is
    /// the time the bytes were read, for deadlines.
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        let mut events = std::mem::take(&mut self.events);
        let used = self.recv_at(input, Some(now), &mut events);
        events.clear();
        if events.capacity() > KEPT_EVENTS {
            // Many connections that each once read a hundred requests at a
            // time would hold 8 KiB apiece.
            events.shrink_to(KEPT_EVENTS);
        }
        self.events = events;
        used
    }

    /// As [`GrpcConnection::recv`]; with no time given (`None`), the system
    /// clock is read when a request first needs the time (a deadline, a
    /// producer), or at once on a connection with observers, which time
    /// each call from the read that brought it. `events` is room for the
    /// read's h2 events, emptied first: the worker's one list for every
    /// connection, instead of a list each connection takes out of itself
    /// and puts back at every read.
    pub(crate) fn recv_at(
        &mut self,
        input: &[u8],
        now: Option<Instant>,
        events: &mut Vec<Event>,
    ) -> usize {
        self.clock = Clock::new(now);
        if self.observing {
            self.clock.now();
        }
        events.clear();
        let used = self.h2.recv(input, events);
        if self.h2.error().is_some() {
            // The connection has failed: its streams are gone, and so are
            // the calls, whatever the batch held.
            events.clear();
            self.end_all_calls();
        }
        let mut bodies = BodiesAhead::default();
        for (at, event) in events.iter().enumerate() {
            match *event {
                Event::Request {
                    stream,
                    ref fields,
                    end_stream,
                    too_large,
                    block_id,
                } => {
                    let fields = fields.clone();
                    let opened = self.on_request(stream, fields, end_stream, too_large, block_id);
                    if let Opened::Done = opened {
                        continue;
                    }
                    // The body that ends the request in this same read is
                    // taken without a trip through a table.
                    let body = bodies.find(events, at, stream);
                    match (opened, body) {
                        (Opened::Full(call), Some(data))
                            if self.is_whole_request(&call, &input[data.clone()]) =>
                        {
                            bodies.take();
                            self.run_single(stream, call, &input[data][PREFIX_LEN..]);
                        }
                        (Opened::Light(waiting), Some(data))
                            if self.is_whole_message(&input[data.clone()]) =>
                        {
                            bodies.take();
                            self.run_light(stream, waiting, &input[data][PREFIX_LEN..]);
                        }
                        (Opened::Full(call), _) => self.wait_for_body(stream, call),
                        (Opened::Light(waiting), _) => {
                            if waiting.has_deadline() {
                                self.new_deadlines.push(stream);
                            }
                            #[cfg(test)]
                            {
                                self.waits += 1;
                            }
                            let tag = self.waiting.insert(stream, waiting);
                            self.h2.set_tag(stream, tag);
                        }
                        (Opened::Done, _) => {}
                    }
                }
                Event::Data {
                    stream,
                    ref data,
                    end_stream,
                } => {
                    if !bodies.taken(at) {
                        self.on_data(stream, &input[data.clone()], end_stream);
                    }
                }
                Event::Reset { stream, tag } => self.on_reset(stream, tag),
                Event::Writable { stream } => self.on_writable(stream),
            }
        }
        self.settle_step();
        used
    }

    /// Answers a request whose header list is past the limit.
    #[cold]
    #[inline(never)]
    fn refuse_too_large(&mut self, stream: u32) -> Opened {
        let status = Status::resource_exhausted("request header list too large");
        self.answer_status(stream, &status);
        Opened::Done
    }

    /// A new request: answered at once, started, or returned to wait for
    /// its body.
    #[allow(clippy::too_many_arguments)]
    fn on_request(
        &mut self,
        stream: u32,
        fields: std::ops::Range<usize>,
        end_stream: bool,
        too_large: bool,
        block_id: u64,
    ) -> Opened {
        if too_large {
            return self.refuse_too_large(stream);
        }
        let repeated = self.repeated.find(block_id);
        if let Some(head) = &repeated {
            if !end_stream
                && matches!(
                    head.route.kind,
                    MethodKind::Unary | MethodKind::ServerStreaming
                )
            {
                // Until its body comes, the call is its head and deadline.
                let deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
                return Opened::Light(Waiting::new(
                    repeated.expect("matched"),
                    deadline,
                    self.epoch,
                ));
            }
        }
        self.open_call(stream, fields, end_stream, block_id, repeated)
    }

    /// A new request that needs a call of its own at once: a head not seen
    /// before, or one that ends the request or opens a stream of requests.
    // Not inlined: in `recv`'s loop, this path kept values at hand for
    // every read of a repeated head (`docs/benchmarks.md`).
    #[inline(never)]
    fn open_call(
        &mut self,
        stream: u32,
        fields: std::ops::Range<usize>,
        end_stream: bool,
        block_id: u64,
        repeated: Option<std::rc::Rc<SharedHead>>,
    ) -> Opened {
        let mut call = self.spare.pop().unwrap_or_default();
        call.recv_done = end_stream;
        let route = match repeated {
            // The same header block as a call before: the same route,
            // timeout and metadata.
            Some(head) => {
                let route = head.route;
                let deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
                call.resume(Waiting::new(head, deadline, self.epoch), self.epoch);
                Some(route)
            }
            None => match self.read_head(&mut call, fields, block_id) {
                Ok(route) => {
                    if !self.count_metadata(&mut call) {
                        self.recycle(call);
                        self.h2.reset_stream(stream, Reason::REFUSED_STREAM);
                        return Opened::Done;
                    }
                    route
                }
                Err(status) => {
                    self.recycle(call);
                    self.answer_status(stream, &status);
                    return Opened::Done;
                }
            },
        };
        if let Some(route) = route {
            call.route = Some(route);
            if matches!(
                route.kind,
                MethodKind::ClientStreaming | MethodKind::BidiStreaming
            ) {
                if self.crowded() {
                    // Its messages would wait with it; refused, as the
                    // request was not looked at (the client may retry).
                    self.recycle(call);
                    self.h2.reset_stream(stream, Reason::REFUSED_STREAM);
                    return Opened::Done;
                }
                self.start_inbound(stream, call, route);
                return Opened::Done;
            }
        }
        if end_stream {
            self.finish_collecting(stream, call);
            return Opened::Done;
        }
        Opened::Full(call)
    }

    /// Counts the request metadata `call` holds of its own in the
    /// connection's; `false` (nothing counted) past the limit.
    fn count_metadata(&mut self, call: &mut Call) -> bool {
        let size = call.metadata.list_size();
        if size > 0 && self.metadata_bytes + size > self.max_metadata {
            return false;
        }
        self.metadata_bytes += size;
        call.metadata_counted = size;
        true
    }

    /// Keeps a call until its request body arrives.
    // Not inlined, as `on_data`, `on_reset` and `on_writable`: in `recv`'s
    // loop, paths a read of whole requests does not take made every read
    // set up their state (18 instructions per request at M=1).
    #[inline(never)]
    fn wait_for_body(&mut self, stream: u32, call: Box<Call>) {
        #[cfg(test)]
        {
            self.waits += 1;
        }
        if call.deadline.is_some() {
            self.new_deadlines.push(stream);
        }
        self.calls.insert(stream, call);
    }

    /// Whether `data`, the body that ends a new call's request, is its one
    /// whole message, to be run without a copy.
    #[inline]
    fn is_whole_request(&self, call: &Call, data: &[u8]) -> bool {
        call.inbound.is_empty()
            && matches!(call.state, State::Collecting)
            && call.route.is_some()
            && self.is_whole_message(data)
    }

    /// Whether `data` is one whole uncompressed message within the limit.
    #[inline]
    fn is_whole_message(&self, data: &[u8]) -> bool {
        framing::message_len(data) == Some(data.len())
            && framing::check_prefix(data, self.max_message, false).is_ok()
    }

    /// Reads a request's head into `call`: its route (`None` for a request
    /// that is not gRPC), deadline and metadata, or the status that answers
    /// it. Remembers a gRPC head by its block id.
    fn read_head(
        &mut self,
        call: &mut Call,
        fields: std::ops::Range<usize>,
        block_id: u64,
    ) -> Result<Option<Route>, Status> {
        let (list, fields) = self.h2.request_fields(fields, block_id);
        let mut head = head::parse(list.classified(fields.clone()), &mut call.metadata);
        call.answer_compression = head.answer_compression();
        if !head.is_grpc {
            // Its method decides its answer (405 or 415): looked up here,
            // off the way of gRPC requests.
            let method = list
                .classified(fields)
                .find(|field| matches!(field.kind, FieldKind::Method))
                .map_or(&b""[..], |field| field.value);
            call.not_grpc = NotGrpc::of(method);
            call.deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
            return Ok(None);
        }
        let route = match self.last_route {
            // The same table entry or remembered literal: the same path.
            Some((id, route)) if id == head.path_id && id != 0 => Some(route),
            _ => {
                let route = self.router.route(head.path);
                if let Some(route) = route {
                    self.last_route = Some((head.path_id, route));
                }
                route
            }
        };
        let problem = match route {
            None => Some(unimplemented_status(&self.router, head.path)),
            Some(_) if head.encoding.is_none() => Some(Status::unimplemented(
                "the request's grpc-encoding is not supported; use gzip, deflate or identity",
            )),
            Some(_) => None,
        };
        if let Some(status) = problem {
            if self.observing {
                let path = String::from_utf8_lossy(head.path);
                let (service, method) = path
                    .trim_start_matches('/')
                    .split_once('/')
                    .unwrap_or((&path, ""));
                executor::observe(
                    self.router.hooks(),
                    &FinishedCall {
                        service,
                        method,
                        code: status.code(),
                        duration: self.clock.now().elapsed(),
                        request_bytes: 0,
                        response_bytes: 0,
                    },
                );
            }
            return Err(status);
        }
        let route = route.expect("checked above");
        let asked_timeout = head.timeout;
        if let Some(longest) = self.call_timeout {
            // Kept with the head for the requests that repeat its block. A
            // server stream is capped only until its request is in
            // (`run_single`).
            if route.kind != MethodKind::BidiStreaming {
                head.timeout = Some(head.timeout.map_or(longest, |asked| asked.min(longest)));
            }
        }
        call.deadline = head.timeout.and_then(|d| self.clock.now().checked_add(d));
        call.asked_timeout = asked_timeout;
        call.capped = head.timeout != asked_timeout;
        call.encoding = head.encoding.expect("checked above");
        if block_id != 0 {
            self.repeated.insert(SharedHead {
                block_id,
                route,
                timeout: head.timeout,
                asked_timeout,
                encoding: call.encoding,
                answer_compression: call.answer_compression,
                metadata: call.metadata.clone(),
            });
        }
        Ok(Some(route))
    }

    #[inline(never)]
    fn on_data(&mut self, stream: u32, data: &[u8], end_stream: bool) {
        if !self.waiting.is_empty() {
            let tag = self.h2.take_tag(stream);
            if let Some(waiting) = self.waiting.take(tag, stream) {
                if end_stream && self.is_whole_message(data) {
                    return self.run_light(stream, waiting, &data[PREFIX_LEN..]);
                }
                let call = self.resume(waiting);
                self.calls.insert(stream, call);
            }
        }
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        if call.inbound.is_empty()
            && end_stream
            && matches!(call.state, State::Collecting)
            && call.route.is_some()
            && framing::message_len(data) == Some(data.len())
            && framing::check_prefix(data, self.max_message, false).is_ok()
        {
            // The whole message is in this frame: no copy, and one look-up
            // of the call.
            let call = self.calls.remove(stream).expect("found above");
            return self.run_single(stream, call, &data[PREFIX_LEN..]);
        }
        if end_stream {
            call.recv_done = true;
        }
        match &call.state {
            State::Collecting => {}
            State::Handling { .. } => return self.take_in(stream, data),
            State::Remote(remote) if remote.incoming => return self.take_in(stream, data),
            // The request is complete; what follows is not the handler's.
            State::Producing { .. } | State::Remote(_) => {
                return self.h2.release_capacity(stream, data.len())
            }
        }
        if call.route.is_none() {
            // Not gRPC: the body is discarded.
            if !end_stream {
                self.h2.release_capacity(stream, data.len());
                return;
            }
            let call = self.take_call(stream).expect("found above");
            return self.finish_collecting(stream, call);
        }
        if self.buffered + data.len() > self.max_buffered {
            let call = self.take_call(stream).expect("found above");
            let status =
                Status::resource_exhausted("the connection buffers too many incomplete requests");
            return self.refuse(stream, call, &status);
        }
        call.inbound.extend(data);
        self.buffered += data.len();
        let bytes = call.inbound.bytes();
        let compressed_ok = call.encoding != Encoding::Identity;
        let problem = match framing::check_prefix(bytes, self.max_message, compressed_ok) {
            Err(status) => Some(status),
            Ok(()) if framing::message_len(bytes).is_some_and(|total| bytes.len() > total) => Some(
                Status::internal("more than one request message in a unary call"),
            ),
            Ok(()) => None,
        };
        if let Some(status) = problem {
            let call = self.take_call(stream).expect("found above");
            return self.refuse(stream, call, &status);
        }
        if end_stream {
            let call = self.take_call(stream).expect("found above");
            self.finish_collecting(stream, call);
        } else {
            // Bounded by the message size limit: let the client go on.
            self.h2.release_capacity(stream, data.len());
        }
    }

    #[inline(never)]
    fn on_reset(&mut self, stream: u32, tag: u32) {
        if let Some(waiting) = self.waiting.take(tag, stream) {
            self.observe_waiting_cancelled(&waiting);
            return;
        }
        if let Some(call) = self.take_call(stream) {
            self.end_cancelled(call, CancelReason::Cancelled);
        }
    }

    #[inline(never)]
    fn on_writable(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        match &mut call.state {
            State::Collecting => {}
            State::Producing { wake_at, .. } => {
                if wake_at.is_none() && !call.queued {
                    call.queued = true;
                    self.ready.push_back(stream);
                }
            }
            State::Handling { blocked, .. } => {
                // Writable comes whenever held bytes went out, also while
                // the stream still holds its whole send buffer: the handler
                // runs again only once its answers are taken (the stream
                // refuses them otherwise, and they would be lost). A later
                // Writable comes as more of the held bytes go.
                if *blocked && self.h2.send_capacity(stream) > 0 {
                    *blocked = false;
                    self.pump(stream);
                }
            }
            State::Remote(_) => {
                self.drain_backlog(stream);
                self.touch(stream);
            }
        }
    }
}
