//! Serves `grpc.testing.TestService` for gRPC's interoperability clients.
//!
//! Usage: `interop-server --port=N [--host=ADDRESS] [--use_tls=BOOL]
//! [--tls-cert=PATH --tls-key=PATH [--client-ca=PATH]]`. The host defaults
//! to `127.0.0.1`.
//!
//! TLS needs the examples built with their `tls` feature
//! (`cargo build -p pajamax-examples --features tls`) and a certificate of
//! your own: `--tls-cert` (PEM chain) and `--tls-key` (PEM key) turn it on,
//! `--client-ca` (PEM) requires client certificates from that CA. There are
//! no built-in test certificates, so `--use_tls=true` without them is an
//! error; the flags also take their value after a space.

use pajamax_examples::grpc_testing::test_service_server::TestServiceServer;
use pajamax_examples::{with_tls, InteropService, TlsArgs};
use std::process::ExitCode;

const USAGE: &str = "usage: interop-server --port=N [--host=ADDRESS] [--use_tls=BOOL] \
                     [--tls-cert=PATH --tls-key=PATH [--client-ca=PATH]]";

fn main() -> ExitCode {
    let mut port: Option<u16> = None;
    let mut host = "127.0.0.1".to_owned();
    let mut use_tls: Option<bool> = None;
    let mut tls = TlsArgs::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let path_flag = |name: &str| {
            arg.strip_prefix(name).and_then(|rest| {
                if rest.is_empty() {
                    Some(None)
                } else {
                    rest.strip_prefix('=').map(|v| Some(v.to_owned()))
                }
            })
        };
        let tls_slot = if let Some(value) = path_flag("--tls-cert") {
            Some((&mut tls.cert, value))
        } else if let Some(value) = path_flag("--tls-key") {
            Some((&mut tls.key, value))
        } else if let Some(value) = path_flag("--client-ca") {
            Some((&mut tls.client_ca, value))
        } else {
            None
        };
        if let Some((slot, value)) = tls_slot {
            match value.or_else(|| args.next()) {
                Some(path) => *slot = Some(path),
                None => return usage_error(&format!("{arg} needs a path")),
            }
            continue;
        }
        if let Some(value) = arg.strip_prefix("--port=") {
            match value.parse() {
                Ok(n) => port = Some(n),
                Err(_) => return usage_error(&format!("invalid port {value:?}")),
            }
        } else if let Some(value) = arg.strip_prefix("--host=") {
            host = value.to_owned();
        } else if let Some(value) = arg.strip_prefix("--use_tls=") {
            match value {
                "true" => use_tls = Some(true),
                "false" => use_tls = Some(false),
                _ => return usage_error(&format!("invalid --use_tls value {value:?}")),
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
    let wants_tls = tls.cert.is_some() || tls.key.is_some() || tls.client_ca.is_some();
    if use_tls == Some(false) && wants_tls {
        return usage_error("--use_tls=false with TLS flags");
    }
    if (use_tls == Some(true) || wants_tls) && (tls.cert.is_none() || tls.key.is_none()) {
        return usage_error(
            "TLS needs --tls-cert and --tls-key (there are no built-in test certificates)",
        );
    }
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let builder = pajamax::Server::builder().add_service(TestServiceServer::new(InteropService));
    let builder = match with_tls(builder, &tls) {
        Ok(builder) => builder,
        Err(err) => {
            eprintln!("interop-server: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Health checking (grpc.health.v1.Health): every service SERVING.
    let (_health, builder) = pajamax_health::serve(builder);
    // Server reflection (grpc.reflection.v1 and v1alpha) for every service above.
    let sets = [
        pajamax_examples::grpc_testing::FILE_DESCRIPTOR_SET,
        pajamax_health::proto::FILE_DESCRIPTOR_SET,
    ];
    let builder = pajamax_reflection::serve(builder, &sets);
    let served = pajamax_examples::serve_until_signal(builder, &addr);
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
