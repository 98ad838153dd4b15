//! Parameters: the user's `name=value` text checked against the plugin's `describe` and turned
//! into typed values before the plugin runs. All problems are reported at once.

use std::collections::BTreeMap;
use std::fmt;

use crate::bindings::{ParamSpec, ParamType, ParamValue};

/// Every problem found with one set of parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParamErrors(pub Vec<String>);

impl fmt::Display for ParamErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

/// Splits `name=value`.
pub fn parse_assignment(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.trim().to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

/// A parameter type's name in the contract (`string-list`), for messages and listings.
pub fn type_name(ty: ParamType) -> &'static str {
    match ty {
        ParamType::String => "string",
        ParamType::Integer => "integer",
        ParamType::Float => "float",
        ParamType::Boolean => "boolean",
        ParamType::Duration => "duration",
        ParamType::StringList => "string-list",
    }
}

/// Parses one value written as a user writes it (`60m`, `a,b`, `true`).
pub fn parse_value(ty: ParamType, text: &str) -> Result<ParamValue, String> {
    let text_trimmed = text.trim();
    match ty {
        ParamType::String => Ok(ParamValue::String(text.to_owned())),
        ParamType::Integer => text_trimmed
            .parse()
            .map(ParamValue::Integer)
            .map_err(|_| format!("expects an integer, got {text:?}")),
        ParamType::Float => text_trimmed
            .parse()
            .map(ParamValue::Float)
            .map_err(|_| format!("expects a number, got {text:?}")),
        ParamType::Boolean => match text_trimmed {
            "true" => Ok(ParamValue::Boolean(true)),
            "false" => Ok(ParamValue::Boolean(false)),
            _ => Err(format!("expects true or false, got {text:?}")),
        },
        ParamType::Duration => humantime::parse_duration(text_trimmed)
            .map(|d| ParamValue::Duration(d.as_millis().min(u64::MAX as u128) as u64))
            .map_err(|e| {
                format!("expects a duration such as 90s, 60m or 1h 30m, got {text:?} ({e})")
            }),
        ParamType::StringList => Ok(ParamValue::StringList(split_list(text))),
    }
}

fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Resolves the user's parameters against `specs`: unknown names, missing required ones, values
/// of the wrong type and repeated single values are errors; defaults fill the rest. A secret
/// parameter's value is never quoted in an error.
pub fn resolve(
    specs: &[ParamSpec],
    given: &[(String, String)],
) -> Result<Vec<(String, ParamValue)>, ParamErrors> {
    let mut errors = Vec::new();
    let mut texts: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, value) in given {
        if specs.iter().any(|s| &s.name == name) {
            texts.entry(name).or_default().push(value);
        } else {
            let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            errors.push(format!(
                "unknown parameter `{name}` (this plugin takes: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    let mut resolved = Vec::new();
    for spec in specs {
        let value = match texts.get(spec.name.as_str()) {
            Some(values) if spec.type_ == ParamType::StringList => Ok(ParamValue::StringList(
                values.iter().flat_map(|v| split_list(v)).collect(),
            )),
            Some(values) if values.len() > 1 => {
                errors.push(format!(
                    "parameter `{}` is given {} times; give it once",
                    spec.name,
                    values.len()
                ));
                continue;
            }
            Some(values) => parse_value(spec.type_, values[0]),
            None => match &spec.default {
                Some(default) => parse_value(spec.type_, default),
                None if spec.required => {
                    errors.push(format!(
                        "missing required parameter `{}` ({}): {}",
                        spec.name,
                        type_name(spec.type_),
                        spec.description
                    ));
                    continue;
                }
                None => continue,
            },
        };
        match value {
            Ok(value) => resolved.push((spec.name.clone(), value)),
            // The message would quote the value, which must never be written down.
            Err(_) if spec.secret => errors.push(format!(
                "parameter `{}` expects a value of type {} (its value is secret, so it is not shown)",
                spec.name,
                type_name(spec.type_)
            )),
            Err(e) => errors.push(format!("parameter `{}` {e}", spec.name)),
        }
    }
    if errors.is_empty() {
        Ok(resolved)
    } else {
        Err(ParamErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_value_is_never_quoted_in_an_error() {
        let spec = ParamSpec {
            name: "pin".into(),
            description: String::new(),
            type_: ParamType::Integer,
            required: true,
            default: None,
            secret: true,
        };
        let error = resolve(&[spec], &[("pin".into(), "hunter2".into())]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "parameter `pin` expects a value of type integer (its value is secret, so it is not shown)"
        );
    }

    fn spec(name: &str, ty: ParamType, required: bool, default: Option<&str>) -> ParamSpec {
        ParamSpec {
            name: name.into(),
            description: format!("the {name}"),
            type_: ty,
            required,
            default: default.map(Into::into),
            secret: false,
        }
    }

    fn specs() -> Vec<ParamSpec> {
        vec![
            spec("since", ParamType::Duration, false, Some("60m")),
            spec("units", ParamType::StringList, false, None),
            spec("max", ParamType::Integer, false, None),
            spec("node", ParamType::String, true, None),
            spec("verbose", ParamType::Boolean, false, Some("false")),
        ]
    }

    fn given(pairs: &[&str]) -> Vec<(String, String)> {
        pairs.iter().map(|p| parse_assignment(p).unwrap()).collect()
    }

    #[test]
    fn resolves_types_defaults_and_lists() {
        let resolved = resolve(
            &specs(),
            &given(&["node=web-1", "units=a,b", "units=c", "max=5"]),
        )
        .unwrap();
        assert_eq!(
            resolved,
            vec![
                ("since".into(), ParamValue::Duration(3_600_000)),
                (
                    "units".into(),
                    ParamValue::StringList(vec!["a".into(), "b".into(), "c".into()])
                ),
                ("max".into(), ParamValue::Integer(5)),
                ("node".into(), ParamValue::String("web-1".into())),
                ("verbose".into(), ParamValue::Boolean(false)),
            ]
        );
    }

    #[test]
    fn reports_every_problem_at_once() {
        let errors = resolve(
            &specs(),
            &given(&["max=lots", "colour=red", "since=soon", "verbose=yes"]),
        )
        .unwrap_err()
        .0;
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(
            errors[0].contains("unknown parameter `colour`") && errors[0].contains("since, units")
        );
        let all = errors.join("\n");
        assert!(
            all.contains("parameter `since` expects a duration"),
            "{all}"
        );
        assert!(
            all.contains("parameter `max` expects an integer, got \"lots\""),
            "{all}"
        );
        assert!(
            all.contains("missing required parameter `node` (string): the node"),
            "{all}"
        );
        assert!(
            all.contains("parameter `verbose` expects true or false"),
            "{all}"
        );
    }

    #[test]
    fn a_single_value_given_twice_is_an_error() {
        let errors = resolve(&specs(), &given(&["node=a", "node=b"])).unwrap_err();
        assert_eq!(
            errors.0,
            ["parameter `node` is given 2 times; give it once"]
        );
        assert!(parse_assignment("novalue").is_err());
        assert_eq!(
            parse_assignment("a=b=c").unwrap(),
            ("a".into(), "b=c".into())
        );
    }
}
