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
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256, SanType,
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
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the file system returned.
        error: std::io::Error,
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
    /// A certificate signing request was not PEM, not a CSR, had a broken self-signature or
    /// asked for an extension this CA does not read.
    #[error(
        "the certificate signing request is unusable: {0}; send one PEM `CERTIFICATE REQUEST` signed with its own key"
    )]
    BadRequest(rcgen::Error),
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

fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

fn validity(params: &mut CertificateParams) {
    valid_for(params, VALIDITY);
}

fn valid_for(params: &mut CertificateParams, validity: Duration) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - CLOCK_SKEW;
    params.not_after = now + validity;
}

fn run_ca_name(run_id: &str) -> String {
    format!("factbuoy run {run_id} CA")
}

/// The common name of a fleet's enrollment CA ([`RunCa::create_named`]).
pub const FLEET_CA_NAME: &str = "factbuoy fleet CA";

impl RunCa {
    /// A new CA for run `run_id`, valid for [`VALIDITY`]; in memory until [`RunCa::save`].
    pub fn create(run_id: &str) -> Result<Self, PkiError> {
        Self::create_named(&run_ca_name(run_id), VALIDITY)
    }

    /// A new CA whose certificate names `common_name` and is valid for `validity`: a fleet's
    /// enrollment CA ([`FLEET_CA_NAME`]) lives as long as the fleet.
    pub fn create_named(common_name: &str, validity: Duration) -> Result<Self, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = ca_params(common_name);
        valid_for(&mut params, validity);
        let cert = params.self_signed(&key)?;
        Ok(RunCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(ca_params(common_name), key),
        })
    }

    /// Loads the CA saved by [`RunCa::save`].
    pub fn load(dir: &Path, run_id: &str) -> Result<Self, PkiError> {
        Self::load_named(dir, &run_ca_name(run_id))
    }

    /// Loads a CA made by [`RunCa::create_named`] with the same `common_name`.
    pub fn load_named(dir: &Path, common_name: &str) -> Result<Self, PkiError> {
        let cert_pem = read(&dir.join("ca.pem"))?;
        let key = KeyPair::from_pem(&read(&dir.join("ca.key"))?)?;
        Ok(RunCa {
            cert_pem,
            issuer: Issuer::new(ca_params(common_name), key),
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
        self.sign(client_params(role)?)
    }

    /// A client certificate for `role` over the public key of `request`. Nothing else the
    /// request says (subject, alternative names, key usages) is used: the role is the caller's
    /// decision.
    pub fn sign_request(&self, request: &SigningRequest, role: &Role) -> Result<String, PkiError> {
        self.sign_request_for(request, role, VALIDITY)
    }

    /// As [`RunCa::sign_request`], for a certificate valid for `validity`.
    pub fn sign_request_for(
        &self,
        request: &SigningRequest,
        role: &Role,
        validity: Duration,
    ) -> Result<String, PkiError> {
        let mut params = client_params(role)?;
        valid_for(&mut params, validity);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        Ok(params.signed_by(&request.0.public_key, &self.issuer)?.pem())
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
        self.server_config_with(server, ClientTrust::default())
    }

    /// A server configuration that checks a client certificate against this CA, and against
    /// more as `trust` says.
    pub fn server_config_with(
        &self,
        server: &Issued,
        trust: ClientTrust<'_>,
    ) -> Result<Arc<rustls::ServerConfig>, PkiError> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in tls::certificates(&self.cert_pem, "CA certificate")? {
            roots.add(ca)?;
        }
        if let Some(also) = trust.also {
            for ca in tls::certificates(also, "trusted client CA certificate")? {
                roots.add(ca)?;
            }
        }
        let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), tls::provider());
        let verifier = if trust.anonymous {
            builder.allow_unauthenticated().build()?
        } else {
            builder.build()?
        };
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

/// Which clients a server of the run lets finish the TLS handshake, besides those holding a
/// certificate from the run's CA. What each may then do is the server's to decide, by role.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientTrust<'a> {
    /// Clients without a certificate (enrollment: the server must then refuse them every
    /// request but that one).
    pub anonymous: bool,
    /// Clients whose certificate this other CA (PEM) signed: the operator CA of a Kubernetes
    /// run, which never leaves the operator's machine.
    pub also: Option<&'a str>,
}

fn client_params(role: &Role) -> Result<CertificateParams, PkiError> {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, role.to_string());
    params.subject_alt_names = vec![SanType::URI(role.uri().try_into()?)];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

/// A certificate signing request whose self-signature was checked.
pub struct SigningRequest(CertificateSigningRequestParams);

impl SigningRequest {
    /// Parses a PEM `CERTIFICATE REQUEST` and checks its signature against its own key.
    pub fn parse(csr_pem: &str) -> Result<Self, PkiError> {
        CertificateSigningRequestParams::from_pem(csr_pem)
            .map(SigningRequest)
            .map_err(PkiError::BadRequest)
    }
}

/// A private key made where it is used (ECDSA P-256) and a certificate signing request for it:
/// what an agent sends to enroll. The key never leaves the process that made it.
pub struct KeyRequest {
    /// The request, PEM (`CERTIFICATE REQUEST`); it names `subject` as its common name, which
    /// the signer ignores.
    pub csr_pem: String,
    /// The private key, PKCS#8 PEM; secret, never logged.
    pub key_pem: String,
}

impl KeyRequest {
    /// A fresh key and its request naming `subject`.
    pub fn new(subject: &str) -> Result<Self, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, subject.to_owned());
        let csr = params.serialize_request(&key)?;
        Ok(KeyRequest {
            csr_pem: csr.pem()?,
            key_pem: key.serialize_pem(),
        })
    }
}

impl std::fmt::Debug for KeyRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyRequest { key: <redacted> }")
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

/// What a fleet records of a certificate it signed: its fingerprint and expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// Lower-case hex SHA-256 of the certificate's DER.
    pub sha256: String,
    /// When it expires.
    pub not_after: OffsetDateTime,
}

/// The [`Fingerprint`] of a DER certificate, `None` if it does not parse.
pub fn fingerprint(der: &[u8]) -> Option<Fingerprint> {
    use sha2::Digest;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(Fingerprint {
        sha256: sha2::Sha256::digest(der)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        not_after: cert.validity().not_after.to_datetime(),
    })
}

/// The [`Fingerprint`] of the first certificate in `pem`.
pub fn fingerprint_pem(pem: &str) -> Option<Fingerprint> {
    fingerprint(&tls::certificates(pem, "certificate").ok()?[0])
}

fn read(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(|source| PkiError::Io {
        path: path.to_owned(),
        error: source,
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
        error: source,
    };
    // Written beside the target, then renamed: a reader never sees a partial key.
    let temporary = path.with_extension("tmp");
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&temporary)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        // A full disk keeps nothing of a failed write.
        let _ = std::fs::remove_file(&temporary);
    }
    written.map_err(io)
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
    fn a_request_gets_the_role_it_is_given_over_its_own_key_only() {
        let ca = RunCa::create("test").unwrap();
        let node = |n: &str| Role::Agent {
            node: factbuoy_protocol::names::NodeName::parse(n).unwrap(),
        };
        // The request asks for node b, in its subject and as a role URI.
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = client_params(&node("b")).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, "b");
        let csr = params.serialize_request(&key).unwrap().pem().unwrap();
        let cert_pem = ca
            .sign_request(&SigningRequest::parse(&csr).unwrap(), &node("a"))
            .unwrap();
        let der = tls::certificates(&cert_pem, "cert").unwrap().remove(0);
        assert_eq!(role_of(&der), Some(node("a")));
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        use rcgen::PublicKeyData;
        assert_eq!(&*cert.public_key().subject_public_key.data, key.der_bytes());
        // The certificate works with the key that stayed with the requester.
        let identity = Identity {
            ca_pem: ca.cert_pem().to_owned(),
            cert_pem,
            key_pem: key.serialize_pem(),
        };
        assert!(tls::client_config(&identity).is_ok());

        // A request whose signature does not match its contents is refused.
        let request = KeyRequest::new("a").unwrap();
        let forged = flip_in_signature(&request.csr_pem);
        assert!(matches!(
            SigningRequest::parse(&forged),
            Err(PkiError::BadRequest(
                rcgen::Error::InvalidCertificationRequestSignature
            ))
        ));
        assert!(matches!(
            SigningRequest::parse("not a pem"),
            Err(PkiError::BadRequest(_))
        ));
        assert!(SigningRequest::parse(&request.csr_pem).is_ok());
        assert!(format!("{request:?}").contains("redacted"));
    }

    /// `pem` with one base64 character near its end changed: a byte of the signature.
    fn flip_in_signature(pem: &str) -> String {
        let mut lines: Vec<String> = pem.lines().map(str::to_owned).collect();
        let last = lines.len() - 2; // the last line of base64, before the footer
        let mut chars: Vec<char> = lines[last].chars().collect();
        let at = chars.len() - 4;
        chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
        lines[last] = chars.into_iter().collect();
        lines.join("\n")
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
