//! The plugins a factbuoy binary knows: those compiled into it (every crate under `plugins/`,
//! built for wasm32-wasip2 by this crate's build script and embedded with its digest), and
//! components named by path. Not the sandbox itself: loading goes through
//! [`factbuoy_runtime::Runtime`].

use std::path::{Path, PathBuf};

use factbuoy_runtime::grants::GrantSet;
use factbuoy_runtime::{LoadError, LoadedPlugin, Runtime};

/// A plugin compiled into this binary by `build.rs`.
pub struct BundledPlugin {
    /// The plugin's crate name, which is also the name its `describe` gives.
    pub name: &'static str,
    /// The component.
    pub wasm: &'static [u8],
    /// Hex sha-256 of `wasm`, computed at build time.
    pub sha256: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// The bundled plugin named `name`.
pub fn bundled(name: &str) -> Option<&'static BundledPlugin> {
    BUNDLED.iter().find(|p| p.name == name)
}

/// The bundled plugin whose component has digest `sha256`.
pub fn bundled_by_digest(sha256: &str) -> Option<&'static BundledPlugin> {
    BUNDLED.iter().find(|p| p.sha256 == sha256)
}

/// The component of the bundled plugin whose digest is `sha256` (what an aggregator serves to
/// agents that lack it).
pub fn bundled_component(sha256: &str) -> Option<&'static [u8]> {
    bundled_by_digest(sha256).map(|p| p.wasm)
}

/// What the user named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginRef {
    /// A plugin bundled in this binary, by name.
    Bundled(&'static str),
    /// A component file.
    File(PathBuf),
}

/// Why a named plugin could not be found or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Neither a bundled plugin nor a file.
    #[error(
        "no bundled plugin is named {name:?} and no file is at that path; bundled plugins: {}",
        bundled_names()
    )]
    Unknown {
        /// What was named.
        name: String,
    },
    /// The component could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
}

fn bundled_names() -> String {
    BUNDLED
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl PluginRef {
    /// A bundled plugin's name wins; anything that looks like a path, or exists as a file, is a
    /// file.
    pub fn parse(text: &str) -> Result<Self, ResolveError> {
        if let Some(plugin) = bundled(text) {
            return Ok(PluginRef::Bundled(plugin.name));
        }
        let path = Path::new(text);
        if text.contains('/') || text.ends_with(".wasm") || path.exists() {
            return Ok(PluginRef::File(path.to_owned()));
        }
        Err(ResolveError::Unknown {
            name: text.to_owned(),
        })
    }

    /// Grants a run gives by default: bundled plugins were reviewed with this binary and get
    /// what they ask for; a plugin from a file gets nothing unless granted.
    pub fn default_grants(&self) -> GrantSet {
        GrantSet {
            everything_requested: matches!(self, PluginRef::Bundled(_)),
            ..GrantSet::default()
        }
    }

    /// Compiles (or takes from the cache), links and describes the plugin.
    pub async fn load(&self, runtime: &Runtime) -> Result<LoadedPlugin, ResolveError> {
        match self {
            PluginRef::Bundled(name) => {
                let plugin = bundled(name).expect("resolved from the bundled list");
                Ok(runtime.load(name, plugin.wasm, Some(plugin.sha256)).await?)
            }
            PluginRef::File(path) => Ok(runtime.load_file(path).await?),
        }
    }
}
