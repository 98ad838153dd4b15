//! How `diff` names the facts of a document, so that a list's items are matched by what they
//! are rather than where they sit: the items of a list with declared keys by those keys
//! (`ansible_mounts[mount="/boot"].size_total`), a list of scalars as one set (its elements
//! sorted, so order does not matter), and any other list by position (`flags[3]`).
//!
//! Key values are written as JSON, so two different items never get the same name; an item
//! whose keys repeat an earlier item's gets `#2`, `#3` after them, and an item lacking a key
//! falls back to its position.

use std::collections::HashMap;

use factbuoy_protocol::artifacts::ListKeys;
use serde_json::Value;

use crate::facts::field_segment;

/// Every fact of `facts` with its diff name, the lists named in `lists` matched by key.
pub(crate) fn keyed_leaves(facts: &Value, lists: &[ListKeys]) -> Vec<(String, Value)> {
    let lists: Vec<(Vec<&str>, &[String])> = lists
        .iter()
        .map(|list| (list.path.split('.').collect(), list.keys.as_slice()))
        .collect();
    let mut found = Vec::new();
    let mut fields = Vec::new();
    walk(String::new(), &mut fields, facts, &lists, &mut found);
    found
}

fn walk<'v>(
    path: String,
    fields: &mut Vec<&'v str>,
    value: &'v Value,
    lists: &[(Vec<&str>, &[String])],
    found: &mut Vec<(String, Value)>,
) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                fields.push(key);
                walk(field_segment(&path, key), fields, value, lists, found);
                fields.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if let Some(keys) = keys_of(fields, lists) {
                let mut seen: HashMap<String, usize> = HashMap::new();
                for (i, item) in items.iter().enumerate() {
                    let segment = match item_name(item, keys) {
                        Some(name) => {
                            let count = seen.entry(name.clone()).or_default();
                            *count += 1;
                            match *count {
                                1 => format!("[{name}]"),
                                n => format!("[{name},#{n}]"),
                            }
                        }
                        None => format!("[{i}]"),
                    };
                    walk(format!("{path}{segment}"), fields, item, lists, found);
                }
            } else if items
                .iter()
                .all(|item| !item.is_object() && !item.is_array())
            {
                let mut set = items.clone();
                set.sort_by_cached_key(Value::to_string);
                found.push((path, Value::Array(set)));
            } else {
                for (i, item) in items.iter().enumerate() {
                    walk(format!("{path}[{i}]"), fields, item, lists, found);
                }
            }
        }
        leaf => found.push((path, leaf.clone())),
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

/// `mount="/boot"` or `family="inet",destination="0.0.0.0"`: the item's keys and their values
/// as JSON, every field of it when no key is declared (a table whose whole row is its
/// identity); `None` when the item is not an object holding every key.
fn item_name(item: &Value, keys: &[String]) -> Option<String> {
    let object = item.as_object()?;
    let parts: Option<Vec<String>> = if keys.is_empty() {
        Some(
            object
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect(),
        )
    } else {
        keys.iter()
            .map(|key| object.get(key).map(|value| format!("{key}={value}")))
            .collect()
    };
    Some(parts?.join(","))
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
        keyed_leaves(facts, lists)
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
                r#"eth0.ipv6[address="fe80::1",#2].address"#,
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
