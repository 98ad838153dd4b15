//! rustls configurations from PEM files: a client that trusts only the run's CA and presents its
//! own certificate, or one that trusts a CA by its pin (how an agent joining a fleet trusts the
//! fleet before it holds any certificate).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

/// Why an identity's PEM material could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// The file, as displayed.
        path: String,
        /// What reading it returned.
        error: std::io::Error,
    },
    /// The PEM text holds no certificate; the string says which PEM (`CA certificate`, ...).
    #[error("{0}: no certificate found in the PEM file")]
    NoCertificate(String),
    /// The PEM text holds no private key; the string says which PEM.
    #[error("{0}: no private key found in the PEM file")]
    NoKey(String),
    /// rustls refused the certificates or key.
    #[error("building the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The PEM material of one identity: the CA to trust, our certificate and our key.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The run's CA certificate, the only one trusted to sign the peer's certificate.
    pub ca_pem: String,
    /// Our certificate (with any chain), presented to the peer.
    pub cert_pem: String,
    /// The private key of `cert_pem`.
    pub key_pem: String,
}

impl Identity {
    /// Reads the three PEM files: the CA certificate, our certificate and our key.
    pub fn from_files(ca: &Path, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| TlsError::Read {
                path: path.display().to_string(),
                error: source,
            })
        };
        Ok(Identity {
            ca_pem: read(ca)?,
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        })
    }
}

/// Every certificate in `pem`, in order; `what` names the PEM in the error when there is none.
pub fn certificates(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_bytes())
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(what.to_owned()));
    }
    Ok(certs)
}

/// The first private key in `pem` (PKCS#8, PKCS#1 or SEC1); `what` names the PEM in the error
/// when there is none.
pub fn private_key(pem: &str, what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut pem.as_bytes())
        .ok()
        .flatten()
        .ok_or_else(|| TlsError::NoKey(what.to_owned()))
}

/// The ring-based provider, fixed so that no process-wide default is needed.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client configuration that trusts only `ca_pem` and presents no certificate (to enroll).
pub fn anonymous_client_config(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in certificates(ca_pem, "CA certificate")? {
        roots.add(ca)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A client configuration: trusts only `identity.ca_pem`, presents `identity`'s certificate.
pub fn client_config(identity: &Identity) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in certificates(&identity.ca_pem, "CA certificate")? {
        roots.add(ca)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(
            certificates(&identity.cert_pem, "client certificate")?,
            private_key(&identity.key_pem, "client key")?,
        )?;
    Ok(Arc::new(config))
}

/// The pin of a CA certificate (PEM): `sha256:` and the hex SHA-256 of its DER
/// SubjectPublicKeyInfo, as `kubeadm join --discovery-token-ca-cert-hash` pins a cluster's CA.
pub fn ca_pin(ca_pem: &str) -> Result<String, TlsError> {
    let der = certificates(ca_pem, "CA certificate")?.remove(0);
    pin_of_der(&der).ok_or_else(|| TlsError::NoCertificate("CA certificate".into()))
}

/// The pin of a DER certificate, `None` if it does not parse.
fn pin_of_der(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(format!(
        "sha256:{}",
        hex(&Sha256::digest(cert.public_key().raw))
    ))
}

/// Whether `pin` is written as [`ca_pin`] writes one.
pub fn is_pin(pin: &str) -> bool {
    pin.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A client configuration for joining a fleet: presents no certificate, and trusts a server
/// whose certificate chain holds a CA with SubjectPublicKeyInfo pin `pin` (see
/// [`ca_pin`]) that signed the server's certificate for the name dialled. This is
/// how an agent trusts the aggregator before it has any certificate of its own.
pub fn pinned_client_config(pin: &str) -> Arc<rustls::ClientConfig> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedCa {
            pin: pin.to_owned(),
            provider: provider(),
        }))
        .with_no_client_auth();
    Arc::new(config)
}

/// Verifies a server against the CA its chain carries, once that CA matches the pin.
#[derive(Debug)]
struct PinnedCa {
    pin: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for PinnedCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let pinned = intermediates
            .iter()
            .find(|ca| pin_of_der(ca).as_deref() == Some(self.pin.as_str()))
            .ok_or_else(|| {
                rustls::Error::General(format!(
                    "the server's CA does not match the pin {} (its chain holds no such CA): this \
                     is not the aggregator the token was made for, or the pin was mistyped",
                    self.pin
                ))
            })?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pinned.clone().into_owned())?;
        let others: Vec<CertificateDer<'_>> = intermediates
            .iter()
            .filter(|c| *c != pinned)
            .cloned()
            .collect();
        rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            self.provider.clone(),
        )
        .build()
        .map_err(|e| rustls::Error::General(e.to_string()))?
        .verify_server_cert(end_entity, &others, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
