//! How factbuoy reaches a registry: credentials and certificate authorities, found where
//! podman, skopeo and docker keep them so that a `podman login` or a mounted pull Secret is all
//! a user has to do.
//!
//! - Credentials: the `--authfile` given, else the first of `$REGISTRY_AUTH_FILE`,
//!   `$XDG_RUNTIME_DIR/containers/auth.json`, `~/.config/containers/auth.json` and
//!   `$DOCKER_CONFIG/config.json` (`~/.docker/config.json`) that has an entry for the registry
//!   (containers-auth.json(5)); credential helpers named there are run as docker runs them.
//!   No entry means anonymous access.
//! - Certificate authorities: every `*.crt` in the `--cert-dir` given, else in
//!   `/etc/containers/certs.d/HOST[:PORT]/` and `/etc/docker/certs.d/HOST[:PORT]/`
//!   (containers-certs.d(5)), trusted besides the system's roots.

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::Client;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;

use crate::RegistryError;

/// Where to find a registry's credentials and certificate authorities.
#[derive(Debug, Clone)]
pub struct RegistryAccess {
    /// An auth file (containers-auth.json(5), docker's config.json or a pull Secret's
    /// `.dockerconfigjson`) to read instead of the usual ones.
    pub auth_file: Option<PathBuf>,
    /// A directory of `*.crt` certificate authorities to trust instead of the usual ones.
    pub cert_dir: Option<PathBuf>,
    /// Whether to require HTTPS with a verified certificate; `false` also allows plain HTTP,
    /// as `skopeo --tls-verify=false` does.
    pub tls_verify: bool,
    /// Public keys (PEM) one of which must have signed every plugin pulled
    /// ([`crate::signature`]); none: signatures are not checked.
    pub require_signature: Vec<PathBuf>,
}

impl Default for RegistryAccess {
    fn default() -> Self {
        RegistryAccess {
            auth_file: None,
            cert_dir: None,
            tls_verify: true,
            require_signature: Vec::new(),
        }
    }
}

/// How long connecting to a registry may take before the pull or push fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a registry may send nothing in the middle of a response.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

impl RegistryAccess {
    /// A client for `registry` (HOST[:PORT]) that trusts its certificate authorities.
    pub(crate) fn client(&self, registry: &str) -> Result<Client, RegistryError> {
        // reqwest is built without a crypto provider of its own: use ring, as the rest of
        // factbuoy does. Installing fails only when one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let extra_root_certificates = self.certificates(registry)?;
        let config = ClientConfig {
            protocol: if self.tls_verify {
                ClientProtocol::Https
            } else {
                ClientProtocol::HttpsExcept(vec![registry.to_owned()])
            },
            accept_invalid_certificates: !self.tls_verify,
            extra_root_certificates,
            // A plugin artifact is never an image index of platforms.
            platform_resolver: None,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            user_agent: concat!("factbuoy/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        // oci-client builds a default HTTP client beside the configured one, which panics when
        // the system has no CA certificates at all: say so instead.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Client::try_from(config))) {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(RegistryError::Setup {
                path: PathBuf::from(registry),
                reason: format!("cannot set up a client: {e}"),
            }),
            Err(_) => Err(RegistryError::Setup {
                path: PathBuf::from("/etc/ssl/certs"),
                reason: "no CA certificates were found on this system, which the registry client \
                         needs: install the ca-certificates package (or set SSL_CERT_FILE)"
                    .to_owned(),
            }),
        }
    }

    /// A docker config (what a pull Secret's `.dockerconfigjson` holds) with the user name and
    /// password for each of `registries` that has them; `None` when none has.
    pub fn docker_config<'a>(
        &self,
        registries: impl IntoIterator<Item = &'a str>,
    ) -> Result<Option<Vec<u8>>, RegistryError> {
        use base64::Engine;
        let mut auths = serde_json::Map::new();
        for registry in registries {
            match self.credentials(registry)? {
                RegistryAuth::Basic(user, password) => {
                    let auth = base64::engine::general_purpose::STANDARD
                        .encode(format!("{user}:{password}"));
                    auths.insert(registry.to_owned(), serde_json::json!({ "auth": auth }));
                }
                RegistryAuth::Bearer(_) => tracing::warn!(
                    "the credentials for {registry} are an identity token, which a pull Secret \
                     cannot carry; the cluster pulls from it anonymously"
                ),
                RegistryAuth::Anonymous => {}
            }
        }
        Ok((!auths.is_empty())
            .then(|| serde_json::to_vec(&serde_json::json!({ "auths": auths })).expect("JSON")))
    }

    /// The certificate authorities (PEM) trusted for `registries` besides the system's: what
    /// the cert dir holds; `None` when there are none.
    pub fn ca_pem<'a>(
        &self,
        registries: impl IntoIterator<Item = &'a str>,
    ) -> Result<Option<String>, RegistryError> {
        let mut pem = String::new();
        for registry in registries {
            for certificate in self.certificates(registry)? {
                let text = String::from_utf8_lossy(&certificate.data);
                if !pem.contains(text.trim()) {
                    pem.push_str(text.trim());
                    pem.push('\n');
                }
            }
        }
        Ok((!pem.is_empty()).then_some(pem))
    }

    /// The CA certificates of `--cert-dir`, else of `registry`'s directories in certs.d.
    fn certificates(&self, registry: &str) -> Result<Vec<Certificate>, RegistryError> {
        match &self.cert_dir {
            Some(dir) => certificates_in(dir, true),
            None => {
                let mut found = Vec::new();
                for base in ["/etc/containers/certs.d", "/etc/docker/certs.d"] {
                    found.extend(certificates_in(&Path::new(base).join(registry), false)?);
                }
                Ok(found)
            }
        }
    }

    /// The credentials for `registry`, or anonymous access when no auth file has any.
    pub(crate) fn credentials(&self, registry: &str) -> Result<RegistryAuth, RegistryError> {
        let files = match &self.auth_file {
            Some(file) => {
                if !file.is_file() {
                    return Err(RegistryError::Setup {
                        path: file.clone(),
                        reason: "no such auth file".to_owned(),
                    });
                }
                vec![file.clone()]
            }
            None => usual_auth_files(),
        };
        for file in files.iter().filter(|f| f.is_file()) {
            let setup = |reason: String| RegistryError::Setup {
                path: file.clone(),
                reason,
            };
            let reader = std::fs::File::open(file).map_err(|e| setup(e.to_string()))?;
            match docker_credential::get_credential_from_reader(reader, registry) {
                Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
                    return Ok(RegistryAuth::Basic(user, password));
                }
                Ok(docker_credential::DockerCredential::IdentityToken(token)) => {
                    return Ok(RegistryAuth::Bearer(token));
                }
                Err(docker_credential::CredentialRetrievalError::NoCredentialConfigured) => {}
                Err(e) => {
                    return Err(setup(format!("the credentials for {registry}: {e:?}")));
                }
            }
        }
        Ok(RegistryAuth::Anonymous)
    }
}

/// containers-auth.json(5)'s search order, then docker's file.
fn usual_auth_files() -> Vec<PathBuf> {
    let env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let mut files = Vec::new();
    files.extend(env("REGISTRY_AUTH_FILE"));
    files.extend(env("XDG_RUNTIME_DIR").map(|d| d.join("containers/auth.json")));
    let home = env("HOME");
    files.extend(
        home.as_ref()
            .map(|h| h.join(".config/containers/auth.json")),
    );
    files.extend(
        env("DOCKER_CONFIG")
            .or_else(|| home.map(|h| h.join(".docker")))
            .map(|d| d.join("config.json")),
    );
    files
}

/// The PEM certificates of every `*.crt` file in `dir`; a missing directory has none unless it
/// was named by the user (`required`).
fn certificates_in(dir: &Path, required: bool) -> Result<Vec<Certificate>, RegistryError> {
    let setup = |reason: String| RegistryError::Setup {
        path: dir.to_owned(),
        reason,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(Vec::new()),
        Err(e) => return Err(setup(e.to_string())),
    };
    let mut certificates = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| setup(e.to_string()))?.path();
        if path.extension().is_some_and(|e| e == "crt") {
            let data = std::fs::read(&path).map_err(|error| RegistryError::Io {
                path: path.clone(),
                error,
            })?;
            certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
    }
    Ok(certificates)
}

/// A shared client and the credentials for one registry, made once per push or pull.
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) auth: RegistryAuth,
}

impl Session {
    pub(crate) fn open(access: &RegistryAccess, registry: &str) -> Result<Self, RegistryError> {
        Ok(Session {
            client: access.client(registry)?,
            auth: access.credentials(registry)?,
        })
    }
}
