//! `factbuoy plugin push`: a component to a registry, as a plugin artifact.

use std::collections::BTreeMap;

use oci_client::annotations;
use oci_client::manifest::{OciDescriptor, OciImageManifest};

use crate::access::Session;
use crate::artifact::sha256_digest;
use crate::artifact::{self, PluginArtifact, WasmConfig};
use crate::error::registry_error;
use crate::{PluginReference, RegistryAccess, RegistryError};

/// Pushes `plugin` to `reference` (its tag, or its digest alone) and returns the reference
/// pinned to the manifest's digest.
pub async fn push(
    access: &RegistryAccess,
    reference: &PluginReference,
    plugin: &PluginArtifact,
) -> Result<PluginReference, RegistryError> {
    let (manifest, config) = manifest_of(plugin);
    let digest = sha256_digest(&manifest);
    if let Some(written) = reference.digest()
        && written != digest
    {
        return Err(RegistryError::BadReference {
            text: reference.to_string(),
            reason: format!("the artifact's manifest digest is {digest}, not the one written"),
        });
    }
    // The manifest goes to the tag, or to its own digest when only a digest was written.
    let target = match reference.tag() {
        Some(tag) => reference.with_tag(tag),
        None => reference.pinned(&digest),
    };
    let session = Session::open(access, reference.registry())?;
    upload(&session, &target, &[&plugin.wasm, &config], manifest).await?;
    Ok(reference.pinned(&digest))
}

/// Pushes `blobs`, each under its digest, then `manifest` to `target`: in that order, since a
/// registry refuses a manifest whose blobs it lacks.
pub(crate) async fn upload(
    session: &Session,
    target: &PluginReference,
    blobs: &[&[u8]],
    manifest: Vec<u8>,
) -> Result<(), RegistryError> {
    let failed = |e| registry_error(&target.to_string(), target.registry(), &e);
    let oci = target.oci();
    session
        .client
        .auth(oci, &session.auth, oci_client::RegistryOperation::Push)
        .await
        .map_err(failed)?;
    for blob in blobs {
        session
            .client
            .push_blob(oci, blob.to_vec(), &sha256_digest(blob))
            .await
            .map_err(failed)?;
    }
    session
        .client
        .push_manifest_raw(
            oci,
            manifest,
            artifact::MANIFEST_MEDIA_TYPE
                .parse()
                .expect("a media type is a header value"),
        )
        .await
        .map_err(failed)?;
    Ok(())
}

/// The manifest and config documents of `plugin`, as the bytes that are pushed (the manifest's
/// digest is of these bytes).
pub fn manifest_of(plugin: &PluginArtifact) -> (Vec<u8>, Vec<u8>) {
    let layer_digest = sha256_digest(&plugin.wasm);
    let created = artifact::created_now();
    let config = serde_json::to_vec(&WasmConfig {
        created: Some(created.clone()),
        architecture: "wasm".to_owned(),
        os: "wasip2".to_owned(),
        layer_digests: vec![layer_digest.clone()],
        component: plugin.world.clone(),
    })
    .expect("the config serialises");
    let descriptor = |media_type: &str, bytes: &[u8], digest: String| OciDescriptor {
        media_type: media_type.to_owned(),
        digest,
        size: bytes.len() as i64,
        ..OciDescriptor::default()
    };
    let annotations = BTreeMap::from([
        (
            annotations::ORG_OPENCONTAINERS_IMAGE_TITLE.to_owned(),
            plugin.name.clone(),
        ),
        (
            annotations::ORG_OPENCONTAINERS_IMAGE_VERSION.to_owned(),
            plugin.version.clone(),
        ),
        (
            annotations::ORG_OPENCONTAINERS_IMAGE_DESCRIPTION.to_owned(),
            plugin.description.clone(),
        ),
        (
            annotations::ORG_OPENCONTAINERS_IMAGE_CREATED.to_owned(),
            created,
        ),
    ]);
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(artifact::MANIFEST_MEDIA_TYPE.to_owned()),
        config: descriptor(artifact::CONFIG_MEDIA_TYPE, &config, sha256_digest(&config)),
        layers: vec![descriptor(
            artifact::LAYER_MEDIA_TYPE,
            &plugin.wasm,
            layer_digest,
        )],
        subject: None,
        artifact_type: None,
        annotations: Some(annotations),
    };
    let manifest = serde_json::to_vec(&manifest).expect("the manifest serialises");
    (manifest, config)
}
