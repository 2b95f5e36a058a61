//! Compiles the scenario's `helloworld.proto` with pajamax-build.
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

fn main() -> std::io::Result<()> {
    let dir = proto_dir();
    pajamax_build::compile_protos(&[dir.join("helloworld.proto")], &[dir])
}
