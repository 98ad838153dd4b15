//! `date_time`: the current time in the local zone (the factbuoy process's `TZ`, else the
//! host's `/etc/localtime`, as for Ansible's Python), in the forms Ansible's strftime calls
//! produce.

use std::time::{SystemTime, UNIX_EPOCH};

use factbuoy_guest::host_info;
use factbuoy_guest::linux::timezone::{self, DateTime, TimeZone};
use serde_json::{Map, Value};

use crate::ctx::Ctx;

const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

pub fn collect(ctx: &mut Ctx) {
    let zone = match timezone::read_for_process(&ctx.fs, host_info::tz_variable().as_deref()) {
        Ok(local) => local.zone,
        Err(e) => {
            ctx.warn(format!("date_time: {e}; using UTC"));
            timezone::utc()
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    match date_time_facts(&zone, now.as_secs() as i64, now.subsec_micros()) {
        Some(facts) => ctx.set("date_time", facts),
        None => ctx.warn("date_time: the clock is outside what the time zone data covers"),
    }
}

fn date_time_facts(zone: &TimeZone, epoch: i64, micros: u32) -> Option<Map<String, Value>> {
    let local = DateTime::from_timespec(epoch, micros * 1000, zone.as_ref()).ok()?;
    let utc = DateTime::from_timespec(epoch, micros * 1000, TimeZone::utc().as_ref()).ok()?;
    let (year, month, day) = (local.year(), local.month(), local.month_day());
    let (hour, minute, second) = (local.hour(), local.minute(), local.second());
    let wday = u32::from(local.week_day());
    let yday = u32::from(local.year_day());
    // %W: weeks starting on Monday; days before the first Monday are week 0.
    let week_number = (yday + 7 - (wday + 6) % 7) / 7;
    let offset = local.local_time_type().ut_offset();
    let sign = if offset < 0 { '-' } else { '+' };
    let offset_minutes = offset.unsigned_abs() / 60;
    let utc_stamp = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        utc.year(),
        utc.month(),
        utc.month_day(),
        utc.hour(),
        utc.minute(),
        utc.second()
    );
    let basic_short = format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}");
    let facts = [
        ("year", format!("{year:04}")),
        ("month", format!("{month:02}")),
        ("weekday", WEEKDAYS[(wday % 7) as usize].to_owned()),
        ("weekday_number", wday.to_string()),
        ("weeknumber", format!("{week_number:02}")),
        ("day", format!("{day:02}")),
        ("hour", format!("{hour:02}")),
        ("minute", format!("{minute:02}")),
        ("second", format!("{second:02}")),
        ("epoch", epoch.to_string()),
        ("epoch_int", epoch.to_string()),
        ("date", format!("{year:04}-{month:02}-{day:02}")),
        ("time", format!("{hour:02}:{minute:02}:{second:02}")),
        ("iso8601_micro", format!("{utc_stamp}.{micros:06}Z")),
        ("iso8601", format!("{utc_stamp}Z")),
        ("iso8601_basic", format!("{basic_short}{micros:06}")),
        ("iso8601_basic_short", basic_short),
        (
            "tz",
            local.local_time_type().time_zone_designation().to_owned(),
        ),
        ("tz_dst", dst_name(zone, epoch)),
        (
            "tz_offset",
            format!("{sign}{:02}{:02}", offset_minutes / 60, offset_minutes % 60),
        ),
    ];
    Some(
        facts
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into()))
            .collect(),
    )
}

/// Python's `time.tzname[1]` on glibc: the zone names at the start and the middle of this
/// year; the summer one is the daylight-saving name (southern zones swap them).
fn dst_name(zone: &TimeZone, epoch: i64) -> String {
    const YEAR: i64 = (365 * 24 + 6) * 3600;
    let january = (epoch / YEAR) * YEAR;
    let july = january + YEAR / 2;
    let probe = |t: i64| {
        zone.find_local_time_type(t)
            .map(|lt| (lt.ut_offset(), lt.time_zone_designation().to_owned()))
            .unwrap_or((0, "UTC".into()))
    };
    let ((jan_offset, jan_name), (jul_offset, jul_name)) = (probe(january), probe(july));
    // CPython compares the zones as seconds west of UTC.
    if -jan_offset < -jul_offset {
        jan_name
    } else {
        jul_name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_python_strftime() {
        // 2026-11-20T22:20:39.682149Z, a Friday in week 46.
        let facts = date_time_facts(&timezone::utc(), 1_795_213_239, 682_149).unwrap();
        assert_eq!(facts["date"], "2026-11-20");
        assert_eq!(facts["weekday"], "Friday");
        assert_eq!(facts["weekday_number"], "5");
        assert_eq!(facts["weeknumber"], "46");
        assert_eq!(facts["iso8601_micro"], "2026-11-20T22:20:39.682149Z");
        assert_eq!(facts["iso8601_basic"], "20261120T222039682149");
        assert_eq!(facts["tz"], "UTC");
        assert_eq!(facts["tz_dst"], "UTC");
        assert_eq!(facts["tz_offset"], "+0000");
    }

    #[test]
    fn daylight_saving_names_and_offsets() {
        let paris = TimeZone::from_tz_data(include_bytes!(
            "../../../../guest-sdk/testdata/zoneinfo/Europe/Paris"
        ))
        .unwrap();
        // 2024-01-15T12:00:00Z: winter in Paris.
        let facts = date_time_facts(&paris, 1_705_320_000, 0).unwrap();
        assert_eq!(facts["tz"], "CET");
        assert_eq!(facts["tz_dst"], "CEST");
        assert_eq!(facts["tz_offset"], "+0100");
        assert_eq!(facts["hour"], "13");
    }
}
