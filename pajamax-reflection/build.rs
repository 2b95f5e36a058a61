//! Generates the reflection services, v1 and v1alpha, and embeds their
//! file descriptor set.

fn main() -> std::io::Result<()> {
    // The v1alpha messages are the v1 ones, field for field and number for
    // number: one set of types serves both versions.
    let mut config = prost_build::Config::new();
    config.extern_path(".grpc.reflection.v1alpha", "crate::v1");
    pajamax_build::configure().prost_config(config).compile(
        &[
            "proto/grpc/reflection/v1/reflection.proto",
            "proto/grpc/reflection/v1alpha/reflection.proto",
        ],
        &["proto"],
    )
}
