//! Where a run's artifacts go. The runtime streams each artifact into a writer the sink opens;
//! nothing requires holding an artifact in memory unless the sink itself does.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWrite;

use factbuoy_protocol::names::ArtifactName;

/// A writer for one artifact; `shutdown` marks it complete.
pub type ArtifactWriter = Pin<Box<dyn AsyncWrite + Send + Sync>>;

/// Opens writers for a run's artifacts. Names are already validated and unique within the run.
pub trait ArtifactSink: Send + Sync {
    /// Opens the writer for a new artifact; an error is reported to the plugin as an I/O error.
    fn create(&self, name: &ArtifactName, media_type: &str) -> std::io::Result<ArtifactWriter>;
}

/// Writes each artifact to a file below a directory.
pub struct DirectorySink {
    root: PathBuf,
}

impl DirectorySink {
    /// A sink writing below `root`; the artifact's name is its path there.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirectorySink { root: root.into() }
    }
}

impl ArtifactSink for DirectorySink {
    fn create(&self, name: &ArtifactName, _media_type: &str) -> std::io::Result<ArtifactWriter> {
        let path = self.root.join(name.to_relative_path());
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        Ok(Box::pin(tokio::fs::File::from_std(std::fs::File::create(
            path,
        )?)))
    }
}

/// Streams every artifact's bytes to this process's stdout, one after another.
pub struct StdoutSink;

impl ArtifactSink for StdoutSink {
    fn create(&self, _name: &ArtifactName, _media_type: &str) -> std::io::Result<ArtifactWriter> {
        Ok(Box::pin(tokio::io::stdout()))
    }
}

/// One artifact's bytes, shared between its writer and the sink.
type SharedBytes = Arc<Mutex<Vec<u8>>>;

/// Keeps artifacts in memory, for tests and callers that need an artifact whole. The run's output
/// limit bounds it; `plugin run -o json` streams from a [`DirectorySink`]'s files instead.
#[derive(Default, Clone)]
pub struct MemorySink {
    artifacts: Arc<Mutex<Vec<(ArtifactName, SharedBytes)>>>,
}

impl MemorySink {
    /// The artifacts written so far, in the order they were created.
    pub fn contents(&self) -> Vec<(ArtifactName, Vec<u8>)> {
        self.artifacts
            .lock()
            .unwrap()
            .iter()
            .map(|(name, bytes)| (name.clone(), bytes.lock().unwrap().clone()))
            .collect()
    }
}

impl ArtifactSink for MemorySink {
    fn create(&self, name: &ArtifactName, _media_type: &str) -> std::io::Result<ArtifactWriter> {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        self.artifacts
            .lock()
            .unwrap()
            .push((name.clone(), buffer.clone()));
        Ok(Box::pin(SharedBuffer(buffer)))
    }
}

struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl AsyncWrite for SharedBuffer {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.lock().unwrap().extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
