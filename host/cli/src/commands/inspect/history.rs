//! `factbuoy inspect index|history`, and what `sql` and `diff` take to read a directory of
//! bundles as a history ([`factbuoy_inspect::history`]), printed.

use std::path::{Path, PathBuf};

use clap::Args;
use factbuoy_inspect::drift::IgnoreList;
use factbuoy_inspect::history::{self, History, Update};
use factbuoy_present::inspect::history::{
    duplicate_notes, histories_lines, history_lines, index_lines, update_notes,
};

use super::show::emit_lines;
use crate::output::{ExitStatus, Format, emit_document};

/// Where a history's index is and which origin to read: what every command that takes a
/// directory of bundles takes.
#[derive(Debug, Args, Clone, Default)]
pub struct PileArgs {
    /// The index file (default: in $XDG_CACHE_HOME/factbuoy/history, named after the
    /// directory). It is a cache: deleting it loses nothing.
    #[arg(long, value_name = "FILE")]
    index: Option<PathBuf>,
    /// Read the bundles of this origin (`kind:id` as `inspect index` lists them, or its
    /// start), when the directory holds several (`history` and `report` show each apart
    /// without it; `sql` and `diff` need it).
    #[arg(long, value_name = "ORIGIN")]
    origin: Option<String>,
}

impl PileArgs {
    fn index_of(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        Ok(match &self.index {
            Some(index) => index.clone(),
            None => history::default_index(dir)?,
        })
    }

    /// The history of `dir`, its index brought up to date (what was done said on stderr).
    pub fn open(&self, dir: &Path) -> anyhow::Result<History> {
        let history = History::open(dir, &self.index_of(dir)?, self.origin.as_deref())?;
        note(&history.update);
        Ok(history)
    }

    /// A history per origin of `dir` (of those --origin names), as [`PileArgs::open`].
    pub fn open_each(&self, dir: &Path) -> anyhow::Result<Vec<History>> {
        let histories = History::open_each(dir, &self.index_of(dir)?, self.origin.as_deref())?;
        if let Some(first) = histories.first() {
            note(&first.update);
        }
        Ok(histories)
    }
}

/// Whether `path` is a directory of bundles rather than a bundle extracted to a folder.
pub fn is_pile(path: &Path) -> bool {
    path.is_dir() && !path.join("meta").is_dir()
}

/// Says on stderr what bringing the index up to date did, when it did anything, which bundles
/// it could not read and which it left out as copies.
fn note(update: &Update) {
    let (done, left_out) = update_notes(update);
    done.iter().for_each(|line| tracing::info!("{line}"));
    left_out.iter().for_each(|line| tracing::warn!("{line}"));
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// The directory of bundles.
    dir: PathBuf,
    #[command(flatten)]
    pile: PileArgs,
}

pub fn index(args: IndexArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let update = history::update(&args.dir, &args.pile.index_of(&args.dir)?)?;
    duplicate_notes(&update)
        .iter()
        .for_each(|line| tracing::warn!("{line}"));
    if format != Format::Table {
        emit_document(&update, format);
        return Ok(ExitStatus::Success);
    }
    let lines = index_lines(&args.dir.display().to_string(), &update);
    emit_lines(&lines);
    Ok(ExitStatus::Success)
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The directory of bundles.
    dir: PathBuf,
    /// The fact's path (as `facts` and `diff` print it; `*` matches anything, `?` one
    /// character). Without it, every fact that changed.
    path: Option<String>,
    /// Only this node.
    #[arg(long, value_name = "NODE")]
    node: Option<String>,
    /// Without PATH, leave out facts whose path matches PATTERN too (may be repeated).
    #[arg(long, value_name = "PATTERN")]
    ignore: Vec<String>,
    /// Without PATH, show the facts that always change too.
    #[arg(long)]
    no_default_ignores: bool,
    #[command(flatten)]
    pile: PileArgs,
}

pub fn history(args: HistoryArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let ignore = IgnoreList::new(!args.no_default_ignores, &args.ignore);
    // A history per origin: a cluster's runs and a fleet's are never read as one estate.
    let mut histories = Vec::new();
    for history in args.pile.open_each(&args.dir)? {
        let nodes = history.changes(args.node.as_deref(), args.path.as_deref(), &ignore)?;
        // Of several origins, --node shows those that name it.
        if args.node.is_none() || !nodes.is_empty() {
            histories.push((history, nodes));
        }
    }
    if let Some(node) = &args.node
        && histories.is_empty()
    {
        anyhow::bail!(
            "no bundle of {} names node {node:?}{}: `factbuoy inspect history {}` lists every node's changes",
            args.dir.display(),
            args.pile
                .origin
                .as_ref()
                .map(|o| format!(" (origin {o})"))
                .unwrap_or_default(),
            args.dir.display()
        );
    }
    let dir = args.dir.display().to_string();
    if format != Format::Table {
        let document = |history: &History, nodes| {
            serde_json::json!({
                "origin": history.origin,
                "label": history.label,
                "bundles": history.bundles,
                "nodes": nodes,
            })
        };
        let duplicates = &histories[0].0.update.duplicates;
        let answer = match &histories[..] {
            // One origin: its history, as before there were several.
            [(history, nodes)] => {
                let mut answer = document(history, nodes);
                answer["duplicates"] = serde_json::json!(duplicates);
                answer
            }
            several => serde_json::json!({
                "origins": several.iter().map(|(h, n)| document(h, n)).collect::<Vec<_>>(),
                "duplicates": duplicates,
            }),
        };
        emit_document(&answer, format);
        return Ok(ExitStatus::Success);
    }
    let lines = match &histories[..] {
        [(history, nodes)] => history_lines(&dir, history, nodes),
        several => histories_lines(&dir, several),
    };
    emit_lines(&lines);
    Ok(ExitStatus::Success)
}
