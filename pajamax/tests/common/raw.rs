//! A raw HTTP/2 client over a blocking socket, for sending what no real
//! client would: `pajamax-test-peer`'s `TcpClient`, with the server's error
//! codes as pajamax's `Reason`. Through `Deref` the `TcpClient` (its
//! socket, its `Client` with everything heard) is at hand too.

use pajamax::h2::frame::Reason;
use pajamax_test_peer::{ErrorCode, TcpClient};
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

/// A frame as bytes (not every test uses it).
#[allow(unused_imports)]
pub use pajamax_test_peer::frame_bytes;

/// One raw connection.
pub struct RawPeer {
    inner: TcpClient,
}

/// What the server said, as far as the tests care.
#[derive(Debug, Default)]
pub struct Heard {
    pub goaway: Option<Reason>,
    pub resets: Vec<(u32, Reason)>,
    /// `(stream, grpc-status)` for every trailers block seen.
    pub statuses: Vec<(u32, String)>,
    pub data_bytes: usize,
    pub data_frames: usize,
    pub closed: bool,
}

fn reason(code: ErrorCode) -> Reason {
    Reason(code.0)
}

impl From<&pajamax_test_peer::Heard> for Heard {
    fn from(heard: &pajamax_test_peer::Heard) -> Heard {
        Heard {
            goaway: heard.goaway.map(reason),
            resets: heard
                .resets
                .iter()
                .map(|&(id, code)| (id, reason(code)))
                .collect(),
            statuses: heard.statuses.clone(),
            data_bytes: heard.data_bytes,
            data_frames: heard.data_frames,
            closed: heard.closed,
        }
    }
}

impl RawPeer {
    /// Connects without sending anything.
    pub fn connect(addr: SocketAddr) -> RawPeer {
        RawPeer {
            inner: TcpClient::connect(addr).expect("connect"),
        }
    }

    /// Connects and sends the preface with the given settings.
    pub fn handshake(addr: SocketAddr, settings: &[(u16, u32)]) -> RawPeer {
        RawPeer {
            inner: TcpClient::handshake(addr, settings).expect("handshake"),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.inner.send(bytes).expect("send");
    }

    /// Writes `bytes` from another thread, so the server's answers can be
    /// read meanwhile; a write error (the server closed) ends it quietly.
    pub fn send_in_background(&self, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
        self.inner.send_in_background(bytes)
    }

    /// A header block for a gRPC request to `path`, with extra fields.
    pub fn request_block(&mut self, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        self.inner.client.request_block(path, extra)
    }

    /// A header block of literals that leave the dynamic table alone.
    pub fn literal_block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        self.inner.client.literal_block(fields)
    }

    /// HEADERS + one DATA frame with `message` as a gRPC message.
    pub fn request(&mut self, stream: u32, path: &str, message: &[u8]) -> Vec<u8> {
        self.inner.client.request(stream, path, message)
    }

    /// Reads until `done` says so, the server closes, or `timeout` passes.
    pub fn listen(&mut self, timeout: Duration, done: impl Fn(&Heard) -> bool) -> Heard {
        Heard::from(&self.inner.listen(timeout, |h| done(&Heard::from(h))))
    }

    /// Connects, sends the preface and a request for `path` with
    /// `message` on stream 1, shuts its sending half at once (the FIN right
    /// behind the request), and reads until the server closes (5 s at
    /// most).
    pub fn ask_then_fin(addr: SocketAddr, path: &str, message: &[u8]) -> Heard {
        let mut peer = RawPeer::connect(addr);
        let mut bytes = pajamax_test_peer::frame::handshake(&[]);
        bytes.extend(peer.request(1, path, message));
        peer.send(&bytes);
        peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
        peer.listen(Duration::from_secs(5), |h| h.closed)
    }

    /// Reads until the server's GOAWAY (or close) and returns its code.
    pub fn expect_goaway(&mut self) -> Heard {
        let heard = self.listen(Duration::from_secs(20), |h| h.goaway.is_some());
        assert!(heard.goaway.is_some(), "no GOAWAY: {heard:?}");
        heard
    }
}

impl Deref for RawPeer {
    type Target = TcpClient;

    fn deref(&self) -> &TcpClient {
        &self.inner
    }
}

impl DerefMut for RawPeer {
    fn deref_mut(&mut self) -> &mut TcpClient {
        &mut self.inner
    }
}
