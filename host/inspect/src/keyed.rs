//! How `diff` names the facts of a document, so that a list's items are matched by what they
//! are rather than where they sit: the items of a list with declared keys by those keys
//! (`ansible_mounts[mount="/boot"].size_total`), a list of scalars as one set (its elements
//! sorted, so order does not matter), and any other list by position (`flags[3]`).
//!
//! Key values are written as JSON, so two different items never get the same name; an item
//! whose keys repeat an earlier item's gets `#2,`, `#3,` before them, and an item lacking a key
//! falls back to its position.

use std::collections::HashMap;

use factbuoy_protocol::artifacts::ListKeys;
use serde_json::Value;

use std::fmt::Write as _;

use crate::facts::push_field;

/// Calls `leaf(name, value)` for every fact of `facts` with its diff name, the lists named in
/// `lists` matched by key. One name is built in place at a time, so a document of a million
/// facts costs no allocation per fact.
pub(crate) fn each_keyed_leaf(
    facts: &Value,
    lists: &[ListKeys],
    mut leaf: impl FnMut(&str, &Value),
) {
    let lists: Vec<(Vec<&str>, &[String])> = lists
        .iter()
        .map(|list| (list.path.split('.').collect(), list.keys.as_slice()))
        .collect();
    let mut path = String::new();
    let mut fields = Vec::new();
    walk(&mut path, &mut fields, facts, &lists, &mut leaf);
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
                let mut seen: HashMap<String, usize> = HashMap::new();
                for (i, item) in items.iter().enumerate() {
                    let named = item
                        .as_object()
                        .is_some_and(|object| keys.iter().all(|key| object.contains_key(key)));
                    if named {
                        path.push('[');
                        let start = path.len();
                        write_item_name(path, item, keys);
                        let count = match seen.get_mut(&path[start..]) {
                            Some(count) => {
                                *count += 1;
                                *count
                            }
                            None => {
                                seen.insert(path[start..].to_owned(), 1);
                                1
                            }
                        };
                        if count > 1 {
                            path.insert_str(start, &format!("#{count},"));
                        }
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
            found.push((name.to_owned(), value.clone()))
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
}
