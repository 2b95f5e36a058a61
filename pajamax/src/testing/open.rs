//! A bidirectional call the test drives a message at a time: what a
//! ping-pong needs, whose next request depends on the answers so far.

use super::{decode_all, end_unused, Answer, Begun, Run, TestCall, OTHER_CONTEXT};
use crate::grpc::context::ResponseMetadata;
use crate::grpc::framing;
use crate::grpc::remote::{CancelReason, Offered, Shared};
use crate::grpc::status::Status;
use crate::grpc::streaming::{BidiStream, Inbound, Outgoing, RawHandler};
use std::marker::PhantomData;
use std::sync::Arc;

/// A bidirectional call open in a test: requests go to the handler one
/// [`send`](BidiCall::send) at a time, answers come back with
/// [`recv`](BidiCall::recv), and [`finish`](BidiCall::finish) ends the
/// requests and returns the whole [`Answer`]. Made by
/// [`TestCall::open_bidi`].
///
/// A handler on the worker runs in `send` and answers there, so `recv`
/// never waits for it; one on another thread answers when it does, and
/// `recv` waits for the next message (or the call's end, or its deadline).
/// A call dropped before `finish` is cancelled, as when a client goes away
/// (a thread that has ended it, or whose deadline has passed, sees that
/// instead, as on a server).
///
/// ```
/// use pajamax::testing::TestCall;
/// use pajamax::{BidiHandler, BidiStream, Context, Responses, Status};
///
/// // `rpc Sum (stream uint32) returns (stream uint32)`: the running total
/// // after each number.
/// struct Sum(u32);
///
/// impl BidiHandler<u32, u32> for Sum {
///     fn on_message(
///         &mut self,
///         _ctx: &mut Context<'_>,
///         n: u32,
///         out: &mut Responses<'_, u32>,
///     ) -> Result<(), Status> {
///         self.0 += n;
///         out.send(&self.0);
///         Ok(())
///     }
/// }
///
/// fn sum(_ctx: &mut Context<'_>) -> Result<BidiStream<u32, u32>, Status> {
///     Ok(BidiStream::on_worker(Sum(0)))
/// }
///
/// let mut call = TestCall::new().open_bidi(sum);
/// assert!(call.send(2));
/// let total = call.recv().unwrap();
/// // The next request depends on the answer.
/// assert!(call.send(total * 10));
/// assert_eq!(call.recv(), Some(22));
/// assert_eq!(call.recv(), None, "nothing more until the next request");
/// let answer = call.finish();
/// assert_eq!(answer.messages, [2, 22], "every message, those taken too");
/// assert!(answer.result.is_ok());
/// ```
pub struct BidiCall<Req, Resp> {
    call: TestCall,
    run: Run,
    response: ResponseMetadata,
    side: Side,
    /// Every message sent back so far, and the call's end once it came.
    answer: Answer<Resp>,
    /// How many of `answer.messages` `recv` has returned.
    taken: usize,
    /// The response headers went on their own, before any message.
    headers_sent: bool,
    ended: bool,
    _requests: PhantomData<fn(Req)>,
}

/// Who serves the call.
enum Side {
    Worker(Box<dyn RawHandler>),
    Thread(Arc<Shared>),
    /// Ended before anyone served it: refused, or past its deadline.
    Nobody,
}

impl TestCall {
    /// Opens a bidirectional call to `handler` and returns it, for the
    /// test to send requests and take answers one at a time
    /// ([`BidiCall`]). [`TestCall::bidi`] runs one whose requests are
    /// known up front.
    pub fn open_bidi<Req, Resp, F>(&self, handler: F) -> BidiCall<Req, Resp>
    where
        Req: prost::Message + Default + 'static,
        Resp: prost::Message + Default + Clone + 'static,
        F: FnOnce(&mut crate::Context<'_>) -> Result<BidiStream<Req, Resp>, Status>,
    {
        let open = |run: Run, response, side, answer| BidiCall {
            call: self.clone(),
            run,
            response,
            ended: matches!(side, Side::Nobody),
            side,
            answer,
            taken: 0,
            headers_sent: false,
            _requests: PhantomData,
        };
        let ended = |run, answer| open(run, ResponseMetadata::default(), Side::Nobody, answer);
        let Begun {
            run,
            response,
            result,
            remote,
        } = match self.begin(|ctx| handler(ctx).map(BidiStream::into_raw)) {
            Ok(begun) => begun,
            Err(expired) => return ended(Run::new(self), *expired),
        };
        match result.map(|stream| stream.0) {
            Ok(Inbound::Local(handler)) => {
                end_unused(remote);
                open(run, response, Side::Worker(handler), Answer::new())
            }
            // The metadata the handler set goes with the thread's answer,
            // as on a server.
            Ok(Inbound::Remote) => {
                let shared = remote.expect(OTHER_CONTEXT);
                let side = Side::Thread(shared);
                open(run, ResponseMetadata::default(), side, Answer::new())
            }
            Err(status) => {
                let answer = run.refused(response, remote, status);
                ended(run, answer)
            }
        }
    }
}

impl<Req, Resp> BidiCall<Req, Resp>
where
    Req: prost::Message,
    Resp: prost::Message + Default + Clone,
{
    /// Sends `request` to the handler: on the worker, it runs now; to a
    /// thread, the request is queued for it, waiting while its queue is
    /// full. `false` if the call had ended (the request goes nowhere);
    /// `true` if the handler got it, though the call may end with it (the
    /// handler failed, or the client cancelled after the answers it asked
    /// for: [`TestCall::cancel_after`]).
    pub fn send(&mut self, request: Req) -> bool {
        if self.ended {
            return false;
        }
        if let Some(why) = self.run.stop(&self.answer) {
            self.stop(why);
            return false;
        }
        match &mut self.side {
            Side::Worker(handler) => {
                let mut out = Outgoing::default();
                let mut ctx = self.run.context(&self.call, &mut self.response, false);
                let taken = handler.on_message(&mut ctx, &request.encode_to_vec(), &mut out);
                drop(ctx);
                self.took(&out, taken);
                true
            }
            Side::Thread(shared) => {
                let shared = shared.clone();
                let message = framing::framed(&request);
                loop {
                    // The thread's answers are taken before the offer: the
                    // `Resume` or `Room` a refused offer waits for comes
                    // after them, and wakes the wait.
                    self.run.expect_parts();
                    if self.run.take_parts(&shared, &mut self.answer) {
                        self.ended = true;
                        return false;
                    }
                    if let Some(why) = self.run.stop(&self.answer) {
                        self.stop(why);
                        return false;
                    }
                    if shared.offer(&message) == Offered::Queued {
                        return true;
                    }
                    self.run.wait_for_parts();
                }
            }
            Side::Nobody => false,
        }
    }

    /// The next answer message not yet taken: from a handler on the
    /// worker, one it has sent already, else `None`; from a thread, the
    /// next it sends, waiting for it, and `None` once the call has ended
    /// (then [`BidiCall::finish`] says how).
    pub fn recv(&mut self) -> Option<Resp> {
        loop {
            if let Some(message) = self.answer.messages.get(self.taken) {
                self.taken += 1;
                return Some(message.clone());
            }
            if self.ended {
                return None;
            }
            let Side::Thread(shared) = &self.side else {
                // Only the next request makes the worker's handler send.
                return None;
            };
            let shared = shared.clone();
            if let Some(why) = self.run.stop(&self.answer) {
                self.stop(why);
                continue;
            }
            self.run.expect_parts();
            if self.run.take_parts(&shared, &mut self.answer) {
                self.ended = true;
                continue;
            }
            if self.answer.messages.len() == self.taken {
                self.run.wait_for_parts();
            }
        }
    }

    /// Ends the requests and returns what the call sent back: every
    /// message, those [`recv`](BidiCall::recv) took too, and its status
    /// and metadata. A thread's answer is waited for until its end (or the
    /// deadline).
    pub fn finish(mut self) -> Answer<Resp> {
        if !self.ended {
            let stopped = self.run.stop(&self.answer);
            match (&mut self.side, stopped) {
                (Side::Worker(_), Some(why)) => self.end(why),
                (Side::Worker(handler), None) => {
                    let mut out = Outgoing::default();
                    let mut ctx = self.run.context(&self.call, &mut self.response, false);
                    let ended = handler.on_end(&mut ctx, &mut out);
                    drop(ctx);
                    self.took(&out, ended);
                }
                (Side::Thread(shared), _) => {
                    let shared = shared.clone();
                    shared.end_incoming(None);
                    let answer = std::mem::replace(&mut self.answer, Answer::new());
                    self.answer = self.run.collect(&shared, answer);
                }
                (Side::Nobody, _) => {}
            }
            self.ended = true;
        }
        let answer = std::mem::replace(&mut self.answer, Answer::new());
        match &self.side {
            Side::Worker(_) => {
                let sent = self.headers_sent || !answer.messages.is_empty();
                let response = std::mem::take(&mut self.response);
                Answer {
                    result: answer.result,
                    ..Answer::from_metadata_and(response, answer.messages)
                }
                .sent_headers(sent)
            }
            Side::Thread(_) | Side::Nobody => answer,
        }
    }

    /// Takes what a call of the worker's handler sent back, and the
    /// status it returned. A client that cancels after `n` messages sees
    /// none past them, nor the status.
    fn took(&mut self, out: &Outgoing, result: Result<(), Status>) {
        self.headers_sent |= out.headers_now;
        self.answer
            .messages
            .extend(decode_all::<Resp>(&out.messages));
        if self.run.cut_at_cancel(&mut self.answer.messages, false) {
            self.end(Status::cancelled("the client cancelled the call"));
            return;
        }
        if let Err(status) = result {
            self.end(status);
        }
    }

    /// Ends the call for `why` (what [`Run::stop`] says) before its
    /// handler ends it; a thread serving it sees it cancelled or past its
    /// deadline.
    fn stop(&mut self, why: Status) {
        match &self.side {
            Side::Thread(shared) => {
                self.run.end_early(shared, &mut self.answer, why);
                self.ended = true;
            }
            Side::Worker(_) | Side::Nobody => self.end(why),
        }
    }

    /// Ends the call with `status`.
    fn end(&mut self, status: Status) {
        self.answer.result = Err(status);
        self.ended = true;
    }
}

impl<Req, Resp> Drop for BidiCall<Req, Resp> {
    fn drop(&mut self) {
        if let (Side::Thread(shared), false) = (&self.side, self.ended) {
            // The client went away: its thread sees the call cancelled,
            // unless it has ended it, or the deadline has, as a server's
            // worker sees before the client's reset.
            let reason = if self.run.ended_by_thread() {
                CancelReason::Ended
            } else if self.run.past_deadline() {
                CancelReason::DeadlineExceeded
            } else {
                CancelReason::Cancelled
            };
            shared.cancel(reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BidiHandler, Code, Context, Responses};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// Answers each number with the running total; at the end, the count
    /// of numbers in a trailer.
    #[derive(Default)]
    struct Total {
        sum: u32,
        count: u32,
    }

    impl BidiHandler<u32, u32> for Total {
        fn on_message(
            &mut self,
            _ctx: &mut Context<'_>,
            n: u32,
            out: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            if n == 0 {
                return Err(Status::invalid_argument("zero"));
            }
            self.sum += n;
            self.count += 1;
            out.send(&self.sum);
            Ok(())
        }

        fn on_end(
            &mut self,
            ctx: &mut Context<'_>,
            _out: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            let count = self.count.to_string();
            ctx.trailers_mut().insert("x-count", &count).unwrap();
            Ok(())
        }
    }

    fn total(ctx: &mut Context<'_>) -> Result<BidiStream<u32, u32>, Status> {
        ctx.headers_mut().insert("x-h", "1").unwrap();
        Ok(BidiStream::on_worker(Total::default()))
    }

    /// A thread that answers each number plus one, and ends `ABORTED`
    /// after the last; it tells `told` how its call was cancelled.
    fn plus_one(
        ctx: &mut Context<'_>,
        told: mpsc::Sender<CancelReason>,
    ) -> Result<BidiStream<u32, u32>, Status> {
        let (stream, requests, mut sink) = BidiStream::<u32, u32>::channel(ctx);
        sink.on_cancel(move |reason| told.send(reason).unwrap());
        std::thread::spawn(move || {
            for n in requests {
                let Ok(n) = n else { return };
                if sink.send(&(n + 1)).is_err() {
                    return;
                }
            }
            sink.finish(Err(Status::aborted("after the last")));
        });
        Ok(stream)
    }

    #[test]
    fn a_worker_handler_answers_each_request_as_it_is_sent() {
        let mut call = TestCall::new().open_bidi(total);
        assert_eq!(call.recv(), None, "nothing before a request");
        assert!(call.send(1));
        assert_eq!(call.recv(), Some(1));
        assert_eq!(call.recv(), None);
        // Ping-pong: each request made from the last answer.
        let mut last = 1;
        for _ in 0..3 {
            assert!(call.send(last));
            last = call.recv().unwrap();
        }
        assert_eq!(last, 8);
        let answer = call.finish();
        assert_eq!(answer.messages, [1, 2, 4, 8]);
        assert!(answer.result.is_ok());
        assert_eq!(answer.headers.get("x-h"), Some("1"));
        assert_eq!(answer.trailers.get("x-count"), Some("4"));

        // The handler's error ends the call: no more requests go.
        let mut call = TestCall::new().open_bidi(total);
        assert!(call.send(5));
        assert!(call.send(0), "the handler got it, and failed");
        assert!(!call.send(6), "the call has ended");
        assert_eq!(call.recv(), Some(5));
        assert_eq!(call.recv(), None);
        let answer = call.finish();
        assert_eq!(answer.messages, [5]);
        assert_eq!(answer.status().code(), Code::InvalidArgument);
        assert_eq!(answer.trailers.get("x-count"), None, "no on_end");

        // No message: trailers-only.
        let answer = TestCall::new().open_bidi(total).finish();
        assert!(answer.messages.is_empty());
        assert!(answer.headers.is_empty());
        assert_eq!(answer.trailers.get("x-h"), Some("1"));
        assert_eq!(answer.trailers.get("x-count"), Some("0"));
    }

    #[test]
    fn a_worker_handler_is_cancelled_after_the_messages_asked_for() {
        let mut call = TestCall::new().cancel_after(2).open_bidi(total);
        assert!(call.send(1));
        assert!(call.send(1));
        assert!(!call.send(1), "the client has cancelled");
        let answer = call.finish();
        assert_eq!(answer.messages, [1, 2]);
        assert_eq!(answer.status().code(), Code::Cancelled);
    }

    /// Answers each number twice, then fails on 9; at the end, answers
    /// twice more and fails.
    struct Twice;

    impl BidiHandler<u32, u32> for Twice {
        fn on_message(
            &mut self,
            _ctx: &mut Context<'_>,
            n: u32,
            out: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            out.send(&n);
            out.send(&(n + 1));
            match n {
                9 => Err(Status::aborted("nine")),
                _ => Ok(()),
            }
        }

        fn on_end(
            &mut self,
            _ctx: &mut Context<'_>,
            out: &mut Responses<'_, u32>,
        ) -> Result<(), Status> {
            out.send(&100);
            out.send(&101);
            Err(Status::aborted("the end"))
        }
    }

    #[test]
    fn a_client_that_cancelled_sees_no_error_sent_after() {
        // The client cancels once it has its message, before the status
        // that follows: `CANCELLED`, as `bidi` and a server have it.
        let twice = |_: &mut Context<'_>| Ok(BidiStream::on_worker(Twice));
        let call = TestCall::new().cancel_after(1);
        let mut open = call.open_bidi(twice);
        assert!(open.send(9));
        assert!(!open.send(10), "the client has cancelled");
        let answer = open.finish();
        assert_eq!(answer, call.bidi(twice, [9]));
        assert_eq!(answer.messages, [9]);
        assert_eq!(answer.status().code(), Code::Cancelled);

        let call = TestCall::new().cancel_after(3);
        let mut open = call.open_bidi(twice);
        assert!(open.send(1));
        let answer = open.finish();
        assert_eq!(answer, call.bidi(twice, [1]));
        assert_eq!(answer.messages, [1, 2, 100]);
        assert_eq!(answer.status().code(), Code::Cancelled);
    }

    #[test]
    fn a_thread_answers_as_it_goes_and_recv_waits_for_it() {
        let (told, heard) = mpsc::channel();
        let mut call = TestCall::new().open_bidi(|ctx| plus_one(ctx, told));
        let mut n = 0;
        for _ in 0..5 {
            assert!(call.send(n));
            n = call.recv().expect("the thread's answer");
        }
        assert_eq!(n, 5);
        let answer = call.finish();
        assert_eq!(answer.messages, [1, 2, 3, 4, 5]);
        assert_eq!(answer.status().code(), Code::Aborted);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)),
            Ok(CancelReason::Ended)
        );

        // After the thread's end, `recv` says so, and `send` is refused.
        let mut call = TestCall::new().open_bidi(|ctx: &mut Context<'_>| {
            let (stream, _requests, mut sink) = BidiStream::<u32, u32>::channel(ctx);
            std::thread::spawn(move || {
                let _ = sink.send(&9);
                sink.finish(Ok(()));
            });
            Ok(stream)
        });
        assert_eq!(call.recv(), Some(9));
        assert_eq!(call.recv(), None, "the call ended");
        assert!(!call.send(1));
        let answer = call.finish();
        assert_eq!(answer.messages, [9]);
        assert!(answer.result.is_ok());

        // `send` sees the end the thread sent, without a `recv` first.
        let (done, finished) = mpsc::channel();
        let mut call = TestCall::new().open_bidi(|ctx: &mut Context<'_>| {
            let (stream, requests, sink) = BidiStream::<u32, u32>::channel(ctx);
            std::thread::spawn(move || {
                sink.finish(Err(Status::aborted("done")));
                done.send(()).unwrap();
                drop(requests);
            });
            Ok(stream)
        });
        finished.recv().unwrap();
        assert!(!call.send(1), "the thread has ended the call");
        assert_eq!(call.finish().status().code(), Code::Aborted);
    }

    #[test]
    fn a_call_dropped_open_is_cancelled() {
        let (told, heard) = mpsc::channel();
        let mut call = TestCall::new().open_bidi(|ctx| plus_one(ctx, told));
        assert!(call.send(1));
        assert_eq!(call.recv(), Some(2));
        drop(call);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)),
            Ok(CancelReason::Cancelled)
        );

        // One the thread has ended, or its deadline, is not: the thread
        // sees how it ended, as on a server.
        let ended = |ctx: &mut Context<'_>, told: mpsc::Sender<_>, done: mpsc::Sender<_>| {
            let (stream, _requests, mut sink) = BidiStream::<u32, u32>::channel(ctx);
            sink.on_cancel(move |reason| told.send(reason).unwrap());
            std::thread::spawn(move || {
                sink.finish(Ok(()));
                done.send(()).unwrap();
            });
            Ok(stream)
        };
        let (told, heard) = mpsc::channel();
        let (done, finished) = mpsc::channel();
        let call = TestCall::new().open_bidi(|ctx| ended(ctx, told, done));
        finished.recv().unwrap();
        drop(call);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)),
            Ok(CancelReason::Ended)
        );
        let (told, heard) = mpsc::channel();
        let late = TestCall::new().timeout(Duration::from_millis(20));
        let call = late.open_bidi(|ctx| plus_one(ctx, told));
        std::thread::sleep(Duration::from_millis(30));
        drop(call);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)),
            Ok(CancelReason::DeadlineExceeded)
        );
    }

    #[test]
    fn recv_waits_no_longer_than_the_deadline() {
        let (told, heard) = mpsc::channel();
        let started = Instant::now();
        let mut call = TestCall::new()
            .timeout(Duration::from_millis(100))
            .open_bidi(|ctx| {
                let (stream, requests, mut sink) = BidiStream::<u32, u32>::channel(ctx);
                sink.on_cancel(move |reason| told.send(reason).unwrap());
                // Takes the requests and never answers.
                std::thread::spawn(move || {
                    requests.for_each(drop);
                    drop(sink);
                });
                Ok(stream)
            });
        assert!(call.send(1));
        assert_eq!(call.recv(), None);
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(!call.send(2));
        let answer = call.finish();
        assert_eq!(answer.status().code(), Code::DeadlineExceeded);
        assert_eq!(
            heard.recv_timeout(Duration::from_secs(5)),
            Ok(CancelReason::DeadlineExceeded)
        );
    }

    #[test]
    fn send_waits_while_the_threads_queue_is_full() {
        let (take, taken) = mpsc::channel::<()>();
        let mut call = TestCall::new().open_bidi(|ctx| {
            let (stream, requests, mut sink) = BidiStream::<Vec<u8>, u32>::channel(ctx);
            std::thread::spawn(move || {
                // Takes nothing until told to, then answers each size.
                taken.recv().unwrap();
                for request in requests {
                    let Ok(request) = request else { return };
                    if sink.send(&(request.len() as u32)).is_err() {
                        return;
                    }
                }
                sink.finish(Ok(()));
            });
            Ok(stream)
        });
        let big = vec![7u8; 40 << 10];
        // 40 KiB queue; the next 40 KiB pass the 64 KiB queued for a
        // thread, and still go (a queue takes one message past its
        // limit); the third waits for the thread.
        assert!(call.send(big.clone()));
        assert!(call.send(big.clone()));
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            take.send(()).unwrap();
        });
        let before = Instant::now();
        assert!(call.send(big.clone()));
        assert!(
            before.elapsed() >= Duration::from_millis(40),
            "the third request waited for the thread"
        );
        sender.join().unwrap();
        let answer = call.finish();
        assert_eq!(answer.messages, [40 << 10; 3]);
        assert!(answer.result.is_ok());
    }

    #[test]
    fn a_refused_or_late_call_has_ended_at_once() {
        let mut call = TestCall::new().open_bidi(|ctx: &mut Context<'_>| {
            ctx.trailers_mut().insert("x-why", "busy").unwrap();
            Err::<BidiStream<u32, u32>, _>(Status::unavailable("later"))
        });
        assert!(!call.send(1));
        assert_eq!(call.recv(), None);
        let answer = call.finish();
        assert_eq!(answer.status().code(), Code::Unavailable);
        assert_eq!(answer.trailers.get("x-why"), Some("busy"));

        let ran = std::cell::Cell::new(false);
        let late = TestCall::new().deadline(Instant::now() - Duration::from_millis(1));
        let mut call = late.open_bidi(|ctx| {
            ran.set(true);
            total(ctx)
        });
        assert!(!call.send(1));
        assert_eq!(call.finish().status().code(), Code::DeadlineExceeded);
        assert!(!ran.get());
    }

    /// A thread that takes the requests and answers only at the end,
    /// with their count.
    fn counts(ctx: &mut Context<'_>) -> Result<BidiStream<Vec<u8>, u32>, Status> {
        let (stream, requests, mut sink) = BidiStream::<Vec<u8>, u32>::channel(ctx);
        std::thread::spawn(move || {
            let mut count = 0;
            for request in requests {
                if request.is_err() {
                    return;
                }
                count += 1;
            }
            let _ = sink.send(&count);
            sink.finish(Ok(()));
        });
        Ok(stream)
    }

    #[test]
    fn a_full_queue_is_offered_again_as_soon_as_the_thread_takes_some() {
        // Each request fills the thread's queue: the next waits for the
        // thread's `Resume`, which comes at any point of the test's
        // offer. A `Resume` missed waits out the deadline.
        const REQUESTS: u32 = 100;
        let until = Instant::now() + Duration::from_secs(1);
        let drivers: Vec<_> = (0..3)
            .map(|_| {
                std::thread::spawn(move || {
                    let big = vec![1u8; 70 << 10];
                    let call = TestCall::new().timeout(Duration::from_secs(1));
                    while Instant::now() < until {
                        let mut open = call.open_bidi(counts);
                        for i in 0..REQUESTS {
                            assert!(open.send(big.clone()), "request {i} refused");
                        }
                        let answer = open.finish();
                        assert_eq!(answer.messages, [REQUESTS], "{:?}", answer.result);
                        let requests = (0..REQUESTS).map(|_| big.clone());
                        let answer = call.bidi(counts, requests);
                        assert_eq!(answer.messages, [REQUESTS], "{:?}", answer.result);
                    }
                })
            })
            .collect();
        for driver in drivers {
            driver.join().unwrap();
        }
    }
}
