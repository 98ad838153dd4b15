//! Test fixture: a gatherer built against `factbuoy:plugin@0.1.2` as released (frozen in
//! `wit/since_v0.1.2/`), not through the SDK. It calls what 0.1.2 added, `host-info.ethtool`,
//! so a newer 0.1.x host must still link that import by semver.

wit_bindgen::generate!({
    path: "../../../wit/since_v0.1.2",
    world: "gatherer",
});

use exports::factbuoy::plugin::plugin::Guest;
use factbuoy::plugin::host_info::{self, EthtoolError};
use factbuoy::plugin::output;
use factbuoy::plugin::types::{
    ArtifactSpec, Capability, CapabilityRequest, GatherError, ParamValue, PluginInfo,
};

/// An interface name no host has (at most 15 bytes, as Linux allows).
const NO_SUCH_INTERFACE: &str = "fbnosuchif0";

struct Contract;

impl Guest for Contract {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "contract-0-1-2".into(),
            version: "0.1.2".into(),
            description: "Built against factbuoy:plugin@0.1.2.".into(),
            parameters: Vec::new(),
            capabilities: vec![CapabilityRequest {
                capability: Capability::HostInfo,
                required: true,
                reason: "asks ethtool about an interface".into(),
            }],
            artifacts: vec![ArtifactSpec {
                name: "added.json".into(),
                media_type: "application/json".into(),
                description: "what the import 0.1.2 added answered".into(),
            }],
        }
    }

    fn gather(_params: Vec<(String, ParamValue)>) -> Result<(), GatherError> {
        // The answer for a missing interface is the same on every host, so the test can check it.
        let info = host_info::ethtool(NO_SUCH_INTERFACE);
        let kind = |result: Result<(), EthtoolError>| match result {
            Ok(()) => "ok",
            Err(EthtoolError::NoSuchInterface(_)) => "no-such-interface",
            Err(EthtoolError::NotSupported(_)) => "not-supported",
            Err(EthtoolError::Io(_)) => "io",
        };
        let added = serde_json::json!({
            "interface": NO_SUCH_INTERFACE,
            "features": kind(info.features.map(drop)),
            "timestamping": kind(info.timestamping.map(drop)),
        });
        let failed = |e: output::OutputError| GatherError::Failed(format!("{e:?}"));
        let artifact = output::create("added.json", "application/json").map_err(failed)?;
        artifact
            .write(added.to_string().as_bytes())
            .map_err(failed)?;
        artifact.finish().map_err(failed)
    }
}

export!(Contract);
