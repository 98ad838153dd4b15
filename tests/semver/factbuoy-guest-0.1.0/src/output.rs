//! Writing artifacts: named files streamed to the host chunk by chunk.
//!
//! [`Artifact`] implements [`std::io::Write`], so anything that writes to a writer (serde_json,
//! `write!`, `std::io::copy`) can stream into it without holding the whole output in memory.

use std::io::{self, BufWriter, Write};

use crate::__bindings::factbuoy::plugin::output as wit;
use crate::GatherError;

pub use wit::OutputError;

/// Largest chunk handed to the host in one call. The host refuses chunks above its own per-call
/// limit (1 MiB by default); staying well below it keeps each call cheap.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// A sentence for an [`OutputError`] (its `Display` is the generated debug form).
pub fn message(e: &OutputError) -> String {
    match e {
        OutputError::InvalidName(m) => format!("invalid artifact name: {m}"),
        OutputError::LimitExceeded(m) => format!("limit exceeded: {m}"),
        OutputError::Io(m) => format!("host could not store output: {m}"),
        OutputError::Closed => "artifact already finished".to_owned(),
    }
}

/// One artifact being written. Wrap it in a [`BufWriter`] (as [`create_buffered`] does) when
/// writing many small pieces.
pub struct Artifact {
    inner: wit::Artifact,
}

impl Artifact {
    /// Finishes the artifact, reporting any error the host saw.
    pub fn finish(self) -> Result<(), OutputError> {
        self.inner.finish()
    }
}

/// Starts an artifact named `name` (a relative path such as `facts.json` or `logs/kern.json`)
/// with the given media type.
pub fn create(name: &str, media_type: &str) -> Result<Artifact, OutputError> {
    Ok(Artifact {
        inner: wit::create(name, media_type)?,
    })
}

/// Starts an artifact behind a [`BufWriter`] of [`CHUNK_BYTES`].
pub fn create_buffered(name: &str, media_type: &str) -> Result<BufWriter<Artifact>, OutputError> {
    Ok(BufWriter::with_capacity(
        CHUNK_BYTES,
        create(name, media_type)?,
    ))
}

impl Write for Artifact {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let chunk = &buf[..buf.len().min(CHUNK_BYTES)];
        self.inner.write(chunk).map_err(to_io)?;
        Ok(chunk.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Keeps the host's [`OutputError`] inside the `io::Error`, so [`into_gather_error`] can recover it.
fn to_io(e: OutputError) -> io::Error {
    io::Error::other(e)
}

/// Turns an I/O error from writing an artifact back into the error the host gave, when there was
/// one, so the plugin's failure names the real cause (for example the output limit).
pub fn into_gather_error(e: io::Error) -> GatherError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<OutputError>())
    {
        Some(host_error) => GatherError::Failed(format!("writing output: {}", message(host_error))),
        None => GatherError::Failed(format!("writing output: {e}")),
    }
}

/// Writes `value` as one compact JSON artifact, streamed.
pub fn write_json<T: serde::Serialize + ?Sized>(name: &str, value: &T) -> Result<(), GatherError> {
    write_json_with(name, value, false)
}

/// Writes `value` as one indented JSON artifact, streamed.
pub fn write_json_pretty<T: serde::Serialize + ?Sized>(
    name: &str,
    value: &T,
) -> Result<(), GatherError> {
    write_json_with(name, value, true)
}

fn write_json_with<T: serde::Serialize + ?Sized>(
    name: &str,
    value: &T,
    pretty: bool,
) -> Result<(), GatherError> {
    let mut out = create_buffered(name, "application/json")?;
    let written = if pretty {
        serde_json::to_writer_pretty(&mut out, value)
    } else {
        serde_json::to_writer(&mut out, value)
    };
    written.map_err(|e| into_gather_error(e.into()))?;
    out.write_all(b"\n").map_err(into_gather_error)?;
    let artifact = out
        .into_inner()
        .map_err(|e| into_gather_error(e.into_error()))?;
    Ok(artifact.finish()?)
}
