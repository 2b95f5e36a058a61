//! The handles, the credit and the queues, driven as a worker and
//! threads drive them.

use super::credit::Take;
use super::*;
use crate::grpc::status::Code;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

fn counting_inbox() -> (Arc<Inbox>, Arc<AtomicUsize>) {
    let wakes = Arc::new(AtomicUsize::new(0));
    let counter = wakes.clone();
    let inbox = Inbox::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    (inbox, wakes)
}

/// Stream `stream` of connection 7, whose parts go to `inbox`: credit
/// of 100 bytes, 10 bytes of requests queued for the call and 1 MiB
/// for the connection, a pool of 1 MiB for its sinks. Tests change
/// what they need with `..target(..)`.
fn target(inbox: &Arc<Inbox>, stream: u32) -> Target {
    Target {
        inbox: inbox.clone(),
        connection: 7,
        stream,
        credit: 100,
        incoming_limit: 10,
        queued: Queued::new(1 << 20),
        lent: Lent::new(1 << 20),
    }
}

fn shared(inbox: &Arc<Inbox>, stream: u32, credit: usize) -> Arc<Shared> {
    Shared::new(
        Target {
            credit,
            ..target(inbox, stream)
        },
        None,
    )
}

/// The queue of a connection's request bytes waiting for threads,
/// `share` bytes at most, and a maker of its calls by stream, each of
/// which queues `per_call` bytes at most.
fn sharing_a_queue(
    inbox: &Arc<Inbox>,
    share: usize,
    per_call: usize,
) -> (Arc<Queued>, impl Fn(u32) -> Arc<Shared>) {
    let queued = Queued::new(share);
    let inbox = inbox.clone();
    let shared = queued.clone();
    let call = move |stream| {
        let target = Target {
            incoming_limit: per_call,
            queued: shared.clone(),
            ..target(&inbox, stream)
        };
        Shared::new(target, None)
    };
    (queued, call)
}

/// Three calls (streams 1, 3 and 5) of one connection whose sinks
/// share a pool of 8 bytes.
fn three_sharing_eight(inbox: &Arc<Inbox>) -> (Arc<Lent>, [Arc<Shared>; 3]) {
    let lent = Lent::new(8);
    let call = |stream| {
        let target = Target {
            lent: lent.clone(),
            ..target(inbox, stream)
        };
        Shared::new(target, None)
    };
    let calls = [call(1), call(3), call(5)];
    (lent, calls)
}

fn drain(inbox: &Inbox) -> Vec<Delivery> {
    let mut parts = Vec::new();
    inbox.drain(&mut parts);
    parts
}

#[test]
fn many_answers_wake_once_until_drained() {
    let (inbox, wakes) = counting_inbox();
    for stream in [1, 3, 5] {
        Responder::new(Some(shared(&inbox, stream, 10))).respond(Ok(42u32));
    }
    assert_eq!(wakes.load(Ordering::SeqCst), 1);
    let parts = drain(&inbox);
    assert_eq!(parts.len(), 3);
    let Part::Answer { result, .. } = &parts[0].part else {
        panic!("an answer")
    };
    assert_eq!(result.as_ref().unwrap(), &[0, 0, 0, 0, 2, 0x08, 42]);
    Responder::new(Some(shared(&inbox, 7, 10))).respond(Ok(1u32));
    assert_eq!(wakes.load(Ordering::SeqCst), 2);
}

#[test]
fn dropped_responder_answers_internal() {
    let (inbox, _) = counting_inbox();
    let mut responder = Responder::new(Some(shared(&inbox, 9, 10)));
    responder.trailers_mut().insert("x-why", "dropped").unwrap();
    drop(responder);
    let parts = drain(&inbox);
    let Part::Answer {
        result, trailers, ..
    } = &parts[0].part
    else {
        panic!("an answer")
    };
    assert_eq!(result.as_ref().unwrap_err().code(), crate::Code::Internal);
    assert_eq!(trailers.get("x-why"), Some("dropped"));
}

#[test]
fn a_sink_waits_for_credit_and_sends_headers_first() {
    let (inbox, _) = counting_inbox();
    let shared = shared(&inbox, 1, 8);
    let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
    sink.headers_mut().insert("x-a", "1").unwrap();
    sink.send(&300).unwrap();
    let parts = drain(&inbox);
    assert!(matches!(&parts[0].part, Part::Headers(md) if md.get("x-a") == Some("1")));
    assert!(matches!(&parts[1].part, Part::Message(m) if m.len() == 8));
    let sender = std::thread::spawn(move || {
        sink.send(&1).unwrap();
        sink.finish(Ok(()));
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(drain(&inbox).is_empty(), "no credit left: the sink waits");
    shared.return_credit(8);
    sender.join().unwrap();
    let parts = drain(&inbox);
    assert!(matches!(&parts[0].part, Part::Message(_)));
    assert!(matches!(&parts[1].part, Part::Finish { status: None, .. }));
}

#[test]
fn sinks_of_one_connection_share_its_credit_and_wake_in_turn() {
    let (inbox, _) = counting_inbox();
    let (_, [first, second, third]) = three_sharing_eight(&inbox);
    let mut sink = Sink::<u32>::new(Some(first.clone()), Metadata::new(), Metadata::new());
    sink.send(&300).unwrap();
    assert_eq!(drain(&inbox).len(), 2, "headers and a message of 8 bytes");
    let waiters: Vec<_> = [second.clone(), third.clone()]
        .into_iter()
        .map(|shared| {
            std::thread::spawn(move || {
                let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
                sink.send(&300)
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(
        drain(&inbox).is_empty(),
        "each stream has credit, the connection has none left"
    );
    // The second call ends: its waiting sink does not hold up the third.
    second.cancel(CancelReason::Cancelled);
    // Credit back for the first sink's bytes: one of the two wakes.
    first.return_credit(8);
    assert_eq!(first.take_lent(), 0);
    let results: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(results[0].is_err());
    assert!(results[1].is_ok());
    let sent: Vec<_> = drain(&inbox)
        .into_iter()
        .filter(|part| matches!(part.part, Part::Message(_)))
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].stream, 5);
    assert_eq!(third.take_lent(), 8, "held until given back");
}

#[test]
fn a_sink_that_comes_afresh_does_not_pass_one_that_waits() {
    let (inbox, _) = counting_inbox();
    let (pool, [first, second, third]) = three_sharing_eight(&inbox);
    let mut sink = Sink::<u32>::new(Some(first.clone()), Metadata::new(), Metadata::new());
    sink.send(&300).unwrap();
    drain(&inbox);
    let send = |shared: Arc<Shared>| {
        std::thread::spawn(move || {
            let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
            sink.send(&300).unwrap();
            sink
        })
    };
    let waiter = send(second.clone());
    while lock(&pool.state).waiting.is_empty() {
        std::thread::yield_now();
    }
    // Credit comes back before anyone is woken for it (the moment
    // between a stream's credit and the connection's coming back),
    // and another sink sends then: it waits its turn and wakes the
    // sink that waited first.
    lock(&pool.state).credit += 8;
    let late = send(third.clone());
    let messages = || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let sent: Vec<u32> = drain(&inbox)
                .into_iter()
                .filter(|part| matches!(part.part, Part::Message(_)))
                .map(|part| part.stream)
                .collect();
            if !sent.is_empty() || std::time::Instant::now() > until {
                return sent;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    assert_eq!(messages(), [3], "the sink that waited sends first");
    let _waiter = waiter.join().unwrap();
    second.return_credit(8);
    assert_eq!(messages(), [5]);
    let _late = late.join().unwrap();
    // A woken sink that finds the credit gone waits first in line.
    let pool = Lent::new(8);
    assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
    assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
    assert_eq!(pool.take(8, &third, false), Take::Queued { wake: false });
    lock(&pool.state).waiting.pop_front();
    lock(&pool.state).woken += 1;
    assert_eq!(pool.take(8, &second, true), Take::Queued { wake: false });
    let front = lock(&pool.state).waiting.front().and_then(Weak::upgrade);
    assert!(front.is_some_and(|front| Arc::ptr_eq(&front, &second)));
    drop(sink);
}

#[test]
fn a_sink_that_comes_while_credit_is_given_back_does_not_pass_one_that_waits() {
    let (inbox, _) = counting_inbox();
    let (pool, [first, second, third]) = three_sharing_eight(&inbox);
    // The first holds all of it; the second waits for it, as a send
    // does (queued, and waiting on its condition variable).
    assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
    assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
    lock(&second.state).lent_waiting = true;
    // The credit comes back (`give`: the credit first, then the wake),
    // and the third comes to send in between: it queues behind the
    // second, and wakes the first in line, as its send does.
    lock(&pool.state).credit += 8;
    assert_eq!(pool.take(8, &third, false), Take::Queued { wake: true });
    lock(&third.state).lent_waiting = true;
    pool.wake_one();
    assert!(!lock(&second.state).lent_waiting, "the second is woken");
    // The wake of the `give` comes after: one sink is woken for the
    // credit already, the third waits its turn.
    pool.wake_one();
    assert!(lock(&third.state).lent_waiting, "the third still waits");
    assert_eq!(lock(&pool.state).woken, 1);
    second.take_credit(8).unwrap();
    assert_eq!(lock(&pool.state).woken, 0);
    // Its turn comes as the credit does.
    pool.give(8);
    assert!(!lock(&third.state).lent_waiting, "the third is woken");
    third.take_credit(8).unwrap();
    assert_eq!(lock(&pool.state).woken, 0);
    assert_eq!(pool.credit(), 0);
}

#[test]
fn try_send_sends_while_there_is_credit_and_never_waits() {
    let (inbox, _) = counting_inbox();
    let shared = shared(&inbox, 1, 8);
    let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
    // Nothing was sent yet: the first message goes, headers first.
    sink.try_send(&300).unwrap();
    let parts = drain(&inbox);
    assert!(matches!(&parts[0].part, Part::Headers(_)));
    assert!(matches!(&parts[1].part, Part::Message(m) if m.len() == 8));
    // The stream's credit is spent: full, at once, and nothing sent.
    assert_eq!(sink.try_send(&1), Err(TrySendError::Full));
    assert!(drain(&inbox).is_empty());
    // Credit back: it sends again.
    shared.return_credit(8);
    sink.try_send(&1).unwrap();
    assert!(matches!(&drain(&inbox)[0].part, Part::Message(m) if m.len() == 7));
    // An ended call: cancelled, not full.
    shared.return_credit(7);
    shared.cancel(CancelReason::Cancelled);
    let error = sink.try_send(&1).unwrap_err();
    assert_eq!(
        error,
        TrySendError::Cancelled(Cancelled {
            reason: CancelReason::Cancelled
        })
    );
    assert_eq!(Status::from(error).code(), crate::Code::Cancelled);
    assert_eq!(
        Status::from(TrySendError::Full).code(),
        crate::Code::ResourceExhausted
    );
}

#[test]
fn try_send_does_not_pass_a_sink_that_waits_for_the_connections_credit() {
    let (inbox, _) = counting_inbox();
    let (_, [first, second, third]) = three_sharing_eight(&inbox);
    let mut sink = Sink::<u32>::new(Some(first.clone()), Metadata::new(), Metadata::new());
    sink.try_send(&300).unwrap();
    drain(&inbox);
    // The connection's credit is spent: full for another call too,
    // though its own stream has credit.
    let mut other = Sink::<u32>::new(Some(third.clone()), Metadata::new(), Metadata::new());
    assert_eq!(other.try_send(&300), Err(TrySendError::Full));
    let waiter = std::thread::spawn(move || {
        let mut sink = Sink::<u32>::new(Some(second), Metadata::new(), Metadata::new());
        sink.send(&300)
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    // Credit back: the sink that waited takes it, not the one that
    // tries.
    first.return_credit(8);
    waiter.join().unwrap().unwrap();
    assert_eq!(other.try_send(&300), Err(TrySendError::Full));
    let sent: Vec<u32> = drain(&inbox)
        .into_iter()
        .filter(|part| matches!(part.part, Part::Message(_)))
        .map(|part| part.stream)
        .collect();
    assert_eq!(sent, [3]);
    // While a sink waits for the connection's credit, a try takes none
    // of it, even when some is there before the waiter has woken.
    let pool = Lent::new(8);
    assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
    assert_eq!(
        pool.take(8, &third, false),
        Take::Queued { wake: false },
        "the third waits"
    );
    lock(&pool.state).credit += 8;
    assert!(!pool.try_take(1));
    lock(&pool.state).waiting.clear();
    assert!(pool.try_take(1));
}

#[test]
fn try_send_does_not_take_the_credit_a_woken_sink_is_to_take() {
    let (inbox, _) = counting_inbox();
    let (pool, [first, second, third]) = three_sharing_eight(&inbox);
    // The first takes all of it; the second waits for it, as a send
    // does (queued, and waiting on its condition variable).
    assert_eq!(pool.take(8, &first, false), Take::Taken { more: false });
    assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
    lock(&second.state).lent_waiting = true;
    // Credit back: the second is woken, and has not taken it yet.
    pool.give(8);
    assert!(!lock(&second.state).lent_waiting, "woken");
    // A try in that moment leaves it to the sink that waited.
    let mut other = Sink::<u32>::new(Some(third.clone()), Metadata::new(), Metadata::new());
    assert_eq!(other.try_send(&300), Err(TrySendError::Full));
    assert!(!pool.try_take(1));
    // The woken sink takes it, as its send does once it runs; then
    // tries take what comes back.
    second.take_credit(8).unwrap();
    pool.give(8);
    assert!(pool.try_take(8));
    // A woken sink that finds its call ended passes it on: to no one
    // here, so tries take the credit again.
    assert_eq!(pool.take(8, &second, false), Take::Queued { wake: false });
    lock(&second.state).lent_waiting = true;
    pool.give(8);
    assert!(!pool.try_take(1));
    second.cancel(CancelReason::Cancelled);
    assert!(second.take_credit(8).is_err());
    assert!(pool.try_take(1));
    drop(other);
}

#[test]
fn try_send_lets_go_of_the_request_as_send_does_with_room_or_without() {
    let (inbox, _) = counting_inbox();
    let queued = Queued::new(1 << 20);
    let pool = Lent::new(8);
    let target = |stream| Target {
        queued: queued.clone(),
        lent: pool.clone(),
        ..target(&inbox, stream)
    };
    // Another call holds all of the connection's credit.
    let other = Shared::new(target(1), None);
    assert_eq!(pool.take(8, &other, false), Take::Taken { more: false });
    for try_it in [true, false] {
        let shared = Shared::new(target(3), None);
        shared.hold_request(100);
        assert_eq!(queued.bytes(), 100);
        let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
        if try_it {
            assert_eq!(sink.try_send(&300), Err(TrySendError::Full));
        } else {
            // A send that waits: its call ends meanwhile.
            let ender = shared.clone();
            let end = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                ender.cancel(CancelReason::Cancelled);
            });
            assert!(sink.send(&300).is_err());
            end.join().unwrap();
        }
        // The thread has started to answer: the request is its own.
        assert_eq!(queued.bytes(), 0, "try: {try_it}");
        drop(sink);
    }
}

#[test]
fn a_replaced_on_cancel_is_dropped_outside_the_calls_lock() {
    let (inbox, _) = counting_inbox();
    let shared = shared(&inbox, 1, 8);
    let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
    // The first callback holds what takes the call's lock as it goes:
    // here the call's own request stream.
    let requests = Streaming::<u32>::new(Some(shared.clone()));
    sink.on_cancel(move |_| drop(requests));
    let (done, replaced) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        sink.on_cancel(|_| {});
        done.send(sink).unwrap();
    });
    let sink = replaced
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("the replaced callback dropped without a deadlock");
    assert!(lock(&shared.state).reader_gone, "dropped with its callback");
    sink.finish(Ok(()));
}

#[test]
fn on_cancel_runs_once_with_the_reason_or_at_once_after_the_end() {
    let (inbox, _) = counting_inbox();
    let shared = shared(&inbox, 1, 8);
    let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
    let (tx, rx) = std::sync::mpsc::channel();
    let first = tx.clone();
    sink.on_cancel(move |_| first.send("replaced").unwrap());
    let second = tx.clone();
    sink.on_cancel(move |reason| second.send(format!("{reason:?}").leak()).unwrap());
    assert!(rx.try_recv().is_err(), "not before the call ends");
    shared.cancel(CancelReason::DeadlineExceeded);
    shared.cancel(CancelReason::Cancelled);
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["DeadlineExceeded"]);
    // Set after the end: run at once, with the first reason.
    sink.on_cancel(move |reason| tx.send(format!("late {reason:?}").leak()).unwrap());
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["late DeadlineExceeded"]);
    // A panic in one stays in it.
    sink.on_cancel(|_| panic!("on purpose"));
    let other = super::tests::shared(&inbox, 3, 8);
    let mut sink = Sink::<u32>::new(Some(other.clone()), Metadata::new(), Metadata::new());
    sink.on_cancel(|_| panic!("on purpose"));
    other.cancel(CancelReason::Cancelled);
    assert!(sink.is_cancelled());
}

/// A small generator of pseudo-random numbers, seeded: the stress
/// tests below take the same turns each run.
struct Turns(u64);

impl Turns {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Many sinks share a small pool; a stand-in for the worker gives
/// credit back late and in random batches, and cancels a third of
/// the calls at random moments, often while their sinks wait for the
/// pool. Every sink that is not cancelled sends all of its messages
/// (none waits forever for credit that is there), and once all have
/// ended the pool holds all of its credit again.
#[test]
fn many_sinks_some_cancelled_while_they_wait_never_lose_the_pool() {
    const SINKS: u32 = 24;
    const MESSAGES: u32 = 300;
    const POOL: usize = 40;
    let (inbox, _) = counting_inbox();
    let lent = Lent::new(POOL);
    let calls: Vec<Arc<Shared>> = (0..SINKS)
        .map(|i| {
            Shared::new(
                Target {
                    credit: 24,
                    lent: lent.clone(),
                    ..target(&inbox, 2 * i + 1)
                },
                None,
            )
        })
        .collect();
    let threads: Vec<_> = calls
        .iter()
        .map(|shared| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
                for n in 0..MESSAGES {
                    // 6 to 10 bytes framed.
                    sink.send(&(n * 997 % 100_000_000))?;
                }
                sink.finish(Ok(()));
                Ok::<(), Cancelled>(())
            })
        })
        .collect();
    let mut turns = Turns(0x9e37_79b9_7f4a_7c15);
    let mut ended = vec![false; SINKS as usize];
    let mut finished = 0;
    // Answer bytes in the stand-in's output: their credit goes back
    // once they are written.
    let mut held: Vec<(usize, usize)> = Vec::new();
    let mut parts = Vec::new();
    let give_up = Instant::now() + std::time::Duration::from_secs(120);
    while finished < SINKS {
        assert!(
            Instant::now() < give_up,
            "sinks wait for ever: {finished} of {SINKS} ended, pool {}",
            lent.credit()
        );
        inbox.drain(&mut parts);
        for delivery in parts.drain(..) {
            let index = (delivery.stream / 2) as usize;
            match delivery.part {
                Part::Message(bytes) if !ended[index] => held.push((index, bytes.len())),
                Part::Finish { .. } => finished += 1,
                _ => {}
            }
        }
        // Some of the held bytes leave.
        let leaving = turns.next(held.len() as u64 + 1) as usize;
        for (index, bytes) in held.drain(..leaving) {
            calls[index].return_credit(bytes);
        }
        // Now and then a call ends: as the worker does, its sink's
        // credit goes back once its bytes are out.
        if turns.next(40) == 0 {
            let index = turns.next(u64::from(SINKS)) as usize;
            if index.is_multiple_of(3) && !ended[index] {
                ended[index] = true;
                calls[index].cancel(CancelReason::Cancelled);
                held.retain(|&(i, _)| i != index);
                lent.give(calls[index].take_lent());
            }
        }
        std::thread::yield_now();
    }
    for (index, bytes) in held.drain(..) {
        calls[index].return_credit(bytes);
    }
    for (index, thread) in threads.into_iter().enumerate() {
        let result = thread.join().unwrap();
        if !ended[index] {
            assert!(result.is_ok(), "sink {index} not cancelled but failed");
        }
    }
    for (index, shared) in calls.iter().enumerate() {
        if !ended[index] {
            lent.give(shared.take_lent());
        }
    }
    assert_eq!(
        lent.credit(),
        POOL as i64,
        "the pool has all its credit back"
    );
    assert_eq!(lock(&lent.state).woken, 0, "no sink still counted as woken");
    assert!(lent.try_take(1), "a try takes the credit back");
}

/// A thread that lets go of its `Streaming` without reading it leaves
/// nothing counted in the connection's share of queued request bytes
/// (while its call goes on, answering through its sink), and a call
/// refused for lack of room is told there is some.
#[test]
fn messages_of_a_streaming_let_go_of_leave_the_connections_share() {
    let (inbox, _) = counting_inbox();
    let (queued, call) = sharing_a_queue(&inbox, 16, 100);
    let deaf = call(1);
    let other = call(3);
    let requests = Streaming::<u32>::new(Some(deaf.clone()));
    let _sink = Sink::<u32>::new(Some(deaf.clone()), Metadata::new(), Metadata::new());
    let message = [0, 0, 0, 0, 2, 0x08, 5];
    assert_eq!(deaf.offer(&message), Offered::Queued);
    assert_eq!(deaf.offer(&message), Offered::Queued);
    assert_eq!(other.offer(&message), Offered::ConnectionFull);
    drop(requests);
    assert_eq!(
        queued.bytes(),
        0,
        "nothing waits for a thread that cannot read"
    );
    assert!(drain(&inbox)
        .iter()
        .any(|part| matches!(part.part, Part::Room)));
    assert_eq!(other.offer(&message), Offered::Queued);
    assert_eq!(deaf.offer(&message), Offered::Queued, "taken, and dropped");
    assert_eq!(queued.bytes(), 7, "only the other call's message waits");
}

/// Requests of calls sent to threads and streamed messages each have
/// the limit: requests held until their threads answer never hold a
/// streamed message back (a deferred call waiting on a client stream
/// of its connection would never be answered), nor do streamed
/// messages refuse a request; each is refused only past its own limit.
#[test]
fn held_requests_and_streamed_messages_each_have_the_limit() {
    let (inbox, _) = counting_inbox();
    let (queued, call) = sharing_a_queue(&inbox, 100, 1000);
    // A deferred call holds a request of 90 bytes.
    let deferred = call(1);
    deferred.hold_request(90);
    assert!(!deferred.is_refused());
    let responder = Responder::new(Some(deferred.clone()));
    drop(deferred);
    // A streaming call still queues up to the limit beside it.
    let streamed = call(3);
    assert_eq!(streamed.offer(&[1; 60]), Offered::Queued);
    assert_eq!(streamed.offer(&[2; 40]), Offered::Queued);
    assert_eq!(streamed.offer(&[3; 10]), Offered::ConnectionFull);
    assert_eq!(queued.bytes(), 190);
    // A second request does not fit beside the first: refused, and
    // owed no room.
    let second = call(5);
    second.hold_request(20);
    assert!(second.is_refused());
    assert_eq!(second.cancelled(), Some(CancelReason::Ended));
    // The stream's thread takes the first message: down to half the
    // limit, the refused message is offered again.
    assert_eq!(streamed.take_incoming().unwrap().unwrap().len(), 60);
    assert!(
        drain(&inbox)
            .iter()
            .any(|part| matches!(part.part, Part::Room)),
        "the call waiting for room is told there is some"
    );
    assert_eq!(streamed.offer(&[3; 10]), Offered::Queued);
    // Answered, the deferred call's request leaves: another fits.
    responder.respond(Ok(1u32));
    assert_eq!(queued.bytes(), 50);
    let third = call(7);
    third.hold_request(20);
    assert!(!third.is_refused());
    drop(third);
    assert_eq!(queued.bytes(), 50);
}

/// Credit set as large as it goes (`usize::MAX` for no limit) is not
/// read as none: the sink sends.
#[test]
fn credit_without_limit_lets_a_sink_send() {
    let (inbox, _) = counting_inbox();
    let lent = Lent::new(usize::MAX);
    assert!(lent.credit() > 0, "the connection's");
    let shared = Shared::new(
        Target {
            credit: usize::MAX,
            queued: Queued::new(usize::MAX),
            lent,
            ..target(&inbox, 1)
        },
        None,
    );
    assert!(lock(&shared.state).credit > 0, "the stream's");
    let mut sink = Sink::<u32>::new(Some(shared), Metadata::new(), Metadata::new());
    sink.send(&300).unwrap();
    sink.finish(Ok(()));
    assert_eq!(drain(&inbox).len(), 3, "headers, the message, the end");
}

/// A call held back because the connection's queued bytes left no
/// room for its message is let go on too once its thread drops its
/// `Streaming`, without waiting for the other calls' threads to make
/// room: what its client sends then is taken and dropped.
#[test]
fn a_call_without_room_in_the_connections_share_let_go_of_resumes() {
    let (inbox, _) = counting_inbox();
    let (queued, call) = sharing_a_queue(&inbox, 10, 100);
    let hoarder = call(1);
    let deaf = call(3);
    let requests = Streaming::<u32>::new(Some(deaf.clone()));
    let message = [0, 0, 0, 0, 2, 0x08, 5];
    assert_eq!(hoarder.offer(&message), Offered::Queued);
    assert_eq!(deaf.offer(&message), Offered::ConnectionFull);
    drop(requests);
    let parts = drain(&inbox);
    assert!(
        parts
            .iter()
            .any(|part| part.stream == 3 && matches!(part.part, Part::Resume)),
        "the call is told to take its messages again"
    );
    assert_eq!(deaf.offer(&message), Offered::Queued, "taken, and dropped");
    assert_eq!(queued.bytes(), 7, "only the hoarder's message waits");
}

/// A thread that waits for the next message of its call gets it even
/// when the connection's share is full of other calls' messages (in
/// dispatch mode, those of calls queued behind it for the same thread,
/// which it reads only once done with this one): held back, it would
/// wait for ever. A message refused before the thread waited is asked
/// for again as it starts to; one for a thread that does not wait
/// still waits for room.
#[test]
fn a_thread_waiting_for_a_message_gets_it_past_a_full_share() {
    let (inbox, _) = counting_inbox();
    let (queued, call) = sharing_a_queue(&inbox, 10, 100);
    let read = call(1);
    let behind = call(3);
    let message = [0, 0, 0, 0, 2, 0x08, 5];
    assert_eq!(behind.offer(&message), Offered::Queued);
    assert_eq!(read.offer(&message), Offered::ConnectionFull);
    let mut requests = Streaming::<u32>::new(Some(read.clone()));
    let reader = std::thread::spawn(move || {
        let first = requests.next().unwrap().unwrap();
        let second = requests.next().unwrap().unwrap();
        (first, second, requests)
    });
    let give_up = Instant::now() + std::time::Duration::from_secs(10);
    // Refused before the thread waited: it asks for the message again.
    while !drain(&inbox)
        .iter()
        .any(|part| part.stream == 1 && matches!(part.part, Part::Resume))
    {
        assert!(Instant::now() < give_up, "no Resume");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(read.offer(&message), Offered::Queued);
    // Offered while the thread waits for the next one.
    loop {
        let state = lock(&read.state);
        if state.reader_waiting && state.incoming.is_empty() {
            break;
        }
        drop(state);
        assert!(Instant::now() < give_up, "the thread never waited");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(read.offer(&message), Offered::Queued);
    let (first, second, requests) = reader.join().unwrap();
    assert_eq!((first, second), (5, 5));
    assert_eq!(queued.bytes(), 7, "only the message of the call behind");
    // The thread does not wait now: the share holds.
    assert_eq!(read.offer(&message), Offered::ConnectionFull);
    drop(requests);
}

/// A call held back because its thread's queue was full is let go on
/// once the thread drops its `Streaming`: what the client sends then
/// is taken and dropped, not held with the client's window shut.
#[test]
fn a_full_queue_let_go_of_resumes_its_call() {
    let (inbox, _) = counting_inbox();
    let shared = shared(&inbox, 1, 0);
    let requests = Streaming::<u32>::new(Some(shared.clone()));
    let message = [0, 0, 0, 0, 2, 0x08, 5];
    assert_eq!(shared.offer(&message), Offered::Queued);
    assert_eq!(shared.offer(&message), Offered::Queued);
    assert_eq!(shared.offer(&message), Offered::CallFull);
    drop(requests);
    let parts = drain(&inbox);
    assert_eq!(parts.len(), 1);
    assert!(matches!(parts[0].part, Part::Resume));
    assert_eq!(
        shared.offer(&message),
        Offered::Queued,
        "taken, and dropped"
    );
    assert_eq!(shared.target.queued.bytes(), 0);
}

#[test]
fn a_cancelled_call_fails_its_sink_and_stream() {
    let (inbox, _) = counting_inbox();
    let shared = shared(&inbox, 1, 0);
    let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
    let mut requests = Streaming::<u32>::new(Some(shared.clone()));
    let waiter = std::thread::spawn(move || sink.send(&1));
    std::thread::sleep(std::time::Duration::from_millis(20));
    shared.cancel(CancelReason::DeadlineExceeded);
    let err = waiter.join().unwrap().unwrap_err();
    assert_eq!(err.reason, CancelReason::DeadlineExceeded);
    let status = requests.next().unwrap().unwrap_err();
    assert_eq!(status.code(), crate::Code::DeadlineExceeded);
    assert!(requests.next().is_none());
}

#[test]
fn incoming_messages_are_bounded_and_resume_when_taken() {
    let (inbox, _) = counting_inbox();
    let shared = shared(&inbox, 1, 0);
    let message = [0, 0, 0, 0, 2, 0x08, 5];
    assert_eq!(shared.offer(&message), Offered::Queued);
    assert_eq!(shared.offer(&message), Offered::Queued);
    assert_eq!(
        shared.offer(&message),
        Offered::CallFull,
        "14 bytes queued, limit 10"
    );
    let mut requests = Streaming::<u32>::new(Some(shared.clone()));
    assert_eq!(requests.next().unwrap().unwrap(), 5);
    assert!(drain(&inbox).is_empty(), "7 bytes left: above half");
    assert_eq!(requests.next().unwrap().unwrap(), 5);
    let parts = drain(&inbox);
    assert!(matches!(parts[0].part, Part::Resume));
    shared.end_incoming(None);
    assert!(requests.next().is_none());
}

/// A request stream the client ended and then cancelled (reset, deadline,
/// connection gone) yields the messages queued before, then the
/// cancellation, not a clean end: the thread does not take the request
/// for complete and answered. A call the server ended itself (its answer
/// complete) still ends cleanly once the client is done.
#[test]
fn a_request_stream_ended_then_cancelled_ends_with_the_cancellation() {
    let (inbox, _) = counting_inbox();
    let message = [0, 0, 0, 0, 2, 0x08, 5];
    for (reason, code) in [
        (CancelReason::Cancelled, Some(Code::Cancelled)),
        (CancelReason::DeadlineExceeded, Some(Code::DeadlineExceeded)),
        (CancelReason::ConnectionClosed, Some(Code::Unavailable)),
        (CancelReason::Ended, None),
    ] {
        let (_queued, call) = sharing_a_queue(&inbox, 100, 100);
        let shared = call(1);
        let mut requests = Streaming::<u32>::new(Some(shared.clone()));
        assert_eq!(shared.offer(&message), Offered::Queued);
        shared.end_incoming(None);
        shared.cancel(reason);
        assert_eq!(requests.next().map(|m| m.ok()), Some(Some(5)), "{reason:?}");
        let end = requests.next().map(|m| m.map_err(|status| status.code()));
        assert_eq!(end, code.map(Err), "{reason:?}");
        assert!(requests.next().is_none(), "{reason:?}");
    }
}

/// A request message that does not decode: the stream yields its error
/// and nothing after; the thread's sink and responder then say the call
/// is cancelled and sends fail, but the call is still open on the worker,
/// so the answer the thread ends it with still goes out.
#[test]
fn after_a_message_that_does_not_decode_the_answer_still_goes() {
    let (inbox, _) = counting_inbox();
    // A field of type 7, which no message has.
    let garbage = [0, 0, 0, 0, 1, 0x0f];
    let shared = shared(&inbox, 1, 100);
    let mut requests = Streaming::<u32>::new(Some(shared.clone()));
    let mut sink = Sink::<u32>::new(Some(shared.clone()), Metadata::new(), Metadata::new());
    let responder = Responder::new(Some(shared.clone()));
    assert_eq!(shared.offer(&garbage), Offered::Queued);
    let status = requests.next().unwrap().unwrap_err();
    assert!(requests.next().is_none());
    assert!(sink.is_cancelled() && responder.is_cancelled());
    assert!(sink.send(&1).is_err());
    drain(&inbox);
    responder.respond::<u32>(Err(status.clone()));
    let parts = drain(&inbox);
    let Some(Part::Answer { result, .. }) = parts.first().map(|d| &d.part) else {
        panic!("an answer: {:?}", parts.len())
    };
    assert_eq!(result.as_ref().unwrap_err().code(), status.code());
    sink.finish(Err(status));
    let parts = drain(&inbox);
    assert!(
        matches!(
            parts.first().map(|d| &d.part),
            Some(Part::Finish {
                status: Some(_),
                ..
            })
        ),
        "a finish"
    );
}
