//! Taking part in a run as `agent serve` does once offered one (host/agent/src/fleet.rs
//! `take_part`), with a recorded real result instead of running the plugin: enroll with the
//! run's agent listener (a key made for the run, the offer's credential), fetch the plan, send
//! heartbeats, and deliver each planned plugin's recorded artifacts and manifest. So that the
//! run's aggregator does the work a run of working agents gives it: results arriving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use factbuoy_protocol::fleet::RunOffer;
use factbuoy_protocol::names::ArtifactName;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::types::{ManifestFile, Outcome, ResultManifest};
use factbuoy_protocol::{Client, Scope};

/// A plugin's recorded result: its manifest and its artifacts.
pub struct Replay {
    manifest: ResultManifest,
    /// Each artifact's name, where it lies, and its digest.
    files: Vec<(ArtifactName, PathBuf, String)>,
}

/// `DIR/<plugin>/report.json` (`factbuoy -o json plugin run PLUGIN --out DIR/<plugin>`'s
/// report) and its artifacts, for every plugin directory in `dir`.
pub fn load_replays(dir: &Path) -> anyhow::Result<BTreeMap<String, Replay>> {
    let mut replays = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let plugin_dir = entry?.path();
        let plugin = plugin_dir
            .file_name()
            .and_then(|n| n.to_str())
            .context("a plugin directory's name is not UTF-8")?
            .to_owned();
        let report_path = plugin_dir.join("report.json");
        let report: serde_json::Value = serde_json::from_slice(
            &std::fs::read(&report_path)
                .with_context(|| format!("reading {}", report_path.display()))?,
        )
        .with_context(|| format!("{} is not JSON", report_path.display()))?;
        if report["succeeded"] != serde_json::json!(true) {
            bail!(
                "{}: the recorded run did not succeed",
                report_path.display()
            );
        }
        let (mut files, mut entries) = (Vec::new(), Vec::new());
        for artifact in report["artifacts"].as_array().into_iter().flatten() {
            let text = |key: &str| {
                artifact[key]
                    .as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("{}: an artifact has no {key}", report_path.display()))
            };
            let name = ArtifactName::parse(&text("name")?)?;
            let sha256 = text("sha256")?;
            let size = artifact["size_bytes"].as_u64().context("no size_bytes")?;
            entries.push(ManifestFile {
                name: name.to_string(),
                size,
                sha256: sha256.clone(),
            });
            files.push((
                name.clone(),
                plugin_dir.join(name.to_relative_path()),
                sha256,
            ));
        }
        let manifest = ResultManifest {
            outcome: Outcome::Succeeded,
            error: None,
            files: entries,
            plugin_version: report["version"].as_str().unwrap_or_default().to_owned(),
            report: Some(report),
        };
        replays.insert(plugin, Replay { manifest, files });
    }
    if replays.is_empty() {
        bail!("{} holds no recorded result", dir.display());
    }
    Ok(replays)
}

/// Takes part in the run `offer` names, on the fleet's host `host`: enrolls at once, then,
/// `after` later, delivers each planned plugin's recorded result; heartbeats meanwhile.
pub async fn take_part(
    host: &str,
    offer: RunOffer,
    replays: &BTreeMap<String, Replay>,
    after: Duration,
) -> anyhow::Result<()> {
    let address = format!("{host}:{}", offer.agent_port);
    let key = factbuoy_pki::KeyRequest::new("factbuoy agent")?;
    let enrolled = Client::anonymous(&address, &offer.ca)?
        .enroll(&key.csr_pem, &offer.credential)
        .await
        .context("enrolling with the run")?;
    let identity = Identity {
        ca_pem: offer.ca.clone(),
        cert_pem: enrolled.certificate,
        key_pem: key.key_pem,
    };
    let client = Client::new(&address, &identity)?;
    let node = enrolled.node;
    let scope = Scope::Node(node.clone());
    let plan = client.plan(&scope).await.context("fetching the plan")?;
    let heartbeats = {
        let (client, node) = (client.clone(), node.clone());
        let every = Duration::from_secs(plan.heartbeat_seconds.max(1));
        tokio::spawn(async move {
            loop {
                // A failed heartbeat is the next one's to make up for, as in the agent.
                let _ = client.heartbeat(&node).await;
                tokio::time::sleep(every).await;
            }
        })
    };
    tokio::time::sleep(after).await;
    let delivered = async {
        for planned in &plan.plugins {
            let replay = replays.get(&planned.name).with_context(|| {
                format!(
                    "the plan names plugin {:?}, which has no recorded result",
                    planned.name
                )
            })?;
            for (name, path, sha256) in &replay.files {
                client
                    .put_file(&scope, &planned.name, name, path, sha256)
                    .await
                    .with_context(|| format!("uploading {name} of {}", planned.name))?;
            }
            client
                .commit(&scope, &planned.name, &replay.manifest)
                .await
                .with_context(|| format!("committing {}", planned.name))?;
        }
        anyhow::Ok(())
    }
    .await;
    heartbeats.abort();
    delivered
}
