//! TLS for a server (cargo feature `tls`): its certificate and key, the
//! CAs that client certificates must chain to, and the handle that
//! replaces them on a running server.
//!
//! rustls does the TLS, on the `ring` crypto provider: no OpenSSL. The
//! server speaks HTTP/2 only, so ALPN offers `h2` alone; `docs/tls.md` in
//! the repository tells how the runtime drives a TLS connection.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, RwLock};

/// The one application protocol a client may ask for.
const H2: &[u8] = b"h2";

/// A server's TLS settings: its certificate chain and private key and,
/// for mutual TLS, the CAs that client certificates must chain to.
///
/// Made from PEM (certificates in `CERTIFICATE` sections, the key in a
/// PKCS#8, PKCS#1 or SEC1 section), checked when it is made: a key that
/// does not match the certificate is an error here, not at the first
/// connection. Give it to [`Builder::tls`](crate::Builder::tls); replace
/// it on a running server with [`ServerHandle::reload_tls`](
/// crate::ServerHandle::reload_tls).
///
/// ```no_run
/// use pajamax::TlsConfig;
///
/// # fn main() -> std::io::Result<()> {
/// // Server authentication only: any client that trusts the server's CA.
/// let tls = TlsConfig::from_pem_files("server.pem", "server.key")?;
///
/// // Mutual TLS: clients must present a certificate issued by `clients-ca.pem`.
/// let mtls = TlsConfig::from_pem_files("server.pem", "server.key")?
///     .client_ca_file("clients-ca.pem")?;
/// # let _ = (tls, mtls);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TlsConfig {
    key: Arc<CertifiedKey>,
    client_roots: Option<Arc<RootCertStore>>,
    client_auth_optional: bool,
}

impl TlsConfig {
    /// The server's certificate chain (its own certificate first, then the
    /// intermediates) and its private key, both PEM.
    ///
    /// Fails with `InvalidData` if a PEM section is malformed, if there is
    /// no certificate or no key, or if the key does not belong to the
    /// first certificate.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> io::Result<TlsConfig> {
        let chain = certificates(cert_chain, "the certificate chain")?;
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|err| invalid(format!("the private key: {err}")))?;
        let key = CertifiedKey::from_der(chain, key, &provider())
            .map_err(|err| invalid(format!("the certificate and key: {err}")))?;
        Ok(TlsConfig {
            key: Arc::new(key),
            client_roots: None,
            client_auth_optional: false,
        })
    }

    /// [`TlsConfig::from_pem`] on the contents of two files; an error names
    /// the file.
    pub fn from_pem_files(
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> io::Result<TlsConfig> {
        let (cert_chain, key) = (cert_chain.as_ref(), key.as_ref());
        TlsConfig::from_pem(&read(cert_chain)?, &read(key)?).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("{} / {}: {err}", cert_chain.display(), key.display()),
            )
        })
    }

    /// Requires every client to present a certificate that chains to one
    /// of the CA certificates in `pem` (mutual TLS); a client without one
    /// fails the handshake. The chain the client presented is then
    /// available to handlers as
    /// [`Context::peer_certificates`](crate::Context::peer_certificates).
    ///
    /// Fails with `InvalidData` if `pem` holds no certificate, or one that
    /// does not parse as an X.509 certificate. A certificate that parses is
    /// trusted as it is, whether or not it is marked as a CA: it is not
    /// checked for a CA's basic constraints or key usage.
    pub fn client_ca_pem(mut self, pem: &[u8]) -> io::Result<TlsConfig> {
        let mut roots = RootCertStore::empty();
        for cert in certificates(pem, "the client CA certificates")? {
            roots
                .add(cert)
                .map_err(|err| invalid(format!("a client CA certificate: {err}")))?;
        }
        self.client_roots = Some(Arc::new(roots));
        Ok(self)
    }

    /// [`TlsConfig::client_ca_pem`] on the contents of a file; an error
    /// names the file.
    pub fn client_ca_file(self, path: impl AsRef<Path>) -> io::Result<TlsConfig> {
        let path = path.as_ref();
        let pem = read(path)?;
        self.client_ca_pem(&pem)
            .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
    }

    /// With client CAs set: also accepts clients that present no
    /// certificate (a certificate presented is still verified). Their
    /// calls see no [`peer_certificates`](crate::Context::peer_certificates),
    /// so handlers can tell. Default: `false`, a certificate is required.
    pub fn client_auth_optional(mut self, optional: bool) -> TlsConfig {
        self.client_auth_optional = optional;
        self
    }

    /// The rustls configuration new connections are made with.
    pub(crate) fn server_config(&self) -> io::Result<Arc<ServerConfig>> {
        let provider = Arc::new(provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|err| invalid(format!("TLS versions: {err}")))?;
        let builder = match &self.client_roots {
            None => builder.with_no_client_auth(),
            Some(roots) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider);
                let verifier = if self.client_auth_optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|err| invalid(format!("the client CA certificates: {err}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(Arc::new(H2Only(self.key.clone())));
        config.alpn_protocols = vec![H2.to_vec()];
        Ok(Arc::new(config))
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of logs.
        f.debug_struct("TlsConfig")
            .field("certificates", &self.key.cert.len())
            .field("client_auth", &self.client_roots.is_some())
            .field("client_auth_optional", &self.client_auth_optional)
            .finish()
    }
}

/// Replaces the TLS settings of a running server, from any thread:
/// connections accepted afterwards use the new certificate (and client
/// CAs); connections already open keep the ones they were made with.
/// Cloning it gives another handle to the same server. Made by
/// [`ServerHandle::tls_reloader`](crate::ServerHandle::tls_reloader).
///
/// ```no_run
/// # fn reload_on_demand(server: &pajamax::ServerHandle) -> std::io::Result<()> {
/// let reloader = server.tls_reloader().expect("the server was started with TLS");
/// std::thread::spawn(move || {
///     // ... when the certificate files have been renewed:
///     match pajamax::TlsConfig::from_pem_files("server.pem", "server.key")
///         .and_then(|config| reloader.reload(&config))
///     {
///         Ok(()) => eprintln!("new certificate in use"),
///         // The server goes on with the certificate it had.
///         Err(err) => eprintln!("certificate not replaced: {err}"),
///     }
/// });
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TlsReloader {
    current: Arc<RwLock<Arc<ServerConfig>>>,
}

impl TlsReloader {
    /// A handle over the configuration made from `config`.
    pub(crate) fn new(config: &TlsConfig) -> io::Result<TlsReloader> {
        Ok(TlsReloader {
            current: Arc::new(RwLock::new(config.server_config()?)),
        })
    }

    /// Uses `config` for the connections accepted from now on. On an error
    /// the server keeps the settings it had.
    pub fn reload(&self, config: &TlsConfig) -> io::Result<()> {
        let next = config.server_config()?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }

    /// The configuration for a connection accepted now.
    pub(crate) fn current(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl fmt::Debug for TlsReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsReloader").finish_non_exhaustive()
    }
}

/// Hands out the server's certificate only to clients that use ALPN.
///
/// rustls itself refuses a client whose ALPN list lacks `h2` (alert
/// `no_application_protocol`), but lets through one that sends no ALPN
/// at all, which would then speak HTTP/1.1 to an HTTP/2 server: such a
/// client gets no certificate, so its handshake fails (alert
/// `access_denied`) before any application data.
#[derive(Debug)]
struct H2Only(Arc<CertifiedKey>);

impl ResolvesServerCert for H2Only {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if hello.alpn().is_none() {
            log::debug!("TLS client refused: it offers no ALPN protocol (h2 required)");
            return None;
        }
        Some(self.0.clone())
    }
}

/// The crypto provider every configuration is made with: ring, chosen
/// here rather than process-wide.
fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// Every certificate in `pem`; at least one.
fn certificates(pem: &[u8], what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| invalid(format!("{what}: {err}")))?;
    if certs.is_empty() {
        return Err(invalid(format!("{what}: no CERTIFICATE section found")));
    }
    Ok(certs)
}

fn read(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
