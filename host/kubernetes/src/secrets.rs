//! Secret parameters of a Kubernetes run, from both ends. They never go into the run's
//! ConfigMap, its manifests (what `factbuoy gen` prints), an annotation, an event or a log: the
//! operator puts them in Secret `factbuoy-secrets` of the run's namespace, one key per parameter
//! (`<plugin>.<param>`); the aggregator, the only one allowed to read it (its Role names that
//! Secret alone), reads it once at its start, keeps the values in its run directory (0600) while
//! plans may still be handed out, and deletes the Secret when the run ends. Agents receive a
//! value only in their own plan, over mutual TLS.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use factbuoy_aggregator::config::RunConfig;
use factbuoy_dispatch::names::{self, Component, SECRETS};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

/// How long the aggregator waits for the Secret: with `factbuoy gen`, the operator creates it
/// after applying the manifests.
const WAIT: Duration = Duration::from_secs(600);
/// How often the aggregator says what it waits for.
const REMIND_EVERY: Duration = Duration::from_secs(30);

/// The values of `config`'s secret parameters, by Secret key (`<plugin>.<param>`).
pub fn values(config: &RunConfig) -> BTreeMap<String, String> {
    config
        .plugins
        .iter()
        .flat_map(|plugin| {
            plugin
                .params
                .iter()
                .filter(|(name, _)| plugin.is_secret(name))
                .map(|(name, value)| (names::secret_key(&plugin.name, name), value.clone()))
        })
        .collect()
}

/// The Secret holding `values` for run `run_id` in `namespace`, labelled as the run's other
/// objects are, so that `factbuoy delete` finds it.
pub fn object(run_id: &str, namespace: &str, values: &BTreeMap<String, String>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(SECRETS.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(names::labels(run_id, Component::Config)),
            ..ObjectMeta::default()
        },
        data: Some(
            values
                .iter()
                .map(|(key, value)| (key.clone(), ByteString(value.as_bytes().to_vec())))
                .collect(),
        ),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

/// Creates the run's Secret (`run --kubernetes`, after its namespace exists).
pub async fn create(client: &Client, secret: &Secret) -> anyhow::Result<()> {
    let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), secret)
        .await
        .with_context(|| format!("creating Secret {SECRETS} in namespace {namespace}"))?;
    Ok(())
}

/// How the operator of `factbuoy gen` creates the Secret with `keys`, as a command to run once
/// the manifests are applied.
pub fn create_command(namespace: &str, keys: &[&String]) -> String {
    let files: String = keys
        .iter()
        .map(|key| format!(" --from-file={key}=FILE"))
        .collect();
    format!("kubectl -n {namespace} create secret generic {SECRETS}{files}")
}

/// Reads the run's Secret, waiting for it to be created, and puts its values into `config`.
/// Every key must name a secret parameter of a plugin of the run, and every key is taken once.
pub async fn read_into(
    client: &Client,
    namespace: &str,
    config: &mut RunConfig,
) -> anyhow::Result<()> {
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut remind = tokio::time::Instant::now();
    let secret = loop {
        match api.get_opt(SECRETS).await {
            Ok(Some(secret)) => break secret,
            Ok(None) if tokio::time::Instant::now() < deadline => {
                if tokio::time::Instant::now() >= remind {
                    tracing::warn!(
                        "the run has secret parameters and Secret {SECRETS} does not exist yet in namespace {namespace}; create it (see `factbuoy gen`'s note)"
                    );
                    remind += REMIND_EVERY;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Ok(None) => anyhow::bail!(
                "Secret {SECRETS} was not created in namespace {namespace} within {} s; the run has secret parameters, whose values it holds",
                WAIT.as_secs()
            ),
            Err(e) => {
                return Err(e).with_context(|| format!("reading Secret {SECRETS}"));
            }
        }
    };
    let data = secret.data.unwrap_or_default();
    merge(config, data.into_iter().map(|(key, value)| (key, value.0)))
}

/// Puts the values of `entries` (Secret key, bytes) into `config`'s plugins. Errors name the
/// key, never the value.
fn merge(
    config: &mut RunConfig,
    entries: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> anyhow::Result<()> {
    for (key, value) in entries {
        let (plugin, param) = key.split_once('.').with_context(|| {
            format!("Secret {SECRETS} has key {key:?}, which is not <plugin>.<parameter>")
        })?;
        let run_plugin = config
            .plugins
            .iter_mut()
            .find(|p| p.name == plugin)
            .with_context(|| {
                format!("Secret {SECRETS} has key {key:?}, but the run has no plugin {plugin:?}")
            })?;
        anyhow::ensure!(
            run_plugin.is_secret(param),
            "Secret {SECRETS} has key {key:?}, but {plugin} has no secret parameter {param:?}; only secret parameters may come from it"
        );
        anyhow::ensure!(
            !run_plugin.params.iter().any(|(name, _)| name == param),
            "Secret {SECRETS} has key {key:?}, whose parameter the plan already sets"
        );
        let value = String::from_utf8(value)
            .map_err(|_| anyhow::anyhow!("Secret {SECRETS}'s key {key:?} is not UTF-8"))?;
        // A file made with `echo` ends in a newline that is not part of the value, as with `@FILE`.
        let value = value.strip_suffix('\n').unwrap_or(&value).to_owned();
        run_plugin.params.push((param.to_owned(), value));
    }
    Ok(())
}

/// Deletes the run's Secret once no plan will be handed out again; a missing Secret is fine.
pub async fn delete(client: &Client, namespace: &str) {
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    match api.delete(SECRETS, &DeleteParams::default()).await {
        Ok(_) => tracing::info!("deleted Secret {SECRETS}: the run hands out no more plans"),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => tracing::warn!("deleting Secret {SECRETS}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use factbuoy_aggregator::config::{PlanScope, RunPlugin};

    fn config() -> RunConfig {
        let mut plugin = RunPlugin {
            name: "probe".into(),
            sha256: String::new(),
            scope: PlanScope::PerNode,
            params: vec![("mode".into(), "x".into()), ("token".into(), "s3".into())],
            grants: vec![],
            denies: vec![],
            definition: serde_json::json!({
                "parameters": [
                    {"name": "mode", "secret": false},
                    {"name": "token", "secret": true},
                ]
            }),
            deadline_seconds: 1,
            source: None,
            signed_by: None,
        };
        plugin.params.sort();
        RunConfig::new(vec![plugin])
    }

    #[test]
    fn secret_values_leave_the_plan_and_come_back_from_the_secret() {
        let full = config();
        let values = values(&full);
        assert_eq!(values, [("probe.token".to_owned(), "s3".to_owned())].into());
        let mut public = full.without_secrets();
        assert!(!serde_json::to_string(&public).unwrap().contains("s3"));
        merge(
            &mut public,
            values
                .into_iter()
                .map(|(k, v)| (k, format!("{v}\n").into_bytes())),
        )
        .unwrap();
        assert_eq!(public.plugins[0].params, full.plugins[0].params);
    }

    #[test]
    fn a_secret_key_must_name_a_secret_parameter_of_the_run() {
        for (key, expected) in [
            ("token", "not <plugin>.<parameter>"),
            ("other.token", "no plugin \"other\""),
            ("probe.mode", "no secret parameter \"mode\""),
            ("probe.token", "already sets"),
        ] {
            let mut config = config();
            let error = merge(&mut config, [(key.to_owned(), b"v4lue".to_vec())])
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{key}: {error}");
            assert!(!error.contains("v4lue"));
        }
    }
}
