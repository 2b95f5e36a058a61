//! The index and the answers, on protos compiled here with every kind of
//! symbol, extensions and shared imports.

use super::*;
use prost::Message;
use prost_types::FileDescriptorProto;
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

const COMMON: &str = r#"
syntax = "proto3";
package base;
message Id { uint64 value = 1; }
enum Color { COLOR_UNSET = 0; RED = 1; }
"#;

const EXT: &str = r#"
syntax = "proto2";
package base;
import "google/protobuf/descriptor.proto";
message Extensible {
  optional int32 a = 1;
  extensions 100 to 200;
  message Inner {
    extend Extensible { optional string nested_ext = 150; }
  }
}
extend Extensible { optional int32 top_ext = 100; }
extend google.protobuf.FieldOptions { optional bool sensitive = 50001; }
"#;

const APP: &str = r#"
syntax = "proto3";
package app.v1;
import "base/common.proto";
import "base/ext.proto";
import "google/protobuf/empty.proto";
service Store {
  rpc Get (base.Id) returns (Item);
  rpc Clear (google.protobuf.Empty) returns (google.protobuf.Empty);
}
message Item {
  base.Id id = 1;
  oneof kind {
    string text = 2;
    int32 number = 3;
  }
  message Part {
    enum Shape { ROUND = 0; }
  }
}
"#;

/// The test protos, by name.
struct Sources;

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        let source = match name {
            "base/common.proto" => COMMON,
            "base/ext.proto" => EXT,
            "app/app.proto" => APP,
            _ => return Err(protox::Error::file_not_found(name)),
        };
        File::from_source(name, source)
    }
}

/// The encoded set of `app/app.proto` and everything it imports.
fn app_set() -> Vec<u8> {
    let mut resolver = ChainFileResolver::new();
    resolver.add(Sources);
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true).include_source_info(true);
    compiler.open_file("app/app.proto").unwrap();
    compiler.encode_file_descriptor_set()
}

fn service() -> ReflectionService {
    ReflectionService::new(&[&app_set()])
        .unwrap()
        .with_services(["app.v1.Store", V1_SERVICE_NAME])
}

fn ask(stream: &mut ReflectionSession, question: MessageRequest) -> MessageResponse {
    let answer = stream.answer(ServerReflectionRequest {
        host: "example".into(),
        message_request: Some(question.clone()),
    });
    assert_eq!(answer.valid_host, "example");
    assert_eq!(
        answer.original_request.unwrap().message_request,
        Some(question)
    );
    answer.message_response.unwrap()
}

/// The names of the files in a file descriptor answer.
fn file_names(answer: &MessageResponse) -> Vec<String> {
    let MessageResponse::FileDescriptorResponse(files) = answer else {
        panic!("not files: {answer:?}");
    };
    files
        .file_descriptor_proto
        .iter()
        .map(|file| {
            FileDescriptorProto::decode(file.as_slice())
                .unwrap()
                .name()
                .to_owned()
        })
        .collect()
}

/// The code and message of an error answer.
fn error_of(answer: &MessageResponse) -> (i32, &str) {
    let MessageResponse::ErrorResponse(error) = answer else {
        panic!("not an error: {answer:?}");
    };
    (error.error_code, &error.error_message)
}

fn symbol(name: &str) -> MessageRequest {
    MessageRequest::FileContainingSymbol(name.into())
}

#[test]
fn every_kind_of_symbol_is_found_in_its_file() {
    let service = service();
    for (name, file) in [
        ("app.v1", "app/app.proto"),
        ("app.v1.Store", "app/app.proto"),
        ("app.v1.Store.Get", "app/app.proto"),
        ("app.v1.Item", "app/app.proto"),
        (".app.v1.Item", "app/app.proto"),
        ("app.v1.Item.id", "app/app.proto"),
        ("app.v1.Item.kind", "app/app.proto"),
        ("app.v1.Item.text", "app/app.proto"),
        ("app.v1.Item.Part", "app/app.proto"),
        ("app.v1.Item.Part.Shape", "app/app.proto"),
        // Enum values are siblings of their enum.
        ("app.v1.Item.Part.ROUND", "app/app.proto"),
        ("base.Id", "base/common.proto"),
        ("base.Color", "base/common.proto"),
        ("base.RED", "base/common.proto"),
        ("base.top_ext", "base/ext.proto"),
        ("base.sensitive", "base/ext.proto"),
        ("base.Extensible.Inner.nested_ext", "base/ext.proto"),
        ("google.protobuf.Empty", "google/protobuf/empty.proto"),
        (
            "google.protobuf.FieldOptions",
            "google/protobuf/descriptor.proto",
        ),
        (
            "grpc.reflection.v1.ServerReflection.ServerReflectionInfo",
            "grpc/reflection/v1/reflection.proto",
        ),
        (
            "grpc.reflection.v1alpha.ServerReflection",
            "grpc/reflection/v1alpha/reflection.proto",
        ),
    ] {
        // A fresh stream each time: the file asked for comes first.
        let answer = ask(&mut service.session(), symbol(name));
        assert_eq!(file_names(&answer)[0], file, "{name}");
    }
}

#[test]
fn a_file_comes_with_its_imports_each_once_per_stream() {
    let service = service();
    let mut stream = service.session();
    let answer = ask(&mut stream, symbol("app.v1.Store"));
    assert_eq!(
        file_names(&answer),
        [
            "app/app.proto",
            "base/common.proto",
            "base/ext.proto",
            "google/protobuf/empty.proto",
            "google/protobuf/descriptor.proto",
        ]
    );
    // Sent already: only the file asked for comes again.
    let answer = ask(&mut stream, symbol("base.Extensible"));
    assert_eq!(file_names(&answer), ["base/ext.proto"]);
    let answer = ask(
        &mut stream,
        MessageRequest::FileByFilename("google/protobuf/empty.proto".into()),
    );
    assert_eq!(file_names(&answer), ["google/protobuf/empty.proto"]);

    // Another stream starts afresh.
    let answer = ask(&mut service.session(), symbol("base.Extensible"));
    assert_eq!(
        file_names(&answer),
        ["base/ext.proto", "google/protobuf/descriptor.proto"]
    );
}

#[test]
fn files_are_served_as_they_were_encoded() {
    let set = app_set();
    let service = ReflectionService::new(&[&set]).unwrap();
    let answer = ask(
        &mut service.session(),
        MessageRequest::FileByFilename("app/app.proto".into()),
    );
    let MessageResponse::FileDescriptorResponse(files) = answer else {
        panic!("{answer:?}");
    };
    let original = prost_types::FileDescriptorSet::decode(set.as_slice()).unwrap();
    let app = original
        .file
        .iter()
        .find(|file| file.name() == "app/app.proto")
        .unwrap();
    let served = FileDescriptorProto::decode(files.file_descriptor_proto[0].as_slice()).unwrap();
    assert_eq!(&served, app);
    // Source info (comments) included.
    assert!(served.source_code_info.is_some());
}

#[test]
fn extensions_are_found_by_type_and_number() {
    let service = service();
    let mut stream = service.session();
    for (extendee, number) in [
        ("base.Extensible", 100),
        (".base.Extensible", 150),
        ("google.protobuf.FieldOptions", 50001),
    ] {
        let answer = ask(
            &mut stream,
            MessageRequest::FileContainingExtension(v1::ExtensionRequest {
                containing_type: extendee.into(),
                extension_number: number,
            }),
        );
        assert_eq!(file_names(&answer)[0], "base/ext.proto");
    }
    let answer = ask(
        &mut stream,
        MessageRequest::FileContainingExtension(v1::ExtensionRequest {
            containing_type: "base.Extensible".into(),
            extension_number: 101,
        }),
    );
    assert_eq!(
        error_of(&answer),
        (
            Code::NotFound as i32,
            "extension 101 of \"base.Extensible\" not found"
        )
    );

    let numbers = |name: &str| {
        let answer = ask(
            &mut service.session(),
            MessageRequest::AllExtensionNumbersOfType(name.into()),
        );
        match answer {
            MessageResponse::AllExtensionNumbersResponse(numbers) => {
                Ok((numbers.base_type_name, numbers.extension_number))
            }
            other => Err(error_of(&other).0),
        }
    };
    assert_eq!(
        numbers("base.Extensible"),
        Ok(("base.Extensible".into(), vec![100, 150]))
    );
    assert_eq!(
        numbers(".google.protobuf.FieldOptions"),
        Ok(("google.protobuf.FieldOptions".into(), vec![50001]))
    );
    // A known message without extensions has none; an unknown one is not
    // found, nor is what is not a message.
    assert_eq!(numbers("app.v1.Item"), Ok(("app.v1.Item".into(), vec![])));
    assert_eq!(numbers("app.v1.Missing"), Err(Code::NotFound as i32));
    assert_eq!(numbers("base.Color"), Err(Code::NotFound as i32));
}

#[test]
fn services_are_listed_as_given() {
    let answer = ask(
        &mut service().session(),
        MessageRequest::ListServices(String::new()),
    );
    let MessageResponse::ListServicesResponse(list) = answer else {
        panic!("{answer:?}");
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["app.v1.Store", "grpc.reflection.v1.ServerReflection"]
    );
}

#[test]
fn what_is_not_there_is_not_found_and_what_asks_nothing_is_invalid() {
    let mut stream = service().session();
    let answer = ask(&mut stream, symbol("app.v1.Nothing"));
    assert_eq!(
        error_of(&answer),
        (Code::NotFound as i32, "symbol \"app.v1.Nothing\" not found")
    );
    let answer = ask(
        &mut stream,
        MessageRequest::FileByFilename("x.proto".into()),
    );
    assert_eq!(
        error_of(&answer),
        (Code::NotFound as i32, "file \"x.proto\" not found")
    );
    // A prefix of a name is not a name.
    let answer = ask(&mut stream, symbol("app"));
    assert_eq!(error_of(&answer).0, Code::NotFound as i32);
    let answer = ask(&mut stream, symbol(""));
    assert_eq!(error_of(&answer).0, Code::InvalidArgument as i32);
    let answer = ask(&mut stream, MessageRequest::FileByFilename(String::new()));
    assert_eq!(error_of(&answer).0, Code::InvalidArgument as i32);

    let answer = stream.answer(ServerReflectionRequest::default());
    assert_eq!(
        error_of(&answer.message_response.unwrap()).0,
        Code::InvalidArgument as i32
    );
    // The stream goes on after errors.
    let answer = ask(&mut stream, symbol("base.Id"));
    assert_eq!(file_names(&answer), ["base/common.proto"]);
}

#[test]
fn a_file_given_twice_is_indexed_once() {
    let set = app_set();
    let service = ReflectionService::new(&[&set, &set, v1::FILE_DESCRIPTOR_SET]).unwrap();
    let names: Vec<&str> = service.file_names().collect();
    assert_eq!(
        names,
        [
            "base/common.proto",
            "google/protobuf/descriptor.proto",
            "base/ext.proto",
            "google/protobuf/empty.proto",
            "app/app.proto",
            "grpc/reflection/v1/reflection.proto",
            "grpc/reflection/v1alpha/reflection.proto",
        ]
    );
}

#[test]
fn a_set_that_does_not_decode_is_an_error_naming_it() {
    let set = app_set();
    // A truncated set.
    let err = ReflectionService::new(&[&set, &set[..set.len() - 3]]).unwrap_err();
    assert_eq!((err.set(), err.file()), (1, None));
    // A set whose second file is not a file descriptor: field 1 of a file
    // is its name, a string; here it is a varint.
    let mut broken = set.clone();
    broken.extend_from_slice(&[0x0a, 0x02, 0x08, 0x01]);
    let err = ReflectionService::new(&[&broken]).unwrap_err();
    assert_eq!(err.set(), 0);
    assert_eq!(err.file(), Some(5));
    assert!(
        err.to_string()
            .starts_with("file descriptor set 0, file 5: "),
        "{err}"
    );
}

#[test]
fn serve_lists_the_builder_s_services_and_adds_both_versions() {
    let builder = pajamax::Server::builder().add_service(service().v1_server());
    let builder = serve(builder, &[]);
    assert_eq!(
        builder.service_names(),
        [V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME]
    );
    assert_eq!(
        format!("{:?}", service()),
        "ReflectionService { files: 7, services: [\"app.v1.Store\", \"grpc.reflection.v1.ServerReflection\"] }"
    );
}
