//! `factbuoy inspect sql`: the facts of every node of one or more bundles as SQLite tables, the
//! way osquery users ask their fleets questions, but offline.
//!
//! The tables are written into a database file (a temporary one unless the caller keeps it), so
//! memory stays SQLite's page cache whatever the fleet's size; each facts document streams past
//! once. docs/inspect.md lists the tables for users.

use std::collections::HashMap;
use std::path::Path;

use factbuoy_bundle::reader::{Bundle, Entry, ReadError};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};
use serde::Serialize;
use serde_json::Value;

use crate::facts::{Found, RunDocuments, each_row, leaves, run_and_facts};
use crate::keyed::table_field;
use crate::meta::wire;

/// The tables and views, as created; docs/inspect.md explains each column.
const SCHEMA: &str = "
CREATE TABLE runs (run_id TEXT, bundle TEXT, status TEXT, error TEXT, created TEXT,
                   factbuoy_version TEXT);
CREATE TABLE results (run_id TEXT, plugin TEXT, node TEXT, status TEXT, result_status TEXT,
                      error TEXT);
CREATE TABLE facts (run_id TEXT, node TEXT, plugin TEXT, facts TEXT);
CREATE TABLE fact_values (run_id TEXT, node TEXT, plugin TEXT, path TEXT, value);
CREATE VIEW setup AS SELECT run_id, node, facts FROM facts WHERE plugin = 'setup';
CREATE VIEW host_facts AS SELECT run_id, node, facts FROM facts WHERE plugin = 'host-facts';
CREATE INDEX fact_values_by_path ON fact_values (path);
";

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
        "the query failed: {0}; the tables are runs, results, facts, fact_values, the views setup and host_facts, and one per table artifact, <plugin>_<artifact> (docs/inspect.md)"
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
/// against it. The database is read-only for the query.
pub fn query(bundles: &[Bundle], database: &Path, query: &str) -> Result<Answer, SqlError> {
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
    // Table artifacts' tables, shared by the bundles: each bundle adds its rows.
    let mut tables = Tables {
        wanted: query.to_ascii_lowercase(),
        columns: HashMap::new(),
    };
    for bundle in bundles {
        let transaction = connection.transaction().map_err(db_error)?;
        load(bundle, &transaction, &mut tables).map_err(|e| match e {
            Loading::Read(e) => SqlError::Read(e),
            Loading::Database(cause) => db_error(cause),
        })?;
        transaction.commit().map_err(db_error)?;
    }
    connection
        .pragma_update(None, "query_only", true)
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
}

impl From<ReadError> for Loading {
    fn from(e: ReadError) -> Self {
        Loading::Read(e)
    }
}

/// Writes one bundle's run, results, facts and tables' rows; one pass over the archive.
fn load(bundle: &Bundle, db: &Connection, tables: &mut Tables) -> Result<(), Loading> {
    // Facts are written as they stream past, under the run's id. In a bundle whose status
    // document comes after them (not one factbuoy writes), under a stand-in, replaced at the
    // end: that rewrites every row, so it is done only when needed.
    const PENDING: &str = "";
    let mut pending = false;
    let RunDocuments { run, status } = run_and_facts(bundle, |found, run_id| {
        pending |= run_id.is_none();
        let run_id = run_id.unwrap_or(PENDING);
        match found {
            Found::Facts {
                node,
                source,
                facts,
                ..
            } => insert_facts(db, run_id, node, source, &facts).map_err(Loading::Database),
            Found::Table {
                node,
                plugin,
                artifact,
                rows,
                ..
            } => tables.insert_rows(db, run_id, node, plugin, artifact, rows),
        }
    })?;
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
        let mut insert = db.prepare("INSERT INTO results VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
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
        let loaded = ["facts", "fact_values"].map(quoted);
        for table in loaded
            .iter()
            .chain(tables.columns.keys())
            .filter(|_| pending)
        {
            db.execute(
                &format!("UPDATE {table} SET run_id = ?1 WHERE run_id = ?2"),
                params![id, PENDING],
            )?;
        }
        Ok(())
    })()
    .map_err(Loading::Database)
}

fn insert_facts(
    db: &Connection,
    run_id: &str,
    node: &str,
    plugin: &str,
    facts: &Value,
) -> rusqlite::Result<()> {
    db.execute(
        "INSERT INTO facts VALUES (?1, ?2, ?3, ?4)",
        params![run_id, node, plugin, facts.to_string()],
    )?;
    let mut insert = db.prepare_cached("INSERT INTO fact_values VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for (path, value) in leaves(facts) {
        insert.execute(params![run_id, node, plugin, path, sql_value(value)])?;
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

/// The tables made of table artifacts: each one's columns, by the fields they hold.
struct Tables {
    /// The query, lower-case: a table's rows are loaded only when it names the table, so a
    /// question about facts does not pay for every node's tables (a journal written as JSON
    /// Lines before artifacts had kinds reads as one).
    wanted: String,
    /// Quoted table name -> (field -> quoted column).
    columns: HashMap<String, HashMap<String, String>>,
}

impl Tables {
    /// Adds the rows of `node`'s table artifact `artifact` of `plugin` (JSON Lines, one object
    /// per line) to the table `<plugin>_<artifact>`: `run_id`, `node`, then a column per field
    /// seen, added as new fields appear.
    fn insert_rows(
        &mut self,
        db: &Connection,
        run_id: &str,
        node: &str,
        plugin: &str,
        artifact: &str,
        rows: &mut Entry<'_>,
    ) -> Result<(), Loading> {
        let name = table_name(plugin, artifact);
        let table = quoted(&name);
        let columns = match self.columns.entry(table.clone()) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(new) => {
                db.execute(
                    &format!("CREATE TABLE {table} (run_id TEXT, node TEXT)"),
                    [],
                )
                .map_err(Loading::Database)?;
                new.insert(HashMap::new())
            }
        };
        if !self.wanted.contains(&name) {
            return Ok(());
        }
        // The insert for the last row's fields, reused while rows have the same fields (the
        // rows of one artifact nearly always do).
        let mut insert: Option<(Vec<String>, rusqlite::CachedStatement<'_>)> = None;
        each_row(rows, |row| {
            let same = insert
                .as_ref()
                .is_some_and(|(fields, _)| fields.iter().eq(row.keys()));
            if !same {
                let mut names = vec!["run_id".to_owned(), "node".to_owned()];
                for field in row.keys() {
                    let column = match columns.get(field) {
                        Some(column) => column.clone(),
                        None => {
                            let column = new_column(field, columns.values());
                            db.execute(&format!("ALTER TABLE {table} ADD COLUMN {column}"), [])
                                .map_err(Loading::Database)?;
                            columns.insert(field.clone(), column.clone());
                            column
                        }
                    };
                    names.push(column);
                }
                let placeholders = vec!["?"; names.len()].join(", ");
                let statement = db
                    .prepare_cached(&format!(
                        "INSERT INTO {table} ({}) VALUES ({placeholders})",
                        names.join(", ")
                    ))
                    .map_err(Loading::Database)?;
                insert = Some((row.keys().cloned().collect(), statement));
            }
            let (_, statement) = insert.as_mut().expect("prepared above");
            (|| {
                statement.raw_bind_parameter(1, run_id)?;
                statement.raw_bind_parameter(2, node)?;
                for (i, value) in row.values().enumerate() {
                    statement.raw_bind_parameter(i + 3, Cell(value))?;
                }
                statement.raw_execute()
            })()
            .map_err(Loading::Database)?;
            Ok(())
        })
    }
}

/// A JSON value bound as SQLite holds it ([`sql_value`]), text borrowed rather than copied.
struct Cell<'a>(&'a Value);

impl rusqlite::ToSql for Cell<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self.0 {
            Value::String(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            other => ToSqlOutput::Owned(sql_value(other)),
        })
    }
}

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
/// already has it or it is `run_id` or `node`: then with `_` added until it is new.
fn new_column<'a>(field: &str, taken: impl Iterator<Item = &'a String> + Clone) -> String {
    let mut name = field.to_owned();
    loop {
        let candidate = quoted(&name);
        let clash = ["run_id", "node"].contains(&name.to_ascii_lowercase().as_str())
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
    use super::*;

    #[test]
    fn a_tables_rows_are_loaded_only_when_the_query_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = dir.path().join("bundle").join(path);
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
        write("plugins/p/results/n1/t.jsonl", "{\"a\": 1}\n{\"a\": 2}\n");
        let bundle = Bundle::open(&dir.path().join("bundle")).unwrap();
        let rows_after = |file: &str, question: &str| -> i64 {
            let db = dir.path().join(file);
            query(std::slice::from_ref(&bundle), &db, question).unwrap();
            Connection::open(&db)
                .unwrap()
                .query_row("SELECT count(*) FROM p_t", [], |row| row.get(0))
                .unwrap()
        };
        // The table is there for anyone listing tables, empty until a query names it.
        assert_eq!(rows_after("a.sqlite", "SELECT name FROM sqlite_master"), 0);
        assert_eq!(rows_after("b.sqlite", "SELECT sum(a) FROM P_T"), 2);
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
