//! `{{name}}`: a factbuoy gatherer plugin. Build it with `factbuoy plugin build`, run it with
//! `factbuoy plugin run <the printed .wasm> --grant {{name}}:host-info`.

wit_bindgen::generate!({ path: "wit", world: "gatherer" });

use exports::factbuoy::plugin::plugin::Guest;
use factbuoy::plugin::progress::{self, ProgressUpdate};
use factbuoy::plugin::types::{
    ArtifactSpec, Capability, CapabilityRequest, GatherError, ParamSpec, ParamType, ParamValue,
    PluginInfo,
};
use factbuoy::plugin::{host_info, output};

struct Plugin;

impl Guest for Plugin {
    /// What the plugin is; must not touch the host (it is called to list and plan runs).
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Greets the host it runs on.".into(),
            parameters: vec![ParamSpec {
                name: "greeting".into(),
                description: "What to say to the host.".into(),
                type_: ParamType::String,
                required: false,
                default: Some("hello".into()),
                secret: false,
            }],
            capabilities: vec![CapabilityRequest {
                capability: Capability::HostInfo,
                required: true,
                reason: "reads the host name and kernel version".into(),
            }],
            artifacts: vec![ArtifactSpec {
                name: "greeting.json".into(),
                media_type: "application/json".into(),
                description: "the greeting and who received it".into(),
            }],
        }
    }

    /// Gathers facts and writes them as artifacts; `params` were checked against `describe`.
    fn gather(params: Vec<(String, ParamValue)>) -> Result<(), GatherError> {
        let greeting = params
            .iter()
            .find_map(|(name, value)| match (name.as_str(), value) {
                ("greeting", ParamValue::String(text)) => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let os = host_info::os();
        progress::report(&ProgressUpdate {
            completed: 1,
            total: 1,
            message: "greeted the host".into(),
            warnings: Vec::new(),
            errors: Vec::new(),
        });
        let facts = serde_json::json!({
            "greeting": greeting,
            "hostname": os.hostname,
            "kernel": os.kernel_version,
        });
        let text = format!("{facts}\n");
        write_artifact("greeting.json", "application/json", text.as_bytes())
    }
}

/// Writes one artifact, in chunks below the host's 1 MiB per-call limit.
fn write_artifact(name: &str, media_type: &str, bytes: &[u8]) -> Result<(), GatherError> {
    let failed = |e: output::OutputError| GatherError::Failed(format!("writing {name}: {e:?}"));
    let artifact = output::create(name, media_type).map_err(failed)?;
    for chunk in bytes.chunks(64 * 1024) {
        artifact.write(chunk).map_err(failed)?;
    }
    artifact.finish().map_err(failed)
}

export!(Plugin);
