//! Serves `grpc.testing.TestService` for gRPC's interoperability clients.
//!
//! Usage: `interop-server --port=N [--host=ADDRESS] [--use_tls=false]`.
//! The host defaults to `127.0.0.1`. TLS is not supported: `--use_tls`
//! is accepted only as `false`.

use pajamax_examples::grpc_testing::test_service_server::TestServiceServer;
use pajamax_examples::InteropService;
use std::process::ExitCode;

const USAGE: &str = "usage: interop-server --port=N [--host=ADDRESS] [--use_tls=false]";

fn main() -> ExitCode {
    let mut port: Option<u16> = None;
    let mut host = "127.0.0.1".to_owned();
    for arg in std::env::args().skip(1) {
        if let Some(value) = arg.strip_prefix("--port=") {
            match value.parse() {
                Ok(n) => port = Some(n),
                Err(_) => return usage_error(&format!("invalid port {value:?}")),
            }
        } else if let Some(value) = arg.strip_prefix("--host=") {
            host = value.to_owned();
        } else if let Some(value) = arg.strip_prefix("--use_tls=") {
            if value != "false" {
                return usage_error("TLS is not supported: only --use_tls=false");
            }
        } else if arg == "--help" || arg == "-h" {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        } else {
            return usage_error(&format!("unknown argument {arg:?}"));
        }
    }
    let Some(port) = port else {
        return usage_error("--port is required");
    };
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let builder = pajamax::Server::builder().add_service(TestServiceServer::new(InteropService));
    // Health checking (grpc.health.v1.Health): every service SERVING.
    let (_health, builder) = pajamax_health::serve(builder);
    // Server reflection (grpc.reflection.v1 and v1alpha) for every service above.
    let sets = [
        pajamax_examples::grpc_testing::FILE_DESCRIPTOR_SET,
        pajamax_health::proto::FILE_DESCRIPTOR_SET,
    ];
    let builder = pajamax_reflection::serve(builder, &sets);
    let served = builder.serve_until_signal(addr.as_str());
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("interop-server: {addr}: {err}");
            ExitCode::FAILURE
        }
    }
}

fn usage_error(problem: &str) -> ExitCode {
    eprintln!("interop-server: {problem}\n{USAGE}");
    ExitCode::from(2)
}
