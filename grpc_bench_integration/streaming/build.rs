//! Generates the `streambench` code twice: pajamax's server into
//! `OUT_DIR/pajamax/`, tonic's server and client into `OUT_DIR/tonic/`.
//! Both parse the proto in Rust (pajamax-build itself, tonic through
//! protox): no `protoc` is needed.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let proto = "proto/streambench.proto";

    let pajamax_out = out.join("pajamax");
    std::fs::create_dir_all(&pajamax_out)?;
    pajamax_build::configure()
        .out_dir(&pajamax_out)
        .compile(&[proto], &["proto"])?;

    let tonic_out = out.join("tonic");
    std::fs::create_dir_all(&tonic_out)?;
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .out_dir(&tonic_out)
        .compile_fds(descriptors)?;
    Ok(())
}
