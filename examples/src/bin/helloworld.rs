//! Serves the `helloworld.Greeter` service.
//!
//! Usage: `helloworld [ADDRESS] [--tls-cert PATH --tls-key PATH [--client-ca PATH]]`,
//! where the address defaults to `127.0.0.1:50051`.
//!
//! The TLS flags need the examples built with their `tls` feature
//! (`cargo build -p pajamax-examples --features tls`): `--tls-cert` is the
//! server's PEM certificate chain, `--tls-key` its PEM private key, and
//! `--client-ca` the PEM CA certificates that clients must present a
//! certificate from (mutual TLS).

use pajamax_examples::helloworld::greeter_server::GreeterServer;
use pajamax_examples::{with_tls, GreeterService, TlsArgs};
use std::process::ExitCode;

const USAGE: &str =
    "usage: helloworld [ADDRESS] [--tls-cert PATH --tls-key PATH [--client-ca PATH]]";

/// The command line.
#[derive(Default)]
struct Args {
    addr: Option<String>,
    tls: TlsArgs,
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("helloworld: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let addr = args
        .addr
        .clone()
        .unwrap_or_else(|| "127.0.0.1:50051".to_owned());
    match serve(&addr, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("helloworld: {addr}: {err}");
            ExitCode::FAILURE
        }
    }
}

fn serve(addr: &str, args: Args) -> std::io::Result<()> {
    let builder = pajamax::Server::builder().add_service(GreeterServer::new(GreeterService));
    let builder = with_tls(builder, &args.tls)?;
    // Health checking (grpc.health.v1.Health): every service SERVING.
    let (_health, builder) = pajamax_health::serve(builder);
    // Server reflection (grpc.reflection.v1 and v1alpha) for every service above.
    let sets = [
        pajamax_examples::helloworld::FILE_DESCRIPTOR_SET,
        pajamax_health::proto::FILE_DESCRIPTOR_SET,
    ];
    let builder = pajamax_reflection::serve(builder, &sets);
    pajamax_examples::serve_until_signal(builder, addr)
}

/// Reads the arguments; `None` for `--help`.
fn parse(mut argv: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args::default();
    while let Some(arg) = argv.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let slot = match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--tls-cert" => &mut args.tls.cert,
            "--tls-key" => &mut args.tls.key,
            "--client-ca" => &mut args.tls.client_ca,
            _ if flag.starts_with('-') => return Err(format!("unknown argument {arg:?}")),
            _ if args.addr.is_none() => {
                args.addr = Some(arg);
                continue;
            }
            _ => return Err(format!("unexpected argument {arg:?}")),
        };
        let value = match inline.or_else(|| argv.next()) {
            Some(value) => value,
            None => return Err(format!("{flag} needs a path")),
        };
        *slot = Some(value);
    }
    match (&args.tls.cert, &args.tls.key, &args.tls.client_ca) {
        (Some(_), Some(_), _) | (None, None, None) => Ok(Some(args)),
        _ => Err("--tls-cert and --tls-key go together (and --client-ca with them)".into()),
    }
}
