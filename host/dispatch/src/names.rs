//! The names every part of Kubernetes dispatch agrees on: labels, object names, annotation keys,
//! ports, the agents' token audience and the aggregator's server name. One run's objects are found
//! by the run label alone (`factbuoy/run=<run-id>`), whatever their kind or namespace.

use std::collections::BTreeMap;

/// The field manager of every server-side apply factbuoy makes.
pub const FIELD_MANAGER: &str = "factbuoy";
/// The label every object of a run carries, valued with the run id; every selector uses it.
pub const RUN_LABEL: &str = "factbuoy/run";
/// `app.kubernetes.io/component`: which part of the run an object belongs to.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

/// The aggregator's ServiceAccount, Service and (bare) Pod.
pub const AGGREGATOR: &str = "factbuoy-aggregator";
/// The agents' ServiceAccount and DaemonSet.
pub const AGENT: &str = "factbuoy-agent";
/// The ConfigMap holding the run plan (`run.json`) and the operator CA certificate.
pub const RUN_CONFIG_MAP: &str = "factbuoy-run";
/// Key of the run plan in [`RUN_CONFIG_MAP`].
pub const RUN_PLAN_KEY: &str = "run.json";
/// Key of the operator CA certificate (PEM) in [`RUN_CONFIG_MAP`].
pub const OPERATOR_CA_KEY: &str = "operator-ca.pem";
/// The Secret holding a run's secret parameters, one key per parameter ([`secret_key`]): only
/// the aggregator reads it (by name), and deletes it when the run ends.
pub const SECRETS: &str = "factbuoy-secrets";
/// The Secret (`kubernetes.io/dockerconfigjson`) holding the credentials for the registries of
/// the run's plugins and image: the aggregator pulls plugins with it, and every pod names it in
/// `imagePullSecrets`.
pub const REGISTRY_SECRET: &str = "factbuoy-registry";
/// Key of the registries' CA certificates (PEM) in [`RUN_CONFIG_MAP`].
pub const REGISTRY_CA_KEY: &str = "registry-ca.crt";
/// The ConfigMap the aggregator creates at start with its run CA certificate; agents mount it.
pub const CA_CONFIG_MAP: &str = "factbuoy-ca";
/// Key of the run CA certificate (PEM) in [`CA_CONFIG_MAP`].
pub const CA_KEY: &str = "ca.pem";

/// Annotation on the aggregator pod: its bounded status summary.
pub const STATUS_ANNOTATION: &str = "factbuoy.dev/status";
/// Annotation on the aggregator pod: its run CA certificate, PEM.
pub const CA_ANNOTATION: &str = "factbuoy.dev/ca";

/// Name of the Service port (and container port) agents dial.
pub const AGENT_PORT_NAME: &str = "agent";
/// The aggregator's agent listener port.
pub const AGENT_PORT: u16 = 8443;
/// Name of the Service port (and container port) operators reach through port-forward.
pub const OPERATOR_PORT_NAME: &str = "operator";
/// The aggregator's operator listener port.
pub const OPERATOR_PORT: u16 = 8444;

/// Where an agent container finds its projected, audience-bound ServiceAccount token.
pub const TOKEN_PATH: &str = "/var/run/secrets/factbuoy/token";
/// Lifetime asked for the projected token (the API server's minimum); the kubelet rotates it at
/// 80 %, so readers re-read the file on every use.
pub const TOKEN_EXPIRATION_SECONDS: i64 = 600;
/// The user and group every factbuoy container runs as (not root; distroless' `nonroot`).
pub const RUN_AS_ID: i64 = 65532;

/// Longest run id: `factbuoy-<run-id>` must be a namespace name (63 bytes at most).
pub const MAX_RUN_ID_LEN: usize = 63 - "factbuoy-".len();

/// A run id that cannot name Kubernetes objects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run id {0:?} cannot name Kubernetes objects: use 1 to {MAX_RUN_ID_LEN} lower-case letters, digits and '-', starting and ending with a letter or digit"
)]
pub struct BadRunId(pub String);

/// Checks that `run_id` fits in a label value and, prefixed, a namespace name (DNS-1123 label).
pub fn check_run_id(run_id: &str) -> Result<(), BadRunId> {
    let ok = !run_id.is_empty()
        && run_id.len() <= MAX_RUN_ID_LEN
        && run_id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !run_id.starts_with('-')
        && !run_id.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(BadRunId(run_id.to_owned()))
    }
}

/// Which part of a run an object belongs to (`app.kubernetes.io/component`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// The aggregator: its Pod, Service and ServiceAccount.
    Aggregator,
    /// The agents: the DaemonSet, its pods and ServiceAccount.
    Agent,
    /// Roles and bindings.
    Rbac,
    /// The run's own Namespace.
    Namespace,
    /// ConfigMaps.
    Config,
}

impl Component {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Aggregator => "aggregator",
            Component::Agent => "agent",
            Component::Rbac => "rbac",
            Component::Namespace => "namespace",
            Component::Config => "config",
        }
    }
}

/// The labels of every object of run `run_id`: the run label and the `app.kubernetes.io` set.
pub fn labels(run_id: &str, component: Component) -> BTreeMap<String, String> {
    [
        (RUN_LABEL, run_id.to_owned()),
        ("app.kubernetes.io/name", "factbuoy".to_owned()),
        ("app.kubernetes.io/instance", format!("factbuoy-{run_id}")),
        (COMPONENT_LABEL, component.as_str().to_owned()),
        ("app.kubernetes.io/part-of", "factbuoy".to_owned()),
        ("app.kubernetes.io/managed-by", FIELD_MANAGER.to_owned()),
        (
            "app.kubernetes.io/version",
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The label pair that selects a run's objects of one component (the DaemonSet's and the
/// Service's selector; immutable once applied, so nothing else may go in it).
pub fn selector(run_id: &str, component: Component) -> BTreeMap<String, String> {
    [
        (RUN_LABEL.to_owned(), run_id.to_owned()),
        (COMPONENT_LABEL.to_owned(), component.as_str().to_owned()),
    ]
    .into()
}

/// Label selector text for every object of a run: `factbuoy/run=<run-id>`.
pub fn run_selector(run_id: &str) -> String {
    format!("{RUN_LABEL}={run_id}")
}

/// Label selector text for a run's agent pods.
pub fn agent_selector(run_id: &str) -> String {
    format!("{RUN_LABEL}={run_id},{COMPONENT_LABEL}=agent")
}

/// The Namespace a run gets when `-n` names none: `factbuoy-<run-id>`.
pub fn default_namespace(run_id: &str) -> String {
    format!("factbuoy-{run_id}")
}

/// The run's ClusterRole and ClusterRoleBinding: `factbuoy-<run-id>`.
pub fn cluster_role_name(run_id: &str) -> String {
    format!("factbuoy-{run_id}")
}

/// The audience of the agents' projected tokens: `factbuoy:<run-id>`.
pub fn token_audience(run_id: &str) -> String {
    format!("factbuoy:{run_id}")
}

/// The name in the aggregator's certificate, which agents and operators verify:
/// `factbuoy-aggregator.<namespace>.svc`.
pub fn server_name(namespace: &str) -> String {
    format!("{AGGREGATOR}.{namespace}.svc")
}

/// The key of secret parameter `param` of plugin `plugin` in Secret [`SECRETS`]:
/// `<plugin>.<param>` (plugin and parameter names are lower-case words with `-` and `_`, which
/// Secret keys allow; the dot cannot occur in either, so the key splits back unambiguously).
pub fn secret_key(plugin: &str, param: &str) -> String {
    format!("{plugin}.{param}")
}

/// The user name a TokenReview gives an agent's token: `system:serviceaccount:<ns>:factbuoy-agent`.
pub fn agent_username(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{AGENT}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_must_name_a_namespace() {
        for good in ["0123456789ab", "a", "run-1", &"a".repeat(MAX_RUN_ID_LEN)] {
            check_run_id(good).unwrap();
            assert!(default_namespace(good).len() <= 63);
        }
        for bad in [
            "",
            "Run",
            "-a",
            "a-",
            "a_b",
            "a.b",
            &"a".repeat(MAX_RUN_ID_LEN + 1),
        ] {
            let error = check_run_id(bad).unwrap_err().to_string();
            assert!(error.contains("lower-case"), "{error}");
        }
    }

    #[test]
    fn labels_carry_the_run_and_the_component() {
        let labels = labels("abc", Component::Agent);
        assert_eq!(labels[RUN_LABEL], "abc");
        assert_eq!(labels["app.kubernetes.io/instance"], "factbuoy-abc");
        assert_eq!(labels[COMPONENT_LABEL], "agent");
        let selector = selector("abc", Component::Agent);
        assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
        assert_eq!(
            agent_selector("abc"),
            "factbuoy/run=abc,app.kubernetes.io/component=agent"
        );
    }
}
