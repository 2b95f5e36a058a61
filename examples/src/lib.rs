//! Shared code for the example binaries: the generated code of the example
//! protos and the services that implement them.

#![warn(missing_docs)]

/// The `helloworld` proto package: `HelloRequest`, `HelloReply` and the
/// `Greeter` service.
pub mod helloworld {
    pajamax::include_proto!("helloworld");
}

/// The `echo` proto package: `EchoMessage` and the `Echo` service.
pub mod echo {
    pajamax::include_proto!("echo");
}

/// The `grpc.testing` proto package of the gRPC interoperability tests: the
/// `TestService` and its messages.
pub mod grpc_testing {
    pajamax::include_proto!("grpc.testing");
}

pub mod interop;

pub mod dict_store;
pub mod route_guide;

use echo::echo_server::Echo;
use echo::EchoMessage;
use helloworld::greeter_server::Greeter;
use helloworld::{HelloReply, HelloRequest};
pub use interop::InteropService;
use pajamax::{ServerStream, Status};

/// The TLS flags of the example servers: `--tls-cert` (the server's PEM
/// certificate chain), `--tls-key` (its PEM private key) and `--client-ca`
/// (the PEM CA certificates clients must present a certificate from).
#[derive(Debug, Default, Clone)]
pub struct TlsArgs {
    /// The path of `--tls-cert`.
    pub cert: Option<String>,
    /// The path of `--tls-key`.
    pub key: Option<String>,
    /// The path of `--client-ca`.
    pub client_ca: Option<String>,
}

/// Serves over TLS when `args` has a certificate and a key, with mutual TLS
/// when it also has a client CA; returns `builder` unchanged otherwise.
#[cfg(feature = "tls")]
pub fn with_tls(builder: pajamax::Builder, args: &TlsArgs) -> std::io::Result<pajamax::Builder> {
    let (Some(cert), Some(key)) = (&args.cert, &args.key) else {
        return Ok(builder);
    };
    let mut tls = pajamax::TlsConfig::from_pem_files(cert, key)?;
    if let Some(ca) = &args.client_ca {
        tls = tls.client_ca_file(ca)?;
    }
    Ok(builder.tls(tls))
}

/// Built without the `tls` feature: an error when `args` has a certificate,
/// `builder` unchanged otherwise.
#[cfg(not(feature = "tls"))]
pub fn with_tls(builder: pajamax::Builder, args: &TlsArgs) -> std::io::Result<pajamax::Builder> {
    if args.cert.is_some() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "TLS flags given, but built without TLS: build with `--features tls`",
        ));
    }
    Ok(builder)
}

/// Binds `addr`, says where it listens on standard output ("listening on
/// ADDRESS", the port the system chose when `addr` has port 0), and serves
/// until SIGTERM or SIGINT, then drains gracefully.
pub fn serve_until_signal(builder: pajamax::Builder, addr: &str) -> std::io::Result<()> {
    let server = builder.bind(addr)?;
    println!("listening on {}", server.local_addr());
    server.shutdown_on_signals()
}

/// Greets whoever the request names.
///
/// ```
/// use pajamax_examples::helloworld::{greeter_server::Greeter, HelloRequest};
/// use pajamax_examples::GreeterService;
///
/// let request = HelloRequest { name: "world".into() };
/// let reply = GreeterService.say_hello(request).unwrap();
/// assert_eq!(reply.message, "Hello world!");
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct GreeterService;

impl Greeter for GreeterService {
    fn say_hello(&self, request: HelloRequest) -> Result<HelloReply, Status> {
        Ok(HelloReply {
            message: format!("Hello {}!", request.name),
        })
    }
}

/// Sends back what it is sent: once, or three times over as a stream.
///
/// ```
/// use pajamax_examples::echo::{echo_server::Echo, EchoMessage};
/// use pajamax_examples::EchoService;
///
/// let message = EchoMessage { message: "ping".into() };
/// assert_eq!(EchoService.echo(message.clone()).unwrap(), message);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoService;

impl Echo for EchoService {
    fn echo(&self, request: EchoMessage) -> Result<EchoMessage, Status> {
        Ok(request)
    }

    fn echo_stream(&self, request: EchoMessage) -> Result<ServerStream<EchoMessage>, Status> {
        Ok(ServerStream::iter(std::iter::repeat_n(request, 3).map(Ok)))
    }

    fn ping(&self, _request: ()) -> Result<(), Status> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use echo::echo_server::EchoServer;
    use helloworld::greeter_server::GreeterServer;
    use pajamax::{Code, Context, Metadata, Reply, ResponseMetadata, Service};
    use prost::Message;

    /// Calls method `name` of `service` the way the server does, with the
    /// given request metadata; gives the encoded answer and the response
    /// metadata.
    fn call_with(
        service: &dyn Service,
        name: &str,
        metadata: &Metadata,
        request: &[u8],
    ) -> (Result<Vec<u8>, Status>, ResponseMetadata) {
        let method = service
            .methods()
            .iter()
            .position(|m| m.name == name)
            .unwrap_or_else(|| panic!("{} has no method {name}", service.name()));
        let mut response = ResponseMetadata::default();
        let mut ctx = Context::new(metadata, None, None, &mut response);
        let mut buf = Vec::new();
        let mut reply = Reply::new(&mut buf);
        let result = service.unary(method, &mut ctx, request, &mut reply);
        (result.map(|()| buf), response)
    }

    fn call(service: &dyn Service, name: &str, request: &[u8]) -> Result<Vec<u8>, Status> {
        call_with(service, name, &Metadata::new(), request).0
    }

    #[test]
    fn greeter_answers_say_hello() {
        let server = GreeterServer::new(GreeterService);
        let request = HelloRequest {
            name: "world".into(),
        };
        let answer = call(&server, "SayHello", &request.encode_to_vec()).unwrap();
        let reply = HelloReply::decode(answer.as_slice()).unwrap();
        assert_eq!(reply.message, "Hello world!");
    }

    #[test]
    fn names_follow_the_protos() {
        let greeter = GreeterServer::new(GreeterService);
        assert_eq!(greeter.name(), "helloworld.Greeter");
        let names = |s: &dyn Service| s.methods().iter().map(|m| m.name).collect::<Vec<_>>();
        assert_eq!(names(&greeter), ["SayHello"]);
        assert_eq!(
            helloworld::greeter_server::SERVICE_NAME,
            "helloworld.Greeter"
        );

        let echo = EchoServer::new(EchoService);
        assert_eq!(echo.name(), "echo.Echo");
        assert_eq!(names(&echo), ["Echo", "EchoStream", "Ping"]);
    }

    #[test]
    fn echo_sends_the_message_back() {
        let server = EchoServer::new(EchoService);
        let message = EchoMessage {
            message: "once more".into(),
        };
        let answer = call(&server, "Echo", &message.encode_to_vec()).unwrap();
        assert_eq!(EchoMessage::decode(answer.as_slice()).unwrap(), message);
    }

    #[test]
    fn empty_requests_and_answers_are_unit() {
        let server = EchoServer::new(EchoService);
        let answer = call(&server, "Ping", &[]).unwrap();
        assert!(answer.is_empty());
        // Unknown fields in an Empty are skipped, as for any message.
        let answer = call(&server, "Ping", &[0x08, 0x01]).unwrap();
        assert!(answer.is_empty());
    }

    #[test]
    fn methods_are_called_by_their_kind() {
        let server = EchoServer::new(EchoService);
        let message = EchoMessage {
            message: "many".into(),
        };
        let mut response = ResponseMetadata::default();
        let metadata = Metadata::new();
        let mut ctx = Context::new(&metadata, None, None, &mut response);
        assert!(server
            .server_streaming(1, &mut ctx, &message.encode_to_vec())
            .is_ok());
        // EchoStream is not unary.
        let err = call(&server, "EchoStream", &message.encode_to_vec()).unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert_eq!(err.message(), "echo.Echo has no unary method number 1");
    }

    #[test]
    fn a_malformed_request_is_internal() {
        let server = GreeterServer::new(GreeterService);
        // Field 1, length-delimited, claiming ten bytes but carrying one.
        let err = call(&server, "SayHello", &[0x0a, 0x0a, b'w']).unwrap_err();
        assert_eq!(err.code(), Code::Internal);
    }

    #[test]
    fn an_unknown_method_number_is_unimplemented() {
        let server = GreeterServer::new(GreeterService);
        let mut response = ResponseMetadata::default();
        let metadata = Metadata::new();
        let mut ctx = Context::new(&metadata, None, None, &mut response);
        let mut buf = Vec::new();
        let err = server
            .unary(7, &mut ctx, &[], &mut Reply::new(&mut buf))
            .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
    }

    /// Implements nothing at all.
    struct Nothing;
    impl Greeter for Nothing {}

    #[test]
    fn methods_left_alone_answer_unimplemented_naming_the_method() {
        let server = GreeterServer::new(Nothing);
        let err = call(&server, "SayHello", &[]).unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert!(err.message().contains("helloworld.Greeter/SayHello"));
    }

    /// Greets the user the request metadata names, and says so in a trailer.
    struct MetadataGreeter;
    impl Greeter for MetadataGreeter {
        fn say_hello_with_context(
            &self,
            ctx: &mut Context<'_>,
            request: HelloRequest,
        ) -> Result<HelloReply, Status> {
            let user = ctx
                .metadata()
                .get("x-user")
                .ok_or_else(|| Status::unauthenticated("no x-user"))?
                .to_owned();
            ctx.trailers_mut()
                .insert("x-greeted-by", "metadata-greeter")
                .unwrap();
            Ok(HelloReply {
                message: format!("Hello {}, from {user}!", request.name),
            })
        }
    }

    #[test]
    fn a_context_handler_sees_the_context() {
        let server = GreeterServer::new(MetadataGreeter);
        let request = HelloRequest {
            name: "world".into(),
        }
        .encode_to_vec();

        let mut metadata = Metadata::new();
        metadata.insert("x-user", "alice").unwrap();
        let (answer, response) = call_with(&server, "SayHello", &metadata, &request);
        let reply = HelloReply::decode(answer.unwrap().as_slice()).unwrap();
        assert_eq!(reply.message, "Hello world, from alice!");
        assert_eq!(
            response.trailers.get("x-greeted-by"),
            Some("metadata-greeter")
        );

        let err = call(&server, "SayHello", &request).unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated);
    }

    #[test]
    fn servers_share_their_handler() {
        let handler = std::sync::Arc::new(GreeterService);
        let server = GreeterServer::from_arc(handler.clone());
        let copy = server.clone();
        assert_eq!(std::sync::Arc::strong_count(&handler), 3);
        assert_eq!(format!("{copy:?}"), "GreeterServer { .. }");
        drop(server);
        assert_eq!(std::sync::Arc::strong_count(&handler), 2);
    }
}
