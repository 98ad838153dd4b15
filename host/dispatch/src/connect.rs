//! Reaching the API server: from a kubeconfig and context chosen as kubectl chooses them, or,
//! inside a pod, with the pod's own ServiceAccount.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Which cluster to reach, as kubectl's flags name it.
#[derive(Debug, Clone, Default)]
pub struct ClusterRef {
    /// `--kubeconfig`: this file instead of `$KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`: this context instead of the kubeconfig's current one.
    pub context: Option<String>,
}

/// A client for one cluster, and the namespace its context names.
#[derive(Clone)]
pub struct Cluster {
    /// The API client; cheap to clone.
    pub client: Client,
    /// The context's namespace (`default` when it names none); in a pod, the pod's own.
    pub namespace: String,
}

/// Why the cluster could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No kubeconfig could be read, or it does not name the chosen context.
    #[error(
        "reading the kubeconfig{}: {reason}; name one with --kubeconfig or $KUBECONFIG, and a context it has with --context",
        kubeconfig.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default()
    )]
    Kubeconfig {
        /// The file named by `--kubeconfig`, if any.
        kubeconfig: Option<PathBuf>,
        /// What kube said, which says its own cause. Not this error's `source`: the hint comes
        /// after it, and a chain printed with `{:#}` would repeat it twice more.
        reason: kube::config::KubeconfigError,
    },
    /// Not inside a pod, or the pod has no ServiceAccount token mounted.
    #[error("reading the pod's ServiceAccount: {0}")]
    InCluster(#[from] kube::config::InClusterError),
    /// The client could not be built from the configuration (its TLS settings, say).
    #[error("building the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// Connects to the cluster `target` names.
pub async fn connect(target: &ClusterRef) -> Result<Cluster, ConnectError> {
    install_crypto_provider();
    let kubeconfig_error = |reason| ConnectError::Kubeconfig {
        kubeconfig: target.kubeconfig.clone(),
        reason,
    };
    let kubeconfig = match &target.kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    }
    .map_err(kubeconfig_error)?;
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(kubeconfig_error)?;
    cluster(config)
}

/// Connects with the ServiceAccount of the pod this process runs in. It finds the API server
/// through `KUBERNETES_SERVICE_HOST`/`_PORT`, not DNS, which a cluster may lack.
pub fn in_cluster() -> Result<Cluster, ConnectError> {
    install_crypto_provider();
    cluster(Config::incluster_env()?)
}

fn cluster(config: Config) -> Result<Cluster, ConnectError> {
    let namespace = config.default_namespace.clone();
    Ok(Cluster {
        client: Client::try_from(config)?,
        namespace,
    })
}

/// kube builds its TLS configuration with the process-wide rustls provider; factbuoy links ring
/// only, which rustls does not pick by itself once another crate could enable a second one.
fn install_crypto_provider() {
    // Err means a provider is already installed, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
