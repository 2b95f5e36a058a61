//! Answers produced later, on any thread: the [`Responder`] a handler keeps,
//! and the [`Inbox`] that carries answers back to the connection's worker.

use crate::grpc::metadata::Metadata;
use crate::grpc::status::Status;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A finished call on its way back to its connection.
pub(crate) struct Answer {
    /// The connection, as its worker knows it.
    pub connection: u64,
    pub stream: u32,
    /// The framed reply message (5-byte prefix included), or the failure.
    pub result: Result<Vec<u8>, Status>,
    pub trailers: Metadata,
}

/// The queue of answers for one worker. Producers push from any thread; the
/// worker is woken once for however many answers arrive before it drains.
pub struct Inbox {
    answers: Mutex<Vec<Answer>>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").finish_non_exhaustive()
    }
}

impl Inbox {
    /// An inbox that calls `wake` when its first answer arrives after a
    /// drain.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Arc<Inbox> {
        Arc::new(Inbox {
            answers: Mutex::new(Vec::new()),
            wake: Box::new(wake),
        })
    }

    pub(crate) fn push(&self, answer: Answer) {
        let was_empty = {
            let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
            answers.push(answer);
            answers.len() == 1
        };
        if was_empty {
            (self.wake)();
        }
    }

    /// Moves every waiting answer into `into`.
    pub(crate) fn drain(&self, into: &mut Vec<Answer>) {
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut answers);
    }
}

/// Where a call's answer goes: taken from the call's
/// [`Context`](crate::Context) with [`Context::defer`](crate::Context::defer).
///
/// Send it to any thread and call [`Responder::respond`] there. A responder
/// dropped without an answer answers the call with `INTERNAL`, so the client
/// never hangs; an answer for a call the client has reset, or a connection
/// that has closed, is dropped.
pub struct Responder {
    target: Option<Target>,
    trailers: Metadata,
}

struct Target {
    inbox: Arc<Inbox>,
    connection: u64,
    stream: u32,
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("stream", &self.target.as_ref().map(|t| t.stream))
            .finish()
    }
}

impl Responder {
    pub(crate) fn new(inbox: Arc<Inbox>, connection: u64, stream: u32) -> Responder {
        Responder {
            target: Some(Target {
                inbox,
                connection,
                stream,
            }),
            trailers: Metadata::new(),
        }
    }

    /// A responder whose answer goes nowhere.
    pub(crate) fn detached() -> Responder {
        Responder {
            target: None,
            trailers: Metadata::new(),
        }
    }

    /// Metadata sent with the trailers of the answer.
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.trailers
    }

    /// Answers the call with `result`. The message is encoded here, on the
    /// calling thread.
    pub fn respond<M: prost::Message>(mut self, result: Result<M, Status>) {
        let framed = result.map(|message| {
            let len = message.encoded_len();
            let mut buf = Vec::with_capacity(5 + len);
            buf.push(0);
            buf.extend_from_slice(&(len as u32).to_be_bytes());
            message.encode_raw(&mut buf);
            buf
        });
        self.send(framed);
    }

    fn send(&mut self, result: Result<Vec<u8>, Status>) {
        if let Some(target) = self.target.take() {
            target.inbox.push(Answer {
                connection: target.connection,
                stream: target.stream,
                result,
                trailers: std::mem::take(&mut self.trailers),
            });
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.send(Err(Status::internal(
            "the handler dropped its responder without answering",
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting_inbox() -> (Arc<Inbox>, Arc<AtomicUsize>) {
        let wakes = Arc::new(AtomicUsize::new(0));
        let counter = wakes.clone();
        let inbox = Inbox::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        (inbox, wakes)
    }

    #[test]
    fn many_answers_wake_once_until_drained() {
        let (inbox, wakes) = counting_inbox();
        for stream in [1, 3, 5] {
            Responder::new(inbox.clone(), 7, stream).respond(Ok(42u32));
        }
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        let mut answers = Vec::new();
        inbox.drain(&mut answers);
        assert_eq!(answers.len(), 3);
        assert_eq!(
            answers[0].result.as_ref().unwrap(),
            &[0, 0, 0, 0, 2, 0x08, 42]
        );
        Responder::new(inbox.clone(), 7, 7).respond(Ok(1u32));
        assert_eq!(wakes.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn dropped_responder_answers_internal() {
        let (inbox, _) = counting_inbox();
        let mut responder = Responder::new(inbox.clone(), 1, 9);
        responder.trailers_mut().insert("x-why", "dropped").unwrap();
        drop(responder);
        let mut answers = Vec::new();
        inbox.drain(&mut answers);
        let status = answers[0].result.as_ref().unwrap_err();
        assert_eq!(status.code(), crate::Code::Internal);
        assert_eq!(answers[0].trailers.get("x-why"), Some("dropped"));
    }

    #[test]
    fn errors_travel_as_status() {
        let (inbox, _) = counting_inbox();
        Responder::new(inbox.clone(), 1, 3).respond::<u32>(Err(Status::not_found("gone")));
        let mut answers = Vec::new();
        inbox.drain(&mut answers);
        assert_eq!(answers[0].result.as_ref().unwrap_err().message(), "gone");
        assert_eq!((answers[0].connection, answers[0].stream), (1, 3));
    }
}
