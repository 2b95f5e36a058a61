//! A raw HTTP/2 client over a blocking socket, for sending what no real
//! client would.

use pajamax::h2::frame::{self, flag, kind, FrameHeader, Reason};
use pajamax::h2::hpack::{Encoder, Indexing};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One raw connection.
pub struct RawPeer {
    pub socket: TcpStream,
    encoder: Encoder,
    inbox: Vec<u8>,
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

impl RawPeer {
    /// Connects without sending anything.
    pub fn connect(addr: SocketAddr) -> RawPeer {
        let socket = TcpStream::connect(addr).expect("connect");
        socket.set_nodelay(true).unwrap();
        RawPeer {
            socket,
            encoder: Encoder::new(),
            inbox: Vec::new(),
        }
    }

    /// Connects and sends the preface with the given settings.
    pub fn handshake(addr: SocketAddr, settings: &[(u16, u32)]) -> RawPeer {
        let mut peer = RawPeer::connect(addr);
        let mut hello = frame::PREFACE.to_vec();
        frame::write_settings(&mut hello, settings);
        peer.send(&hello);
        peer
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.socket.write_all(bytes).expect("send");
    }

    /// Writes `bytes` from another thread, so the server's answers can be
    /// read meanwhile; a write error (the server closed) ends it quietly.
    pub fn send_in_background(&self, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
        let mut socket = self.socket.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = socket.write_all(&bytes);
        })
    }

    /// A header block for a gRPC request to `path`, with extra fields.
    pub fn request_block(&mut self, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut block = Vec::new();
        self.encoder.begin_block(&mut block);
        let fixed = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ];
        for (name, value) in fixed.iter().chain(extra) {
            self.encoder.encode(
                name.as_bytes(),
                value.as_bytes(),
                Indexing::Incremental,
                &mut block,
            );
        }
        block
    }

    /// A header block of literals that leave the dynamic table alone.
    pub fn literal_block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut block = Vec::new();
        self.encoder.begin_block(&mut block);
        for (name, value) in fields {
            self.encoder.encode(
                name.as_bytes(),
                value.as_bytes(),
                Indexing::None,
                &mut block,
            );
        }
        block
    }

    /// HEADERS + one DATA frame with `message` as a gRPC message.
    pub fn request(&mut self, stream: u32, path: &str, message: &[u8]) -> Vec<u8> {
        let block = self.request_block(path, &[]);
        let mut out = frame_bytes(kind::HEADERS, flag::END_HEADERS, stream, &block);
        let mut body = vec![0];
        body.extend((message.len() as u32).to_be_bytes());
        body.extend(message);
        out.extend(frame_bytes(kind::DATA, flag::END_STREAM, stream, &body));
        out
    }

    /// Reads until `done` says so, the server closes, or `timeout` passes.
    pub fn listen(&mut self, timeout: Duration, done: impl Fn(&Heard) -> bool) -> Heard {
        let mut heard = Heard::default();
        let mut decoder = pajamax::h2::hpack::Decoder::new(4096);
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0; 64 << 10];
        loop {
            while let Some(head) = FrameHeader::parse(&self.inbox) {
                let end = frame::HEADER_LEN + head.len as usize;
                if self.inbox.len() < end {
                    break;
                }
                let payload = self.inbox[frame::HEADER_LEN..end].to_vec();
                self.inbox.drain(..end);
                match head.kind {
                    kind::GOAWAY => {
                        heard.goaway = Some(Reason(u32::from_be_bytes(
                            payload[4..8].try_into().unwrap(),
                        )));
                    }
                    kind::RST_STREAM => heard.resets.push((
                        head.stream,
                        Reason(u32::from_be_bytes(payload[..4].try_into().unwrap())),
                    )),
                    kind::DATA => {
                        heard.data_bytes += payload.len();
                        heard.data_frames += 1;
                    }
                    kind::HEADERS => {
                        let mut status = None;
                        decoder
                            .decode(&payload, |name, value| {
                                if name == b"grpc-status" {
                                    status = Some(String::from_utf8_lossy(value).into_owned());
                                }
                            })
                            .expect("server header blocks decode");
                        if let Some(status) = status {
                            heard.statuses.push((head.stream, status));
                        }
                    }
                    _ => {}
                }
            }
            if done(&heard) {
                return heard;
            }
            let now = Instant::now();
            if now >= deadline {
                return heard;
            }
            self.socket.set_read_timeout(Some(deadline - now)).unwrap();
            match self.socket.read(&mut buf) {
                Ok(0) => {
                    heard.closed = true;
                    return heard;
                }
                Ok(n) => self.inbox.extend_from_slice(&buf[..n]),
                Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return heard
                }
                Err(_) => {
                    heard.closed = true;
                    return heard;
                }
            }
        }
    }

    /// Reads until the server's GOAWAY (or close) and returns its code.
    pub fn expect_goaway(&mut self) -> Heard {
        let heard = self.listen(Duration::from_secs(20), |h| h.goaway.is_some());
        assert!(heard.goaway.is_some(), "no GOAWAY: {heard:?}");
        heard
    }
}

/// A frame as bytes.
pub fn frame_bytes(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_header(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}
