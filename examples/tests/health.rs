//! The `helloworld` binary serves health checks: the server as a whole and
//! `helloworld.Greeter` are SERVING, and an unknown service is NOT_FOUND.

mod common;

use common::{connect, start_listening, unary};
use pajamax_health::proto::{HealthCheckRequest, HealthCheckResponse};
use pajamax_health::ServingStatus;
use std::process::Command;

const CHECK: &str = "/grpc.health.v1.Health/Check";

#[tokio::test]
async fn helloworld_binary_answers_health_checks() {
    let (_server, addr) =
        start_listening(Command::new(env!("CARGO_BIN_EXE_helloworld")).arg("127.0.0.1:0"));
    let channel = connect(&addr).await;
    for service in ["", "helloworld.Greeter"] {
        let request = HealthCheckRequest {
            service: service.into(),
        };
        let reply: HealthCheckResponse = unary(channel.clone(), CHECK, request).await.unwrap();
        assert_eq!(reply.status(), ServingStatus::Serving, "{service:?}");
    }
    let request = HealthCheckRequest {
        service: "helloworld.Nobody".into(),
    };
    let err = unary::<_, HealthCheckResponse>(channel, CHECK, request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
}
