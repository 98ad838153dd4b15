//! Write factbuoy gatherer plugins in Rust.
//!
//! A plugin is a WebAssembly component that factbuoy runs in a sandbox. With this crate you
//! implement one trait, [`Gatherer`], and call one macro, [`export_gatherer!`]; the WIT bindings
//! stay hidden. Build with `cargo build --release --target wasm32-wasip2` and try the result with
//! `factbuoy plugin run target/wasm32-wasip2/release/<name>.wasm`.
//!
//! # Example
//!
//! ```
//! use factbuoy_guest::prelude::*;
//!
//! struct Uptime;
//!
//! impl Gatherer for Uptime {
//!     fn describe() -> Description {
//!         Description::new("uptime", "0.1.0", "How long this host has been up.")
//!             .param(Param::boolean("pretty").default("false").describe("Indent the JSON."))
//!             .capability(Capability::HostInfo, "reads the uptime")
//!             .writes(Artifact::facts("uptime.json", "seconds since boot"))
//!     }
//!
//!     fn gather(params: &Params) -> Result<(), GatherError> {
//!         let seconds = host_info::uptime_seconds();
//!         progress::report(1, 1, "read the uptime");
//!         let facts = serde_json::json!({ "uptime_seconds": seconds });
//!         if params.boolean("pretty")? {
//!             output::write_json_pretty("uptime.json", &facts)
//!         } else {
//!             output::write_json("uptime.json", &facts)
//!         }
//!     }
//! }
//!
//! export_gatherer!(Uptime);
//! ```
//!
//! What a plugin may touch is decided by the capabilities it asks for in [`Gatherer::describe`]
//! and what the operator grants: files only below granted [`Capability::ReadPath`] paths, the
//! [`host_info`] functions only with [`Capability::HostInfo`]. Everything else is denied.

// The generated bindings name this crate by its absolute path, so that the `export!` macro they
// define also works when expanded inside a plugin crate.
extern crate self as factbuoy_guest;

mod describe;
pub mod hostfs;
pub mod linux;
pub mod log;
pub mod output;
mod params;
pub mod progress;

pub use describe::{Artifact, Capability, Description, Param};
pub use params::Params;

#[doc(hidden)]
pub mod __bindings {
    wit_bindgen::generate!({
        // wit/gatherer.wit, linked into the crate's folder so that its package holds it.
        path: "wit",
        world: "gatherer",
        pub_export_macro: true,
        default_bindings_module: "::factbuoy_guest::__bindings",
        runtime_path: "::factbuoy_guest::__bindings::__wit_bindgen::rt",
    });
    #[doc(hidden)]
    pub use wit_bindgen as __wit_bindgen;
}

use __bindings::factbuoy::plugin::types;

/// Why [`Gatherer::gather`] failed: a failure the plugin understood, as opposed to a crash.
pub use types::GatherError;
/// A parameter's typed value, as the host passes it.
pub use types::ParamValue;

/// Facts the host gathers for the plugin (needs [`Capability::HostInfo`]).
pub mod host_info {
    pub use crate::__bindings::factbuoy::plugin::host_info::*;
}

/// What a plugin implements. Both functions are called in a fresh instance.
pub trait Gatherer {
    /// Says what the plugin is. Must not touch the host: it is called to list and plan runs.
    fn describe() -> Description;

    /// Gathers facts and writes them with [`output`]. `params` holds every declared parameter that
    /// has a value, already checked against [`Gatherer::describe`] by the host.
    fn gather(params: &Params) -> Result<(), GatherError>;
}

/// Everything a plugin usually needs, in one `use`.
pub mod prelude {
    pub use crate::{
        Artifact, Capability, Description, GatherError, Gatherer, Param, Params, export_gatherer,
        host_info, log, output, progress,
    };
}

/// Exports a [`Gatherer`] implementation as the plugin's entry points. Call it once per plugin.
#[macro_export]
macro_rules! export_gatherer {
    ($gatherer:ty) => {
        const _: () = {
            struct FactbuoyExport;

            impl $crate::__bindings::exports::factbuoy::plugin::plugin::Guest for FactbuoyExport {
                fn describe() -> $crate::__bindings::factbuoy::plugin::types::PluginInfo {
                    <$gatherer as $crate::Gatherer>::describe().into_wit()
                }

                fn gather(
                    params: ::std::vec::Vec<(::std::string::String, $crate::ParamValue)>,
                ) -> ::std::result::Result<(), $crate::GatherError> {
                    <$gatherer as $crate::Gatherer>::gather(&$crate::Params::from_wit(params))
                }
            }

            $crate::__bindings::export!(FactbuoyExport);
        };
    };
}

impl From<std::io::Error> for GatherError {
    fn from(e: std::io::Error) -> Self {
        GatherError::Failed(e.to_string())
    }
}

impl From<output::OutputError> for GatherError {
    fn from(e: output::OutputError) -> Self {
        GatherError::Failed(format!("writing output: {}", output::message(&e)))
    }
}
