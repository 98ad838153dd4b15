//! Pulling a plugin: the manifest by tag or digest, then its config and component by digest,
//! each checked against a size limit while it arrives and against its digest once it has; the
//! component checked for being a WebAssembly component before anyone runs it.

use futures_util::StreamExt;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OciDescriptor, OciImageManifest};

use crate::access::Session;
use crate::artifact;
use crate::artifact::sha256_digest;
use crate::error::registry_error;
use crate::{PluginReference, RegistryAccess, RegistryError};

/// The largest documents and blobs a pull accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullLimits {
    /// The manifest: 4 MiB, as the distribution registry and containerd allow.
    pub manifest_bytes: u64,
    /// The config document.
    pub config_bytes: u64,
    /// The component: a Python plugin is about 19 MB.
    pub component_bytes: u64,
}

impl Default for PullLimits {
    fn default() -> Self {
        PullLimits {
            manifest_bytes: 4 << 20,
            config_bytes: 1 << 20,
            component_bytes: 256 << 20,
        }
    }
}

/// A plugin pulled from a registry.
#[derive(Debug, Clone)]
pub struct PulledPlugin {
    /// What was pulled, pinned to its manifest's digest.
    pub reference: PluginReference,
    /// The manifest, as the registry sent it.
    pub manifest: Vec<u8>,
    /// The config document and its media type.
    pub config: (Vec<u8>, String),
    /// The component and its layer's media type.
    pub layer: (Vec<u8>, String),
}

impl PulledPlugin {
    /// The component.
    pub fn wasm(&self) -> &[u8] {
        &self.layer.0
    }
}

/// Pulls the plugin `reference` names. A tag is read once: the manifest it points at is pinned
/// by digest, and the config and component are those that manifest names, whatever the tag
/// points at by then.
pub async fn pull(
    access: &RegistryAccess,
    reference: &PluginReference,
    limits: &PullLimits,
) -> Result<PulledPlugin, RegistryError> {
    let not_a_plugin = |problem: String| RegistryError::NotAPlugin {
        reference: reference.to_string(),
        problem,
    };
    let session = Session::open(access, reference.registry())?;
    let (manifest, digest) = pull_manifest(&session, reference, limits)
        .await?
        .ok_or_else(|| RegistryError::Registry {
            reference: reference.to_string(),
            message: "the registry has no such manifest (manifest unknown)".to_owned(),
        })?;
    let (config, layer) = plugin_descriptors(&manifest).map_err(not_a_plugin)?;
    let pinned = reference.pinned(&digest);
    let config_bytes = fetch(&session, &pinned, &config, limits.config_bytes, "config").await?;
    let wasm = fetch(
        &session,
        &pinned,
        &layer,
        limits.component_bytes,
        "component",
    )
    .await?;
    if !wasmparser::Parser::is_component(&wasm) {
        let what = if wasmparser::Parser::is_core_wasm(&wasm) {
            "a core WebAssembly module, not a component"
        } else {
            "not WebAssembly"
        };
        return Err(not_a_plugin(format!(
            "its layer {} is {what}",
            layer.digest
        )));
    }
    Ok(PulledPlugin {
        reference: pinned,
        manifest,
        config: (config_bytes, config.media_type),
        layer: (wasm, layer.media_type),
    })
}

/// The manifest `reference` names and its digest, or `None` when the registry has none there;
/// refused when it is over the limit.
pub(crate) async fn pull_manifest(
    session: &Session,
    reference: &PluginReference,
    limits: &PullLimits,
) -> Result<Option<(Vec<u8>, String)>, RegistryError> {
    let pulled = session
        .client
        .pull_manifest_raw(
            reference.oci(),
            &session.auth,
            artifact::ACCEPTED_MANIFEST_MEDIA_TYPES,
        )
        .await;
    let (manifest, digest) = match pulled {
        Ok(pulled) => pulled,
        Err(OciDistributionError::RegistryError { envelope, .. })
            if envelope
                .errors
                .iter()
                .any(|e| e.code == OciErrorCode::ManifestUnknown) =>
        {
            return Ok(None);
        }
        Err(e) => {
            return Err(registry_error(
                &reference.to_string(),
                reference.registry(),
                &e,
            ));
        }
    };
    if manifest.len() as u64 > limits.manifest_bytes {
        return Err(RegistryError::NotAPlugin {
            reference: reference.to_string(),
            problem: format!(
                "its manifest is {} bytes, over the limit of {}",
                manifest.len(),
                limits.manifest_bytes
            ),
        });
    }
    Ok(Some((manifest.to_vec(), digest)))
}

/// The config and the component layer a plugin manifest names; why `manifest` is not one.
fn plugin_descriptors(manifest: &[u8]) -> Result<(OciDescriptor, OciDescriptor), String> {
    let parsed: serde_json::Value =
        serde_json::from_slice(manifest).map_err(|e| format!("its manifest is not JSON: {e}"))?;
    if parsed.get("manifests").is_some() {
        return Err(
            "it is an image index (a multi-platform container image?), not a plugin \
                    artifact"
                .to_owned(),
        );
    }
    let manifest: OciImageManifest = serde_json::from_value(parsed)
        .map_err(|e| format!("its manifest is not an OCI image manifest: {e}"))?;
    let config = manifest.config;
    let wasm_layer = |d: &OciDescriptor| {
        d.media_type == artifact::LAYER_MEDIA_TYPE
            || d.media_type == artifact::LEGACY_LAYER_MEDIA_TYPE
    };
    let layers: Vec<&str> = manifest
        .layers
        .iter()
        .map(|l| l.media_type.as_str())
        .collect();
    match manifest.layers.as_slice() {
        [layer] if wasm_layer(layer) => Ok((config, layer.clone())),
        _ => Err(format!(
            "it is not a plugin artifact: a plugin has one layer of media type {} (config {}); \
             this one has config {} and layers [{}]",
            artifact::LAYER_MEDIA_TYPE,
            artifact::CONFIG_MEDIA_TYPE,
            config.media_type,
            layers.join(", ")
        )),
    }
}

/// Reads the blob `descriptor` names, refusing one whose descriptor or content passes `limit`
/// or whose content does not match its digest.
pub(crate) async fn fetch(
    session: &Session,
    reference: &PluginReference,
    descriptor: &OciDescriptor,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, RegistryError> {
    let refuse = |problem: String| RegistryError::NotAPlugin {
        reference: reference.to_string(),
        problem,
    };
    if !crate::reference::is_sha256_digest(&descriptor.digest) {
        return Err(refuse(format!(
            "its {what}'s digest {:?} is not sha256:<64 hex digits>",
            descriptor.digest
        )));
    }
    let size = u64::try_from(descriptor.size)
        .map_err(|_| refuse(format!("its {what}'s size {} is negative", descriptor.size)))?;
    if size > limit {
        return Err(refuse(format!(
            "its {what} is {size} bytes, over the limit of {limit}"
        )));
    }
    let mut stream = session
        .client
        .pull_blob_stream(reference.oci(), descriptor)
        .await
        .map_err(|e| registry_error(&reference.to_string(), reference.registry(), &e))?;
    let mut bytes = Vec::with_capacity(size as usize);
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|e| RegistryError::Registry {
            reference: reference.to_string(),
            message: format!("reading its {what} {}: {e}", descriptor.digest),
        })?;
        // More than the descriptor says is already wrong; stop before it grows further.
        if (bytes.len() + piece.len()) as u64 > size {
            return Err(refuse(format!(
                "its {what} {} is longer than the {size} bytes its manifest says",
                descriptor.digest
            )));
        }
        bytes.extend_from_slice(&piece);
    }
    let actual = sha256_digest(&bytes);
    if bytes.len() as u64 != size || actual != descriptor.digest {
        return Err(refuse(format!(
            "its {what} does not match its manifest: {} bytes of digest {actual}, where the \
             manifest says {size} bytes of {}",
            bytes.len(),
            descriptor.digest
        )));
    }
    Ok(bytes)
}
