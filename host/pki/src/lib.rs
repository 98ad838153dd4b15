//! The run's own certificate authority: ECDSA P-256, created for each run so that overlapping
//! runs cannot interfere, and persisted in the run directory so that a restarted aggregator can
//! keep signing with it.
//!
//! Client certificates carry their role (agent for one node, operator, global uploader) as a URI
//! subject alternative name; see [`factbuoy_protocol::identity`]. Private keys are written 0600
//! and never logged.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use factbuoy_protocol::identity::Role;
use factbuoy_protocol::tls::{self, Identity};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use rustls::server::WebPkiClientVerifier;
use time::{Duration, OffsetDateTime};

/// How long certificates of a run stay valid: longer than any run should last.
pub const VALIDITY: Duration = Duration::days(30);
/// Tolerated clock skew between the aggregator and agents.
const CLOCK_SKEW: Duration = Duration::minutes(5);

/// Why a certificate could not be made, saved, loaded or turned into a TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen could not generate a key or sign a certificate, or refused a name.
    #[error("generating a certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// A PEM file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the file system returned.
        source: std::io::Error,
    },
    /// PEM text held no certificate or key.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// rustls refused a certificate or key.
    #[error("building the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// rustls could not build the verifier of client certificates.
    #[error("building the client verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// A certificate and its private key, PEM-encoded.
#[derive(Clone)]
pub struct Issued {
    /// The certificate, signed by the run's CA.
    pub cert_pem: String,
    /// Its private key (PKCS#8); secret, never logged.
    pub key_pem: String,
}

impl Issued {
    /// Writes `<name>.pem` and `<name>.key` (0600) into `dir`.
    pub fn save(&self, dir: &Path, name: &str) -> Result<(), PkiError> {
        write_public(&dir.join(format!("{name}.pem")), &self.cert_pem)?;
        write_private(&dir.join(format!("{name}.key")), &self.key_pem)
    }

    /// Reads what [`Issued::save`] wrote.
    pub fn load(dir: &Path, name: &str) -> Result<Self, PkiError> {
        Ok(Issued {
            cert_pem: read(&dir.join(format!("{name}.pem")))?,
            key_pem: read(&dir.join(format!("{name}.key")))?,
        })
    }
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Issued { key: <redacted> }")
    }
}

/// The run's CA.
pub struct RunCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca_params(run_id: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, format!("factbuoy run {run_id} CA"));
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

fn validity(params: &mut CertificateParams) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - CLOCK_SKEW;
    params.not_after = now + VALIDITY;
}

impl RunCa {
    /// A new CA for run `run_id`, valid for [`VALIDITY`]; in memory until [`RunCa::save`].
    pub fn create(run_id: &str) -> Result<Self, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = ca_params(run_id);
        validity(&mut params);
        let cert = params.self_signed(&key)?;
        Ok(RunCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(ca_params(run_id), key),
        })
    }

    /// Loads the CA saved by [`RunCa::save`].
    pub fn load(dir: &Path, run_id: &str) -> Result<Self, PkiError> {
        let cert_pem = read(&dir.join("ca.pem"))?;
        let key = KeyPair::from_pem(&read(&dir.join("ca.key"))?)?;
        Ok(RunCa {
            cert_pem,
            issuer: Issuer::new(ca_params(run_id), key),
        })
    }

    /// Writes `ca.pem` and `ca.key` (0600) into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), PkiError> {
        write_public(&dir.join("ca.pem"), &self.cert_pem)?;
        write_private(&dir.join("ca.key"), &self.issuer.key().serialize_pem())
    }

    /// The CA certificate, PEM: the only certificate either side of the run trusts.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A server certificate for the names and addresses clients dial.
    pub fn issue_server(&self, names: &[String]) -> Result<Issued, PkiError> {
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "factbuoy aggregator");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate for `role`.
    pub fn issue_client(&self, role: &Role) -> Result<Issued, PkiError> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, role.to_string());
        params.subject_alt_names = vec![SanType::URI(role.uri().try_into()?)];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, mut params: CertificateParams) -> Result<Issued, PkiError> {
        validity(&mut params);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The identity a client with `issued` uses.
    pub fn identity(&self, issued: &Issued) -> Identity {
        Identity {
            ca_pem: self.cert_pem.clone(),
            cert_pem: issued.cert_pem.clone(),
            key_pem: issued.key_pem.clone(),
        }
    }

    /// A server configuration that requires a client certificate signed by this CA.
    pub fn server_config(&self, server: &Issued) -> Result<Arc<rustls::ServerConfig>, PkiError> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in tls::certificates(&self.cert_pem, "CA certificate")? {
            roots.add(ca)?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), tls::provider())
                .build()?;
        let config = rustls::ServerConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                tls::certificates(&server.cert_pem, "server certificate")?,
                tls::private_key(&server.key_pem, "server key")?,
            )?;
        Ok(Arc::new(config))
    }
}

/// The role in a client certificate (DER), if it carries exactly one factbuoy role.
pub fn role_of(der: &[u8]) -> Option<Role> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let san = cert.subject_alternative_name().ok()??;
    let mut roles = san
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            x509_parser::extensions::GeneralName::URI(uri) => Role::from_uri(uri),
            _ => None,
        });
    let role = roles.next()?;
    roles.next().is_none().then_some(role)
}

fn read(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(|source| PkiError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Writes a file readable by its owner only (private keys, state with key paths).
pub fn write_private(path: &Path, contents: &str) -> Result<(), PkiError> {
    write_with_mode(path, contents, 0o600)
}

fn write_public(path: &Path, contents: &str) -> Result<(), PkiError> {
    write_with_mode(path, contents, 0o644)
}

fn write_with_mode(path: &Path, contents: &str, mode: u32) -> Result<(), PkiError> {
    let io = |source| PkiError::Io {
        path: path.to_owned(),
        source,
    };
    // Written beside the target, then renamed: a reader never sees a partial key.
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&temporary)
        .map_err(io)?;
    file.write_all(contents.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&temporary, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn client_certificates_carry_their_role() {
        let ca = RunCa::create("test").unwrap();
        let role = Role::Agent {
            node: factbuoy_protocol::names::NodeName::parse("node-1").unwrap(),
        };
        let issued = ca.issue_client(&role).unwrap();
        let der = tls::certificates(&issued.cert_pem, "cert").unwrap();
        assert_eq!(role_of(&der[0]), Some(role));
        let server = ca
            .issue_server(&["localhost".into(), "127.0.0.1".into()])
            .unwrap();
        let der = tls::certificates(&server.cert_pem, "cert").unwrap();
        assert_eq!(role_of(&der[0]), None);
        assert!(ca.server_config(&server).is_ok());
    }

    #[test]
    fn a_reloaded_ca_signs_certificates_that_chain_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let ca = RunCa::create("run1").unwrap();
        ca.save(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join("ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let reloaded = RunCa::load(dir.path(), "run1").unwrap();
        let issued = reloaded
            .issue_client(&Role::Operator { name: "cli".into() })
            .unwrap();
        // The verifier built from the original CA accepts the reloaded CA's certificate.
        let verifier_roots = {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(tls::certificates(ca.cert_pem(), "ca").unwrap().remove(0))
                .unwrap();
            roots
        };
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(verifier_roots), tls::provider())
                .build()
                .unwrap();
        let cert = tls::certificates(&issued.cert_pem, "cert")
            .unwrap()
            .remove(0);
        let now = rustls::pki_types::UnixTime::now();
        assert!(verifier.verify_client_cert(&cert, &[], now).is_ok());
        assert!(format!("{issued:?}").contains("redacted"));
    }
}
