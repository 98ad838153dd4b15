//! Plugins from files, stored by the fleet by digest so that runs can name them. An operator
//! uploads each component once (`PUT /api/v1/fleet/plugins/{sha256}`; `factbuoy run --fleet`
//! does it for every plugin the fleet's binary does not bundle), every later run that names it
//! gets a link to it in its run directory, and agents fetch it from the run by digest, as from
//! any run. Agents need nothing installed.

use std::path::Path;

use bytes::Bytes;
use factbuoy_protocol::fleet::MAX_PLUGIN_BYTES;

use super::dir::FleetDir;
use crate::model::config::ServerLimits;
use crate::persistence::files::sync_dir;
use crate::persistence::run_dir::RunDir;
use crate::upload::{UploadError, write_verified};

/// Whether the fleet stores the component with digest `sha256`.
pub(super) fn is_stored(dir: &FleetDir, sha256: &str) -> bool {
    dir.plugin(sha256).is_file()
}

/// Stores `body` as the component with digest `sha256`, if its bytes have that digest and at
/// most [`MAX_PLUGIN_BYTES`]. Synced before it is named, so a crash never leaves a truncated
/// component that a later run would hand to agents.
pub(super) async fn receive<B>(dir: &FleetDir, sha256: &str, mut body: B) -> Result<(), UploadError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let limits = ServerLimits {
        max_file_bytes: MAX_PLUGIN_BYTES,
        ..ServerLimits::default()
    };
    let temporary = dir
        .plugins()
        .join(format!(".{sha256}.{:016x}", rand::random::<u64>()));
    write_verified(&mut body, &temporary, sha256, &limits).await?;
    let placed = std::fs::File::open(&temporary)
        .and_then(|file| file.sync_all())
        .and_then(|()| std::fs::rename(&temporary, dir.plugin(sha256)))
        .and_then(|()| sync_dir(&dir.plugins()));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&temporary);
        return Err(e.into());
    }
    Ok(())
}

/// Puts the stored component `sha256` into `run`'s directory: a hard link, or a copy where the
/// two are on different file systems.
pub(super) fn link_into(dir: &FleetDir, sha256: &str, run: &RunDir) -> std::io::Result<()> {
    let (stored, linked) = (dir.plugin(sha256), run.component(sha256));
    std::fs::create_dir_all(linked.parent().expect("component paths have a parent"))?;
    link_or_copy(&stored, &linked)
}

fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            std::fs::copy(from, to).map(|_| ())
        }
        Err(e) => Err(e),
    }
}
