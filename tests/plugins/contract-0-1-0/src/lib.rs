//! Test fixture: a gatherer built against `factbuoy:plugin@0.1.0` as released (frozen in
//! `wit/since_v0.1.0/`), not through the SDK. It calls an import and writes an artifact, so a
//! newer 0.1.x host must resolve its 0.1.0 imports and export by semver.

wit_bindgen::generate!({
    path: "../../../wit/since_v0.1.0",
    world: "gatherer",
});

use exports::factbuoy::plugin::plugin::Guest;
use factbuoy::plugin::types::{
    ArtifactSpec, Capability, CapabilityRequest, GatherError, ParamValue, PluginInfo,
};
use factbuoy::plugin::{host_info, output};

struct Old;

impl Guest for Old {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "contract-0-1-0".into(),
            version: "0.1.0".into(),
            description: "Built against factbuoy:plugin@0.1.0.".into(),
            parameters: Vec::new(),
            capabilities: vec![CapabilityRequest {
                capability: Capability::HostInfo,
                required: true,
                reason: "reads the uptime".into(),
            }],
            artifacts: vec![ArtifactSpec {
                name: "uptime.txt".into(),
                media_type: "text/plain".into(),
                description: "seconds since boot".into(),
            }],
        }
    }

    fn gather(_params: Vec<(String, ParamValue)>) -> Result<(), GatherError> {
        let failed = |e: output::OutputError| GatherError::Failed(format!("{e:?}"));
        let artifact = output::create("uptime.txt", "text/plain").map_err(failed)?;
        artifact
            .write(host_info::uptime_seconds().to_string().as_bytes())
            .map_err(failed)?;
        artifact.finish().map_err(failed)
    }
}

export!(Old);
