//! `factbuoy inspect report`: one self-contained HTML file of a bundle, to open in any browser
//! offline: the fleet table, drift highlighted, each node's facts and errors, searchable.
//!
//! The page is static HTML (`report/head.html`) and a script (`report/app.js`) that renders
//! everything from JSON embedded in the page. Everything a bundle's author chose (names,
//! values, messages) reaches the page only as JSON inside `<script type="application/json">`
//! and is shown through `textContent`: nothing from the bundle is ever parsed as HTML. A
//! Content-Security-Policy forbids loading anything, so the file works offline and cannot
//! reach the network.
//!
//! The bundle is read four times (drift, summary, journals, facts and tables) and each facts
//! document and table is written into the page as it streams past, so memory stays one
//! document, the drift tables and a compressed chunk of facts ([`packed`]: each document as
//! what differs from the first of its source). A plugin the report has no view of its own for gets a
//! section: its facts, and its tables' rows, the first [`MAX_TABLE_ROWS`] of each table (the
//! rest are counted, and `inspect sql` has them all).
//!
//! A report of several bundles or directories ([`write_groups_file`]: a cluster's run and a
//! fleet's of the same day) is a group per bundle, or per origin of a directory: each group is
//! the page of one bundle, its parts' ids and scripts marked as the group's, headed by its
//! origin in words ([`NamedOrigin`]). Groups are rendered apart, so that nodes of two origins are
//! never taken for one machine, whatever their names.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use factbuoy_bundle::reader::{Bundle, ReadError};
use serde::Serialize;
use serde_json::Value;

use crate::drift::{self, AloneFacts, Drift, DriftGroup, IgnoreList, Ignored, NodeWithout};
use crate::export::{ExportError, Failure, write_whole};
use crate::facts::{FactPath, Found, each_row, run_and_facts};
use crate::history::{History, Timeline};
use crate::journal_summary::{self, JournalSummary};
use crate::meta::run_first;
use crate::origin::NamedOrigin;
use crate::sql::table_name;
use crate::summary::{Summary, summary};
use embed::script;

mod embed;
mod packed;

const HEAD: &str = include_str!("report/head.html");
/// What a page of several groups says above them (app.js lists the groups in `#estate`).
const ESTATE_HEAD: &str = "<header><h1>factbuoy report</h1><div class=\"meta\" id=\"estate\">\
    Runs of several origins, a group each: a group's nodes are other machines than another \
    group's, even where their names are the same.</div></header>\n";
const APP: &str = include_str!("report/app.js");

/// Where a fleet table column's value comes from: a plugin, and the paths whose values,
/// joined by spaces, make the cell.
type Source = (&'static str, &'static [&'static str]);

/// The fleet table's columns of facts: a label, and its sources in order of preference
/// (setup's facts, then host-facts' for a node without them).
const KEY_FACTS: [(&str, &[Source]); 5] = [
    (
        "OS",
        &[
            (
                "setup",
                &["$.ansible_distribution", "$.ansible_distribution_version"],
            ),
            ("host-facts", &["$.os.pretty_name"]),
        ],
    ),
    (
        "Kernel",
        &[
            ("setup", &["$.ansible_kernel"]),
            ("host-facts", &["$.kernel.release"]),
        ],
    ),
    (
        "CPUs",
        &[
            ("setup", &["$.ansible_processor_vcpus"]),
            ("host-facts", &["$.cpu.threads"]),
        ],
    ),
    ("Memory (MiB)", &[("setup", &["$.ansible_memtotal_mb"])]),
    (
        "Address",
        &[
            ("setup", &["$.ansible_default_ipv4.address"]),
            ("host-facts", &["$.network.default_ipv4.source_address"]),
        ],
    ),
];

/// The bundled plugins the page has views of its own for (the fleet table's columns, the logs
/// section); every other plugin gets a section of its own.
const OWN_VIEWS: [&str; 3] = ["setup", "host-facts", "systemd-logs"];

/// The rows of one table artifact written into the page, over all nodes; the rest are counted.
pub const MAX_TABLE_ROWS: u64 = 2_000;

/// Why the report could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReportError {
    /// The bundle could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The page could not be written.
    #[error("writing the report: {0}")]
    Write(#[from] io::Error),
}

/// The page's data besides the facts.
#[derive(Serialize)]
struct Data<'a> {
    bundle: String,
    generated: String,
    summary: &'a Summary,
    /// What the page keeps of the drift ([`PageDrift`]).
    drift: Value,
    key_facts: KeyFacts,
    own_views: [&'static str; 3],
    tables: Vec<TableShown>,
    /// The journals' summary, or why it could not be read (the rest of the report stands).
    journals: Result<JournalSummary, String>,
    /// The history the bundle is the latest of, when the report is of a directory.
    history: Option<HistoryShown<'a>>,
    /// The group's origin, on a page of several groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<NamedOrigin>,
}

/// What the page shows of a history: its directory, origin, runs and timeline.
#[derive(Serialize)]
struct HistoryShown<'a> {
    dir: String,
    origin: &'a str,
    first: &'a str,
    last: &'a str,
    timeline: &'a Timeline,
}

/// The drift groups the page shows, the first of each.
const PAGE_GROUPS: usize = 100;
/// The node sets of a group the page shows a column each.
const PAGE_SETS: usize = 6;
/// The nodes of a set the page names.
const PAGE_SET_NODES: usize = 8;
/// The facts of a group the page shows.
const PAGE_GROUP_FACTS: usize = 200;
/// The nodes without facts, and those with facts of their own, the page names.
const PAGE_WITHOUT: usize = 20;

/// The drift as far as the page shows it, with counts of the rest: on ten thousand nodes a fact
/// each node has its own value of splits them into ten thousand sets, and all of them would
/// make a page of gigabytes (`inspect diff` has them all).
#[derive(Serialize)]
struct PageDrift<'a> {
    ignored: &'a Ignored,
    without_facts: &'a [NodeWithout],
    without_count: usize,
    alone: &'a [AloneFacts],
    alone_count: usize,
    groups: Vec<PageGroup<'a>>,
    group_count: usize,
    fact_count: usize,
}

#[derive(Serialize)]
struct PageGroup<'a> {
    /// The first sets: their first nodes, and how many each has.
    node_sets: Vec<PageSet<'a>>,
    set_count: usize,
    facts: Vec<PageFact<'a>>,
    fact_count: usize,
}

#[derive(Serialize)]
struct PageSet<'a> {
    nodes: &'a [String],
    size: usize,
}

#[derive(Serialize)]
struct PageFact<'a> {
    plugin: &'a str,
    path: &'a str,
    /// The values of the sets shown.
    values: &'a [Value],
    absent: Vec<usize>,
}

impl<'a> PageDrift<'a> {
    fn of(drift: &'a Drift) -> PageDrift<'a> {
        let group = |g: &'a DriftGroup| PageGroup {
            node_sets: g
                .node_sets
                .iter()
                .take(PAGE_SETS)
                .map(|set| PageSet {
                    nodes: &set[..set.len().min(PAGE_SET_NODES)],
                    size: set.len(),
                })
                .collect(),
            set_count: g.node_sets.len(),
            facts: g
                .facts
                .iter()
                .take(PAGE_GROUP_FACTS)
                .map(|f| PageFact {
                    plugin: &f.plugin,
                    path: &f.path,
                    values: &f.values[..f.values.len().min(PAGE_SETS)],
                    absent: f
                        .absent
                        .iter()
                        .copied()
                        .filter(|i| *i < PAGE_SETS)
                        .collect(),
                })
                .collect(),
            fact_count: g.facts.len(),
        };
        PageDrift {
            ignored: &drift.ignored,
            without_facts: &drift.without_facts[..drift.without_facts.len().min(PAGE_WITHOUT)],
            without_count: drift.without_facts.len(),
            alone: &drift.alone[..drift.alone.len().min(PAGE_WITHOUT)],
            alone_count: drift.alone.len(),
            groups: drift.groups.iter().take(PAGE_GROUPS).map(group).collect(),
            group_count: drift.groups.len(),
            fact_count: drift.groups.iter().map(|g| g.facts.len()).sum(),
        }
    }
}

/// A table artifact: what identifies a row, and how many rows the page shows of how many.
#[derive(Serialize)]
struct TableShown {
    plugin: String,
    artifact: String,
    /// Its name in `inspect sql`.
    sql_table: String,
    row_keys: Vec<String>,
    rows: u64,
    shown: u64,
}

/// The fleet table's columns and each node's cells.
#[derive(Serialize)]
struct KeyFacts {
    labels: Vec<&'static str>,
    /// Node -> a cell per label (empty when its facts lack it).
    nodes: BTreeMap<String, Vec<String>>,
}

/// Writes the report of `bundle` to the file `target`, whole or not at all (a temporary file
/// beside it, renamed into place); `ignore` decides what the drift leaves out.
pub fn write_file(bundle: &Bundle, ignore: &IgnoreList, target: &Path) -> Result<(), ExportError> {
    write_whole(target, |out| {
        write(bundle, ignore, None, out)
            .map(|_| ())
            .map_err(failure)
    })
}

/// As [`write_file`], of the latest bundle of `history`, with a timeline of the history
/// (`timeline`, made with the same `ignore`).
pub fn write_history_file(
    history: &History,
    timeline: &Timeline,
    ignore: &IgnoreList,
    target: &Path,
) -> Result<(), ExportError> {
    let bundle = Bundle::open(&latest(history).bundle)?;
    write_whole(target, |out| {
        write(&bundle, ignore, Some(shown(history, timeline)), out)
            .map(|_| ())
            .map_err(failure)
    })
}

/// What one group of a report of several is of.
pub enum GroupSource<'a> {
    /// A bundle.
    Bundle(&'a Bundle),
    /// The latest bundle of a history (one origin of a directory), with its timeline.
    History(&'a History, &'a Timeline),
}

/// A group of a report as written: which origin, and which run.
#[derive(Debug, Clone, Serialize)]
pub struct GroupWritten {
    /// The origin, `kind:id` as `--origin` takes it, and in words.
    #[serde(flatten)]
    pub origin: NamedOrigin,
    /// The bundle the group shows.
    pub bundle: PathBuf,
    /// Its run.
    pub run_id: String,
    /// Its nodes.
    pub nodes: usize,
}

/// Writes the report of `parts` to the file `target`, whole or not at all: of one part, the page
/// [`write_file`] or [`write_history_file`] writes; of several, a group per part, each headed by
/// its origin in words. Says what each group is.
pub fn write_groups_file(
    parts: &[GroupSource<'_>],
    ignore: &IgnoreList,
    target: &Path,
) -> Result<Vec<GroupWritten>, ExportError> {
    // The latest bundle of each history, opened here; a bundle part is read as given.
    let mut latest_bundles = Vec::new();
    for part in parts {
        if let GroupSource::History(history, _) = part {
            latest_bundles.push(Bundle::open(&latest(history).bundle)?);
        }
    }
    let mut latest_bundles = latest_bundles.iter();
    // Each group's bundle, its history shown, and its origin.
    let mut opened = Vec::with_capacity(parts.len());
    for part in parts {
        opened.push(match part {
            GroupSource::Bundle(bundle) => {
                (*bundle, None, NamedOrigin::of_run(&run_first(bundle)?))
            }
            GroupSource::History(history, timeline) => (
                latest_bundles.next().expect("opened above"),
                Some(shown(history, timeline)),
                NamedOrigin {
                    origin: history.origin.clone(),
                    label: history.label.clone(),
                },
            ),
        });
    }
    let several = opened.len() > 1;
    let (head, skeleton) = HEAD.split_at(HEAD.find("<body>\n").expect("head.html has a body") + 7);
    let mut written = Vec::with_capacity(opened.len());
    write_whole(target, |out| {
        if !several {
            let (bundle, history, origin) = opened.pop().expect("a report has a part");
            let run = write(bundle, ignore, history, out).map_err(failure)?;
            written.push(GroupWritten {
                origin,
                bundle: bundle.path().to_owned(),
                run_id: run.run_id,
                nodes: run.nodes.len(),
            });
            return Ok(());
        }
        let io = |e: io::Error| failure(ReportError::Write(e));
        out.write_all(head.as_bytes()).map_err(io)?;
        out.write_all(ESTATE_HEAD.as_bytes()).map_err(io)?;
        for (g, (bundle, history, origin)) in opened.drain(..).enumerate() {
            let suffix = format!("-g{g}");
            write!(
                out,
                "<section class=\"origin\" id=\"origin{suffix}\"><h2 id=\"origin-label{suffix}\"></h2>\n{}",
                with_suffix(skeleton, &suffix)
            )
            .map_err(io)?;
            let run = write_group(bundle, ignore, history, Some((g, origin.clone())), out)
                .map_err(failure)?;
            out.write_all(b"</section>\n").map_err(io)?;
            written.push(GroupWritten {
                origin,
                bundle: bundle.path().to_owned(),
                run_id: run.run_id,
                nodes: run.nodes.len(),
            });
        }
        write!(out, "<script>\n{APP}</script>\n</body>\n</html>\n").map_err(io)?;
        out.flush().map_err(io)
    })?;
    Ok(written)
}

fn failure(e: ReportError) -> Failure {
    match e {
        ReportError::Read(e) => Failure::Read(e),
        ReportError::Write(e) => Failure::Write(e),
    }
}

fn latest(history: &History) -> &crate::history::HistoryBundle {
    history.bundles.last().expect("a history has a bundle")
}

fn shown<'a>(history: &'a History, timeline: &'a Timeline) -> HistoryShown<'a> {
    HistoryShown {
        dir: history.dir().display().to_string(),
        origin: &history.origin,
        first: &history.bundles[0].created,
        last: &latest(history).created,
        timeline,
    }
}

/// `html` with `suffix` put at the end of every `id="..."` in it: a group's copy of the page's
/// parts, which its script finds by those ids.
fn with_suffix(html: &str, suffix: &str) -> String {
    let mut out = String::with_capacity(html.len() + 64);
    let mut rest = html;
    while let Some(at) = rest.find(" id=\"") {
        let value = at + 5;
        let end = value + rest[value..].find('"').expect("an id's closing quote");
        out.push_str(&rest[..end]);
        out.push_str(suffix);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Writes the report of `bundle` to `out`, a page of one bundle; `ignore` decides what the drift
/// leaves out. Returns its run.
fn write(
    bundle: &Bundle,
    ignore: &IgnoreList,
    history: Option<HistoryShown<'_>>,
    out: &mut impl Write,
) -> Result<crate::RunSummary, ReportError> {
    out.write_all(HEAD.as_bytes())?;
    let run = write_group(bundle, ignore, history, None, out)?;
    write!(out, "<script>\n{APP}</script>\n</body>\n</html>\n")?;
    out.flush()?;
    Ok(run)
}

/// Writes `bundle`'s data and facts to `out`, as the page's one bundle, or as group `g` (of
/// `origin`) of a page of several, whose parts are written before. Returns its run.
fn write_group(
    bundle: &Bundle,
    ignore: &IgnoreList,
    history: Option<HistoryShown<'_>>,
    group: Option<(usize, NamedOrigin)>,
    out: &mut impl Write,
) -> Result<crate::RunSummary, ReportError> {
    let (group, origin) = match group {
        Some((g, origin)) => (Some(g), Some(origin)),
        None => (None, None),
    };
    // Three readings of the bundle that need nothing of each other, on two threads: the drift
    // (the longest) beside the summary and the journals. What the page keeps of the drift is
    // taken at once, so the whole of it is not held while the facts are written.
    let (drift, summary, journals) = std::thread::scope(|scope| {
        let others = scope.spawn(|| {
            (
                summary(bundle),
                journal_summary::summarize(bundle).map_err(|e| e.to_string()),
            )
        });
        let drift = drift::drift(bundle, ignore)
            .map(|drift| serde_json::to_value(PageDrift::of(&drift)).expect("JSON of the drift"));
        let (summary, journals) = others.join().expect("the summary thread panicked");
        (drift, summary, journals)
    });
    let (drift, summary) = (drift?, summary?);
    // Per column, per source: the parsed paths.
    let sources: Vec<Vec<(&str, Vec<FactPath>)>> = KEY_FACTS
        .iter()
        .map(|(_, sources)| {
            sources
                .iter()
                .map(|(plugin, paths)| {
                    let parsed = paths
                        .iter()
                        .map(|p| FactPath::parse(p).expect("the key fact paths parse"))
                        .collect();
                    (*plugin, parsed)
                })
                .collect()
        })
        .collect();
    // Node -> per column, the best source found so far (its rank) and the cell.
    let mut cells: BTreeMap<String, Vec<Option<(usize, String)>>> = BTreeMap::new();

    let mut tables: Vec<TableShown> = Vec::new();
    let mut packer = packed::Packer::new(group);
    run_and_facts(bundle, |found, _| -> Result<(), ReportError> {
        match found {
            Found::Facts {
                node,
                source,
                facts,
                ..
            } => {
                let row = cells
                    .entry(node.to_owned())
                    .or_insert_with(|| vec![None; KEY_FACTS.len()]);
                key_cells(row, &sources, source, &facts);
                packer.add(out, node, source, &facts)?;
            }
            Found::Table {
                node,
                plugin,
                artifact,
                row_keys,
                rows,
            } => {
                let at = match tables
                    .iter()
                    .position(|t| t.plugin == plugin && t.artifact == artifact)
                {
                    Some(at) => at,
                    None => {
                        tables.push(TableShown {
                            plugin: plugin.to_owned(),
                            artifact: artifact.to_owned(),
                            sql_table: table_name(plugin, artifact),
                            row_keys: row_keys.to_vec(),
                            rows: 0,
                            shown: 0,
                        });
                        tables.len() - 1
                    }
                };
                let table = &mut tables[at];
                let mut kept = Vec::new();
                each_row(rows, |row| -> Result<(), ReportError> {
                    table.rows += 1;
                    if table.shown < MAX_TABLE_ROWS {
                        table.shown += 1;
                        kept.push(row);
                    }
                    Ok(())
                })?;
                if !kept.is_empty() {
                    let document = TableScript {
                        node,
                        plugin,
                        artifact,
                        rows: &kept,
                    };
                    script(out, "table", None, group, &document)?;
                }
            }
        }
        Ok(())
    })?;
    packer.flush(out)?;
    let data = Data {
        bundle: bundle.path().file_name().map_or_else(
            || bundle.path().display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        generated: now_rfc3339(),
        summary: &summary,
        drift,
        key_facts: KeyFacts {
            labels: KEY_FACTS.iter().map(|(label, _)| *label).collect(),
            nodes: cells
                .into_iter()
                .map(|(node, row)| {
                    let row = row
                        .into_iter()
                        .map(|cell| cell.map(|(_, text)| text).unwrap_or_default())
                        .collect();
                    (node, row)
                })
                .collect(),
        },
        own_views: OWN_VIEWS,
        tables,
        journals,
        history,
        origin,
    };
    // A group's data has no id: app.js finds each group's by its mark.
    let id = group.is_none().then_some("report-data");
    script(out, "data", id, group, &data)?;
    Ok(summary.run)
}

/// Fills `row`'s key fact cells from `plugin`'s facts, where they come from a better source
/// than the cell's so far.
fn key_cells(
    row: &mut [Option<(usize, String)>],
    sources: &[Vec<(&str, Vec<FactPath>)>],
    plugin: &str,
    facts: &Value,
) {
    for (cell, column) in row.iter_mut().zip(sources) {
        for (rank, (source, paths)) in column.iter().enumerate() {
            if *source != plugin || cell.as_ref().is_some_and(|(best, _)| *best <= rank) {
                continue;
            }
            let found: Vec<String> = paths
                .iter()
                .flat_map(|p| p.values(facts))
                .map(|v| match v {
                    Value::String(text) => text,
                    other => other.to_string(),
                })
                .collect();
            if !found.is_empty() {
                *cell = Some((rank, found.join(" ")));
            }
        }
    }
}

/// A node's rows of a table artifact, as the page reads them.
#[derive(Serialize)]
struct TableScript<'a> {
    node: &'a str,
    plugin: &'a str,
    artifact: &'a str,
    rows: &'a [serde_json::Map<String, Value>],
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
