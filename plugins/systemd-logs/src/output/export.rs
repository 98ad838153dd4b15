//! `journalctl -o export`: systemd's Journal Export Format
//! (<https://systemd.io/JOURNAL_EXPORT_FORMATS/>). Each field on its own line as `NAME=value`,
//! or, when the value is not printable text without newlines, as `NAME`, a newline, the value's
//! length as a little-endian 64-bit integer, the value and a newline. A blank line ends an entry.
//! This is the format `systemd-journal-remote` reads back.

use std::io::{self, Write};

use super::fields::Fields;
use super::printable::is_printable;

pub fn write_entry(fields: &Fields, out: &mut impl Write) -> io::Result<()> {
    for field in &fields.list {
        let value = fields.value(field);
        out.write_all(fields.name(field))?;
        // journalctl checks the whole `NAME=value`; names are plain ASCII.
        if is_printable(value, false) {
            out.write_all(b"=")?;
        } else {
            out.write_all(b"\n")?;
            out.write_all(&(value.len() as u64).to_le_bytes())?;
        }
        out.write_all(value)?;
        out.write_all(b"\n")?;
    }
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::super::Format;
    use super::super::tests::fields;
    use super::*;

    #[test]
    fn text_and_binary_fields() {
        let mut out = Vec::new();
        write_entry(
            &fields(&[b"MESSAGE=two\nlines", b"PRIORITY=6"], Format::Export),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("__CURSOR=s="));
        assert!(text.contains("\n__REALTIME_TIMESTAMP=1700000000000000\n"));
        assert!(text.contains("\n__MONOTONIC_TIMESTAMP=12345\n"));
        assert!(text.contains(&format!("\n_BOOT_ID={}\n", "01".repeat(16))));
        let mut binary = b"\nMESSAGE\n".to_vec();
        binary.extend_from_slice(&9u64.to_le_bytes());
        binary.extend_from_slice(b"two\nlines\nPRIORITY=6\n\n");
        assert!(out.ends_with(&binary));
    }
}
