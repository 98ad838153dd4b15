//! Test fixture: a gatherer built against `factbuoy:plugin@0.1.1` as released (frozen in
//! `wit/since_v0.1.1/`), not through the SDK. It calls what 0.1.1 added, `host-fs.read-link`
//! and `host-info.tz-variable`, so a newer 0.1.x host must still link those imports by semver.

wit_bindgen::generate!({
    path: "../../../wit/since_v0.1.1",
    world: "gatherer",
});

use exports::factbuoy::plugin::plugin::Guest;
use factbuoy::plugin::types::{
    ArtifactSpec, Capability, CapabilityRequest, GatherError, ParamSpec, ParamType, ParamValue,
    PluginInfo,
};
use factbuoy::plugin::{host_fs, host_info, output};

struct Contract;

impl Guest for Contract {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "contract-0-1-1".into(),
            version: "0.1.1".into(),
            description: "Built against factbuoy:plugin@0.1.1.".into(),
            parameters: vec![ParamSpec {
                name: "link".into(),
                description: "an absolute symlink below a granted path".into(),
                type_: ParamType::String,
                required: true,
                default: None,
                secret: false,
            }],
            capabilities: vec![
                CapabilityRequest {
                    capability: Capability::HostInfo,
                    required: true,
                    reason: "reads the TZ variable".into(),
                },
                CapabilityRequest {
                    capability: Capability::ReadPath("/".into()),
                    required: false,
                    reason: "reads the link given as `link`".into(),
                },
            ],
            artifacts: vec![ArtifactSpec {
                name: "added.json".into(),
                media_type: "application/json".into(),
                description: "what the imports 0.1.1 added answered".into(),
            }],
        }
    }

    fn gather(params: Vec<(String, ParamValue)>) -> Result<(), GatherError> {
        let Some((_, ParamValue::String(link))) = params.iter().find(|(n, _)| n == "link") else {
            return Err(GatherError::InvalidParameters("link is required".into()));
        };
        let link = match host_fs::read_link(link) {
            Ok(target) => serde_json::json!({ "target": target }),
            Err(e) => serde_json::json!({ "error": format!("{e:?}") }),
        };
        let added = serde_json::json!({ "tz": host_info::tz_variable(), "link": link });
        let failed = |e: output::OutputError| GatherError::Failed(format!("{e:?}"));
        let artifact = output::create("added.json", "application/json").map_err(failed)?;
        artifact
            .write(added.to_string().as_bytes())
            .map_err(failed)?;
        artifact.finish().map_err(failed)
    }
}

export!(Contract);
