//! Reading one bundle into the index: each node's facts compared with what the index knows
//! of them, and only what changed written.
//!
//! What the index knows of a node's document (a plugin's facts, or one of its tables) is its
//! latest *state*: for each top-level field of the document, a hash of its bytes, and each of
//! its facts' path number and a 64-bit hash of its value, sorted by path. A field whose bytes
//! hash as before is not parsed at all: most of a host's facts are the same from one day to
//! the next, and finding a field's bytes costs a fraction of parsing them. In a field that
//! changed, a fact whose hash differs from the state's, or that the state lacks, is a change,
//! written with its value; a fact of the state the document lacks is a removal. A table is
//! one field. A node that did not report, or whose plugin failed, changes nothing: a gap is
//! not a change.
//!
//! Facts that change on their own ([`crate::drift::DEFAULT_IGNORES`]: clocks, counters, free
//! space) change in every run on every node. Their changes go to a table of their own ordered
//! by bundle, so that a bundle's are appended together instead of scattered over every node's
//! part of the index, which made adding one bundle rewrite most of the index's pages.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::Read as _;

use factbuoy_bundle::reader::{Bundle, Entry, ReadError};
use factbuoy_protocol::artifacts::ListKeys;
use rusqlite::{Transaction, params};
use serde_json::Value;

use crate::drift::IgnoreList;
use crate::facts::{Found, ROW_BUFFER_BYTES, each_line, run_and_raw_facts_digesting};
use crate::keyed::{InRow, Row, TableLeaves, each_keyed_leaf};
use crate::meta::wire;
use crate::raw::top_level_fields;

use super::state::{NewState, State, WHOLE};

/// The hash of a value's JSON text. Fixed, so that states written by one process compare with
/// hashes made by the next; the index is rebuilt whenever its format or factbuoy's version
/// changes, so a new hash function never meets an old state.
const VALUE_HASH: foldhash::quality::FixedState = foldhash::quality::FixedState::with_seed(0x4fb);

/// The largest table read into memory to be compared by its bytes; a larger one is read row
/// by row each time.
const MAX_BUFFERED_TABLE: u64 = 64 << 20;

/// Where a document's facts come from: a node, a source (a plugin, or `plugin/artifact`), and
/// the table artifact for a table (empty for a facts document).
pub(crate) type Slot = (u32, u32, String);

/// What the index knows while bundles are added: the numbers it gave to nodes, sources and
/// paths, and every document's latest state.
#[derive(Default)]
pub(crate) struct Known {
    /// Nodes by origin and name.
    pub nodes: HashMap<(String, String), u32>,
    pub sources: Vec<String>,
    /// For each source, its paths' numbers.
    pub paths: Vec<foldhash::HashMap<String, u32>>,
    pub next_path: u32,
    /// The paths of facts that change on their own, whose changes are kept apart.
    pub volatile: foldhash::HashSet<u32>,
    pub states: HashMap<Slot, State>,
}

/// Whether the fact at `path` changes on its own ([`crate::drift::DEFAULT_IGNORES`]).
fn is_volatile(path: &str) -> bool {
    static VOLATILE: std::sync::LazyLock<IgnoreList> =
        std::sync::LazyLock::new(|| IgnoreList::new(true, &[]));
    VOLATILE.ignores(path)
}

impl Known {
    pub(crate) fn source(&mut self, tx: &Transaction<'_>, name: &str) -> rusqlite::Result<u32> {
        if let Some(id) = self.sources.iter().position(|s| s == name) {
            return Ok(id as u32);
        }
        let id = self.sources.len() as u32;
        tx.execute(
            "INSERT INTO sources (id, name) VALUES (?1, ?2)",
            params![id, name],
        )?;
        self.sources.push(name.to_owned());
        self.paths.push(Default::default());
        Ok(id)
    }

    pub(crate) fn node(
        &mut self,
        tx: &Transaction<'_>,
        origin: &str,
        name: &str,
    ) -> rusqlite::Result<u32> {
        let key = (origin.to_owned(), name.to_owned());
        if let Some(id) = self.nodes.get(&key) {
            return Ok(*id);
        }
        tx.execute(
            "INSERT INTO nodes (origin, name) VALUES (?1, ?2)",
            params![origin, name],
        )?;
        let id = tx.last_insert_rowid() as u32;
        self.nodes.insert(key, id);
        Ok(id)
    }
}

/// What a bundle's read left to write: its run's documents and digest.
pub(crate) struct Read {
    pub status: factbuoy_protocol::types::StatusDocument,
    pub sha256: String,
}

/// Why a bundle could not be added.
pub(crate) enum AddError {
    Read(ReadError),
    Index(rusqlite::Error),
}

impl From<ReadError> for AddError {
    fn from(e: ReadError) -> Self {
        AddError::Read(e)
    }
}

impl From<rusqlite::Error> for AddError {
    fn from(e: rusqlite::Error) -> Self {
        AddError::Index(e)
    }
}

/// Reads `bundle`, the index's bundle number `seq` of origin `origin`, into `tx`: its pairs'
/// outcomes, which documents each node reported, and every fact that changed.
pub(crate) fn add(
    tx: &Transaction<'_>,
    known: &mut Known,
    bundle: &Bundle,
    seq: i64,
    origin: &str,
) -> Result<Read, AddError> {
    let mut reported = tx
        .prepare_cached("INSERT OR IGNORE INTO reported (node, source, seq) VALUES (?1, ?2, ?3)")?;
    let (documents, digest) =
        run_and_raw_facts_digesting(bundle, |found, _| -> Result<(), AddError> {
            let (node, source, table) = match &found {
                Found::Facts { node, source, .. } => (*node, *source, String::new()),
                // A table without row keys has rows nothing identifies: not compared (as diff).
                Found::Table { row_keys: [], .. } => return Ok(()),
                Found::Table {
                    node,
                    plugin,
                    artifact,
                    ..
                } => (*node, *plugin, (*artifact).to_owned()),
            };
            let node = known.node(tx, origin, node)?;
            let source = known.source(tx, source)?;
            let slot: Slot = (node, source, table);
            let before = known.states.remove(&slot).unwrap_or_default();
            let mut writer = Writer::new(tx, known, node, source, seq)?;
            let state = match found {
                Found::Facts {
                    list_keys, facts, ..
                } => writer.document(before, &facts, list_keys)?,
                Found::Table {
                    artifact,
                    row_keys,
                    rows,
                    ..
                } => writer.table(before, artifact, row_keys, rows)?,
            };
            reported.execute(params![node, source, seq])?;
            known.states.insert(slot, state);
            Ok(())
        })?;
    let (_, sha256) = digest.unwrap_or_default();
    let mut snapshot = tx.prepare_cached(
        "INSERT OR REPLACE INTO snapshots (node, plugin, seq, status, result_status)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for pair in &documents.status.plugins {
        let node = known.node(tx, origin, &pair.node)?;
        snapshot.execute(params![
            node,
            pair.plugin,
            seq,
            wire(&pair.status),
            pair.result_status.as_ref().map(wire),
        ])?;
    }
    Ok(Read {
        status: documents.status,
        sha256,
    })
}

/// Writes one document's changes.
struct Writer<'t, 'k> {
    change: rusqlite::CachedStatement<'t>,
    volatile_change: rusqlite::CachedStatement<'t>,
    new_path: rusqlite::CachedStatement<'t>,
    paths: &'k mut foldhash::HashMap<String, u32>,
    next_path: &'k mut u32,
    volatile: &'k mut foldhash::HashSet<u32>,
    node: u32,
    source: u32,
    seq: i64,
    /// The first error of a leaf callback, which cannot return one.
    failed: Option<rusqlite::Error>,
}

impl<'t, 'k> Writer<'t, 'k> {
    /// A writer of the changes of `node`'s document of `source` in bundle `seq`.
    fn new(
        tx: &'t Transaction<'_>,
        known: &'k mut Known,
        node: u32,
        source: u32,
        seq: i64,
    ) -> rusqlite::Result<Self> {
        Ok(Writer {
            change: tx.prepare_cached(
                "INSERT OR REPLACE INTO changes (node, path, seq, value) VALUES (?1, ?2, ?3, ?4)",
            )?,
            volatile_change: tx.prepare_cached(
                "INSERT OR REPLACE INTO volatile_changes (node, path, seq, value)
                 VALUES (?1, ?2, ?3, ?4)",
            )?,
            new_path: tx.prepare_cached(
                "INSERT INTO paths (id, source, path, volatile) VALUES (?1, ?2, ?3, ?4)",
            )?,
            paths: &mut known.paths[source as usize],
            next_path: &mut known.next_path,
            volatile: &mut known.volatile,
            node,
            source,
            seq,
            failed: None,
        })
    }

    /// The state of a facts document given as its bytes, its changes against `before`
    /// written: by field when it is an object of distinct plain keys, else whole.
    fn document(
        &mut self,
        before: State,
        bytes: &[u8],
        list_keys: &[ListKeys],
    ) -> Result<State, AddError> {
        let Some(mut fields) = top_level_fields(bytes) else {
            let raw = VALUE_HASH.hash_one(bytes);
            return self.whole(before, raw, |leaf| {
                let facts: Value =
                    serde_json::from_slice(bytes).map_err(|cause| ReadError::InvalidJson {
                        entry: String::new(),
                        cause,
                    })?;
                each_keyed_leaf(&facts, list_keys, leaf);
                Ok(())
            });
        };
        fields.sort_unstable_by_key(|(key, _)| VALUE_HASH.hash_one(key.as_bytes()));
        if let Some(whole) = before.whole() {
            return self.split_after_whole(&whole.leaves(), fields, list_keys);
        }
        let mut old_fields = before.fields().peekable();
        let mut state = NewState::default();
        for (key, value) in fields {
            let key_hash = VALUE_HASH.hash_one(key.as_bytes());
            let raw = VALUE_HASH.hash_one(value);
            // Fields gone since: each of their facts removed.
            while let Some(gone) = old_fields.next_if(|f| f.key < key_hash) {
                self.removed(&gone.leaves(), &[])?;
            }
            let old = old_fields.next_if(|f| f.key == key_hash);
            if let Some(old) = old
                && old.raw == raw
            {
                state.keep(old);
                continue;
            }
            let old_leaves = old.map(|f| f.leaves()).unwrap_or_default();
            let leaves = self.field(&old_leaves, key, value, list_keys, true)?;
            state.push(key_hash, raw, &leaves);
        }
        for gone in old_fields {
            self.removed(&gone.leaves(), &[])?;
        }
        Ok(state.finish())
    }

    /// As [`Writer::document`], for a document that was read whole the last time (it was
    /// not then an object of distinct plain keys): each field compared with all its facts.
    fn split_after_whole(
        &mut self,
        old: &[(u32, u64)],
        fields: Vec<(&str, &[u8])>,
        list_keys: &[ListKeys],
    ) -> Result<State, AddError> {
        let mut state = NewState::default();
        let mut now: Vec<(u32, u64)> = Vec::new();
        for (key, value) in fields {
            let leaves = self.field(old, key, value, list_keys, false)?;
            now.extend_from_slice(&leaves);
            state.push(
                VALUE_HASH.hash_one(key.as_bytes()),
                VALUE_HASH.hash_one(value),
                &leaves,
            );
        }
        now.sort_unstable_by_key(|(path, _)| *path);
        self.removed(old, &now)?;
        Ok(state.finish())
    }

    /// The facts of the field `key` whose value's bytes are `value`, each compared with
    /// `before` (sorted by path); with `remove`, the facts of `before` it lacks are removals.
    fn field(
        &mut self,
        before: &[(u32, u64)],
        key: &str,
        value: &[u8],
        list_keys: &[ListKeys],
        remove: bool,
    ) -> Result<Vec<(u32, u64)>, AddError> {
        let value: Value =
            serde_json::from_slice(value).map_err(|cause| ReadError::InvalidJson {
                entry: format!("field {key:?}"),
                cause,
            })?;
        // The field alone, under its key, so that its facts have their whole paths and the
        // lists below it their keys.
        let field = Value::Object(serde_json::Map::from_iter([(key.to_owned(), value)]));
        self.compare(before, remove, |leaf| {
            each_keyed_leaf(&field, list_keys, leaf);
            Ok(())
        })
    }

    /// The state of a table, compared by its bytes when it is small enough to hold.
    fn table(
        &mut self,
        before: State,
        artifact: &str,
        row_keys: &[String],
        rows: &mut Entry<'_>,
    ) -> Result<State, AddError> {
        let entry = rows.path().to_owned();
        let each_row = |reader: &mut dyn std::io::BufRead,
                        leaf: &mut dyn FnMut(&str, &str)|
         -> Result<(), ReadError> {
            let mut cell = |path: &str, _: InRow, value: &str| leaf(path, value);
            let mut table = TableLeaves::new(artifact, row_keys);
            each_line(&entry, reader, |number, line| {
                table.row(Row::read(&entry, number, line)?, &mut cell);
                Ok::<(), ReadError>(())
            })?;
            table.finish(&mut cell);
            Ok(())
        };
        if rows.size() > MAX_BUFFERED_TABLE {
            let mut reader = std::io::BufReader::with_capacity(ROW_BUFFER_BYTES, rows);
            // Never equal to a hash of bytes: compared fact by fact every time.
            return self.whole(before, 0, |leaf| each_row(&mut reader, leaf));
        }
        let mut bytes = Vec::with_capacity(rows.size() as usize);
        rows.read_to_end(&mut bytes)
            .map_err(|cause| ReadError::Read {
                entry: entry.clone(),
                cause,
            })?;
        let raw = VALUE_HASH.hash_one(&bytes);
        self.whole(before, raw, |leaf| each_row(&mut &bytes[..], leaf))
    }

    /// The state of a document read whole, its bytes hashing to `raw`: kept when they hash as
    /// before, else its facts, which `facts` hands to the leaf it is given, compared with all
    /// of `before`'s.
    fn whole(
        &mut self,
        before: State,
        raw: u64,
        facts: impl FnOnce(&mut dyn FnMut(&str, &str)) -> Result<(), ReadError>,
    ) -> Result<State, AddError> {
        if before.whole().is_some_and(|only| only.raw == raw) && raw != 0 {
            return Ok(before);
        }
        let mut old: Vec<(u32, u64)> = before.fields().flat_map(|f| f.leaves()).collect();
        old.sort_unstable_by_key(|(path, _)| *path);
        let leaves = self.compare(&old, true, facts)?;
        let mut state = NewState::default();
        state.push(WHOLE, raw, &leaves);
        Ok(state.finish())
    }

    /// Compares the facts `facts` hands over with `before` (sorted by path), writing each
    /// change and, with `remove`, each removal; returns them sorted by path.
    fn compare(
        &mut self,
        before: &[(u32, u64)],
        remove: bool,
        facts: impl FnOnce(&mut dyn FnMut(&str, &str)) -> Result<(), ReadError>,
    ) -> Result<Vec<(u32, u64)>, AddError> {
        let mut current: Vec<(u32, u64)> = Vec::new();
        facts(&mut |path, value| self.leaf(before, &mut current, path, value))?;
        if let Some(e) = self.failed.take() {
            return Err(AddError::Index(e));
        }
        current.sort_unstable_by_key(|(path, _)| *path);
        // A path given twice (it cannot be, by how paths are named) keeps its last value.
        current.dedup_by_key(|(path, _)| *path);
        if remove {
            self.removed(before, &current)?;
        }
        Ok(current)
    }

    fn leaf(
        &mut self,
        before: &[(u32, u64)],
        current: &mut Vec<(u32, u64)>,
        path: &str,
        value: &str,
    ) {
        if self.failed.is_some() {
            return;
        }
        let id = match self.paths.get(path) {
            Some(id) => *id,
            None => {
                let id = *self.next_path;
                *self.next_path += 1;
                let volatile = is_volatile(path);
                if let Err(e) = self
                    .new_path
                    .execute(params![id, self.source, path, volatile])
                {
                    self.failed = Some(e);
                    return;
                }
                self.paths.insert(path.to_owned(), id);
                if volatile {
                    self.volatile.insert(id);
                }
                id
            }
        };
        let hash = VALUE_HASH.hash_one(value.as_bytes());
        current.push((id, hash));
        let same = before
            .binary_search_by_key(&id, |(path, _)| *path)
            .is_ok_and(|at| before[at].1 == hash);
        if !same && let Err(e) = self.write(id, Some(value)) {
            self.failed = Some(e);
        }
    }

    /// Writes the fact at `path`'s new value, `None` for its removal.
    fn write(&mut self, path: u32, value: Option<&str>) -> rusqlite::Result<()> {
        let statement = if self.volatile.contains(&path) {
            &mut self.volatile_change
        } else {
            &mut self.change
        };
        statement.execute(params![self.node, path, self.seq, value])?;
        Ok(())
    }

    /// Writes the removal of each fact of `before` that `now` (sorted by path) lacks.
    fn removed(&mut self, before: &[(u32, u64)], now: &[(u32, u64)]) -> rusqlite::Result<()> {
        let mut now = now.iter().map(|(path, _)| *path).peekable();
        for (path, _) in before {
            while now.next_if(|p| p < path).is_some() {}
            if now.peek() != Some(path) {
                self.write(*path, None)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::{Known, State, Writer};

    /// The changes written for one node's document given as each text in turn, one bundle
    /// each: (bundle, path, value or `None` for a removal).
    fn changes_of(documents: &[&str]) -> Vec<(i64, String, Option<String>)> {
        let mut db = Connection::open_in_memory().unwrap();
        db.execute_batch(super::super::index::SCHEMA).unwrap();
        let tx = db.transaction().unwrap();
        let mut known = Known::default();
        known.source(&tx, "setup").unwrap();
        let mut state = State::default();
        for (seq, document) in (1..).zip(documents) {
            let mut writer = Writer::new(&tx, &mut known, 0, 0, seq).unwrap();
            state = match writer.document(state, document.as_bytes(), &[]) {
                Ok(state) => state,
                Err(_) => panic!("{document} is not read"),
            };
        }
        let mut rows = tx
            .prepare(
                "SELECT c.seq, p.path, c.value FROM changes c JOIN paths p ON p.id = c.path
                 ORDER BY c.seq, p.path",
            )
            .unwrap();
        rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// A document read whole one day (a key given twice) and by field the next, and back:
    /// only what changed is written either way.
    #[test]
    fn a_document_read_whole_then_by_field_and_back_writes_only_its_changes() {
        let change = |seq: i64, path: &str, value: Option<&str>| {
            (seq, path.to_owned(), value.map(str::to_owned))
        };
        assert_eq!(
            changes_of(&[
                r#"{"a": 1, "b": {"c": 2}, "a": 1}"#,
                r#"{"a": 1, "b": {"c": 3}, "d": 4}"#,
                r#"{"a": 1, "d": 4}"#,
                r#"{"a": 2, "d": 4, "a": 2}"#,
            ]),
            [
                change(1, "a", Some("1")),
                change(1, "b.c", Some("2")),
                change(2, "b.c", Some("3")),
                change(2, "d", Some("4")),
                change(3, "b.c", None),
                change(4, "a", Some("2")),
            ]
        );
    }
}
