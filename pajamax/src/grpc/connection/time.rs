//! Time: deadlines and paced producers on the connection's timer.

use super::*;

impl GrpcConnection {
    /// Ends the calls whose deadline has passed by `now`
    /// (`DEADLINE_EXCEEDED`), and wakes the producers whose time has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = Clock::at(now);
        let mut due = std::mem::take(&mut self.due);
        self.timers.expire(now, &mut due);
        for stream in due.drain(..) {
            let Some(call) = self.calls.get_mut(stream) else {
                let tag = self.h2.tag(stream);
                let passed = match self.waiting.get(tag, stream) {
                    Some(waiting) => waiting
                        .deadline(self.epoch)
                        .is_some_and(|deadline| deadline <= now),
                    None => false,
                };
                if passed {
                    let waiting = self.waiting.take(tag, stream).expect("found above");
                    let call = self.resume(waiting);
                    let status = Status::deadline_exceeded("the call's deadline passed");
                    self.end_call(stream, call, Some(status));
                }
                continue;
            };
            if call.deadline.is_some_and(|deadline| deadline <= now) {
                let call = self.take_call(stream).expect("found above");
                if let State::Remote(remote) = &call.state {
                    remote.shared.cancel(CancelReason::DeadlineExceeded);
                }
                let status = Status::deadline_exceeded("the call's deadline passed");
                self.end_call(stream, call, Some(status));
                continue;
            }
            if let State::Producing { wake_at, .. } = &mut call.state {
                if wake_at.is_some_and(|at| at <= now) {
                    *wake_at = None;
                    if !call.queued {
                        call.queued = true;
                        self.ready.push_back(stream);
                    }
                }
            }
        }
        self.due = due;
        self.prune_timers();
        self.settle_step();
    }

    /// Whether an open call still needs the time to come: its deadline,
    /// or its producer's wake-up. Unlike [`GrpcConnection::poll_timeout`],
    /// which may name the time of a call that ended before it (its entry
    /// stays on the timer until then or until a prune), only the calls
    /// open now count.
    pub(crate) fn waits_for_time(&self) -> bool {
        self.waiting.any_deadline()
            || self.calls.values().any(|call| {
                call.deadline.is_some()
                    || matches!(
                        call.state,
                        State::Producing {
                            wake_at: Some(_),
                            ..
                        }
                    )
            })
    }

    /// Drops the timer entries of ended calls once they outnumber the live
    /// ones by far. Called as deadlines are armed too, not only when a time
    /// comes: calls that end long before their deadline would otherwise
    /// pile their entries up until it.
    #[inline]
    pub(super) fn prune_timers(&mut self) {
        let (calls, waiting, h2) = (&self.calls, &self.waiting, &self.h2);
        self.timers.prune(calls.len() + waiting.len(), |stream| {
            calls.contains_key(stream) || waiting.get(h2.tag(stream), stream).is_some()
        });
    }

    /// Puts the deadlines of the calls opened in this read that are still
    /// open on the timer.
    pub(super) fn arm_deadlines(&mut self) {
        for stream in self.new_deadlines.drain(..) {
            let deadline = match self.calls.get(stream) {
                Some(call) => call.deadline,
                None => self
                    .waiting
                    .get(self.h2.tag(stream), stream)
                    .and_then(|w| w.deadline(self.epoch)),
            };
            if let Some(deadline) = deadline {
                self.timers.add(deadline, stream);
            }
        }
        self.prune_timers();
    }
}
