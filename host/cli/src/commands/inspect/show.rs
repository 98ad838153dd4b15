//! How `inspect` shows what a bundle's author chose (node names, fact values, messages) in its
//! tables: cut to fit, made printable.

use factbuoy_protocol::text::printable;
use serde_json::Value;

use crate::output::emit;
use crate::table::cut;

/// The widest a value is shown in a table; `-o json` has it whole.
const MAX_CELL_CHARS: usize = 100;

/// The most node names a cell lists before "and N more".
const MAX_NAMES: usize = 5;

/// Node names, the first few: `web-1, web-2 and 298 more`.
pub fn names(nodes: &[String]) -> String {
    let shown = nodes[..nodes.len().min(MAX_NAMES)].join(", ");
    match nodes.len().saturating_sub(MAX_NAMES) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// A value as a table shows it: strings bare, anything else as compact JSON, cut to fit.
pub fn cell(value: &Value) -> String {
    let text = match value {
        Value::String(text) if text.is_empty() => "\"\"".into(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    cut(&text, MAX_CELL_CHARS)
}

/// Prints `lines`, each with what a bundle's author chose (names, values, messages) made
/// printable: no escape sequence reaches the terminal.
pub fn emit_lines(lines: &[String]) {
    let shown: Vec<String> = lines.iter().map(|l| printable(l).into_owned()).collect();
    emit(&shown.join("\n"));
}
