//! Signatures of plugins, in cosign's layout with a key the user holds: beside a plugin whose
//! manifest has digest `sha256:HEX`, the tag `sha256-HEX.sig` names an OCI manifest whose
//! layers are "simple signing" payloads ([`PAYLOAD_MEDIA_TYPE`]) that name that digest, each
//! with its ECDSA P-256 signature in the annotation [`SIGNATURE_ANNOTATION`] (base64 DER). This
//! is what `cosign sign --key` writes and `cosign verify --key KEY.pub` reads (without a
//! transparency log). Verification needs nothing but the public keys: it works offline and
//! behind any registry.
//!
//! Keys are PEM: the private key PKCS#8 (`openssl genpkey -algorithm EC -pkeyopt
//! ec_paramgen_curve:P-256`), the public key SubjectPublicKeyInfo (`openssl pkey -pubout`), as
//! cosign's `--key` takes a public key.

use std::path::{Path, PathBuf};

use base64::Engine;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use ring::signature::{self as ring_signature, EcdsaKeyPair, KeyPair, UnparsedPublicKey};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{PrivatePkcs8KeyDer, SubjectPublicKeyInfoDer};
use serde_json::json;

use crate::access::Session;
use crate::artifact::sha256_digest;
use crate::pull::{fetch, pull_manifest};
use crate::push::upload;
use crate::{PluginReference, PullLimits, RegistryAccess, RegistryError};

/// The media type of a signed payload layer.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds a payload's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `type` a signed payload declares.
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The largest payload read: a payload is a few hundred bytes.
const PAYLOAD_LIMIT: u64 = 64 << 10;

/// A private key that signs plugins.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    path: PathBuf,
}

impl SigningKey {
    /// Reads a PKCS#8 PEM ECDSA P-256 private key.
    pub fn load(path: &Path) -> Result<SigningKey, RegistryError> {
        let setup = |reason: String| RegistryError::Setup {
            path: path.to_owned(),
            reason,
        };
        let der = PrivatePkcs8KeyDer::from_pem_file(path).map_err(|e| {
            setup(format!(
                "not a PKCS#8 PEM private key ({e}); make one with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`"
            ))
        })?;
        let pair = EcdsaKeyPair::from_pkcs8(
            &ring_signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            der.secret_pkcs8_der(),
            &ring::rand::SystemRandom::new(),
        )
        .map_err(|e| setup(format!("not an ECDSA P-256 private key: {e}")))?;
        Ok(SigningKey {
            pair,
            path: path.to_owned(),
        })
    }

    /// The sha-256 of the public key's SubjectPublicKeyInfo, which names the key in messages
    /// and bundles.
    pub fn fingerprint(&self) -> String {
        fingerprint_of_point(self.pair.public_key().as_ref())
    }
}

/// A public key that signatures are checked against.
#[derive(Debug, Clone)]
pub struct VerifyingKey {
    point: Vec<u8>,
    path: PathBuf,
}

impl VerifyingKey {
    /// Reads a PEM ECDSA P-256 public key (SubjectPublicKeyInfo).
    pub fn load(path: &Path) -> Result<VerifyingKey, RegistryError> {
        let setup = |reason: String| RegistryError::Setup {
            path: path.to_owned(),
            reason,
        };
        let der = SubjectPublicKeyInfoDer::from_pem_file(path).map_err(|e| {
            setup(format!(
                "not a PEM public key ({e}); make one with `openssl pkey -in KEY.pem -pubout`"
            ))
        })?;
        let (_, spki) =
            <x509_parser::x509::SubjectPublicKeyInfo as x509_parser::prelude::FromDer<
                x509_parser::error::X509Error,
            >>::from_der(der.as_ref())
            .map_err(|e| setup(format!("not a SubjectPublicKeyInfo: {e}")))?;
        let point = spki.subject_public_key.data.to_vec();
        let p256 = x509_parser::oid_registry::OID_EC_P256;
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        if curve.as_ref() != Some(&p256) || point.len() != 65 || point[0] != 4 {
            return Err(setup("not an ECDSA P-256 public key".to_owned()));
        }
        Ok(VerifyingKey {
            point,
            path: path.to_owned(),
        })
    }

    /// The sha-256 of the key, as [`SigningKey::fingerprint`] gives it.
    pub fn fingerprint(&self) -> String {
        fingerprint_of_point(&self.point)
    }

    fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ring_signature::ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(payload, signature)
            .is_ok()
    }
}

/// A key's name in messages: the sha-256 of its uncompressed point.
fn fingerprint_of_point(point: &[u8]) -> String {
    sha256_digest(point)
}

/// The tag of the signatures of the manifest `digest` (`sha256-HEX.sig`).
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replace(':', "-"))
}

/// The payload a signature of `reference`'s manifest `digest` signs.
fn payload(reference: &PluginReference, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": format!("{}/{}", reference.registry(), reference.repository())},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    }))
    .expect("JSON")
}

/// Signs the plugin `reference` names with `key`: pulls it (so that only a plugin is signed)
/// and adds a signature of its manifest's digest to the signatures already at its signature
/// tag. Returns the plugin pinned to the digest that was signed.
pub async fn sign(
    access: &RegistryAccess,
    reference: &PluginReference,
    key: &SigningKey,
) -> Result<PluginReference, RegistryError> {
    let pulled = crate::pull::pull(access, reference, &PullLimits::default()).await?;
    let pinned = pulled.reference;
    let digest = pinned
        .digest()
        .expect("pulled references are pinned")
        .to_owned();
    let payload = payload(&pinned, &digest);
    let signature = key
        .pair
        .sign(&ring::rand::SystemRandom::new(), &payload)
        .map_err(|e| RegistryError::Setup {
            path: key.path.clone(),
            reason: format!("signing failed: {e}"),
        })?;
    let signatures = pinned.with_tag(&signature_tag(&digest));
    let session = Session::open(access, reference.registry())?;
    let mut layers = existing_signatures(&session, &signatures).await?;
    let payload_digest = sha256_digest(&payload);
    // Signing again with the same key replaces that key's signature.
    let own = VerifyingKey {
        point: key.pair.public_key().as_ref().to_vec(),
        path: key.path.clone(),
    };
    layers.retain(|l| {
        l.digest != payload_digest || !signature_of(l).is_some_and(|s| own.verifies(&payload, &s))
    });
    layers.push(OciDescriptor {
        media_type: PAYLOAD_MEDIA_TYPE.to_owned(),
        digest: payload_digest.clone(),
        size: payload.len() as i64,
        annotations: Some(
            [(
                SIGNATURE_ANNOTATION.to_owned(),
                base64::engine::general_purpose::STANDARD.encode(signature.as_ref()),
            )]
            .into(),
        ),
        ..OciDescriptor::default()
    });
    // cosign's config: an image config whose layers are the payloads.
    let config = serde_json::to_vec(&json!({
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| &l.digest).collect::<Vec<_>>()},
    }))
    .expect("JSON");
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(crate::artifact::MANIFEST_MEDIA_TYPE.to_owned()),
        config: OciDescriptor {
            media_type: oci_client::manifest::IMAGE_CONFIG_MEDIA_TYPE.to_owned(),
            digest: sha256_digest(&config),
            size: config.len() as i64,
            ..OciDescriptor::default()
        },
        layers,
        ..OciImageManifest::default()
    };
    let manifest = serde_json::to_vec(&manifest).expect("JSON");
    upload(&session, &signatures, &[&payload, &config], manifest).await?;
    Ok(pinned)
}

/// The signature a payload layer carries, decoded.
fn signature_of(layer: &OciDescriptor) -> Option<Vec<u8>> {
    let text = layer.annotations.as_ref()?.get(SIGNATURE_ANNOTATION)?;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// The signature layers already at `signatures`, or none when nothing is there.
async fn existing_signatures(
    session: &Session,
    signatures: &PluginReference,
) -> Result<Vec<OciDescriptor>, RegistryError> {
    match pull_manifest(session, signatures, &PullLimits::default()).await? {
        None => Ok(Vec::new()),
        Some((manifest, _)) => {
            let manifest: OciImageManifest =
                serde_json::from_slice(&manifest).map_err(|e| RegistryError::NotAPlugin {
                    reference: signatures.to_string(),
                    problem: format!("its signature manifest is not an image manifest: {e}"),
                })?;
            Ok(manifest
                .layers
                .into_iter()
                .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
                .collect())
        }
    }
}

/// Checks that the plugin `pinned` (its manifest digest) carries a signature by one of `keys`;
/// returns the key that signed it.
pub async fn verify<'k>(
    access: &RegistryAccess,
    pinned: &PluginReference,
    keys: &'k [VerifyingKey],
) -> Result<&'k VerifyingKey, RegistryError> {
    let digest = pinned
        .digest()
        .expect("only a pinned reference is verified");
    let refuse = |problem: String| RegistryError::Unsigned {
        reference: pinned.to_string(),
        problem,
    };
    let wanted = || {
        keys.iter()
            .map(|k| k.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let signatures = pinned.with_tag(&signature_tag(digest));
    let session = Session::open(access, pinned.registry())?;
    let Some((manifest, _)) = pull_manifest(&session, &signatures, &PullLimits::default()).await?
    else {
        return Err(refuse(format!(
            "it is not signed: there is no {}; sign it with `factbuoy plugin sign --key KEY.pem`",
            signature_tag(digest)
        )));
    };
    let manifest: OciImageManifest = serde_json::from_slice(&manifest).map_err(|e| {
        refuse(format!(
            "its signature manifest is not an image manifest: {e}"
        ))
    })?;
    let mut seen = Vec::new();
    for layer in manifest
        .layers
        .iter()
        .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
    {
        let Some(signature) = signature_of(layer) else {
            seen.push("a payload without a readable signature".to_owned());
            continue;
        };
        let payload = fetch(
            &session,
            &signatures,
            layer,
            PAYLOAD_LIMIT,
            "signed payload",
        )
        .await?;
        let Some(key) = keys.iter().find(|k| k.verifies(&payload, &signature)) else {
            seen.push("a signature by another key".to_owned());
            continue;
        };
        let signed: serde_json::Value = serde_json::from_slice(&payload).unwrap_or_default();
        let critical = &signed["critical"];
        if critical["type"] != PAYLOAD_TYPE || critical["image"]["docker-manifest-digest"] != digest
        {
            seen.push(format!(
                "a signature by {} of another manifest ({})",
                key.path.display(),
                critical["image"]["docker-manifest-digest"]
            ));
            continue;
        }
        return Ok(key);
    }
    Err(refuse(format!(
        "no signature of {digest} by {} (found: {})",
        wanted(),
        if seen.is_empty() {
            "no signatures".to_owned()
        } else {
            seen.join("; ")
        }
    )))
}
