//! `journalctl -o json`: one JSON object per line.
//!
//! As journalctl writes it: every value a string, `null` for a field at or above
//! [`JSON_THRESHOLD`] bytes (unless `all`), an array of byte values for anything not printable,
//! and the values of a field that occurs several times gathered in one array. journalctl keeps
//! fields in a hash table whose order changes from run to run; here the four derived fields come
//! first and the others in the order of the entry's first mention of them.

use std::io::{self, Write};

use super::fields::{Field, Fields, JSON_THRESHOLD, write_decimal};
use super::printable::is_printable;

pub fn write_entry(fields: &Fields, all: bool, out: &mut impl Write) -> io::Result<()> {
    out.write_all(b"{")?;
    let list = &fields.list;
    // Compares names by their hash first: entries have a few dozen fields, written by the million.
    let same_name =
        |a: &Field, b: &Field| a.name_hash == b.name_hash && fields.name(a) == fields.name(b);
    for (at, field) in list.iter().enumerate() {
        // Written with the first field of its name.
        if list[..at].iter().any(|f| same_name(f, field)) {
            continue;
        }
        if at > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"\"")?;
        out.write_all(fields.name(field))?;
        out.write_all(b"\":")?;
        let mut same = list[at + 1..]
            .iter()
            .filter(|f| same_name(f, field))
            .peekable();
        if same.peek().is_none() {
            write_value(fields, field, all, out)?;
        } else {
            out.write_all(b"[")?;
            write_value(fields, field, all, out)?;
            for other in same {
                out.write_all(b",")?;
                write_value(fields, other, all, out)?;
            }
            out.write_all(b"]")?;
        }
    }
    out.write_all(b"}\n")
}

fn write_value(fields: &Fields, field: &Field, all: bool, out: &mut impl Write) -> io::Result<()> {
    let value = fields.value(field);
    if !all && (field.truncated || field.name.1 + 1 + value.len() >= JSON_THRESHOLD) {
        out.write_all(b"null")
    } else if is_printable(value, true) {
        write_string(value, out)
    } else {
        write_byte_array(value, out)
    }
}

/// A JSON string of printable text: only quotes, backslashes, tabs and newlines need escapes.
fn write_string(text: &[u8], out: &mut impl Write) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut plain_from = 0;
    for (at, &byte) in text.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\t' => b"\\t",
            _ => continue,
        };
        out.write_all(&text[plain_from..at])?;
        out.write_all(escape)?;
        plain_from = at + 1;
    }
    out.write_all(&text[plain_from..])?;
    out.write_all(b"\"")
}

/// `[1,2,3]`, written a piece at a time so a large value needs no large buffer.
fn write_byte_array(value: &[u8], out: &mut impl Write) -> io::Result<()> {
    let mut piece = Vec::with_capacity(4096);
    piece.push(b'[');
    for (at, &byte) in value.iter().enumerate() {
        if at > 0 {
            piece.push(b',');
        }
        write_decimal(&mut piece, u64::from(byte));
        if piece.len() > 4000 {
            out.write_all(&piece)?;
            piece.clear();
        }
    }
    piece.push(b']');
    out.write_all(&piece)
}

#[cfg(test)]
mod tests {
    use super::super::Format;
    use super::super::tests::fields;
    use super::*;

    fn json(payloads: &[&[u8]], all: bool) -> String {
        let format = Format::Json { all };
        let mut line = Vec::new();
        write_entry(&fields(payloads, format), all, &mut line).unwrap();
        String::from_utf8(line).unwrap()
    }

    #[test]
    fn writes_the_derived_fields_then_the_entry_fields() {
        let line = json(&[b"MESSAGE=hello", b"PRIORITY=6"], false);
        assert!(line.ends_with("}\n"));
        assert!(line.starts_with(&format!("{{\"__CURSOR\":\"s={}", "ab".repeat(16))));
        assert!(line.contains(
            "\"__REALTIME_TIMESTAMP\":\"1700000000000000\",\"__MONOTONIC_TIMESTAMP\":\"12345\""
        ));
        assert!(line.ends_with(&format!(
            "\"_BOOT_ID\":\"{}\",\"MESSAGE\":\"hello\",\"PRIORITY\":\"6\"}}\n",
            "01".repeat(16)
        )));
    }

    #[test]
    fn gathers_repeated_fields_in_arrays_and_encodes_bytes() {
        let line = json(
            &[
                b"TAG=a",
                b"MESSAGE=x\x01y",
                b"TAG=b",
                b"TAG=\xff",
                b"NOTE=q\"b\\t\tn\n",
            ],
            false,
        );
        assert!(
            line.ends_with(
                "\"TAG\":[\"a\",\"b\",[255]],\"MESSAGE\":[120,1,121],\"NOTE\":\"q\\\"b\\\\t\\tn\\n\"}\n"
            ),
            "{line}"
        );
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["TAG"], serde_json::json!(["a", "b", [255]]));
    }

    #[test]
    fn long_fields_are_null_unless_all() {
        let edge = |total: usize| {
            let mut payload = b"MESSAGE=".to_vec();
            payload.resize(total, b'x');
            payload
        };
        let below = edge(JSON_THRESHOLD - 1);
        let at = edge(JSON_THRESHOLD);
        let line = json(&[&below, &at], false);
        assert!(line.contains(&format!("\"MESSAGE\":[\"{}\",null]", "x".repeat(4095 - 8))));
        let line = json(&[&at], true);
        assert!(line.contains(&format!("\"MESSAGE\":\"{}\"", "x".repeat(4096 - 8))));
    }
}
