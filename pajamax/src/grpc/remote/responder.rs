//! The answer of a unary or client-streaming call, from another thread.

use super::{Part, Shared};
use crate::grpc::framing::framed;
use crate::grpc::metadata::Metadata;
use crate::grpc::status::Status;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// Where a unary (or client-streaming) call's answer goes: taken with
/// [`Context::defer`](crate::Context::defer), or made with a stream's
/// `channel`.
///
/// Send it to any thread and call [`Responder::respond`] there. A responder
/// dropped without an answer answers the call with `INTERNAL`, so the client
/// never hangs; an answer for a call that has ended (the client cancelled,
/// the deadline passed, the connection closed) is dropped, and
/// [`Responder::is_cancelled`] tells so beforehand.
///
/// A handler whose answer needs slow work (a database, a file, another
/// service) hands the call to a thread of the application's, and the
/// worker serves other calls meanwhile:
///
/// ```
/// use pajamax::{Context, Responder, Status};
/// use std::sync::mpsc;
///
/// struct Lookup {
///     jobs: mpsc::Sender<(String, Responder)>,
/// }
///
/// impl Lookup {
///     /// As in a generated trait: `rpc Lookup (string) returns (string)`.
///     fn lookup_with_context(&self, ctx: &mut Context<'_>, key: String) -> Result<String, Status> {
///         let responder = ctx.defer();
///         if let Err(mpsc::SendError((_, responder))) = self.jobs.send((key, responder)) {
///             responder.respond::<String>(Err(Status::unavailable("the lookup thread stopped")));
///         }
///         Ok(String::new()) // ignored: the responder answers
///     }
/// }
///
/// // The application's thread, which may block.
/// let (jobs, queue) = mpsc::channel::<(String, Responder)>();
/// std::thread::spawn(move || {
///     for (key, mut responder) in queue {
///         if responder.is_cancelled() {
///             continue; // the client has gone, or its deadline passed
///         }
///         let value = format!("the value of {key}"); // the slow part
///         responder.trailers_mut().insert("x-source", "store").unwrap();
///         responder.respond(Ok(value));
///     }
/// });
///
/// let service = Lookup { jobs };
/// # let md = pajamax::Metadata::new();
/// # let mut response = pajamax::ResponseMetadata::default();
/// # let mut ctx = Context::new(&md, None, None, &mut response);
/// # service.lookup_with_context(&mut ctx, "k".into())?;
/// # Ok::<(), Status>(())
/// ```
pub struct Responder {
    shared: Option<Arc<Shared>>,
    headers: Metadata,
    trailers: Metadata,
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("stream", &self.shared.as_ref().map(|s| s.target.stream))
            .finish()
    }
}

impl Responder {
    pub(crate) fn new(shared: Option<Arc<Shared>>) -> Responder {
        Responder {
            shared,
            headers: Metadata::new(),
            trailers: Metadata::new(),
        }
    }

    /// Metadata sent with the response headers.
    pub fn headers_mut(&mut self) -> &mut Metadata {
        &mut self.headers
    }

    /// Metadata sent with the trailers of the answer.
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.trailers
    }

    /// Whether the call has ended without this answer, so that an answer
    /// sent now is dropped; also once the call's request stream has
    /// yielded an error (a message that did not decode), though the call
    /// is still open then and an answer (that error, as a rule) still
    /// goes to the client.
    pub fn is_cancelled(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.cancelled().is_some())
    }

    /// The call's deadline, as [`Context::deadline`](crate::Context::deadline).
    pub fn deadline(&self) -> Option<Instant> {
        self.shared.as_ref().and_then(|s| s.deadline)
    }

    /// Answers the call with `result`. The message is encoded here, on the
    /// calling thread.
    pub fn respond<M: prost::Message>(mut self, result: Result<M, Status>) {
        let framed = result.map(|message| framed(&message));
        self.send(framed);
    }

    fn send(&mut self, result: Result<Vec<u8>, Status>) {
        if let Some(shared) = self.shared.take() {
            shared.release_request();
            shared.send(Part::Answer {
                result,
                headers: std::mem::take(&mut self.headers),
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
