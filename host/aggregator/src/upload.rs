//! Uploads: each result file streams into a temporary file while its size, its pace and its
//! digest are checked; a file whose digest differs from its `Content-Digest` is deleted, never
//! stored. Accepted files wait in the pair's staging directory under a name that records their
//! size and digest ([`StagedFile`]), until a manifest commits them (the crate's `commit`).
//!
//! Staged files are flat, one directory per pair, and uploads in progress share one directory:
//! creating directories is the costliest file-system work an upload does (ext4 searches for a
//! spread-out inode for each), far more than writing a megabyte.
//!
//! ```text
//! <run dir>/staging/.incoming/<random>                                  uploads in progress
//! <run dir>/staging/<plugin>/<node>/<sha256 of name>.<size>.<sha256>    accepted, not committed
//! ```
//!
//! A stop loses only uploads in progress: [`Staging::open`] deletes them (their agents never got
//! a 201 and send them again). Accepted files stay for the commit that names them.

use std::collections::HashMap;
use std::io::{IoSlice, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use factbuoy_protocol::names::ArtifactName;
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::model::config::ServerLimits;
use crate::persistence::files::read_dir_names;
use crate::persistence::run_dir::RunDir;

/// Why an upload was refused. Each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UploadError {
    /// The body passed the largest file size it holds, in bytes (413).
    #[error("the body is larger than the limit of {0} bytes")]
    TooLarge(u64),
    /// No data arrived for the idle timeout it holds (408).
    #[error("the body stalled: no data for {0:?}")]
    Stalled(Duration),
    /// The average rate fell below the minimum once the grace had passed (408).
    #[error("the body is too slow: {rate} bytes/s, below the minimum of {minimum} bytes/s")]
    TooSlow {
        /// The average rate so far, in bytes per second.
        rate: u64,
        /// The slowest accepted rate, in bytes per second.
        minimum: u64,
    },
    /// The body's digest differs from its `Content-Digest` (400).
    #[error(
        "the body's sha-256 is {actual} but Content-Digest says {expected}; nothing was stored, upload it again"
    )]
    DigestMismatch {
        /// Lower-case hex sha-256 from `Content-Digest`.
        expected: String,
        /// Lower-case hex sha-256 of the bytes received.
        actual: String,
    },
    /// The client's body broke off; holds the transport's error (400).
    #[error("the connection broke during the upload: {0}")]
    Interrupted(String),
    /// The file could not be written or put in place (500).
    #[error("storing the upload: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes `body` into a new file at `path` at the pace `limits` asks, and keeps it only if it
/// is at most `limits.max_file_bytes` long and its sha-256 is `expected_sha256`; returns its
/// size. On any error the file is gone.
pub(crate) async fn write_verified<B>(
    body: &mut B,
    path: &Path,
    expected_sha256: &str,
    limits: &ServerLimits,
) -> Result<u64, UploadError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let result = async {
        let mut file = std::fs::File::create(path)?;
        let mut hasher = Sha256::new();
        let mut size: u64 = 0;
        let mut pace = Pace::new(limits);
        let mut held = Held::default();
        while let Some(data) = pace.next(body).await? {
            size += data.len() as u64;
            if size > limits.max_file_bytes {
                return Err(UploadError::TooLarge(limits.max_file_bytes));
            }
            hasher.update(&data);
            if held.hold(data) {
                held.write_to(&mut file)?;
            }
        }
        held.write_to(&mut file)?;
        let actual = hex::encode(hasher.finalize());
        if actual != expected_sha256 {
            return Err(UploadError::DigestMismatch {
                expected: expected_sha256.to_owned(),
                actual,
            });
        }
        Ok(size)
    }
    .await;
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Pieces of a body held until they are worth one write. A body arrives in pieces of about
/// one TLS read each (16 KiB or less); the kernel spends about half again as much time per
/// byte writing pieces that size as writing 64 KiB at once (bigger writes get bigger page-cache
/// folios, and fewer of everything done per folio). The pieces are written as they are, with
/// no copy, straight into the page cache on this thread, as nginx does: a trip to the blocking
/// pool per write cost more than the write.
#[derive(Default)]
struct Held {
    pieces: Vec<Bytes>,
    bytes: usize,
}

impl Held {
    /// Bytes held before a write: what an upload holds beyond hyper's and rustls' buffers.
    const BYTES: usize = 64 << 10;
    /// Pieces held before a write, whatever their size: a client that sends tiny TLS records
    /// must not make the server hold a long list of them (and writev takes at most 1,024).
    const PIECES: usize = 64;

    /// Holds `piece`; true when what is held should be written now.
    fn hold(&mut self, piece: Bytes) -> bool {
        self.bytes += piece.len();
        self.pieces.push(piece);
        self.bytes >= Self::BYTES || self.pieces.len() >= Self::PIECES
    }

    /// Writes everything held to `file`, in as few system calls as the kernel allows.
    fn write_to(&mut self, file: &mut std::fs::File) -> std::io::Result<()> {
        let mut slices: Vec<IoSlice<'_>> = self.pieces.iter().map(|p| IoSlice::new(p)).collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            match file.write_vectored(rest) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(written) => IoSlice::advance_slices(&mut rest, written),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.pieces.clear();
        self.bytes = 0;
        Ok(())
    }
}

/// The pace rules every request body meets: no silence longer than the idle timeout, and once
/// the request is older than the grace, an average rate of at least the minimum.
///
/// One timer serves the whole body. Both deadlines only move later as pieces arrive, so the
/// timer is set again only when it fires early, not for every piece: setting a timer per piece
/// (about 64 for every MiB) was a visible part of the aggregator's CPU under load.
pub(crate) struct Pace {
    started: Instant,
    /// When the latest frame arrived.
    latest: Instant,
    received: u64,
    idle: Duration,
    grace: Duration,
    minimum: u64,
    /// Fires at the deadline it was set to; the deadline may have moved later since.
    timer: Pin<Box<tokio::time::Sleep>>,
}

/// Which rule a deadline is.
enum Rule {
    Idle,
    Rate,
}

impl Pace {
    /// The rules of `limits`, counted from now.
    pub(crate) fn new(limits: &ServerLimits) -> Self {
        let now = Instant::now();
        let mut pace = Pace {
            started: now,
            latest: now,
            received: 0,
            idle: Duration::from_secs(limits.idle_timeout_seconds),
            grace: Duration::from_secs(limits.upload_grace_seconds),
            minimum: limits.min_upload_bytes_per_second,
            timer: Box::pin(tokio::time::sleep_until(now)),
        };
        let (deadline, _) = pace.deadline();
        pace.timer.as_mut().reset(deadline);
        pace
    }

    /// The latest moment the next piece may arrive, and the rule that sets it: the idle
    /// timeout, or the moment at which what has arrived falls below the minimum rate, whichever
    /// comes first.
    fn deadline(&self) -> (Instant, Rule) {
        let idle = after(self.latest, self.idle);
        if self.minimum == 0 {
            return (idle, Rule::Idle);
        }
        let needed = Duration::from_secs_f64((self.received + 1) as f64 / self.minimum as f64);
        let rate = after(self.started, self.grace.max(needed));
        if rate < idle {
            (rate, Rule::Rate)
        } else {
            (idle, Rule::Idle)
        }
    }

    /// The next piece of `body`, or `None` at its end. A body that is still sending when its
    /// rate falls below the minimum is cut off when the grace ends, not only at its next piece.
    pub(crate) async fn next<B>(&mut self, body: &mut B) -> Result<Option<Bytes>, UploadError>
    where
        B: hyper::body::Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        loop {
            let frame = tokio::select! {
                biased;
                frame = body.frame() => frame,
                () = self.timer.as_mut() => {
                    let (deadline, rule) = self.deadline();
                    if deadline > Instant::now() {
                        // Pieces came since the timer was set: the deadline moved on.
                        self.timer.as_mut().reset(deadline);
                        continue;
                    }
                    return Err(match rule {
                        Rule::Rate => self.too_slow(),
                        Rule::Idle => UploadError::Stalled(self.idle),
                    });
                }
            };
            let frame = match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(UploadError::Interrupted(e.to_string())),
                Some(Ok(frame)) => frame,
            };
            self.latest = Instant::now();
            let Ok(data) = frame.into_data() else {
                continue;
            };
            self.received += data.len() as u64;
            let elapsed = self.latest - self.started;
            if elapsed > self.grace
                && (self.received as f64 / elapsed.as_secs_f64()) < self.minimum as f64
            {
                return Err(self.too_slow());
            }
            return Ok(Some(data));
        }
    }

    fn too_slow(&self) -> UploadError {
        let elapsed = self.started.elapsed().as_secs_f64().max(f64::EPSILON);
        UploadError::TooSlow {
            rate: (self.received as f64 / elapsed) as u64,
            minimum: self.minimum,
        }
    }
}

/// `duration` after `instant`, or a century after it where that would not fit.
fn after(instant: Instant, duration: Duration) -> Instant {
    instant
        .checked_add(duration)
        .unwrap_or_else(|| instant + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// The staging area of a run: uploads in progress and accepted files, by pair.
pub(crate) struct Staging {
    root: PathBuf,
    /// One lock per pair, held while a received file is put in place and while a commit builds,
    /// records and moves its tree: an upload landing in a pair's directory as a commit removes
    /// it would be lost. Pairs never wait for each other.
    pairs: std::sync::Mutex<PairLocks>,
}

/// (plugin, node label) -> the pair's lock; only pairs the run expects get one.
type PairLocks = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

/// A pair's lock, held for as long as it lives.
pub(crate) type PairGuard = tokio::sync::OwnedMutexGuard<()>;

impl Staging {
    /// The staging area of `run_dir`. Uploads a previous process left half-done are deleted:
    /// their agents never got a 201 and send them again.
    pub(crate) fn open(run_dir: &RunDir) -> std::io::Result<Self> {
        let staging = Staging {
            root: run_dir.staging(),
            pairs: std::sync::Mutex::new(HashMap::new()),
        };
        let incoming = staging.incoming();
        if incoming.exists() {
            std::fs::remove_dir_all(&incoming)?;
        }
        std::fs::create_dir_all(&incoming)?;
        Ok(staging)
    }

    /// The staging area itself.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of one pair's accepted files.
    pub(crate) fn pair_dir(&self, plugin: &str, label: &str) -> PathBuf {
        self.root.join(plugin).join(label)
    }

    /// Waits for the lock of a pair: held while a received file is put in place, and while a
    /// commit builds, records and moves the pair's tree (see the crate's `commit`).
    pub(crate) async fn lock_pair(&self, plugin: &str, label: &str) -> PairGuard {
        let lock = self
            .pairs
            .lock()
            .unwrap()
            .entry((plugin.to_owned(), label.to_owned()))
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    fn incoming(&self) -> PathBuf {
        // A dot keeps it apart from plugin names, which start with a letter or digit.
        self.root.join(".incoming")
    }
    /// Streams `body` into the staging area, checking size, pace and digest.
    pub(crate) async fn receive_file<B>(
        &self,
        plugin: &str,
        label: &str,
        name: &ArtifactName,
        expected_sha256: &str,
        mut body: B,
        limits: &ServerLimits,
    ) -> Result<u64, UploadError>
    where
        B: hyper::body::Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let temporary = self
            .incoming()
            .join(format!("{:016x}", rand::random::<u64>()));
        let size = write_verified(&mut body, &temporary, expected_sha256, limits).await?;
        let staging = self.pair_dir(plugin, label);
        let _settling = self.lock_pair(plugin, label).await;
        let placed = std::fs::create_dir_all(&staging).and_then(|()| {
            std::fs::rename(
                &temporary,
                staging.join(StagedFile::file_name(name, size, expected_sha256)),
            )
        });
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&temporary);
            return Err(e.into());
        }
        Ok(size)
    }

    /// Deletes a staged upload that arrived after its pair's result was completed, and the pair's
    /// staging folder if that leaves it empty. A file the commit already took is not there.
    /// Call it holding the pair's lock ([`Staging::lock_pair`]).
    pub(crate) fn discard(
        &self,
        plugin: &str,
        label: &str,
        name: &ArtifactName,
        size: u64,
        sha256: &str,
    ) -> std::io::Result<()> {
        let staging = self.pair_dir(plugin, label);
        match std::fs::remove_file(staging.join(StagedFile::file_name(name, size, sha256))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        // Fails, as it should, while other uploads wait there.
        let _ = std::fs::remove_dir(&staging);
        Ok(())
    }
}

/// An accepted upload waiting for its commit. Its file name carries what the commit checks, so
/// nothing beside the file has to be written or kept in step with it.
/// Its name is `<sha-256 of the artifact name>.<size>.<sha-256>`: artifact names may be longer
/// than a file name can be.
pub(crate) struct StagedFile;

impl StagedFile {
    /// The part of a staged file's name that stands for the artifact's name.
    pub(crate) fn name_key(name: &ArtifactName) -> String {
        hex::encode(Sha256::digest(name.as_str().as_bytes()))
    }

    /// The staged file's name.
    pub(crate) fn file_name(name: &ArtifactName, size: u64, sha256: &str) -> String {
        format!("{}.{size}.{sha256}", Self::name_key(name))
    }

    /// The staged files of one pair by name key, each with its versions' size and sha-256;
    /// none if nothing was uploaded.
    pub(crate) fn list(staging: &Path) -> std::io::Result<HashMap<String, Vec<(u64, String)>>> {
        let mut staged: HashMap<String, Vec<(u64, String)>> = HashMap::new();
        for file_name in read_dir_names(staging)? {
            let mut parts = file_name.split('.');
            if let (Some(name_key), Some(Ok(size)), Some(sha256), None) = (
                parts.next(),
                parts.next().map(str::parse),
                parts.next(),
                parts.next(),
            ) {
                staged
                    .entry(name_key.to_owned())
                    .or_default()
                    .push((size, sha256.to_owned()));
            }
        }
        Ok(staged)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::channel::{Channel, Sender};

    use super::*;

    fn limits(idle: u64, minimum: u64, grace: u64) -> ServerLimits {
        ServerLimits {
            idle_timeout_seconds: idle,
            min_upload_bytes_per_second: minimum,
            upload_grace_seconds: grace,
            ..ServerLimits::default()
        }
    }

    /// Reads `body` under `limits` to its end or its first error; with the bytes read and
    /// the time it took.
    async fn read(
        limits: &ServerLimits,
        mut body: Channel<Bytes>,
    ) -> (Result<(), UploadError>, u64, Duration) {
        let started = Instant::now();
        let mut pace = Pace::new(limits);
        let mut read = 0;
        let result = loop {
            match pace.next(&mut body).await {
                Ok(Some(data)) => read += data.len() as u64,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        (result, read, started.elapsed())
    }

    /// Sends `pieces` of `size` bytes, `every` apart (the first at once), then waits `then`
    /// before ending the body.
    fn send(
        mut sender: Sender<Bytes>,
        pieces: usize,
        size: usize,
        every: Duration,
        then: Duration,
    ) {
        tokio::spawn(async move {
            for i in 0..pieces {
                if i > 0 {
                    tokio::time::sleep(every).await;
                }
                if sender
                    .send_data(Bytes::from(vec![b'x'; size]))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            tokio::time::sleep(then).await;
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_the_pace_long_past_the_first_deadline_is_read_whole() {
        // 32 KiB/s for two minutes, four times the idle timeout and twelve times the grace.
        let (sender, body) = Channel::new(1);
        send(sender, 61, 64 << 10, Duration::from_secs(2), Duration::ZERO);
        let (result, read, took) = read(&limits(30, 16 << 10, 10), body).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(read, 61 * (64 << 10));
        assert_eq!(took.as_secs(), 120);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_silent_for_the_idle_timeout_is_cut_off_then() {
        // No minimum rate: only the idle timeout, counted from the last piece (at 5 s).
        let (sender, body) = Channel::new(1);
        send(
            sender,
            2,
            1,
            Duration::from_secs(5),
            Duration::from_secs(3600),
        );
        let (result, read, took) = read(&limits(30, 0, 10), body).await;
        assert!(
            matches!(result, Err(UploadError::Stalled(d)) if d.as_secs() == 30),
            "{result:?}"
        );
        assert_eq!((read, took.as_secs()), (2, 35));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_whose_rate_runs_out_is_cut_off_then_not_at_its_idle_timeout() {
        // 320 KiB at once, then silence: at 16 KiB/s that lasts 20 s, before the 30 s idle
        // timeout ends.
        let (sender, body) = Channel::new(1);
        send(
            sender,
            1,
            320 << 10,
            Duration::ZERO,
            Duration::from_secs(3600),
        );
        let (result, read, took) = read(&limits(30, 16 << 10, 10), body).await;
        assert!(
            matches!(result, Err(UploadError::TooSlow { minimum, .. }) if minimum == 16 << 10),
            "{result:?}"
        );
        assert_eq!((read, took.as_secs()), (320 << 10, 20));
    }

    #[test]
    fn pieces_are_held_until_they_are_worth_a_write_and_tiny_ones_cannot_pile_up() {
        let mut held = Held::default();
        // Tiny pieces, as a client sending one-byte TLS records makes them: written after
        // `Held::PIECES` of them, not after `Held::BYTES` bytes.
        for i in 1..Held::PIECES {
            assert!(!held.hold(Bytes::from_static(b"x")), "held {i} pieces");
        }
        assert!(held.hold(Bytes::from_static(b"x")));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("written");
        let mut file = std::fs::File::create(&path).unwrap();
        held.write_to(&mut file).unwrap();
        // Large pieces: written once they reach `Held::BYTES`.
        let piece = Bytes::from(vec![b'y'; Held::BYTES / 4]);
        for _ in 1..4 {
            assert!(!held.hold(piece.clone()));
        }
        assert!(held.hold(piece));
        held.write_to(&mut file).unwrap();
        held.write_to(&mut file).unwrap();

        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), Held::PIECES + Held::BYTES);
        assert!(written[..Held::PIECES].iter().all(|b| *b == b'x'));
        assert!(written[Held::PIECES..].iter().all(|b| *b == b'y'));
    }
}
