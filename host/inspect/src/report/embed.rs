//! Data written into the page: JSON inside `<script type="application/json">` elements, escaped
//! so that nothing in a value can end the element or be read as HTML.

use std::io::{self, Write};

use serde::Serialize;

/// Writes `value` as JSON inside a `<script type="application/json">`. JSON text holds `<` only
/// inside strings, where `\u003c` means the same: so no `</script>` (or `<!--`) in a value can
/// end the element.
pub(super) fn script(
    out: &mut impl Write,
    class: &str,
    id: Option<&str>,
    value: &impl Serialize,
) -> io::Result<()> {
    match id {
        Some(id) => write!(
            out,
            "<script type=\"application/json\" class=\"{class}\" id=\"{id}\">"
        )?,
        None => write!(out, "<script type=\"application/json\" class=\"{class}\">")?,
    }
    serde_json::to_writer(EscapeLessThan { inner: &mut *out }, value)?;
    out.write_all(b"</script>\n")
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
