//! Writing setup facts into an Ansible `jsonfile` fact cache and saying what was written:
//! shared by `factbuoy ansible fact-cache` and `factbuoy inspect export --format
//! ansible-fact-cache`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use factbuoy_bundle::ansible_cache::{
    self, FACTS_ARTIFACT, MAX_FACTS_BYTES, SETUP_PLUGIN, write_host,
};
use factbuoy_bundle::layout::{self, ResultKind};
use serde_json::json;

use crate::output::{ExitStatus, Format, emit, emit_document};

/// Each node's setup facts document in the bundle at `bundle` (a `.tar.gz` or its extracted
/// folder), or why that node's could not be read.
pub fn facts_from_bundle(
    bundle: &Path,
) -> anyhow::Result<BTreeMap<String, Result<Vec<u8>, String>>> {
    let facts_by_host: BTreeMap<String, Result<Vec<u8>, String>> =
        factbuoy_bundle::reader::node_files(bundle, SETUP_PLUGIN, FACTS_ARTIFACT, MAX_FACTS_BYTES)?
            .into_iter()
            .collect();
    if facts_by_host.is_empty() {
        bail!(
            "{} has no setup results ({}/{FACTS_ARTIFACT}); was the setup plugin part of the run?",
            bundle.display(),
            layout::result_dir(SETUP_PLUGIN, "<node>", ResultKind::Results)
        );
    }
    Ok(facts_by_host)
}

/// Writes a cache file (or two, for [`ansible_cache::Layout::Both`]) per host in `dir`, and
/// prints what was written and each host whose facts could not be; exit 1 if any could not.
pub fn write_cache(
    dir: &Path,
    prefix: &str,
    layout: ansible_cache::Layout,
    facts_by_host: BTreeMap<String, Result<Vec<u8>, String>>,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the cache directory {}", dir.display()))?;
    let mut written = Vec::new();
    let mut errors = Vec::new();
    for (host, facts) in facts_by_host {
        let result = facts.and_then(|facts| {
            write_host(dir, prefix, &host, &facts, layout).map_err(|e| format!("{e:#}"))
        });
        match result {
            Ok(done) => written.push(done),
            Err(e) => errors.push(format!("{host}: {e}")),
        }
    }

    match format {
        Format::Table => {
            for w in &written {
                let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
                emit(&format!(
                    "{}: {} facts -> {}",
                    w.host,
                    w.facts,
                    files.join(", ")
                ));
            }
            for e in &errors {
                eprintln!("error: {}", factbuoy_protocol::text::printable(e));
            }
        }
        machine => emit_document(
            &json!({
                "directory": dir,
                "written": written.iter().map(|w| json!({"host": w.host, "files": w.files, "facts": w.facts})).collect::<Vec<_>>(),
                "errors": errors,
            }),
            machine,
        ),
    }
    Ok(if errors.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failed
    })
}
