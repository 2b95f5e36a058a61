//! The `grpc.testing.TestService` that gRPC's interoperability clients call.
//!
//! [`InteropService`] implements every method, both ways a pajamax handler
//! can serve a stream:
//! - on the worker: `StreamingOutputCall` is a paced [`Producer`] that waits
//!   out each answer's `interval_us` without holding the worker,
//!   `StreamingInputCall` a [`ClientStreamHandler`], `HalfDuplexCall` a
//!   [`BidiHandler`] that answers once the client is done;
//! - on a thread of its own: `FullDuplexCall` reads the requests from a
//!   [`Streaming`] and answers through a [`Sink`].
//!
//! Requested statuses (`response_status`) end the call with that status, on
//! unary and streaming calls, and the `x-grpc-test-echo-initial` and
//! `x-grpc-test-echo-trailing-bin` metadata come back in the response
//! headers and trailers.

use crate::grpc_testing::test_service_server::TestService;
use crate::grpc_testing::{
    EchoStatus, Empty, Payload, PayloadType, SimpleRequest, SimpleResponse,
    StreamingInputCallRequest, StreamingInputCallResponse, StreamingOutputCallRequest,
    StreamingOutputCallResponse,
};
use pajamax::{
    BidiHandler, BidiStream, ClientStream, ClientStreamHandler, Code, Context, Next, Producer,
    Responses, ServerStream, Sink, Status, Streaming,
};
use std::collections::VecDeque;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// Request metadata whose value comes back with the response headers.
pub const ECHO_INITIAL: &str = "x-grpc-test-echo-initial";
/// Request metadata whose value comes back with the trailers.
pub const ECHO_TRAILING: &str = "x-grpc-test-echo-trailing-bin";
/// The largest payload an answer may be asked to carry.
pub const MAX_RESPONSE_SIZE: usize = 16 << 20;

/// The handlers of the interop `TestService`.
///
/// ```
/// use pajamax_examples::grpc_testing::test_service_server::TestService;
/// use pajamax_examples::grpc_testing::{Empty, SimpleRequest};
/// use pajamax_examples::InteropService;
///
/// assert_eq!(InteropService.empty_call(Empty {}).unwrap(), Empty {});
/// let request = SimpleRequest { response_size: 3, ..Default::default() };
/// let answer = InteropService.unary_call(request).unwrap();
/// assert_eq!(answer.payload.unwrap().body, vec![0, 0, 0]);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct InteropService;

impl TestService for InteropService {
    fn empty_call(&self, _request: Empty) -> Result<Empty, Status> {
        Ok(Empty {})
    }

    fn unary_call(&self, request: SimpleRequest) -> Result<SimpleResponse, Status> {
        answer_unary(request, false)
    }

    fn unary_call_with_context(
        &self,
        ctx: &mut Context<'_>,
        request: SimpleRequest,
    ) -> Result<SimpleResponse, Status> {
        echo_metadata(ctx)?;
        if let Some(flag) = &request.response_compressed {
            ctx.compress_response(flag.value);
        }
        answer_unary(request, ctx.request_compressed())
    }

    fn cacheable_unary_call_with_context(
        &self,
        ctx: &mut Context<'_>,
        request: SimpleRequest,
    ) -> Result<SimpleResponse, Status> {
        self.unary_call_with_context(ctx, request)
    }

    fn streaming_output_call_with_context(
        &self,
        ctx: &mut Context<'_>,
        request: StreamingOutputCallRequest,
    ) -> Result<ServerStream<StreamingOutputCallResponse>, Status> {
        echo_metadata(ctx)?;
        // The answers are compressed if one of them asks to be (and the
        // client accepts gzip or deflate); those that ask not to be go
        // uncompressed.
        let asked: Vec<bool> = request
            .response_parameters
            .iter()
            .filter_map(|parameters| parameters.compressed.as_ref().map(|flag| flag.value))
            .collect();
        if !asked.is_empty() {
            ctx.compress_response(asked.contains(&true));
        }
        Ok(ServerStream::from_producer(PacedAnswers::new(request)?))
    }

    fn streaming_input_call_with_context(
        &self,
        ctx: &mut Context<'_>,
    ) -> Result<ClientStream<StreamingInputCallRequest, StreamingInputCallResponse>, Status> {
        echo_metadata(ctx)?;
        Ok(ClientStream::on_worker(PayloadCounter::default()))
    }

    fn full_duplex_call_with_context(
        &self,
        ctx: &mut Context<'_>,
    ) -> Result<BidiStream<StreamingOutputCallRequest, StreamingOutputCallResponse>, Status> {
        echo_metadata(ctx)?;
        let (stream, requests, sink) = BidiStream::channel(ctx);
        std::thread::Builder::new()
            .name("interop-full-duplex".into())
            .spawn(move || full_duplex(requests, sink))
            .map_err(|err| Status::resource_exhausted(format!("no thread for the call: {err}")))?;
        Ok(stream)
    }

    fn half_duplex_call_with_context(
        &self,
        ctx: &mut Context<'_>,
    ) -> Result<BidiStream<StreamingOutputCallRequest, StreamingOutputCallResponse>, Status> {
        echo_metadata(ctx)?;
        Ok(BidiStream::on_worker(HalfDuplex::default()))
    }
}

/// The answers of one `StreamingOutputCall` request, in order, each after
/// its `interval_us`; the worker serves other calls while one waits.
struct PacedAnswers {
    kind: i32,
    /// `(size, interval, uncompressed)` of each answer still to send; an
    /// answer asked not to be compressed goes uncompressed in a compressed
    /// call.
    left: VecDeque<(i32, Duration, bool)>,
    /// When the next answer is due.
    due: Option<Instant>,
    status: Option<Status>,
}

impl PacedAnswers {
    fn new(request: StreamingOutputCallRequest) -> Result<PacedAnswers, Status> {
        let mut left = VecDeque::new();
        for parameters in &request.response_parameters {
            let interval = u64::try_from(parameters.interval_us).map_err(|_| {
                Status::invalid_argument(format!("negative interval_us {}", parameters.interval_us))
            })?;
            let uncompressed = parameters
                .compressed
                .as_ref()
                .is_some_and(|flag| !flag.value);
            left.push_back((
                parameters.size,
                Duration::from_micros(interval),
                uncompressed,
            ));
        }
        Ok(PacedAnswers {
            kind: request.response_type,
            left,
            due: None,
            status: requested_status(request.response_status.as_ref()),
        })
    }
}

impl Producer<StreamingOutputCallResponse> for PacedAnswers {
    fn next(&mut self, now: Instant) -> Next<StreamingOutputCallResponse> {
        let Some(&(size, interval, uncompressed)) = self.left.front() else {
            return Next::End(self.status.take().map_or(Ok(()), Err));
        };
        let due = *self.due.get_or_insert(now + interval);
        if due > now {
            return Next::Wait(due);
        }
        self.left.pop_front();
        self.due = None;
        let answer = match payload(self.kind, size) {
            Ok(payload) => StreamingOutputCallResponse {
                payload: Some(payload),
            },
            Err(status) => return Next::End(Err(status)),
        };
        if uncompressed {
            Next::Uncompressed(answer)
        } else {
            Next::Message(answer)
        }
    }
}

/// `StreamingInputCall`: the payload bytes of every request, summed.
#[derive(Default)]
struct PayloadCounter {
    total: usize,
}

impl ClientStreamHandler<StreamingInputCallRequest, StreamingInputCallResponse> for PayloadCounter {
    fn on_message(
        &mut self,
        ctx: &mut Context<'_>,
        request: StreamingInputCallRequest,
    ) -> Result<(), Status> {
        let expected = request.expect_compressed.is_some_and(|flag| flag.value);
        if expected && !ctx.request_compressed() {
            return Err(Status::invalid_argument(
                "the request was expected to be compressed but was not",
            ));
        }
        self.total += request.payload.map_or(0, |p| p.body.len());
        Ok(())
    }

    fn on_end(&mut self, _ctx: &mut Context<'_>) -> Result<StreamingInputCallResponse, Status> {
        let total = i32::try_from(self.total)
            .map_err(|_| Status::out_of_range("more payload bytes than an int32 holds"))?;
        Ok(StreamingInputCallResponse {
            aggregated_payload_size: total,
        })
    }
}

/// `FullDuplexCall`, on a thread of its own: each request is answered as
/// it comes, each answer after its `interval_us`; a request asking for a
/// status ends the call with it.
fn full_duplex(
    requests: Streaming<StreamingOutputCallRequest>,
    mut sink: Sink<StreamingOutputCallResponse>,
) {
    // Its sender goes as the call ends (the client cancelled, the deadline
    // passed, the connection closed): a wait for an answer's interval ends
    // with the call instead of sleeping it out.
    let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
    sink.on_cancel(move |_| drop(ended_tx));
    for request in requests {
        let request = match request {
            Ok(request) => request,
            Err(status) => return sink.finish(Err(status)),
        };
        if let Some(status) = requested_status(request.response_status.as_ref()) {
            return sink.finish(Err(status));
        }
        for parameters in &request.response_parameters {
            if parameters.interval_us > 0 {
                let interval = Duration::from_micros(parameters.interval_us as u64);
                if let Err(RecvTimeoutError::Disconnected) = ended.recv_timeout(interval) {
                    return;
                }
            }
            let answer = match payload(request.response_type, parameters.size) {
                Ok(payload) => StreamingOutputCallResponse {
                    payload: Some(payload),
                },
                Err(status) => return sink.finish(Err(status)),
            };
            let uncompressed = parameters
                .compressed
                .as_ref()
                .is_some_and(|flag| !flag.value);
            let sent = if uncompressed {
                sink.send_uncompressed(&answer)
            } else {
                sink.send(&answer)
            };
            if sent.is_err() {
                // The call has ended (cancelled, deadline, connection gone).
                return;
            }
        }
    }
    sink.finish(Ok(()));
}

/// `HalfDuplexCall`, on the worker: requests are kept until the client is
/// done, then all of them are answered (without pauses: the worker does not
/// wait).
#[derive(Default)]
struct HalfDuplex {
    requests: Vec<StreamingOutputCallRequest>,
}

impl BidiHandler<StreamingOutputCallRequest, StreamingOutputCallResponse> for HalfDuplex {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        request: StreamingOutputCallRequest,
        _responses: &mut Responses<'_, StreamingOutputCallResponse>,
    ) -> Result<(), Status> {
        if self.requests.len() >= MAX_HALF_DUPLEX_REQUESTS {
            return Err(Status::resource_exhausted(
                "too many requests kept for a half-duplex call",
            ));
        }
        self.requests.push(request);
        Ok(())
    }

    fn on_end(
        &mut self,
        _ctx: &mut Context<'_>,
        responses: &mut Responses<'_, StreamingOutputCallResponse>,
    ) -> Result<(), Status> {
        for request in self.requests.drain(..) {
            if let Some(status) = requested_status(request.response_status.as_ref()) {
                return Err(status);
            }
            for parameters in &request.response_parameters {
                responses.send(&StreamingOutputCallResponse {
                    payload: Some(payload(request.response_type, parameters.size)?),
                });
            }
        }
        Ok(())
    }
}

/// The most requests a half-duplex call keeps before it answers.
const MAX_HALF_DUPLEX_REQUESTS: usize = 1000;

/// What `UnaryCall` answers, once the metadata is echoed and the answer's
/// compression chosen; `compressed` tells whether the request came
/// compressed.
fn answer_unary(request: SimpleRequest, compressed: bool) -> Result<SimpleResponse, Status> {
    if let Some(status) = requested_status(request.response_status.as_ref()) {
        return Err(status);
    }
    if request.expect_compressed.is_some_and(|flag| flag.value) && !compressed {
        return Err(Status::invalid_argument(
            "the request was expected to be compressed but was not",
        ));
    }
    Ok(SimpleResponse {
        payload: Some(payload(request.response_type, request.response_size)?),
        server_id: if request.fill_server_id {
            "pajamax-interop".into()
        } else {
            String::new()
        },
        ..SimpleResponse::default()
    })
}

/// The status a request asks the call to end with; a code of 0 asks for a
/// normal answer.
fn requested_status(status: Option<&EchoStatus>) -> Option<Status> {
    let status = status.filter(|status| status.code != 0)?;
    Some(Status::new(
        Code::from_i32(status.code),
        status.message.clone(),
    ))
}

/// A payload of `size` zero bytes.
fn payload(kind: i32, size: i32) -> Result<Payload, Status> {
    if PayloadType::try_from(kind) != Ok(PayloadType::Compressable) {
        return Err(Status::invalid_argument(format!(
            "unsupported payload type {kind}"
        )));
    }
    let size = usize::try_from(size)
        .map_err(|_| Status::invalid_argument(format!("negative payload size {size}")))?;
    if size > MAX_RESPONSE_SIZE {
        return Err(Status::invalid_argument(format!(
            "payload size {size} is above the limit of {MAX_RESPONSE_SIZE}"
        )));
    }
    Ok(Payload {
        r#type: PayloadType::Compressable as i32,
        body: vec![0; size],
    })
}

/// Sends [`ECHO_INITIAL`] back as initial metadata and [`ECHO_TRAILING`] as
/// trailing metadata, when the request carries them: as they came, whatever
/// their bytes.
fn echo_metadata(ctx: &mut Context<'_>) -> Result<(), Status> {
    let initial = ctx.metadata().get_bytes(ECHO_INITIAL).map(<[u8]>::to_vec);
    let trailing = ctx.metadata().get_bytes(ECHO_TRAILING).map(<[u8]>::to_vec);
    if let Some(value) = initial {
        ctx.headers_mut()
            .insert_raw(ECHO_INITIAL, &value)
            .map_err(|err| Status::invalid_argument(format!("{ECHO_INITIAL}: {err}")))?;
    }
    if let Some(value) = trailing {
        ctx.trailers_mut()
            .insert_raw(ECHO_TRAILING, &value)
            .map_err(|err| Status::invalid_argument(format!("{ECHO_TRAILING}: {err}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc_testing::test_service_server::TestServiceServer;
    use crate::grpc_testing::BoolValue;
    use pajamax::{Metadata, Reply, ResponseMetadata, Service};
    use prost::Message;

    /// Calls method `name` the way the server does; gives the encoded answer
    /// and the response metadata.
    fn call(
        name: &str,
        metadata: &Metadata,
        request: &[u8],
    ) -> (Result<Vec<u8>, Status>, ResponseMetadata) {
        let server = TestServiceServer::new(InteropService);
        let method = server
            .methods()
            .iter()
            .position(|m| m.name == name)
            .unwrap_or_else(|| panic!("no method {name}"));
        let mut response = ResponseMetadata::default();
        let mut ctx = Context::new(metadata, None, None, &mut response);
        let mut buf = Vec::new();
        let result = server.unary(method, &mut ctx, request, &mut Reply::new(&mut buf));
        (result.map(|()| buf), response)
    }

    fn unary(request: SimpleRequest) -> Result<SimpleResponse, Status> {
        let (answer, _) = call("UnaryCall", &Metadata::new(), &request.encode_to_vec());
        answer.map(|bytes| SimpleResponse::decode(bytes.as_slice()).unwrap())
    }

    #[test]
    fn serves_the_test_service() {
        let server = TestServiceServer::new(InteropService);
        assert_eq!(server.name(), "grpc.testing.TestService");
        assert!(server
            .methods()
            .iter()
            .any(|m| m.name == "UnimplementedCall"));
    }

    #[test]
    fn empty_call_answers_empty() {
        let (answer, _) = call("EmptyCall", &Metadata::new(), &[]);
        assert!(answer.unwrap().is_empty());
    }

    #[test]
    fn unary_call_answers_the_size_asked_for() {
        let answer = unary(SimpleRequest {
            response_size: 314_159,
            payload: Some(Payload {
                r#type: 0,
                body: vec![0; 271_828],
            }),
            ..SimpleRequest::default()
        })
        .unwrap();
        let payload = answer.payload.unwrap();
        assert_eq!(payload.r#type, PayloadType::Compressable as i32);
        assert_eq!(payload.body.len(), 314_159);
        assert!(payload.body.iter().all(|&b| b == 0));
    }

    #[test]
    fn unary_call_refuses_bad_sizes_and_types() {
        for request in [
            SimpleRequest {
                response_size: -1,
                ..SimpleRequest::default()
            },
            SimpleRequest {
                response_size: (MAX_RESPONSE_SIZE + 1) as i32,
                ..SimpleRequest::default()
            },
            SimpleRequest {
                response_type: 7,
                ..SimpleRequest::default()
            },
            SimpleRequest {
                expect_compressed: Some(BoolValue { value: true }),
                ..SimpleRequest::default()
            },
        ] {
            let err = unary(request).unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        }
    }

    #[test]
    fn unary_call_ends_with_the_status_asked_for() {
        let message = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n";
        let err = unary(SimpleRequest {
            response_status: Some(EchoStatus {
                code: 2,
                message: message.into(),
            }),
            ..SimpleRequest::default()
        })
        .unwrap_err();
        assert_eq!(err.code(), Code::Unknown);
        assert_eq!(err.message(), message);

        // Code 0 asks for a normal answer.
        let answer = unary(SimpleRequest {
            response_status: Some(EchoStatus {
                code: 0,
                message: "fine".into(),
            }),
            ..SimpleRequest::default()
        });
        assert!(answer.is_ok());
    }

    #[test]
    fn unary_call_echoes_metadata() {
        let mut metadata = Metadata::new();
        metadata
            .insert(ECHO_INITIAL, "test_initial_metadata_value")
            .unwrap();
        metadata
            .insert_bin(ECHO_TRAILING, &[0xab, 0xab, 0xab])
            .unwrap();
        let request = SimpleRequest {
            response_size: 1,
            ..SimpleRequest::default()
        };
        let (answer, response) = call("UnaryCall", &metadata, &request.encode_to_vec());
        assert!(answer.is_ok());
        assert_eq!(
            response.headers.get(ECHO_INITIAL),
            Some("test_initial_metadata_value")
        );
        assert_eq!(
            response.trailers.get_bin(ECHO_TRAILING),
            Some(vec![0xab, 0xab, 0xab])
        );
        assert!(response.headers.get(ECHO_TRAILING).is_none());

        // The metadata also goes with a status.
        let request = SimpleRequest {
            response_status: Some(EchoStatus {
                code: 5,
                message: "gone".into(),
            }),
            ..SimpleRequest::default()
        };
        let (answer, response) = call("UnaryCall", &metadata, &request.encode_to_vec());
        assert_eq!(answer.unwrap_err().code(), Code::NotFound);
        assert_eq!(response.trailers.len(), 1);
        assert_eq!(response.headers.len(), 1);

        // Values echoed as they came: bytes past ASCII, base64 as sent.
        let mut metadata = Metadata::new();
        metadata
            .insert_raw(ECHO_INITIAL, "naïve".as_bytes())
            .unwrap();
        metadata.insert_raw(ECHO_TRAILING, b"q6ur").unwrap();
        let (answer, response) = call("UnaryCall", &metadata, &[]);
        assert!(answer.is_ok());
        assert_eq!(response.headers.get(ECHO_INITIAL), Some("naïve"));
        assert_eq!(
            response.trailers.get_bytes(ECHO_TRAILING),
            Some(&b"q6ur"[..])
        );
        assert_eq!(
            response.trailers.get_bin(ECHO_TRAILING),
            Some(vec![0xab, 0xab, 0xab])
        );
    }

    #[test]
    fn unimplemented_call_answers_unimplemented() {
        let (answer, _) = call("UnimplementedCall", &Metadata::new(), &[]);
        assert_eq!(answer.unwrap_err().code(), Code::Unimplemented);
    }

    #[test]
    fn paced_answers_wait_their_interval() {
        let request = StreamingOutputCallRequest {
            response_parameters: vec![
                crate::grpc_testing::ResponseParameters {
                    size: 3,
                    interval_us: 0,
                    ..Default::default()
                },
                crate::grpc_testing::ResponseParameters {
                    size: 5,
                    interval_us: 1000,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let mut answers = PacedAnswers::new(request).unwrap();
        let start = Instant::now();
        let Next::Message(first) = answers.next(start) else {
            panic!("the first answer is due at once")
        };
        assert_eq!(first.payload.unwrap().body.len(), 3);
        let Next::Wait(due) = answers.next(start) else {
            panic!("the second one waits")
        };
        assert_eq!(due, start + Duration::from_millis(1));
        let Next::Message(second) = answers.next(due) else {
            panic!("due now")
        };
        assert_eq!(second.payload.unwrap().body.len(), 5);
        assert!(matches!(answers.next(due), Next::End(Ok(()))));
    }
}
