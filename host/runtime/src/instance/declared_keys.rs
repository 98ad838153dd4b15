//! Whether an artifact has the keys its plugin declared: a table's row keys in every row, a facts
//! document's list keys in every item of the lists they name. `inspect diff` matches rows and
//! items by those keys, so a key the data lacks (a JavaScript plugin declaring `mountPoint` for
//! rows that say `mount`) silently makes every row unmatched; this says so at the run instead.
//! The check reads the bytes as they stream to the sink, with bounded memory: a row is kept
//! until its line ends (up to [`MAX_ROW_BYTES`]), a facts document whole but only within the
//! run's shared [`FACTS_BUDGET_BYTES`]; past either, that row or document goes unchecked.

use serde_json::Value;

use crate::bindings::{ArtifactKind, ArtifactSpec, ListKeys};

/// The longest row checked; `inspect sql` refuses longer rows anyway.
pub(crate) const MAX_ROW_BYTES: usize = 1 << 20;
/// The bytes of facts documents one run may hold at once for the check.
pub(crate) const FACTS_BUDGET_BYTES: usize = 16 << 20;

/// The check of one artifact being written.
pub(crate) struct KeyCheck {
    artifact: String,
    kind: Kind,
}

enum Kind {
    Rows {
        keys: Vec<String>,
        line: Vec<u8>,
        /// The current line passed [`MAX_ROW_BYTES`]: skipped to its end.
        too_long: bool,
        rows: u64,
        /// Per key: rows without it, and the first such row (1-based).
        missing: Vec<(u64, u64)>,
    },
    Facts {
        lists: Vec<ListKeys>,
        /// The document so far; `None` once it outgrew the budget.
        document: Option<Vec<u8>>,
    },
}

impl KeyCheck {
    /// The check of the artifact `spec` declares, when it declares keys.
    pub(crate) fn of(spec: &ArtifactSpec) -> Option<KeyCheck> {
        let kind = match &spec.kind {
            ArtifactKind::Table(keys) if !keys.is_empty() => Kind::Rows {
                missing: vec![(0, 0); keys.len()],
                keys: keys.clone(),
                line: Vec::new(),
                too_long: false,
                rows: 0,
            },
            ArtifactKind::Facts(lists) if !lists.is_empty() => Kind::Facts {
                lists: lists.clone(),
                document: Some(Vec::new()),
            },
            _ => return None,
        };
        Some(KeyCheck {
            artifact: spec.name.clone(),
            kind,
        })
    }

    /// Reads the next bytes written; `budget` is what the run's facts documents may still take.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], budget: &mut usize) {
        match &mut self.kind {
            Kind::Rows {
                keys,
                line,
                too_long,
                rows,
                missing,
            } => {
                while !bytes.is_empty() {
                    let end = bytes.iter().position(|b| *b == b'\n');
                    let (part, rest) = match end {
                        Some(at) => (&bytes[..at], &bytes[at + 1..]),
                        None => (bytes, &[][..]),
                    };
                    if !*too_long && line.len() + part.len() <= MAX_ROW_BYTES {
                        line.extend_from_slice(part);
                    } else {
                        *too_long = true;
                        line.clear();
                    }
                    if end.is_some() {
                        if !*too_long {
                            check_row(line, keys, rows, missing);
                        }
                        line.clear();
                        *too_long = false;
                    }
                    bytes = rest;
                }
            }
            Kind::Facts { document, .. } => {
                let fits = bytes.len() <= *budget;
                match document {
                    Some(held) if fits => {
                        held.extend_from_slice(bytes);
                        *budget -= bytes.len();
                    }
                    Some(held) => {
                        *budget += held.len();
                        *document = None;
                    }
                    None => {}
                }
            }
        }
    }

    /// The warnings of the artifact, once it is finished; the budget gets its bytes back.
    pub(crate) fn finish(self, budget: &mut usize) -> Vec<String> {
        let artifact = self.artifact;
        match self.kind {
            Kind::Rows {
                keys,
                line,
                too_long,
                mut rows,
                mut missing,
            } => {
                // A last row without its newline.
                if !too_long && !line.iter().all(u8::is_ascii_whitespace) {
                    check_row(&line, &keys, &mut rows, &mut missing);
                }
                keys.iter()
                    .zip(missing)
                    .filter(|(_, (count, _))| *count > 0)
                    .map(|(key, (count, first))| {
                        format!(
                            "{artifact}: {count} of {rows} rows lack the declared row key \
                             {key:?} (the first: row {first}); inspect diff matches rows by \
                             their keys"
                        )
                    })
                    .collect()
            }
            Kind::Facts { lists, document } => {
                let Some(document) = document else {
                    return Vec::new();
                };
                *budget += document.len();
                let Ok(facts) = serde_json::from_slice::<Value>(&document) else {
                    return Vec::new();
                };
                lists
                    .iter()
                    .flat_map(|list| list_warnings(&artifact, &facts, list))
                    .collect()
            }
        }
    }
}

/// Counts the row `line` and the declared `keys` it lacks. A line that is not a JSON object is
/// not a row to check (blank, or refused by `inspect` for what it is).
fn check_row(line: &[u8], keys: &[String], rows: &mut u64, missing: &mut [(u64, u64)]) {
    // Only the field names are kept: a row's values are never built.
    type Fields<'a> = std::collections::HashMap<std::borrow::Cow<'a, str>, serde::de::IgnoredAny>;
    let Ok(row) = serde_json::from_slice::<Fields<'_>>(line) else {
        return;
    };
    *rows += 1;
    for (key, (count, first)) in keys.iter().zip(missing) {
        if !row.contains_key(key.as_str()) {
            if *count == 0 {
                *first = *rows;
            }
            *count += 1;
        }
    }
}

/// The warnings for one declared list of `facts`: per key, the items of the lists at its path
/// that lack it.
fn list_warnings(artifact: &str, facts: &Value, list: &ListKeys) -> Vec<String> {
    let segments: Vec<&str> = list.path.split('.').collect();
    let mut found = Vec::new();
    lists_at(facts, &segments, String::new(), &mut found);
    // Only objects have keys: a list of scalars there is a set, which diff compares as one.
    let items: usize = found
        .iter()
        .map(|(_, items)| items.iter().filter(|i| i.is_object()).count())
        .sum();
    list.keys
        .iter()
        .filter_map(|key| {
            let mut lacking = found.iter().flat_map(|(at, items)| {
                items
                    .iter()
                    .enumerate()
                    .filter(|(_, item)| item.as_object().is_some_and(|o| !o.contains_key(key)))
                    .map(move |(i, _)| format!("{at}[{i}]"))
            });
            let first = lacking.next()?;
            let count = 1 + lacking.count();
            Some(format!(
                "{artifact}: {count} of {items} items of the list {:?} lack the declared key \
                 {key:?} (the first: {first}); inspect diff matches them by their keys",
                list.path
            ))
        })
        .collect()
}

/// Every list at `segments` below `value` (reached through `at`), as the contract reads a list
/// path: fields joined by `.`, `*` for any field, and a list on the way standing for each of its
/// items.
fn lists_at<'a>(
    value: &'a Value,
    segments: &[&str],
    at: String,
    found: &mut Vec<(String, &'a [Value])>,
) {
    match (value, segments) {
        (Value::Array(items), []) => found.push((at, items)),
        (Value::Array(items), _) => {
            for (i, item) in items.iter().enumerate() {
                lists_at(item, segments, format!("{at}[{i}]"), found);
            }
        }
        (Value::Object(fields), [first, rest @ ..]) => {
            let join = |name: &str| {
                if at.is_empty() {
                    name.to_owned()
                } else {
                    format!("{at}.{name}")
                }
            };
            if *first == "*" {
                for (name, field) in fields {
                    lists_at(field, rest, join(name), found);
                }
            } else if let Some(field) = fields.get(*first) {
                lists_at(field, rest, join(first), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(keys: &[&str]) -> ArtifactSpec {
        ArtifactSpec {
            name: "mounts.jsonl".into(),
            media_type: "application/jsonl".into(),
            description: String::new(),
            kind: ArtifactKind::Table(keys.iter().map(|k| (*k).to_owned()).collect()),
        }
    }

    fn facts(path: &str, keys: &[&str]) -> ArtifactSpec {
        ArtifactSpec {
            name: "facts.json".into(),
            media_type: "application/json".into(),
            description: String::new(),
            kind: ArtifactKind::Facts(vec![ListKeys {
                path: path.into(),
                keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            }]),
        }
    }

    /// Feeds `bytes` a few at a time, as a plugin writes in chunks.
    fn warnings(spec: &ArtifactSpec, bytes: &[u8]) -> Vec<String> {
        let mut budget = FACTS_BUDGET_BYTES;
        let mut check = KeyCheck::of(spec).unwrap();
        for chunk in bytes.chunks(7) {
            check.feed(chunk, &mut budget);
        }
        let said = check.finish(&mut budget);
        assert_eq!(budget, FACTS_BUDGET_BYTES, "the budget gets its bytes back");
        said
    }

    #[test]
    fn rows_without_a_declared_key_are_counted_with_the_first() {
        let rows = b"{\"mount\": \"/\"}\n{\"mountPoint\": \"/boot\"}\n{\"mount\": \"/data\"}";
        assert_eq!(
            warnings(&table(&["mountPoint"]), rows),
            [
                "mounts.jsonl: 2 of 3 rows lack the declared row key \"mountPoint\" (the first: \
              row 1); inspect diff matches rows by their keys"
            ]
        );
        assert!(warnings(&table(&["mount"]), b"{\"mount\": 1}\n\n{\"mount\": 2}\n").is_empty());
    }

    #[test]
    fn a_row_longer_than_the_bound_is_not_held() {
        let mut rows = b"{\"x\": \"".to_vec();
        rows.extend(std::iter::repeat_n(b'a', MAX_ROW_BYTES));
        rows.extend(b"\"}\n{\"mount\": \"/\"}\n");
        let mut check = KeyCheck::of(&table(&["mount"])).unwrap();
        let mut budget = FACTS_BUDGET_BYTES;
        check.feed(&rows, &mut budget);
        let Kind::Rows { line, .. } = &check.kind else {
            unreachable!()
        };
        assert!(line.is_empty());
        assert!(check.finish(&mut budget).is_empty());
    }

    #[test]
    fn items_of_a_declared_list_without_its_key_are_counted_through_lists_and_stars() {
        let document = br#"{"mounts": [{"mount": "/"}, {"mountPoint": "/boot"}],
            "interfaces": [{"name": "lo", "addresses": [{"ip": "::1"}, {"family": 4}]}],
            "eth0": {"ipv6": [{"address": "fe80::1"}]}, "lo": {"ipv6": [{"scope": "host"}]},
            "reachable": {"ipv6": ["::1", "fe80::1"]}}"#;
        assert_eq!(
            warnings(&facts("mounts", &["mount"]), document),
            [
                "facts.json: 1 of 2 items of the list \"mounts\" lack the declared key \"mount\" \
              (the first: mounts[1]); inspect diff matches them by their keys"
            ]
        );
        assert_eq!(
            warnings(&facts("interfaces.addresses", &["ip"]), document),
            [
                "facts.json: 1 of 2 items of the list \"interfaces.addresses\" lack the declared \
              key \"ip\" (the first: interfaces[0].addresses[1]); inspect diff matches them by \
              their keys"
            ]
        );
        assert_eq!(
            warnings(&facts("*.ipv6", &["address"]), document),
            [
                "facts.json: 1 of 2 items of the list \"*.ipv6\" lack the declared key \"address\" \
              (the first: lo.ipv6[0]); inspect diff matches them by their keys"
            ]
        );
        assert!(warnings(&facts("absent", &["x"]), document).is_empty());
    }

    #[test]
    fn a_document_over_the_budget_is_let_go_unchecked() {
        let mut check = KeyCheck::of(&facts("mounts", &["mount"])).unwrap();
        let mut budget = 10;
        check.feed(b"{\"mounts\": [{}]}", &mut budget);
        assert_eq!(budget, 10);
        assert!(check.finish(&mut budget).is_empty());
        assert_eq!(budget, 10);
    }
}
