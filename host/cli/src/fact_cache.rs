//! Writing setup facts into an Ansible `jsonfile` fact cache (factbuoy-inspect's
//! [`ansible_cache::write_cache`]) and saying what was written:
//! shared by `factbuoy ansible fact-cache` and `factbuoy inspect export --format
//! ansible-fact-cache` (whose facts `factbuoy_inspect::ansible_cache::facts_from_bundle` reads).

use std::collections::BTreeMap;
use std::path::Path;

use factbuoy_inspect::ansible_cache;
use serde_json::json;

use crate::output::{ExitStatus, Format, emit, emit_document};

/// Writes a cache file (or two, for [`ansible_cache::Layout::Both`]) per host in `dir`, and
/// prints what was written and each host whose facts could not be; exit 1 if any could not.
pub fn write_cache(
    dir: &Path,
    prefix: &str,
    layout: ansible_cache::Layout,
    facts_by_host: BTreeMap<String, Result<Vec<u8>, String>>,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    let ansible_cache::CacheWrite { written, errors } =
        ansible_cache::write_cache(dir, prefix, layout, facts_by_host)?;
    match format {
        Format::Table => {
            for line in factbuoy_present::inspect::fact_cache_lines(&written) {
                emit(&line);
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
