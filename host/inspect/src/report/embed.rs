//! Data written into the page: JSON inside `<script type="application/json">` elements, escaped
//! so that nothing in a value can end the element or be read as HTML.

use std::io::{self, Write};

use serde::Serialize;

/// Writes `value` as JSON inside a `<script type="application/json">`, marked as of `group`
/// when the page has several ([`group_mark`]). JSON text holds `<` only inside strings, where
/// `\u003c` means the same: so no `</script>` (or `<!--`) in a value can end the element.
pub(super) fn script(
    out: &mut impl Write,
    class: &str,
    id: Option<&str>,
    group: Option<usize>,
    value: &impl Serialize,
) -> io::Result<()> {
    let id = id.map(|id| format!(" id=\"{id}\"")).unwrap_or_default();
    write!(
        out,
        "<script type=\"application/json\" class=\"{class}\"{id}{}>",
        group_mark(group)
    )?;
    serde_json::to_writer(EscapeLessThan { inner: &mut *out }, value)?;
    out.write_all(b"</script>\n")
}

/// The attribute that says which group of a page of several a script is of (app.js reads each
/// group's scripts apart); none on a page of one bundle.
pub(super) fn group_mark(group: Option<usize>) -> String {
    group
        .map(|g| format!(" data-group=\"{g}\""))
        .unwrap_or_default()
}

/// Passes bytes through, `<` written as `\u003c`.
struct EscapeLessThan<W> {
    inner: W,
}

impl<W: Write> Write for EscapeLessThan<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for part in buf.split_inclusive(|b| *b == b'<') {
            match part.strip_suffix(b"<") {
                Some(before) => {
                    self.inner.write_all(before)?;
                    self.inner.write_all(b"\\u003c")?;
                }
                None => self.inner.write_all(part)?,
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
