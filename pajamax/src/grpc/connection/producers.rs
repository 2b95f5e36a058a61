//! Producers on the worker: server streams pulled as far as the client's
//! windows and the output allow.

use super::*;

impl GrpcConnection {
    /// Pulls the producers that may send, each in turn, until they wait,
    /// the output holds [`GrpcConfig::produce_output_limit`] bytes, or the
    /// connection holds [`h2::Config::max_held_bytes`](crate::h2::Config)
    /// for the client's windows; call again after writing while
    /// [`GrpcConnection::wants_to_produce`].
    pub fn produce(&mut self, now: Instant) {
        self.produce_at(Some(now));
    }

    /// As [`GrpcConnection::produce`]; with no time given (`None`), the
    /// system clock is read if a producer needs the time.
    pub(crate) fn produce_at(&mut self, now: Option<Instant>) {
        self.clock = Clock::new(now);
        self.run_producers();
    }

    /// [`GrpcConnection::produce`] at the time of `self.clock`.
    pub(super) fn run_producers(&mut self) {
        if self.credit_due() {
            self.return_credit();
        }
        let mut turns = self.ready.len();
        // A producer asked to be called at a time: its entry stays on the
        // timer until then, also if its call ends first (reset).
        let mut paced = false;
        while turns > 0 {
            turns -= 1;
            if self.h2.output_len() >= self.produce_limit || self.h2.held_bytes() >= self.max_held {
                // Again once the socket took the output, or the client's
                // windows let held bytes out (a Writable event).
                break;
            }
            let Some(stream) = self.ready.pop_front() else {
                break;
            };
            let Some(call) = self.calls.get_mut(stream) else {
                continue;
            };
            call.queued = false;
            let State::Producing { producer, wake_at } = &mut call.state else {
                continue;
            };
            let room = if !call.headers_sent {
                PRODUCE_CHUNK
            } else if self.h2.buffered(stream) > 0 {
                // Its held bytes go first; a Writable event brings it back
                // when they go out.
                0
            } else {
                // As much as the windows let out now, so that the messages
                // go straight into the output. A stream whose windows are
                // shut makes nothing: it waits for the Writable event that
                // says they opened, and then makes its messages into the
                // output (not into its send buffer, to be copied from there
                // later).
                match self.h2.send_window(stream) {
                    0 => {
                        self.h2.await_room(stream);
                        0
                    }
                    open => open,
                }
            };
            let budget = room.min(PRODUCE_CHUNK);
            if budget == 0 {
                continue;
            }
            let mut end = None;
            let timers = &mut self.timers;
            // Read once for the producer's turn, not for each message.
            let now = self.clock.now();
            let compress = call.compress;
            let mut pull = |out: &mut Vec<u8>| {
                let start = out.len();
                while out.len() - start < budget {
                    match executor::pull(producer.as_mut(), now, out, compress) {
                        RawNext::Message => {}
                        RawNext::Wait(at) => {
                            *wake_at = Some(at);
                            timers.add(at, stream);
                            paced = true;
                            break;
                        }
                        RawNext::End(result) => {
                            end = Some(result.err());
                            break;
                        }
                    }
                }
            };
            // With the headers out and the windows open, the messages are
            // encoded straight into the output.
            let in_place = if call.headers_sent && !call.compress {
                self.h2.send_data_in_place(stream, &mut pull)
            } else {
                None
            };
            if in_place.is_none() {
                self.scratch.clear();
                pull(&mut self.scratch);
            }
            let waiting = wake_at.is_some();
            if let Some(made) = in_place {
                call.response_bytes += made as u64;
            } else if !self.scratch.is_empty() {
                let encoding = call.answer_encoding();
                send_headers_once(
                    &mut self.h2,
                    &mut self.memos,
                    &mut self.overlarge,
                    stream,
                    &mut call.headers_sent,
                    &call.response.headers,
                    encoding,
                );
                call.response_bytes += self.scratch.len() as u64;
                let data = if call.compress {
                    self.deflated.clear();
                    compression::deflate_frames(&self.scratch, encoding, &mut self.deflated);
                    &self.deflated
                } else {
                    &self.scratch
                };
                let sent = self.h2.send_data(stream, data, false);
                debug_assert!(
                    sent == data.len() || self.h2.error().is_some(),
                    "pulled within capacity"
                );
            }
            if let Some(status) = end {
                let call = self.take_call(stream).expect("found above");
                self.end_call(stream, call, status);
                continue;
            }
            if !waiting && self.h2.send_capacity(stream) > 0 {
                let call = self.calls.get_mut(stream).expect("found above");
                call.queued = true;
                self.ready.push_back(stream);
            }
        }
        if paced {
            // Calls that end long before the time they asked for (reset by
            // the client) would otherwise pile their entries up until it.
            self.prune_timers();
        }
        fit_room(&mut self.deflated);
        // A large message made apart from the output (a first turn, a
        // compressed stream) leaves no room behind it either.
        fit_room(&mut self.scratch);
        if !self.overlarge.is_empty() {
            self.end_overlarge();
        }
    }
}
