//! A history opened: its index brought up to date, one origin chosen, its bundles in order.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde::Serialize;

use super::error::{HistoryError, OriginCount};
use super::index::{self, Update};
use super::times::parse_time;

/// One bundle of a history.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryBundle {
    /// The bundle's path.
    pub bundle: PathBuf,
    /// Its run.
    pub run_id: String,
    /// When its run was created, RFC 3339 UTC.
    pub created: String,
    #[serde(skip)]
    pub(crate) seq: i64,
    #[serde(skip)]
    pub(crate) created_ns: i64,
}

/// A directory's bundles of one origin, in the order their runs were created, with the index
/// that knows their facts.
pub struct History {
    dir: PathBuf,
    pub(crate) connection: Connection,
    /// What bringing the index up to date did.
    pub update: Update,
    /// The origin read (`unrecorded` for bundles that record none).
    pub origin: String,
    /// The bundles, oldest first.
    pub bundles: Vec<HistoryBundle>,
}

impl History {
    /// The history of `dir` (its index at `index`, brought up to date), of `origin` when
    /// given (`kind:id`, or the start of one: `fleet:9c1f`), else of the only origin its
    /// bundles have.
    pub fn open(dir: &Path, index: &Path, origin: Option<&str>) -> Result<History, HistoryError> {
        let (connection, update) = index::update(dir, index)?;
        let failed = |cause| HistoryError::Index {
            index: index.to_owned(),
            cause,
        };
        let mut origins: Vec<OriginCount> = Vec::new();
        {
            let mut rows = connection
                .prepare(
                    "SELECT origin, count(*) FROM bundles WHERE error IS NULL AND copy_of IS NULL
                     GROUP BY origin ORDER BY origin",
                )
                .map_err(failed)?;
            let mut rows = rows.query([]).map_err(failed)?;
            while let Some(row) = rows.next().map_err(failed)? {
                let origin: String = row.get(0).map_err(failed)?;
                origins.push(OriginCount {
                    origin: shown_origin(&origin),
                    bundles: row.get::<_, i64>(1).map_err(failed)? as usize,
                });
            }
        }
        let chosen = match origin {
            // The origin named whole, else those it starts.
            Some(asked) => match origins.iter().find(|o| o.origin == asked) {
                Some(exact) => vec![exact],
                None => origins
                    .iter()
                    .filter(|o| o.origin.starts_with(asked))
                    .collect::<Vec<_>>(),
            },
            None => origins.iter().collect(),
        };
        let origin = match chosen[..] {
            [one] => one.origin.clone(),
            [] => {
                return Err(HistoryError::Empty {
                    dir: dir.to_owned(),
                    origin: origin.map(str::to_owned),
                });
            }
            _ => {
                return Err(HistoryError::MixedOrigins {
                    dir: dir.to_owned(),
                    origins: chosen.into_iter().cloned().collect(),
                });
            }
        };
        let stored = if origin == UNRECORDED { "" } else { &origin };
        let mut bundles = Vec::new();
        {
            let mut rows = connection
                .prepare(
                    "SELECT seq, name, run_id, created, created_ns FROM bundles
                     WHERE error IS NULL AND copy_of IS NULL AND origin = ?1 ORDER BY seq",
                )
                .map_err(failed)?;
            let mut rows = rows.query([stored]).map_err(failed)?;
            while let Some(row) = rows.next().map_err(failed)? {
                bundles.push(HistoryBundle {
                    seq: row.get(0).map_err(failed)?,
                    bundle: dir.join(row.get::<_, String>(1).map_err(failed)?),
                    run_id: row.get(2).map_err(failed)?,
                    created: row.get(3).map_err(failed)?,
                    created_ns: row.get::<_, Option<i64>>(4).map_err(failed)?.unwrap_or(0),
                });
            }
        }
        Ok(History {
            dir: dir.to_owned(),
            connection,
            update,
            origin,
            bundles,
        })
    }

    /// The directory of bundles.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The latest bundle from `time` or before: RFC 3339, or a date, meaning the end of that
    /// day UTC ("which nodes had it on 1 May").
    pub fn as_of(&self, time: &str) -> Result<&HistoryBundle, HistoryError> {
        let at = parse_time(time, true)?;
        self.bundles
            .iter()
            .rev()
            .find(|b| b.created_ns <= at)
            .ok_or_else(|| HistoryError::NothingBefore {
                dir: self.dir.clone(),
                time: time.to_owned(),
                first: self.bundles[0].created.clone(),
            })
    }

    /// The first and the last bundle from `since` (a time as [`History::as_of`] takes it, a
    /// date meaning its start) on; both the last bundle when it is the only one.
    pub fn since(&self, since: &str) -> Result<(&HistoryBundle, &HistoryBundle), HistoryError> {
        let since = parse_time(since, false)?;
        let last = self.bundles.last().expect("a history has a bundle");
        let first = self
            .bundles
            .iter()
            .find(|b| b.created_ns >= since)
            .unwrap_or(last);
        Ok((first, last))
    }
}

pub(crate) const UNRECORDED: &str = "unrecorded";

fn shown_origin(stored: &str) -> String {
    if stored.is_empty() {
        UNRECORDED.to_owned()
    } else {
        stored.to_owned()
    }
}
