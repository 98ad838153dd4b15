//! `factbuoy plugin push`, `plugin pull` and `plugin sign`: plugins to and from OCI
//! registries, as artifacts that `skopeo`, `oras` and `wkg` handle too, signed in cosign's
//! layout (factbuoy-registry).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde_json::json;

use factbuoy_catalog::PluginRef;
use factbuoy_registry::artifact::{ComponentWorld, PluginArtifact};
use factbuoy_registry::{PluginReference, PullLimits};
use factbuoy_runtime::Limits;

use super::common::{CommonArgs, runtime};
use crate::output::{ExitStatus, Format, emit, emit_document};

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The plugin: a `.wasm` component or a bundled plugin's name. It is loaded first, so only
    /// a gatherer this factbuoy can run is pushed.
    #[arg(value_parser = crate::flags::PluginName, hide_possible_values = true)]
    plugin: String,
    /// Where to push it: oci://REGISTRY/REPOSITORY:TAG.
    #[arg(value_name = "oci://REF")]
    reference: String,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The plugin: oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST.
    #[arg(value_name = "oci://REF")]
    reference: String,
    /// Write the component to this file [default: the repository's last part, .wasm, in the
    /// current directory].
    #[arg(long, value_name = "FILE", conflicts_with = "layout")]
    out: Option<PathBuf>,
    /// Write an OCI image layout directory instead (for air-gapped use: `skopeo copy
    /// oci:DIR:TAG docker://REGISTRY/REPOSITORY:TAG` carries it on), tagged with the
    /// reference's tag.
    #[arg(long, value_name = "DIR")]
    layout: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// The plugin: oci://REGISTRY/REPOSITORY:TAG (the digest it names now is signed) or
    /// oci://REGISTRY/REPOSITORY@sha256:DIGEST.
    #[arg(value_name = "oci://REF")]
    reference: String,
    /// The private key to sign with: ECDSA P-256, PKCS#8 PEM.
    #[arg(long, value_name = "KEY.pem")]
    key: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

pub async fn sign(args: SignArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let reference = PluginReference::parse(&args.reference)?;
    let key = factbuoy_registry::signature::SigningKey::load(&args.key)?;
    let access = args.common.registry.access();
    let signed = factbuoy_registry::signature::sign(&access, &reference, &key).await?;
    let digest = signed.digest().expect("pinned").to_owned();
    let tag = factbuoy_registry::signature::signature_tag(&digest);
    match format {
        Format::Table => {
            emit(&signed.to_string());
            eprintln!(
                "signed {digest} with key {} (its signatures: tag {tag})",
                key.fingerprint()
            );
        }
        machine => emit_document(
            &json!({
                "reference": signed.to_string(),
                "digest": digest,
                "signature_tag": tag,
                "key": key.fingerprint(),
            }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}

pub async fn push(args: PushArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let reference = PluginReference::parse(&args.reference)?;
    let access = args.common.registry.access();
    let plugin = PluginRef::parse(&args.plugin)?;
    let wasm = match plugin.fetch(&access).await? {
        Some(fetched) => fetched.wasm,
        None => factbuoy_catalog::bundled(&args.plugin)
            .expect("parsed as bundled")
            .wasm
            .to_vec(),
    };
    let runtime = runtime(&args.common, Limits::default())?;
    let loaded = runtime
        .load(&args.plugin, &wasm, None)
        .await
        .with_context(|| format!("{} is not a plugin this factbuoy can run", args.plugin))?;
    let (imports, exports) = loaded.world();
    let info = loaded.info;
    let artifact = PluginArtifact {
        wasm,
        name: info.name.clone(),
        version: info.version.clone(),
        description: info.description.clone(),
        world: Some(ComponentWorld { exports, imports }),
    };
    let pushed = factbuoy_registry::push::push(&access, &reference, &artifact).await?;
    let digest = pushed.digest().expect("pinned").to_owned();
    match format {
        Format::Table => {
            emit(&pushed.to_string());
            eprintln!(
                "pushed {} {} ({} bytes) as {digest}",
                info.name,
                info.version,
                artifact.wasm.len()
            );
        }
        machine => emit_document(
            &json!({
                "reference": pushed.to_string(),
                "digest": digest,
                "plugin": info.name,
                "version": info.version,
                "component_sha256": factbuoy_protocol::digest::sha256_hex(&artifact.wasm),
            }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}

pub async fn pull(args: PullArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let reference = PluginReference::parse(&args.reference)?;
    let access = args.common.registry.access();
    let pulled = factbuoy_registry::pull::pull(&access, &reference, &PullLimits::default()).await?;
    let written = match &args.layout {
        Some(dir) => {
            let tag = reference.tag().unwrap_or("latest");
            factbuoy_registry::layout::write(dir, &pulled, tag)?;
            dir.clone()
        }
        None => {
            let out = args.out.clone().unwrap_or_else(|| {
                let name = reference
                    .repository()
                    .rsplit('/')
                    .next()
                    .unwrap_or("plugin");
                PathBuf::from(format!("{name}.wasm"))
            });
            write_whole(&out, pulled.wasm())?;
            out
        }
    };
    let component_sha256 = factbuoy_protocol::digest::sha256_hex(pulled.wasm());
    match format {
        Format::Table => {
            emit(&written.display().to_string());
            eprintln!(
                "pulled {} ({} bytes, component sha256:{component_sha256})",
                pulled.reference,
                pulled.wasm().len()
            );
        }
        machine => emit_document(
            &json!({
                "reference": pulled.reference.to_string(),
                "digest": pulled.reference.digest(),
                "written": written,
                "layout": args.layout.is_some(),
                "component_sha256": component_sha256,
            }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}

/// Writes `bytes` to `path` through a temporary file beside it, so that a failed write leaves
/// no half-written plugin.
fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    std::io::Write::write_all(&mut file, bytes)
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            file.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .with_context(|| format!("writing {}", path.display()))?;
    file.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
