//! The one place the WIT contract is turned into Rust: types, host traits, export wrappers.
//! These are the current line's (`wit/gatherer.wit`); [`v0_1`] serves plugins of the older
//! line, and [`crate::contract::PluginPre`] calls a plugin through whichever its line needs.
//!
//! Document the contract in `wit/gatherer.wit`: its comments become the generated items' docs.

pub(crate) mod v0_1;

// The generated items carry the doc comments of `wit/gatherer.wit` where it has them; the rest
// (generated modules, linker helpers) cannot be documented from here.
#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "gatherer",
        imports: {
            "factbuoy:plugin/output": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        with: {
            "factbuoy:plugin/output.artifact": crate::bindings::OpenArtifact,
        },
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
    });
}

pub(crate) use generated::*;

pub use factbuoy::plugin::types::{
    ArtifactKind, ArtifactSpec, Capability, CapabilityRequest, GatherError, ListKeys, ParamSpec,
    ParamType, ParamValue, PluginInfo,
};

/// The contract version these bindings implement, as in `wit/gatherer.wit`; the versions they
/// serve are in [`crate::contract::SUPPORTED`].
pub const CONTRACT_VERSION: &str = "0.2.0";
/// Name of the interface every plugin exports, without the version.
pub const PLUGIN_EXPORT: &str = "factbuoy:plugin/plugin";

/// The resource behind the WIT `artifact`: an index into the run's artifact records, kept by
/// the `output` interface.
pub struct OpenArtifact {
    pub(crate) record: usize,
}
