//! The plugin's parameters: declared for `describe`, read and checked for `gather`.

use factbuoy_guest::prelude::*;

use crate::filter::{self, Filter};
use crate::journal::Id128;
use crate::output::Format;
use factbuoy_linux::timespec;

/// Which boot's entries to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Boot {
    All,
    /// The running boot, read from the host's `/proc`.
    Current,
    Id(Id128),
}

/// Everything `gather` was asked for, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Microseconds since the epoch; `None` reads from the start.
    pub since: Option<u64>,
    pub until: Option<u64>,
    pub units: Vec<String>,
    pub priorities: Option<(u8, u8)>,
    pub boot: Boot,
    pub max_entries: Option<u64>,
    pub format: Format,
}

/// The parameters, as `describe` declares them.
pub fn declare(description: Description) -> Description {
    description
        .param(Param::string("since").default("60m").describe(
            "Oldest entries to include, as journalctl --since: a duration meaning that long ago \
             (60m, 1h 30m, 2days), a UTC date and time (2024-03-01 12:00:00), @SECONDS since \
             the epoch, now, today, yesterday; or `all` for the whole journal.",
        ))
        .param(Param::string("until").describe(
            "Stop at the first entry after this point, as journalctl --until; written as since.",
        ))
        .param(Param::string_list("units").describe(
            "Only entries about these units, as journalctl -u: a name (sshd means sshd.service) \
             or a pattern (user-*). Several are combined with or.",
        ))
        .param(Param::string("priority").describe(
            "Only entries of this priority or more severe, as journalctl -p: 0-7 or emerg, alert, \
             crit, err, warning, notice, info, debug; or a range such as warning..info.",
        ))
        .param(Param::string("boot").default("all").describe(
            "Only entries of one boot: `all`, `current` (the running boot, as the host's \
             /proc/sys/kernel/random/boot_id says), or a 32-digit boot id as journalctl \
             --list-boots shows.",
        ))
        .param(
            Param::integer("max_entries")
                .describe("Stop after this many entries, oldest first. No limit by default."),
        )
        .param(Param::string("output").default("json").describe(
            "`json`: one JSON object per line, as journalctl -o json writes them; `export`: the \
             journal export format, as journalctl -o export.",
        ))
        .param(Param::boolean("all").default("false").describe(
            "With output=json, write fields of 4096 bytes or more in full instead of null, as \
             journalctl --all.",
        ))
}

impl Settings {
    /// Reads and checks the parameters; `now` is the current time in microseconds.
    pub fn read(params: &Params, now: u64) -> Result<Settings, GatherError> {
        let invalid = |e: String| GatherError::InvalidParameters(e);
        let point = |name: &str| -> Result<Option<u64>, GatherError> {
            match params.opt_string(name)? {
                None => Ok(None),
                Some(text) if name == "since" && text.trim() == "all" => Ok(None),
                Some(text) => timespec::parse(text, now)
                    .map(Some)
                    .map_err(|e| invalid(format!("{name}: {e}"))),
            }
        };
        let since = point("since")?;
        let until = point("until")?;
        if let (Some(since), Some(until)) = (since, until)
            && since > until
        {
            return Err(invalid(format!(
                "since ({}) is later than until ({}): nothing could match",
                params.string("since")?,
                params.string("until")?
            )));
        }
        let priorities = params
            .opt_string("priority")?
            .map(filter::parse_priority)
            .transpose()
            .map_err(|e| invalid(format!("priority: {e}")))?;
        let boot = match params.string("boot")?.trim() {
            "all" => Boot::All,
            "current" => Boot::Current,
            id => Boot::Id(Id128::parse(id).ok_or_else(|| {
                invalid(format!(
                    "boot: {id:?} is not `all`, `current` or a 32-digit boot id"
                ))
            })?),
        };
        let max_entries = match params.opt_integer("max_entries")? {
            None => None,
            Some(n) if n > 0 => Some(n as u64),
            Some(n) => {
                return Err(invalid(format!(
                    "max_entries: {n} is not a positive number; leave it out for no limit"
                )));
            }
        };
        let all = params.boolean("all")?;
        let format = match params.string("output")?.trim() {
            "json" => Format::Json { all },
            "export" => Format::Export,
            other => {
                return Err(invalid(format!(
                    "output: {other:?} is not `json` or `export`"
                )));
            }
        };
        let units = params.string_list("units")?.to_vec();
        // Checks the unit names now, so a bad pattern fails before any reading.
        Filter::new(&units, priorities, None).map_err(|e| invalid(format!("units: {e}")))?;
        Ok(Settings {
            since,
            until,
            units,
            priorities,
            boot,
            max_entries,
            format,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use factbuoy_guest::ParamValue;

    const NOW: u64 = 1_700_000_000_000_000;

    fn read(extra: &[(&str, ParamValue)]) -> Result<Settings, GatherError> {
        let mut values = vec![
            ("since".to_owned(), ParamValue::String("60m".into())),
            ("boot".to_owned(), ParamValue::String("all".into())),
            ("output".to_owned(), ParamValue::String("json".into())),
            ("all".to_owned(), ParamValue::Boolean(false)),
        ];
        for (name, value) in extra {
            values.retain(|(n, _)| n != name);
            values.push((name.to_string(), value.clone()));
        }
        Settings::read(&Params::from_wit(values), NOW)
    }

    fn text(value: &str) -> ParamValue {
        ParamValue::String(value.into())
    }

    #[test]
    fn defaults_read_the_last_hour_as_json() {
        let settings = read(&[]).unwrap();
        assert_eq!(settings.since, Some(NOW - 3_600_000_000));
        assert_eq!(settings.until, None);
        assert_eq!(settings.boot, Boot::All);
        assert_eq!(settings.format, Format::Json { all: false });
        assert_eq!(read(&[("since", text("all"))]).unwrap().since, None);
    }

    #[test]
    fn every_parameter_is_checked() {
        let message = |extra: &[(&str, ParamValue)]| match read(extra) {
            Err(GatherError::InvalidParameters(m)) => m,
            other => panic!("accepted {extra:?}: {other:?}"),
        };
        assert!(message(&[("since", text("soon"))]).starts_with("since:"));
        assert!(message(&[("until", text("2020-01-01"))]).contains("later than until"));
        assert!(message(&[("priority", text("loud"))]).starts_with("priority:"));
        assert!(message(&[("boot", text("last"))]).starts_with("boot:"));
        assert!(message(&[("max_entries", ParamValue::Integer(0))]).starts_with("max_entries:"));
        assert!(message(&[("output", text("xml"))]).starts_with("output:"));
        assert!(
            message(&[("units", ParamValue::StringList(vec!["a[".into()]))]).starts_with("units:")
        );
    }

    #[test]
    fn reads_a_boot_id_and_the_export_format() {
        let settings = read(&[
            ("boot", text("a1a1a1a1a1a14a1a8a1a1a1a1a1a1a02")),
            ("output", text("export")),
            ("priority", text("err")),
        ])
        .unwrap();
        assert!(matches!(settings.boot, Boot::Id(_)));
        assert_eq!(settings.format, Format::Export);
        assert_eq!(settings.priorities, Some((0, 3)));
    }
}
