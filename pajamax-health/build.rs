//! Generates the messages and the service code of `grpc.health.v1`.

fn main() -> std::io::Result<()> {
    pajamax_build::compile_protos(&["proto/grpc/health/v1/health.proto"], &["proto"])
}
