//! `factbuoy inspect`: a run's bundle (a `.tar.gz` or its extracted folder) read offline,
//! long after the run. What each command answers is computed in the inspection crate
//! ([`factbuoy_inspect`]: verify, summary, facts, query; `drift`, `sql`, `logs`, `export`,
//! `report`); this module parses the arguments and prints, with `diff` and `logs` in modules of
//! their own.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use factbuoy_bundle::reader::Bundle;
use factbuoy_inspect::drift::IgnoreList;
use factbuoy_inspect::export::{self, TableFormat};
use factbuoy_inspect::history::{History, Timeline};
use factbuoy_inspect::report::GroupSource;
use factbuoy_inspect::{FactPath, OnlyNode};
use serde_json::json;

use crate::output::{ExitStatus, Format, emit, emit_document};
use factbuoy_present::inspect as present;
use factbuoy_present::table::{bytes, count, fitted};

mod diff;
mod history;
mod logs;
mod show;

use show::emit_lines;

#[derive(Debug, Subcommand)]
pub enum InspectCommand {
    /// Check every file against meta/index.json (size and sha-256), and list what is wrong.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect verify 20261123182513_factbuoy_4e302443c9a6.tar.gz\n  \
        factbuoy inspect verify run.tar.gz --sha256 \"$(factbuoy status -o json | jq -r .tar_info.sha256)\"\n  \
        factbuoy inspect verify ./extracted-bundle -o json\n\n\
        Exit 0 when every file matches, 1 when anything is wrong (each problem is listed).")]
    Verify(VerifyArgs),
    /// The run (id, times, status, versions), a nodes × plugins table of results, errors, sizes.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect summary run.tar.gz\n  \
        factbuoy inspect summary ./extracted-bundle -o json")]
    Summary(BundleArg),
    /// A node's facts (setup's ansible_facts.json, host-facts' host-facts.json), one path a line.
    ///
    /// The node may be left out when the bundle has one (a local run's).
    #[command(after_help = "Examples:\n  \
        factbuoy inspect facts run.tar.gz web-1\n  \
        factbuoy inspect facts run.tar.gz web-1 host-facts -o json\n  \
        factbuoy inspect facts 20261123182513_factbuoy_4e302443c9a6.tar.gz --plugin setup  # one node")]
    Facts(FactsArgs),
    /// One path into every node's facts, answered per node.
    ///
    /// PATH is `a.b.c`, `a[0]` or `a[*].b` (read as the JSONPath `$.a.b.c`), or any RFC 9535
    /// JSONPath starting with `$`.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect query run.tar.gz ansible_distribution_version\n  \
        factbuoy inspect query run.tar.gz cpu.cores\n  \
        factbuoy inspect query run.tar.gz 'ansible_mounts[*].mount' -o json\n  \
        factbuoy inspect query run.tar.gz '$.ansible_mounts[?@.size_total > 1e9].mount'")]
    Query(QueryArgs),
    /// Where the nodes of a bundle disagree, or what changed between two bundles of one fleet.
    ///
    /// With one bundle: the facts on which its nodes disagree, grouped by how they split the
    /// nodes (the facts that set a few nodes apart come first). With two: nodes added and
    /// removed, and each fact that changed with the nodes it changed on. Facts that change on
    /// their own (clocks, load, free memory and space, traffic counters) are left out; the
    /// built-in patterns are listed by `-o json` and replaced with --no-default-ignores.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect diff run.tar.gz\n  \
        factbuoy inspect diff last-month.tar.gz today.tar.gz\n  \
        factbuoy inspect diff run.tar.gz --ignore 'ansible_env.*' --ignore '*_checksum'\n  \
        factbuoy inspect diff old.tar.gz new.tar.gz --exit-code -o json\n\n\
        Patterns match a fact's whole path as `facts` prints it; `*` matches anything, dots and\n\
        brackets included (`ansible_mounts[*].size_available`), `?` one character.")]
    Diff(diff::DiffArgs),
    /// Ask SQL of the facts of every node of one or more bundles (SQLite, with its JSON
    /// functions).
    ///
    /// A directory of bundles is read as a history (`inspect history --help`): every bundle
    /// of it, or with --as-of TIME only the latest from TIME or before, so that "which nodes
    /// had X on 1 May" is one query. Tables: runs (run_id, bundle, status, error, created, factbuoy_version); results
    /// (run_id, plugin, node, status, result_status, error); facts (run_id, node, plugin,
    /// facts: the whole document as JSON); fact_values (run_id, node, plugin, path, value: one
    /// row per leaf, paths as `facts` prints them). Views: setup and host_facts (run_id, node,
    /// facts). The database is read-only.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect sql run.tar.gz \"SELECT node, facts->>'ansible_distribution_version' FROM setup\"\n  \
        factbuoy inspect sql run.tar.gz \\\n      \
        \"SELECT facts->>'ansible_kernel' AS kernel, count(*) FROM setup GROUP BY kernel\"\n  \
        factbuoy inspect sql run.tar.gz \\\n      \
        \"SELECT node, value FROM fact_values WHERE path = 'cpu.cores' AND value < 8\"\n  \
        factbuoy inspect sql run.tar.gz \\\n      \
        \"SELECT node, plugin, status, error FROM results WHERE result_status = 'failed'\"\n  \
        factbuoy inspect sql jan.tar.gz feb.tar.gz -o json \\\n      \
        \"SELECT run_id, count(*) FROM setup GROUP BY run_id\"\n  \
        factbuoy inspect sql run.tar.gz 'SELECT 1' --db fleet.sqlite   # keep the tables for sqlite3\n  \
        factbuoy inspect sql ./bundles --as-of 2026-11-01 \\\n      \
        \"SELECT node FROM setup WHERE facts->>'ansible_kernel' = '6.1.0-18-amd64'\"")]
    Sql(SqlArgs),
    /// Write the facts in a format other tools read, into a folder.
    ///
    /// ansible-fact-cache: Ansible's jsonfile fact cache, a file per node (as `factbuoy
    /// ansible fact-cache --from`). jsonl: facts.jsonl, a line per node and plugin:
    /// {"node", "plugin", "facts"}. csv: facts.csv, every leaf as node,plugin,path,value; with
    /// --path, a row per node and a column per path (as `query` takes it). Both also write a
    /// file per table artifact, named as `inspect sql` names its table (PLUGIN_ARTIFACT.jsonl
    /// or .csv): a row per row, the node first.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect export run.tar.gz --format ansible-fact-cache --out ./facts\n  \
        factbuoy inspect export run.tar.gz --format jsonl --out ./export\n  \
        factbuoy inspect export run.tar.gz --format csv --out ./export\n  \
        factbuoy inspect export run.tar.gz --format csv --out ./export \\\n      \
        --path ansible_distribution_version --path cpu.cores --path 'ansible_mounts[*].mount'\n\n\
        Files are written whole or not at all (a temporary file renamed into place), and only in --out.")]
    Export(ExportArgs),
    /// Journal entries of the systemd-logs results, filtered, merged across nodes in time order.
    ///
    /// Each node's entries keep the order journalctl wrote them in; across nodes, the earliest
    /// next entry comes first. --unit matches as `journalctl -u` does (`sshd` is
    /// sshd.service; `*` and `?` make a pattern), --priority keeps that level and more severe.
    /// Times are UTC: 2026-11-23, "2026-11-23 14:00:00" or RFC 3339. `-o json` writes JSON
    /// Lines, {"node", "time", "entry"} a line, as they are merged.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect logs run.tar.gz\n  \
        factbuoy inspect logs run.tar.gz --node web-1 --unit sshd --priority warning\n  \
        factbuoy inspect logs run.tar.gz --since '2026-11-23 14:00:00' --until '2026-11-23 15:00:00'\n  \
        factbuoy inspect logs run.tar.gz --unit 'kube*' --grep 'OOM' -o json | jq -r .node")]
    Logs(logs::LogsArgs),
    /// One self-contained HTML file of the bundle: the answer first (results, failures grouped
    /// by reason), charts, a node table to sort and filter, drift, each node's facts and errors,
    /// searchable.
    ///
    /// It loads nothing (no network, no external files: a Content-Security-Policy forbids it),
    /// so it can be mailed, archived and opened anywhere offline. It stays small at any fleet
    /// size: each node's facts are not embedded whole, but as what differs from the first
    /// node's, gzip-compressed in the page and inflated by the browser when a node is opened
    /// or searched (10,000 nodes: a 7.7 MB page). Of a directory of bundles, the report is of
    /// the latest, with the history's changes per day and the facts that changed most. Drift
    /// leaves out what `diff` leaves out; --ignore and --no-default-ignores work as they do
    /// there.
    ///
    /// Of several bundles (a cluster's run and a fleet's of the same day), or of a directory
    /// whose bundles come from several origins, the page has a group per bundle, or per origin
    /// of a directory, each headed by which cluster, fleet or host it is: nodes of two groups
    /// are never one row, even where their names are the same.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect report run.tar.gz --out report.html\n  \
        factbuoy inspect report run.tar.gz --out report.html --ignore 'ansible_env.*'\n  \
        factbuoy inspect report ./bundles --out fleet.html   # the latest, with the history's timeline\n  \
        factbuoy inspect report cluster.tar.gz fleet.tar.gz --out estate.html   # a group each\n  \
        factbuoy inspect report ./bundles --out estate.html -o json | jq '.groups[].label'")]
    Report(ReportArgs),
    /// Index a directory of bundles (a fleet's bundles/, a folder of nightly runs) for
    /// `history`, `sql --as-of` and `diff --since`, and say how big the index is.
    ///
    /// Every command given a directory brings its index up to date first: this one only does
    /// that (after each nightly run, say). Bundles are put in the order their runs were
    /// created; a bundle added since is read, one that changed or went makes the index be
    /// built anew (a file whose size, times or inode changed is read again and its sha-256
    /// compared). The index is a cache, in $XDG_CACHE_HOME/factbuoy/history unless --index
    /// names a file: deleting it loses nothing.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect index ./bundles\n  \
        factbuoy inspect index /var/lib/factbuoy/fleet/bundles -o json")]
    Index(history::IndexArgs),
    /// When each fact of each node changed, over a directory of bundles: every value with the
    /// run that first saw it, the one before, and the last run that still had it; nodes that
    /// appeared, were absent, lost, or stopped reporting.
    ///
    /// Nodes are matched by name across runs of one origin (a host, a cluster, a fleet: see
    /// `origin` in docs/bundle.md); a directory with several is a history per origin, each
    /// under its name (which cluster, which fleet), never compared with another; --origin reads
    /// one. Without PATH,
    /// only facts that changed are listed, but for those `diff` leaves out (clocks, load,
    /// free memory...); with PATH, every value of the facts it matches.
    #[command(after_help = "Examples:\n  \
        factbuoy inspect history ./bundles\n  \
        factbuoy inspect history ./bundles ansible_kernel --node web-1\n  \
        factbuoy inspect history ./bundles 'packages[name=\"openssl\"].version'\n  \
        factbuoy inspect history ./bundles --node web-1 -o json")]
    History(history::HistoryArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Ansible's jsonfile fact cache: both layouts (`s1_<node>` for ansible-core 2.19 and
    /// later, `<node>` before).
    AnsibleFactCache,
    /// JSON Lines: facts.jsonl.
    Jsonl,
    /// CSV: facts.csv.
    Csv,
}

#[derive(Debug, Args)]
pub struct BundleArg {
    /// The bundle: a .tar.gz or the folder it was extracted to.
    bundle: PathBuf,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The bundle: a .tar.gz or the folder it was extracted to.
    bundle: PathBuf,
    /// The sha-256 the .tar.gz should have (tar_info.sha256 of `factbuoy status -o json`).
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
}

#[derive(Debug, Args)]
pub struct FactsArgs {
    /// The bundle: a .tar.gz or the folder it was extracted to.
    bundle: PathBuf,
    /// The node whose facts to show; of a bundle with one node, that one.
    #[arg(conflicts_with = "node_flag")]
    node: Option<String>,
    /// Only this plugin's facts (setup, host-facts or any plugin that declares a facts
    /// document; `PLUGIN/ARTIFACT` where it declares several).
    #[arg(conflicts_with = "plugin_flag")]
    plugin: Option<String>,
    /// The node, as the positional NODE.
    #[arg(long = "node", id = "node_flag", value_name = "NODE")]
    node_flag: Option<String>,
    /// Only this plugin's facts, as the positional PLUGIN.
    #[arg(long = "plugin", id = "plugin_flag", value_name = "PLUGIN")]
    plugin_flag: Option<String>,
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The bundle: a .tar.gz or the folder it was extracted to.
    bundle: PathBuf,
    /// The path into the facts: a.b[*].c, or RFC 9535 JSONPath starting with $.
    path: String,
}

#[derive(Debug, Args)]
#[command(override_usage = "factbuoy inspect sql [OPTIONS] <BUNDLE>... <QUERY>")]
pub struct SqlArgs {
    /// The bundles (.tar.gz files, folders they were extracted to, or directories of bundles),
    /// then one SQL statement.
    //
    // One positional, split here: clap ends a list of positionals followed by another at the
    // first option, so `sql DIR --as-of X QUERY` would read DIR as the query.
    #[arg(required = true, num_args = 1.., value_name = "BUNDLE... QUERY")]
    operands: Vec<PathBuf>,
    /// Of each directory of bundles, only the latest bundle from TIME or before: a day
    /// (2026-05-01, today, yesterday: the end of that day UTC), an RFC 3339 time, or another
    /// form `inspect logs --since` takes (2026-05-01 12:00, 7d ago).
    #[arg(long, value_name = "TIME")]
    as_of: Option<String>,
    #[command(flatten)]
    pile: history::PileArgs,
    /// Write the tables to this new SQLite file and keep it (it must not exist), with an index
    /// of fact_values by path for the queries to come; a temporary file is used and removed
    /// otherwise.
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The bundle: a .tar.gz or the folder it was extracted to.
    bundle: PathBuf,
    /// The format.
    #[arg(long = "format", id = "export_format", value_enum)]
    export_format: ExportFormat,
    /// The folder to write into; created if missing.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// CSV only: a column per path, a row per node (may be repeated).
    #[arg(long, value_name = "PATH")]
    path: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The bundles: .tar.gz files, folders they were extracted to, or directories of bundles
    /// (the report of the latest, with the history's timeline, per origin). Of several, or of a
    /// directory of several origins, a group each.
    #[arg(required = true, num_args = 1.., value_name = "BUNDLE")]
    bundles: Vec<PathBuf>,
    /// The HTML file to write (replaced if it exists).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Leave out of the drift facts whose path matches PATTERN too (may be repeated).
    #[arg(long, value_name = "PATTERN")]
    ignore: Vec<String>,
    /// Show the facts that always change in the drift too.
    #[arg(long)]
    no_default_ignores: bool,
    #[command(flatten)]
    pile: history::PileArgs,
}

pub fn execute(command: InspectCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        InspectCommand::Verify(args) => verify(args, format),
        InspectCommand::Summary(args) => summary(args, format),
        InspectCommand::Facts(args) => facts(args, format),
        InspectCommand::Query(args) => query(args, format),
        InspectCommand::Diff(args) => diff::diff(args, format),
        InspectCommand::Sql(args) => sql(args, format),
        InspectCommand::Export(args) => export(args, format),
        InspectCommand::Logs(args) => logs::logs(args, format),
        InspectCommand::Report(args) => report(args, format),
        InspectCommand::Index(args) => history::index(args, format),
        InspectCommand::History(args) => history::history(args, format),
    }
}

fn verify(args: VerifyArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let bundle = Bundle::open(&args.bundle)?;
    let verification = factbuoy_inspect::verify(&bundle, args.sha256.as_deref());
    match format {
        Format::Table => emit(&present::verify_text(
            &args.bundle.display().to_string(),
            &verification,
        )),
        machine => emit_document(&verification, machine),
    }
    Ok(if verification.problems.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failed
    })
}

fn summary(args: BundleArg, format: Format) -> anyhow::Result<ExitStatus> {
    let bundle = Bundle::open(&args.bundle)?;
    let summary = factbuoy_inspect::summary(&bundle)?;
    if format != Format::Table {
        emit_document(&summary, format);
        return Ok(ExitStatus::Success);
    }
    emit_lines(&present::summary_lines(&summary));
    Ok(ExitStatus::Success)
}

fn facts(args: FactsArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let bundle = Bundle::open(&args.bundle)?;
    let name = args.bundle.display();
    let plugin = args.plugin.or(args.plugin_flag);
    let from = plugin
        .as_deref()
        .map_or("any plugin".to_owned(), |p| format!("{p:?}"));
    let (node, facts) = match args.node.or(args.node_flag) {
        Some(node) => {
            let facts = factbuoy_inspect::facts(&bundle, &node, plugin.as_deref())?;
            (node, facts)
        }
        None => match factbuoy_inspect::only_node_facts(&bundle, plugin.as_deref())? {
            OnlyNode::One(node, facts) => (node, facts),
            OnlyNode::Several(nodes) => bail!(
                "{name} has facts of {} nodes ({}): name one, as in `factbuoy inspect facts \
                 {name} {}`",
                nodes.len(),
                nodes.join(", "),
                nodes[0]
            ),
            OnlyNode::None => (String::new(), Vec::new()),
        },
    };
    if facts.is_empty() {
        // `inspect facts B setup` of a one-node bundle: the plugin was taken for the node.
        if plugin.is_none()
            && !node.is_empty()
            && let OnlyNode::One(..) = factbuoy_inspect::only_node_facts(&bundle, Some(&node))?
        {
            bail!(
                "{name} has no node {node:?}, but a plugin of that name: `factbuoy inspect \
                 facts {name} --plugin {node}`"
            );
        }
        let of = match node.as_str() {
            "" => "any node".to_owned(),
            node => format!("node {node:?}"),
        };
        bail!(
            "{name} has no facts for {of} from {from}: `factbuoy inspect summary` lists its \
             nodes and plugins, and a plugin's facts are the artifacts `factbuoy plugin info` \
             shows it declares as facts",
        );
    }
    if format != Format::Table {
        emit_document(&json!({ "node": node, "plugins": facts }), format);
        return Ok(ExitStatus::Success);
    }
    let rows = present::facts_rows(&facts);
    emit_lines(&fitted(&rows, 0));
    Ok(ExitStatus::Success)
}

fn query(args: QueryArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let path = FactPath::parse(&args.path)?;
    let bundle = Bundle::open(&args.bundle)?;
    let answers = factbuoy_inspect::query(&bundle, &path)?;
    if answers.is_empty() {
        bail!(
            "{} has no facts (no setup or host-facts results) to query",
            args.bundle.display()
        );
    }
    if format != Format::Table {
        emit_document(
            &json!({ "path": path.as_jsonpath(), "nodes": answers }),
            format,
        );
        return Ok(ExitStatus::Success);
    }
    let rows = present::query_rows(&answers);
    emit_lines(&fitted(&rows, 0));
    Ok(ExitStatus::Success)
}

fn sql(args: SqlArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let (query, paths) = match args.operands.split_last() {
        Some((query, paths)) if !paths.is_empty() => (query, paths),
        _ => bail!(
            "give the bundles, then one SQL statement: `factbuoy inspect sql run.tar.gz \
             \"SELECT count(*) FROM setup\"`"
        ),
    };
    let Some(query) = query.to_str() else {
        bail!("the query {query:?} is not UTF-8 text: SQL is read as UTF-8");
    };
    let mut bundles = Vec::new();
    let mut piles = 0;
    for path in paths {
        if !history::is_pile(path) {
            bundles.push(Bundle::open(path)?);
            continue;
        }
        piles += 1;
        let history = args.pile.open(path)?;
        match &args.as_of {
            Some(time) => bundles.push(Bundle::open(&history.as_of(time)?.bundle)?),
            None => {
                for bundle in &history.bundles {
                    bundles.push(Bundle::open(&bundle.bundle)?);
                }
            }
        }
    }
    if args.as_of.is_some() && piles == 0 {
        bail!(
            "--as-of picks a bundle of a directory of bundles: give one (of a single bundle, leave --as-of out)"
        );
    }
    let scratch;
    let database = match &args.db {
        Some(path) => {
            if path.exists() {
                bail!(
                    "{} exists: name a new file for --db (the tables are written afresh)",
                    path.display()
                );
            }
            path.clone()
        }
        None => {
            scratch = tempfile::tempdir()?;
            scratch.path().join("facts.sqlite")
        }
    };
    let answer = factbuoy_inspect::sql::query(&bundles, &database, args.db.is_some(), query)?;
    if format != Format::Table {
        emit_document(&answer, format);
        return Ok(ExitStatus::Success);
    }
    let rows = present::sql_rows(&answer);
    emit_lines(&fitted(&rows, 0));
    Ok(ExitStatus::Success)
}

fn export(args: ExportArgs, format: Format) -> anyhow::Result<ExitStatus> {
    if !args.path.is_empty() && args.export_format != ExportFormat::Csv {
        bail!("--path chooses CSV columns: use it with --format csv");
    }
    let exported = match args.export_format {
        ExportFormat::AnsibleFactCache => {
            let facts = factbuoy_inspect::ansible_cache::facts_from_bundle(&args.bundle)?;
            return crate::fact_cache::write_cache(
                &args.out,
                "",
                factbuoy_inspect::ansible_cache::Layout::Both,
                facts,
                format,
            );
        }
        ExportFormat::Jsonl => {
            let bundle = Bundle::open(&args.bundle)?;
            let mut written = vec![export::jsonl(&bundle, &args.out)?];
            written.extend(export::tables(&bundle, &args.out, TableFormat::Jsonl)?);
            written
        }
        ExportFormat::Csv => {
            let paths = args
                .path
                .iter()
                .map(|p| FactPath::parse(p))
                .collect::<Result<Vec<_>, _>>()?;
            let bundle = Bundle::open(&args.bundle)?;
            let mut written = vec![export::csv(&bundle, &args.out, &paths)?];
            written.extend(export::tables(&bundle, &args.out, TableFormat::Csv)?);
            written
        }
    };
    match format {
        Format::Table => {
            for file in &exported {
                emit(&format!(
                    "{}: {}",
                    file.file.display(),
                    count(file.rows as usize, "row")
                ));
            }
        }
        machine => emit_document(&exported, machine),
    }
    Ok(ExitStatus::Success)
}

/// A part of a report, read ([`GroupSource`] borrows it).
enum Opened {
    Bundle(Bundle),
    History(Box<(History, Timeline)>),
}

fn report(args: ReportArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let ignore = IgnoreList::new(!args.no_default_ignores, &args.ignore);
    // In the order given, each bundle, and each origin of each directory: its history, with
    // its timeline.
    let mut opened = Vec::new();
    for path in &args.bundles {
        if history::is_pile(path) {
            for history in args.pile.open_each(path)? {
                let timeline = history.timeline(&ignore)?;
                opened.push(Opened::History(Box::new((history, timeline))));
            }
        } else {
            opened.push(Opened::Bundle(Bundle::open(path)?));
        }
    }
    let parts: Vec<GroupSource> = opened
        .iter()
        .map(|o| match o {
            Opened::Bundle(bundle) => GroupSource::Bundle(bundle),
            Opened::History(read) => GroupSource::History(&read.0, &read.1),
        })
        .collect();
    let groups = factbuoy_inspect::report::write_groups_file(&parts, &ignore, &args.out)?;
    let size = std::fs::metadata(&args.out)?.len();
    match format {
        Format::Table => {
            emit(&format!("{}: {}", args.out.display(), bytes(size)));
            if groups.len() > 1 {
                for group in &groups {
                    emit(&format!(
                        "  {}: run {}, {} ({})",
                        group.origin.label,
                        group.run_id,
                        count(group.nodes, "node"),
                        group.bundle.display()
                    ));
                }
            }
        }
        machine => emit_document(
            &json!({"file": args.out, "bytes": size, "groups": groups}),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}
