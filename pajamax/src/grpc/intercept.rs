//! Interceptors and call observers: synchronous hooks around every call.
//!
//! An [`Interceptor`] runs on the worker before a call's handler, with the
//! method called and the call's [`Context`]: it can read the request
//! metadata (an API key, a token), reject the call with a status (the
//! handler then never runs), or add response metadata. A [`CallObserver`]
//! sees each call once it is answered: the method, the status code, how
//! long it took and how many message bytes went each way, for logging and
//! metrics.
//!
//! Register them on the [`Builder`](crate::Builder) for every service
//! ([`Builder::intercept`](crate::Builder::intercept),
//! [`Builder::observe`](crate::Builder::observe)), or wrap one service in
//! [`Intercepted`] for its calls only. A server without hooks pays one
//! test per call for them.
//!
//! An API-key check:
//!
//! ```
//! use pajamax::grpc::intercept::CallInfo;
//! use pajamax::{Context, Status};
//!
//! fn api_key(_call: &CallInfo<'_>, ctx: &mut Context<'_>) -> Result<(), Status> {
//!     match ctx.metadata().get("x-api-key") {
//!         Some("secret") => Ok(()),
//!         _ => Err(Status::unauthenticated("a valid x-api-key is required")),
//!     }
//! }
//!
//! let builder = pajamax::Server::builder().intercept(api_key);
//! ```
//!
//! A latency counter per method:
//!
//! ```
//! use pajamax::grpc::intercept::FinishedCall;
//! use std::collections::HashMap;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! let latency: Arc<Mutex<HashMap<String, (u64, Duration)>>> = Arc::default();
//! let counts = latency.clone();
//! let builder = pajamax::Server::builder().observe(move |call: &FinishedCall<'_>| {
//!     let mut counts = counts.lock().unwrap();
//!     let entry = counts.entry(format!("{}/{}", call.service, call.method)).or_default();
//!     entry.0 += 1;
//!     entry.1 += call.duration;
//! });
//! ```

use crate::grpc::context::Context;
use crate::grpc::service::{Method, MethodKind, Reply, Service};
use crate::grpc::status::{Code, Status};
use crate::grpc::streaming::{RawInbound, RawServerStream};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The method a call is for, as an interceptor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallInfo<'a> {
    /// The fully qualified service name, such as `helloworld.Greeter`.
    pub service: &'a str,
    /// The method name, such as `SayHello`.
    pub method: &'a str,
    /// How the method's messages flow.
    pub kind: MethodKind,
}

/// A synchronous hook run on the worker before a call's handler.
///
/// It must not block: it runs on the worker, like a handler. Closures of
/// the right shape are interceptors.
pub trait Interceptor: Send + Sync + 'static {
    /// Looks at a call before its handler runs: `ctx` has the request
    /// metadata, the deadline and the peer, and takes response metadata.
    ///
    /// # Errors
    ///
    /// The status to end the call with; its handler then does not run.
    fn intercept(&self, call: &CallInfo<'_>, ctx: &mut Context<'_>) -> Result<(), Status>;
}

impl<F> Interceptor for F
where
    F: Fn(&CallInfo<'_>, &mut Context<'_>) -> Result<(), Status> + Send + Sync + 'static,
{
    fn intercept(&self, call: &CallInfo<'_>, ctx: &mut Context<'_>) -> Result<(), Status> {
        self(call, ctx)
    }
}

/// A call once it is answered, as an observer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinishedCall<'a> {
    /// The service called (as sent by the client when it is unknown).
    pub service: &'a str,
    /// The method called (as sent by the client when it is unknown).
    pub method: &'a str,
    /// The status the call ended with.
    pub code: Code,
    /// From the time of the read that let the handler run to the answer's
    /// end. For a client-streaming or bidirectional call, that is the read
    /// that brought the request's headers. For a unary or
    /// server-streaming call, it is the read that completed its request
    /// message (the time the request's body took to arrive is not
    /// counted), or, for a call that had to wait to run until the client
    /// read the answers held for its windows, the step in which it ran. A
    /// call answered before its handler ran counts from the read that
    /// completed its request, or, ended while its body was awaited (its
    /// deadline passed, the server stopped), from its end: zero.
    pub duration: Duration,
    /// Request message bytes as the handler took them, 5-byte prefixes
    /// included: a compressed message counts inflated.
    pub request_bytes: u64,
    /// Answer message bytes as the handler made them, 5-byte prefixes
    /// included: a message sent compressed counts before its compression.
    pub response_bytes: u64,
}

/// A hook that sees each call once it is answered, on the worker that
/// served it. It must not block. A call the client resets, or whose
/// connection closes before it is answered, is seen with `CANCELLED`.
/// Requests turned away before they are read as calls are not seen: one
/// whose header list is past
/// [`max_header_list_size`](crate::Builder::max_header_list_size)
/// (answered `RESOURCE_EXHAUSTED`), and streams refused with
/// REFUSED_STREAM.
pub trait CallObserver: Send + Sync + 'static {
    /// One call is answered.
    fn finished(&self, call: &FinishedCall<'_>);
}

impl<F> CallObserver for F
where
    F: Fn(&FinishedCall<'_>) + Send + Sync + 'static,
{
    fn finished(&self, call: &FinishedCall<'_>) {
        self(call)
    }
}

/// The hooks of a server.
#[derive(Default, Clone)]
pub(crate) struct Hooks {
    pub interceptors: Vec<Arc<dyn Interceptor>>,
    pub observers: Vec<Arc<dyn CallObserver>>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("interceptors", &self.interceptors.len())
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl Hooks {
    /// Runs the interceptors in order; the first error stops.
    pub(crate) fn intercept(
        &self,
        call: &CallInfo<'_>,
        ctx: &mut Context<'_>,
    ) -> Result<(), Status> {
        for interceptor in &self.interceptors {
            interceptor.intercept(call, ctx)?;
        }
        Ok(())
    }

    pub(crate) fn finished(&self, call: &FinishedCall<'_>) {
        for observer in &self.observers {
            observer.finished(call);
        }
    }
}

/// A service whose calls pass `interceptor` first: an interceptor for
/// one service only.
///
/// ```
/// # struct Svc;
/// # impl pajamax::Service for Svc {
/// #     fn name(&self) -> &'static str { "demo.Demo" }
/// #     fn methods(&self) -> &'static [pajamax::Method] { &[] }
/// # }
/// use pajamax::{CallInfo, Context, Intercepted, Status};
///
/// let only_admins = |_: &CallInfo<'_>, ctx: &mut Context<'_>| match ctx.metadata().get("x-role") {
///     Some("admin") => Ok(()),
///     _ => Err(Status::permission_denied("admins only")),
/// };
/// let builder = pajamax::Server::builder().add_service(Intercepted::new(Svc, only_admins));
/// ```
pub struct Intercepted<S, I> {
    service: S,
    interceptor: I,
}

impl<S, I> fmt::Debug for Intercepted<S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Intercepted").finish_non_exhaustive()
    }
}

impl<S: Service, I: Interceptor> Intercepted<S, I> {
    /// `service`, with `interceptor` run before each of its handlers.
    pub fn new(service: S, interceptor: I) -> Intercepted<S, I> {
        Intercepted {
            service,
            interceptor,
        }
    }

    fn check(&self, method: usize, ctx: &mut Context<'_>) -> Result<(), Status> {
        let Some(described) = self.service.methods().get(method) else {
            return Ok(());
        };
        let info = CallInfo {
            service: self.service.name(),
            method: described.name,
            kind: described.kind,
        };
        self.interceptor.intercept(&info, ctx)
    }
}

impl<S: Service, I: Interceptor> Service for Intercepted<S, I> {
    fn name(&self) -> &'static str {
        self.service.name()
    }

    fn methods(&self) -> &'static [Method] {
        self.service.methods()
    }

    fn unary(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        self.check(method, ctx)?;
        self.service.unary(method, ctx, request, reply)
    }

    fn server_streaming(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
    ) -> Result<RawServerStream, Status> {
        self.check(method, ctx)?;
        self.service.server_streaming(method, ctx, request)
    }

    fn client_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        self.check(method, ctx)?;
        self.service.client_streaming(method, ctx)
    }

    fn bidi_streaming(&self, method: usize, ctx: &mut Context<'_>) -> Result<RawInbound, Status> {
        self.check(method, ctx)?;
        self.service.bidi_streaming(method, ctx)
    }
}
