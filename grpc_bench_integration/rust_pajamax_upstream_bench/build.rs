//! Compiles the scenario's `helloworld.proto` with the original
//! pajamax-build (0.3.0), which runs prost-build and so needs `protoc`.
//!
//! pajamax-build 0.3.0 writes a `PajamaxService::handle` with a `frame_len`
//! parameter, and passes it on to `local_build_response`; pajamax 0.4.0
//! dropped that parameter from both. No pajamax-build release matches 0.4.0,
//! so the generated file is adjusted after the fact.
//!
//! In grpc_bench the Dockerfile copies the scenario's proto to
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
    pajamax_build::compile_protos_in_local(&[&proto], &[&dir])?;

    let generated = PathBuf::from(std::env::var("OUT_DIR")?).join("helloworld.rs");
    let code = std::fs::read_to_string(&generated)?;
    let adjusted = code
        .replace("frame_len: usize,", "")
        .replace("(stream_id, response, frame_len)", "(stream_id, response)");
    if adjusted.contains("frame_len") {
        return Err("pajamax-build wrote frame_len somewhere unexpected".into());
    }
    std::fs::write(&generated, adjusted)?;
    Ok(())
}
