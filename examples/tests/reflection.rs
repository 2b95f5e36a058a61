//! The example binaries answer server reflection, v1 and v1alpha, to
//! tonic's client: the services they list, the files that define them
//! (with their imports), and NOT_FOUND for what they do not know.

mod common;

use common::{bidi, connect, start_listening, KillOnDrop};
use pajamax_reflection::v1::server_reflection_request::MessageRequest;
use pajamax_reflection::v1::server_reflection_response::MessageResponse;
use pajamax_reflection::v1::{ExtensionRequest, ServerReflectionRequest, ServerReflectionResponse};
use prost::Message;
use prost_types::FileDescriptorProto;
use std::process::Command;
use tokio::sync::mpsc;

const V1: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
const V1ALPHA: &str = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

/// Starts example binary `exe` with `args`, where `{addr}` and `{port}`
/// stand for a loopback address of port 0 and that port, and returns it
/// with the address it listens on.
fn start(exe: &str, args: &[&str]) -> (KillOnDrop, String) {
    let args: Vec<String> = args
        .iter()
        .map(|arg| arg.replace("{addr}", "127.0.0.1:0").replace("{port}", "0"))
        .collect();
    start_listening(Command::new(exe).args(&args))
}

/// Asks `questions` on one reflection stream at `path`; the answers in
/// order. The questions are all queued before the call starts, as tonic
/// waits for the response headers, which come with the first answer.
async fn ask(
    addr: &str,
    path: &'static str,
    questions: Vec<MessageRequest>,
) -> Vec<ServerReflectionResponse> {
    let channel = connect(addr).await;
    let (sender, requests) = mpsc::channel(questions.len().max(1));
    for question in questions {
        sender
            .send(ServerReflectionRequest {
                host: String::new(),
                message_request: Some(question),
            })
            .await
            .unwrap();
    }
    drop(sender);
    let mut stream =
        bidi::<ServerReflectionRequest, ServerReflectionResponse>(channel, path, requests)
            .await
            .expect("reflection call");
    let mut answers = Vec::new();
    while let Some(answer) = stream.message().await.expect("an answer") {
        answers.push(answer);
    }
    answers
}

fn list() -> MessageRequest {
    MessageRequest::ListServices(String::new())
}

fn symbol(name: &str) -> MessageRequest {
    MessageRequest::FileContainingSymbol(name.into())
}

/// The listed service names of a list_services answer.
fn services(answer: &ServerReflectionResponse) -> Vec<String> {
    match &answer.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => {
            list.service.iter().map(|s| s.name.clone()).collect()
        }
        other => panic!("not a service list: {other:?}"),
    }
}

/// The files of a file descriptor answer, decoded.
fn files(answer: &ServerReflectionResponse) -> Vec<FileDescriptorProto> {
    match &answer.message_response {
        Some(MessageResponse::FileDescriptorResponse(files)) => files
            .file_descriptor_proto
            .iter()
            .map(|file| FileDescriptorProto::decode(file.as_slice()).expect("a file descriptor"))
            .collect(),
        other => panic!("not files: {other:?}"),
    }
}

fn names(files: &[FileDescriptorProto]) -> Vec<&str> {
    files.iter().map(|file| file.name()).collect()
}

/// The code and message of an error answer.
fn error(answer: &ServerReflectionResponse) -> (pajamax::Code, &str) {
    match &answer.message_response {
        Some(MessageResponse::ErrorResponse(error)) => {
            let code = match error.error_code {
                5 => pajamax::Code::NotFound,
                3 => pajamax::Code::InvalidArgument,
                other => panic!("unexpected code {other}"),
            };
            (code, &error.error_message)
        }
        other => panic!("not an error: {other:?}"),
    }
}

#[tokio::test]
async fn helloworld_lists_its_services_and_describes_the_greeter() {
    let (_server, addr) = start(env!("CARGO_BIN_EXE_helloworld"), &["{addr}"]);
    let answers = ask(
        &addr,
        V1,
        vec![
            list(),
            symbol("helloworld.Greeter"),
            symbol("helloworld.NoSuchService"),
            symbol("helloworld.HelloRequest"),
        ],
    )
    .await;
    assert_eq!(answers.len(), 4);

    let listed = services(&answers[0]);
    for name in [
        "helloworld.Greeter",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        assert!(listed.iter().any(|s| s == name), "{name} not in {listed:?}");
    }

    let greeter = files(&answers[1]);
    assert_eq!(greeter[0].name(), "helloworld.proto");
    assert_eq!(greeter[0].package(), "helloworld");
    let service = &greeter[0].service[0];
    assert_eq!(service.name(), "Greeter");
    assert_eq!(service.method[0].name(), "SayHello");
    assert_eq!(service.method[0].input_type(), ".helloworld.HelloRequest");
    assert_eq!(
        answers[1]
            .original_request
            .as_ref()
            .unwrap()
            .message_request,
        Some(symbol("helloworld.Greeter"))
    );

    let (code, message) = error(&answers[2]);
    assert_eq!(code, pajamax::Code::NotFound);
    assert!(message.contains("helloworld.NoSuchService"), "{message}");

    // The stream goes on after an error; the file asked for comes again.
    assert_eq!(names(&files(&answers[3])), ["helloworld.proto"]);
}

#[tokio::test]
async fn every_listed_service_is_described_on_both_versions() {
    let (_server, addr) = start(env!("CARGO_BIN_EXE_helloworld"), &["{addr}"]);
    for path in [V1, V1ALPHA] {
        let listed = services(&ask(&addr, path, vec![list()]).await[0]);
        let questions = listed.iter().map(|name| symbol(name)).collect();
        let answers = ask(&addr, path, questions).await;
        assert!(
            listed.iter().any(|s| s == "helloworld.Greeter"),
            "{listed:?}"
        );
        assert_eq!(answers.len(), listed.len());
        for (name, answer) in listed.iter().zip(&answers) {
            let files = files(answer);
            let (package, service) = name.rsplit_once('.').unwrap();
            assert_eq!(files[0].package(), package, "{name}");
            assert!(
                files[0].service.iter().any(|s| s.name() == service),
                "{name}"
            );
        }
    }
}

#[tokio::test]
async fn well_known_imports_come_with_the_file_once_per_stream() {
    // The helloworld binary's set holds the whole build run: echo.proto
    // too, which imports google/protobuf/empty.proto.
    let (_server, addr) = start(env!("CARGO_BIN_EXE_helloworld"), &["{addr}"]);
    let answers = ask(
        &addr,
        V1,
        vec![
            symbol("echo.Echo.Ping"),
            symbol("google.protobuf.Empty"),
            MessageRequest::FileByFilename("google/protobuf/empty.proto".into()),
            MessageRequest::AllExtensionNumbersOfType("google.protobuf.Empty".into()),
            MessageRequest::FileContainingExtension(ExtensionRequest {
                containing_type: "google.protobuf.Empty".into(),
                extension_number: 1,
            }),
        ],
    )
    .await;
    let echo = files(&answers[0]);
    assert_eq!(names(&echo), ["echo.proto", "google/protobuf/empty.proto"]);
    let ping = &echo[0].service[0].method[2];
    assert_eq!(ping.name(), "Ping");
    assert_eq!(ping.input_type(), ".google.protobuf.Empty");
    assert_eq!(names(&files(&answers[1])), ["google/protobuf/empty.proto"]);
    assert_eq!(names(&files(&answers[2])), ["google/protobuf/empty.proto"]);
    match &answers[3].message_response {
        Some(MessageResponse::AllExtensionNumbersResponse(numbers)) => {
            assert_eq!(numbers.base_type_name, "google.protobuf.Empty");
            assert!(numbers.extension_number.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(error(&answers[4]).0, pajamax::Code::NotFound);
}

#[tokio::test]
async fn route_guide_and_interop_describe_their_services() {
    let (_guide, guide_addr) = start(env!("CARGO_BIN_EXE_route_guide"), &["{addr}"]);
    let answers = ask(
        &guide_addr,
        V1,
        vec![list(), symbol("routeguide.RouteGuide")],
    )
    .await;
    assert!(services(&answers[0]).contains(&"routeguide.RouteGuide".to_owned()));
    let guide = files(&answers[1]);
    assert_eq!(guide[0].name(), "route_guide.proto");
    let methods: Vec<&str> = guide[0].service[0]
        .method
        .iter()
        .map(|m| m.name())
        .collect();
    assert_eq!(
        methods,
        ["GetFeature", "ListFeatures", "RecordRoute", "RouteChat"]
    );

    let (_interop, interop_addr) = start(
        env!("CARGO_BIN_EXE_interop-server"),
        &["--port={port}", "--use_tls=false"],
    );
    let answers = ask(
        &interop_addr,
        V1ALPHA,
        vec![
            symbol("grpc.testing.TestService"),
            symbol("grpc.testing.Empty"),
        ],
    )
    .await;
    let test = files(&answers[0]);
    assert_eq!(
        names(&test),
        [
            "grpc/testing/test.proto",
            "grpc/testing/empty.proto",
            "grpc/testing/messages.proto"
        ]
    );
    assert_eq!(names(&files(&answers[1])), ["grpc/testing/empty.proto"]);
}

#[tokio::test]
async fn dict_store_describes_its_dispatched_service() {
    let (_server, addr) = start(env!("CARGO_BIN_EXE_dict_store"), &["{addr}"]);
    let answers = ask(
        &addr,
        V1,
        vec![
            list(),
            symbol("dict_store.DictStore.Get"),
            symbol("dict_store.Nope"),
        ],
    )
    .await;
    assert!(services(&answers[0]).contains(&"dict_store.DictStore".to_owned()));
    assert_eq!(names(&files(&answers[1])), ["dict_store.proto"]);
    assert_eq!(error(&answers[2]).0, pajamax::Code::NotFound);
}
