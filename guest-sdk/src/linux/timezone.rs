//! The host's local time zone: `/etc/localtime` (a TZif file, usually a symlink into
//! `/usr/share/zoneinfo`), as glibc reads it.

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

/// Reads `/etc/localtime` (needs `/etc` and, when it is a symlink, `/usr/share/zoneinfo`).
/// A host without it runs in UTC, as glibc does.
///
/// The sandbox refuses to follow or even read an absolute symlink, and `/etc/localtime` often
/// is one; then the zone named in `/etc/timezone` (Debian, Ubuntu) is read from
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
}
