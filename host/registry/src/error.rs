//! Why a push or a pull failed, in words that say what to do.

/// Why a plugin could not be pushed to or pulled from a registry. Each message names the
/// reference and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The text is not an `oci://` reference.
    #[error(
        "{text:?} is not a plugin reference: {reason}; write oci://REGISTRY/REPOSITORY:TAG or \
         oci://REGISTRY/REPOSITORY@sha256:DIGEST"
    )]
    BadReference {
        /// What was written.
        text: String,
        /// Why it was refused.
        reason: String,
    },
    /// A registry's credentials or certificates could not be read.
    #[error("{path}: {reason}")]
    Setup {
        /// The file or directory.
        path: std::path::PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The registry could not be reached or answered with an error.
    #[error("{reference}: {message}")]
    Registry {
        /// The reference being pushed or pulled.
        reference: String,
        /// oci-client's error, with its chain.
        message: String,
    },
    /// The registry sent something that is not a plugin artifact, or one over a limit, or one
    /// whose digest does not match.
    #[error("{reference}: {problem}")]
    NotAPlugin {
        /// The reference being pulled.
        reference: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A plugin a run requires to be signed carries no signature by the keys given.
    #[error("{reference}: refused: {problem}")]
    Unsigned {
        /// The plugin, pinned to the digest that was checked.
        reference: String,
        /// What was found instead.
        problem: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// What the file system returned.
        error: std::io::Error,
    },
}

/// oci-client's `error` while pushing or pulling `reference` from `registry`, with what to do
/// about the usual causes.
pub(crate) fn registry_error(
    reference: &str,
    registry: &str,
    error: &oci_client::errors::OciDistributionError,
) -> RegistryError {
    let mut message = error_chain(error);
    if message.contains("UnknownIssuer") || message.contains("invalid peer certificate") {
        message.push_str(&format!(
            " (to trust the registry's certificate authority, put its certificate in \
             /etc/containers/certs.d/{registry}/ca.crt or give --cert-dir DIR)"
        ));
    } else if matches!(
        error,
        oci_client::errors::OciDistributionError::UnauthorizedError { .. }
            | oci_client::errors::OciDistributionError::AuthenticationFailure(_)
    ) {
        message.push_str(&format!(
            " (log in with `podman login {registry}` or `docker login {registry}`, or give \
             --authfile FILE)"
        ));
    }
    RegistryError::Registry {
        reference: reference.to_owned(),
        message,
    }
}

/// `error` and every error under it, `: `-separated.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
