//! The answer credit the sinks of one connection share, and the line
//! of sinks waiting for it.

use super::{lock, Shared};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

/// Answer bytes the sinks of one connection's calls may have on their way
/// together, on top of each stream's own credit: without it, each of
/// thousands of streams could fill the output with a send buffer's worth
/// for a client that opens its windows and never reads. The worker gives
/// it back as it gives back the streams' credit (as the bytes leave for
/// the output, while the output and the held bytes are below their
/// limits), and for a call that ended, once they are; a sink with nothing
/// to send holds none of it.
pub(crate) struct Lent {
    pub(super) state: Mutex<LentState>,
}

pub(super) struct LentState {
    /// What the sinks may still take; below zero while answers from other
    /// threads that do not wait (a [`Responder`](super::Responder)'s) are on their way.
    pub(super) credit: i64,
    /// Sinks waiting for credit to come back, first come first woken.
    pub(super) waiting: VecDeque<Weak<Shared>>,
    /// The length at which `waiting` is rid of sinks that are gone: calls
    /// that end while their sinks wait do not pile up.
    prune_at: usize,
    /// Sinks taken off `waiting` and woken that have not come for the
    /// credit yet: still waiting, as far as [`Lent::try_take`] goes.
    pub(super) woken: usize,
}

/// What became of a sink's claim on its connection's credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Take {
    /// Taken; `more`: some is left for a sink that waits, to be woken.
    Taken { more: bool },
    /// The sink waits in line; `wake`: credit is there that no sink was
    /// woken for, so the first in line is to be woken (once the caller
    /// holds no sink's lock).
    Queued { wake: bool },
}

/// The shortest list of waiting sinks that [`Lent`] prunes.
const MIN_PRUNE: usize = 16;

impl Lent {
    /// `credit` bytes for the sinks of a connection.
    pub(crate) fn new(credit: usize) -> Arc<Lent> {
        Arc::new(Lent {
            state: Mutex::new(LentState {
                credit: i64::try_from(credit.max(1)).unwrap_or(i64::MAX),
                waiting: VecDeque::new(),
                prune_at: MIN_PRUNE,
                woken: 0,
            }),
        })
    }

    /// Takes `bytes` if any credit is left and it is `sink`'s turn: a sink
    /// that comes afresh does not pass those that wait, nor one woken for
    /// the credit that has not come for it yet. Otherwise `sink` joins the
    /// queue, to be woken. `woken`: the sink comes after [`Lent::wake_one`]
    /// woke it; if the credit is gone by then (answers that do not wait
    /// took it), it waits first in line again.
    pub(super) fn take(&self, bytes: usize, sink: &Arc<Shared>, woken: bool) -> Take {
        let mut state = lock(&self.state);
        if woken {
            state.woken -= 1;
        }
        let its_turn = woken || (state.waiting.is_empty() && state.woken == 0);
        if state.credit > 0 && its_turn {
            state.credit -= bytes as i64;
            return Take::Taken {
                more: state.credit > 0 && !state.waiting.is_empty(),
            };
        }
        if state.waiting.len() >= state.prune_at {
            state.waiting.retain(|sink| sink.strong_count() > 0);
            state.prune_at = 2 * state.waiting.len() + MIN_PRUNE;
        }
        if woken {
            state.waiting.push_front(Arc::downgrade(sink));
        } else {
            state.waiting.push_back(Arc::downgrade(sink));
        }
        Take::Queued {
            // Credit nobody was woken for: the first in line is to be.
            wake: state.credit > 0 && state.woken == 0,
        }
    }

    /// Takes `bytes` if any credit is left and no sink waits for it, nor
    /// was woken for it and has not taken it yet (a sink that does not
    /// wait does not pass those that do); `false` otherwise.
    pub(super) fn try_take(&self, bytes: usize) -> bool {
        let mut state = lock(&self.state);
        let room = state.credit > 0 && state.waiting.is_empty() && state.woken == 0;
        if room {
            state.credit -= bytes as i64;
        }
        room
    }

    /// What the sinks may still take.
    #[cfg(test)]
    pub(super) fn credit(&self) -> i64 {
        lock(&self.state).credit
    }

    /// Counts answer bytes that did not wait for credit: sinks wait until
    /// they are given back.
    pub(crate) fn spend(&self, bytes: usize) {
        lock(&self.state).credit -= bytes as i64;
    }

    /// Gives back `bytes`, and wakes the first sink that waited.
    pub(crate) fn give(&self, bytes: usize) {
        lock(&self.state).credit += bytes as i64;
        self.wake_one();
    }

    /// Wakes the first sink that waits and is still in its call, if credit
    /// is left and no sink was woken for it that has not come for it yet.
    /// One at a time, not all at once: each sink that takes credit wakes
    /// the next one while some is left (and one that does not take it
    /// passes it on), so a sink that comes while one was woken does not
    /// pass those that wait before it.
    pub(super) fn wake_one(&self) {
        loop {
            let next = {
                let mut state = lock(&self.state);
                if state.credit <= 0 || state.woken > 0 {
                    return;
                }
                let Some(next) = state.waiting.pop_front() else {
                    return;
                };
                // Counted as woken as it leaves the queue: no try comes
                // between.
                state.woken += 1;
                next
            };
            let woken = next.upgrade().is_some_and(|sink| {
                // Under the sink's lock: it waits already, or sees the
                // credit.
                let mut state = lock(&sink.state);
                if state.cancelled.is_some() {
                    return false;
                }
                state.lent_waiting = false;
                state.lent_woken = true;
                drop(state);
                sink.changed.notify_all();
                true
            });
            if woken {
                return;
            }
            lock(&self.state).woken -= 1;
        }
    }

    /// A woken sink does not take the credit (its call ended): the next
    /// one is woken instead.
    pub(super) fn pass_on(&self) {
        lock(&self.state).woken -= 1;
        self.wake_one();
    }
}
