//! Where agents may run: tolerations from `--tolerate` / `--no-tolerate-all`, the node selector
//! from `--node-selector`, and the DaemonSet controller's matching of tolerations to taints.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

/// The taint effects a toleration may name.
pub const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A `--tolerate` or `--node-selector` argument that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulingError {
    /// `--tolerate` text that is not `KEY[=VALUE][:EFFECT]`.
    #[error(
        "--tolerate {text:?}: {why}; write KEY[=VALUE][:EFFECT], EFFECT one of NoSchedule, PreferNoSchedule, NoExecute"
    )]
    Toleration {
        /// The argument.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// `--node-selector` text that is not `KEY=VALUE[,KEY=VALUE...]`.
    #[error("--node-selector {text:?}: {why}; write KEY=VALUE[,KEY=VALUE...]")]
    NodeSelector {
        /// The argument.
        text: String,
        /// What is wrong with it.
        why: String,
    },
}

/// Parses `KEY[=VALUE][:EFFECT]`: `Equal` with a value, `Exists` without; no effect tolerates
/// every effect.
pub fn parse_toleration(text: &str) -> Result<Toleration, SchedulingError> {
    let error = |why: String| SchedulingError::Toleration {
        text: text.to_owned(),
        why,
    };
    // The key may hold a '/', never a ':' or '='; the effect comes after the last ':'.
    let (rest, effect) = match text.rsplit_once(':') {
        Some((rest, effect)) => {
            if !EFFECTS.contains(&effect) {
                return Err(error(format!("unknown effect {effect:?}")));
            }
            (rest, Some(effect.to_owned()))
        }
        None => (text, None),
    };
    let (key, value) = match rest.split_once('=') {
        Some((key, value)) => (key, Some(value)),
        None => (rest, None),
    };
    check_qualified_name(key).map_err(|why| error(format!("key {key:?} {why}")))?;
    if let Some(value) = value {
        check_label_value(value).map_err(|why| error(format!("value {value:?} {why}")))?;
    }
    Ok(Toleration {
        key: Some(key.to_owned()),
        operator: Some(if value.is_some() { "Equal" } else { "Exists" }.to_owned()),
        value: value.map(str::to_owned),
        effect,
        toleration_seconds: None,
    })
}

/// The agents' tolerations: everything (`operator: Exists`, no key) unless `tolerate_all` is
/// false, then only `tolerate`.
pub fn tolerations(tolerate: &[Toleration], tolerate_all: bool) -> Vec<Toleration> {
    let mut all = Vec::new();
    if tolerate_all {
        all.push(Toleration {
            operator: Some("Exists".to_owned()),
            ..Toleration::default()
        });
    }
    all.extend(tolerate.iter().cloned());
    all
}

/// Parses `KEY=VALUE[,KEY=VALUE...]` into a node selector.
pub fn parse_node_selector(text: &str) -> Result<BTreeMap<String, String>, SchedulingError> {
    let error = |why: String| SchedulingError::NodeSelector {
        text: text.to_owned(),
        why,
    };
    let mut selector = BTreeMap::new();
    for pair in text.split(',') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| error(format!("{pair:?} has no '='")))?;
        check_qualified_name(key).map_err(|why| error(format!("key {key:?} {why}")))?;
        check_label_value(value).map_err(|why| error(format!("value {value:?} {why}")))?;
        if selector.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(error(format!("key {key:?} is given twice")));
        }
    }
    Ok(selector)
}

/// A label key: `[PREFIX/]NAME`, NAME at most 63 bytes of alphanumerics, `-`, `_`, `.`, starting
/// and ending alphanumeric; PREFIX a DNS subdomain.
fn check_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !ok {
            return Err("has an invalid prefix (a DNS subdomain before '/')".to_owned());
        }
    }
    if name.is_empty() {
        return Err("is empty".to_owned());
    }
    check_label_value(name)
}

/// A label value: at most 63 bytes of alphanumerics, `-`, `_`, `.`, starting and ending
/// alphanumeric (or empty).
fn check_label_value(value: &str) -> Result<(), String> {
    let ok = value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && value
            .bytes()
            .next()
            .is_none_or(|b| b.is_ascii_alphanumeric())
        && value
            .bytes()
            .last()
            .is_none_or(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err("is not a label value (63 letters, digits, '-', '_', '.' at most, alphanumeric at both ends)".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Taint;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    #[test]
    fn tolerate_flags_parse() {
        let t = parse_toleration("dedicated=gpu:NoSchedule").unwrap();
        assert_eq!(
            (
                t.key.as_deref(),
                t.operator.as_deref(),
                t.value.as_deref(),
                t.effect.as_deref()
            ),
            (
                Some("dedicated"),
                Some("Equal"),
                Some("gpu"),
                Some("NoSchedule")
            )
        );
        let t = parse_toleration("node-role.kubernetes.io/control-plane").unwrap();
        assert_eq!(
            (t.key.as_deref(), t.operator.as_deref(), t.value, t.effect),
            (
                Some("node-role.kubernetes.io/control-plane"),
                Some("Exists"),
                None,
                None
            )
        );
        let t = parse_toleration("example.com/x:NoExecute").unwrap();
        assert_eq!(
            (t.operator.as_deref(), t.effect.as_deref()),
            (Some("Exists"), Some("NoExecute"))
        );
        let t = parse_toleration("k=").unwrap();
        assert_eq!(
            (t.operator.as_deref(), t.value.as_deref()),
            (Some("Equal"), Some(""))
        );
    }

    #[test]
    fn bad_tolerate_flags_say_what_is_wrong() {
        for (bad, says) in [
            ("", "is empty"),
            ("k:Sometimes", "unknown effect \"Sometimes\""),
            ("k=v:", "unknown effect \"\""),
            ("=v", "is empty"),
            ("-k", "not a label value"),
            ("k=v w", "value \"v w\""),
            ("Bad_Prefix/k", "invalid prefix"),
            ("a/b/c", "not a label value"),
            (&"k".repeat(64), "not a label value"),
        ] {
            let message = parse_toleration(bad).unwrap_err().to_string();
            assert!(message.contains(says), "{bad:?}: {message}");
            assert!(message.contains("KEY[=VALUE][:EFFECT]"), "{message}");
        }
    }

    /// Whether any of `tolerations` tolerates `taint`, by the node watch's rule.
    fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
        tolerations
            .iter()
            .any(|t| crate::nodes::tolerates(t, taint))
    }

    #[test]
    fn tolerations_default_to_everything() {
        let gpu = parse_toleration("gpu:NoSchedule").unwrap();
        let all = tolerations(std::slice::from_ref(&gpu), true);
        assert_eq!(all.len(), 2);
        assert!(tolerated(&all, &taint("anything", Some("x"), "NoExecute")));
        let narrow = tolerations(&[gpu], false);
        assert!(tolerated(&narrow, &taint("gpu", Some("x"), "NoSchedule")));
        assert!(!tolerated(&narrow, &taint("gpu", None, "NoExecute")));
        assert!(!tolerated(&narrow, &taint("other", None, "NoSchedule")));
        let equal = [parse_toleration("k=v").unwrap()];
        assert!(tolerated(&equal, &taint("k", Some("v"), "NoExecute")));
        assert!(!tolerated(&equal, &taint("k", Some("w"), "NoExecute")));
    }

    #[test]
    fn node_selectors_parse() {
        let s = parse_node_selector("kubernetes.io/os=linux,tier=").unwrap();
        assert_eq!(s["kubernetes.io/os"], "linux");
        assert_eq!(s["tier"], "");
        for bad in ["", "a", "a=b,a=c", "a=b c"] {
            assert!(parse_node_selector(bad).is_err(), "{bad:?}");
        }
    }
}
