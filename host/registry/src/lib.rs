//! Plugins as OCI artifacts: a plugin is pushed to and pulled from any OCI registry (the CNCF
//! distribution registry, Harbor, ECR, ...) in the layout the CNCF TAG Runtime defined for
//! WebAssembly components, which `wkg oci push`, Spin and containerd's runwasi use too: a config
//! of media type [`artifact::CONFIG_MEDIA_TYPE`] and one layer of [`artifact::LAYER_MEDIA_TYPE`],
//! the component itself.
//!
//! The registry protocol is oci-client's; this crate adds what factbuoy promises on top of it:
//! `oci://` references ([`reference`]), credentials and certificates found where podman, skopeo
//! and docker keep them ([`access`]), a tag resolved once to a digest and everything after
//! fetched by that digest, size limits on every document and blob a registry sends, and a pulled
//! layer checked against its digest and for being a component before anyone runs it ([`pull`]);
//! and signatures in cosign's layout, made and checked with keys the user holds ([`signature`]).

pub mod access;
pub mod artifact;
mod error;
pub mod layout;
pub mod pull;
pub mod push;
pub mod reference;
pub mod signature;

pub use access::RegistryAccess;
pub use error::RegistryError;
pub use pull::{PullLimits, PulledPlugin};
pub use reference::PluginReference;
