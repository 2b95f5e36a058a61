//! Client helpers shared by the examples' tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
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

/// A server-streaming call to `path`: every answer, or the first error.
pub async fn server_streaming<Req, Reply>(
    channel: Channel,
    path: &'static str,
    request: tonic::Request<Req>,
) -> Result<Vec<Reply>, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<Req, Reply>::default();
    let mut stream = client
        .server_streaming(request, path.parse().unwrap(), codec)
        .await?
        .into_inner();
    let mut answers = Vec::new();
    while let Some(answer) = stream.message().await? {
        answers.push(answer);
    }
    Ok(answers)
}

/// A client-streaming call to `path` sending `requests`.
pub async fn client_streaming<Req, Reply>(
    channel: Channel,
    path: &'static str,
    requests: Vec<Req>,
) -> Result<Reply, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<Req, Reply>::default();
    let request = tonic::Request::new(tokio_stream::iter(requests));
    let response = client
        .client_streaming(request, path.parse().unwrap(), codec)
        .await?;
    Ok(response.into_inner())
}

/// A bidirectional call to `path`: the requests come from `requests`; the
/// answers are returned as a stream.
pub async fn bidi<Req, Reply>(
    channel: Channel,
    path: &'static str,
    requests: tokio::sync::mpsc::Receiver<Req>,
) -> Result<tonic::Streaming<Reply>, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<Req, Reply>::default();
    let request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(requests));
    let response = client
        .streaming(request, path.parse().unwrap(), codec)
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

/// Starts an example server binary (`command`, given a listen address of
/// port 0) and returns it with the address it says it listens on: the
/// system chose the port, so servers of tests that run at once never
/// share one.
///
/// # Panics
///
/// If the binary does not start or exits before it listens.
pub fn start_listening(command: &mut Command) -> (KillOnDrop, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the server");
    let stdout = child.stdout.take().expect("piped");
    let server = KillOnDrop(child);
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    break addr.to_owned();
                }
            }
            _ => panic!("the server exited before it listened"),
        }
    };
    // The rest of its output is read, so the server never waits on a full
    // pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (server, addr)
}

/// A child process killed when the test ends, however it ends.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
