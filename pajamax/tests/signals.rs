//! Shutdown on SIGTERM and SIGINT, and the end of a drain's grace period.
//!
//! A signal sent to the test process would stop the test harness, so the
//! server runs in a child process: this test binary runs itself again with
//! `PAJAMAX_SIGNALS_TEST_ADDR` set and `--ignored`, and the (otherwise
//! ignored) `server_process` test then serves with `serve_until_signal`
//! and prints what the parent checks.
#![cfg(unix)]

mod common;

use common::streams::{self, Ask, Streams};
use common::{call, Probe, ProbeRequest};
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

const ADDR_VAR: &str = "PAJAMAX_SIGNALS_TEST_ADDR";
const HOOK_LINE: &str = "hook: draining";
const RETURNED_LINE: &str = "serve_until_signal returned Ok(())";

/// The server of the tests below, in a child process that
/// [`ServerProcess::start`] runs with `PAJAMAX_SIGNALS_TEST_ADDR` set. Not a
/// test of its own: ignored in a plain test run, and failing when run
/// without that variable.
#[test]
#[ignore = "the server that the other tests of this file run in a child process"]
fn server_process() {
    let addr = std::env::var(ADDR_VAR).unwrap_or_else(|_| {
        panic!("{ADDR_VAR} is not set: this server is run by the other tests of this file")
    });
    let result = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Probe)
        .add_service(Streams {
            seen: Default::default(),
        })
        .on_shutdown(|| println!("{HOOK_LINE}"))
        .serve_until_signal(addr.as_str());
    println!("serve_until_signal returned {result:?}");
    result.unwrap();
}

/// A server running in a child process.
struct ServerProcess {
    child: Child,
    addr: String,
}

impl ServerProcess {
    fn start() -> ServerProcess {
        let addr = free_local_addr();
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "server_process",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ADDR_VAR, &addr)
            .stdout(Stdio::piped())
            .spawn()
            .expect("run the server process");
        ServerProcess { child, addr }
    }

    /// A channel to the server, once it listens. It catches the signals
    /// before it binds, so from then on a signal does not kill it.
    async fn connect(&mut self) -> Channel {
        let started = Instant::now();
        loop {
            let endpoint = Endpoint::from_shared(format!("http://{}", self.addr)).unwrap();
            match endpoint.connect().await {
                Ok(channel) => return channel,
                Err(err) => {
                    assert!(self.child.try_wait().unwrap().is_none(), "server exited");
                    assert!(started.elapsed() < Duration::from_secs(20), "{err}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the process to exit; its status and what it printed.
    async fn exit(mut self, within: Duration) -> (ExitStatus, String, Duration) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > within {
                let _ = self.child.kill();
                panic!("the server process did not exit within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        (status, out, started.elapsed())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address with a port free a moment ago, and never handed out
/// before in this process: the system may give a port that was just let go
/// to the next one who asks, and two tests of this file run at once must
/// not start their servers on the same port.
fn free_local_addr() -> String {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        if !handed_out.contains(&addr.port()) {
            handed_out.push(addr.port());
            return addr.to_string();
        }
    }
}

/// A unary call answered from another thread after `ms` milliseconds.
async fn deferred(channel: Channel, text: &str, ms: u32) -> Result<String, tonic::Status> {
    let request = tonic::Request::new(ProbeRequest {
        text: text.into(),
        sleep_ms: ms,
        ..Default::default()
    });
    call(channel, "Defer", request)
        .await
        .map(|reply| reply.into_inner().text)
}

#[tokio::test]
async fn sigterm_drains_calls_in_flight_then_exits_0() {
    let mut server = ServerProcess::start();
    let channel = server.connect().await;
    common::echo_works(channel.clone(), "before").await;

    // A unary call answered from a thread, and a stream made on the worker,
    // both still running when the signal comes.
    let unary = tokio::spawn(deferred(channel.clone(), "in flight", 1500));
    let ask = Ask {
        count: 15,
        interval_ms: 100,
        ..Default::default()
    };
    let stream_channel = channel.clone();
    let stream = tokio::spawn(async move {
        let request = tonic::Request::new(ask);
        let response = streams::server_stream(stream_channel, "Count", request).await?;
        let (items, end, _) = streams::collect(response.into_inner()).await;
        end.map(|()| items)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.is_running(), "still draining its calls");
    // New calls go nowhere: not on the connection told to go away, nor on
    // a new one.
    let new_call = call(channel.clone(), "Echo", common::text("late")).await;
    assert!(new_call.is_err(), "{new_call:?}");
    let refused = std::net::TcpStream::connect(&server.addr).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    assert_eq!(unary.await.unwrap().expect("answered"), "in flight");
    let items = stream
        .await
        .unwrap()
        .expect("the stream goes on to its end");
    assert_eq!(items.len(), 15);

    let (status, out, _) = server.exit(Duration::from_secs(10)).await;
    assert!(status.success(), "{status:?}\n{out}");
    assert!(out.contains(HOOK_LINE), "{out}");
    assert!(out.contains(RETURNED_LINE), "{out}");
}

#[tokio::test]
async fn a_second_signal_stops_at_once() {
    let mut server = ServerProcess::start();
    let channel = server.connect().await;
    let slow = tokio::spawn(deferred(channel.clone(), "slow", 20_000));
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.signal("TERM");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(server.is_running(), "draining: the slow call holds it");
    server.signal("INT");
    let (status, out, took) = server.exit(Duration::from_secs(5)).await;
    assert!(status.success(), "{status:?}\n{out}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(out.matches(HOOK_LINE).count(), 1, "{out}");
    assert!(out.contains(RETURNED_LINE), "{out}");

    let ended = slow.await.unwrap().expect_err("the slow call is cut off");
    assert_call_cut_off(&ended);
}

#[tokio::test]
async fn sigint_works_like_sigterm() {
    let mut server = ServerProcess::start();
    let channel = server.connect().await;
    common::echo_works(channel, "before").await;
    server.signal("INT");
    let (status, out, _) = server.exit(Duration::from_secs(10)).await;
    assert!(status.success(), "{status:?}\n{out}");
    assert!(out.contains(HOOK_LINE), "{out}");
}

#[test]
fn serve_with_shutdown_stops_when_its_signal_returns_and_the_grace_ends_calls() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let addr = free_local_addr();
    let hooked = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let server = {
        let (addr, hooked) = (addr.clone(), hooked.clone());
        std::thread::spawn(move || {
            pajamax::Server::builder()
                .workers(1)
                .pin_workers(false)
                .shutdown_grace(Duration::from_millis(300))
                .add_service(Probe)
                .on_shutdown(move || hooked.store(true, Ordering::SeqCst))
                .serve_with_shutdown(addr.as_str(), move || {
                    let _ = stopped.recv();
                })
        })
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let started = Instant::now();
        let channel = loop {
            let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
            match endpoint.connect().await {
                Ok(channel) => break channel,
                Err(err) => assert!(started.elapsed() < Duration::from_secs(10), "{err}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let slow = tokio::spawn(deferred(channel.clone(), "slow", 10_000));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!hooked.load(Ordering::SeqCst));
        let asked = Instant::now();
        stop.send(()).unwrap();
        let ended = slow.await.unwrap().expect_err("past the grace period");
        let took = asked.elapsed();
        assert_call_cut_off(&ended);
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(2),
            "the call ends when the grace period does: {took:?}"
        );
    });
    server.join().unwrap().unwrap();
    assert!(hooked.load(Ordering::SeqCst));
}

/// How a tonic client sees a call still running at the end of a drain:
/// the server answers it UNAVAILABLE before it closes the connection.
fn assert_call_cut_off(status: &tonic::Status) {
    common::assert_status(status, tonic::Code::Unavailable, "shutting down");
}
