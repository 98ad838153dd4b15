//! A history at a glance, for the report: how many facts changed each day, how many nodes
//! appeared and stopped reporting, and the facts that changed most.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::error::HistoryError;
use super::open::History;
use crate::drift::IgnoreList;
use crate::origin::UNRECORDED;

/// The facts listed as changing most.
const TOP_FACTS: usize = 20;

/// A history's changes by day, and the facts that changed most.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// How many runs the history has.
    pub runs: usize,
    /// Each day with a run, oldest first.
    pub days: Vec<Day>,
    /// The facts that changed most, most first: at most 20.
    pub top: Vec<TopFact>,
}

/// One day of a history (UTC).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Day {
    /// `2026-03-01`.
    pub date: String,
    /// Runs created that day.
    pub runs: usize,
    /// Facts that changed (or were added or removed) in those runs, over all nodes.
    pub changes: usize,
    /// Nodes with at least one change.
    pub nodes_changed: usize,
    /// Nodes named for the first time (not counted on the history's first day).
    pub appeared: usize,
    /// Nodes named for the last time the run before (not counted after the last run).
    pub stopped: usize,
}

/// A fact that changed often.
#[derive(Debug, Clone, Serialize)]
pub struct TopFact {
    /// Its plugin.
    pub plugin: String,
    /// Its path.
    pub path: String,
    /// How many times it changed, over all nodes.
    pub changes: usize,
    /// On how many nodes.
    pub nodes: usize,
}

impl History {
    /// The history's [`Timeline`], but for the facts `ignore` leaves out. A fact's first value
    /// on a node (its first report of that plugin) is not a change; a fact that appears later
    /// is.
    pub fn timeline(&self, ignore: &IgnoreList) -> Result<Timeline, HistoryError> {
        let failed = |cause| HistoryError::Index {
            index: self.update.index.clone(),
            cause,
        };
        let query = |sql: &str| self.connection.prepare(sql).map_err(failed);
        let place: HashMap<i64, usize> = self
            .bundles
            .iter()
            .enumerate()
            .map(|(i, b)| (b.seq, i))
            .collect();
        let day_of: Vec<&str> = self
            .bundles
            .iter()
            .map(|b| b.created.get(..10).unwrap_or(""))
            .collect();
        let mut days: BTreeMap<&str, Day> = BTreeMap::new();
        for day in &day_of {
            days.entry(day).or_default().runs += 1;
        }
        let origin = if self.origin == UNRECORDED {
            ""
        } else {
            &self.origin
        };
        let mut ours: HashSet<u32> = HashSet::new();
        let mut statement = query("SELECT id FROM nodes WHERE origin = ?1")?;
        let mut rows = statement.query([origin]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            ours.insert(row.get(0).map_err(failed)?);
        }

        // Nodes that came and went: the first and last run naming each.
        let mut statement = query("SELECT node, min(seq), max(seq) FROM snapshots GROUP BY node")?;
        let mut rows = statement.query([]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            let node: u32 = row.get(0).map_err(failed)?;
            if !ours.contains(&node) {
                continue;
            }
            let (first, last): (i64, i64) =
                (row.get(1).map_err(failed)?, row.get(2).map_err(failed)?);
            if let Some(&first) = place.get(&first).filter(|&&p| p > 0) {
                days.entry(day_of[first]).or_default().appeared += 1;
            }
            if let Some(&last) = place.get(&last).filter(|&&p| p + 1 < day_of.len()) {
                days.entry(day_of[last + 1]).or_default().stopped += 1;
            }
        }

        // The run in which each node first reported each source: its values there are the
        // node's first, not changes.
        let mut first_report: HashMap<(u32, u32), i64> = HashMap::new();
        let mut statement =
            query("SELECT node, source, min(seq) FROM reported GROUP BY node, source")?;
        let mut rows = statement.query([]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            first_report.insert(
                (row.get(0).map_err(failed)?, row.get(1).map_err(failed)?),
                row.get(2).map_err(failed)?,
            );
        }
        let mut paths: HashMap<u32, (u32, String, bool)> = HashMap::new();
        // Whether a fact that changes on its own is counted: kept apart by the index's
        // `build`, they are read only then.
        let mut volatile_counted = false;
        let mut statement = query("SELECT id, source, path, volatile FROM paths")?;
        let mut rows = statement.query([]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            let path: String = row.get(2).map_err(failed)?;
            let ignored = ignore.ignores(&path);
            volatile_counted |= !ignored && row.get::<_, bool>(3).map_err(failed)?;
            paths.insert(
                row.get(0).map_err(failed)?,
                (row.get(1).map_err(failed)?, path, ignored),
            );
        }

        // By node then path (the order of `changes`, and the one asked of the volatile
        // facts' table; a fact is in one of them): a day's nodes and a fact's nodes are
        // counted once each.
        let mut by_fact: HashMap<u32, (usize, usize)> = HashMap::new();
        let mut day_nodes: HashSet<(u32, usize)> = HashSet::new();
        let mut last_counted: Option<(u32, u32)> = None;
        let tables: &[&str] = if volatile_counted {
            &[
                "SELECT node, path, seq FROM changes",
                "SELECT node, path, seq FROM volatile_changes ORDER BY node, path, seq",
            ]
        } else {
            &["SELECT node, path, seq FROM changes"]
        };
        for sql in tables {
            let mut statement = query(sql)?;
            let mut rows = statement.query([]).map_err(failed)?;
            while let Some(row) = rows.next().map_err(failed)? {
                let (node, path, seq): (u32, u32, i64) = (
                    row.get(0).map_err(failed)?,
                    row.get(1).map_err(failed)?,
                    row.get(2).map_err(failed)?,
                );
                let Some((source, _, ignored)) = paths.get(&path) else {
                    continue;
                };
                if *ignored
                    || !ours.contains(&node)
                    || first_report.get(&(node, *source)) == Some(&seq)
                {
                    continue;
                }
                let Some(&at) = place.get(&seq) else {
                    continue;
                };
                let day = days.entry(day_of[at]).or_default();
                day.changes += 1;
                if day_nodes.insert((node, at)) {
                    day.nodes_changed += 1;
                }
                let fact = by_fact.entry(path).or_default();
                fact.0 += 1;
                if last_counted != Some((node, path)) {
                    fact.1 += 1;
                    last_counted = Some((node, path));
                }
            }
        }
        let sources: Vec<String> = {
            let mut statement = query("SELECT name FROM sources ORDER BY id")?;
            statement
                .query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect())
                .map_err(failed)?
        };
        let mut top: Vec<TopFact> = by_fact
            .into_iter()
            .map(|(path, (changes, nodes))| {
                let (source, path, _) = &paths[&path];
                TopFact {
                    plugin: sources.get(*source as usize).cloned().unwrap_or_default(),
                    path: path.clone(),
                    changes,
                    nodes,
                }
            })
            .collect();
        top.sort_by(|a, b| {
            b.changes
                .cmp(&a.changes)
                .then(b.nodes.cmp(&a.nodes))
                .then_with(|| (&a.plugin, &a.path).cmp(&(&b.plugin, &b.path)))
        });
        top.truncate(TOP_FACTS);
        Ok(Timeline {
            runs: self.bundles.len(),
            days: days
                .into_iter()
                .map(|(date, day)| Day {
                    date: date.to_owned(),
                    ..day
                })
                .collect(),
            top,
        })
    }
}
