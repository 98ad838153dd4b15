//! `factbuoy inspect export`: a bundle's facts and tables in formats other tools read. JSON Lines
//! ([`jsonl`]) and CSV ([`csv`](fn@csv)) of the facts, and of each table artifact ([`tables`]),
//! are written here; Ansible's fact cache is [`crate::ansible_cache`]'s.
//!
//! Each writes one file in the folder asked for, through a temporary file renamed into place
//! when complete: an export that fails midway (a hostile bundle, a full disk) leaves no
//! half-written file behind, and nothing is written outside the folder.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use factbuoy_bundle::reader::{Bundle, ReadError};
use serde_json::Value;

use crate::facts::{FactPath, Found, each_facts, each_row, leaves, run_and_tables};
use crate::sql::table_name;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The bundle could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A table has more columns than a CSV file of it is given.
    #[error(
        "table {table} has more than {MAX_CSV_COLUMNS} columns, too many for CSV: export it with --format jsonl"
    )]
    TooManyColumns {
        /// The table.
        table: String,
    },
    /// The file could not be written.
    #[error("writing {path}: {cause}")]
    Write {
        /// The file (or folder).
        path: String,
        /// Why.
        cause: std::io::Error,
    },
}

/// What an export wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exported {
    /// The file.
    pub file: PathBuf,
    /// The rows (JSON Lines: lines) written, header excluded.
    pub rows: u64,
}

/// The JSON Lines file's name in the folder.
pub(crate) const JSONL_FILE: &str = "facts.jsonl";
/// The CSV file's name in the folder.
pub(crate) const CSV_FILE: &str = "facts.csv";

/// Writes `facts.jsonl` in `dir`: one line per node and plugin,
/// `{"node": ..., "plugin": ..., "facts": {...}}`, in the bundle's order.
pub fn jsonl(bundle: &Bundle, dir: &Path) -> Result<Exported, ExportError> {
    let mut rows = 0;
    let file = write_file(dir, JSONL_FILE, |out| {
        let mut failed = None;
        each_facts(
            bundle,
            |_, _| true,
            |node, plugin, _, facts| {
                if failed.is_some() {
                    return;
                }
                let line = Line {
                    node,
                    plugin,
                    facts: &facts,
                };
                let written = serde_json::to_writer(&mut *out, &line)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"));
                match written {
                    Ok(()) => rows += 1,
                    Err(e) => failed = Some(e),
                }
            },
        )?;
        failed.map_or(Ok(()), |e| Err(Failure::Write(e)))
    })?;
    Ok(Exported { file, rows })
}

/// One line of `facts.jsonl`, its fields in this order (the node first, for `head` and `grep`).
#[derive(serde::Serialize)]
struct Line<'a> {
    node: &'a str,
    plugin: &'a str,
    facts: &'a Value,
}

/// Writes `facts.csv` in `dir`. Without `paths`: every leaf of every node's facts, one row
/// each (`node,plugin,path,value`), as the bundle streams past. With `paths` (as `query` takes
/// them): one row per node, a column per path; a cell holds the value found, a JSON array when
/// a path finds several, and is empty when it finds none.
pub fn csv(bundle: &Bundle, dir: &Path, paths: &[FactPath]) -> Result<Exported, ExportError> {
    let mut rows = 0;
    let file = write_file(dir, CSV_FILE, |out| {
        let mut writer = csv::Writer::from_writer(out);
        if paths.is_empty() {
            writer.write_record(["node", "plugin", "path", "value"])?;
            let mut failed = None;
            each_facts(
                bundle,
                |_, _| true,
                |node, plugin, _, facts| {
                    for (path, value) in leaves(&facts) {
                        if failed.is_some() {
                            return;
                        }
                        match writer.write_record([node, plugin, &path, &text(value)]) {
                            Ok(()) => rows += 1,
                            Err(e) => failed = Some(e),
                        }
                    }
                },
            )?;
            if let Some(e) = failed {
                return Err(e.into());
            }
        } else {
            // A node's facts come from two plugins, apart in the archive: gather the values
            // found (only those) by node first.
            let mut found: BTreeMap<String, Vec<Vec<Value>>> = BTreeMap::new();
            each_facts(
                bundle,
                |_, _| true,
                |node, _, _, facts| {
                    let cells = found
                        .entry(node.to_owned())
                        .or_insert_with(|| vec![Vec::new(); paths.len()]);
                    for (cell, path) in cells.iter_mut().zip(paths) {
                        cell.extend(path.values(&facts));
                    }
                },
            )?;
            let header = std::iter::once("node").chain(paths.iter().map(FactPath::given));
            writer.write_record(header)?;
            for (node, cells) in found {
                let cells = cells.into_iter().map(|values| match values.as_slice() {
                    [] => String::new(),
                    [one] => text(one),
                    _ => Value::from(values).to_string(),
                });
                writer.write_record(std::iter::once(node).chain(cells))?;
                rows += 1;
            }
        }
        writer.flush().map_err(Failure::Write)
    })?;
    Ok(Exported { file, rows })
}

/// The most columns a table's CSV file gets (SQLite's default limit, which `sql` meets too);
/// a hostile table of endless field names is refused instead of held.
pub const MAX_CSV_COLUMNS: usize = 2000;

/// How [`tables`] writes each table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// `<table>.jsonl`: a line per row, `{"node": ..., then the row's fields}`.
    Jsonl,
    /// `<table>.csv`: a row per row, the node first, then a column per field any row has.
    Csv,
}

/// Writes every table artifact of `bundle` into `dir`, a file per table named as `inspect sql`
/// names its table (`<plugin>_<artifact>`), each whole or not at all. A row's field called
/// `node` is written `node_` (as in `sql`), so the node column is never overwritten. CSV reads
/// the bundle twice: first for the columns, then for the rows, so memory holds no rows.
pub fn tables(
    bundle: &Bundle,
    dir: &Path,
    format: TableFormat,
) -> Result<Vec<Exported>, ExportError> {
    // Each table's columns, when writing CSV: found in a first pass.
    let mut columns: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if format == TableFormat::Csv {
        run_and_tables(bundle, |found, _| -> Result<(), ExportError> {
            if let Found::Table {
                plugin,
                artifact,
                rows,
                ..
            } = found
            {
                let table = table_name(plugin, artifact);
                let known = columns.entry(table.clone()).or_default();
                each_row(rows, |row| {
                    for field in row.keys() {
                        let field = field_name(field);
                        if !known.contains(&field) {
                            if known.len() == MAX_CSV_COLUMNS {
                                return Err(ExportError::TooManyColumns {
                                    table: table.clone(),
                                });
                            }
                            known.push(field);
                        }
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
    }
    // A temporary file per table, renamed into place once the walk is whole.
    let mut open: BTreeMap<String, (tempfile::NamedTempFile, u64)> = BTreeMap::new();
    std::fs::create_dir_all(dir).map_err(|cause| ExportError::Write {
        path: dir.display().to_string(),
        cause,
    })?;
    let extension = match format {
        TableFormat::Jsonl => "jsonl",
        TableFormat::Csv => "csv",
    };
    let file_of = |table: &str| dir.join(format!("{table}.{extension}"));
    let write_error = |path: PathBuf| {
        move |cause| ExportError::Write {
            path: path.display().to_string(),
            cause,
        }
    };
    run_and_tables(bundle, |found, _| -> Result<(), ExportError> {
        let Found::Table {
            node,
            plugin,
            artifact,
            rows,
            ..
        } = found
        else {
            return Ok(());
        };
        let table = table_name(plugin, artifact);
        let failed = write_error(file_of(&table));
        if !open.contains_key(&table) {
            let file = tempfile::Builder::new()
                .prefix(&format!(".{table}.{extension}."))
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
                .tempfile_in(dir)
                .map_err(&failed)?;
            if format == TableFormat::Csv {
                let header =
                    std::iter::once("node").chain(columns[&table].iter().map(String::as_str));
                let mut writer = csv::Writer::from_writer(file.as_file());
                writer
                    .write_record(header)
                    .and_then(|()| writer.flush().map_err(csv::Error::from))
                    .map_err(|e| failed(e.into()))?;
            }
            open.insert(table.clone(), (file, 0));
        }
        let (file, written) = open.get_mut(&table).expect("opened above");
        let mut out = BufWriter::new(file.as_file());
        match format {
            TableFormat::Jsonl => each_row(rows, |row| {
                let line = TableLine {
                    node,
                    row: row.into_iter().map(|(f, v)| (field_name(&f), v)).collect(),
                };
                serde_json::to_writer(&mut out, &line)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(&failed)?;
                *written += 1;
                Ok::<(), ExportError>(())
            })?,
            TableFormat::Csv => {
                let mut writer = csv::Writer::from_writer(&mut out);
                let header = &columns[&table];
                each_row(rows, |row| {
                    let row: BTreeMap<String, Value> =
                        row.into_iter().map(|(f, v)| (field_name(&f), v)).collect();
                    let cells = header
                        .iter()
                        .map(|column| row.get(column).map(text).unwrap_or_default());
                    writer
                        .write_record(std::iter::once(node.to_owned()).chain(cells))
                        .map_err(|e| failed(e.into()))?;
                    *written += 1;
                    Ok::<(), ExportError>(())
                })?;
                writer.flush().map_err(&failed)?;
            }
        }
        out.flush().map_err(&failed)?;
        Ok(())
    })?;
    let mut exported = Vec::with_capacity(open.len());
    for (table, (file, rows)) in open {
        let target = file_of(&table);
        file.persist(&target)
            .map_err(|e| write_error(target.clone())(e.error))?;
        exported.push(Exported { file: target, rows });
    }
    Ok(exported)
}

/// A line of a table's JSON Lines file: the node first (for `head` and `grep`), then the row.
#[derive(serde::Serialize)]
struct TableLine<'a> {
    node: &'a str,
    #[serde(flatten)]
    row: serde_json::Map<String, Value>,
}

/// A row's field as a column: `node` is the node's, so a field of that name is `node_` (and
/// `node_` is `node__`, and so on, as in `sql`).
fn field_name(field: &str) -> String {
    if field.trim_end_matches('_') == "node" {
        format!("{field}_")
    } else {
        field.to_owned()
    }
}

/// A value in a CSV cell: strings bare, anything else as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// What stopped writing a file.
pub(crate) enum Failure {
    Read(ReadError),
    Write(std::io::Error),
}

impl From<ReadError> for Failure {
    fn from(e: ReadError) -> Self {
        Failure::Read(e)
    }
}

impl From<csv::Error> for Failure {
    fn from(e: csv::Error) -> Self {
        Failure::Write(e.into())
    }
}

/// Writes `name` in `dir` (created if missing) through `fill`, whole or not at all
/// ([`write_whole`]).
fn write_file(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut BufWriter<&std::fs::File>) -> Result<(), Failure>,
) -> Result<PathBuf, ExportError> {
    std::fs::create_dir_all(dir).map_err(|cause| ExportError::Write {
        path: dir.display().to_string(),
        cause,
    })?;
    let target = dir.join(name);
    write_whole(&target, fill)?;
    Ok(target)
}

/// Writes the file `target` through `fill`, in a temporary file beside it renamed into place
/// only when `fill` succeeds: a failure leaves no half-written file. Its folder must exist.
pub(crate) fn write_whole(
    target: &Path,
    fill: impl FnOnce(&mut BufWriter<&std::fs::File>) -> Result<(), Failure>,
) -> Result<(), ExportError> {
    let write_error = |cause| ExportError::Write {
        path: target.display().to_string(),
        cause,
    };
    let folder = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map_or_else(|| "export".into(), |n| n.to_string_lossy().into_owned());
    // Readable as any file written here would be (tempfile's default is 0600).
    let temporary = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(folder)
        .map_err(write_error)?;
    let mut out = BufWriter::new(temporary.as_file());
    match fill(&mut out) {
        Ok(()) => {}
        Err(Failure::Read(e)) => return Err(e.into()),
        Err(Failure::Write(cause)) => return Err(write_error(cause)),
    }
    out.flush().map_err(write_error)?;
    drop(out);
    temporary
        .persist(target)
        .map_err(|e| write_error(e.error))?;
    Ok(())
}
