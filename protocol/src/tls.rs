//! rustls configurations from PEM files: a client that trusts only the run's CA and presents its
//! own certificate.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why an identity's PEM material could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file, as displayed.
        path: String,
        /// What reading it returned.
        source: std::io::Error,
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
                source,
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
