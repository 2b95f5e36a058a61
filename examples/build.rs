//! Generates the message and service code of the example protos.

fn main() -> std::io::Result<()> {
    pajamax_build::compile_protos(
        &[
            "proto/helloworld.proto",
            "proto/echo.proto",
            "proto/grpc/testing/test.proto",
        ],
        &["proto"],
    )
}
