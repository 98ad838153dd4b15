//! An OCI image layout directory (`oci-layout`, `index.json`, `blobs/sha256/`) holding one
//! pulled plugin, for air-gapped use: `skopeo copy oci:DIR:TAG docker://REGISTRY/...` carries
//! it to a registry the cluster reaches.

use std::path::Path;

use oci_client::annotations::ORG_OPENCONTAINERS_IMAGE_REF_NAME;
use serde_json::json;

use crate::artifact::{self, sha256_digest};
use crate::{PulledPlugin, RegistryError};

/// Writes `plugin` into the layout directory `dir` (made if missing; a plugin already there
/// under the same tag is replaced), tagged `tag`. Each blob is written whole before it is
/// renamed into place, and `index.json` last, so an interrupted write leaves the layout as it was.
pub fn write(dir: &Path, plugin: &PulledPlugin, tag: &str) -> Result<(), RegistryError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |error| RegistryError::Io { path, error }
    };
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).map_err(io(&blobs))?;
    for blob in [&plugin.manifest, &plugin.config.0, &plugin.layer.0] {
        let digest = sha256_digest(blob);
        let path = blobs.join(digest.trim_start_matches("sha256:"));
        if !path.exists() {
            write_whole(&path, blob).map_err(io(&path))?;
        }
    }
    let index_path = dir.join("index.json");
    let mut manifests: Vec<serde_json::Value> = match std::fs::read(&index_path) {
        Ok(bytes) => serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|index| index.get("manifests")?.as_array().cloned())
            .ok_or_else(|| RegistryError::Setup {
                path: index_path.clone(),
                reason: "not an OCI image layout's index".to_owned(),
            })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io(&index_path)(e)),
    };
    manifests.retain(|m| m["annotations"][ORG_OPENCONTAINERS_IMAGE_REF_NAME] != tag);
    manifests.push(json!({
        "mediaType": artifact::MANIFEST_MEDIA_TYPE,
        "digest": sha256_digest(&plugin.manifest),
        "size": plugin.manifest.len(),
        "annotations": { ORG_OPENCONTAINERS_IMAGE_REF_NAME: tag },
    }));
    let layout = dir.join("oci-layout");
    write_whole(&layout, br#"{"imageLayoutVersion":"1.0.0"}"#).map_err(io(&layout))?;
    let index = json!({
        "schemaVersion": 2,
        "mediaType": oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
        "manifests": manifests,
    });
    write_whole(
        &index_path,
        &serde_json::to_vec_pretty(&index).expect("JSON"),
    )
    .map_err(io(&index_path))
}

/// Writes `bytes` to a temporary file beside `path`, then renames it into place.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension("partial");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}
