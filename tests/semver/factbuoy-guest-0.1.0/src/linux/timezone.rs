//! The local time zone as glibc picks it: the `TZ` variable when set, else `/etc/localtime` (a
//! TZif file, usually a symlink into `/usr/share/zoneinfo`).

use std::io;

use crate::hostfs::HostFs;

pub use tz::{DateTime, TimeZone};

/// The zone glibc uses when the `TZ` variable is unset.
pub const LOCALTIME: &str = "/etc/localtime";

/// The host's local time zone.
#[derive(Debug, Clone)]
pub struct LocalZone {
    /// The IANA name, for example `Europe/Paris`, when the host records it (the symlink's target
    /// below `zoneinfo/`, or `/etc/timezone`).
    pub name: Option<String>,
    pub zone: TimeZone,
}

/// The zone of a process whose `TZ` variable is `tz` (`None`: unset), by glibc's rules, which
/// Python's `time` and so Ansible's `date_time` follow: unset, `/etc/localtime`
/// ([`read_local`]); empty, UTC; `:NAME` or `NAME`, the TZif file `NAME` (absolute, or below
/// `/usr/share/zoneinfo`); otherwise a POSIX rule such as `CET-1CEST,M3.5.0,M10.5.0/3`.
/// Zone files are read below the host root like every other file.
pub fn read_for_process(fs: &HostFs, tz: Option<&str>) -> io::Result<LocalZone> {
    let Some(tz) = tz else {
        return read_local(fs);
    };
    let spec = tz.strip_prefix(':').unwrap_or(tz);
    if spec.is_empty() {
        return Ok(LocalZone {
            name: Some("UTC".into()),
            zone: utc(),
        });
    }
    let (file, name) = match spec.strip_prefix('/') {
        Some(_) => (
            spec.to_owned(),
            spec.split_once("zoneinfo/")
                .map(|(_, name)| name.trim_start_matches("posix/").to_owned()),
        ),
        None => (format!("{ZONEINFO}/{spec}"), Some(spec.to_owned())),
    };
    let not_valid = |e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("TZ={tz}: {file} is not a valid TZif file: {e}"),
        )
    };
    match fs.read(&file) {
        Ok(data) => {
            let zone = TimeZone::from_tz_data(&data).map_err(|e| not_valid(&e))?;
            Ok(LocalZone { name, zone })
        }
        // glibc then reads the value as a rule; a rule has no IANA name.
        Err(e) if e.kind() == io::ErrorKind::NotFound && !spec.starts_with('/') => {
            let no_files =
                tz::timezone::TimeZoneSettings::new(&[], |_| Err("no zone files".into()));
            let zone = no_files.parse_posix_tz(spec).map_err(|rule_error| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "TZ={tz}: neither a zone in {ZONEINFO} nor a POSIX rule ({rule_error})"
                    ),
                )
            })?;
            Ok(LocalZone { name: None, zone })
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("TZ={tz}: {e}"))),
    }
}

/// Reads `/etc/localtime` (needs `/etc` and, when it is a symlink, `/usr/share/zoneinfo`).
/// A host without it runs in UTC, as glibc does. When the file cannot be read (its target not
/// granted, say), the zone named in `/etc/timezone` (Debian, Ubuntu) is read from
/// `/usr/share/zoneinfo` instead.
pub fn read_local(fs: &HostFs) -> io::Result<LocalZone> {
    let name = zone_name(fs);
    let data = match fs.read(LOCALTIME) {
        Ok(data) => data,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(LocalZone {
                name: Some("UTC".into()),
                zone: utc(),
            });
        }
        Err(e) => match &name {
            Some(zone) => fs.read(&format!("{ZONEINFO}/{zone}"))?,
            None => return Err(e),
        },
    };
    let zone = TimeZone::from_tz_data(&data).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{LOCALTIME} is not a valid TZif file: {e}"),
        )
    })?;
    Ok(LocalZone { name, zone })
}

/// Where the zone files live.
pub const ZONEINFO: &str = "/usr/share/zoneinfo";

/// UTC named `UTC`, as glibc names it when no zone is configured (tz-rs's own UTC has no
/// abbreviation).
pub fn utc() -> TimeZone {
    let named = tz::timezone::LocalTimeType::new(0, false, Some(b"UTC"))
        .ok()
        .and_then(|utc| TimeZone::new(Vec::new(), vec![utc], Vec::new(), None).ok());
    named.unwrap_or_else(TimeZone::utc)
}

/// The IANA name of the local zone, from the symlink or `/etc/timezone` (Debian).
fn zone_name(fs: &HostFs) -> Option<String> {
    let from_link = fs.read_link(LOCALTIME).ok().and_then(|target| {
        target
            .split_once("zoneinfo/")
            .map(|(_, name)| name.trim_start_matches("posix/").to_owned())
    });
    from_link.or_else(|| {
        fs.read_optional("/etc/timezone")
            .filter(|n| !n.is_empty() && !n.contains(".."))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_localtime_is_utc_and_bad_data_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::with_root(dir.path());
        let zone = read_local(&fs).unwrap();
        assert_eq!(zone.name.as_deref(), Some("UTC"));
        let now = zone.zone.find_local_time_type(0).unwrap();
        assert_eq!(now.time_zone_designation(), "UTC");
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/localtime"), b"not a zone").unwrap();
        let e = read_local(&fs).unwrap_err();
        assert!(e.to_string().contains("not a valid TZif file"), "{e}");
    }

    #[test]
    fn reads_the_zone_through_a_symlink() {
        let data = include_bytes!("../../testdata/zoneinfo/Europe/Paris");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("usr/share/zoneinfo/Europe")).unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("usr/share/zoneinfo/Europe/Paris"), data).unwrap();
        std::os::unix::fs::symlink(
            "/usr/share/zoneinfo/Europe/Paris",
            dir.path().join("etc/localtime"),
        )
        .unwrap();
        let zone = read_local(&HostFs::with_root(dir.path())).unwrap();
        assert_eq!(zone.name.as_deref(), Some("Europe/Paris"));
        // 2024-07-01T00:00:00Z is summer time in Paris.
        let summer = zone.zone.find_local_time_type(1_719_792_000).unwrap();
        assert_eq!(summer.ut_offset(), 7200);
        assert_eq!(summer.time_zone_designation(), "CEST");
    }

    #[test]
    fn the_tz_variable_comes_first_as_in_glibc() {
        let data = include_bytes!("../../testdata/zoneinfo/Europe/Paris");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("usr/share/zoneinfo/Europe")).unwrap();
        std::fs::write(dir.path().join("usr/share/zoneinfo/Europe/Paris"), data).unwrap();
        let fs = HostFs::with_root(dir.path());
        let winter = 1_705_320_000; // 2024-01-15T12:00:00Z
        let at = |zone: &LocalZone| {
            let t = zone.zone.find_local_time_type(winter).unwrap();
            (t.ut_offset(), t.time_zone_designation().to_owned())
        };
        for tz in [
            "Europe/Paris",
            ":Europe/Paris",
            "/usr/share/zoneinfo/Europe/Paris",
        ] {
            let zone = read_for_process(&fs, Some(tz)).unwrap();
            assert_eq!(zone.name.as_deref(), Some("Europe/Paris"), "{tz}");
            assert_eq!(at(&zone), (3600, "CET".to_owned()), "{tz}");
        }
        let rule = read_for_process(&fs, Some("EST5EDT,M3.2.0,M11.1.0")).unwrap();
        assert_eq!(at(&rule).0, -5 * 3600);
        assert!(rule.name.is_none());
        let empty = read_for_process(&fs, Some("")).unwrap();
        assert_eq!(at(&empty), (0, "UTC".to_owned()));
        // Unset: /etc/localtime, absent here, so UTC.
        assert_eq!(
            read_for_process(&fs, None).unwrap().name.as_deref(),
            Some("UTC")
        );
        let e = read_for_process(&fs, Some("Mars/Olympus")).unwrap_err();
        assert!(e.to_string().contains("neither a zone"), "{e}");
    }
}
