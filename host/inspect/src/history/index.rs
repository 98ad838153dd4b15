//! The index of a directory of bundles: a SQLite file in the cache directory that holds, for
//! every bundle, its run and digest, and for every node, each fact's changes only; and beside
//! it, each document's latest state ([`build::State`]), which only updates read: a flat file
//! read and written whole, a sequential read and write instead of a B-tree's pages, and
//! numbered as the index records, so that a file and an index that do not belong together
//! are noticed (and the index built anew). Brought up
//! to date before every answer: bundles added since are read, and nothing indexed is trusted
//! without its file's metadata matching (or, when it does not, its digest).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use factbuoy_bundle::reader::Bundle;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::Serialize;

use super::build::{self, AddError, Known, Slot};
use super::error::{HistoryError, SameRun};
use super::pile::{self, OnDisk, RunHead};
use super::state::State;
use super::times::created_ns;

/// The index's layout; a file of another format is rebuilt, never read. Part of it: the
/// value hash of `build`, and the version of factbuoy that wrote it.
const FORMAT: &str = concat!(
    "factbuoy history index 5, factbuoy ",
    env!("CARGO_PKG_VERSION")
);

pub(super) const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE bundles (seq INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, size INTEGER,
                      mtime_ns INTEGER, ctime_ns INTEGER, inode INTEGER, sha256 TEXT,
                      run_id TEXT, created TEXT, created_ns INTEGER, origin TEXT, status TEXT,
                      error TEXT, copy_of INTEGER);
CREATE TABLE nodes (id INTEGER PRIMARY KEY, origin TEXT NOT NULL, name TEXT NOT NULL,
                    UNIQUE (origin, name));
CREATE TABLE sources (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE paths (id INTEGER PRIMARY KEY, source INTEGER NOT NULL, path TEXT NOT NULL,
                    volatile INTEGER NOT NULL);
CREATE TABLE changes (node INTEGER, path INTEGER, seq INTEGER, value TEXT,
                      PRIMARY KEY (node, path, seq)) WITHOUT ROWID;
CREATE TABLE volatile_changes (seq INTEGER, node INTEGER, path INTEGER, value TEXT,
                               PRIMARY KEY (seq, node, path)) WITHOUT ROWID;
CREATE TABLE reported (node INTEGER, source INTEGER, seq INTEGER,
                       PRIMARY KEY (node, source, seq)) WITHOUT ROWID;
CREATE TABLE snapshots (node INTEGER, plugin TEXT, seq INTEGER, status TEXT,
                        result_status TEXT, PRIMARY KEY (node, plugin, seq)) WITHOUT ROWID;
";

/// What bringing the index up to date did.
#[derive(Debug, Clone, Serialize)]
pub struct Update {
    /// The index file.
    pub index: PathBuf,
    /// Bundles read this time.
    pub added: usize,
    /// Why the index was built anew, when it was (it did not exist, a bundle changed or went,
    /// one older than the latest indexed was added).
    pub rebuilt: Option<String>,
    /// Bundles in the index, unreadable ones included.
    pub bundles: usize,
    /// Bundles that could not be read, each with why; left out of every answer, and read
    /// again once the file changes.
    pub unreadable: Vec<Unreadable>,
    /// Bundles left out because another file of the directory holds the same files, the same
    /// run: each run counts once.
    pub duplicates: Vec<Duplicate>,
    /// The index's size on disk, its states file included.
    pub index_bytes: u64,
    /// The bundles' size on disk.
    pub bundle_bytes: u64,
}

/// A bundle of the directory that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    /// Its file name.
    pub bundle: String,
    /// Why.
    pub error: String,
}

/// A bundle left out because it holds the same files as one that is read.
#[derive(Debug, Clone, Serialize)]
pub struct Duplicate {
    /// Its file name.
    pub bundle: String,
    /// The file read instead: of the same files, the name that sorts first.
    pub kept: String,
    /// Their run.
    pub run_id: String,
}

/// The index of `dir` at `index`, brought up to date; the connection is left open for the
/// answers.
pub(crate) fn update(dir: &Path, index: &Path) -> Result<(Connection, Update), HistoryError> {
    let dir = pile::canonical(dir)?;
    if let Some(parent) = index.parent() {
        std::fs::create_dir_all(parent).map_err(|cause| HistoryError::Directory {
            dir: parent.to_owned(),
            cause,
        })?;
    }
    // One update at a time: two at once would each add the bundles new to both. Held until
    // the update is done; the answers that follow share the index as SQLite allows.
    let _updating = lock(index)?;
    let on_disk = pile::list(&dir)?;
    let failed = |cause| HistoryError::Index {
        index: index.to_owned(),
        cause,
    };
    let rebuild_why = match open_existing(index, &dir).map_err(failed)? {
        Existing::Usable(mut connection) => match stale(&connection, &dir, &on_disk)? {
            Staleness::Fresh(new) => match add_all(&mut connection, index, &dir, new) {
                Ok(added) => {
                    let update = summary(&connection, index, added, None, &on_disk)?;
                    return Ok((connection, update));
                }
                Err(Failed::Index(e)) => return Err(failed(e)),
                Err(Failed::Refused(e)) => return Err(e),
                Err(Failed::States(e)) => format!("its states file could not be read: {e}"),
            },
            Staleness::Rebuild(why) => why,
        },
        Existing::Missing => "there was none".to_owned(),
        Existing::Other(why) => why,
    };
    // Built beside the old one and renamed over it: a reader of the old file keeps a whole one.
    let building = index.with_extension(format!("new-{}", std::process::id()));
    let _ = std::fs::remove_file(&building);
    let mut connection = Connection::open(&building).map_err(failed)?;
    connection
        .execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
        .and_then(|()| connection.execute_batch(SCHEMA))
        .and_then(|()| {
            connection.execute(
                "INSERT INTO meta (key, value) VALUES ('format', ?1), ('dir', ?2)",
                params![FORMAT, dir.to_string_lossy()],
            )
        })
        .map_err(failed)?;
    let new = heads(&dir, on_disk.clone());
    let added = add_all(&mut connection, index, &dir, new).map_err(|e| match e {
        Failed::Index(e) => failed(e),
        Failed::Refused(e) => e,
        Failed::States(cause) => HistoryError::Directory {
            dir: states_file(index),
            cause,
        },
    })?;
    drop(connection);
    std::fs::rename(&building, index).map_err(|cause| HistoryError::Directory {
        dir: index.to_owned(),
        cause,
    })?;
    let connection = Connection::open(index).map_err(failed)?;
    let update = summary(&connection, index, added, Some(rebuild_why), &on_disk)?;
    Ok((connection, update))
}

/// Another connection to the index at `index`, which [`update`] brought up to date.
pub(crate) fn reopen(index: &Path) -> Result<Connection, HistoryError> {
    let failed = |cause| HistoryError::Index {
        index: index.to_owned(),
        cause,
    };
    let connection = Connection::open(index).map_err(failed)?;
    connection
        .busy_timeout(std::time::Duration::from_secs(60))
        .map_err(failed)?;
    Ok(connection)
}

/// Waits for, and takes, the lock of the index at `index` (a file beside it), released when
/// the file returned is closed.
fn lock(index: &Path) -> Result<std::fs::File, HistoryError> {
    let path = index.with_extension("lock");
    let failed = |cause| HistoryError::Directory {
        dir: path.clone(),
        cause,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(failed)?;
    file.lock().map_err(failed)?;
    Ok(file)
}

enum Existing {
    Usable(Connection),
    Missing,
    /// A file of another format or directory, and why it is not used.
    Other(String),
}

fn open_existing(index: &Path, dir: &Path) -> rusqlite::Result<Existing> {
    if !index.exists() {
        return Ok(Existing::Missing);
    }
    let connection = Connection::open(index)?;
    connection.busy_timeout(std::time::Duration::from_secs(60))?;
    let read = |key: &str| -> rusqlite::Result<Option<String>> {
        connection
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
    };
    let (format, indexed_dir) = match (read("format"), read("dir")) {
        (Ok(format), Ok(indexed)) => (format, indexed),
        _ => return Ok(Existing::Other("it was not an index factbuoy reads".into())),
    };
    if format.as_deref() != Some(FORMAT) {
        return Ok(Existing::Other(format!(
            "it was written by another version ({})",
            format.unwrap_or_default()
        )));
    }
    if indexed_dir.as_deref() != Some(&*dir.to_string_lossy()) {
        return Ok(Existing::Other(format!(
            "it indexed another directory ({})",
            indexed_dir.unwrap_or_default()
        )));
    }
    Ok(Existing::Usable(connection))
}

/// A new bundle, with what its run.json says (or why it could not be read).
struct New {
    file: OnDisk,
    head: Result<RunHead, String>,
}

enum Staleness {
    /// The index holds every indexed file as it is; these are new, in the order to add them.
    Fresh(Vec<New>),
    /// It must be built anew, for this reason.
    Rebuild(String),
}

/// Compares the index with the directory.
fn stale(
    connection: &Connection,
    dir: &Path,
    on_disk: &[OnDisk],
) -> Result<Staleness, HistoryError> {
    let failed = |cause| HistoryError::Index {
        index: PathBuf::from(connection.path().unwrap_or_default()),
        cause,
    };
    let mut indexed: HashMap<String, (OnDisk, Option<String>)> = HashMap::new();
    let mut latest = i64::MIN;
    // The runs of the bundles read, and the files left out as copies of one of them.
    let mut runs: std::collections::HashSet<String> = Default::default();
    let mut copies: std::collections::HashSet<String> = Default::default();
    {
        let mut rows = connection
            .prepare(
                "SELECT name, size, mtime_ns, ctime_ns, inode, sha256, created_ns, run_id,
                        error IS NULL AND copy_of IS NULL, copy_of IS NOT NULL
                 FROM bundles",
            )
            .map_err(failed)?;
        let mut rows = rows.query([]).map_err(failed)?;
        while let Some(row) = rows.next().map_err(failed)? {
            let file = OnDisk {
                name: row.get(0).map_err(failed)?,
                size: row.get::<_, i64>(1).map_err(failed)? as u64,
                mtime_ns: row.get(2).map_err(failed)?,
                ctime_ns: row.get(3).map_err(failed)?,
                inode: row.get::<_, i64>(4).map_err(failed)? as u64,
            };
            let created: Option<i64> = row.get(6).map_err(failed)?;
            latest = latest.max(created.unwrap_or(i64::MIN));
            if row.get(8).map_err(failed)? {
                runs.insert(row.get(7).map_err(failed)?);
            }
            if row.get(9).map_err(failed)? {
                copies.insert(file.name.clone());
            }
            indexed.insert(file.name.clone(), (file, row.get(5).map_err(failed)?));
        }
    }
    let mut new = Vec::new();
    let mut present = 0;
    for file in on_disk {
        match indexed.get(&file.name) {
            None => new.push(file.clone()),
            Some((was, _)) if was == file => present += 1,
            Some((_, sha256)) => {
                // Touched, copied or replaced: trusted again only if its bytes are the same.
                let now = factbuoy_protocol::digest::sha256_file(&dir.join(&file.name)).ok();
                if now.is_none() || now != *sha256 {
                    return Ok(Staleness::Rebuild(format!("{} changed", file.name)));
                }
                connection
                    .execute(
                        "UPDATE bundles SET size = ?2, mtime_ns = ?3, ctime_ns = ?4, inode = ?5
                         WHERE name = ?1",
                        params![
                            file.name,
                            file.size as i64,
                            file.mtime_ns,
                            file.ctime_ns,
                            file.inode as i64
                        ],
                    )
                    .map_err(failed)?;
                present += 1;
            }
        }
    }
    if present < indexed.len() {
        let mut gone: Vec<&String> = indexed
            .keys()
            .filter(|name| !on_disk.iter().any(|f| &f.name == *name))
            .collect();
        gone.sort();
        // A copy left out counted for nothing: forgotten, with nothing to build anew.
        let (copies_gone, gone): (Vec<&String>, Vec<&String>) =
            gone.into_iter().partition(|name| copies.contains(*name));
        for name in copies_gone {
            connection
                .execute("DELETE FROM bundles WHERE name = ?1", [name])
                .map_err(failed)?;
        }
        if !gone.is_empty() {
            return Ok(Staleness::Rebuild(format!(
                "{} {} gone",
                gone.iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                if gone.len() == 1 { "is" } else { "are" }
            )));
        }
    }
    let new = heads(dir, new);
    // A copy of a run already read is not older: it is left out when added.
    if let Some(older) = new.iter().find(|n| {
        n.head.as_ref().is_ok_and(|head| {
            !runs.contains(&head.run_id) && created_ns(&head.created).unwrap_or(i64::MIN) < latest
        })
    }) {
        return Ok(Staleness::Rebuild(format!(
            "{} is older than the latest bundle indexed",
            older.file.name
        )));
    }
    Ok(Staleness::Fresh(new))
}

/// Reads each file's run head and puts them in the order their runs were created (then by
/// name); unreadable ones last.
fn heads(dir: &Path, files: Vec<OnDisk>) -> Vec<New> {
    let mut new: Vec<New> = files
        .into_iter()
        .map(|file| New {
            head: pile::run_head(&dir.join(&file.name)).map_err(|e| e.to_string()),
            file,
        })
        .collect();
    new.sort_by_key(|n| match &n.head {
        Ok(head) => (
            0,
            created_ns(&head.created).unwrap_or(i64::MAX),
            n.file.name.clone(),
        ),
        Err(_) => (1, 0, n.file.name.clone()),
    });
    new
}

/// Adds `new` in its order, in one transaction; returns how many were read. A bundle that
/// cannot be read whole (its run head could) undoes the transaction, since its first documents
/// already moved the states: it is recorded alone as unreadable, and the others are added
/// again without it.
fn add_all(
    connection: &mut Connection,
    index: &Path,
    dir: &Path,
    mut new: Vec<New>,
) -> Result<usize, Failed> {
    let mut unreadable = 0;
    loop {
        match add_in_one(connection, index, dir, &new) {
            Ok(added) => return Ok(added + unreadable),
            Err(Adding::Unreadable(at, error)) => {
                let bad = new.remove(at);
                let tx = connection.transaction()?;
                let seq: i64 =
                    tx.query_row("SELECT coalesce(max(seq), 0) + 1 FROM bundles", [], |r| {
                        r.get(0)
                    })?;
                insert_bundle(&tx, seq, &bad.file, Some(&error))?;
                tx.commit()?;
                unreadable += 1;
            }
            Err(Adding::Failed(failed)) => return Err(failed),
        }
    }
}

/// Why [`add_in_one`] stopped.
enum Adding {
    /// The bundle at this place of the list could not be read whole, for this reason.
    Unreadable(usize, String),
    Failed(Failed),
}

impl From<rusqlite::Error> for Adding {
    fn from(e: rusqlite::Error) -> Self {
        Adding::Failed(Failed::Index(e))
    }
}

impl From<Failed> for Adding {
    fn from(e: Failed) -> Self {
        Adding::Failed(e)
    }
}

fn add_in_one(
    connection: &mut Connection,
    index: &Path,
    dir: &Path,
    new: &[New],
) -> Result<usize, Adding> {
    if new.is_empty() {
        return Ok(0);
    }
    let tx = connection.transaction()?;
    let mut known = load(&tx)?;
    let generation: u64 = tx
        .query_row("SELECT value FROM meta WHERE key = 'states'", [], |r| {
            r.get::<_, String>(0)
        })
        .optional()?
        .map_or(0, |g| g.parse().unwrap_or(u64::MAX));
    let generation = if generation > 0 {
        known.states = read_states(&states_file(index), generation)?;
        generation
    } else {
        // A new index's first: not 1, so that a states file left by an index this one
        // replaces cannot pass for its own.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |t| t.as_nanos() as u64 | 1)
            ^ u64::from(std::process::id())
    };
    let mut seq: i64 = tx.query_row("SELECT coalesce(max(seq), 0) FROM bundles", [], |r| {
        r.get(0)
    })?;
    let mut added = new.len();
    for (at, New { file, head }) in new.iter().enumerate() {
        seq += 1;
        let path = dir.join(&file.name);
        let read = match head {
            Err(e) => Err(e.clone()),
            Ok(head) => {
                if let Some(kept) = read_before(&tx, &head.run_id)? {
                    match leave_out_copy(&tx, dir, seq, file, head, kept)? {
                        Copy::LeftOut => {
                            added -= 1;
                            continue;
                        }
                        Copy::Unreadable(e) => return Err(Adding::Unreadable(at, e)),
                    }
                }
                let origin = head.origin.clone().unwrap_or_default();
                let read = Bundle::open(&path)
                    .map_err(AddError::Read)
                    .and_then(|bundle| build::add(&tx, &mut known, &bundle, seq, &origin));
                match read {
                    Ok(read) => Ok((head.clone(), read)),
                    // Dropping the transaction undoes it.
                    Err(AddError::Read(e)) => return Err(Adding::Unreadable(at, e.to_string())),
                    Err(AddError::Index(e)) => return Err(Failed::Index(e).into()),
                }
            }
        };
        match read {
            Ok((head, read)) => {
                insert_bundle(&tx, seq, file, None)?;
                tx.execute(
                    "UPDATE bundles SET sha256 = ?2, run_id = ?3, created = ?4, created_ns = ?5,
                     origin = ?6, status = ?7 WHERE seq = ?1",
                    params![
                        seq,
                        read.sha256,
                        head.run_id,
                        head.created,
                        created_ns(&head.created),
                        head.origin.unwrap_or_default(),
                        crate::meta::wire(&read.status.status),
                    ],
                )?;
            }
            // Its facts, if any were read before the error, stay out of every answer: the
            // bundle has no origin, and answers read bundles of one origin.
            Err(error) => insert_bundle(&tx, seq, file, Some(&error))?,
        }
    }
    // Written beside, numbered, committed, then renamed into place: a crash between any two
    // steps leaves numbers that disagree, and the index is built anew.
    let generation = generation.wrapping_add(1).max(1);
    let written = states_file(index).with_extension(format!("states.new-{}", std::process::id()));
    write_states(&written, generation, &known.states)?;
    tx.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('states', ?1)",
        [generation.to_string()],
    )?;
    tx.commit()?;
    std::fs::rename(&written, states_file(index)).map_err(Failed::States)?;
    Ok(added)
}

/// A bundle read into the index.
struct ReadBefore {
    seq: i64,
    file: OnDisk,
    sha256: String,
}

/// The bundle of run `run_id` read into the index, if one was.
fn read_before(tx: &Transaction<'_>, run_id: &str) -> rusqlite::Result<Option<ReadBefore>> {
    tx.query_row(
        "SELECT seq, name, size, mtime_ns, ctime_ns, inode, sha256 FROM bundles
         WHERE run_id = ?1 AND error IS NULL AND copy_of IS NULL",
        [run_id],
        |row| {
            Ok(ReadBefore {
                seq: row.get(0)?,
                file: OnDisk {
                    name: row.get(1)?,
                    size: row.get::<_, i64>(2)? as u64,
                    mtime_ns: row.get(3)?,
                    ctime_ns: row.get(4)?,
                    inode: row.get::<_, i64>(5)? as u64,
                },
                sha256: row.get(6)?,
            })
        },
    )
    .optional()
}

/// What became of a bundle of a run already read.
enum Copy {
    /// Recorded as a copy, left out of every answer.
    LeftOut,
    /// Its bytes could not be read, for this reason.
    Unreadable(String),
}

/// Records `file`, whose run `head` the index already read from `kept`, as the index's bundle
/// number `seq`, left out of every answer, when it holds the same files; records it as
/// unreadable when it is not whole (a copy cut short); refuses the directory when both are
/// whole but hold other files: one run with two bundles that differ is not one history, and
/// which of them is the run's own only the person who put them there knows.
///
/// The same bytes (sha-256 of the file, which the index records of each bundle it reads) are
/// the same files, found without decompressing the copy. Other bytes may still be the same
/// files compressed again: then both are verified ([`verify`](crate::verify::verify): every
/// file against its `meta/index.json`) and their content digests compared; a lying index
/// fails the verification rather than passing for its files.
///
/// Of two names of one bundle the one that sorts first is read, whatever order they came in,
/// so that an index built anew gives the same answers: the kept row takes the new name when
/// it sorts first (its facts are the same files' facts).
fn leave_out_copy(
    tx: &Transaction<'_>,
    dir: &Path,
    seq: i64,
    file: &OnDisk,
    head: &RunHead,
    kept: ReadBefore,
) -> Result<Copy, Failed> {
    let sha256 = match factbuoy_protocol::digest::sha256_file(&dir.join(&file.name)) {
        Ok(sha256) => sha256,
        Err(e) => return Ok(Copy::Unreadable(e.to_string())),
    };
    if sha256 != kept.sha256 {
        let new = match content_sha256(&dir.join(&file.name)) {
            Ok(content) => content,
            Err(why) => {
                return Ok(Copy::Unreadable(format!(
                    "a copy of run {} ({} is read) that is not whole: {why}",
                    head.run_id, kept.file.name
                )));
            }
        };
        if content_sha256(&dir.join(&kept.file.name)).ok() != Some(new) {
            let mut both = [(&kept.file.name, &kept.sha256), (&file.name, &sha256)];
            both.sort();
            return Err(Failed::Refused(HistoryError::SameRunDiffers {
                dir: dir.to_owned(),
                both: Box::new(SameRun {
                    run_id: head.run_id.clone(),
                    first: both[0].0.clone(),
                    first_sha256: both[0].1.clone(),
                    second: both[1].0.clone(),
                    second_sha256: both[1].1.clone(),
                }),
            }));
        }
    }
    // The row read keeps the name that sorts first; the other file is the copy.
    let (copy, copy_sha256) = if file.name < kept.file.name {
        tx.execute(
            "UPDATE bundles SET name = ?2, size = ?3, mtime_ns = ?4, ctime_ns = ?5, inode = ?6,
             sha256 = ?7 WHERE seq = ?1",
            params![
                kept.seq,
                file.name,
                file.size as i64,
                file.mtime_ns,
                file.ctime_ns,
                file.inode as i64,
                sha256,
            ],
        )?;
        (&kept.file, &kept.sha256)
    } else {
        (file, &sha256)
    };
    insert_bundle(tx, seq, copy, None)?;
    tx.execute(
        "UPDATE bundles SET sha256 = ?2, run_id = ?3, created = ?4, created_ns = ?5,
         origin = ?6, copy_of = ?7 WHERE seq = ?1",
        params![
            seq,
            copy_sha256,
            head.run_id,
            head.created,
            created_ns(&head.created),
            head.origin.clone().unwrap_or_default(),
            kept.seq,
        ],
    )?;
    Ok(Copy::LeftOut)
}

/// The content digest of the bundle at `path` ([`Verification::content_sha256`]), or its
/// first problem when it is not whole.
///
/// [`Verification::content_sha256`]: crate::verify::Verification::content_sha256
fn content_sha256(path: &Path) -> Result<String, String> {
    let bundle = Bundle::open(path).map_err(|e| e.to_string())?;
    let checked = crate::verify::verify(&bundle, None);
    match (checked.content_sha256, checked.problems.first()) {
        (Some(content), _) => Ok(content),
        (None, Some(problem)) => Err(format!("{}: {}", problem.entry, problem.problem)),
        (None, None) => Err("its files could not be checked".into()),
    }
}

/// Records the bundle `file` as the index's bundle number `seq`: its stat, and why it could
/// not be read when it could not.
fn insert_bundle(
    tx: &Transaction<'_>,
    seq: i64,
    file: &OnDisk,
    error: Option<&str>,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO bundles (seq, name, size, mtime_ns, ctime_ns, inode, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            seq,
            file.name,
            file.size as i64,
            file.mtime_ns,
            file.ctime_ns,
            file.inode as i64,
            error
        ],
    )?;
    Ok(())
}

/// What the index knows, to add bundles to it.
fn load(tx: &Transaction<'_>) -> rusqlite::Result<Known> {
    let mut known = Known::default();
    let mut rows = tx.prepare("SELECT id, origin, name FROM nodes")?;
    let mut rows = rows.query([])?;
    while let Some(row) = rows.next()? {
        known
            .nodes
            .insert((row.get(1)?, row.get(2)?), row.get::<_, u32>(0)?);
    }
    let mut rows = tx.prepare("SELECT name FROM sources ORDER BY id")?;
    let mut rows = rows.query([])?;
    while let Some(row) = rows.next()? {
        known.sources.push(row.get(0)?);
        known.paths.push(Default::default());
    }
    let mut rows = tx.prepare("SELECT id, source, path, volatile FROM paths")?;
    let mut rows = rows.query([])?;
    while let Some(row) = rows.next()? {
        let id: u32 = row.get(0)?;
        let source: usize = row.get(1)?;
        known.paths[source].insert(row.get(2)?, id);
        known.next_path = known.next_path.max(id + 1);
        if row.get(3)? {
            known.volatile.insert(id);
        }
    }
    Ok(known)
}

/// Why an update failed: the index, its states file, or the directory refused.
pub(crate) enum Failed {
    Index(rusqlite::Error),
    States(std::io::Error),
    Refused(HistoryError),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Self {
        Failed::Index(e)
    }
}

/// The states file of the index at `index`.
pub(crate) fn states_file(index: &Path) -> PathBuf {
    index.with_extension("states")
}

const STATES_MAGIC: &[u8; 8] = b"fbstate1";

/// Writes every document's state to `path`: the magic, the generation, then per document its
/// node, source, table name and state ([`State`], as it is kept).
fn write_states(path: &Path, generation: u64, states: &HashMap<Slot, State>) -> Result<(), Failed> {
    use std::io::Write as _;
    let file = std::fs::File::create(path).map_err(Failed::States)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    out.write_all(STATES_MAGIC)
        .and_then(|()| out.write_all(&generation.to_le_bytes()))
        .map_err(Failed::States)?;
    for ((node, source, table), state) in states {
        [
            &node.to_le_bytes()[..],
            &source.to_le_bytes(),
            &(table.len() as u32).to_le_bytes(),
            table.as_bytes(),
            &(state.as_bytes().len() as u64).to_le_bytes(),
            state.as_bytes(),
        ]
        .iter()
        .try_for_each(|piece| out.write_all(piece))
        .map_err(Failed::States)?;
    }
    out.flush().map_err(Failed::States)
}

/// Reads the states file at `path`, which must be of `generation`.
fn read_states(path: &Path, generation: u64) -> Result<HashMap<Slot, State>, Failed> {
    // The states are kept as slices of the file's bytes (`State`), not copied out of them.
    let bytes = bytes::Bytes::from(std::fs::read(path).map_err(Failed::States)?);
    let bad = |why: &str| {
        Failed::States(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        ))
    };
    let mut rest = bytes
        .strip_prefix(STATES_MAGIC)
        .ok_or_else(|| bad("not a states file"))?;
    let state_at = |slice: &[u8]| State::from_bytes(bytes.slice_ref(slice));
    fn take<'b>(rest: &mut &'b [u8], n: usize) -> Option<&'b [u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        *rest = tail;
        Some(head)
    }
    let number = |rest: &mut &[u8], n: usize| -> Option<u64> {
        let mut bytes = [0u8; 8];
        bytes[..n].copy_from_slice(take(rest, n)?);
        Some(u64::from_le_bytes(bytes))
    };
    if number(&mut rest, 8) != Some(generation) {
        return Err(bad("of another update than the index's"));
    }
    let mut states = HashMap::new();
    while !rest.is_empty() {
        let record = (|| {
            let node = number(&mut rest, 4)? as u32;
            let source = number(&mut rest, 4)? as u32;
            let length = number(&mut rest, 4)? as usize;
            let table = std::str::from_utf8(take(&mut rest, length)?)
                .ok()?
                .to_owned();
            let length = number(&mut rest, 8)? as usize;
            let state = state_at(take(&mut rest, length)?)?;
            Some(((node, source, table), state))
        })();
        let (slot, state) = record.ok_or_else(|| bad("cut short or garbled"))?;
        states.insert(slot, state);
    }
    Ok(states)
}

fn summary(
    connection: &Connection,
    index: &Path,
    added: usize,
    rebuilt: Option<String>,
    on_disk: &[OnDisk],
) -> Result<Update, HistoryError> {
    let failed = |cause| HistoryError::Index {
        index: index.to_owned(),
        cause,
    };
    let bundles: i64 = connection
        .query_row("SELECT count(*) FROM bundles", [], |r| r.get(0))
        .map_err(failed)?;
    let mut unreadable = Vec::new();
    let mut rows = connection
        .prepare("SELECT name, error FROM bundles WHERE error IS NOT NULL ORDER BY seq")
        .map_err(failed)?;
    let mut rows = rows.query([]).map_err(failed)?;
    while let Some(row) = rows.next().map_err(failed)? {
        unreadable.push(Unreadable {
            bundle: row.get(0).map_err(failed)?,
            error: row.get(1).map_err(failed)?,
        });
    }
    let mut duplicates = Vec::new();
    let mut rows = connection
        .prepare(
            "SELECT copy.name, kept.name, copy.run_id FROM bundles copy
             JOIN bundles kept ON kept.seq = copy.copy_of ORDER BY copy.name",
        )
        .map_err(failed)?;
    let mut rows = rows.query([]).map_err(failed)?;
    while let Some(row) = rows.next().map_err(failed)? {
        duplicates.push(Duplicate {
            bundle: row.get(0).map_err(failed)?,
            kept: row.get(1).map_err(failed)?,
            run_id: row.get(2).map_err(failed)?,
        });
    }
    Ok(Update {
        index: index.to_owned(),
        added,
        rebuilt,
        bundles: bundles as usize,
        unreadable,
        duplicates,
        index_bytes: [index.to_owned(), states_file(index)]
            .iter()
            .filter_map(|file| std::fs::metadata(file).ok())
            .map(|m| m.len())
            .sum(),
        bundle_bytes: on_disk.iter().map(|f| f.size).sum(),
    })
}
