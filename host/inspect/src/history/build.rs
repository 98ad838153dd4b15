//! Reading one bundle into the index: each node's facts compared with what the index knows
//! of them, and only what changed written.
//!
//! What the index knows of a node's document (a plugin's facts, or one of its tables) is its
//! latest *state*: every fact's path number and a 64-bit hash of its value, sorted by path.
//! A fact whose hash differs from the state's, or that the state lacks, is a change, written
//! with its value; a fact of the state the document lacks is a removal. A node that did not
//! report, or whose plugin failed, changes nothing: a gap is not a change.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

use factbuoy_bundle::reader::{Bundle, ReadError};
use rusqlite::{Transaction, params};

use crate::facts::{Found, ROW_BUFFER_BYTES, each_line, run_and_facts_digesting};
use crate::keyed::{InRow, Row, TableLeaves, each_keyed_leaf};
use crate::meta::wire;

/// The hash of a value's JSON text. Fixed, so that states written by one process compare with
/// hashes made by the next; the index is rebuilt whenever its format or factbuoy's version
/// changes, so a new hash function never meets an old state.
const VALUE_HASH: foldhash::quality::FixedState = foldhash::quality::FixedState::with_seed(0x4fb);

/// One document's state: (path number, value hash), sorted by path number.
pub(crate) type State = Vec<(u32, u64)>;

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
    pub states: HashMap<Slot, State>,
    /// The documents whose state changed since the index was opened, to be saved.
    pub dirty: HashSet<Slot>,
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
    let mut change = tx.prepare_cached(
        "INSERT OR REPLACE INTO changes (node, path, seq, value) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut reported = tx
        .prepare_cached("INSERT OR IGNORE INTO reported (node, source, seq) VALUES (?1, ?2, ?3)")?;
    let mut new_path =
        tx.prepare_cached("INSERT INTO paths (id, source, path) VALUES (?1, ?2, ?3)")?;
    let (documents, digest) = run_and_facts_digesting(bundle, |found, _| {
        let mut current: State = Vec::new();
        // Leaves are compared as they stream past; a failure is kept for after the walk of
        // the document (the callbacks cannot return one).
        let mut failed: Option<rusqlite::Error> = None;
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
        let Known {
            paths, next_path, ..
        } = known;
        let paths = &mut paths[source as usize];
        let mut leaf = |path: &str, value: &str| {
            if failed.is_some() {
                return;
            }
            let id = match paths.get(path) {
                Some(id) => *id,
                None => {
                    let id = *next_path;
                    *next_path += 1;
                    if let Err(e) = new_path.execute(params![id, source, path]) {
                        failed = Some(e);
                        return;
                    }
                    paths.insert(path.to_owned(), id);
                    id
                }
            };
            let hash = VALUE_HASH.hash_one(value.as_bytes());
            current.push((id, hash));
            let same = before
                .binary_search_by_key(&id, |(path, _)| *path)
                .is_ok_and(|at| before[at].1 == hash);
            if !same && let Err(e) = change.execute(params![node, id, seq, value]) {
                failed = Some(e);
            }
        };
        match found {
            Found::Facts {
                list_keys, facts, ..
            } => each_keyed_leaf(&facts, list_keys, &mut leaf),
            Found::Table {
                artifact,
                row_keys,
                rows,
                ..
            } => {
                let mut cell = |path: &str, _: InRow, value: &str| leaf(path, value);
                let mut table = TableLeaves::new(artifact, row_keys);
                let entry = rows.path().to_owned();
                let reader = std::io::BufReader::with_capacity(ROW_BUFFER_BYTES, rows);
                each_line(&entry, reader, |number, line| {
                    table.row(Row::read(&entry, number, line)?, &mut cell);
                    Ok::<(), ReadError>(())
                })?;
                table.finish(&mut cell);
            }
        }
        if let Some(e) = failed {
            return Err(AddError::Index(e));
        }
        current.sort_unstable_by_key(|(path, _)| *path);
        // A path given twice (it cannot be, by how paths are named) keeps its last value.
        current.dedup_by_key(|(path, _)| *path);
        // Facts the document no longer has.
        let mut now = current.iter().map(|(path, _)| *path).peekable();
        for (path, _) in &before {
            while now.next_if(|p| p < path).is_some() {}
            if now.peek() != Some(path) {
                change.execute(params![node, path, seq, rusqlite::types::Null])?;
            }
        }
        reported.execute(params![node, source, seq])?;
        known.dirty.insert(slot.clone());
        known.states.insert(slot, current);
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
