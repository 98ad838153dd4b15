//! The one place the WIT contract is turned into Rust: types, host traits, export wrappers.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "gatherer",
    imports: {
        "factbuoy:plugin/output": async | trappable,
        default: trappable,
    },
    exports: { default: async },
    with: {
        "factbuoy:plugin/output.artifact": crate::runtime::host::output::OpenArtifact,
    },
    additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
});

pub use factbuoy::plugin::types::{
    ArtifactSpec, Capability, CapabilityRequest, GatherError, ParamSpec, ParamType, ParamValue,
    PluginInfo,
};

/// The contract version this host implements, as in `wit/gatherer.wit`.
pub const CONTRACT_VERSION: &str = "0.1.2";
/// Name of the interface every plugin exports, without the version.
pub const PLUGIN_EXPORT: &str = "factbuoy:plugin/plugin";
