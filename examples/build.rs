//! Generates the message and service code of the example protos.

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
