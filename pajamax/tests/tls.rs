//! Serving over TLS: tonic clients with rustls, certificates made by rcgen
//! in the test. Answers of every size, mutual TLS and the identity the
//! handler sees, ALPN, clients that stall or send garbage in the handshake,
//! a certificate replaced on a running server, and streams over TLS to
//! slow readers, with paused reads, and up to the client's FIN.
#![cfg(feature = "tls")]

mod common;

use common::streams::{self, Ask, Streams};
use common::{call, Probe, ProbeReply};
use pajamax::{Context, Method, Reply, Service, Status, TlsConfig};
use prost::Message;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// A CA and what it issued.
struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
struct Leaf {
    cert: String,
    key: String,
    der: CertificateDer<'static>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Pki { ca }
    }

    fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.ca
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    fn server(&self, name: &str) -> Leaf {
        self.leaf(name, vec!["localhost".into(), "127.0.0.1".into()])
    }

    /// A client certificate named `name`.
    fn client(&self, name: &str) -> Leaf {
        self.leaf(name, vec![format!("{name}.clients.test")])
    }

    fn leaf(&self, name: &str, names: Vec<String>) -> Leaf {
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, self.issuer()).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }
}

fn tls_config(leaf: &Leaf) -> TlsConfig {
    TlsConfig::from_pem(leaf.cert.as_bytes(), leaf.key.as_bytes()).expect("server TLS config")
}

/// `test.Tls/Who`: answers with the client certificate the call saw.
struct Who;

impl Service for Who {
    fn name(&self) -> &'static str {
        "test.Tls"
    }

    fn methods(&self) -> &'static [Method] {
        const METHODS: &[Method] = &[Method::unary("Who")];
        METHODS
    }

    fn unary(
        &self,
        _method: usize,
        ctx: &mut Context<'_>,
        _request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        let chain = ctx.peer_certificates().unwrap_or_default();
        reply.encode(&ProbeReply {
            text: format!("{} certificates", chain.len()),
            blob: chain.first().map(|c| c.to_vec()).unwrap_or_default(),
            ..Default::default()
        });
        Ok(())
    }
}

fn start(tls: TlsConfig, builder: pajamax::Builder) -> pajamax::ServerHandle {
    builder
        .workers(2)
        .pin_workers(false)
        .tls(tls)
        .add_service(Probe)
        .add_service(Who)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .expect("bind")
}

/// A server of the test services with a certificate for `name` that `pki`
/// signs, and the builder's defaults otherwise.
fn start_signed_by(pki: &Pki, name: &str) -> pajamax::ServerHandle {
    start(tls_config(&pki.server(name)), pajamax::Server::builder())
}

fn client_tls(ca: &str, identity: Option<&Leaf>) -> ClientTlsConfig {
    let config = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    match identity {
        Some(leaf) => config.identity(Identity::from_pem(&leaf.cert, &leaf.key)),
        None => config,
    }
}

/// A channel to `addr` over TLS that trusts `pki`'s CA and presents no
/// client certificate.
async fn connect_trusting(addr: SocketAddr, pki: &Pki) -> Channel {
    connect_tls(addr, client_tls(&pki.ca_pem(), None))
        .await
        .expect("TLS connect")
}

async fn connect_tls(
    addr: SocketAddr,
    tls: ClientTlsConfig,
) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

async fn who(channel: Channel) -> Result<ProbeReply, tonic::Status> {
    common::call_path(channel, "/test.Tls/Who", common::text(""))
        .await
        .map(|reply| reply.into_inner())
}

/// A raw rustls client (no tonic) trusting `ca`, offering `alpn`.
fn raw_client(ca: &str, alpn: &[&[u8]]) -> rustls::ClientConnection {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
        .unwrap()
}

/// Drives a raw client's handshake to its end over a new connection.
fn raw_handshake(
    addr: SocketAddr,
    client: &mut rustls::ClientConnection,
) -> std::io::Result<TcpStream> {
    let mut socket = TcpStream::connect(addr)?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    while client.is_handshaking() {
        client.complete_io(&mut socket)?;
    }
    Ok(socket)
}

/// One echo call over a new raw TLS connection (ALPN `h2`) that trusts
/// `ca`: the certificate the server presented on that connection, and the
/// text of the answer it sent there.
fn echo_over_new_connection(
    addr: SocketAddr,
    ca: &str,
    text: &str,
) -> (CertificateDer<'static>, String) {
    let mut client = raw_client(ca, &[b"h2"]);
    let mut socket = raw_handshake(addr, &mut client).expect("TLS handshake");
    let seen = client.peer_certificates().expect("a server certificate")[0].clone();
    let request = common::ProbeRequest {
        text: text.into(),
        ..Default::default()
    };
    let mut h2 = pajamax_test_peer::Client::new();
    let mut bytes = pajamax_test_peer::Client::handshake(&[]);
    bytes.extend(h2.request(1, "/test.Probe/Echo", &request.encode_to_vec()));
    let mut tls = rustls::Stream::new(&mut client, &mut socket);
    tls.write_all(&bytes).unwrap();
    let mut buf = vec![0; 16 << 10];
    while h2.heard().status(1).is_none() {
        let n = tls.read(&mut buf).expect("the server answers");
        assert!(n > 0, "the server closed the connection before answering");
        h2.receive(&buf[..n]).unwrap();
    }
    let heard = h2.take_heard();
    assert_eq!(heard.status(1), Some("0"), "{heard:?}");
    let messages = heard.messages_on(1);
    assert_eq!(messages.len(), 1, "{heard:?}");
    (seen, ProbeReply::decode(messages[0]).unwrap().text)
}

/// The alert a failed raw handshake received, if any.
fn alert_received(err: &std::io::Error) -> Option<rustls::AlertDescription> {
    match err.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::AlertReceived(alert) => Some(*alert),
        _ => None,
    }
}

/// Reads until the server closes. Fails the test if it does not close
/// within `bound`.
fn wait_closed(socket: &mut TcpStream, bound: Duration) {
    let started = Instant::now();
    socket.set_read_timeout(Some(bound)).unwrap();
    let mut sink = [0u8; 4096];
    loop {
        match socket.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!(
                    "the server kept the connection open for {:?}",
                    started.elapsed()
                )
            }
            // A reset is a close too.
            Err(_) => return,
        }
        assert!(
            started.elapsed() < bound,
            "the server kept the connection open"
        );
    }
}

#[tokio::test]
async fn calls_of_every_size_and_kind_over_tls() {
    let pki = Pki::new("test CA");
    let server = start_signed_by(&pki, "server");
    let channel = connect_trusting(server.local_addr(), &pki).await;

    common::echo_works(channel.clone(), "over TLS").await;
    // Answers larger than what TLS encrypts at a time.
    let mut request = common::text("big");
    request.get_mut().reply_size = 3 << 20;
    request.get_mut().blob = vec![1; 2 << 20];
    let reply = call(channel.clone(), "Echo", request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.blob.len(), 3 << 20);
    assert_eq!(reply.received, 2 << 20);

    // Many calls at once on the one connection: batches each way.
    let calls = (0..200).map(|i| {
        let channel = channel.clone();
        tokio::spawn(async move {
            let reply = call(channel, "Echo", common::text(&format!("call {i}")))
                .await
                .unwrap();
            assert_eq!(reply.get_ref().text, format!("call {i}"));
        })
    });
    for handle in calls.collect::<Vec<_>>() {
        handle.await.unwrap();
    }

    // A server stream of 4 MiB, pulled as the client reads.
    let ask = Ask {
        count: 256,
        size: 16 << 10,
        ..Default::default()
    };
    let stream = streams::server_stream(channel.clone(), "Count", tonic::Request::new(ask))
        .await
        .unwrap();
    let (items, status, _) = streams::collect(stream.into_inner()).await;
    assert_eq!(items.len(), 256);
    assert!(items.iter().all(|item| item.blob.len() == 16 << 10));
    assert!(status.is_ok(), "{status:?}");

    // No client certificate asked for: the handler sees none.
    assert_eq!(who(channel.clone()).await.unwrap().text, "0 certificates");
    // A plain HTTP/2 client gets nowhere.
    let plain = Endpoint::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await;
    if let Ok(plain) = plain {
        assert!(call(plain, "Echo", common::text("plain")).await.is_err());
    }
    common::stop(server).await;
}

#[tokio::test]
async fn mutual_tls_requires_a_client_certificate_and_shows_it_to_handlers() {
    let servers = Pki::new("server CA");
    let clients = Pki::new("client CA");
    let config = tls_config(&servers.server("server"))
        .client_ca_pem(clients.ca_pem().as_bytes())
        .unwrap();
    let server = start(config, pajamax::Server::builder());
    let addr = server.local_addr();

    let alice = clients.client("alice");
    let channel = connect_tls(addr, client_tls(&servers.ca_pem(), Some(&alice)))
        .await
        .expect("mutual TLS connect");
    let seen = who(channel.clone()).await.unwrap();
    assert_eq!(seen.text, "1 certificates");
    assert_eq!(
        seen.blob,
        alice.der.to_vec(),
        "the handler sees alice's certificate"
    );
    common::echo_works(channel, "with a certificate").await;

    // No certificate: refused (in the handshake, or at the first call with
    // TLS 1.3, where the client learns of it after its Finished).
    let refused = match connect_tls(addr, client_tls(&servers.ca_pem(), None)).await {
        Err(_) => true,
        Ok(channel) => call(channel, "Echo", common::text("anonymous"))
            .await
            .is_err(),
    };
    assert!(refused, "a client without a certificate was served");

    // A certificate from another CA: refused too.
    let mallory = Pki::new("other CA").client("mallory");
    let refused = match connect_tls(addr, client_tls(&servers.ca_pem(), Some(&mallory))).await {
        Err(_) => true,
        Ok(channel) => call(channel, "Echo", common::text("mallory"))
            .await
            .is_err(),
    };
    assert!(
        refused,
        "a client with a certificate of another CA was served"
    );
    common::stop(server).await;
}

#[tokio::test]
async fn optional_client_authentication_serves_both() {
    let servers = Pki::new("server CA");
    let clients = Pki::new("client CA");
    let config = tls_config(&servers.server("server"))
        .client_ca_pem(clients.ca_pem().as_bytes())
        .unwrap()
        .client_auth_optional(true);
    let server = start(config, pajamax::Server::builder());
    let addr = server.local_addr();
    let anonymous = connect_trusting(addr, &servers).await;
    assert_eq!(who(anonymous).await.unwrap().text, "0 certificates");
    let bob = clients.client("bob");
    let known = connect_tls(addr, client_tls(&servers.ca_pem(), Some(&bob)))
        .await
        .unwrap();
    assert_eq!(who(known).await.unwrap().blob, bob.der.to_vec());
    common::stop(server).await;
}

#[test]
fn a_client_that_does_not_ask_for_h2_is_refused_in_the_handshake() {
    let pki = Pki::new("test CA");
    let server = start_signed_by(&pki, "server");
    let addr = server.local_addr();

    // ALPN without h2: rustls's own answer.
    let mut client = raw_client(&pki.ca_pem(), &[b"http/1.1"]);
    let err = raw_handshake(addr, &mut client).expect_err("an http/1.1 client was accepted");
    assert_eq!(
        alert_received(&err),
        Some(rustls::AlertDescription::NoApplicationProtocol),
        "{err}"
    );

    // No ALPN at all: refused before any certificate is sent.
    let mut client = raw_client(&pki.ca_pem(), &[]);
    let err = raw_handshake(addr, &mut client).expect_err("a client without ALPN was accepted");
    assert_eq!(
        alert_received(&err),
        Some(rustls::AlertDescription::AccessDenied),
        "{err}"
    );

    // With h2 the same client gets through, and the server's SETTINGS.
    let mut client = raw_client(&pki.ca_pem(), &[b"h2"]);
    let mut socket = raw_handshake(addr, &mut client).expect("h2 handshake");
    assert_eq!(client.alpn_protocol(), Some(&b"h2"[..]));
    let mut head = [0u8; 9];
    {
        let mut tls = rustls::Stream::new(&mut client, &mut socket);
        tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .unwrap();
        tls.read_exact(&mut head).unwrap();
    }
    assert_eq!(head[3], 0x4, "the server's first frame is SETTINGS");
    // Closed, so that the shutdown does not wait for it.
    drop(socket);
    server.shutdown();
}

#[test]
fn a_client_that_stalls_in_the_handshake_is_dropped() {
    let pki = Pki::new("test CA");
    let server = start(
        tls_config(&pki.server("server")),
        pajamax::Server::builder().handshake_timeout(Duration::from_millis(300)),
    );
    let addr = server.local_addr();

    // Connects and says nothing.
    let mut silent = TcpStream::connect(addr).unwrap();
    // Sends half a ClientHello.
    let mut hello = Vec::new();
    raw_client(&pki.ca_pem(), &[b"h2"])
        .write_tls(&mut hello)
        .unwrap();
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(&hello[..hello.len() / 2]).unwrap();

    let bound = Duration::from_secs(20);
    wait_closed(&mut silent, bound);
    wait_closed(&mut half, bound);
    // The server still serves.
    let mut client = raw_client(&pki.ca_pem(), &[b"h2"]);
    raw_handshake(addr, &mut client).expect("a prompt client still gets through");
    server.shutdown();
}

#[tokio::test]
async fn garbage_instead_of_a_client_hello_closes_that_connection_only() {
    let pki = Pki::new("test CA");
    let server = start_signed_by(&pki, "server");
    let addr = server.local_addr();
    let channel = connect_trusting(addr, &pki).await;
    common::echo_works(channel.clone(), "before").await;

    let garbage: [&[u8]; 3] = [
        // Plain HTTP/2, no TLS.
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        // A handshake record that claims to be huge.
        &[0x16, 0x03, 0x01, 0xff, 0xff, 1, 0, 0, 0],
        // An alert record before anything.
        &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
    ];
    for bytes in garbage {
        let mut socket = TcpStream::connect(addr).unwrap();
        socket.write_all(bytes).unwrap();
        let bound = Duration::from_secs(20);
        wait_closed(&mut socket, bound);
    }
    // The established client goes on, and new ones are served.
    common::echo_works(channel, "after").await;
    let fresh = connect_trusting(addr, &pki).await;
    common::echo_works(fresh, "fresh").await;
    common::stop(server).await;
}

#[tokio::test]
async fn a_certificate_replaced_on_a_running_server_serves_new_connections() {
    let first = Pki::new("first CA");
    let second = Pki::new("second CA");
    let server = start_signed_by(&first, "first");
    let addr = server.local_addr();
    let old = connect_trusting(addr, &first).await;
    common::echo_works(old.clone(), "first").await;

    let replacement = second.server("second");
    let replacement_der = replacement.der.clone();
    let reloader = server.tls_reloader().expect("a TLS server has a reloader");
    tokio::task::spawn_blocking(move || reloader.reload(&tls_config(&replacement)))
        .await
        .unwrap()
        .expect("reload");

    // A new connection sees the new certificate...
    let mut client = raw_client(&format!("{}{}", first.ca_pem(), second.ca_pem()), &[b"h2"]);
    raw_handshake(addr, &mut client).expect("handshake after the reload");
    let seen = client.peer_certificates().unwrap()[0].clone();
    assert_eq!(seen, replacement_der);
    let new = connect_tls(addr, client_tls(&second.ca_pem(), None))
        .await
        .expect("new certificate");
    common::echo_works(new, "second").await;
    // ...one trusting only the old CA no longer connects...
    let refused = match connect_tls(addr, client_tls(&first.ca_pem(), None)).await {
        Err(_) => true,
        Ok(channel) => call(channel, "Echo", common::text("old CA")).await.is_err(),
    };
    assert!(
        refused,
        "the old certificate is still served to new connections"
    );
    // ...and the connection made before goes on.
    common::echo_works(old.clone(), "still first").await;

    // A bad configuration changes nothing: trying to reload with one
    // fails, and new connections still get the certificate in use.
    let stray = Pki::new("stray").server("stray");
    let unmatched = first.server("unmatched");
    let not_der =
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
    let bad: [(&str, &str, &str); 3] = [
        (
            "a key that does not match its certificate",
            &unmatched.cert,
            &stray.key,
        ),
        ("a CERTIFICATE section that is not one", not_der, &stray.key),
        ("a key that is not PEM", &stray.cert, "not a key"),
    ];
    for (what, cert, key) in bad {
        let err = TlsConfig::from_pem(cert.as_bytes(), key.as_bytes())
            .and_then(|config| server.reload_tls(&config))
            .expect_err(what);
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{what}: {err}");
    }
    let both_cas = format!("{}{}", first.ca_pem(), second.ca_pem());
    let (seen, answer) = tokio::task::spawn_blocking(move || {
        echo_over_new_connection(addr, &both_cas, "after a failed reload")
    })
    .await
    .unwrap();
    assert_eq!(
        seen, replacement_der,
        "the certificate in use is still served"
    );
    assert_eq!(answer, "after a failed reload");
    common::echo_works(old, "first, still").await;
    common::stop(server).await;
}

#[test]
fn the_certificate_seen_by_a_new_connection_is_the_reloaded_one() {
    let pki = Pki::new("test CA");
    let (a, b) = (pki.server("a"), pki.server("b"));
    let server = start(tls_config(&a), pajamax::Server::builder());
    let addr = server.local_addr();
    let mut client = raw_client(&pki.ca_pem(), &[b"h2"]);
    raw_handshake(addr, &mut client).unwrap();
    assert_eq!(client.peer_certificates().unwrap()[0], a.der);
    server.reload_tls(&tls_config(&b)).unwrap();
    let mut client = raw_client(&pki.ca_pem(), &[b"h2"]);
    raw_handshake(addr, &mut client).unwrap();
    assert_eq!(client.peer_certificates().unwrap()[0], b.der);
    server.shutdown();
}

#[test]
fn configurations_are_checked_when_made() {
    let pki = Pki::new("test CA");
    let leaf = pki.server("server");
    let no_cert = TlsConfig::from_pem(b"", leaf.key.as_bytes()).unwrap_err();
    assert!(no_cert.to_string().contains("no CERTIFICATE"), "{no_cert}");
    let no_key = TlsConfig::from_pem(leaf.cert.as_bytes(), b"").unwrap_err();
    assert!(no_key.to_string().contains("private key"), "{no_key}");
    let missing =
        TlsConfig::from_pem_files("/nonexistent/cert.pem", "/nonexistent/key.pem").unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/cert.pem"),
        "{missing}"
    );
    let no_ca = tls_config(&leaf).client_ca_pem(b"nothing").unwrap_err();
    assert!(no_ca.to_string().contains("client CA"), "{no_ca}");
    // A plain server has nothing to reload.
    let plain = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Probe)
        .bind("127.0.0.1:0")
        .unwrap();
    assert!(plain.tls_reloader().is_none());
    assert_eq!(
        plain.reload_tls(&tls_config(&leaf)).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    plain.shutdown();
}

#[tokio::test]
async fn graceful_shutdown_over_tls_answers_the_call_in_flight() {
    let pki = Pki::new("test CA");
    let server = start_signed_by(&pki, "server");
    let channel = connect_trusting(server.local_addr(), &pki).await;
    common::echo_works(channel.clone(), "warm").await;
    let mut request = common::text("slow");
    request.get_mut().sleep_ms = 300;
    let slow = tokio::spawn(call(channel, "Sleep", request));
    tokio::time::sleep(Duration::from_millis(100)).await;
    common::stop(server).await;
    let reply = slow.await.unwrap().expect("the call in flight is answered");
    assert_eq!(reply.get_ref().text, "slow");
}

/// [`ask_then_close_notify_and_fin`] with one request, for `path` with
/// `message` on stream 1, the default settings and windows, and no pause.
fn ask_one_then_close_notify_and_fin(
    addr: SocketAddr,
    ca: &str,
    path: &str,
    message: &[u8],
) -> pajamax_test_peer::Heard {
    ask_then_close_notify_and_fin(
        addr,
        ca,
        &[],
        0,
        |h2| h2.request(1, path, message),
        Duration::ZERO,
    )
}

/// Over a new raw TLS connection that trusts `ca`: sends the preface (with
/// `settings` and a connection WINDOW_UPDATE of `window` when not 0) and
/// `requests` (made with the connection's HPACK context), then close_notify
/// and a FIN, and reads only after `pause`: what the server sent until it
/// closed (or 20 s passed).
fn ask_then_close_notify_and_fin(
    addr: SocketAddr,
    ca: &str,
    settings: &[(u16, u32)],
    window: u32,
    requests: impl FnOnce(&mut pajamax_test_peer::Client) -> Vec<u8>,
    pause: Duration,
) -> pajamax_test_peer::Heard {
    ask_then_fin(addr, ca, settings, window, requests, pause, true)
}

/// As [`ask_then_close_notify_and_fin`], with the largest windows and a
/// FIN with no close_notify before it.
fn ask_then_fin_without_close_notify(
    addr: SocketAddr,
    ca: &str,
    requests: impl FnOnce(&mut pajamax_test_peer::Client) -> Vec<u8>,
    pause: Duration,
) -> pajamax_test_peer::Heard {
    let largest = (1 << 31) - 1;
    let settings = [(4, largest)]; // SETTINGS_INITIAL_WINDOW_SIZE
    ask_then_fin(addr, ca, &settings, largest - 65535, requests, pause, false)
}

/// Sends the preface, `requests`, close_notify if `close_notify`, and a
/// FIN, then reads after `pause` until the server closes (or 20 s pass).
fn ask_then_fin(
    addr: SocketAddr,
    ca: &str,
    settings: &[(u16, u32)],
    window: u32,
    requests: impl FnOnce(&mut pajamax_test_peer::Client) -> Vec<u8>,
    pause: Duration,
    close_notify: bool,
) -> pajamax_test_peer::Heard {
    let mut client = raw_client(ca, &[b"h2"]);
    let mut socket = raw_handshake(addr, &mut client).expect("TLS handshake");
    let mut h2 = pajamax_test_peer::Client::new();
    let mut bytes = pajamax_test_peer::Client::handshake(settings);
    if window > 0 {
        pajamax_test_peer::frame::Frame::window_update(0, window).write(&mut bytes);
    }
    bytes.extend(requests(&mut h2));
    client.writer().write_all(&bytes).unwrap();
    if close_notify {
        client.send_close_notify();
    }
    while client.wants_write() {
        client.write_tls(&mut socket).unwrap();
    }
    socket.shutdown(std::net::Shutdown::Write).unwrap();
    std::thread::sleep(pause);
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = vec![0; 64 << 10];
    'reading: loop {
        match client.read_tls(&mut socket) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let state = match client.process_new_packets() {
            Ok(state) => state,
            Err(_) => break,
        };
        let mut left = state.plaintext_bytes_to_read();
        while left > 0 {
            let n = client.reader().read(&mut buf).unwrap();
            h2.receive(&buf[..n]).unwrap();
            left -= n;
        }
        if state.peer_has_closed() {
            break 'reading;
        }
    }
    h2.take_heard()
}

/// A client that sends close_notify and its FIN right after its requests
/// still gets every answer it asked for, as on a plain connection: a
/// server stream, a call answered from another thread, and unary answers
/// larger than the socket takes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_asked_for_right_before_close_notify_and_fin_all_arrive() {
    let pki = Pki::new("fin-ca");
    let server = start(
        tls_config(&pki.server("localhost")),
        pajamax::Server::builder().max_pending_output(64 << 20),
    );
    let addr = server.local_addr();
    let ca = pki.ca_pem();

    // A server stream of some 32 KiB, within the default windows.
    let ask = Ask {
        count: 2000,
        size: 10,
        ..Ask::default()
    }
    .encode_to_vec();
    let ca_ = ca.clone();
    let heard = tokio::task::spawn_blocking(move || {
        ask_one_then_close_notify_and_fin(addr, &ca_, "/test.Streams/Count", &ask)
    })
    .await
    .unwrap();
    assert_eq!(
        heard.statuses,
        [(1, "0".to_string())],
        "server stream: {} bytes",
        heard.data_bytes
    );
    assert_eq!(heard.messages_on(1).len(), 2000);

    // A call answered from another thread.
    let deferred = common::ProbeRequest {
        text: "later".into(),
        sleep_ms: 200,
        ..Default::default()
    }
    .encode_to_vec();
    let ca_ = ca.clone();
    let heard = tokio::task::spawn_blocking(move || {
        ask_one_then_close_notify_and_fin(addr, &ca_, "/test.Probe/Defer", &deferred)
    })
    .await
    .unwrap();
    assert_eq!(
        heard.statuses,
        [(1, "0".to_string())],
        "deferred: {heard:?}"
    );

    // 40 unary answers of 500 KB, far more than the socket takes before
    // the client reads.
    let echo = common::ProbeRequest {
        text: "big".into(),
        reply_size: 500_000,
        ..Default::default()
    }
    .encode_to_vec();
    let heard = tokio::task::spawn_blocking(move || {
        ask_then_close_notify_and_fin(
            addr,
            &ca,
            &[(4, 1 << 20)], // SETTINGS_INITIAL_WINDOW_SIZE
            64 << 20,
            |h2| {
                let mut bytes = Vec::new();
                for i in 0..40 {
                    bytes.extend(h2.request(2 * i + 1, "/test.Probe/Echo", &echo));
                }
                bytes
            },
            Duration::from_millis(500),
        )
    })
    .await
    .unwrap();
    assert_eq!(
        heard.statuses.len(),
        40,
        "unary: {} bytes of DATA heard",
        heard.data_bytes
    );
    assert!(heard.statuses.iter().all(|(_, status)| status == "0"));
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .unwrap();
}

/// A TLS connection past `max_connections` is told so as a plain one is:
/// its handshake goes through, then a GOAWAY and the close, at once (not
/// after the handshake timeout, with its handshake left hanging).
#[test]
fn a_tls_connection_past_the_limit_gets_goaway_at_once() {
    let pki = Pki::new("limit CA");
    let server = start(
        tls_config(&pki.server("localhost")),
        pajamax::Server::builder()
            .max_connections(1)
            .handshake_timeout(Duration::from_secs(60)),
    );
    let addr = server.local_addr();
    let mut first = raw_client(&pki.ca_pem(), &[b"h2"]);
    let _held = raw_handshake(addr, &mut first).expect("the first connection");

    let mut client = raw_client(&pki.ca_pem(), &[b"h2"]);
    let mut socket = raw_handshake(addr, &mut client)
        .expect("the connection past the limit still completes its handshake");
    let mut h2 = pajamax_test_peer::Client::new();
    let mut tls = rustls::Stream::new(&mut client, &mut socket);
    tls.write_all(&pajamax_test_peer::Client::handshake(&[]))
        .unwrap();
    let mut buf = vec![0; 16 << 10];
    while h2.heard().goaway.is_none() {
        let n = tls.read(&mut buf).expect("the server says GOAWAY");
        assert!(n > 0, "closed without a GOAWAY");
        h2.receive(&buf[..n]).unwrap();
    }
    assert_eq!(h2.heard().goaway, Some(pajamax_test_peer::ErrorCode(0)));
    drop(_held);
    server.shutdown();
}

/// A client that closes its sending half in the middle of its handshake is
/// let go at once, not after the handshake timeout.
#[test]
fn a_client_that_closes_in_the_handshake_is_let_go_at_once() {
    let pki = Pki::new("test CA");
    let server = start(
        tls_config(&pki.server("server")),
        pajamax::Server::builder().handshake_timeout(Duration::from_secs(60)),
    );
    let mut hello = Vec::new();
    raw_client(&pki.ca_pem(), &[b"h2"])
        .write_tls(&mut hello)
        .unwrap();
    let mut half = TcpStream::connect(server.local_addr()).unwrap();
    half.write_all(&hello[..hello.len() / 2]).unwrap();
    half.shutdown(std::net::Shutdown::Write).unwrap();
    wait_closed(&mut half, Duration::from_secs(20));
    server.shutdown();
}

/// A server stream of 3000 messages over TLS, to a client that reads it
/// slowly (pausing, so the client's windows and the socket fill up) and
/// then as fast as it can: every message arrives, in order, then the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stream_over_tls_to_a_reader_slow_then_fast() {
    let pki = Pki::new("stream CA");
    let server = start_signed_by(&pki, "server");
    let channel = connect_trusting(server.local_addr(), &pki).await;
    for method in ["Count", "CountThread"] {
        let ask = Ask {
            count: 3000,
            size: 3000,
            ..Default::default()
        };
        let stream = streams::server_stream(channel.clone(), method, tonic::Request::new(ask))
            .await
            .unwrap();
        let mut answers = stream.into_inner();
        let mut values = Vec::new();
        let outcome = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(item) = answers.message().await? {
                values.push(item.value);
                let n = values.len();
                if n <= 300 && n % 20 == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if n == 1000 || n == 2000 {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
            Ok::<_, tonic::Status>(())
        })
        .await;
        assert!(
            matches!(outcome, Ok(Ok(()))),
            "{method}: {outcome:?} after {} messages",
            values.len()
        );
        assert_eq!(values, (1..=3000).collect::<Vec<u64>>(), "{method}");
    }
    common::echo_works(channel, "after the streams").await;
    common::stop(server).await;
}

/// A bidirectional call of many messages each way over TLS, on the worker
/// and on a thread: every ask is answered, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidi_call_of_many_messages_over_tls() {
    let pki = Pki::new("bidi CA");
    let server = start_signed_by(&pki, "server");
    let channel = connect_trusting(server.local_addr(), &pki).await;
    for method in ["Echo", "EchoThread"] {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let sender = tokio::spawn(async move {
            for value in 0..5000u64 {
                let ask = Ask {
                    value,
                    count: 2,
                    size: 700,
                    ..Default::default()
                };
                tx.send(ask).await.unwrap();
            }
        });
        let response = streams::bidi(channel.clone(), method, rx).await.unwrap();
        let collected = tokio::time::timeout(
            Duration::from_secs(60),
            streams::collect(response.into_inner()),
        )
        .await;
        let (items, end, _) = collected.unwrap_or_else(|_| panic!("{method}: stalled"));
        sender.await.unwrap();
        end.unwrap();
        let values: Vec<u64> = items.iter().map(|item| item.value).collect();
        let expected: Vec<u64> = (0..5000u64).flat_map(|v| [v, v]).collect();
        assert_eq!(values.len(), expected.len(), "{method}");
        assert_eq!(values, expected, "{method}");
    }
    common::stop(server).await;
}

/// 100 MiB of a server stream over TLS to a reader that stops now and
/// then: the server holds no more than over a plain connection (rustls
/// holds at most its own cap besides).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_of_100_mib_over_tls_keeps_the_server_bounded() {
    let pki = Pki::new("big CA");
    let server = start(
        tls_config(&pki.server("server")),
        pajamax::Server::builder().workers(1),
    );
    let channel = connect_trusting(server.local_addr(), &pki).await;
    streams::read_100_mib_slowly_within_bounds(&server, channel).await;
    common::stop(server).await;
}

/// A client that shuts its sending half right after its requests, with no
/// close_notify (a TCP FIN only), still gets the answers it asked for, as
/// over a plain connection: a server stream and large unary answers.
#[test]
fn answers_asked_for_right_before_a_bare_fin_all_arrive() {
    let pki = Pki::new("fin CA");
    let server = start(
        tls_config(&pki.server("localhost")),
        pajamax::Server::builder().max_pending_output(256 << 10),
    );
    let addr = server.local_addr();
    let ca = pki.ca_pem();
    let ask = Ask {
        count: 3000,
        size: 1000,
        ..Ask::default()
    }
    .encode_to_vec();
    for method in ["Count", "CountThread"] {
        let heard = ask_then_fin_without_close_notify(
            addr,
            &ca,
            |h2| h2.request(1, &format!("/test.Streams/{method}"), &ask),
            Duration::from_millis(300),
        );
        assert_eq!(heard.statuses, [(1, "0".to_string())], "{method}");
        assert_eq!(heard.messages_on(1).len(), 3000, "{method}");
    }
    let echo = common::ProbeRequest {
        text: "big".into(),
        reply_size: 500_000,
        ..Default::default()
    }
    .encode_to_vec();
    let heard = ask_then_fin_without_close_notify(
        addr,
        &ca,
        |h2| {
            let mut bytes = Vec::new();
            for i in 0..40 {
                bytes.extend(h2.request(2 * i + 1, "/test.Probe/Echo", &echo));
            }
            bytes
        },
        Duration::from_millis(500),
    );
    assert_eq!(heard.statuses.len(), 40, "{} bytes", heard.data_bytes);
    assert!(heard.statuses.iter().all(|(_, status)| status == "0"));
    server.shutdown();
}

/// A raw TLS client that has sent the preface with the largest windows.
fn raw_h2_client(
    addr: SocketAddr,
    ca: &str,
) -> (
    rustls::ClientConnection,
    TcpStream,
    pajamax_test_peer::Client,
) {
    let mut client = raw_client(ca, &[b"h2"]);
    let mut socket = raw_handshake(addr, &mut client).expect("TLS handshake");
    let mut bytes = pajamax_test_peer::Client::handshake(&[(4, (1 << 31) - 1)]);
    pajamax_test_peer::frame::Frame::window_update(0, (1 << 31) - 1 - 65535).write(&mut bytes);
    client.writer().write_all(&bytes).unwrap();
    while client.wants_write() {
        client.write_tls(&mut socket).unwrap();
    }
    (client, socket, pajamax_test_peer::Client::new())
}

/// Reads from a raw TLS client until `done` or 20 s.
fn raw_listen(
    client: &mut rustls::ClientConnection,
    socket: &mut TcpStream,
    h2: &mut pajamax_test_peer::Client,
    done: impl Fn(&pajamax_test_peer::Heard) -> bool,
) {
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = vec![0; 64 << 10];
    while !done(h2.heard()) {
        match client.read_tls(socket) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let state = client.process_new_packets().expect("TLS from the server");
        let mut left = state.plaintext_bytes_to_read();
        while left > 0 {
            let n = client.reader().read(&mut buf).unwrap();
            h2.receive(&buf[..n]).unwrap();
            left -= n;
        }
        if state.peer_has_closed() {
            break;
        }
    }
}

/// Many requests sent at once over TLS whose answers pass
/// `max_pending_output` many times over, to a client that does not read
/// for a while: reading pauses and resumes, and every call is answered.
#[test]
fn pipelined_calls_over_tls_past_the_pending_output_all_get_answers() {
    let pki = Pki::new("pause CA");
    let server = start(
        tls_config(&pki.server("localhost")),
        pajamax::Server::builder().max_pending_output(64 << 10),
    );
    let (mut client, mut socket, mut h2) = raw_h2_client(server.local_addr(), &pki.ca_pem());
    let echo = common::ProbeRequest {
        text: "big".into(),
        reply_size: 100_000,
        ..Default::default()
    }
    .encode_to_vec();
    let calls = 300;
    for i in 0..calls {
        let bytes = h2.request(2 * i + 1, "/test.Probe/Echo", &echo);
        client.writer().write_all(&bytes).unwrap();
    }
    // Written from a thread: the server stops reading before it has all.
    socket.set_nonblocking(false).unwrap();
    let mut ciphertext = Vec::new();
    while client.wants_write() {
        client.write_tls(&mut ciphertext).unwrap();
    }
    let mut writer = socket.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&ciphertext).unwrap());
    std::thread::sleep(Duration::from_millis(500));
    raw_listen(&mut client, &mut socket, &mut h2, |heard| {
        heard.statuses.len() == calls as usize
    });
    sender.join().unwrap();
    let heard = h2.take_heard();
    assert_eq!(
        heard.statuses.len(),
        calls as usize,
        "{} bytes",
        heard.data_bytes
    );
    assert!(heard.statuses.iter().all(|(_, status)| status == "0"));
    drop(socket);
    server.shutdown();
}

/// A client stream whose bytes come one per TLS record: all arrive, and
/// the answer counts them.
#[test]
fn a_request_in_tiny_tls_records_is_read_whole() {
    let pki = Pki::new("tiny CA");
    let server = start_signed_by(&pki, "localhost");
    let (mut client, mut socket, mut h2) = raw_h2_client(server.local_addr(), &pki.ca_pem());
    let echo = common::ProbeRequest {
        text: "tiny".into(),
        // One DATA frame: within the default largest frame.
        blob: vec![7; 16_000],
        ..Default::default()
    }
    .encode_to_vec();
    let bytes = h2.request(1, "/test.Probe/Echo", &echo);
    let mut ciphertext = Vec::new();
    for byte in &bytes {
        client
            .writer()
            .write_all(std::slice::from_ref(byte))
            .unwrap();
        while client.wants_write() {
            client.write_tls(&mut ciphertext).unwrap();
        }
    }
    let mut writer = socket.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&ciphertext).unwrap());
    raw_listen(&mut client, &mut socket, &mut h2, |heard| {
        heard.status(1).is_some()
    });
    sender.join().unwrap();
    let heard = h2.take_heard();
    assert_eq!(heard.status(1), Some("0"), "{heard:?}");
    let reply = ProbeReply::decode(heard.messages_on(1)[0]).unwrap();
    assert_eq!(reply.received, 16_000);
    drop(socket);
    server.shutdown();
}

/// A client that asks for more than its windows let out and then sends
/// its FIN (no close_notify) can no longer open them: over TLS as over a
/// plain connection, it gets the windows' worth of the stream and the
/// server closes the connection, rather than holding the rest for good.
#[test]
fn a_call_stuck_on_windows_ends_at_a_bare_fin_over_tls() {
    let pki = Pki::new("stuck CA");
    let server = start_signed_by(&pki, "localhost");
    let ask = Ask {
        count: 3000,
        size: 1000,
        ..Ask::default()
    }
    .encode_to_vec();
    for method in ["Count", "CountThread"] {
        let mut client = raw_client(&pki.ca_pem(), &[b"h2"]);
        let mut socket = raw_handshake(server.local_addr(), &mut client).expect("handshake");
        let mut h2 = pajamax_test_peer::Client::new();
        let mut bytes = pajamax_test_peer::Client::handshake(&[(4, 10_000)]);
        bytes.extend(h2.request(1, &format!("/test.Streams/{method}"), &ask));
        client.writer().write_all(&bytes).unwrap();
        while client.wants_write() {
            client.write_tls(&mut socket).unwrap();
        }
        socket.shutdown(std::net::Shutdown::Write).unwrap();
        let started = Instant::now();
        raw_listen(&mut client, &mut socket, &mut h2, |_| false);
        let heard = h2.take_heard();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{method}: the server held the connection"
        );
        assert!(heard.status(1).is_none(), "{method}: {heard:?}");
        assert_eq!(heard.data_bytes, 10_000, "{method}");
    }
    server.shutdown();
}

/// A graceful shutdown while a server stream goes to a client that reads
/// slowly over TLS: the stream ends at the end of the grace period, and
/// the server closes the connection (close_notify after its last frames).
#[test]
fn a_shutdown_ends_a_tls_stream_to_a_slow_reader() {
    let pki = Pki::new("grace CA");
    let server = start(
        tls_config(&pki.server("localhost")),
        pajamax::Server::builder().shutdown_grace(Duration::from_millis(300)),
    );
    let ask = Ask {
        endless: true,
        size: 16 << 10,
        ..Ask::default()
    }
    .encode_to_vec();
    let (mut client, mut socket, mut h2) = raw_h2_client(server.local_addr(), &pki.ca_pem());
    let bytes = h2.request(1, "/test.Streams/Count", &ask);
    client.writer().write_all(&bytes).unwrap();
    while client.wants_write() {
        client.write_tls(&mut socket).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let stopper = std::thread::spawn(move || server.shutdown());
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = Instant::now();
    let mut buf = vec![0; 64 << 10];
    let mut close_notify = false;
    loop {
        match client.read_tls(&mut socket) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(state) = client.process_new_packets() else {
            break;
        };
        let mut left = state.plaintext_bytes_to_read();
        while left > 0 {
            let n = client.reader().read(&mut buf).unwrap();
            h2.receive(&buf[..n]).unwrap();
            left -= n;
        }
        if state.peer_has_closed() {
            close_notify = true;
            break;
        }
        // A slow reader.
        std::thread::sleep(Duration::from_millis(2));
    }
    let heard = h2.take_heard();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(heard.goaway.is_some(), "no GOAWAY");
    assert!(
        close_notify,
        "closed without close_notify: {:?}",
        heard.goaway
    );
    stopper.join().unwrap();
}
