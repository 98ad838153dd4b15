//! Asking a run for its status, following it to its end, and fetching its bundle: the same for
//! every kind of run. A run that is being served answers on its operator listener (a local
//! run's on loopback, a Kubernetes run's through port-forward, a fleet run's on the fleet's
//! address); a local run whose aggregator is gone answers from its run directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use factbuoy_aggregator::RunDir;
use factbuoy_kubernetes::ClusterRef;
use factbuoy_protocol::Client;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::types::{ResultStatus, RunStatus, StatusDocument, wire_name};

use crate::error::{Error, Result};
use crate::records::{LocalRun, RunRecord};
use crate::state::StateDir;

/// Where a run's status and bundle come from.
pub enum Source {
    /// A run served elsewhere: its operator listener.
    Served(Client),
    /// A fleet run: its operator listener on the fleet's host, which closes a while after the
    /// run ends (`fleet serve --serve-finished-for`).
    Fleet(Client),
    /// A local run: its aggregator while it serves, its run directory once it is gone.
    Local(LocalRun),
}

impl Source {
    /// The source of `record`'s status; `cluster` overrides how a Kubernetes run's cluster is
    /// reached. For a Kubernetes run this waits for its aggregator pod to publish its CA.
    pub async fn of(record: &RunRecord, state: &StateDir, cluster: &ClusterRef) -> Result<Source> {
        Ok(match record {
            RunRecord::Local(local) => Source::Local(local.clone()),
            RunRecord::Kubernetes(kube) => {
                let connected = factbuoy_kubernetes::connect(&kube.cluster(cluster))
                    .await
                    .map_err(anyhow::Error::from)?;
                Source::Served(
                    factbuoy_kubernetes::reach::operator_client(
                        &connected,
                        &kube.namespace,
                        &kube.run_id,
                        &state.kubernetes_run(&kube.run_id),
                    )
                    .await?,
                )
            }
            RunRecord::Fleet(fleet) => Source::Fleet(fleet.operator()?),
        })
    }

    /// The run's status now.
    pub async fn status(&self) -> Result<StatusDocument> {
        match self {
            Source::Served(client) | Source::Fleet(client) => {
                Ok(client.status().await.map_err(|e| self.listener_error(e))?)
            }
            Source::Local(local) => {
                // A retired run's credentials are gone with its aggregator.
                let dir = RunDir::new(&local.run_dir);
                if let Some(document) = dir.load_final_status().map_err(anyhow::Error::from)? {
                    return Ok(document);
                }
                match local_operator(local)?.status().await {
                    Ok(document) => Ok(document),
                    Err(e) if e.is_retryable() => Ok(local_status(&local.run_dir)?.document),
                    Err(e) => Err(anyhow::Error::from(e).into()),
                }
            }
        }
    }

    /// What an error of a served run's operator listener tells the user: a fleet closes a run's
    /// listeners a while after the run ends, and the bundle is then on the fleet's host; a
    /// bundle pruned since is gone.
    fn listener_error(&self, error: factbuoy_protocol::ClientError) -> anyhow::Error {
        // A bundle removed after the run (pruned): the aggregator's sentence says it all.
        if let factbuoy_protocol::ClientError::Status {
            status, message, ..
        } = &error
            && status.as_u16() == 410
        {
            return anyhow::anyhow!("{}", factbuoy_protocol::text::printable(message));
        }
        match self {
            Source::Fleet(_) => fleet_gone(error),
            Source::Served(_) | Source::Local(_) => error.into(),
        }
    }

    /// Where the run writes its bundle, for a local run.
    pub fn bundle_dir(&self) -> Option<PathBuf> {
        match self {
            Source::Local(local) => RunDir::new(&local.run_dir)
                .load_config()
                .ok()
                .map(|c| c.bundle_dir),
            Source::Served(_) | Source::Fleet(_) => None,
        }
    }

    /// Asks for the status every `every` until the run has ended (with or without a bundle),
    /// showing each document to `on_status`. A served run that does not end within
    /// `give_up_after` is given up on, with `stuck` saying where to look. Errors a retry may
    /// cure (a tunnel or a pod that blinks) are retried.
    pub async fn follow(
        &self,
        every: Duration,
        give_up_after: Option<(Duration, &str)>,
        on_status: &mut dyn FnMut(&StatusDocument),
    ) -> Result<StatusDocument> {
        let give_up = give_up_after.map(|(after, _)| tokio::time::Instant::now() + after);
        loop {
            if let (Some(at), Some((after, stuck))) = (give_up, give_up_after)
                && tokio::time::Instant::now() > at
            {
                return Err(anyhow::anyhow!(
                    "no end from the run's aggregator {}s after it started; {stuck}",
                    after.as_secs()
                )
                .into());
            }
            match self.status().await {
                Ok(document) => {
                    on_status(&document);
                    if ended(document.status) {
                        return Ok(document);
                    }
                }
                Err(Error::Other(e))
                    if e.downcast_ref::<factbuoy_protocol::ClientError>()
                        .is_some_and(|e| e.is_retryable()) =>
                {
                    tracing::warn!("asking for the run's status: {e}");
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Downloads the bundle of the run `document` describes into `out` (created if missing),
    /// resuming a partial download there, and checks it against the run's size and digest.
    pub async fn fetch_bundle(&self, document: &StatusDocument, out: &Path) -> Result<Fetched> {
        let Some(tar) = &document.tar_info else {
            return Err(if ended(document.status) {
                anyhow::anyhow!(
                    "the run ended without a bundle: {}",
                    document.error.as_deref().unwrap_or("no reason was given")
                )
                .into()
            } else {
                Error::NotReady(format!(
                    "the bundle is not ready: the run is {}",
                    wire_name(&document.status)
                ))
            });
        };
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let path = out.join(&tar.name);
        let resumed_from = match self {
            Source::Served(client) | Source::Fleet(client) => {
                client
                    .download_bundle(&path)
                    .await
                    .map_err(|e| self.listener_error(e))?
                    .resumed_from
            }
            Source::Local(local) => match served_download(local, &path).await {
                Some(resumed_from) => resumed_from,
                // The aggregator has gone (a local run's goes once the run has ended): its
                // bundle is a file on this host.
                None => {
                    let source = self.bundle_dir().unwrap_or_default().join(&tar.name);
                    copy_bundle(&source, &path)?;
                    0
                }
            },
        };
        let sha256 = factbuoy_protocol::digest::sha256_file(&path).map_err(anyhow::Error::from)?;
        let size = std::fs::metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        if size != tar.size || sha256 != tar.sha256 {
            return Err(anyhow::anyhow!(
                "the bundle {} does not match the run's ({} bytes, sha256 {}); delete it and retrieve again",
                path.display(),
                tar.size,
                tar.sha256
            )
            .into());
        }
        Ok(Fetched {
            path,
            size,
            resumed_from,
            sha256,
        })
    }
}

/// A fleet run's listener that does not take connections: the fleet stopped, or it stopped
/// serving the run a while after it ended. Says where the bundle is then. The error stays a
/// [`ClientError`](factbuoy_protocol::ClientError) underneath, retryable for `follow`.
fn fleet_gone(error: factbuoy_protocol::ClientError) -> anyhow::Error {
    let gone = matches!(error, factbuoy_protocol::ClientError::Connect { .. });
    let error = anyhow::Error::from(error);
    if gone {
        error.context(
            "the fleet does not serve this run: either the fleet is stopped, or the run ended longer \
             ago than `fleet serve --serve-finished-for` (an hour by default); its bundle is in \
             bundles/ of the fleet's directory, on the fleet's host",
        )
    } else {
        error
    }
}

/// A bundle fetched into a folder.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Fetched {
    /// Where it is.
    pub path: PathBuf,
    /// Its size.
    pub size: u64,
    /// The bytes of an earlier partial download that were kept.
    pub resumed_from: u64,
    /// Its sha-256, lower-case hex, checked against the run's.
    pub sha256: String,
}

/// A run that has ended.
#[derive(Debug)]
pub struct Finished {
    /// Its final status.
    pub status: StatusDocument,
    /// Where its bundle is, if it wrote one.
    pub bundle: Option<PathBuf>,
    /// The folder the bundle was written or downloaded into.
    pub bundle_dir: PathBuf,
}

impl Finished {
    /// Whether the run completed and every result in it passed.
    pub fn all_passed(&self) -> bool {
        all_passed(&self.status)
    }
}

/// Whether a run completed and every result in it passed.
pub fn all_passed(document: &StatusDocument) -> bool {
    document.status == RunStatus::Complete
        && document
            .plugins
            .iter()
            .all(|p| p.result_status == Some(ResultStatus::Passed))
}

/// Follows a served run to its end and downloads its bundle into `out`; `retrieve` is the
/// command that resumes a download cut short.
pub(crate) async fn follow_and_fetch(
    source: &Source,
    every: Duration,
    give_up_after: (Duration, &str),
    out: &Path,
    retrieve: &str,
    on_status: &mut dyn FnMut(&StatusDocument),
) -> Result<Finished> {
    let status = source.follow(every, Some(give_up_after), on_status).await?;
    let bundle = match &status.tar_info {
        Some(_) => Some(
            source
                .fetch_bundle(&status, out)
                .await
                .map_err(anyhow::Error::from)
                .with_context(|| {
                    format!(
                        "downloading the bundle into {}; `{retrieve}` resumes it",
                        out.display()
                    )
                })?
                .path,
        ),
        None => None,
    };
    Ok(Finished {
        status,
        bundle,
        bundle_dir: out.to_owned(),
    })
}

/// Whether a run has ended, with or without a bundle.
pub fn ended(status: RunStatus) -> bool {
    matches!(status, RunStatus::Complete | RunStatus::Failed)
}

/// The operator client of a local run.
pub(crate) fn local_operator(run: &LocalRun) -> anyhow::Result<Client> {
    let (ca, cert, key) = RunDir::new(&run.run_dir).operator_files();
    let identity = Identity::from_files(&ca, &cert, &key)?;
    Ok(Client::new(
        &format!("127.0.0.1:{}", run.operator_address.port()),
        &identity,
    )?
    .with_timeout(Duration::from_secs(10)))
}

/// How long a local run's operator listener may take to accept a connection before its
/// process is taken for gone.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(1);

/// A local run's status as its run directory tells it, without asking its aggregator.
#[derive(Debug)]
pub struct LocalStatus {
    /// Its status: the final one of a retired run, else the saved one; failed, saying why and
    /// what to do, when it was abandoned.
    pub document: StatusDocument,
    /// The run had not ended and its operator listener takes no connection: its process
    /// ended before the run did (killed?), and nothing will end it but a new aggregator.
    pub abandoned: bool,
}

/// The state of the local run in `run_dir`, the one `status`, `runs` and `prune` all tell.
pub fn local_status(run_dir: &Path) -> anyhow::Result<LocalStatus> {
    let dir = RunDir::new(run_dir);
    if let Some(document) = dir.load_final_status()? {
        return Ok(LocalStatus {
            document,
            abandoned: false,
        });
    }
    let mut document = dir.saved_status()?;
    // The configuration holds the port the listener bound at its first start.
    let listening = || {
        dir.load_config().is_ok_and(|config| {
            std::net::TcpStream::connect_timeout(&config.operator_listen, LIVENESS_TIMEOUT).is_ok()
        })
    };
    let abandoned = !ended(document.status) && !listening();
    if abandoned {
        document.status = RunStatus::Failed;
        document.error = Some(format!(
            "abandoned: the run's process ended before the run did (killed?); `factbuoy aggregator serve --run-dir {} --exit-when-complete` ends it with what was collected and writes its bundle; `factbuoy prune --all` removes it, with every other run that ended without a bundle",
            run_dir.display()
        ));
    }
    Ok(LocalStatus {
        document,
        abandoned,
    })
}

/// Downloads a local run's bundle from its aggregator while it still serves it, resuming a
/// partial download; `None` once it does not (the run was retired, or its process is gone).
async fn served_download(run: &LocalRun, dest: &Path) -> Option<u64> {
    if RunDir::new(&run.run_dir)
        .load_final_status()
        .ok()?
        .is_some()
    {
        return None;
    }
    match local_operator(run).ok()?.download_bundle(dest).await {
        Ok(downloaded) => Some(downloaded.resumed_from),
        Err(e) => {
            tracing::debug!("downloading from the run's aggregator: {e}; copying its file");
            None
        }
    }
}

/// Copies a finished local run's bundle from where the run wrote it, unless that is `dest`.
fn copy_bundle(source: &Path, dest: &Path) -> anyhow::Result<()> {
    let same =
        std::fs::canonicalize(source).ok() == std::fs::canonicalize(dest).ok() && dest.exists();
    if !same {
        std::fs::copy(source, dest).with_context(|| {
            format!(
                "copying the run's bundle from {} (was it moved or deleted?)",
                source.display()
            )
        })?;
    }
    Ok(())
}
