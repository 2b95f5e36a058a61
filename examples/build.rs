//! Generates the message and service code of the example protos.
//!
//! Each package with a service also gets `FILE_DESCRIPTOR_SET`, the encoded
//! descriptors of its run's protos and their imports, which the example
//! binaries pass to `pajamax_reflection::serve` for server reflection: one
//! run for `dict_store`, one for the others.

fn main() -> std::io::Result<()> {
    // The dict_store example sends its calls to shard threads.
    pajamax_build::configure()
        .dispatch_services(["dict_store.DictStore"])
        .compile(&["proto/dict_store.proto"], &["proto"])?;
    pajamax_build::compile_protos(
        &[
            "proto/helloworld.proto",
            "proto/echo.proto",
            "proto/route_guide.proto",
            "proto/grpc/testing/test.proto",
        ],
        &["proto"],
    )
}
