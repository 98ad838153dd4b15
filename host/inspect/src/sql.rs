//! `factbuoy inspect sql`: the facts of every node of one or more bundles as SQLite tables, the
//! way osquery users ask their fleets questions, but offline.
//!
//! The tables are written into a database file (a temporary one unless the caller keeps it), so
//! memory stays SQLite's page cache whatever the fleet's size; the bundle streams past once,
//! parsed on one thread and written on another, a bounded few pieces between them.
//! docs/inspect.md lists the tables for users.

use std::collections::HashMap;
use std::io::BufReader;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use factbuoy_bundle::reader::{Bundle, Entry, ReadError};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};
use serde::Serialize;
use serde_json::Value;

use crate::facts::{
    Found, ROW_BUFFER_BYTES, RunDocuments, each_line, leaves, parse_row, run_and_facts,
};
use crate::keyed::table_field;
use crate::meta::wire;

mod row;
use row::{Batch, Row};

/// The tables and views, as created; docs/inspect.md explains each column. Each table but
/// `runs` is a view of its rows (`"<table> rows"`) with each row's run's `created` added
/// ([`timed`]).
const SCHEMA: &str = "
CREATE TABLE runs (run_id TEXT, bundle TEXT, status TEXT, error TEXT, created TEXT,
                   factbuoy_version TEXT);
CREATE TABLE \"results rows\" (run_id TEXT, plugin TEXT, node TEXT, status TEXT,
                              result_status TEXT, error TEXT);
CREATE TABLE \"facts rows\" (run_id TEXT, node TEXT, plugin TEXT, facts TEXT);
CREATE TABLE \"fact_values rows\" (run_id TEXT, node TEXT, plugin TEXT, path TEXT, value);
CREATE VIEW setup AS SELECT run_id, created, node, facts FROM facts WHERE plugin = 'setup';
CREATE VIEW host_facts AS SELECT run_id, created, node, facts FROM facts
    WHERE plugin = 'host-facts';
";
/// For a database kept for later queries, made once the rows are in (one sort instead of a
/// tree kept in order row by row). One query scans faster than the sort takes.
const INDEXES: &str = "CREATE INDEX fact_values_by_path ON \"fact_values rows\" (path);";

/// The quoted name of the table that holds the rows of the table (or view) `name`.
fn rows_of(name: &str) -> String {
    quoted(&format!("{name} rows"))
}

/// Creates the view `name` of the table [`rows_of`] `name`: its rows, each with the time its
/// run was created. The time is looked up only by a query that asks for it (SQLite leaves a
/// view's unused columns uncomputed), so a million rows do not each hold a copy.
fn timed(db: &Connection, name: &str) -> rusqlite::Result<()> {
    db.execute(
        &format!(
            "CREATE VIEW {} AS SELECT t.*, (SELECT created FROM runs WHERE runs.run_id = t.run_id)
             AS created FROM {} t",
            quoted(name),
            rows_of(name)
        ),
        [],
    )?;
    Ok(())
}

/// Why a query could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// A bundle could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The database file could not be made or written.
    #[error("writing the facts database {path}: {cause}")]
    Database {
        /// The database file.
        path: String,
        /// What SQLite said.
        cause: rusqlite::Error,
    },
    /// The query is not valid SQL for these tables, or failed.
    #[error(
        "the query failed: {0}; the tables are runs, results, facts, fact_values, setup, host_facts and one per table artifact, <plugin>_<artifact>, each row with its run_id and created (docs/inspect.md)"
    )]
    Query(rusqlite::Error),
}

/// A query's answer: the column names and the rows, each value as JSON (SQLite integers and
/// reals as numbers, text as strings, NULL as null, blobs as hex strings).
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// The columns, as the query names them.
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
}

/// Loads `bundles` into the SQLite database at `database` (a new file) and answers `query`
/// against it. The database is read-only for the query. A database `kept` for later queries
/// (`--db`) also gets an index of `fact_values` by path.
pub fn query(
    bundles: &[Bundle],
    database: &Path,
    kept: bool,
    query: &str,
) -> Result<Answer, SqlError> {
    let db_error = |cause| SqlError::Database {
        path: database.display().to_string(),
        cause,
    };
    let mut connection = Connection::open(database).map_err(db_error)?;
    // A new file, written once and then only read: no rollback journal and no syncs (a crash
    // leaves a file to delete, as it would anyway).
    connection
        .execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
        .map_err(db_error)?;
    connection.execute_batch(SCHEMA).map_err(db_error)?;
    for table in ["results", "facts", "fact_values"] {
        timed(&connection, table).map_err(db_error)?;
    }
    // Table artifacts' tables, shared by the bundles: each bundle adds its rows.
    let mut tables = Tables {
        columns: HashMap::new(),
    };
    // The query, lower-case: a table's rows are loaded only when it names the table, so a
    // question about facts does not pay for every node's tables (a journal written as JSON
    // Lines before artifacts had kinds reads as one).
    let wanted = query.to_ascii_lowercase();
    // A kept database has the facts tables filled for the queries to come.
    let named = if kept {
        Named::ALL
    } else {
        Named::in_query(&wanted)
    };
    for bundle in bundles {
        let transaction = connection.transaction().map_err(db_error)?;
        load(bundle, &transaction, &wanted, named, &mut tables).map_err(|e| match e {
            Loading::Read(e) => SqlError::Read(e),
            Loading::Database(cause) => db_error(cause),
            Loading::Stopped => unreachable!("a load stops only on the other side's error"),
        })?;
        transaction.commit().map_err(db_error)?;
    }
    if kept {
        connection.execute_batch(INDEXES).map_err(db_error)?;
    }
    // Sorts (GROUP BY, ORDER BY, DISTINCT over a million rows) may use every core: 10 % off
    // a GROUP BY of bench/tables.sh on 2 cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    connection
        .pragma_update(None, "threads", cores as i64)
        .and_then(|()| connection.pragma_update(None, "query_only", true))
        .map_err(db_error)?;
    let mut statement = connection.prepare(query).map_err(SqlError::Query)?;
    let columns: Vec<String> = statement
        .column_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut rows = Vec::new();
    let mut found = statement.query([]).map_err(SqlError::Query)?;
    while let Some(row) = found.next().map_err(SqlError::Query)? {
        let values = (0..columns.len())
            .map(|i| row.get_ref(i).map(json))
            .collect::<Result<Vec<Value>, _>>()
            .map_err(SqlError::Query)?;
        rows.push(values);
    }
    Ok(Answer { columns, rows })
}

fn json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(r) => Value::from(r),
        ValueRef::Text(text) => Value::from(String::from_utf8_lossy(text).into_owned()),
        ValueRef::Blob(bytes) => Value::from(hex::encode(bytes)),
    }
}

enum Loading {
    Read(ReadError),
    Database(rusqlite::Error),
    /// The other thread of the load ended first; its error is the one to report.
    Stopped,
}

impl From<ReadError> for Loading {
    fn from(e: ReadError) -> Self {
        Loading::Read(e)
    }
}

/// What the thread reading a bundle hands the thread writing the database, in archive order.
enum Piece {
    Facts {
        run_id: Option<String>,
        node: String,
        source: String,
        facts: Value,
    },
    /// A table artifact: its rows follow in `rows` when the query names the table, in
    /// batches, and then `None`.
    Table {
        run_id: Option<String>,
        node: String,
        table: String,
        rows: Option<Receiver<Option<Batch>>>,
    },
}

/// How many pieces, and how many batches of a table's rows, may wait to be written: enough
/// that reading runs ahead of a slower write, few enough that a few megabytes are in flight
/// whatever the tables' sizes.
const PIECES_WAITING: usize = 4;
const BATCHES_WAITING: usize = 4;

/// Writes one bundle's run, results, facts and tables' rows; one pass over the archive. One
/// thread decompresses the archive and parses its documents and rows while the other writes
/// them, so a load takes about as long as the slower of the two.
fn load(
    bundle: &Bundle,
    db: &Connection,
    wanted: &str,
    named: Named,
    tables: &mut Tables,
) -> Result<(), Loading> {
    let (send, pieces) = sync_channel(PIECES_WAITING);
    // A facts document is sent once the one before it is written: at most one is parsed
    // while another is written, as large as they may be.
    let (facts_written, facts_turn) = sync_channel(1);
    facts_written
        .send(())
        .expect("the receiver is here and the channel empty");
    let (read, written) = std::thread::scope(|scope| {
        let reader = scope.spawn(|| read_pieces(bundle, wanted, send, facts_turn));
        // Returning, it hangs up: a reader still sending then stops.
        let written = write_pieces(db, tables, named, pieces, facts_written);
        let read = reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (read, written)
    });
    let (RunDocuments { run, status }, pending) = match (read, written) {
        (Ok(documents), Ok(pending)) => (documents, pending),
        // The writer fails only on what was read before the reader's error, if any: the
        // first in the archive, as a load on one thread would tell.
        (_, Err(e)) if !matches!(e, Loading::Stopped) => return Err(e),
        (Err(e), _) | (Ok(_), Err(e)) => return Err(e),
    };
    let text = |key: &str| {
        run.as_ref()
            .and_then(|r| r[key].as_str())
            .map(str::to_owned)
    };
    (|| {
        let id = &status.run_id;
        db.execute(
            "INSERT INTO runs VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                bundle.path().display().to_string(),
                wire(&status.status),
                status.error,
                text("created"),
                text("factbuoy_version")
            ],
        )?;
        let mut insert =
            db.prepare("INSERT INTO \"results rows\" VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
        for pair in &status.plugins {
            insert.execute(params![
                id,
                pair.plugin,
                pair.node,
                wire(&pair.status),
                pair.result_status.as_ref().map(wire),
                pair.error
            ])?;
        }
        let loaded = ["facts", "fact_values"].map(str::to_owned);
        for table in loaded
            .iter()
            .chain(tables.columns.keys())
            .filter(|_| pending)
        {
            db.execute(
                &format!(
                    "UPDATE {} SET run_id = ?1 WHERE run_id = ?2",
                    rows_of(table)
                ),
                params![id, PENDING],
            )?;
        }
        Ok(())
    })()
    .map_err(Loading::Database)
}

/// The run id facts are written under until the status document is read: it comes first in
/// every bundle factbuoy writes; in any other, the rows are rewritten at the end.
const PENDING: &str = "";

/// Walks `bundle`, sending its facts documents (each on its turn) and tables (the rows of
/// those `wanted` names) to `pieces`. Ends with [`Loading::Stopped`] when the writer hangs up.
fn read_pieces(
    bundle: &Bundle,
    wanted: &str,
    pieces: SyncSender<Piece>,
    facts_turn: Receiver<()>,
) -> Result<RunDocuments, Loading> {
    run_and_facts(bundle, |found, run_id| {
        let run_id = run_id.map(str::to_owned);
        match found {
            Found::Facts {
                node,
                source,
                facts,
                ..
            } => {
                facts_turn.recv().map_err(|_| Loading::Stopped)?;
                pieces
                    .send(Piece::Facts {
                        run_id,
                        node: node.to_owned(),
                        source: source.to_owned(),
                        facts,
                    })
                    .map_err(|_| Loading::Stopped)
            }
            Found::Table {
                node,
                plugin,
                artifact,
                rows,
                ..
            } => {
                let table = table_name(plugin, artifact);
                let (batches, receiver) = if wanted.contains(&table) {
                    let (send, receive) = sync_channel(BATCHES_WAITING);
                    (Some(send), Some(receive))
                } else {
                    (None, None)
                };
                pieces
                    .send(Piece::Table {
                        run_id,
                        node: node.to_owned(),
                        table,
                        rows: receiver,
                    })
                    .map_err(|_| Loading::Stopped)?;
                match batches {
                    Some(batches) => read_rows(rows, &batches),
                    None => Ok(()),
                }
            }
        }
    })
}

/// Reads a table artifact's rows (JSON Lines, one object per line) into batches of rows with
/// the same fields, sent to `batches` as each fills, then `None`.
fn read_rows(rows: &mut Entry<'_>, batches: &SyncSender<Option<Batch>>) -> Result<(), Loading> {
    let entry = rows.path().to_owned();
    let send = |batch| batches.send(batch).map_err(|_| Loading::Stopped);
    let mut batch: Option<Batch> = None;
    let lines = BufReader::with_capacity(ROW_BUFFER_BYTES, rows);
    each_line(&entry, lines, |number, line| {
        // Most rows have the fields of the row before: read straight into its batch.
        let added = match &mut batch {
            Some(same) => parse_row(&entry, number, line, same.reader())?,
            None => false,
        };
        if !added {
            // A row with other fields starts a batch of its own.
            let row: Row<'_> = parse_row(&entry, number, line, PhantomData)?;
            if let Some(done) = batch.replace(Batch::of(row)) {
                send(Some(done))?;
            }
        }
        if batch.as_ref().is_some_and(Batch::is_full) {
            send(batch.take())?;
        }
        Ok::<(), Loading>(())
    })?;
    if batch.is_some() {
        send(batch)?;
    }
    send(None)
}

/// Writes the pieces [`read_pieces`] sends until it is done, giving the next facts document
/// its turn as each is written; whether any was written under [`PENDING`].
fn write_pieces(
    db: &Connection,
    tables: &mut Tables,
    named: Named,
    pieces: Receiver<Piece>,
    facts_written: SyncSender<()>,
) -> Result<bool, Loading> {
    let mut pending = false;
    while let Ok(piece) = pieces.recv() {
        match piece {
            Piece::Facts {
                run_id,
                node,
                source,
                facts,
            } => {
                pending |= run_id.is_none();
                let run_id = run_id.as_deref().unwrap_or(PENDING);
                insert_facts(db, named, run_id, &node, &source, &facts)
                    .map_err(Loading::Database)?;
                drop(facts);
                // Never full (the reader took the last turn before sending), and a reader
                // that is gone needs no turn.
                let _ = facts_written.try_send(());
            }
            Piece::Table {
                run_id,
                node,
                table,
                rows,
            } => {
                pending |= run_id.is_none();
                let run_id = run_id.as_deref().unwrap_or(PENDING);
                let columns = tables.create(db, &table).map_err(Loading::Database)?;
                if let Some(rows) = rows {
                    insert_rows(db, &rows_of(&table), columns, run_id, &node, &rows)?;
                }
            }
        }
    }
    Ok(pending)
}

/// Which of the facts tables a query names: the others are left empty, as a table artifact's
/// table is that the query does not name.
#[derive(Clone, Copy)]
struct Named {
    /// `facts`, or a view of it.
    documents: bool,
    fact_values: bool,
}

impl Named {
    const ALL: Named = Named {
        documents: true,
        fact_values: true,
    };

    /// What `query` (lower-case) names.
    fn in_query(query: &str) -> Named {
        Named {
            documents: ["facts", "setup", "host_facts"]
                .iter()
                .any(|name| query.contains(name)),
            fact_values: query.contains("fact_values"),
        }
    }
}

fn insert_facts(
    db: &Connection,
    named: Named,
    run_id: &str,
    node: &str,
    plugin: &str,
    facts: &Value,
) -> rusqlite::Result<()> {
    if named.documents {
        db.execute(
            "INSERT INTO \"facts rows\" VALUES (?1, ?2, ?3, ?4)",
            params![run_id, node, plugin, facts.to_string()],
        )?;
    }
    if !named.fact_values {
        return Ok(());
    }
    // ROWS_PER_INSERT rows a statement, as a table's rows: a statement's overhead is paid
    // once for many.
    let leaves = leaves(facts);
    let mut chunks = leaves.chunks_exact(ROWS_PER_INSERT);
    let mut many = db.prepare_cached(&format!(
        "INSERT INTO \"fact_values rows\" VALUES {}",
        vec!["(?, ?, ?, ?, ?)"; ROWS_PER_INSERT].join(", ")
    ))?;
    for chunk in &mut chunks {
        let mut at = 0;
        for (path, value) in chunk {
            many.raw_bind_parameter(at + 1, run_id)?;
            many.raw_bind_parameter(at + 2, node)?;
            many.raw_bind_parameter(at + 3, plugin)?;
            many.raw_bind_parameter(at + 4, path)?;
            many.raw_bind_parameter(at + 5, sql_value(value))?;
            at += 5;
        }
        many.raw_execute()?;
    }
    let mut one =
        db.prepare_cached("INSERT INTO \"fact_values rows\" VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for (path, value) in chunks.remainder() {
        one.execute(params![run_id, node, plugin, path, sql_value(value)])?;
    }
    Ok(())
}

/// A JSON value as SQLite holds it: numbers as integers or reals, booleans as 0 and 1, text as
/// text, objects and arrays as their JSON text.
fn sql_value(value: &Value) -> rusqlite::types::Value {
    match value {
        Value::Null => rusqlite::types::Value::Null,
        Value::Bool(b) => rusqlite::types::Value::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => rusqlite::types::Value::Integer(i),
            None => rusqlite::types::Value::Real(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => rusqlite::types::Value::Text(s.clone()),
        other => rusqlite::types::Value::Text(other.to_string()),
    }
}

/// The tables made of table artifacts.
struct Tables {
    /// Table name -> (field -> quoted column).
    columns: HashMap<String, HashMap<String, String>>,
}

impl Tables {
    /// The table `name`'s columns by the fields they hold, creating it with `run_id` and `node`
    /// when it is new.
    fn create(
        &mut self,
        db: &Connection,
        name: &str,
    ) -> rusqlite::Result<&mut HashMap<String, String>> {
        Ok(match self.columns.entry(name.to_owned()) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(new) => {
                db.execute(
                    &format!("CREATE TABLE {} (run_id TEXT, node TEXT)", rows_of(name)),
                    [],
                )?;
                timed(db, name)?;
                new.insert(HashMap::new())
            }
        })
    }
}

/// Adds the rows [`read_rows`] sends to `table`: `run_id`, `node`, then a column per field,
/// added to `columns` as new fields appear.
fn insert_rows(
    db: &Connection,
    table: &str,
    columns: &mut HashMap<String, String>,
    run_id: &str,
    node: &str,
    batches: &Receiver<Option<Batch>>,
) -> Result<(), Loading> {
    // The insert for the last batch's fields, reused while batches have the same fields (the
    // rows of one artifact nearly always do).
    let mut insert: Option<Insert<'_>> = None;
    // Hung up without its `None`: the reading failed, and its error is the one reported.
    while let Some(batch) = batches.recv().map_err(|_| Loading::Stopped)? {
        let same = insert
            .as_ref()
            .is_some_and(|insert| insert.fields == batch.fields());
        if !same {
            let mut names = vec!["run_id".to_owned(), "node".to_owned()];
            for field in batch.fields() {
                let column = match columns.get(field) {
                    Some(column) => column.clone(),
                    None => {
                        let column = new_column(field, columns.values());
                        db.execute(&format!("ALTER TABLE {table} ADD COLUMN {column}"), [])
                            .map_err(Loading::Database)?;
                        columns.insert(field.to_owned(), column.clone());
                        column
                    }
                };
                names.push(column);
            }
            // Every row's run id and node are ?1 and ?2, bound once; its fields follow.
            let width = batch.fields().len();
            let values = |rows: usize| {
                let row = |r: usize| {
                    let fields = (0..width).map(|i| format!(", ?{}", 3 + r * width + i));
                    format!("(?1, ?2{})", fields.collect::<String>())
                };
                format!(
                    "INSERT INTO {table} ({}) VALUES {}",
                    names.join(", "),
                    (0..rows).map(row).collect::<Vec<_>>().join(", ")
                )
            };
            // As many rows as SQLite takes parameters, and no more than a few dozen.
            let many = ((MAX_PARAMETERS - 2) / width.max(1)).clamp(1, ROWS_PER_INSERT);
            insert = Some(Insert {
                fields: batch.fields().to_vec(),
                one: db.prepare_cached(&values(1)).map_err(Loading::Database)?,
                many: db
                    .prepare_cached(&values(many))
                    .map_err(Loading::Database)?,
                rows: many,
            });
        }
        let insert = insert.as_mut().expect("prepared above");
        let width = batch.fields().len();
        let mut left = batch.row_count();
        let mut rows = batch.rows();
        (|| {
            while left > 0 {
                // Many rows at a time, the last few one by one.
                let (statement, count) = if left >= insert.rows {
                    (&mut insert.many, insert.rows)
                } else {
                    (&mut insert.one, 1)
                };
                statement.raw_bind_parameter(1, run_id)?;
                statement.raw_bind_parameter(2, node)?;
                for (r, row) in rows.by_ref().take(count).enumerate() {
                    for (i, cell) in row.enumerate() {
                        statement.raw_bind_parameter(3 + r * width + i, cell)?;
                    }
                }
                statement.raw_execute()?;
                left -= count;
            }
            Ok(())
        })()
        .map_err(Loading::Database)?;
    }
    Ok(())
}

/// The inserts of rows with one set of fields into a table: a row at a time, and `rows` at a
/// time (a statement per row costs more than the row).
struct Insert<'c> {
    fields: Vec<String>,
    one: rusqlite::CachedStatement<'c>,
    many: rusqlite::CachedStatement<'c>,
    rows: usize,
}

/// The most parameters a statement takes (SQLite's least `SQLITE_MAX_VARIABLE_NUMBER` since
/// 3.32), and the most rows an insert takes at once: beyond a few dozen, no faster.
const MAX_PARAMETERS: usize = 32766;
const ROWS_PER_INSERT: usize = 32;

/// The table a plugin's table artifact becomes: `<plugin>_<artifact>` without the artifact's
/// extension, every character but `a-z`, `0-9` and `_` written `_` (`listening-sockets` and
/// `sockets.jsonl` make `listening_sockets_sockets`).
pub fn table_name(plugin: &str, artifact: &str) -> String {
    format!("{plugin}_{}", table_field(artifact))
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect()
}

/// The quoted column for a new field: the field's name, unless SQLite (which ignores case)
/// already has it or it is `run_id`, `node` or `created` (the view's): then with `_` added
/// until it is new.
fn new_column<'a>(field: &str, taken: impl Iterator<Item = &'a String> + Clone) -> String {
    let mut name = field.to_owned();
    loop {
        let candidate = quoted(&name);
        let clash = ["run_id", "node", "created"].contains(&name.to_ascii_lowercase().as_str())
            || taken
                .clone()
                .any(|column| column.eq_ignore_ascii_case(&candidate));
        if !clash {
            return candidate;
        }
        name.push('_');
    }
}

/// `name` as an SQL identifier: in double quotes, a quote inside doubled.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A folder bundle of one run whose plugin `p` wrote the table artifact `t.jsonl` with
    /// `rows` for node `n1`.
    fn bundle_with_table(dir: &Path, rows: &str) -> Bundle {
        let write = |path: &str, text: &str| {
            let path = dir.join("bundle").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("meta/run.json", r#"{"run_id": "r1"}"#);
        write(
            "meta/status.json",
            r#"{"run_id": "r1", "status": "complete", "plugins": []}"#,
        );
        write(
            "plugins/p/definition.json",
            r#"{"name": "p", "artifacts": [{"name": "t.jsonl", "media_type": "application/jsonl",
                "kind": "table", "row_keys": []}]}"#,
        );
        write("plugins/p/results/n1/t.jsonl", rows);
        Bundle::open(&dir.join("bundle")).unwrap()
    }

    #[test]
    fn a_tables_rows_are_loaded_only_when_the_query_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle_with_table(dir.path(), "{\"a\": 1}\n{\"a\": 2}\n");
        let rows_after = |file: &str, question: &str| -> i64 {
            let db = dir.path().join(file);
            query(std::slice::from_ref(&bundle), &db, false, question).unwrap();
            Connection::open(&db)
                .unwrap()
                .query_row("SELECT count(*) FROM p_t", [], |row| row.get(0))
                .unwrap()
        };
        // The table is there for anyone listing tables, empty until a query names it.
        assert_eq!(rows_after("a.sqlite", "SELECT name FROM sqlite_master"), 0);
        assert_eq!(rows_after("b.sqlite", "SELECT sum(a) FROM P_T"), 2);
    }

    /// Rows are written many at a time and one at a time, in batches of rows with the same
    /// fields: every row lands whole, in its order, whatever its fields.
    #[test]
    fn every_row_lands_with_its_own_values_whatever_its_fields() {
        let dir = tempfile::tempdir().unwrap();
        let mut rows = String::new();
        let mut expected = Vec::new();
        for i in 0..1000_i64 {
            // Runs of rows with the same fields, of every length around ROWS_PER_INSERT.
            let (line, row) = match i % 97 {
                0..40 => (
                    format!(r#"{{"n": {i}, "s": "x{i}"}}"#),
                    (i, format!("x{i}"), None),
                ),
                40..45 => (
                    format!(r#"{{"s": "y\"{i}", "n": {i}, "o": {{"b": 1, "a": [true]}}}}"#),
                    (
                        i,
                        format!("y\"{i}"),
                        Some(r#"{"a":[true],"b":1}"#.to_owned()),
                    ),
                ),
                _ => (
                    format!(r#"{{"n": {i}, "o": null, "s": "z"}}"#),
                    (i, "z".into(), None),
                ),
            };
            rows.push_str(&line);
            rows.push('\n');
            expected.push(row);
        }
        let bundle = bundle_with_table(dir.path(), &rows);
        let answer = query(
            &[bundle],
            &dir.path().join("f.sqlite"),
            false,
            "SELECT n, s, o FROM p_t ORDER BY n",
        )
        .unwrap();
        let found: Vec<(i64, String, Option<String>)> = answer
            .rows
            .iter()
            .map(|row| {
                (
                    row[0].as_i64().unwrap(),
                    row[1].as_str().unwrap().to_owned(),
                    row[2].as_str().map(str::to_owned),
                )
            })
            .collect();
        assert_eq!(found, expected);
        // Rows without fields are rows too, many to an insert as the others.
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle_with_table(dir.path(), &"{}\n".repeat(100));
        let answer = query(
            &[bundle],
            &dir.path().join("f.sqlite"),
            false,
            "SELECT count(*), min(node), max(run_id) FROM p_t",
        )
        .unwrap();
        assert_eq!(answer.rows, [[json!(100), json!("n1"), json!("r1")]]);
    }

    /// The error told of an archive of `tables` (node, rows) of plugin `p`, the last cut
    /// short: its header says twice the rows that follow, and the archive ends there.
    fn error_of_an_archive_cut_short(tables: &[(&str, &str)]) -> String {
        let dir = tempfile::tempdir().unwrap();
        // Each entry a header and its content padded to 512 bytes.
        let mut archive = Vec::new();
        let mut add = |path: &str, text: &[u8], size: usize| {
            let mut header = tar::Header::new_gnu();
            header.set_path(path).unwrap();
            header.set_size(size as u64);
            header.set_mode(0o644);
            header.set_cksum();
            archive.extend_from_slice(header.as_bytes());
            archive.extend_from_slice(text);
            archive.resize(archive.len().next_multiple_of(512), 0);
        };
        let status = br#"{"run_id": "r1", "status": "complete", "plugins": []}"#;
        add("meta/status.json", status, status.len());
        let definition = br#"{"name": "p", "artifacts": [{"name": "t.jsonl",
            "media_type": "application/jsonl", "kind": "table", "row_keys": []}]}"#;
        add("plugins/p/definition.json", definition, definition.len());
        for (i, (node, rows)) in tables.iter().enumerate() {
            let size = if i + 1 == tables.len() {
                2 * rows.len()
            } else {
                rows.len()
            };
            add(
                &format!("plugins/p/results/{node}/t.jsonl"),
                rows.as_bytes(),
                size,
            );
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &archive).unwrap();
        let path = dir.path().join("cut.tar.gz");
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        let bundle = Bundle::open(&path).unwrap();
        query(
            &[bundle],
            &dir.path().join("f.sqlite"),
            false,
            "SELECT * FROM p_t",
        )
        .unwrap_err()
        .to_string()
    }

    /// Reading and writing run on two threads, and the error told is the first in the archive,
    /// as one thread would meet them.
    #[test]
    fn of_two_errors_in_an_archive_the_first_is_told() {
        // The reading fails mid-table: its error, not the writer's finding the rows cut short.
        let rows = "{\"a\": 1}\n".repeat(100_000);
        let said = error_of_an_archive_cut_short(&[("n1", &rows)]);
        assert!(
            said.contains("plugins/p/results/n1/t.jsonl") && said.contains("truncated"),
            "{said}"
        );
        // The writing fails first (a row wider than SQLite's columns), the reading after.
        let fields: Vec<String> = (0..2100).map(|i| format!("\"f{i}\": {i}")).collect();
        let wide = format!("{{{}}}\n", fields.join(", "));
        let said = error_of_an_archive_cut_short(&[("n0", &wide), ("n1", &rows)]);
        assert!(said.contains("too many columns"), "{said}");
    }

    #[test]
    fn a_row_too_long_or_not_an_object_or_too_wide_is_a_clear_error() {
        let error = |rows: &str| {
            let dir = tempfile::tempdir().unwrap();
            let bundle = bundle_with_table(dir.path(), rows);
            query(
                &[bundle],
                &dir.path().join("f.sqlite"),
                false,
                "SELECT * FROM p_t",
            )
            .unwrap_err()
            .to_string()
        };
        let long = format!(
            "{{\"a\": 1}}\n{{\"a\": \"{}\"}}\n",
            "x".repeat(crate::facts::MAX_ROW_BYTES as usize)
        );
        let too_long = error(&long);
        assert!(
            too_long.contains("plugins/p/results/n1/t.jsonl line 2")
                && too_long.contains("1048576"),
            "{too_long}"
        );
        let not_object = error("{\"a\": 1}\n\n[1, 2]\n");
        assert!(
            not_object.contains("t.jsonl line 3") && not_object.contains("expected a map"),
            "{not_object}"
        );
        // Far more fields than SQLite has columns: SQLite's limit, named, not memory spent.
        let fields: Vec<String> = (0..60_000).map(|i| format!("\"f{i}\": {i}")).collect();
        let wide = error(&format!("{{{}}}\n", fields.join(", ")));
        assert!(wide.contains("too many columns"), "{wide}");
    }

    #[test]
    fn tables_and_columns_get_names_sqlite_takes_and_keeps_apart() {
        assert_eq!(
            table_name("listening-sockets", "sockets.jsonl"),
            "listening_sockets_sockets"
        );
        assert_eq!(table_name("p", "dir/Rows.v2.jsonl"), "p_dir_rows_v2");
        let taken = [quoted("Name")];
        assert_eq!(new_column("name", taken.iter()), quoted("name_"));
        assert_eq!(new_column("node", [].iter()), quoted("node_"));
        assert_eq!(new_column("a\"b", [].iter()), "\"a\"\"b\"");
    }
}
