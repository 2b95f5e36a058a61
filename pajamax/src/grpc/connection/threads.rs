//! Answers from other threads: the parts their responders and sinks send
//! through the inbox, the credit and requests that go back to them, and
//! what a step (a read, or a batch of parts) leaves to settle.

use super::*;

impl GrpcConnection {
    /// Takes one answer part that came back from another thread; dropped if
    /// its call has ended. Call [`GrpcConnection::settle`] after a batch.
    pub(crate) fn deliver(&mut self, delivery: Delivery) {
        let stream = delivery.stream;
        if let Part::Room = delivery.part {
            return self.feed_starved();
        }
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let encoding = call.answer_encoding();
        let State::Remote(remote) = &mut call.state else {
            return;
        };
        // The headers go first: the thread's own, or those of the call
        // before its first message.
        let headers = match &delivery.part {
            Part::Headers(metadata) => Some(metadata),
            Part::Message(_) => Some(&call.response.headers),
            _ => None,
        };
        if let Some(metadata) = headers {
            send_headers_once(
                &mut self.h2,
                &mut self.memos,
                &mut self.overlarge,
                stream,
                &mut call.headers_sent,
                metadata,
                encoding,
            );
        }
        match delivery.part {
            Part::Headers(_) => {}
            Part::Message(mut bytes) => {
                call.response_bytes += bytes.len() as u64;
                if remote.backlog.is_empty()
                    && send_remote(
                        &mut self.h2,
                        &mut self.deflated,
                        stream,
                        remote,
                        encoding,
                        &mut bytes,
                    )
                {
                    self.touch(stream);
                } else {
                    remote.backlog.push_back(bytes);
                }
            }
            Part::Finish { status, trailers } => {
                call.response.trailers = trailers;
                if remote.backlog.is_empty() {
                    let call = self.take_call(stream).expect("found above");
                    self.end_call(stream, call, status);
                } else {
                    remote.finish = Some(status);
                }
            }
            Part::Answer {
                result,
                headers,
                trailers,
            } => {
                let call = self.take_call(stream).expect("found above");
                if let State::Remote(remote) = &call.state {
                    // Answered: a thread that still reads the requests of
                    // a client stream learns that they end here.
                    remote.shared.cancel(CancelReason::Ended);
                }
                if let (true, Some(started), Some(route)) =
                    (self.observing, call.started, call.route)
                {
                    let (code, sent) = match &result {
                        Ok(framed) => (Code::Ok, framed.len() as u64),
                        Err(status) => (status.code(), 0),
                    };
                    self.observe(route, code, started, call.request_bytes, sent);
                }
                self.recycle(call);
                self.response_metadata.clear();
                self.response_metadata.headers = headers;
                self.response_metadata.trailers = trailers;
                match result {
                    Ok(framed) => {
                        // It did not wait: the connection's sinks wait
                        // for it instead.
                        self.env.answer_to.lent.spend(framed.len());
                        self.lent_due += framed.len();
                        // Send from the answer's buffer, keeping the reply
                        // buffer (and its room) for the calls answered
                        // inline.
                        let inline = std::mem::replace(&mut self.reply, framed);
                        self.answer_message(stream, encoding);
                        self.reply = inline;
                    }
                    Err(status) => self.answer_status(stream, &status),
                }
            }
            Part::Resume => {
                remote.incoming_blocked = false;
                self.pump(stream);
            }
            Part::Room => unreachable!("taken above"),
        }
    }

    /// Offers their request messages again to the threads of the calls
    /// that waited for room in the connection's share.
    pub(super) fn feed_starved(&mut self) {
        let starved = std::mem::take(&mut self.starved);
        for &stream in &starved {
            let Some(call) = self.calls.get_mut(stream) else {
                continue;
            };
            let State::Remote(remote) = &mut call.state else {
                continue;
            };
            remote.starved = false;
            if remote.incoming_blocked {
                remote.incoming_blocked = false;
                self.pump(stream);
            }
        }
        if self.starved.is_empty() {
            // Keep the room.
            self.starved = starved;
            self.starved.clear();
        }
    }

    /// Sends what a remote call's stream could not take before, and its
    /// end once all of it is out.
    pub(super) fn drain_backlog(&mut self, stream: u32) {
        let Some(call) = self.calls.get_mut(stream) else {
            return;
        };
        let encoding = call.answer_encoding();
        let State::Remote(remote) = &mut call.state else {
            return;
        };
        while let Some(mut bytes) = remote.backlog.pop_front() {
            if !send_remote(
                &mut self.h2,
                &mut self.deflated,
                stream,
                remote,
                encoding,
                &mut bytes,
            ) {
                remote.backlog.push_front(bytes);
                return;
            }
        }
        if let Some(status) = remote.finish.take() {
            let call = self.take_call(stream).expect("found above");
            self.end_call(stream, call, status);
        }
    }

    pub(super) fn touch(&mut self, stream: u32) {
        if !self.touched.contains(&stream) {
            self.touched.push(stream);
        }
    }

    /// Does what deliveries and events left to do: returns credit to the
    /// threads whose answer bytes left for the client, and pulls the
    /// producers that may send.
    pub fn settle(&mut self, now: Instant) {
        self.settle_at(Some(now));
    }

    /// As [`GrpcConnection::settle`]; with no time given (`None`), the
    /// system clock is read if a producer needs the time.
    pub(crate) fn settle_at(&mut self, now: Option<Instant>) {
        self.clock = Clock::new(now);
        self.settle_step();
    }

    /// [`GrpcConnection::settle`] at the time of `self.clock`.
    #[inline]
    pub(super) fn settle_step(&mut self) {
        // What a step may leave to do is nearly always nothing: one test
        // of the lengths together, not a branch for each (-4 instructions
        // per read, docs/benchmarks.md).
        let pending = self.new_deadlines.len()
            | self.parked.len()
            | self.touched.len()
            | self.ready.len()
            | self.lent_due
            | self.overlarge.len();
        if pending != 0 {
            self.settle_pending();
        }
        debug_assert!(
            !self.calls.is_empty() || self.metadata_bytes == 0,
            "every call gives back the metadata it counted"
        );
    }

    /// Puts the deadlines of the calls opened since on the timer, runs the
    /// calls that wait for room and the producers, and ends the calls
    /// whose response headers were too large. Out of line: inlined, the
    /// test above kept the lengths it loaded for it.
    #[inline(never)]
    pub(super) fn settle_pending(&mut self) {
        if !self.new_deadlines.is_empty() {
            self.arm_deadlines();
        }
        if !self.parked.is_empty() {
            self.run_parked();
        }
        if !self.touched.is_empty() || !self.ready.is_empty() || self.lent_due > 0 {
            self.run_producers();
        }
        if !self.overlarge.is_empty() {
            self.end_overlarge();
        }
    }

    /// Ends with `INTERNAL` the calls whose response headers went without
    /// their metadata, which the client's header list size limit would
    /// have refused (a call that ended meanwhile kept its status). Their
    /// producers are dropped, their threads see the call cancelled.
    #[cold]
    pub(super) fn end_overlarge(&mut self) {
        for stream in std::mem::take(&mut self.overlarge) {
            if let Some(call) = self.take_call(stream) {
                let status = Status::internal(
                    "the response headers are larger than the client's header list size limit",
                );
                self.end_call(stream, call, Some(status));
            }
        }
    }

    /// Returns credit to the threads whose answer bytes left their stream
    /// for the output.
    pub(super) fn return_credit(&mut self) {
        for stream in self.touched.drain(..) {
            let Some(call) = self.calls.get_mut(stream) else {
                continue;
            };
            let State::Remote(remote) = &mut call.state else {
                continue;
            };
            let gone = remote.unacked.saturating_sub(self.h2.buffered(stream));
            remote.unacked -= gone;
            let credit = gone + std::mem::take(&mut remote.owed);
            if credit > 0 {
                remote.shared.return_credit(credit);
            }
        }
        if self.lent_due > 0 {
            self.env
                .answer_to
                .lent
                .give(std::mem::take(&mut self.lent_due));
        }
    }
}
