//! Compiles the scenario's `helloworld.proto` with tonic-prost-build.
//!
//! protox parses the proto into descriptors, so no `protoc` is needed. In
//! grpc_bench the Dockerfile copies the scenario's proto to
//! `proto/helloworld/helloworld.proto`; when building natively the proto is
//! taken from `../scenarios/$GRPC_REQUEST_SCENARIO/` (`complex_proto` by
//! default).

use std::path::PathBuf;

fn proto_dir() -> PathBuf {
    println!("cargo:rerun-if-env-changed=GRPC_REQUEST_SCENARIO");
    let in_image = PathBuf::from("proto/helloworld");
    if in_image.join("helloworld.proto").exists() {
        return in_image;
    }
    let scenario =
        std::env::var("GRPC_REQUEST_SCENARIO").unwrap_or_else(|_| "complex_proto".to_owned());
    PathBuf::from("../scenarios").join(scenario)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = proto_dir();
    let proto = dir.join("helloworld.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    let descriptors = protox::compile([&proto], [&dir])?;
    tonic_prost_build::configure()
        .build_client(false)
        .compile_fds(descriptors)?;
    Ok(())
}
