//! The layout of a plugin artifact, as the CNCF TAG Runtime's "Wasm OCI Artifact" defines it:
//! an OCI image manifest whose config has media type [`CONFIG_MEDIA_TYPE`] and whose one layer,
//! of media type [`LAYER_MEDIA_TYPE`], is the component.

use serde::{Deserialize, Serialize};

/// The config's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer media type of the older wasm-to-oci layout (Krustlet, oci-client's examples),
/// still accepted on pull.
pub const LEGACY_LAYER_MEDIA_TYPE: &str = oci_client::manifest::WASM_LAYER_MEDIA_TYPE;
/// The manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
/// Manifest media types a pull accepts.
pub const ACCEPTED_MANIFEST_MEDIA_TYPES: &[&str] = &[
    MANIFEST_MEDIA_TYPE,
    oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
    // Asked for so that an index is recognised and refused by name, not as "not found".
    oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
    oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

/// The artifact's config document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// When the artifact was made (RFC 3339): `$SOURCE_DATE_EPOCH` when set, so that the same
    /// component pushed twice has the same digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// The WASI version the component targets: `wasip2`.
    pub os: String,
    /// The digests of the layers, in order.
    pub layer_digests: Vec<String>,
    /// The component's world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<ComponentWorld>,
}

/// What a component imports and exports, by interface name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentWorld {
    /// Its exports (`factbuoy:plugin/plugin@0.2.0`).
    pub exports: Vec<String>,
    /// Its imports.
    pub imports: Vec<String>,
}

/// What `plugin push` sends: the component and what the manifest's annotations say of it.
#[derive(Debug, Clone)]
pub struct PluginArtifact {
    /// The component.
    pub wasm: Vec<u8>,
    /// The plugin's name (`org.opencontainers.image.title`).
    pub name: String,
    /// Its version (`org.opencontainers.image.version`).
    pub version: String,
    /// Its one-line description (`org.opencontainers.image.description`).
    pub description: String,
    /// Its world, for the config.
    pub world: Option<ComponentWorld>,
}

/// `$SOURCE_DATE_EPOCH` as RFC 3339, else now.
pub(crate) fn created_now() -> String {
    let when = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .unwrap_or_else(time::OffsetDateTime::now_utc);
    when.replace_nanosecond(0)
        .unwrap_or(when)
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a date formats as RFC 3339")
}

/// Lower-case hex sha-256 of `bytes`, as a digest string (`sha256:...`).
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", factbuoy_protocol::digest::sha256_hex(bytes))
}
