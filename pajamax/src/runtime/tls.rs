//! A connection's TLS layer: rustls's `ServerConnection`, driven so that
//! the batching survives it.
//!
//! rustls does no I/O here. One socket read brings ciphertext into the
//! worker's ciphertext buffer; all of it is handed to rustls, decrypted,
//! and its plaintext lands in the worker's read buffer, where the codec
//! reads it as it reads a plain connection's bytes. The answers that batch
//! made are encrypted together and leave with one `writev` (a write per
//! [`OUTPUT_LIMIT`] of answers at most).
//!
//! Backpressure is the plain path's: answers move from the codec's output
//! into rustls only once rustls has written everything it held, so the
//! codec's output is what waits for a slow reader, counted against
//! `max_pending_output` as without TLS, and rustls holds at most one
//! [`OUTPUT_LIMIT`] of ciphertext besides.

use crate::grpc::connection::GrpcConnection;
use crate::runtime::Socket;
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;

/// Plaintext encrypted at a time: what rustls may hold for the socket.
const OUTPUT_LIMIT: usize = 256 << 10;

/// Room the read buffer keeps free for what one record decrypts to.
const RECORD: usize = 16 << 10;

/// The TLS side of one connection.
pub(crate) struct TlsSession {
    conn: ServerConnection,
    /// The handshake is over and the connection was checked.
    established: bool,
    /// The peer sent close_notify: nothing more comes from it.
    peer_closed: bool,
    /// close_notify was queued.
    closing: bool,
}

impl TlsSession {
    pub fn new(config: Arc<ServerConfig>) -> io::Result<TlsSession> {
        let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
        conn.set_buffer_limit(Some(OUTPUT_LIMIT));
        Ok(TlsSession {
            conn,
            established: false,
            peer_closed: false,
            closing: false,
        })
    }

    /// Whether the handshake is still going on.
    pub fn is_handshaking(&self) -> bool {
        !self.established
    }

    /// Whether ciphertext waits for the socket.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Reads the socket once into `cipher` and decrypts all it brought
    /// into `buf` from `at` on (growing `buf` if a record needs room).
    ///
    /// Returns the plaintext bytes and whether the read emptied the
    /// socket. `Ok((0, _))` is the end of the connection; a read that
    /// brought only handshake bytes is `WouldBlock` (the socket is empty)
    /// or `Interrupted` (read again). A TLS error sends rustls's alert,
    /// shuts the writing half down and is `ConnectionAborted`: the
    /// connection then only lingers.
    pub fn read(
        &mut self,
        socket: &mut Socket,
        grpc: &mut GrpcConnection,
        cipher: &mut Vec<u8>,
        buf: &mut Vec<u8>,
        at: usize,
        writes: &mut u64,
    ) -> io::Result<(usize, bool)> {
        if self.peer_closed {
            return Ok((0, true));
        }
        if cipher.is_empty() {
            // The worker's first TLS read: as large as its plain reads.
            cipher.resize(buf.len(), 0);
        }
        let n = socket.read(cipher)?;
        if n == 0 {
            return Ok((0, true));
        }
        let drained = n < cipher.len();
        let mut rest = &cipher[..n];
        let mut filled = at;
        while !rest.is_empty() {
            if let Err(err) = self.conn.read_tls(&mut rest) {
                return Err(self.fail(socket, writes, err.to_string()));
            }
            let state = match self.conn.process_new_packets() {
                Ok(state) => state,
                Err(err) => return Err(self.fail(socket, writes, err.to_string())),
            };
            let plaintext = state.plaintext_bytes_to_read();
            if plaintext > 0 {
                if buf.len() < filled + plaintext {
                    buf.resize(filled + plaintext.max(RECORD), 0);
                }
                if let Err(err) = self
                    .conn
                    .reader()
                    .read_exact(&mut buf[filled..filled + plaintext])
                {
                    return Err(self.fail(socket, writes, err.to_string()));
                }
                filled += plaintext;
            }
            if state.peer_has_closed() {
                self.peer_closed = true;
                break;
            }
        }
        let established_now = !self.established && !self.conn.is_handshaking();
        if established_now {
            self.establish(socket, grpc, writes)?;
        }
        if established_now || self.conn.wants_write() {
            // The handshake's answers; once it is over, the codec's first
            // output too.
            self.flush(socket, grpc, writes)?;
        }
        match filled - at {
            0 if self.peer_closed => Ok((0, true)),
            0 if drained => Err(io::ErrorKind::WouldBlock.into()),
            0 => Err(io::ErrorKind::Interrupted.into()),
            plaintext => Ok((plaintext, drained)),
        }
    }

    /// The handshake just ended: checks the protocol, shows the client's
    /// certificates to the calls, and lets the codec's first output go.
    fn establish(
        &mut self,
        socket: &mut Socket,
        grpc: &mut GrpcConnection,
        writes: &mut u64,
    ) -> io::Result<()> {
        self.established = true;
        if self.conn.alpn_protocol() != Some(&b"h2"[..]) {
            // Refused during the handshake already; kept for a resumed
            // session, which may skip that check.
            return Err(self.fail(socket, writes, "the client did not choose h2".into()));
        }
        if let Some(certificates) = self.conn.peer_certificates() {
            grpc.set_peer_certificates(certificates.to_vec());
        }
        Ok(())
    }

    /// Writes what rustls holds, then encrypts and writes the codec's
    /// output while the socket takes it.
    pub fn flush(
        &mut self,
        socket: &mut Socket,
        grpc: &mut GrpcConnection,
        writes: &mut u64,
    ) -> io::Result<()> {
        loop {
            if !self.write_pending(socket, writes)? {
                return Ok(());
            }
            if !self.established || self.closing || grpc.output().is_empty() {
                return Ok(());
            }
            let taken = self.conn.writer().write(grpc.output())?;
            if taken == 0 {
                return Ok(());
            }
            grpc.advance_output(taken);
        }
    }

    /// Sends close_notify after everything else. Returns whether all has
    /// left, so that the writing half can be shut down.
    pub fn close(&mut self, socket: &mut Socket, writes: &mut u64) -> io::Result<bool> {
        if !self.closing {
            self.closing = true;
            self.conn.send_close_notify();
        }
        self.write_pending(socket, writes)
    }

    /// Writes the ciphertext rustls holds; returns whether it all left.
    fn write_pending(&mut self, socket: &mut Socket, writes: &mut u64) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(socket) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => *writes += 1,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(true)
    }

    /// Ends the connection on a TLS error: sends the alert rustls queued,
    /// if the socket takes it, and shuts the writing half down.
    fn fail(&mut self, socket: &mut Socket, writes: &mut u64, reason: String) -> io::Error {
        log::debug!("TLS connection closed: {reason}");
        self.closing = true;
        let _ = self.write_pending(socket, writes);
        let _ = socket.shutdown(Shutdown::Write);
        io::Error::new(io::ErrorKind::ConnectionAborted, reason)
    }
}
