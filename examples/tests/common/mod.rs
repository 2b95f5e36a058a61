//! Client helpers shared by the examples' tests.
#![allow(dead_code)]

use std::process::Child;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// One unary call to `path` with tonic's client and prost codec.
pub async fn unary<Req, Reply>(
    channel: Channel,
    path: &'static str,
    request: Req,
) -> Result<Reply, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<Req, Reply>::default();
    let response = client
        .unary(tonic::Request::new(request), path.parse().unwrap(), codec)
        .await?;
    Ok(response.into_inner())
}

/// Connects to `addr`, retrying while the server starts (up to 20 s).
pub async fn connect(addr: &str) -> Channel {
    let started = Instant::now();
    loop {
        match Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(channel) => return channel,
            Err(_) if started.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("server at {addr} did not come up: {err}"),
        }
    }
}

/// A loopback address whose port the OS reported free, for a server
/// binary that takes its listen address as an argument.
pub fn free_local_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// A child process killed when the test ends, however it ends.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
