//! Which entries to keep: journalctl's `-u UNIT`, `-p PRIORITY` and `-b BOOT` matches.
//!
//! journalctl turns these options into matches on whole `FIELD=value` data objects:
//!
//! - `-u UNIT`: messages of the unit (`_SYSTEMD_UNIT=UNIT`), coredumps of it
//!   (`MESSAGE_ID=fc2e22bc6ee647b6b90729ab34a250b1`, `_UID=0`, `COREDUMP_UNIT=UNIT`), PID 1 about
//!   it (`_PID=1`, `UNIT=UNIT`), authorised daemons about it (`_UID=0`,
//!   `OBJECT_SYSTEMD_UNIT=UNIT`) and, for a slice, everything in it (`_SYSTEMD_SLICE=UNIT`). A
//!   name without a unit suffix gets `.service`; a name with `*`, `?` or `[` is a pattern,
//!   matched against the unit names the journal holds.
//! - `-p N` (or a name, or `FROM..TO`): `PRIORITY=` one of the levels in the range.
//! - `-b BOOT`: `_BOOT_ID=BOOT`.
//!
//! Entries list their data objects by offset, so each file is prepared once: the data objects
//! of the few fields that matter are found through the file's field table and classified, and
//! an entry is then judged by the offsets it lists, without reading its data.

use std::collections::HashMap;

use crate::journal::{Id128, JournalFile, PageCache};
use crate::problems::Problems;

/// systemd-coredump's MESSAGE_ID.
const COREDUMP_MESSAGE_ID: &[u8] = b"fc2e22bc6ee647b6b90729ab34a250b1";
/// Unit types journalctl recognises as a suffix; another name gets `.service`.
const UNIT_SUFFIXES: &[&str] = &[
    ".service",
    ".socket",
    ".target",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".timer",
    ".path",
    ".slice",
    ".scope",
];
/// Longest value read when classifying (unit names, ids and numbers are short).
const VALUE_LIMIT: usize = 4096;

/// What an entry's data objects say, one bit per condition.
mod bit {
    pub const UNIT: u16 = 1 << 0;
    pub const COREDUMP_MESSAGE: u16 = 1 << 1;
    pub const UID_ROOT: u16 = 1 << 2;
    pub const COREDUMP_UNIT: u16 = 1 << 3;
    pub const PID_ONE: u16 = 1 << 4;
    pub const PID_ONE_UNIT: u16 = 1 << 5;
    pub const OBJECT_UNIT: u16 = 1 << 6;
    pub const SLICE: u16 = 1 << 7;
    pub const PRIORITY: u16 = 1 << 8;
    pub const BOOT: u16 = 1 << 9;
}

/// The fields whose values a filter looks at.
const FIELDS: &[&str] = &[
    "_SYSTEMD_UNIT",
    "MESSAGE_ID",
    "_UID",
    "COREDUMP_UNIT",
    "_PID",
    "UNIT",
    "OBJECT_SYSTEMD_UNIT",
    "_SYSTEMD_SLICE",
    "PRIORITY",
    "_BOOT_ID",
];

/// A unit as given with `units`, after journalctl's name mangling.
#[derive(Debug, Clone)]
enum UnitPattern {
    Exact(String),
    Glob(glob::Pattern),
}

impl UnitPattern {
    fn matches(&self, value: &[u8]) -> bool {
        match self {
            UnitPattern::Exact(name) => name.as_bytes() == value,
            UnitPattern::Glob(pattern) => {
                std::str::from_utf8(value).is_ok_and(|value| pattern.matches(value))
            }
        }
    }
}

/// The matches of one run.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    units: Vec<UnitPattern>,
    /// `PRIORITY` values kept, as the digits `0` to `7`.
    priorities: Option<Vec<u8>>,
    boot: Option<Id128>,
}

impl Filter {
    /// `units` as journalctl takes `-u`; `priorities` an inclusive range of levels.
    pub fn new(
        units: &[String],
        priorities: Option<(u8, u8)>,
        boot: Option<Id128>,
    ) -> Result<Filter, String> {
        let units = units
            .iter()
            .map(|unit| mangle_unit(unit))
            .collect::<Result<_, _>>()?;
        Ok(Filter {
            units,
            priorities: priorities
                .map(|(from, to)| (from..=to).map(|level| b'0' + level).collect()),
            boot,
        })
    }

    /// Whether every entry passes.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty() && self.priorities.is_none() && self.boot.is_none()
    }

    /// Classifies the data objects of `file` that this filter looks at.
    pub fn prepare(
        &self,
        file: &JournalFile,
        cache: &mut PageCache,
        problems: &mut Problems,
    ) -> Classifier {
        let mut classifier = Classifier::default();
        let wanted: Vec<&str> = FIELDS
            .iter()
            .copied()
            .filter(|field| self.looks_at(field))
            .collect();
        let heads = match file.field_heads(cache, &wanted) {
            Ok(heads) => heads,
            Err(e) => {
                problems.warn(
                    &file.path,
                    format!("cannot read its table of fields ({e}); no entry of it matches"),
                );
                return classifier;
            }
        };
        let mut value = Vec::new();
        for (index, head) in heads {
            let field = wanted[index];
            let mut offset = Some(head);
            let mut steps = file.chain_budget();
            while let Some(at) = offset {
                steps = match steps.checked_sub(1) {
                    Some(steps) => steps,
                    None => {
                        problems.warn(&file.path, format!("the list of {field} values loops"));
                        break;
                    }
                };
                value.clear();
                let read = file.read_data(cache, at, &mut value, VALUE_LIMIT);
                let next = file.next_data_of_field(cache, at);
                match (read, next) {
                    (Ok(payload), Ok(next)) => {
                        let bits = if payload.truncated {
                            0
                        } else {
                            value
                                .strip_prefix(field.as_bytes())
                                .and_then(|rest| rest.strip_prefix(b"="))
                                .map_or(0, |value| self.classify(field, value))
                        };
                        if bits != 0 {
                            *classifier.bits.entry(at).or_default() |= bits;
                        }
                        offset = next;
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        problems.warn(
                            &file.path,
                            format!("cannot read all {field} values ({e}); entries with the rest do not match"),
                        );
                        break;
                    }
                }
            }
        }
        classifier
    }

    fn looks_at(&self, field: &str) -> bool {
        match field {
            "PRIORITY" => self.priorities.is_some(),
            "_BOOT_ID" => self.boot.is_some(),
            _ => !self.units.is_empty(),
        }
    }

    /// The bits a `field=value` data object sets.
    fn classify(&self, field: &str, value: &[u8]) -> u16 {
        let unit = || self.units.iter().any(|pattern| pattern.matches(value));
        let set = |condition: bool, bit: u16| if condition { bit } else { 0 };
        match field {
            "_SYSTEMD_UNIT" => set(unit(), bit::UNIT),
            "MESSAGE_ID" => set(value == COREDUMP_MESSAGE_ID, bit::COREDUMP_MESSAGE),
            "_UID" => set(value == b"0", bit::UID_ROOT),
            "COREDUMP_UNIT" => set(unit(), bit::COREDUMP_UNIT),
            "_PID" => set(value == b"1", bit::PID_ONE),
            "UNIT" => set(unit(), bit::PID_ONE_UNIT),
            "OBJECT_SYSTEMD_UNIT" => set(unit(), bit::OBJECT_UNIT),
            "_SYSTEMD_SLICE" => set(value.ends_with(b".slice") && unit(), bit::SLICE),
            "PRIORITY" => set(
                self.priorities
                    .as_ref()
                    .is_some_and(|levels| value.len() == 1 && levels.contains(&value[0])),
                bit::PRIORITY,
            ),
            "_BOOT_ID" => {
                let mut hex = Vec::with_capacity(32);
                if let Some(boot) = &self.boot {
                    boot.write_hex(&mut hex);
                }
                set(value == hex.as_slice(), bit::BOOT)
            }
            _ => 0,
        }
    }

    /// Whether an entry whose data objects set `bits` passes.
    pub fn accepts(&self, bits: u16) -> bool {
        let all = |mask: u16| bits & mask == mask;
        let unit_ok = self.units.is_empty()
            || all(bit::UNIT)
            || all(bit::COREDUMP_MESSAGE | bit::UID_ROOT | bit::COREDUMP_UNIT)
            || all(bit::PID_ONE | bit::PID_ONE_UNIT)
            || all(bit::UID_ROOT | bit::OBJECT_UNIT)
            || all(bit::SLICE);
        unit_ok
            && (self.priorities.is_none() || all(bit::PRIORITY))
            && (self.boot.is_none() || all(bit::BOOT))
    }
}

/// The classified data objects of one file.
#[derive(Default)]
pub struct Classifier {
    bits: HashMap<u64, u16>,
}

impl Classifier {
    /// The bits set by an entry's data objects.
    pub fn bits(&self, items: &[u64]) -> u16 {
        items
            .iter()
            .filter_map(|item| self.bits.get(item))
            .fold(0, |bits, more| bits | more)
    }
}

/// journalctl's unit name mangling for `-u`, the common cases: a pattern stays a pattern, a
/// name with a unit suffix stays, any other name gets `.service`.
fn mangle_unit(unit: &str) -> Result<UnitPattern, String> {
    let unit = unit.trim();
    if unit.is_empty() {
        return Err("an empty unit name".into());
    }
    if unit.contains(['*', '?', '[']) {
        return glob::Pattern::new(unit)
            .map(UnitPattern::Glob)
            .map_err(|e| format!("unit pattern {unit:?} is not a valid pattern: {e}"));
    }
    if UNIT_SUFFIXES
        .iter()
        .any(|suffix| unit.ends_with(suffix) && unit.len() > suffix.len())
    {
        Ok(UnitPattern::Exact(unit.to_owned()))
    } else {
        Ok(UnitPattern::Exact(format!("{unit}.service")))
    }
}

/// Parses journalctl's `-p` argument: a level (`0`-`7` or `emerg` ... `debug`) meaning that
/// level and everything more severe, or a range `FROM..TO` (either way round).
pub fn parse_priority(text: &str) -> Result<(u8, u8), String> {
    let level = |name: &str| -> Result<u8, String> {
        const NAMES: &[&str] = &[
            "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
        ];
        let name = name.trim();
        name.parse::<u8>()
            .ok()
            .filter(|n| *n <= 7)
            .or_else(|| NAMES.iter().position(|n| *n == name).map(|n| n as u8))
            .ok_or_else(|| {
                format!(
                    "priority {name:?} is not a level: use 0-7 or emerg, alert, crit, err, \
                     warning, notice, info, debug"
                )
            })
    };
    match text.split_once("..") {
        Some((from, to)) => {
            let (from, to) = (level(from)?, level(to)?);
            Ok((from.min(to), from.max(to)))
        }
        None => Ok((0, level(text)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(units: &[&str], priorities: Option<(u8, u8)>) -> Filter {
        let units: Vec<String> = units.iter().map(|u| u.to_string()).collect();
        Filter::new(&units, priorities, None).unwrap()
    }

    #[test]
    fn units_are_mangled_as_journalctl_does() {
        let f = filter(&["sshd", "cron.service", "data.mount", "user-*"], None);
        assert_eq!(f.classify("_SYSTEMD_UNIT", b"sshd.service"), bit::UNIT);
        assert_eq!(f.classify("_SYSTEMD_UNIT", b"sshd"), 0);
        assert_eq!(f.classify("_SYSTEMD_UNIT", b"cron.service"), bit::UNIT);
        assert_eq!(f.classify("_SYSTEMD_UNIT", b"data.mount"), bit::UNIT);
        assert_eq!(f.classify("_SYSTEMD_UNIT", b"user-1000.slice"), bit::UNIT);
        assert_eq!(f.classify("_SYSTEMD_SLICE", b"user-1000.slice"), bit::SLICE);
        assert_eq!(f.classify("_SYSTEMD_SLICE", b"user-x"), 0);
        assert!(mangle_unit("bad[").is_err());
        assert!(mangle_unit(" ").is_err());
    }

    #[test]
    fn unit_matches_combine_as_journalctl_combines_them() {
        let f = filter(&["a.service"], None);
        assert!(f.accepts(bit::UNIT));
        assert!(f.accepts(bit::COREDUMP_MESSAGE | bit::UID_ROOT | bit::COREDUMP_UNIT));
        assert!(!f.accepts(bit::COREDUMP_MESSAGE | bit::COREDUMP_UNIT));
        assert!(f.accepts(bit::PID_ONE | bit::PID_ONE_UNIT));
        assert!(!f.accepts(bit::PID_ONE_UNIT));
        assert!(f.accepts(bit::UID_ROOT | bit::OBJECT_UNIT));
        assert!(!f.accepts(bit::OBJECT_UNIT));
        assert!(!f.accepts(0));
        assert!(filter(&[], None).accepts(0));
    }

    #[test]
    fn priorities_and_units_must_both_hold() {
        let f = filter(&["a"], Some((0, 3)));
        assert_eq!(f.classify("PRIORITY", b"3"), bit::PRIORITY);
        assert_eq!(f.classify("PRIORITY", b"4"), 0);
        assert_eq!(f.classify("PRIORITY", b"03"), 0);
        assert!(f.accepts(bit::UNIT | bit::PRIORITY));
        assert!(!f.accepts(bit::UNIT));
        assert!(!f.accepts(bit::PRIORITY));
    }

    #[test]
    fn boot_matches_its_id() {
        let id = Id128([0x5a; 16]);
        let f = Filter::new(&[], None, Some(id)).unwrap();
        assert_eq!(
            f.classify("_BOOT_ID", "5a".repeat(16).as_bytes()),
            bit::BOOT
        );
        assert_eq!(f.classify("_BOOT_ID", "5b".repeat(16).as_bytes()), 0);
        assert!(!f.accepts(0));
    }

    #[test]
    fn priority_levels_names_and_ranges() {
        assert_eq!(parse_priority("3"), Ok((0, 3)));
        assert_eq!(parse_priority("err"), Ok((0, 3)));
        assert_eq!(parse_priority("warning..info"), Ok((4, 6)));
        assert_eq!(parse_priority("5..2"), Ok((2, 5)));
        assert!(parse_priority("2..").is_err());
        assert!(parse_priority("8").is_err());
        assert!(parse_priority("loud").is_err());
    }
}
