//! A history opened: its index brought up to date, one origin chosen (or each origin apart),
//! its bundles in order.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde::Serialize;

use factbuoy_bundle::reader::Bundle;

use super::error::{HistoryError, OriginCount};
use super::index::{self, Update};
use super::times::parse_time;
use crate::meta::run_first;
use crate::origin::{NamedOrigin, UNRECORDED};

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
    /// The origin in words: which fleet, cluster or host ([`NamedOrigin`]).
    pub label: String,
    /// The bundles, oldest first.
    pub bundles: Vec<HistoryBundle>,
}

impl History {
    /// The history of `dir` (its index at `index`, brought up to date), of `origin` when
    /// given (`kind:id`, or the start of one: `fleet:9c1f`), else of the only origin its
    /// bundles have.
    pub fn open(dir: &Path, index: &Path, origin: Option<&str>) -> Result<History, HistoryError> {
        let (connection, update) = index::update(dir, index)?;
        let chosen = chosen(dir, index, &connection, origin)?;
        match &chosen[..] {
            [one] => History::of(dir, index, connection, update, &one.origin),
            _ => Err(HistoryError::MixedOrigins {
                dir: dir.to_owned(),
                origins: chosen,
            }),
        }
    }

    /// A history per origin of `dir`'s bundles (of those `origin` names when given, as
    /// [`History::open`] takes it), in the order of their origins: a directory holding a
    /// cluster's runs and a fleet's is two histories, never one.
    pub fn open_each(
        dir: &Path,
        index: &Path,
        origin: Option<&str>,
    ) -> Result<Vec<History>, HistoryError> {
        let (connection, update) = index::update(dir, index)?;
        let chosen = chosen(dir, index, &connection, origin)?;
        let mut histories = Vec::with_capacity(chosen.len());
        let mut first = Some(connection);
        for one in &chosen {
            // The index is brought up to date once; each further history reads it through a
            // connection of its own.
            let connection = match first.take() {
                Some(connection) => connection,
                None => index::reopen(index)?,
            };
            histories.push(History::of(
                dir,
                index,
                connection,
                update.clone(),
                &one.origin,
            )?);
        }
        Ok(histories)
    }

    /// The history of `origin` (as listed: `unrecorded` for none) in the index `connection`.
    fn of(
        dir: &Path,
        index: &Path,
        connection: Connection,
        update: Update,
        origin: &str,
    ) -> Result<History, HistoryError> {
        let failed = |cause| HistoryError::Index {
            index: index.to_owned(),
            cause,
        };
        let stored = if origin == UNRECORDED { "" } else { origin };
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
        // Named from its latest run, which says most of where it ran (a fleet's names); a
        // bundle that cannot be read now is still named by its kind and id.
        let latest = bundles
            .last()
            .and_then(|b| Bundle::open(&b.bundle).ok())
            .and_then(|b| run_first(&b).ok());
        let label = NamedOrigin::of_stored(origin, latest.as_ref()).label;
        Ok(History {
            dir: dir.to_owned(),
            connection,
            update,
            origin: origin.to_owned(),
            label,
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

/// The origins of the index's bundles that `asked` names (the one named whole, else those it
/// starts; all without it), with their numbers of bundles; an error when there is none.
fn chosen(
    dir: &Path,
    index: &Path,
    connection: &Connection,
    asked: Option<&str>,
) -> Result<Vec<OriginCount>, HistoryError> {
    let failed = |cause| HistoryError::Index {
        index: index.to_owned(),
        cause,
    };
    let mut origins: Vec<OriginCount> = Vec::new();
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
            origin: if origin.is_empty() {
                UNRECORDED.to_owned()
            } else {
                origin
            },
            bundles: row.get::<_, i64>(1).map_err(failed)? as usize,
        });
    }
    let chosen: Vec<OriginCount> = match asked {
        Some(asked) => match origins.iter().find(|o| o.origin == asked) {
            Some(exact) => vec![exact.clone()],
            None => origins
                .into_iter()
                .filter(|o| o.origin.starts_with(asked))
                .collect(),
        },
        None => origins,
    };
    if chosen.is_empty() {
        return Err(HistoryError::Empty {
            dir: dir.to_owned(),
            origin: asked.map(str::to_owned),
        });
    }
    Ok(chosen)
}
