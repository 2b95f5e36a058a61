//! The example servers answer a tonic client: the `helloworld` binary as a
//! user starts it, and several services from several packages in one server.

mod common;

use common::{connect, start_listening, unary};
use pajamax_examples::echo::echo_server::EchoServer;
use pajamax_examples::echo::EchoMessage;
use pajamax_examples::helloworld::greeter_server::GreeterServer;
use pajamax_examples::helloworld::{HelloReply, HelloRequest};
use pajamax_examples::{EchoService, GreeterService};
use std::process::Command;

#[tokio::test]
async fn helloworld_binary_greets() {
    let (_server, addr) =
        start_listening(Command::new(env!("CARGO_BIN_EXE_helloworld")).arg("127.0.0.1:0"));
    let channel = connect(&addr).await;
    let reply: HelloReply = unary(
        channel,
        "/helloworld.Greeter/SayHello",
        HelloRequest {
            name: "world".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(reply.message, "Hello world!");
}

#[tokio::test]
async fn services_from_two_packages_share_a_server() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(GreeterServer::new(GreeterService))
        .add_service(EchoServer::new(EchoService))
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server.local_addr().to_string()).await;
    let reply: HelloReply = unary(
        channel.clone(),
        "/helloworld.Greeter/SayHello",
        HelloRequest {
            name: "pajamax".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(reply.message, "Hello pajamax!");
    let echoed: EchoMessage = unary(
        channel.clone(),
        "/echo.Echo/Echo",
        EchoMessage {
            message: "ping".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(echoed.message, "ping");
    let echoes: Vec<EchoMessage> = common::server_streaming(
        channel,
        "/echo.Echo/EchoStream",
        tonic::Request::new(EchoMessage {
            message: "x".into(),
        }),
    )
    .await
    .unwrap();
    assert_eq!(echoes.len(), 3);
    assert!(echoes.iter().all(|echo| echo.message == "x"));
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}
