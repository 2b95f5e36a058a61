//! A [`Client`] over a blocking TCP socket, for tests against a running
//! server.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::{Client, Heard};

/// One raw client connection.
#[derive(Debug)]
pub struct TcpClient {
    /// The connection (`TCP_NODELAY` set).
    pub socket: TcpStream,
    /// The connection's state: HPACK contexts, what was heard.
    pub client: Client,
    buf: Vec<u8>,
}

impl TcpClient {
    /// Connects without sending anything.
    pub fn connect(addr: SocketAddr) -> io::Result<TcpClient> {
        let socket = TcpStream::connect(addr)?;
        socket.set_nodelay(true)?;
        Ok(TcpClient {
            socket,
            client: Client::new(),
            buf: vec![0; 64 << 10],
        })
    }

    /// Connects and sends the preface with a SETTINGS frame of `settings`.
    pub fn handshake(addr: SocketAddr, settings: &[(u16, u32)]) -> io::Result<TcpClient> {
        let mut peer = TcpClient::connect(addr)?;
        peer.send(&Client::handshake(settings))?;
        Ok(peer)
    }

    /// Writes all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.socket.write_all(bytes)
    }

    /// Writes `bytes` from another thread, so the server's answers can be
    /// read meanwhile; a write error (the server closed) ends it quietly.
    ///
    /// # Panics
    ///
    /// If the socket cannot be cloned.
    pub fn send_in_background(&self, bytes: Vec<u8>) -> JoinHandle<()> {
        let mut socket = self.socket.try_clone().expect("clone the socket");
        std::thread::spawn(move || {
            let _ = socket.write_all(&bytes);
        })
    }

    /// Reads until `done` says so, the server closes the connection, or
    /// `timeout` passes; returns what was heard during the call.
    ///
    /// # Panics
    ///
    /// If the server sends what no server may (see
    /// [`ReadError`](crate::ReadError)).
    pub fn listen(&mut self, timeout: Duration, done: impl Fn(&Heard) -> bool) -> Heard {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self.client.heard()) {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            self.socket
                .set_read_timeout(Some(deadline - now))
                .expect("a non-zero timeout");
            match self.socket.read(&mut self.buf) {
                Ok(0) => {
                    self.client.set_closed();
                    break;
                }
                Ok(n) => {
                    if let Err(err) = self.client.receive(&self.buf[..n]) {
                        panic!("the server's output is not well-formed: {err}");
                    }
                }
                Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    break
                }
                Err(_) => {
                    self.client.set_closed();
                    break;
                }
            }
        }
        self.client.take_heard()
    }

    /// Reads until a GOAWAY comes, the server closes the connection, or
    /// `timeout` passes; returns what was heard.
    pub fn listen_for_goaway(&mut self, timeout: Duration) -> Heard {
        self.listen(timeout, |h| h.goaway.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{ErrorCode, Frame, PREFACE};
    use std::net::TcpListener;

    #[test]
    fn a_tiny_server_is_heard() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut hello = vec![0; PREFACE.len() + 9];
            socket.read_exact(&mut hello).unwrap();
            let mut out = Frame::settings(&[]).to_bytes();
            Frame::goaway(0, ErrorCode::PROTOCOL_ERROR, b"bye").write(&mut out);
            socket.write_all(&out).unwrap();
            hello
        });
        let mut peer = TcpClient::handshake(addr, &[]).unwrap();
        let heard = peer.listen(Duration::from_secs(10), |h| h.closed);
        assert_eq!(heard.goaway, Some(ErrorCode::PROTOCOL_ERROR));
        assert!(heard.closed);
        assert_eq!(heard.frames, 2);
        assert_eq!(server.join().unwrap(), Client::handshake(&[]));
    }
}
