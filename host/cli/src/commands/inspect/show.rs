//! How `inspect` prints its answers' lines (made by `factbuoy_present::inspect`): each made
//! printable, so that no escape sequence a bundle's author chose reaches the terminal.

use factbuoy_protocol::text::printable;

use crate::output::emit;

/// Prints `lines`, each with what a bundle's author chose (names, values, messages) made
/// printable: no escape sequence reaches the terminal.
pub fn emit_lines(lines: &[String]) {
    let shown: Vec<String> = lines.iter().map(|l| printable(l).into_owned()).collect();
    emit(&shown.join("\n"));
}
