//! `inspect history`: each node's life in the pile (when it appeared, was absent, lost, or
//! stopped reporting) and each value each of its facts had, with the runs that first and last
//! saw it, read from the index's changes.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;
use wildmatch::WildMatch;

use super::error::HistoryError;
use super::open::{History, HistoryBundle};
use crate::drift::IgnoreList;
use crate::origin::UNRECORDED;

/// One node's history.
#[derive(Debug, Clone, Serialize)]
pub struct NodeHistory {
    /// The node.
    pub node: String,
    /// The first run that named it.
    pub first_seen: SeenIn,
    /// The last run that named it.
    pub last_seen: SeenIn,
    /// How many runs of the history named it.
    pub runs: usize,
    /// When it appeared, was absent, lost, or stopped reporting.
    pub events: Vec<NodeEvent>,
    /// Its facts, by plugin and path.
    pub facts: Vec<FactHistory>,
}

/// A run of the history.
#[derive(Debug, Clone, Serialize)]
pub struct SeenIn {
    /// The run's id.
    pub run_id: String,
    /// When it was created.
    pub created: String,
}

impl From<&HistoryBundle> for SeenIn {
    fn from(bundle: &HistoryBundle) -> Self {
        SeenIn {
            run_id: bundle.run_id.clone(),
            created: bundle.created.clone(),
        }
    }
}

/// Something that happened to a node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeEvent {
    /// What.
    pub kind: NodeEventKind,
    /// The run it happened in (for `absent` and `stopped-reporting`, the first run without
    /// the node).
    pub run: SeenIn,
    /// For `absent` and `stopped-reporting`: how many runs in a row lacked the node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<usize>,
}

/// What happened to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeEventKind {
    /// The first run that named it, after the history's first.
    Appeared,
    /// Runs that did not name it, between runs that did.
    Absent,
    /// A run that named it and marked it lost (it stopped sending heartbeats).
    Lost,
    /// The runs after the last that named it.
    StoppedReporting,
}

/// One fact of one node through the history.
#[derive(Debug, Clone, Serialize)]
pub struct FactHistory {
    /// The plugin whose facts hold it (`plugin/artifact` where a plugin declares several).
    pub plugin: String,
    /// Its path, as `diff` names it (keyed lists by key).
    pub path: String,
    /// Each value it had, oldest first.
    pub changes: Vec<FactChange>,
}

/// A value a fact had, from the run that first saw it to the last.
#[derive(Debug, Clone, Serialize)]
pub struct FactChange {
    /// The value; `null` with `removed`.
    pub value: Value,
    /// Whether the fact was gone from the node's facts here.
    pub removed: bool,
    /// The value before, absent for the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<Value>,
    /// The first run with this value.
    pub first_seen: SeenIn,
    /// The last run with this value (the node's plugin reported in every run of the history
    /// between the two, or was absent; a gap is not a change).
    pub last_seen: SeenIn,
}

impl History {
    /// Each node's history (only `node`'s when given): when it appeared, when it was absent,
    /// lost or stopped reporting, and for each fact matching `pattern` every value it had,
    /// when it was first and last seen. Without a pattern, only the facts that changed, but
    /// for what `ignore` leaves out.
    pub fn changes(
        &self,
        node: Option<&str>,
        pattern: Option<&str>,
        ignore: &IgnoreList,
    ) -> Result<Vec<NodeHistory>, HistoryError> {
        of(self, node, pattern, ignore)
    }
}

fn of(
    history: &History,
    node: Option<&str>,
    pattern: Option<&str>,
    ignore: &IgnoreList,
) -> Result<Vec<NodeHistory>, HistoryError> {
    let failed = |cause| HistoryError::Index {
        index: history.update.index.clone(),
        cause,
    };
    let connection = &history.connection;
    let bundles = &history.bundles;
    // The index's bundle number -> place in the history.
    let place: HashMap<i64, usize> = bundles
        .iter()
        .enumerate()
        .map(|(i, b)| (b.seq, i))
        .collect();
    let origin = if history.origin == UNRECORDED {
        ""
    } else {
        &history.origin
    };
    let pattern = pattern.map(WildMatch::new);
    let mut nodes: Vec<(u32, String)> = Vec::new();
    {
        let mut rows = connection
            .prepare(
                "SELECT id, name FROM nodes WHERE origin = ?1 AND (?2 IS NULL OR name = ?2)
                 ORDER BY name",
            )
            .map_err(failed)?;
        let mut rows = rows
            .query(rusqlite::params![origin, node])
            .map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            nodes.push((row.get(0).map_err(failed)?, row.get(1).map_err(failed)?));
        }
    }
    let mut sources: HashMap<u32, String> = HashMap::new();
    {
        let mut rows = connection
            .prepare("SELECT id, name FROM sources")
            .map_err(failed)?;
        let mut rows = rows.query([]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            sources.insert(row.get(0).map_err(failed)?, row.get(1).map_err(failed)?);
        }
    }
    let mut named = connection
        .prepare_cached("SELECT DISTINCT seq FROM snapshots WHERE node = ?1 ORDER BY seq")
        .map_err(failed)?;
    let mut lost = connection
        .prepare_cached(
            "SELECT DISTINCT seq FROM snapshots WHERE node = ?1 AND status = 'lost' ORDER BY seq",
        )
        .map_err(failed)?;
    let mut reported = connection
        .prepare_cached("SELECT source, seq FROM reported WHERE node = ?1 ORDER BY source, seq")
        .map_err(failed)?;
    let wanted = |path: &str| match &pattern {
        Some(pattern) => pattern.matches(path),
        None => !ignore.ignores(path),
    };
    let mut facts = connection
        .prepare_cached(
            "SELECT c.path, s.name, p.path, c.seq, c.value FROM changes c
             JOIN paths p ON p.id = c.path JOIN sources s ON s.id = p.source
             WHERE c.node = ?1 ORDER BY c.path, c.seq",
        )
        .map_err(failed)?;
    // Facts that change on their own are kept by bundle (the index's `build`): read only when
    // one of them is asked for, a bundle at a time.
    let volatile_wanted = {
        let mut paths = connection
            .prepare("SELECT path FROM paths WHERE volatile")
            .map_err(failed)?;
        let paths: Vec<String> = paths
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(failed)?;
        paths.iter().any(|path| wanted(path))
    };
    let mut volatile_facts = connection
        .prepare_cached(
            "SELECT c.path, s.name, p.path, c.seq, c.value FROM volatile_changes c
             JOIN paths p ON p.id = c.path JOIN sources s ON s.id = p.source
             WHERE c.seq = ?1 AND c.node = ?2",
        )
        .map_err(failed)?;
    let places = |rows: rusqlite::Result<Vec<i64>>| -> rusqlite::Result<Vec<usize>> {
        Ok(rows?
            .iter()
            .filter_map(|seq| place.get(seq).copied())
            .collect())
    };
    let mut histories = Vec::new();
    for (id, name) in nodes {
        let runs = places(
            named
                .query_map([id], |r| r.get(0))
                .and_then(|rows| rows.collect()),
        )
        .map_err(failed)?;
        let (Some(&first), Some(&last)) = (runs.first(), runs.last()) else {
            continue;
        };
        let mut events = Vec::new();
        if first > 0 {
            events.push(event(NodeEventKind::Appeared, &bundles[first], None));
        }
        let lost_in = places(
            lost.query_map([id], |r| r.get(0))
                .and_then(|rows| rows.collect()),
        )
        .map_err(failed)?;
        for pair in runs.windows(2) {
            if pair[1] > pair[0] + 1 {
                let missing = pair[1] - pair[0] - 1;
                events.push(event(
                    NodeEventKind::Absent,
                    &bundles[pair[0] + 1],
                    Some(missing),
                ));
            }
        }
        for at in lost_in {
            events.push(event(NodeEventKind::Lost, &bundles[at], None));
        }
        if last + 1 < bundles.len() {
            events.push(event(
                NodeEventKind::StoppedReporting,
                &bundles[last + 1],
                Some(bundles.len() - last - 1),
            ));
        }
        events.sort_by_key(|e| e.run.created.clone());

        // The runs in which each of the node's documents reported, by source.
        let mut reported_in: HashMap<&str, Vec<usize>> = HashMap::new();
        {
            let mut rows = reported.query([id]).map_err(failed)?;
            while let Some(row) = rows.next().map_err(failed)? {
                let source: u32 = row.get(0).map_err(failed)?;
                let seq: i64 = row.get(1).map_err(failed)?;
                if let (Some(&at), Some(name)) = (place.get(&seq), sources.get(&source)) {
                    reported_in.entry(name).or_default().push(at);
                }
            }
        }

        let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<ChangeRow> {
            Ok(ChangeRow {
                path_id: r.get(0)?,
                plugin: r.get(1)?,
                path: r.get(2)?,
                seq: r.get(3)?,
                value: r.get(4)?,
            })
        };
        let mut rows: Vec<ChangeRow> = facts
            .query_map([id], read)
            .and_then(|rows| rows.collect())
            .map_err(failed)?;
        if volatile_wanted {
            for bundle in bundles {
                for row in volatile_facts
                    .query_map(rusqlite::params![bundle.seq, id], read)
                    .map_err(failed)?
                {
                    rows.push(row.map_err(failed)?);
                }
            }
            rows.sort_by_key(|row| (row.path_id, row.seq));
        }
        let mut node_facts: Vec<FactHistory> = Vec::new();
        let mut group: Option<Group> = None;
        let mut finish = |group: Option<Group>| {
            let Some(group) = group else {
                return;
            };
            // Without a pattern, only the facts that changed.
            let changed = pattern.is_some() || group.values.len() > 1;
            if changed && wanted(&group.path) && !group.values.is_empty() {
                let seen = reported_in
                    .get(group.plugin.as_str())
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                node_facts.push(fact(group, seen, bundles));
            }
        };
        for row in rows {
            if group.as_ref().is_none_or(|g| g.path_id != row.path_id) {
                finish(group.take());
                group = Some(Group {
                    path_id: row.path_id,
                    plugin: row.plugin,
                    path: row.path,
                    values: Vec::new(),
                });
            }
            if let (Some(&at), Some(group)) = (place.get(&row.seq), group.as_mut()) {
                group.values.push((at, row.value));
            }
        }
        finish(group.take());
        node_facts.sort_by(|a, b| a.plugin.cmp(&b.plugin).then_with(|| a.path.cmp(&b.path)));
        if node_facts.is_empty() && pattern.is_some() && node.is_none() {
            // Asked about one fact across the fleet: nodes without it say nothing.
            continue;
        }
        histories.push(NodeHistory {
            node: name,
            first_seen: (&bundles[first]).into(),
            last_seen: (&bundles[last]).into(),
            runs: runs.len(),
            events,
            facts: node_facts,
        });
    }
    Ok(histories)
}

fn event(kind: NodeEventKind, bundle: &HistoryBundle, runs: Option<usize>) -> NodeEvent {
    NodeEvent {
        kind,
        run: bundle.into(),
        runs,
    }
}

/// A row of the index's changes: a fact's value (`None` where it was removed) from a bundle.
struct ChangeRow {
    path_id: u32,
    plugin: String,
    path: String,
    seq: i64,
    value: Option<String>,
}

/// One fact's rows of the index's changes, as they are read.
struct Group {
    path_id: u32,
    plugin: String,
    path: String,
    /// (place in the history, value as JSON text or `None` where it was removed)
    values: Vec<(usize, Option<String>)>,
}

/// A fact's values, each with the last run that still had it: the last run, before the next
/// value's first, in which the node's plugin reported.
fn fact(group: Group, reported: &[usize], bundles: &[HistoryBundle]) -> FactHistory {
    let Group {
        plugin,
        path,
        values,
        ..
    } = group;
    let mut changes = Vec::with_capacity(values.len());
    let mut previous: Option<Value> = None;
    for (i, (at, value)) in values.iter().enumerate() {
        let until = values
            .get(i + 1)
            .map(|(next, _)| *next)
            .unwrap_or(usize::MAX);
        // The reported runs before `until`; the last of them, at or after `at`.
        let end = reported.partition_point(|&r| r < until);
        let last = reported[..end]
            .last()
            .copied()
            .filter(|&r| r >= *at)
            .unwrap_or(*at);
        let removed = value.is_none();
        let value = json(value.clone());
        changes.push(FactChange {
            previous: (i > 0).then(|| previous.clone().unwrap_or(Value::Null)),
            value: value.clone(),
            removed,
            first_seen: (&bundles[*at]).into(),
            last_seen: (&bundles[last]).into(),
        });
        previous = Some(value);
    }
    FactHistory {
        plugin,
        path,
        changes,
    }
}

/// The JSON value of a change's stored text.
fn json(text: Option<String>) -> Value {
    text.map(|t| serde_json::from_str(&t).unwrap_or(Value::String(t)))
        .unwrap_or(Value::Null)
}
