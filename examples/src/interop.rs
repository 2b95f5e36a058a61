//! The `grpc.testing.TestService` that gRPC's interoperability clients call.
//!
//! [`InteropService`] implements the unary methods: `EmptyCall`, and
//! `UnaryCall` (and `CacheableUnaryCall`, served the same way) with its
//! payload sizes, requested statuses and echoed metadata. [`InteropServer`] serves it; on top of what the generated
//! server does, it answers a `FullDuplexCall` whose only request asks for a
//! status with that status, which is all the `status_code_and_message` case
//! needs of a streaming method. Every other streaming call answers
//! `UNIMPLEMENTED`.

use crate::grpc_testing::test_service_server::{self, TestService, TestServiceServer};
use crate::grpc_testing::{
    EchoStatus, Empty, Payload, PayloadType, SimpleRequest, SimpleResponse,
    StreamingOutputCallRequest,
};
use pajamax::{Code, Context, Reply, Service, Status};

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
        answer_unary(request)
    }

    fn unary_call_with_context(
        &self,
        ctx: &mut Context<'_>,
        request: SimpleRequest,
    ) -> Result<SimpleResponse, Status> {
        echo_metadata(ctx)?;
        answer_unary(request)
    }

    fn cacheable_unary_call_with_context(
        &self,
        ctx: &mut Context<'_>,
        request: SimpleRequest,
    ) -> Result<SimpleResponse, Status> {
        self.unary_call_with_context(ctx, request)
    }
}

/// What `UnaryCall` answers, once the metadata is echoed.
fn answer_unary(request: SimpleRequest) -> Result<SimpleResponse, Status> {
    if let Some(status) = requested_status(request.response_status.as_ref()) {
        return Err(status);
    }
    if request.expect_compressed.is_some_and(|flag| flag.value) {
        // A compressed request is refused before it gets here, so this one
        // was not compressed although the client says it was.
        return Err(Status::invalid_argument(
            "the request was expected to be compressed but was not",
        ));
    }
    if request.response_compressed.is_some_and(|flag| flag.value) {
        return Err(Status::unimplemented(
            "compressed answers are not supported",
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
/// trailing metadata, when the request carries them.
fn echo_metadata(ctx: &mut Context<'_>) -> Result<(), Status> {
    let initial = ctx.metadata().get_bytes(ECHO_INITIAL).map(<[u8]>::to_vec);
    let trailing =
        match ctx.metadata().get_bytes(ECHO_TRAILING) {
            None => None,
            Some(_) => Some(ctx.metadata().get_bin(ECHO_TRAILING).ok_or_else(|| {
                Status::invalid_argument(format!("{ECHO_TRAILING} is not base64"))
            })?),
        };
    if let Some(value) = initial {
        let value = std::str::from_utf8(&value)
            .map_err(|_| Status::invalid_argument(format!("{ECHO_INITIAL} is not text")))?;
        ctx.headers_mut()
            .insert(ECHO_INITIAL, value)
            .map_err(|err| Status::invalid_argument(format!("{ECHO_INITIAL}: {err}")))?;
    }
    if let Some(value) = trailing {
        ctx.trailers_mut()
            .insert_bin(ECHO_TRAILING, &value)
            .map_err(|err| Status::invalid_argument(format!("{ECHO_TRAILING}: {err}")))?;
    }
    Ok(())
}

/// Serves [`InteropService`] as `grpc.testing.TestService`.
///
/// Every method goes to the generated server, except `FullDuplexCall`: a
/// call whose single request asks for a status ends with that status; any
/// other is `UNIMPLEMENTED`, as streaming answers are not supported.
#[derive(Debug, Clone)]
pub struct InteropServer {
    inner: TestServiceServer<InteropService>,
    full_duplex: Option<usize>,
}

impl InteropServer {
    /// A server of [`InteropService`].
    pub fn new() -> InteropServer {
        InteropServer {
            inner: TestServiceServer::new(InteropService),
            full_duplex: test_service_server::METHODS
                .iter()
                .position(|name| *name == "FullDuplexCall"),
        }
    }
}

impl Default for InteropServer {
    fn default() -> InteropServer {
        InteropServer::new()
    }
}

impl Service for InteropServer {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn methods(&self) -> &'static [&'static str] {
        self.inner.methods()
    }

    fn call(
        &self,
        method: usize,
        ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        if Some(method) != self.full_duplex {
            return self.inner.call(method, ctx, request, reply);
        }
        let request: StreamingOutputCallRequest = pajamax::decode_request(request)?;
        echo_metadata(ctx)?;
        match requested_status(request.response_status.as_ref()) {
            Some(status) => Err(status),
            None => Err(Status::unimplemented(
                "grpc.testing.TestService/FullDuplexCall: only a request asking for a status \
                 is served; streaming answers are not supported yet",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc_testing::{BoolValue, StreamingOutputCallResponse};
    use pajamax::grpc::context::ResponseMetadata;
    use pajamax::grpc::metadata::Metadata;
    use prost::Message;

    /// Calls method `name` the way the server does; gives the encoded answer
    /// and the response metadata.
    fn call(
        name: &str,
        metadata: &Metadata,
        request: &[u8],
    ) -> (Result<Vec<u8>, Status>, ResponseMetadata) {
        let server = InteropServer::new();
        let method = server
            .methods()
            .iter()
            .position(|m| *m == name)
            .unwrap_or_else(|| panic!("no method {name}"));
        let mut response = ResponseMetadata::default();
        let mut ctx = Context::new(metadata, None, None, &mut response);
        let mut buf = Vec::new();
        let result = server.call(method, &mut ctx, request, &mut Reply::new(&mut buf));
        (result.map(|()| buf), response)
    }

    fn unary(request: SimpleRequest) -> Result<SimpleResponse, Status> {
        let (answer, _) = call("UnaryCall", &Metadata::new(), &request.encode_to_vec());
        answer.map(|bytes| SimpleResponse::decode(bytes.as_slice()).unwrap())
    }

    #[test]
    fn serves_the_test_service() {
        let server = InteropServer::new();
        assert_eq!(server.name(), "grpc.testing.TestService");
        assert!(server.methods().contains(&"UnimplementedCall"));
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
    }

    #[test]
    fn full_duplex_call_serves_only_a_status() {
        let request = StreamingOutputCallRequest {
            response_status: Some(EchoStatus {
                code: 2,
                message: "test status message".into(),
            }),
            ..StreamingOutputCallRequest::default()
        };
        let (answer, _) = call("FullDuplexCall", &Metadata::new(), &request.encode_to_vec());
        let err = answer.unwrap_err();
        assert_eq!(
            (err.code(), err.message()),
            (Code::Unknown, "test status message")
        );

        let (answer, _) = call(
            "FullDuplexCall",
            &Metadata::new(),
            &StreamingOutputCallRequest::default().encode_to_vec(),
        );
        assert_eq!(answer.unwrap_err().code(), Code::Unimplemented);
        let _ = StreamingOutputCallResponse::default();
    }

    #[test]
    fn other_streaming_and_unimplemented_methods_answer_unimplemented() {
        for name in [
            "StreamingOutputCall",
            "StreamingInputCall",
            "HalfDuplexCall",
            "UnimplementedCall",
        ] {
            let (answer, _) = call(name, &Metadata::new(), &[]);
            assert_eq!(answer.unwrap_err().code(), Code::Unimplemented, "{name}");
        }
    }
}
