//! `factbuoy version`: what this binary is, the plugin contract it speaks, and the plugins it
//! carries, so a bug report or a bundle can be matched to a build.

use serde::Serialize;

use factbuoy_catalog::BUNDLED;
use factbuoy_runtime::bindings::CONTRACT_VERSION;
use factbuoy_runtime::{Runtime, RuntimeOptions};

use crate::output::{ExitStatus, Format, emit, emit_document};

#[derive(Serialize)]
struct Version {
    /// This binary's version.
    client: &'static str,
    /// The WIT contract version plugins are built against (`factbuoy:plugin@...`).
    contract: &'static str,
    /// The plugins bundled in this binary.
    plugins: Vec<BundledVersion>,
}

#[derive(Serialize)]
struct BundledVersion {
    name: String,
    version: String,
    sha256: &'static str,
}

pub async fn version(format: Format) -> anyhow::Result<ExitStatus> {
    // The plugins' own versions come from their descriptions (compiled once, then cached).
    let runtime = Runtime::new(RuntimeOptions::default())?;
    let mut plugins = Vec::new();
    for bundled in BUNDLED {
        let info = runtime
            .load(bundled.name, bundled.wasm, Some(bundled.sha256))
            .await?
            .info;
        plugins.push(BundledVersion {
            name: info.name,
            version: info.version,
            sha256: bundled.sha256,
        });
    }
    let version = Version {
        client: env!("CARGO_PKG_VERSION"),
        contract: CONTRACT_VERSION,
        plugins,
    };
    match format {
        Format::Table => {
            let mut lines = vec![
                format!("factbuoy {}", version.client),
                format!("plugin contract factbuoy:plugin@{}", version.contract),
                "bundled plugins:".to_owned(),
            ];
            let width = version.plugins.iter().map(|p| p.name.len()).max();
            for p in &version.plugins {
                lines.push(format!(
                    "  {:width$}  {:8}  sha256 {}",
                    p.name,
                    p.version,
                    &p.sha256[..12],
                    width = width.unwrap_or(0)
                ));
            }
            emit(&lines.join("\n"));
        }
        machine => emit_document(&version, machine),
    }
    Ok(ExitStatus::Success)
}
