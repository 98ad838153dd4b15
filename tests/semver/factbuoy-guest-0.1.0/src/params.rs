//! Typed access to the parameters `gather` receives.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::{GatherError, ParamValue};

/// The parameters of one `gather` call. The host has already checked them against `describe`, so
/// a type mismatch here means the plugin asked for a parameter under the wrong type: the accessors
/// report that as [`GatherError::InvalidParameters`] naming the parameter.
#[derive(Debug, Clone, Default)]
pub struct Params {
    values: BTreeMap<String, ParamValue>,
}

impl Params {
    #[doc(hidden)]
    pub fn from_wit(values: Vec<(String, ParamValue)>) -> Self {
        Params {
            values: values.into_iter().collect(),
        }
    }

    /// The raw value, if the parameter has one.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.values.get(name)
    }

    /// Whether the parameter has a value (given or defaulted).
    pub fn contains(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// A text parameter that has a value (required, or with a default).
    pub fn string(&self, name: &str) -> Result<&str, GatherError> {
        self.required(name, Self::opt_string)
    }
    /// A text parameter that may be absent.
    pub fn opt_string(&self, name: &str) -> Result<Option<&str>, GatherError> {
        self.typed(name, "string", |v| match v {
            ParamValue::String(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// An integer parameter that has a value.
    pub fn integer(&self, name: &str) -> Result<i64, GatherError> {
        self.required(name, Self::opt_integer)
    }
    /// An integer parameter that may be absent.
    pub fn opt_integer(&self, name: &str) -> Result<Option<i64>, GatherError> {
        self.typed(name, "integer", |v| match v {
            ParamValue::Integer(i) => Some(*i),
            _ => None,
        })
    }

    /// A float parameter that has a value.
    pub fn float(&self, name: &str) -> Result<f64, GatherError> {
        self.required(name, Self::opt_float)
    }
    /// A float parameter that may be absent.
    pub fn opt_float(&self, name: &str) -> Result<Option<f64>, GatherError> {
        self.typed(name, "float", |v| match v {
            ParamValue::Float(f) => Some(*f),
            _ => None,
        })
    }

    /// A boolean parameter that has a value.
    pub fn boolean(&self, name: &str) -> Result<bool, GatherError> {
        self.required(name, Self::opt_boolean)
    }
    /// A boolean parameter that may be absent.
    pub fn opt_boolean(&self, name: &str) -> Result<Option<bool>, GatherError> {
        self.typed(name, "boolean", |v| match v {
            ParamValue::Boolean(b) => Some(*b),
            _ => None,
        })
    }

    /// A duration parameter that has a value.
    pub fn duration(&self, name: &str) -> Result<Duration, GatherError> {
        self.required(name, Self::opt_duration)
    }
    /// A duration parameter that may be absent.
    pub fn opt_duration(&self, name: &str) -> Result<Option<Duration>, GatherError> {
        self.typed(name, "duration", |v| match v {
            ParamValue::Duration(ms) => Some(Duration::from_millis(*ms)),
            _ => None,
        })
    }

    /// A list parameter; empty when absent.
    pub fn string_list(&self, name: &str) -> Result<&[String], GatherError> {
        Ok(self
            .typed(name, "string-list", |v| match v {
                ParamValue::StringList(l) => Some(l.as_slice()),
                _ => None,
            })?
            .unwrap_or(&[]))
    }

    fn typed<'a, T>(
        &'a self,
        name: &str,
        type_name: &str,
        pick: impl FnOnce(&'a ParamValue) -> Option<T>,
    ) -> Result<Option<T>, GatherError> {
        match self.values.get(name) {
            None => Ok(None),
            Some(value) => pick(value).map(Some).ok_or_else(|| {
                GatherError::InvalidParameters(format!(
                    "parameter `{name}` is not of type {type_name}; the plugin's describe and gather disagree"
                ))
            }),
        }
    }

    fn required<'a, T>(
        &'a self,
        name: &str,
        get: impl FnOnce(&'a Self, &str) -> Result<Option<T>, GatherError>,
    ) -> Result<T, GatherError> {
        get(self, name)?.ok_or_else(|| {
            GatherError::InvalidParameters(format!(
                "parameter `{name}` has no value; declare it required or give it a default"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params::from_wit(vec![
            ("name".into(), ParamValue::String("web-1".into())),
            ("count".into(), ParamValue::Integer(3)),
            ("since".into(), ParamValue::Duration(90_000)),
            (
                "units".into(),
                ParamValue::StringList(vec!["a".into(), "b".into()]),
            ),
        ])
    }

    #[test]
    fn typed_access_returns_values() {
        let p = params();
        assert_eq!(p.string("name").unwrap(), "web-1");
        assert_eq!(p.integer("count").unwrap(), 3);
        assert_eq!(p.duration("since").unwrap(), Duration::from_secs(90));
        assert_eq!(p.string_list("units").unwrap(), ["a", "b"]);
        assert_eq!(p.string_list("absent").unwrap(), [] as [String; 0]);
        assert_eq!(p.opt_boolean("absent").unwrap(), None);
    }

    #[test]
    fn wrong_type_and_missing_value_name_the_parameter() {
        let p = params();
        match p.integer("name") {
            Err(GatherError::InvalidParameters(m)) => {
                assert!(m.contains("`name` is not of type integer"))
            }
            other => panic!("unexpected {other:?}"),
        }
        match p.boolean("verbose") {
            Err(GatherError::InvalidParameters(m)) => assert!(m.contains("`verbose` has no value")),
            other => panic!("unexpected {other:?}"),
        }
    }
}
