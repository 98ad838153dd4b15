//! A facts document as its bytes: checked as parsing it into a `serde_json::Value` would check
//! it, without building one ([`Checked`]), and its top-level fields found without parsing
//! their values ([`top_level_fields`]), so that a field whose bytes were read before need not
//! be parsed again (the history's index, `diff`) and a query of one field parses that field
//! alone (`query`).

use std::fmt;

use serde::de::{Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A JSON value read and dropped: accepted exactly when a `serde_json::Value` would be
/// (every string checked as UTF-8 and for its escapes, every number read, nesting within
/// serde_json's limit), because it is read through the same path, `deserialize_any`, and not
/// `deserialize_ignored_any`, which skips values without those checks.
pub(crate) struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Checked, A::Error> {
        while items.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<Checked, A::Error> {
        while fields.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// The document `doc` reduced to its field `name` (`{}` without it), checked whole as
/// [`Checked`] checks: what a query that starts with that field finds in the document, which
/// it finds in this one too. `None` when `doc` is not an object, or not JSON a `Value` reads.
pub(crate) fn only_field(doc: &[u8], name: &str) -> Option<Value> {
    struct Only<'n>(&'n str);
    impl<'de> DeserializeSeed<'de> for Only<'_> {
        type Value = Option<Value>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Only<'_> {
        type Value = Option<Value>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<Option<Value>, A::Error> {
            let mut found = None;
            while let Some(wanted) = fields.next_key_seed(IsName(self.0))? {
                if wanted {
                    // The last of a key given twice, as a `Value` keeps.
                    found = Some(fields.next_value::<Value>()?);
                } else {
                    fields.next_value::<Checked>()?;
                }
            }
            let mut only = serde_json::Map::new();
            if let Some(value) = found {
                only.insert(self.0.to_owned(), value);
            }
            Ok(Some(Value::Object(only)))
        }
        // Anything but an object: not reduced (`Checked` accepts it, so this is no error).
        fn visit_bool<E>(self, _: bool) -> Result<Option<Value>, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Option<Value>, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Option<Value>, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Option<Value>, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Option<Value>, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Option<Value>, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Option<Value>, A::Error> {
            while items.next_element::<Checked>()?.is_some() {}
            Ok(None)
        }
    }
    /// Whether a key is the name: compared where it lies, not copied.
    struct IsName<'n>(&'n str);
    impl<'de> DeserializeSeed<'de> for IsName<'_> {
        type Value = bool;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
            d.deserialize_str(self)
        }
    }
    impl<'de> Visitor<'de> for IsName<'_> {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a key")
        }
        fn visit_str<E>(self, key: &str) -> Result<bool, E> {
            Ok(key == self.0)
        }
    }
    let mut json = serde_json::Deserializer::from_slice(doc);
    let only = Only(name).deserialize(&mut json).ok()?;
    json.end().ok()?;
    only
}

/// Whether serde_json's `Map` keeps fields in the order the document gives them (its
/// `preserve_order` feature, which any crate of the build may turn on) rather than by key:
/// the order [`top_level_fields`]' fields must be read in to be numbered as a parsed
/// document's are.
pub(crate) fn maps_keep_document_order() -> bool {
    static KEEP: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        serde_json::from_str::<serde_json::Map<String, Value>>(r#"{"b": 0, "a": 0}"#)
            .is_ok_and(|map| map.keys().next().is_some_and(|key| key == "b"))
    });
    *KEEP
}

/// The top-level fields of a JSON document that is an object, as (key, the value's bytes),
/// found without parsing the values; `None` for anything else, a key with an escape in it, or
/// a key given twice (such a document is read whole). Only finds where values end: a value
/// is checked when it is parsed, the first time its bytes are seen.
pub(crate) fn top_level_fields(doc: &[u8]) -> Option<Vec<(&str, &[u8])>> {
    let fields = top_level_fields_known(doc, |_, _| None)?;
    Some(
        fields
            .into_iter()
            .map(|(key, value, _)| (key, value))
            .collect(),
    )
}

/// As [`top_level_fields`], each value first offered to `known(key, rest)`, `rest` being the
/// document from the value's start: the length of a value it knows `rest` starts with
/// ([`starts_with_value`]) is taken as this value's, without looking for its end. Each field
/// comes with whether `known` knew it.
pub(crate) fn top_level_fields_known(
    doc: &[u8],
    mut known: impl FnMut(&str, &[u8]) -> Option<usize>,
) -> Option<Vec<(&str, &[u8], bool)>> {
    let mut at = skip_space(doc, 0);
    if doc.get(at) != Some(&b'{') {
        return None;
    }
    let mut fields = Vec::new();
    at = skip_space(doc, at + 1);
    if doc.get(at) == Some(&b'}') {
        return (skip_space(doc, at + 1) == doc.len()).then_some(fields);
    }
    loop {
        if doc.get(at) != Some(&b'"') {
            return None;
        }
        let end = string_end(doc, at)?;
        let key = &doc[at + 1..end - 1];
        if key.contains(&b'\\') {
            return None;
        }
        let key = std::str::from_utf8(key).ok()?;
        at = skip_space(doc, end);
        if doc.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_space(doc, at + 1);
        let (end, was_known) = match known(key, &doc[start..]) {
            Some(length) => (start + length, true),
            None => (value_end(doc, start)?, false),
        };
        fields.push((key, &doc[start..end], was_known));
        at = skip_space(doc, end);
        match doc.get(at) {
            Some(b',') => at = skip_space(doc, at + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_space(doc, at + 1) != doc.len() {
        return None;
    }
    let mut keys: Vec<&str> = fields.iter().map(|(key, _, _)| *key).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|pair| pair[0] == pair[1]) {
        return None;
    }
    Some(fields)
}

/// Whether `rest` starts with the whole of `value`, a value as [`top_level_fields`] finds
/// them: a string, list or object ends where its bytes do, a number or literal only before a
/// byte that ends one.
pub(crate) fn starts_with_value(rest: &[u8], value: &[u8]) -> bool {
    rest.starts_with(value)
        && (matches!(value.first(), Some(b'"' | b'[' | b'{'))
            || rest.get(value.len()).is_none_or(ends_scalar))
}

/// Whether `byte` ends a number or literal that it follows.
fn ends_scalar(byte: &u8) -> bool {
    matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_space(doc: &[u8], mut at: usize) -> usize {
    while doc
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// Where the string that opens at `at` ends (after its closing quote).
fn string_end(doc: &[u8], at: usize) -> Option<usize> {
    let mut from = at + 1;
    loop {
        let found = from + memchr::memchr2(b'"', b'\\', doc.get(from..)?)?;
        if doc[found] == b'\\' {
            from = found + 2;
        } else {
            return Some(found + 1);
        }
    }
}

/// Where the value that starts at `at` ends.
fn value_end(doc: &[u8], at: usize) -> Option<usize> {
    match doc.get(at)? {
        b'"' => string_end(doc, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut from = at;
            // The next quote or opening bracket, and the next closing bracket, from `from` on
            // (`doc.len()` for none): each searched for again only once `from` passed it, not
            // at every step (which made a field's scan quadratic in its brackets).
            let next = |from: usize, found: Option<usize>| found.map_or(doc.len(), |n| from + n);
            let (mut open, mut close) = (at, at);
            loop {
                if open < from {
                    open = next(from, memchr::memchr3(b'"', b'{', b'[', &doc[from..]));
                }
                if close < from {
                    close = next(from, memchr::memchr2(b'}', b']', &doc[from..]));
                }
                let found = open.min(close);
                if found == doc.len() {
                    return None;
                }
                match doc[found] {
                    b'"' => from = string_end(doc, found)?,
                    b'{' | b'[' => {
                        depth += 1;
                        from = found + 1;
                    }
                    _ => {
                        depth -= 1;
                        from = found + 1;
                        if depth == 0 {
                            return Some(from);
                        }
                    }
                }
            }
        }
        _ => {
            let rest = doc.get(at..)?;
            let end = rest.iter().position(ends_scalar).unwrap_or(rest.len());
            (end > 0).then_some(at + end)
        }
    }
}

/// `{"a": 1, "b": [[...1...]]}`, with `b` nested `depth` lists deep.
#[cfg(test)]
pub(crate) fn nested_document(depth: usize) -> Vec<u8> {
    format!(
        r#"{{"a": 1, "b": {}1{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
    .into_bytes()
}

/// Documents parsing must refuse (a string that is not UTF-8 or holds a bad escape, a number
/// out of range, nesting past serde_json's limit, trailing bytes, control characters) and some
/// it must accept (a key given twice, nesting just within the limit), for the tests that check
/// a reader without a tree refuses and accepts what parsing does.
#[cfg(test)]
pub(crate) fn hostile_documents() -> Vec<Vec<u8>> {
    let mut docs: Vec<Vec<u8>> = [
        &br#"{"a": {"x": [1, 2.5, "s\n", null, true]}, "b": "t"}"#[..],
        br#"{"a": 1, "a": 2, "b": 3}"#,
        br#"{"b": 1}"#,
        b"{}",
        b"[1, 2]",
        br#"{"a": 1, "b": "\q"}"#,
        br#"{"a": 1, "b": 1e400}"#,
        br#"{"a": 1, "b": 01}"#,
        br#"{"a": 1, "b": 1"c"}"#,
        br#"{"a": 1, "b": [1}"#,
        br#"{"a": 1, "b": tru}"#,
        br#"{"a": 1, "b": truefalse}"#,
        br#"{"a": 1} trailing"#,
        br#"{"a": 1}  "#,
        br#"{"a": 1, "b": "\ud800"}"#,
        b"{\"a\": 1, \"b\": \"\xff\"}",
        b"{\"a\": 1, \"b\xff\": 2}",
        b"{\"a\": 1, \"b\x01\": 2}",
        b"{\"a\": 1, \"b\": \"\x1f\"}",
    ]
    .iter()
    .map(|d| d.to_vec())
    .collect();
    docs.extend([120, 125, 126, 127, 128, 200].map(nested_document));
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Checked` and `only_field` accept is what parsing into a `Value` accepts, the
    /// hostile cases included: a string that is not UTF-8 or holds a bad escape, a number out
    /// of range, nesting past serde_json's limit, trailing bytes, a key given twice.
    #[test]
    fn checked_accepts_what_a_value_accepts_and_only_field_finds_what_it_holds() {
        let mut docs = hostile_documents();
        docs.push(b"\"text\"".to_vec());
        for doc in &docs {
            let text = String::from_utf8_lossy(doc);
            let value = serde_json::from_slice::<Value>(doc);
            assert_eq!(
                serde_json::from_slice::<Checked>(doc).is_ok(),
                value.is_ok(),
                "{text}"
            );
            let reduced = value.ok().filter(Value::is_object).map(|whole| {
                let mut only = serde_json::Map::new();
                if let Some(a) = whole.get("a") {
                    only.insert("a".to_owned(), a.clone());
                }
                Value::Object(only)
            });
            assert_eq!(only_field(doc, "a"), reduced, "{text}");
        }
    }

    #[test]
    fn top_level_fields_are_found_without_parsing_and_odd_documents_are_read_whole() {
        let doc = br#" { "a" : {"x": "}{][", "y": [1, {"z": "\"]"}]},
            "b":"s\"t\\",
            "c": -1.5e3 , "d":[], "e":{}, "f":true,"g":null }
        "#;
        let fields = top_level_fields(doc).unwrap();
        let texts: Vec<(&str, &str)> = fields
            .iter()
            .map(|(key, value)| (*key, std::str::from_utf8(value).unwrap()))
            .collect();
        assert_eq!(
            texts,
            [
                ("a", r#"{"x": "}{][", "y": [1, {"z": "\"]"}]}"#),
                ("b", r#""s\"t\\""#),
                ("c", "-1.5e3"),
                ("d", "[]"),
                ("e", "{}"),
                ("f", "true"),
                ("g", "null"),
            ]
        );
        // Every value parses as JSON: the bytes are the value's, whole.
        for (_, value) in &fields {
            serde_json::from_slice::<serde_json::Value>(value).unwrap();
        }
        // A value known is taken whole without its end looked for, a number only up to a
        // byte that ends one.
        let known = top_level_fields_known(doc, |key, rest| {
            let value: &[u8] = match key {
                "a" => br#"{"x": "}{][", "y": [1, {"z": "\"]"}]}"#,
                "c" => b"-1.5",
                _ => b"null",
            };
            starts_with_value(rest, value).then_some(value.len())
        })
        .unwrap();
        let same: Vec<(&str, &[u8])> = known.iter().map(|(key, value, _)| (*key, *value)).collect();
        assert_eq!(same, fields);
        let taken: Vec<(&str, bool)> = known.iter().map(|(key, _, was)| (*key, *was)).collect();
        assert_eq!(
            taken,
            [
                ("a", true),
                ("b", false),
                ("c", false),
                ("d", false),
                ("e", false),
                ("f", false),
                ("g", true)
            ]
        );
        assert_eq!(top_level_fields(b"{}").unwrap(), []);
        for odd in [
            &b"[1, 2]"[..],
            b"\"text\"",
            br#"{"a": 1, "a": 2}"#,
            br#"{"\u0061": 1}"#,
            br#"{"a": 1} trailing"#,
            br#"{"a": {"b": 1}"#,
            br#"{"a": "unterminated}"#,
            br#"{"a" 1}"#,
            b"",
        ] {
            assert_eq!(
                top_level_fields(odd),
                None,
                "{}",
                String::from_utf8_lossy(odd)
            );
        }
    }
}
