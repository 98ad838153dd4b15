//! A real plugin run's result, recorded once and delivered by the load generators
//! (bench/kube-load, bench/fleet-load) as each simulated node's own, so that the aggregator under
//! load does the work real results give it. bench/kube-scale.sh and bench/status-web.sh record
//! one: `factbuoy -o json plugin run PLUGIN --out DIR/PLUGIN`, its report moved to
//! `DIR/PLUGIN/report.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use factbuoy_protocol::names::ArtifactName;
use factbuoy_protocol::types::{ManifestFile, Outcome, ResultManifest};

/// A plugin's recorded result: its manifest and its artifacts.
pub struct Replay {
    /// The manifest the agent commits, the report included.
    pub manifest: ResultManifest,
    /// Each artifact's name, where it lies, and its digest.
    pub files: Vec<(ArtifactName, PathBuf, String)>,
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
