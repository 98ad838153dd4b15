//! How `diff` names the facts of a document, so that a list's items are matched by what they
//! are rather than where they sit: the items of a list with declared keys by those keys
//! (`ansible_mounts[mount="/boot"].size_total`), a list of scalars as one set (its elements
//! sorted, so order does not matter), and any other list by position (`flags[3]`).
//!
//! Key values are written as JSON, so two different items never get the same name; an item
//! whose keys repeat an earlier item's gets `#2,`, `#3,` before them, and an item lacking a key
//! falls back to its position. A table artifact's rows are named as the items of a keyed list
//! ([`TableLeaves`]), read one line at a time without building a tree of each row.

use std::borrow::Cow;
use std::fmt::Write as _;

use factbuoy_protocol::artifacts::ListKeys;
use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use factbuoy_bundle::reader::ReadError;

use crate::facts::{parse_row, push_field};

/// Calls `leaf(name, json)` for every fact of `facts` with its diff name and its value as
/// compact JSON text, the lists named in `lists` matched by key. One name is built in place
/// at a time, so a document of a million facts costs no allocation per fact.
pub(crate) fn each_keyed_leaf(facts: &Value, lists: &[ListKeys], mut leaf: impl FnMut(&str, &str)) {
    let lists: Vec<(Vec<&str>, &[String])> = lists
        .iter()
        .map(|list| (list.path.split('.').collect(), list.keys.as_slice()))
        .collect();
    let mut path = String::new();
    let mut fields = Vec::new();
    let mut json = String::new();
    walk(&mut path, &mut fields, facts, &lists, &mut |path, value| {
        json.clear();
        let _ = write!(json, "{value}");
        leaf(path, &json)
    });
}

fn walk<'v>(
    path: &mut String,
    fields: &mut Vec<&'v str>,
    value: &'v Value,
    lists: &[(Vec<&str>, &[String])],
    leaf: &mut impl FnMut(&str, &Value),
) {
    let end = path.len();
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                fields.push(key);
                push_field(path, key);
                walk(path, fields, value, lists, leaf);
                path.truncate(end);
                fields.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if let Some(keys) = keys_of(fields, lists) {
                let mut seen = Repeats::default();
                for (i, item) in items.iter().enumerate() {
                    let named = item
                        .as_object()
                        .is_some_and(|object| keys.iter().all(|key| object.contains_key(key)));
                    if named {
                        path.push('[');
                        let start = path.len();
                        write_item_name(path, item, keys);
                        seen.mark(path, start);
                        path.push(']');
                    } else {
                        let _ = write!(path, "[{i}]");
                    }
                    walk(path, fields, item, lists, leaf);
                    path.truncate(end);
                }
            } else if items
                .iter()
                .all(|item| !item.is_object() && !item.is_array())
            {
                let mut set = items.clone();
                set.sort_by_cached_key(Value::to_string);
                leaf(path, &Value::Array(set));
            } else {
                for (i, item) in items.iter().enumerate() {
                    let _ = write!(path, "[{i}]");
                    walk(path, fields, item, lists, leaf);
                    path.truncate(end);
                }
            }
        }
        other => leaf(path, other),
    }
}

/// The item names of one list seen so far, to tell an item whose keys repeat an earlier
/// item's.
#[derive(Default)]
struct Repeats {
    seen: foldhash::HashMap<String, usize>,
}

impl Repeats {
    /// Counts the item name `path[start..]`, and writes `#2,` (`#3,`...) before it when an
    /// earlier item had it.
    fn mark(&mut self, path: &mut String, start: usize) {
        let count = match self.seen.get_mut(&path[start..]) {
            Some(count) => {
                *count += 1;
                *count
            }
            None => {
                self.seen.insert(path[start..].to_owned(), 1);
                1
            }
        };
        if count > 1 {
            path.insert_str(start, &format!("#{count},"));
        }
    }
}

/// Names a table artifact's rows and their cells as [`each_keyed_leaf`] names the facts of a
/// document holding one list, named after the artifact ([`table_field`]), whose items are the
/// rows, matched by `row_keys`.
pub(crate) struct TableLeaves<'k> {
    /// The list's name, as a path.
    field: String,
    row_keys: &'k [String],
    seen: Repeats,
    rows: usize,
    path: String,
    json: String,
}

impl<'k> TableLeaves<'k> {
    /// Names the rows of the table artifact `artifact`, identified by `row_keys`.
    pub(crate) fn new(artifact: &str, row_keys: &'k [String]) -> TableLeaves<'k> {
        let mut field = String::new();
        push_field(&mut field, &table_field(artifact));
        TableLeaves {
            field,
            row_keys,
            seen: Repeats::default(),
            rows: 0,
            path: String::new(),
            json: String::new(),
        }
    }

    /// Calls `leaf(name, at, json)` for each fact of the next row, where `name[..at.row]`
    /// names the row (`packages[name="zlib"]`) and the rest the fact within it (`.version`).
    pub(crate) fn row(&mut self, row: Row<'_>, leaf: &mut impl FnMut(&str, InRow, &str)) {
        let Row(mut cells) = row;
        // In the order a JSON object read as a map has them: by name, the last of a name
        // given twice. Most rows are written so already.
        if !cells.windows(2).all(|pair| pair[0].0 < pair[1].0) {
            cells.sort_by(|a, b| a.0.cmp(&b.0));
            cells.dedup_by(|later, earlier| {
                let repeated = later.0 == earlier.0;
                if repeated {
                    std::mem::swap(later, earlier);
                }
                repeated
            });
        }
        let index = self.rows;
        self.rows += 1;
        let path = &mut self.path;
        path.clear();
        path.push_str(&self.field);
        let cell = |name: &str| {
            cells
                .binary_search_by(|(n, _)| n.as_ref().cmp(name))
                .ok()
                .map(|i| &cells[i].1)
        };
        if self.row_keys.iter().all(|key| cell(key).is_some()) {
            path.push('[');
            let start = path.len();
            let mut part = |key: &str, value: &Cell| {
                if path.len() > start {
                    path.push(',');
                }
                path.push_str(key);
                path.push('=');
                value.write_json(path);
            };
            if self.row_keys.is_empty() {
                cells.iter().for_each(|(key, value)| part(key, value));
            } else {
                for key in self.row_keys {
                    part(key, cell(key).expect("the row holds every key"));
                }
            }
            self.seen.mark(path, start);
            path.push(']');
        } else {
            let _ = write!(path, "[{index}]");
        }
        let end = path.len();
        let mut at = InRow { row: end, fact: 0 };
        if cells.is_empty() {
            leaf(path, at, "{}");
            return;
        }
        for (name, value) in &cells {
            push_field(path, name);
            match value {
                Cell::Nested(value) => {
                    // Lists inside a row are not keyed: only the table's own list is.
                    let json = &mut self.json;
                    walk(path, &mut Vec::new(), value, &[], &mut |path, value| {
                        json.clear();
                        let _ = write!(json, "{value}");
                        leaf(path, at, json);
                        at.fact += 1;
                    });
                }
                scalar => {
                    self.json.clear();
                    scalar.write_json(&mut self.json);
                    leaf(path, at, &self.json);
                    at.fact += 1;
                }
            }
            path.truncate(end);
        }
    }

    /// Ends the table: a table without rows is one fact, an empty list (named as a row).
    pub(crate) fn finish(self, leaf: &mut impl FnMut(&str, InRow, &str)) {
        if self.rows == 0 {
            let at = InRow {
                row: self.field.len(),
                fact: 0,
            };
            leaf(&self.field, at, "[]");
        }
    }
}

/// Where a table's fact sits: the length of the part of its name that names its row, and
/// how many facts of the row came before it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InRow {
    pub row: usize,
    pub fact: usize,
}

/// A table's row as read from its line ([`Row::read`]): its cells, by name,
/// borrowing from the line where the JSON needs no unescaping.
pub(crate) struct Row<'l>(Vec<(Cow<'l, str>, Cell<'l>)>);

impl<'l> Row<'l> {
    /// Reads a row from `line`, line `number` of the table artifact `entry`: a flat row of
    /// plain strings, integers, `true`, `false` and `null` directly (most rows are), anything
    /// else through `serde_json`, which also names what is wrong with a line that is not a
    /// JSON object (the error names the entry and the line).
    pub(crate) fn read(entry: &str, number: u64, line: &'l [u8]) -> Result<Row<'l>, ReadError> {
        match Row::plain(line) {
            Some(row) => Ok(row),
            None => parse_row(entry, number, line, std::marker::PhantomData),
        }
    }

    /// The row, when `line` is an object whose values are all plain: strings without escapes,
    /// integers of at most 18 digits (so serde_json reads them as integers and writes them back
    /// as the same text), `true`, `false` or `null`. `None` for anything else, which
    /// `serde_json` then reads.
    fn plain(line: &'l [u8]) -> Option<Row<'l>> {
        // Checked as UTF-8 at once: a string is then cut from `whole` at its quotes (ASCII, so
        // boundaries of characters), faster than checking each string apart.
        let whole = std::str::from_utf8(line).ok()?;
        let text = whole.as_bytes();
        let mut at = 0;
        let skip_space = |at: &mut usize| {
            while text
                .get(*at)
                .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            {
                *at += 1;
            }
        };
        let string = |at: &mut usize| -> Option<&'l str> {
            // At the opening quote.
            let start = *at + 1;
            let len = memchr::memchr(b'"', &text[start..])?;
            let bytes = &text[start..start + len];
            if bytes.iter().any(|b| *b == b'\\' || *b < 0x20) {
                return None;
            }
            *at = start + len + 1;
            Some(&whole[start..start + len])
        };
        let mut cells = Vec::with_capacity(8);
        skip_space(&mut at);
        if text.get(at) != Some(&b'{') {
            return None;
        }
        at += 1;
        skip_space(&mut at);
        if text.get(at) == Some(&b'}') {
            at += 1;
        } else {
            loop {
                skip_space(&mut at);
                if text.get(at) != Some(&b'"') {
                    return None;
                }
                let name = string(&mut at)?;
                skip_space(&mut at);
                if text.get(at) != Some(&b':') {
                    return None;
                }
                at += 1;
                skip_space(&mut at);
                let cell = match *text.get(at)? {
                    b'"' => Cell::Text(Cow::Borrowed(string(&mut at)?)),
                    b't' if text[at..].starts_with(b"true") => {
                        at += 4;
                        Cell::Bool(true)
                    }
                    b'f' if text[at..].starts_with(b"false") => {
                        at += 5;
                        Cell::Bool(false)
                    }
                    b'n' if text[at..].starts_with(b"null") => {
                        at += 4;
                        Cell::Null
                    }
                    b'-' | b'0'..=b'9' => {
                        let negative = text[at] == b'-';
                        let start = at + usize::from(negative);
                        let digits = text[start..]
                            .iter()
                            .take_while(|b| b.is_ascii_digit())
                            .count();
                        // No leading zeros (and so no -0), no fraction or exponent, fits in i64.
                        let plain = (1..=18).contains(&digits)
                            && (text[start] != b'0' || (digits == 1 && !negative))
                            && !matches!(text.get(start + digits), Some(b'.' | b'e' | b'E'));
                        if !plain {
                            return None;
                        }
                        let number = &whole[at..start + digits];
                        at = start + digits;
                        Cell::Integer(number)
                    }
                    _ => return None,
                };
                cells.push((Cow::Borrowed(name), cell));
                skip_space(&mut at);
                match text.get(at)? {
                    b',' => at += 1,
                    b'}' => {
                        at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        skip_space(&mut at);
        (at == text.len()).then_some(Row(cells))
    }
}

/// A cell's value; numbers as `serde_json::Value` reads them, so that each is written back
/// as the same JSON text.
enum Cell<'l> {
    Text(Cow<'l, str>),
    /// An integer's text, read by [`Row::plain`]: as serde_json writes the number.
    Integer(&'l str),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Bool(bool),
    Null,
    /// An object or a list.
    Nested(Value),
}

impl Cell<'_> {
    /// Writes the value as compact JSON, as `serde_json` writes a [`Value`].
    fn write_json(&self, out: &mut String) {
        match self {
            // serde_json escapes `"`, `\` and control characters, and nothing else.
            Cell::Text(text) if !text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') => {
                out.push('"');
                out.push_str(text);
                out.push('"');
            }
            Cell::Text(text) => out.push_str(&Value::from(text.as_ref()).to_string()),
            Cell::Integer(text) => out.push_str(text),
            Cell::Unsigned(n) => {
                let _ = write!(out, "{n}");
            }
            Cell::Signed(n) => {
                let _ = write!(out, "{n}");
            }
            Cell::Float(n) => out.push_str(&Value::from(*n).to_string()),
            Cell::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Cell::Null => out.push_str("null"),
            Cell::Nested(value) => {
                let _ = write!(out, "{value}");
            }
        }
    }
}

impl<'de> Deserialize<'de> for Row<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RowVisitor;
        impl<'de> Visitor<'de> for RowVisitor {
            type Value = Row<'de>;
            // As `serde_json::Map` says it, so that a line that is not an object reads the same.
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Row<'de>, A::Error> {
                let mut cells = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((Text(name), value)) = map.next_entry::<Text, Cell>()? {
                    cells.push((name, value));
                }
                Ok(Row(cells))
            }
        }
        deserializer.deserialize_map(RowVisitor)
    }
}

/// A string, borrowed where it can be.
struct Text<'l>(Cow<'l, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

impl<'de> Deserialize<'de> for Cell<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CellVisitor;
        impl<'de> Visitor<'de> for CellVisitor {
            type Value = Cell<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any valid JSON value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Cell<'de>, E> {
                Ok(Cell::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Cell<'de>, E> {
                Ok(Cell::Signed(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Cell<'de>, E> {
                Ok(Cell::Unsigned(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Cell<'de>, E> {
                // As `serde_json::Value` reads it: a number that is not finite is null.
                Ok(if v.is_finite() {
                    Cell::Float(v)
                } else {
                    Cell::Null
                })
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Cell<'de>, E> {
                Ok(Cell::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Cell<'de>, E> {
                Ok(Cell::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Cell<'de>, E> {
                Ok(Cell::Text(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Cell<'de>, E> {
                Ok(Cell::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Cell<'de>, E> {
                Ok(Cell::Null)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Cell<'de>, A::Error> {
                Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(Cell::Nested)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Cell<'de>, A::Error> {
                Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Cell::Nested)
            }
        }
        deserializer.deserialize_any(CellVisitor)
    }
}

/// The keys declared for the list reached through the field names `fields`; `*` in a declared
/// path stands for any one name.
fn keys_of<'a>(fields: &[&str], lists: &[(Vec<&str>, &'a [String])]) -> Option<&'a [String]> {
    lists.iter().find_map(|(path, keys)| {
        let matches = path.len() == fields.len()
            && path
                .iter()
                .zip(fields)
                .all(|(declared, field)| *declared == "*" || declared == field);
        matches.then_some(*keys)
    })
}

/// Writes an item's name, `mount="/boot"` or `family="inet",destination="0.0.0.0"`: its keys
/// and their values as JSON, every field of it when no key is declared (a table whose whole
/// row is its identity). The item holds every key.
fn write_item_name(out: &mut String, item: &Value, keys: &[String]) {
    let Some(object) = item.as_object() else {
        return;
    };
    let mut first = true;
    let mut part = |key: &str, value: &Value| {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{key}={value}");
    };
    if keys.is_empty() {
        object.iter().for_each(|(key, value)| part(key, value));
    } else {
        for key in keys {
            part(key, &object[key.as_str()]);
        }
    }
}

/// The field a table artifact's rows are compared under: its name without the extension,
/// `.` and `/` written `_` (`sockets.jsonl` is `sockets`).
pub(crate) fn table_field(artifact: &str) -> String {
    let stem = match artifact.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => artifact,
    };
    stem.replace(['.', '/'], "_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(path: &str, keys: &[&str]) -> ListKeys {
        ListKeys {
            path: path.into(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    fn names(facts: &Value, lists: &[ListKeys]) -> Vec<(String, Value)> {
        let mut found = Vec::new();
        each_keyed_leaf(facts, lists, |name, value| {
            found.push((name.to_owned(), serde_json::from_str(value).unwrap()))
        });
        found
    }

    #[test]
    fn keyed_items_are_named_by_their_keys_wherever_they_sit() {
        let before = json!({"mounts": [{"at": "/", "size": 1}, {"at": "/mnt2", "size": 2}]});
        let after = json!({"mounts": [{"at": "/mnt2", "size": 2}]});
        let lists = [keys("mounts", &["at"])];
        assert_eq!(
            names(&before, &lists),
            [
                (r#"mounts[at="/"].at"#.into(), json!("/")),
                (r#"mounts[at="/"].size"#.into(), json!(1)),
                (r#"mounts[at="/mnt2"].at"#.into(), json!("/mnt2")),
                (r#"mounts[at="/mnt2"].size"#.into(), json!(2)),
            ]
        );
        // The item left is named as before, though it moved.
        assert_eq!(names(&after, &lists), names(&before, &lists)[2..]);
    }

    #[test]
    fn nested_lists_wildcards_repeats_and_missing_keys() {
        let facts = json!({
            "eth0": {"ipv6": [{"address": "fe80::1"}, {"address": "fe80::1"}, {"scope": "x"}]},
            "net": {"ifaces": [{"name": "lo", "addrs": [{"a": "127.0.0.1", "p": 8}]}]},
        });
        let lists = [
            keys("*.ipv6", &["address"]),
            keys("net.ifaces", &["name"]),
            keys("net.ifaces.addrs", &["a", "p"]),
        ];
        let paths: Vec<String> = names(&facts, &lists).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                r#"eth0.ipv6[address="fe80::1"].address"#,
                r#"eth0.ipv6[#2,address="fe80::1"].address"#,
                "eth0.ipv6[2].scope",
                r#"net.ifaces[name="lo"].addrs[a="127.0.0.1",p=8].a"#,
                r#"net.ifaces[name="lo"].addrs[a="127.0.0.1",p=8].p"#,
                r#"net.ifaces[name="lo"].name"#,
            ]
        );
    }

    #[test]
    fn lists_of_scalars_are_sets_and_other_lists_positions() {
        let a = json!({"flags": ["b", "a", 3], "rows": [{"x": 1}]});
        let b = json!({"flags": [3, "a", "b"], "rows": [{"x": 1}]});
        assert_eq!(names(&a, &[]), names(&b, &[]));
        assert_eq!(
            names(&a, &[]),
            [
                ("flags".into(), json!(["a", "b", 3])),
                ("rows[0].x".into(), json!(1)),
            ]
        );
    }

    #[test]
    fn table_rows_are_named_as_the_items_of_a_keyed_list() {
        let rows = [
            r#"{"name": "a", "version": "1", "size": 10}"#,
            r#"{"version": 2.50, "name": "b", "size": -3, "size": 1e2}"#,
            r#"{"name": "c\u0041\"\\", "esc": "tab\there", "big": 18446744073709551615}"#,
            r#"{"name": {"x": [2, 1]}, "deep": {"l": [{"q": 1}, "s"], "e": {}, "f": []}}"#,
            r#"{"name": "a", "version": "1"}"#,
            r#"{"name": "a", "ok": true, "no": null}"#,
            r#"{"version": "no name"}"#,
            r#"{}"#,
            r#"{"name": ["z", "y"], "n": 12345678901234567890123}"#,
            " { \"name\" : \"d\" ,\t\"n\": -42, \"z\": 0, \"u\": \"h\u{e9}/\" } \n",
        ];
        let row_keys = vec!["name".to_string()];
        let mut leaves = TableLeaves::new("packages.jsonl", &row_keys);
        let mut fast = Vec::new();
        let mut leaf = |name: &str, at: InRow, json: &str| {
            let rest = &name[at.row..];
            assert!(rest.is_empty() || rest.starts_with(['.', '[']));
            fast.push((name.to_owned(), json.to_owned()))
        };
        for (i, row) in rows.iter().enumerate() {
            // Plain rows are read directly, the others by serde_json.
            let plain = Row::plain(row.as_bytes());
            assert_eq!(plain.is_some(), ![1, 2, 3, 8].contains(&i), "{row}");
            leaves.row(
                plain.unwrap_or_else(|| serde_json::from_str(row).unwrap()),
                &mut leaf,
            );
        }
        leaves.finish(&mut leaf);
        // As the table read whole into a document holding one list.
        let table: Vec<Value> = rows
            .iter()
            .map(|row| serde_json::from_str(row).unwrap())
            .collect();
        let mut whole = Vec::new();
        each_keyed_leaf(
            &json!({ "packages": table }),
            &[keys("packages", &["name"])],
            |n, j| whole.push((n.to_owned(), j.to_owned())),
        );
        assert_eq!(fast, whole);
        assert!(fast.contains(&(r#"packages[#3,name="a"].no"#.into(), "null".into())));

        let mut empty = Vec::new();
        TableLeaves::new("packages.jsonl", &row_keys)
            .finish(&mut |n: &str, _, j: &str| empty.push((n.to_owned(), j.to_owned())));
        assert_eq!(empty, [("packages".to_string(), "[]".to_string())]);
    }

    #[test]
    fn rows_that_are_not_plain_are_left_to_serde_json() {
        for line in [
            r#"{"a": -0}"#,
            r#"{"a": 01}"#,
            r#"{"a": 1.5}"#,
            r#"{"a": 1e3}"#,
            r#"{"a": 1234567890123456789}"#,
            r#"{"a": 1,}"#,
            r#"{"a": "\u0041"}"#,
            r#"{"a": 1} x"#,
            r#"{"a": tru}"#,
            r#"["a"]"#,
            "{\"a\": \"tab\there\"}",
        ] {
            assert!(Row::plain(line.as_bytes()).is_none(), "{line}");
        }
        assert!(Row::plain(br#"{"a": 123456789012345678, "b": -5, "c": null}"#).is_some());
    }
}
