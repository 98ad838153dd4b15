//! The plugins a factbuoy binary knows: those compiled into it (every crate under `plugins/`,
//! built for wasm32-wasip2 by this crate's build script and embedded with its digest),
//! components named by path, and components in OCI registries (`oci://`, through
//! [`factbuoy_registry`]). Not the sandbox itself: loading goes through
//! [`factbuoy_runtime::Runtime`].

use std::path::{Path, PathBuf};

use factbuoy_registry::signature::VerifyingKey;
use factbuoy_registry::{PluginReference, PullLimits, RegistryAccess, RegistryError};
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
    /// A component in a registry, by tag or digest.
    Oci(PluginReference),
}

/// A plugin's component that is not bundled: read from its file or pulled from its registry.
#[derive(Debug, Clone)]
pub struct FetchedComponent {
    /// What names it in messages: its path, or its reference pinned to a digest.
    pub label: String,
    /// The component.
    pub wasm: Vec<u8>,
    /// Lower-case hex sha-256 of `wasm`.
    pub sha256: String,
    /// For a plugin from a registry, its reference pinned to its manifest's digest, which a
    /// run records as where the plugin came from.
    pub source: Option<PluginReference>,
    /// The fingerprint of the key whose signature was checked, when signatures are required.
    pub signed_by: Option<String>,
}

/// Why a named plugin could not be found or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The component file could not be read.
    #[error("reading {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file system returned.
        error: std::io::Error,
    },
    /// The plugin could not be pulled from its registry, or is not signed as required.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Signatures are required and the plugin is a file, which carries none.
    #[error(
        "{}: refused: signatures are required (--require-signature) and a plugin from a file carries none; push it to a registry and sign it (factbuoy plugin push, plugin sign)",
        path.display()
    )]
    UnsignedFile {
        /// The file.
        path: PathBuf,
    },
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

/// When `registry` requires signatures, checks that `pinned` carries one by a key given and
/// returns that key's fingerprint.
async fn check_signature(
    registry: &RegistryAccess,
    pinned: &PluginReference,
) -> Result<Option<String>, RegistryError> {
    if registry.require_signature.is_empty() {
        return Ok(None);
    }
    let keys = registry
        .require_signature
        .iter()
        .map(|path| VerifyingKey::load(path))
        .collect::<Result<Vec<_>, _>>()?;
    let key = factbuoy_registry::signature::verify(registry, pinned, &keys).await?;
    Ok(Some(key.fingerprint()))
}

fn bundled_names() -> String {
    BUNDLED
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl PluginRef {
    /// `oci://...` is a registry reference; a bundled plugin's name wins over a file; anything
    /// that looks like a path, or exists as a file, is a file.
    pub fn parse(text: &str) -> Result<Self, ResolveError> {
        if PluginReference::is_reference(text) {
            return Ok(PluginRef::Oci(PluginReference::parse(text)?));
        }
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
    /// what they ask for; a plugin from a file or a registry gets nothing unless granted.
    pub fn default_grants(&self) -> GrantSet {
        GrantSet {
            everything_requested: matches!(self, PluginRef::Bundled(_)),
            ..GrantSet::default()
        }
    }

    /// Reads or pulls the component of a plugin that is not bundled (`None` for a bundled one).
    /// A registry's tag is resolved once, here, to the digest [`FetchedComponent::source`] records.
    pub async fn fetch(
        &self,
        registry: &RegistryAccess,
    ) -> Result<Option<FetchedComponent>, ResolveError> {
        match self {
            PluginRef::Bundled(_) => Ok(None),
            PluginRef::File(path) if !registry.require_signature.is_empty() => {
                Err(ResolveError::UnsignedFile { path: path.clone() })
            }
            PluginRef::File(path) => {
                let wasm = std::fs::read(path).map_err(|error| ResolveError::Read {
                    path: path.clone(),
                    error,
                })?;
                Ok(Some(FetchedComponent {
                    label: path.display().to_string(),
                    sha256: factbuoy_protocol::digest::sha256_hex(&wasm),
                    wasm,
                    source: None,
                    signed_by: None,
                }))
            }
            PluginRef::Oci(reference) => {
                let pulled =
                    factbuoy_registry::pull::pull(registry, reference, &PullLimits::default())
                        .await?;
                let signed_by = check_signature(registry, &pulled.reference).await?;
                let wasm = pulled.layer.0;
                Ok(Some(FetchedComponent {
                    label: pulled.reference.to_string(),
                    sha256: factbuoy_protocol::digest::sha256_hex(&wasm),
                    wasm,
                    source: Some(pulled.reference),
                    signed_by,
                }))
            }
        }
    }

    /// Compiles (or takes from the cache), links and describes the plugin; a plugin from a
    /// registry is pulled first, and its signature checked when signatures are required.
    pub async fn load(
        &self,
        runtime: &Runtime,
        registry: &RegistryAccess,
    ) -> Result<LoadedPlugin, ResolveError> {
        match self {
            PluginRef::Bundled(name) => {
                let plugin = bundled(name).expect("resolved from the bundled list");
                Ok(runtime.load(name, plugin.wasm, Some(plugin.sha256)).await?)
            }
            PluginRef::File(path) if registry.require_signature.is_empty() => {
                Ok(runtime.load_file(path).await?)
            }
            PluginRef::File(_) | PluginRef::Oci(_) => {
                let fetched = self.fetch(registry).await?.expect("not bundled");
                Ok(runtime
                    .load(&fetched.label, &fetched.wasm, Some(&fetched.sha256))
                    .await?)
            }
        }
    }
}
