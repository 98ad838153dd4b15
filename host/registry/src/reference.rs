//! `oci://` references to plugins: `oci://REGISTRY/REPOSITORY:TAG`, `...@sha256:DIGEST`, or
//! both (`...:TAG@sha256:DIGEST`, the tag then only says where the digest came from). The part
//! after `oci://` follows the grammar docker, podman and skopeo use for images.

use std::fmt;
use std::str::FromStr;

use oci_client::Reference;

use crate::RegistryError;

/// The scheme that marks a plugin named by registry reference.
pub const SCHEME: &str = "oci://";

/// A plugin in a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginReference(Reference);

impl PluginReference {
    /// Whether `text` names a plugin in a registry rather than a bundled plugin or a file.
    pub fn is_reference(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// Parses `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`. The registry must be written:
    /// a plugin reference never means Docker Hub by default, which a typo would otherwise reach.
    pub fn parse(text: &str) -> Result<Self, RegistryError> {
        let bad = |reason: &str| RegistryError::BadReference {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("it does not start with oci://"))?;
        let (first, _) = rest
            .split_once('/')
            .ok_or_else(|| bad("it names no registry"))?;
        if !(first.contains('.') || first.contains(':') || first == "localhost") {
            return Err(bad(&format!(
                "{first:?} is not a registry host (a registry has a dot or a port, or is localhost)"
            )));
        }
        let reference = Reference::from_str(rest).map_err(|e| bad(&e.to_string()))?;
        if let Some(digest) = reference.digest()
            && !is_sha256_digest(digest)
        {
            return Err(bad("its digest is not sha256:<64 hex digits>"));
        }
        Ok(PluginReference(reference))
    }

    /// The same plugin pinned to the manifest `digest`; the tag, if any, is kept to say where
    /// the digest came from.
    pub fn pinned(&self, digest: &str) -> Self {
        let r = &self.0;
        PluginReference(match r.tag() {
            Some(tag) => Reference::with_tag_and_digest(
                r.registry().to_owned(),
                r.repository().to_owned(),
                tag.to_owned(),
                digest.to_owned(),
            ),
            None => Reference::with_digest(
                r.registry().to_owned(),
                r.repository().to_owned(),
                digest.to_owned(),
            ),
        })
    }

    /// The same plugin with another tag (and no digest): where `plugin push` puts it.
    pub fn with_tag(&self, tag: &str) -> Self {
        PluginReference(Reference::with_tag(
            self.0.registry().to_owned(),
            self.0.repository().to_owned(),
            tag.to_owned(),
        ))
    }

    /// The registry's host, with its port if one was written (what credentials and
    /// certificate directories are keyed by).
    pub fn registry(&self) -> &str {
        self.0.registry()
    }

    /// The repository within the registry.
    pub fn repository(&self) -> &str {
        self.0.repository()
    }

    /// The tag, if one was written.
    pub fn tag(&self) -> Option<&str> {
        self.0.tag()
    }

    /// The manifest digest (`sha256:...`), if the reference is pinned.
    pub fn digest(&self) -> Option<&str> {
        self.0.digest()
    }

    /// oci-client's form of the reference.
    pub(crate) fn oci(&self) -> &Reference {
        &self.0
    }
}

impl fmt::Display for PluginReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}", self.0.whole())
    }
}

/// Whether `digest` is `sha256:` and 64 lower-case hex digits.
pub(crate) fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_and_digests_and_prints_them_back() {
        for text in [
            "oci://registry.example:5000/plugins/hello:1.0",
            &format!("oci://localhost/hello@{DIGEST}"),
            &format!("oci://127.0.0.1:5000/a/b/c:v2@{DIGEST}"),
        ] {
            assert_eq!(PluginReference::parse(text).unwrap().to_string(), text);
        }
        let r = PluginReference::parse("oci://registry.example:5000/plugins/hello:1.0").unwrap();
        assert_eq!(r.registry(), "registry.example:5000");
        assert_eq!(r.repository(), "plugins/hello");
        assert_eq!(r.tag(), Some("1.0"));
        assert_eq!(
            r.pinned(DIGEST).to_string(),
            format!("oci://registry.example:5000/plugins/hello:1.0@{DIGEST}")
        );
    }

    #[test]
    fn refuses_what_is_not_a_pinnable_registry_reference() {
        let sha512 = format!("oci://registry.example/hello@sha512:{}", "ab".repeat(64));
        for (text, says) in [
            (sha512.as_str(), "not sha256:<64 hex digits>"),
            ("registry.example/hello:1", "does not start with oci://"),
            ("oci://hello:1", "names no registry"),
            ("oci://plugins/hello:1", "not a registry host"),
            ("oci://registry.example/Hello:1", "invalid"),
            (
                "oci://registry.example/hello@sha256:abc",
                "invalid reference format",
            ),
        ] {
            let error = PluginReference::parse(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
